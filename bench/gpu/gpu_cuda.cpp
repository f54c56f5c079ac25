// dsbench gpu's CUDA measurer (bench/gpu/gpu.h). Compiled in every build; its body only with CUDA.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "bench/gpu/gpu.h"
#include "engine/common/error.h"
#include "engine/host/resources.h"

#if DS_WITH_CUDA
#include <cuda_runtime.h>

#include "bench/gpu/gpu_copy_kernel.h"
#endif

namespace ds::bench::gpu {

#if DS_WITH_CUDA
namespace {

using report::CopyMethod;
using report::CopyPath;

std::string errorText(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw BackendError(fmt::format("CUDA error in {}: {}", what, errorText(e)));
}

std::string versionText(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : ""; }

class CudaCopyMeasurer : public CopyMeasurer {
 public:
  ~CudaCopyMeasurer() override {
    for (auto& [device, b] : devices_) {
      cudaSetDevice(device);
      if (b.stream != nullptr) cudaStreamDestroy(b.stream);
      if (b.a != nullptr) cudaFree(b.a);
      if (b.b != nullptr) cudaFree(b.b);
    }
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    std::free(pageable_);
  }

  int deviceCount() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw BackendError(fmt::format(
          "cudaGetDeviceCount failed with {}. Is the NVIDIA driver loaded and a GPU visible to this process "
          "(CUDA_VISIBLE_DEVICES {})? `dsdiag` says which.",
          errorText(e), visible != nullptr ? fmt::format("= '{}'", visible) : "unset"));
    }
    return n;
  }

