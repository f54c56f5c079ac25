#include "bench/coll/memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/common/error.h"

#if DS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ds::bench::coll {

namespace {

class HostMemory : public Memory {
 public:
  comm::Device device() const override { return {}; }
  bool isHost() const override { return true; }
  void* alloc(std::size_t bytes) override {
    // Page-aligned, and touched once, so that page faults stay out of the timed loop.
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    return p;
  }
  void release(void* p) override { std::free(p); }
  void toDevice(void* dst, const void* src, std::size_t bytes) override {
    if (dst != src) std::memcpy(dst, src, bytes);
  }
  void toHost(void* dst, const void* src, std::size_t bytes) override {
    if (dst != src) std::memcpy(dst, src, bytes);
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
};

#if DS_WITH_CUDA
void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw BackendError(fmt::format("CUDA error in {}: {}", what, cudaGetErrorString(e)));
}

class CudaMemory : public Memory {
 public:
  explicit CudaMemory(comm::Device d) : device_(d) { cudaCheck(cudaSetDevice(d.index), "cudaSetDevice"); }
  comm::Device device() const override { return device_; }
  bool isHost() const override { return false; }
  void* alloc(std::size_t bytes) override {
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, bytes), "cudaMalloc");
    cudaCheck(cudaMemset(p, 0, bytes), "cudaMemset");
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void toDevice(void* dst, const void* src, std::size_t bytes) override {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void toHost(void* dst, const void* src, std::size_t bytes) override {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void zero(void* p, std::size_t bytes) override {
    cudaCheck(cudaMemset(p, 0, bytes), "cudaMemset");
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  comm::Device device_;
};
#endif

}  // namespace

std::unique_ptr<Memory> makeMemory(const comm::Device& device) {
  if (device.type == comm::DeviceType::kCpu) return std::make_unique<HostMemory>();
#if DS_WITH_CUDA
  return std::make_unique<CudaMemory>(device);
#else
  throw ConfigError(fmt::format("buffers on {} need a CUDA build of dsperf; this one was built without CUDA.",
                                comm::deviceName(device)));
#endif
}

}  // namespace ds::bench::coll
