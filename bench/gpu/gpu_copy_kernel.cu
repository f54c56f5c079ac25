#include <cuda_runtime.h>

#include <cstdint>

#include "bench/gpu/gpu_copy_kernel.h"

namespace ds::bench::gpu::detail {

namespace {

constexpr int kThreads = 512;

__global__ void copy16(uint4* __restrict__ dst, const uint4* __restrict__ src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four loads issued before their stores keep more bytes in flight per thread than one at a time.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i];
    const uint4 b = src[i + stride];
    const uint4 c = src[i + 2 * stride];
    const uint4 d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void copyTail(unsigned char* dst, const unsigned char* src, std::size_t n) {
  const std::size_t i = threadIdx.x;
  if (i < n) dst[i] = src[i];
}

}  // namespace

int launchCopyKernel(void* dst, const void* src, std::size_t bytes, void* stream) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return static_cast<int>(e);
  int sms = 0;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return static_cast<int>(e);
  int perSm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, copy16, kThreads, 0);
  if (e != cudaSuccess) return static_cast<int>(e);
  const std::size_t whole = bytes / 16;
  const std::size_t tail = bytes % 16;
  auto s = static_cast<cudaStream_t>(stream);
  if (whole > 0) {
    std::size_t blocks = static_cast<std::size_t>(sms) * static_cast<std::size_t>(perSm > 0 ? perSm : 1);
    const std::size_t needed = (whole + kThreads - 1) / kThreads;
    if (blocks > needed) blocks = needed;
    copy16<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(static_cast<uint4*>(dst),
                                                              static_cast<const uint4*>(src), whole);
    e = cudaGetLastError();
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  if (tail > 0) {
    copyTail<<<1, 16, 0, s>>>(static_cast<unsigned char*>(dst) + whole * 16,
                              static_cast<const unsigned char*>(src) + whole * 16, tail);
    e = cudaGetLastError();
  }
  return static_cast<int>(e);
}

}  // namespace ds::bench::gpu::detail
