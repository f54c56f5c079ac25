// Internal: dsbench gpu's copy kernel (gpu_copy_kernel.cu, compiled only with CUDA). No CUDA types here,
// so that the C++ side includes it without nvcc's headers in the way.
#pragma once

#include <cstddef>

namespace ds::bench::gpu::detail {

// Launches a copy of `bytes` from `src` to `dst` on `stream` (a cudaStream_t) of the current device:
// a grid-stride loop of 16-byte loads and stores, four in flight per thread, over as many blocks as
// the device keeps resident at once; the bytes after the last whole 16 are copied one by one. Both
// pointers must be 16-byte aligned (cudaMalloc and cudaMallocHost give 256). Either may be host
// memory the device can reach (pinned, mapped) or a peer's memory with peer access enabled.
// Returns the cudaError_t of the launch (0 success).
int launchCopyKernel(void* dst, const void* src, std::size_t bytes, void* stream);

}  // namespace ds::bench::gpu::detail
