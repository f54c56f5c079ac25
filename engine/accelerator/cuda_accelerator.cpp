// CUDA accelerator. Linked against the static CUDA runtime, which loads libcuda.so at run time, so
// a binary built with CUDA still starts (and reports "no usable device") on a node without a driver.
#include "engine/accelerator/accelerator.h"
#include "engine/common/backends.h"
#include "engine/common/error.h"

#if DS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ds::accel {

#if DS_WITH_CUDA
namespace {

class CudaAccelerator final : public Accelerator {
 public:
  explicit CudaAccelerator(int count) : count_(count) {}
  std::string name() const override { return "cuda"; }
  std::string communicationBackendName() const override { return defaultBackendFor("cuda"); }
  int deviceCount() const override { return count_; }
  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (int i = 0; i < count_; ++i) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
      char bus[32] = {};
      cudaDeviceGetPCIBusId(bus, sizeof(bus), i);
      out.push_back({i, prop.name, prop.totalGlobalMem, bus});
    }
    return out;
  }
  void setDevice(int index) override {
    if (index < 0 || index >= count_) {
      throw ConfigError(
          fmt::format("cannot use CUDA device {}: invalid device ordinal, only {} device(s) are "
                      "visible (CUDA_VISIBLE_DEVICES and LOCAL_RANK decide which). Start at most {} "
                      "ranks per node, or fix CUDA_VISIBLE_DEVICES.",
                      index, count_, count_));
    }
    cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) {
      throw BackendError(fmt::format("cudaSetDevice({}) failed: {}", index, cudaGetErrorString(err)));
    }
  }

 private:
  int count_;
};

}  // namespace

std::unique_ptr<Accelerator> tryMakeCudaAccelerator(std::string& why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    why =
        fmt::format("CUDA reports no usable device: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    return nullptr;
  }
  if (count == 0) {
    why = "CUDA reports 0 devices (check CUDA_VISIBLE_DEVICES and nvidia-smi)";
    return nullptr;
  }
  return std::make_unique<CudaAccelerator>(count);
}
#else
std::unique_ptr<Accelerator> tryMakeCudaAccelerator(std::string& why) {
  why =
      "this dsperf was built without CUDA (rebuild with -DDS_WITH_CUDA=ON where the CUDA toolkit is "
      "installed)";
  return nullptr;
}
#endif

}  // namespace ds::accel
