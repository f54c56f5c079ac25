// The CUDA side of the DDP engine's maths: cuBLAS GEMMs (f32, or bf16 with f32 accumulation) and small
// element-wise kernels. Compiled only when dsperf is built with CUDA. One cuBLAS handle per host thread
// (ranks may be threads).
#include "engine/ddp/cuda_ops.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "engine/ddp/cublas_api.h"

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
                       " (" + cublasApi().statusString(st) + ")");
  }
}

cublasHandle_t handle() {
  thread_local cublasHandle_t h = nullptr;
  if (h == nullptr) checkBlas(cublasApi().create(&h), "cublasCreate");
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

// f32 and bf16 elements of the maths kernels: every value is computed in f32 and rounded once when
// stored, as the host maths does.
__device__ inline float toF(float v) { return v; }
__device__ inline float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline void put(float& d, float v) { d = v; }
__device__ inline void put(__nv_bfloat16& d, float v) { d = __float2bfloat16_rn(v); }

template <typename T>
__global__ void addBiasKernel(T* y, const T* b, std::size_t rows, std::size_t n) {
  DS_GRID_LOOP(i, rows * n) { put(y[i], toF(y[i]) + toF(b[i % n])); }
}

template <typename T>
__global__ void biasGradKernel(const T* dy, std::size_t rows, std::size_t n, float alpha, float beta, T* g) {
  DS_GRID_LOOP(j, n) {
    float s = 0.0f;
    for (std::size_t r = 0; r < rows; ++r) s += toF(dy[r * n + j]);
    put(g[j], alpha * s + (beta == 0.0f ? 0.0f : beta * toF(g[j])));
  }
}

template <typename T>
__global__ void actForwardKernel(int act, const T* x, T* y, std::size_t n) {
  DS_GRID_LOOP(i, n) {
    float v = toF(x[i]);
    put(y[i], act == 1 ? (v > 0.0f ? v : 0.0f) : 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f)));
  }
}

template <typename T>
__global__ void actBackwardKernel(int act, const T* x, const T* dy, T* dx, std::size_t n) {
  DS_GRID_LOOP(i, n) {
    float v = toF(x[i]);
    float g = toF(dy[i]);
    if (act == 1) {
      put(dx[i], v > 0.0f ? g : 0.0f);
    } else {
      float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
      float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
      put(dx[i], g * (cdf + v * pdf));
    }
  }
}

// One atomic per block on the sum (a warp-shuffle reduction, then the block's warps), not one per
// thread: every thread adding to one address serialises on it.
template <typename T>
__global__ void mseKernel(const T* p, const T* t, std::size_t n, float k, T* d, double* sum, double scale) {
  double local = 0;
  DS_GRID_LOOP(i, n) {
    float e = toF(p[i]) - toF(t[i]);
    local += static_cast<double>(e) * e;
    put(d[i], k * e);
  }
  for (int off = 16; off > 0; off >>= 1) local += __shfl_down_sync(0xffffffffu, local, off);
  __shared__ double warps[kThreads / 32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = local;
  __syncthreads();
  if (warp == 0) {
    local = lane < blockDim.x / 32 ? warps[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) local += __shfl_down_sync(0xffffffffu, local, off);
    if (lane == 0) atomicAdd(sum, local * scale);
  }
}

// Runs launch(T*) with the element type of `elem`: f32 or bf16 (the maths of the DDP engine).
template <typename Launch>
void dispatch(int elem, Launch&& launch) {
  if (elem == kElemBF16) {
    launch(static_cast<__nv_bfloat16*>(nullptr));
  } else {
    launch(static_cast<float*>(nullptr));
  }
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

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const void* a, int lda, const void* b,
          int ldb, float beta, void* c, int ldc, int elem) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (elem == kElemF32) {
    checkBlas(cublasApi().sgemm(handle(), opB, opA, n, m, k, &alpha, static_cast<const float*>(b), ldb,
                          static_cast<const float*>(a), lda, &beta, static_cast<float*>(c), ldc),
              "cublasSgemm");
    return;
  }
  // bf16 inputs and output, f32 accumulation (what torch does for bf16 matmuls).
  checkBlas(cublasApi().gemmEx(handle(), opB, opA, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, c,
                         CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (bf16, CUBLAS_COMPUTE_32F)");
}

void addBias(void* y, const void* bias, std::size_t rows, std::size_t n, int elem) {
  dispatch(elem, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    addBiasKernel<<<blocksFor(rows * n), kThreads>>>(static_cast<T*>(y), static_cast<const T*>(bias), rows, n);
  });
  check(cudaGetLastError(), "addBias kernel");
}

void biasGrad(const void* dy, std::size_t rows, std::size_t n, float alpha, float beta, void* grad, int elem) {
  dispatch(elem, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    biasGradKernel<<<blocksFor(n), kThreads>>>(static_cast<const T*>(dy), rows, n, alpha, beta,
                                                static_cast<T*>(grad));
  });
  check(cudaGetLastError(), "biasGrad kernel");
}

