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

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc);
void addBias(float* y, const float* bias, std::size_t rows, std::size_t n);
void biasGrad(const float* dy, std::size_t rows, std::size_t n, float alpha, float beta, float* grad);
// act: 0 gelu, 1 relu.
void activationForward(int act, const float* in, float* out, std::size_t n);
void activationBackward(int act, const float* pre, const float* dy, float* dx, std::size_t n);
double mseLoss(const float* pred, const float* target, std::size_t n, float gradScale, float* dpred);
void scaleCopy(const void* src, int srcElem, float alpha, void* dst, int dstElem, std::size_t n);
void sgdStep(float* p, const float* g, float* buf, std::size_t n, bool firstStep, float lr, float momentum,
             float dampening, float weightDecay);
void adamwStep(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float beta1,
               float beta2, float eps, float weightDecay, float bc1, float bc2);

}  // namespace ds::ddp::cuda
