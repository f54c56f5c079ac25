// The CUDA side of the DDP engine's maths: cuBLAS SGEMM and small element-wise kernels. Compiled only
// when dsperf is built with CUDA. One cuBLAS handle per host thread (ranks may be threads).
#include "engine/ddp/cuda_ops.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>


namespace ds::ddp::cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throwError(std::string(what) + " failed: " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
  }
}

void checkBlas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throwError(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(st)) +
                       " (" + cublasGetStatusString(st) + ")");
  }
}

cublasHandle_t handle() {
  thread_local cublasHandle_t h = nullptr;
  if (h == nullptr) checkBlas(cublasCreate(&h), "cublasCreate");
  return h;
}

constexpr int kThreads = 256;
inline int blocksFor(std::size_t n) {
  std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b > 65535 * 8 ? 65535 * 8 : (b == 0 ? 1 : b));
}

__device__ float loadElem(const void* p, int elem, std::size_t i) {
  if (elem == kElemF32) return static_cast<const float*>(p)[i];
  if (elem == kElemF16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ void storeElem(void* p, int elem, std::size_t i, float v) {
  if (elem == kElemF32) {
    static_cast<float*>(p)[i] = v;
  } else if (elem == kElemF16) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

#define DS_GRID_LOOP(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void addBiasKernel(float* y, const float* b, std::size_t rows, std::size_t n) {
  DS_GRID_LOOP(i, rows * n) { y[i] += b[i % n]; }
}

__global__ void biasGradKernel(const float* dy, std::size_t rows, std::size_t n, float alpha, float beta, float* g) {
  DS_GRID_LOOP(j, n) {
    float s = 0.0f;
    for (std::size_t r = 0; r < rows; ++r) s += dy[r * n + j];
    g[j] = alpha * s + (beta == 0.0f ? 0.0f : beta * g[j]);
  }
}

__global__ void actForwardKernel(int act, const float* x, float* y, std::size_t n) {
  DS_GRID_LOOP(i, n) {
    float v = x[i];
    y[i] = act == 1 ? (v > 0.0f ? v : 0.0f) : 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
  }
}

__global__ void actBackwardKernel(int act, const float* x, const float* dy, float* dx, std::size_t n) {
  DS_GRID_LOOP(i, n) {
    float v = x[i];
    if (act == 1) {
      dx[i] = v > 0.0f ? dy[i] : 0.0f;
    } else {
      float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
      float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
  }
}

__global__ void mseKernel(const float* p, const float* t, std::size_t n, float k, float* d, double* sum) {
  double local = 0;
  DS_GRID_LOOP(i, n) {
    float e = p[i] - t[i];
    local += static_cast<double>(e) * e;
    d[i] = k * e;
  }
  atomicAdd(sum, local);
}

__global__ void scaleCopyKernel(const void* src, int se, float alpha, void* dst, int de, std::size_t n) {
  DS_GRID_LOOP(i, n) { storeElem(dst, de, i, alpha * loadElem(src, se, i)); }
}

__global__ void sgdKernel(float* p, const float* g, float* buf, std::size_t n, bool first, float lr, float momentum,
                          float dampening, float wd) {
  DS_GRID_LOOP(i, n) {
    float d = g[i];
    if (wd != 0.0f) d += wd * p[i];
    if (buf != nullptr) {
      buf[i] = first ? d : momentum * buf[i] + (1.0f - dampening) * d;
      d = buf[i];
    }
    p[i] -= lr * d;
  }
}

__global__ void adamwKernel(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2,
                            float eps, float wd, float bc1, float sqrtBc2) {
  DS_GRID_LOOP(i, n) {
    p[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= (lr / bc1) * m[i] / (sqrtf(v[i]) / sqrtBc2 + eps);
  }
}

}  // namespace

void* alloc(std::size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes == 0 ? 1 : bytes), "cudaMemset");
  return p;
}

void release(void* p) noexcept { cudaFree(p); }

void copyBytes(void* dst, const void* src, std::size_t bytes, int kind) {
  cudaMemcpyKind k = kind == 0 ? cudaMemcpyHostToDevice : kind == 1 ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
  check(cudaMemcpy(dst, src, bytes, k), "cudaMemcpy");
}

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  checkBlas(cublasSgemm(handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                        &alpha, b, ldb, a, lda, &beta, c, ldc),
            "cublasSgemm");
}

void addBias(float* y, const float* bias, std::size_t rows, std::size_t n) {
  addBiasKernel<<<blocksFor(rows * n), kThreads>>>(y, bias, rows, n);
  check(cudaGetLastError(), "addBias kernel");
}

void biasGrad(const float* dy, std::size_t rows, std::size_t n, float alpha, float beta, float* grad) {
  biasGradKernel<<<blocksFor(n), kThreads>>>(dy, rows, n, alpha, beta, grad);
  check(cudaGetLastError(), "biasGrad kernel");
}

void activationForward(int act, const float* in, float* out, std::size_t n) {
  actForwardKernel<<<blocksFor(n), kThreads>>>(act, in, out, n);
  check(cudaGetLastError(), "activation kernel");
}

void activationBackward(int act, const float* pre, const float* dy, float* dx, std::size_t n) {
  actBackwardKernel<<<blocksFor(n), kThreads>>>(act, pre, dy, dx, n);
  check(cudaGetLastError(), "activation backward kernel");
}

double mseLoss(const float* pred, const float* target, std::size_t n, float gradScale, float* dpred) {
  double* sum = nullptr;
  check(cudaMalloc(&sum, sizeof(double)), "cudaMalloc");
  check(cudaMemset(sum, 0, sizeof(double)), "cudaMemset");
  mseKernel<<<blocksFor(n), kThreads>>>(pred, target, n, gradScale * 2.0f / static_cast<float>(n), dpred, sum);
  check(cudaGetLastError(), "mse kernel");
  double host = 0;
  check(cudaMemcpy(&host, sum, sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(sum);
  return host / static_cast<double>(n);
}

void scaleCopy(const void* src, int srcElem, float alpha, void* dst, int dstElem, std::size_t n) {
  scaleCopyKernel<<<blocksFor(n), kThreads>>>(src, srcElem, alpha, dst, dstElem, n);
  check(cudaGetLastError(), "scaleCopy kernel");
}

void sgdStep(float* p, const float* g, float* buf, std::size_t n, bool firstStep, float lr, float momentum,
             float dampening, float weightDecay) {
  sgdKernel<<<blocksFor(n), kThreads>>>(p, g, buf, n, firstStep, lr, momentum, dampening, weightDecay);
  check(cudaGetLastError(), "sgd kernel");
}

void adamwStep(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float beta1, float beta2,
               float eps, float weightDecay, float bc1, float bc2) {
  adamwKernel<<<blocksFor(n), kThreads>>>(p, g, m, v, n, lr, beta1, beta2, eps, weightDecay, bc1, sqrtf(bc2));
  check(cudaGetLastError(), "adamw kernel");
}

}  // namespace ds::ddp::cuda