  report::GpuCopyDevice describe(int device) override {
    report::GpuCopyDevice d;
    d.index = device;
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    d.name = p.name;
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus - 1, device) == cudaSuccess) {
      d.busId = bus;
      std::transform(d.busId.begin(), d.busId.end(), d.busId.begin(),
                     [](unsigned char c) { return std::tolower(c); });
    }
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
      d.memClockMHz = v / 1000;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
      d.memBusWidthBits = v;
    return d;
  }

  bool enablePeer(int a, int b, std::string& why) override {
    int ab = 0, ba = 0;
    check(cudaDeviceCanAccessPeer(&ab, a, b), "cudaDeviceCanAccessPeer");
    check(cudaDeviceCanAccessPeer(&ba, b, a), "cudaDeviceCanAccessPeer");
    if (ab == 0 || ba == 0) {
      why = fmt::format("cudaDeviceCanAccessPeer says GPU {} cannot reach GPU {} (no P2P path between them)",
                        ab == 0 ? a : b, ab == 0 ? b : a);
      return false;
    }
    for (auto [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
      check(cudaSetDevice(from), "cudaSetDevice");
      const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // clears it
      } else if (e != cudaSuccess) {
        cudaGetLastError();
        why = fmt::format("cudaDeviceEnablePeerAccess from GPU {} to GPU {} failed with {}", from, to,
                          errorText(e));
        return false;
      }
    }
    return true;
  }

  std::vector<double> time(const report::GpuCopyRow& row, int warmup, int iters) override {
    const std::size_t bytes = row.bytes;
    Buffers& mine = buffers(row.device, bytes);
    Buffers* peer = row.peer >= 0 ? &buffers(row.peer, bytes) : nullptr;
    check(cudaSetDevice(row.device), "cudaSetDevice");
    void* host = nullptr;
    if (row.path == CopyPath::kHostToDevice || row.path == CopyPath::kDeviceToHost)
      host = row.pageable                        ? pageableBuffer(bytes)
             : row.method == CopyMethod::kKernel ? pinnedBuffer(bytes).device
                                                 : pinnedBuffer(bytes).host;
    void* dst = nullptr;
    const void* src = nullptr;
    switch (row.path) {
      case CopyPath::kHostToDevice:
        dst = mine.a;
        src = host;
        break;
      case CopyPath::kDeviceToHost:
        dst = host;
        src = mine.a;
        break;
      case CopyPath::kDeviceLocal:
        dst = mine.b;
        src = mine.a;
        break;
      case CopyPath::kPeerRead:
        dst = mine.a;
        src = peer->b;
        break;  // the peer's memory into ours
      case CopyPath::kPeerWrite:
        dst = peer->a;
        src = mine.b;
        break;  // ours into the peer's
    }
    cudaStream_t stream = mine.stream;
    auto copy = [&] {
      if (row.method == CopyMethod::kKernel) {
        check(static_cast<cudaError_t>(detail::launchCopyKernel(dst, src, bytes, stream)),
              "the copy kernel's launch");
      } else {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
      }
    };
    for (int i = 0; i < warmup; ++i) copy();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after the warm-up");
    std::vector<double> us;
    if (row.pageable) {
      // The driver stages pageable memory through a pinned buffer with the CPU: the host's clock sees
      // that work, the stream's events may not.
      for (int i = 0; i < iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        copy();
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      return us;
    }
    std::vector<cudaEvent_t> events(2 * static_cast<std::size_t>(iters), nullptr);
    for (auto& e : events) check(cudaEventCreate(&e), "cudaEventCreate");
    auto destroy = [&] {
      for (auto& e : events)
        if (e != nullptr) cudaEventDestroy(e);
    };
    try {
      for (int i = 0; i < iters; ++i) {
        check(cudaEventRecord(events[2 * i], stream), "cudaEventRecord");
        copy();
        check(cudaEventRecord(events[2 * i + 1], stream), "cudaEventRecord");
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      for (int i = 0; i < iters; ++i) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
        us.push_back(static_cast<double>(ms) * 1e3);
      }
    } catch (...) {
      destroy();
      throw;
    }
    destroy();
    return us;
  }

  std::string runtimeVersion() override {
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? versionText(v) : "";
  }
  std::string driverVersion() override {
    int v = 0;
    return cudaDriverGetVersion(&v) == cudaSuccess ? versionText(v) : "";
  }

 private:
  struct Buffers {
    void* a = nullptr;
    void* b = nullptr;
    cudaStream_t stream = nullptr;
  };

  // Two device buffers and a non-blocking stream per GPU, made on first use and kept for every row.
  Buffers& buffers(int device, std::size_t bytes) {
    Buffers& b = devices_[device];
    if (b.a != nullptr) return b;
    check(cudaSetDevice(device), "cudaSetDevice");
    std::size_t freeBytes = 0, total = 0;
    check(cudaMemGetInfo(&freeBytes, &total), "cudaMemGetInfo");
    if (freeBytes < 2 * bytes + (64ULL << 20)) {
      throw ConfigError(
          fmt::format("dsbench gpu needs two buffers of {} bytes on GPU {}, but it has {:.1f} GiB free of "
                      "{:.1f} GiB; lower --size",
                      bytes, device, static_cast<double>(freeBytes) / (1ULL << 30),
                      static_cast<double>(total) / (1ULL << 30)));
    }
    check(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaMalloc(&b.a, bytes), "cudaMalloc");
    check(cudaMalloc(&b.b, bytes), "cudaMalloc");
    check(cudaMemset(b.a, 1, bytes), "cudaMemset");
    check(cudaMemset(b.b, 2, bytes), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return b;
  }

  void checkHost(std::size_t bytes, const char* what) {
    sys::checkMemory(static_cast<double>(bytes), sys::readMemoryInfo(), what, "lower --size");
  }

  // Pinned, portable (every GPU's copies treat it as pinned) and mapped (the kernel rows read and
  // write it directly).
  struct Pinned {
    void* host;
    void* device;  // the same address under UVA (every 64-bit CUDA platform), as CUDA tells it
  };
  Pinned pinnedBuffer(std::size_t bytes) {
    if (pinned_ == nullptr) {
      checkHost(bytes, "dsbench gpu's pinned host buffer");
      check(cudaHostAlloc(&pinned_, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
      std::memset(pinned_, 3, bytes);
      check(cudaHostGetDevicePointer(&pinnedDevice_, pinned_, 0), "cudaHostGetDevicePointer");
    }
    return Pinned{pinned_, pinnedDevice_};
  }

  // malloc'd and touched once, so that first-touch page faults stay out of the timed copies.
  void* pageableBuffer(std::size_t bytes) {
    if (pageable_ == nullptr) {
      checkHost(bytes, "dsbench gpu's pageable host buffer");
      pageable_ = std::malloc(bytes);
      if (pageable_ == nullptr) throw std::bad_alloc();
      std::memset(pageable_, 4, bytes);
    }
    return pageable_;
  }

  std::map<int, Buffers> devices_;
  void* pinned_ = nullptr;
  void* pinnedDevice_ = nullptr;
  void* pageable_ = nullptr;
};

}  // namespace

std::unique_ptr<CopyMeasurer> makeCudaCopyMeasurer() { return std::make_unique<CudaCopyMeasurer>(); }

#else

std::unique_ptr<CopyMeasurer> makeCudaCopyMeasurer() { return nullptr; }

#endif

}  // namespace ds::bench::gpu
