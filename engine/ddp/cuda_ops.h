// Internal: the CUDA side of ops.h and Storage, on raw device pointers. Defined in cuda_ops.cu, which
// is compiled only when dsperf is built with CUDA (DS_WITH_CUDA); callers guard with #if DS_WITH_CUDA.
// Every function throws ds::BackendError naming the CUDA/cuBLAS call that failed.
#pragma once

#include <cstddef>
#include <string>

namespace ds::ddp::cuda {

// Element types as small codes, so that this header needs no CUDA or engine headers.
// Throws ds::BackendError (defined in ops.cpp, so that nvcc never sees fmt).
[[noreturn]] void throwError(const std::string& message);

enum Elem : int { kElemF32 = 0, kElemF16 = 1, kElemBF16 = 2 };

void* alloc(std::size_t bytes, int device);  // zero-filled
void release(void* p) noexcept;
// kind: 0 host->device, 1 device->host, 2 device->device.
void copyBytes(void* dst, const void* src, std::size_t bytes, int kind);
void synchronize();
// CUDA events on the default stream (cudaEvent_t as void*), for timing device work as torch's peers do.
void* eventCreate();
void eventDestroy(void* e) noexcept;
void eventRecord(void* e);
// Waits for both events, then the milliseconds from start to stop (negative when stop came first).
double eventElapsedMs(void* start, void* stop);

// The maths below take f32 or bf16 (elem kElemF32 / kElemBF16) for every tensor of one call; bf16
// is computed in f32 and rounded once when stored (cuBLAS: CUBLAS_COMPUTE_32F).
void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const void* a, int lda, const void* b,
          int ldb, float beta, void* c, int ldc, int elem);
void addBias(void* y, const void* bias, std::size_t rows, std::size_t n, int elem);
void biasGrad(const void* dy, std::size_t rows, std::size_t n, float alpha, float beta, void* grad, int elem);
// act: 0 gelu, 1 relu.
void activationForward(int act, const void* in, void* out, std::size_t n, int elem);
void activationBackward(int act, const void* pre, const void* dy, void* dx, std::size_t n, int elem);
double mseLoss(const void* pred, const void* target, std::size_t n, float gradScale, void* dpred, int elem);
// A double summed on the current device (an opaque handle): created zero, reset and read (the read
// waits for the default stream).
void* sumCreate();
void sumDestroy(void* sum) noexcept;
void sumReset(void* sum);
double sumRead(void* sum);
// As mseLoss, but adds scale * sum((pred - target)^2) to `sum` on the device and returns at once.
void mseLossInto(const void* pred, const void* target, std::size_t n, float gradScale, void* dpred, int elem, void* sum,
                 double scale);
void scaleCopy(const void* src, int srcElem, float alpha, void* dst, int dstElem, std::size_t n);
void sgdStep(float* p, const float* g, float* buf, std::size_t n, bool firstStep, float lr, float momentum,
             float dampening, float weightDecay);
void adamwStep(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float beta1,
               float beta2, float eps, float weightDecay, float bc1, float bc2);

}  // namespace ds::ddp::cuda