void activationForward(int act, const void* in, void* out, std::size_t n, int elem) {
  dispatch(elem, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    actForwardKernel<<<blocksFor(n), kThreads>>>(act, static_cast<const T*>(in), static_cast<T*>(out), n);
  });
  check(cudaGetLastError(), "activation kernel");
}

void activationBackward(int act, const void* pre, const void* dy, void* dx, std::size_t n, int elem) {
  dispatch(elem, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    actBackwardKernel<<<blocksFor(n), kThreads>>>(act, static_cast<const T*>(pre), static_cast<const T*>(dy),
                                                   static_cast<T*>(dx), n);
  });
  check(cudaGetLastError(), "activation backward kernel");
}

namespace {

// A double on the device and its pinned twin on the host, for sums read back once.
struct DeviceSum {
  int device = -1;
  double* dev = nullptr;
  double* host = nullptr;
};

void freeSum(DeviceSum& s) noexcept {
  if (s.dev != nullptr) cudaFree(s.dev);
  if (s.host != nullptr) cudaFreeHost(s.host);
  s = DeviceSum{};
}

void makeSum(DeviceSum& s) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  try {
    check(cudaMallocHost(&s.host, sizeof(double)), "cudaMallocHost");
    check(cudaMalloc(&s.dev, sizeof(double)), "cudaMalloc");
    check(cudaMemset(s.dev, 0, sizeof(double)), "cudaMemset");
  } catch (...) {
    freeSum(s);
    throw;
  }
  s.device = device;
}

}  // namespace

void* sumCreate() {
  auto* s = new DeviceSum;
  try {
    makeSum(*s);
  } catch (...) {
    delete s;
    throw;
  }
  return s;
}

void sumDestroy(void* sum) noexcept {
  if (sum == nullptr) return;
  freeSum(*static_cast<DeviceSum*>(sum));
  delete static_cast<DeviceSum*>(sum);
}

void sumReset(void* sum) {
  check(cudaMemsetAsync(static_cast<DeviceSum*>(sum)->dev, 0, sizeof(double), cudaStreamLegacy), "cudaMemsetAsync");
}

double sumRead(void* sum) {
  auto* s = static_cast<DeviceSum*>(sum);
  check(cudaMemcpyAsync(s->host, s->dev, sizeof(double), cudaMemcpyDeviceToHost, cudaStreamLegacy), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  return *s->host;
}

void mseLossInto(const void* pred, const void* target, std::size_t n, float gradScale, void* dpred, int elem, void* sum,
                 double scale) {
  const float k = gradScale * 2.0f / static_cast<float>(n);
  double* dev = static_cast<DeviceSum*>(sum)->dev;
  dispatch(elem, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    mseKernel<<<blocksFor(n), kThreads>>>(static_cast<const T*>(pred), static_cast<const T*>(target), n, k,
                                          static_cast<T*>(dpred), dev, scale);
  });
  check(cudaGetLastError(), "mse kernel");
}

double mseLoss(const void* pred, const void* target, std::size_t n, float gradScale, void* dpred, int elem) {
  // One sum per host thread and device, kept (a call no longer allocates and frees one).
  struct Kept {
    DeviceSum s;
    ~Kept() { freeSum(s); }
  };
  thread_local Kept kept;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (kept.s.dev == nullptr || kept.s.device != device) {
    freeSum(kept.s);
    makeSum(kept.s);
  }
  sumReset(&kept.s);
  mseLossInto(pred, target, n, gradScale, dpred, elem, &kept.s, 1.0 / static_cast<double>(n));
  return sumRead(&kept.s);
}

void* eventCreate() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}

void eventDestroy(void* e) noexcept {
  if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void eventRecord(void* e) { check(cudaEventRecord(static_cast<cudaEvent_t>(e), cudaStreamLegacy), "cudaEventRecord"); }

double eventElapsedMs(void* start, void* stop) {
  // Both: a span may end at a point recorded before its start (a negative span).
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(start)), "cudaEventSynchronize");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)),
        "cudaEventElapsedTime");
  return ms;
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
