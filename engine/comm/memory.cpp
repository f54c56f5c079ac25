#include "engine/comm/memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/common/error.h"

#if DS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ds::comm {

namespace {

constexpr std::size_t kHostAlignment = 64;

class HostMemory : public Memory {
 public:
  Device device() const override { return {}; }
  bool isHost() const override { return true; }
  void* alloc(std::size_t bytes) override {
    // Placed as torch's CPU allocator places a tensor (c10's gAlignment: 64 bytes), since that is
    // the memory users hand to a backend; and touched once, so that page faults stay out of the
    // timed loop. Not page-aligned: glibc puts its own large buffers 16 bytes into a page, and Open
    // MPI's 128 MiB allreduce here ran 30-40% slower from a page-aligned buffer than from one at
    // any other offset tried (docs/dev/benchmarks.md, "Where the tails come from", engine mpi).
    void* p =
        std::aligned_alloc(kHostAlignment, (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment);
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
  explicit CudaMemory(Device d) : device_(d) { cudaCheck(cudaSetDevice(d.index), "cudaSetDevice"); }
  Device device() const override { return device_; }
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
  Device device_;
};
#endif

}  // namespace

std::unique_ptr<Memory> makeMemory(const Device& device) {
  if (device.type == DeviceType::kCpu) return std::make_unique<HostMemory>();
#if DS_WITH_CUDA
  return std::make_unique<CudaMemory>(device);
#else
  throw ConfigError(fmt::format("buffers on {} need a CUDA build of dsperf; this one was built without CUDA.",
                                deviceName(device)));
#endif
}

}  // namespace ds::comm
