#include "engine/ddp/ops.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "engine/comm/half.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#if DS_WITH_CUDA
#include "engine/ddp/cuda_ops.h"
#endif

#if DS_WITH_CUDA
namespace ds::ddp::cuda {
void throwError(const std::string& message) { throw BackendError(message); }
}  // namespace ds::ddp::cuda
#endif

namespace ds::ddp::ops {

namespace {

void sameDevice(const char* what, const Tensor& a, const Tensor& b) {
  if (!(a.device() == b.device())) {
    throw ConfigError(
        fmt::format("{}: tensors on different devices ({} and {}); move them to one device first", what,
                    comm::deviceName(a.device()), comm::deviceName(b.device())));
  }
}

void requireF32(const char* what, const Tensor& t) {
  DS_CHECK(t.dtype() == DType::kF32, "{} needs f32, got {}", what, comm::dtypeName(t.dtype()));
}

// The model's maths: every tensor of one call f32, or every one bf16.
void requireMathDType(const char* what, std::initializer_list<const Tensor*> ts) {
  const DType t = (*ts.begin())->dtype();
  DS_CHECK(t == DType::kF32 || t == DType::kBF16, "{} computes in f32 or bf16, got {}", what,
           comm::dtypeName(t));
  for (const Tensor* x : ts) {
    DS_CHECK(x->dtype() == t, "{}: tensors of {} and {} in one call", what, comm::dtypeName(t),
             comm::dtypeName(x->dtype()));
  }
}

// A host bf16 element: a type of its own, so that toF/put pick the conversion (f32: none).
struct Bf16 {
  std::uint16_t bits;
};
inline float toF(float v) { return v; }
inline float toF(Bf16 v) { return comm::bf16ToFloat(v.bits); }
inline void put(float& d, float v) { d = v; }
inline void put(Bf16& d, float v) { d.bits = comm::floatToBf16(v); }

// Calls f(T* first element of t) with T = float or Bf16, as t's dtype is.
template <typename Fn>
decltype(auto) withElems(const Tensor& t, Fn&& f) {
  if (t.dtype() == DType::kBF16) return f(static_cast<Bf16*>(t.raw()));
  return f(static_cast<float*>(t.raw()));
}

// bf16 -> f32 (exact) into a scratch vector, and back with rounding: the host bf16 GEMM.
void widen(const Tensor& t, std::vector<float>& out) {
  out.resize(t.numel());
  const auto* p = static_cast<const std::uint16_t*>(t.raw());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = comm::bf16ToFloat(p[i]);
}

[[noreturn, maybe_unused]] void noCuda(const char* what) {
  throw ConfigError(fmt::format("{} on a CUDA tensor, but this dsperf was built without CUDA", what));
}

#if DS_WITH_CUDA
int elemOf(DType t) {
  return t == DType::kF32 ? cuda::kElemF32 : t == DType::kF16 ? cuda::kElemF16 : cuda::kElemBF16;
}
#endif

float loadAsFloat(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kF16:
      return comm::f16ToFloat(static_cast<const std::uint16_t*>(p)[i]);
    default:
      return comm::bf16ToFloat(static_cast<const std::uint16_t*>(p)[i]);
  }
}

void storeFloat(void* p, DType t, std::size_t i, float v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::kF16:
      static_cast<std::uint16_t*>(p)[i] = comm::floatToF16(v);
      break;
    default:
      static_cast<std::uint16_t*>(p)[i] = comm::floatToBf16(v);
      break;
  }
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

}  // namespace

void gemm(bool transA, bool transB, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c) {
  sameDevice("gemm", a, c);
  sameDevice("gemm", b, c);
  requireMathDType("gemm", {&a, &b, &c});
  DS_CHECK(a.shape().size() == 2 && b.shape().size() == 2 && c.shape().size() == 2, "gemm needs matrices");
  const int m = static_cast<int>(c.dim(0));
  const int n = static_cast<int>(c.dim(1));
  const int k = static_cast<int>(transA ? a.dim(0) : a.dim(1));
  DS_CHECK((transA ? a.dim(1) : a.dim(0)) == m, "gemm: A {} does not give {} rows", a.shapeString(), m);
  DS_CHECK((transB ? b.dim(1) : b.dim(0)) == k, "gemm: B {} does not match k={}", b.shapeString(), k);
  DS_CHECK((transB ? b.dim(0) : b.dim(1)) == n, "gemm: B {} does not give {} columns", b.shapeString(), n);
  const int lda = static_cast<int>(a.dim(1));
  const int ldb = static_cast<int>(b.dim(1));
  if (c.isCuda()) {
#if DS_WITH_CUDA
    cuda::gemm(transA, transB, m, n, k, alpha, a.raw(), lda, b.raw(), ldb, beta, c.raw(), n, elemOf(c.dtype()));
    return;
#else
    noCuda("gemm");
#endif
  }
  const auto ta = transA ? CblasTrans : CblasNoTrans;
  const auto tb = transB ? CblasTrans : CblasNoTrans;
  if (c.dtype() == DType::kF32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta,
                c.data<float>(), n);
    return;
  }
  // bf16: the same products and f32 sums as a bf16 GEMM with f32 accumulation, then one rounding.
  thread_local std::vector<float> fa, fb, fc;
  widen(a, fa);
  widen(b, fb);
  if (beta != 0.0f) {
    widen(c, fc);
  } else {
    fc.assign(c.numel(), 0.0f);
  }
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, fa.data(), lda, fb.data(), ldb, beta, fc.data(), n);
  auto* pc = static_cast<std::uint16_t*>(c.raw());
  for (std::size_t i = 0; i < fc.size(); ++i) pc[i] = comm::floatToBf16(fc[i]);
}

void addBias(Tensor& y, const Tensor& bias) {
  sameDevice("addBias", y, bias);
  requireMathDType("addBias", {&y, &bias});
  const std::size_t n = bias.numel();
  DS_CHECK(n > 0 && y.numel() % n == 0, "addBias: {} over {}", bias.shapeString(), y.shapeString());
  const std::size_t rows = y.numel() / n;
  if (y.isCuda()) {
#if DS_WITH_CUDA
    cuda::addBias(y.raw(), bias.raw(), rows, n, elemOf(y.dtype()));
    return;
#else
    noCuda("addBias");
#endif
  }
  withElems(y, [&](auto* py) {
    const auto* pb = static_cast<decltype(py)>(bias.raw());
    for (std::size_t r = 0; r < rows; ++r) {
      auto* row = py + r * n;
      for (std::size_t j = 0; j < n; ++j) put(row[j], toF(row[j]) + toF(pb[j]));
    }
  });
}

void biasGrad(const Tensor& dy, float alpha, float beta, Tensor& grad) {
  sameDevice("biasGrad", dy, grad);
  requireMathDType("biasGrad", {&dy, &grad});
  const std::size_t n = grad.numel();
  DS_CHECK(n > 0 && dy.numel() % n == 0, "biasGrad: {} over {}", grad.shapeString(), dy.shapeString());
  const std::size_t rows = dy.numel() / n;
  if (dy.isCuda()) {
#if DS_WITH_CUDA
    cuda::biasGrad(dy.raw(), rows, n, alpha, beta, grad.raw(), elemOf(dy.dtype()));
    return;
#else
    noCuda("biasGrad");
#endif
  }
  withElems(dy, [&](auto* pd) {
    auto* pg = static_cast<decltype(pd)>(grad.raw());
    std::vector<float> sum(n, 0.0f);
    for (std::size_t r = 0; r < rows; ++r) {
      const auto* row = pd + r * n;
      for (std::size_t j = 0; j < n; ++j) sum[j] += toF(row[j]);
    }
    for (std::size_t j = 0; j < n; ++j) put(pg[j], alpha * sum[j] + (beta == 0.0f ? 0.0f : beta * toF(pg[j])));
  });
}

const char* activationName(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kRelu:
      return "relu";
    default:
      return "none";
  }
}

void activationForward(Activation a, const Tensor& in, Tensor& out) {
  sameDevice("activation", in, out);
  requireMathDType("activation", {&in, &out});
  DS_CHECK(in.numel() == out.numel(), "activation: {} vs {}", in.shapeString(), out.shapeString());
  if (a == Activation::kNone) {
    if (!in.sameMemory(out)) copy(in, out);
    return;
  }
  if (in.isCuda()) {
#if DS_WITH_CUDA
    cuda::activationForward(a == Activation::kGelu ? 0 : 1, in.raw(), out.raw(), in.numel(), elemOf(in.dtype()));
    return;
#else
    noCuda("activation");
#endif
  }
  const std::size_t n = in.numel();
  withElems(in, [&](auto* x) {
    auto* y = static_cast<decltype(x)>(out.raw());
    if (a == Activation::kRelu) {
      for (std::size_t i = 0; i < n; ++i) {
        const float v = toF(x[i]);
        put(y[i], v > 0.0f ? v : 0.0f);
      }
    } else {  // exact GELU, as torch.nn.GELU()
      for (std::size_t i = 0; i < n; ++i) {
        const float v = toF(x[i]);
        put(y[i], 0.5f * v * (1.0f + std::erf(v * kInvSqrt2)));
      }
    }
  });
}

void activationBackward(Activation a, const Tensor& pre, const Tensor& dy, Tensor& dx) {
  sameDevice("activation backward", pre, dy);
  sameDevice("activation backward", dy, dx);
  requireMathDType("activation backward", {&pre, &dy, &dx});
  DS_CHECK(pre.numel() == dy.numel() && dy.numel() == dx.numel(), "activation backward: shapes differ");
  if (a == Activation::kNone) {
    if (!dy.sameMemory(dx)) copy(dy, dx);
    return;
  }
  if (pre.isCuda()) {
#if DS_WITH_CUDA
    cuda::activationBackward(a == Activation::kGelu ? 0 : 1, pre.raw(), dy.raw(), dx.raw(), pre.numel(),
                             elemOf(pre.dtype()));
    return;
#else
    noCuda("activation backward");
#endif
  }
  const std::size_t n = pre.numel();
  withElems(pre, [&](auto* x) {
    using T = std::remove_pointer_t<decltype(x)>;
    const T* g = static_cast<const T*>(dy.raw());
    T* out = static_cast<T*>(dx.raw());
    if (a == Activation::kRelu) {
      for (std::size_t i = 0; i < n; ++i) put(out[i], toF(x[i]) > 0.0f ? toF(g[i]) : 0.0f);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const float v = toF(x[i]);
        float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
        float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
        put(out[i], toF(g[i]) * (cdf + v * pdf));
      }
    }
  });
}

LossSum::LossSum(const Device& device) {
  if (device.type != DeviceType::kCuda) return;
#if DS_WITH_CUDA
  device_ = cuda::sumCreate();
#else
  noCuda("LossSum");
#endif
}

LossSum::~LossSum() {
#if DS_WITH_CUDA
  cuda::sumDestroy(device_);
#endif
}

void LossSum::reset() {
  host_ = 0;
#if DS_WITH_CUDA
  if (device_ != nullptr) cuda::sumReset(device_);
#endif
}

double LossSum::value() const {
#if DS_WITH_CUDA
  if (device_ != nullptr) return cuda::sumRead(device_);
#endif
  return host_;
}

void mseLossInto(const Tensor& pred, const Tensor& target, float gradScale, Tensor& dpred, LossSum& sum, double weight) {
  if (!pred.isCuda()) {
    sum.host_ += weight * mseLoss(pred, target, gradScale, dpred);
    return;
  }
  DS_CHECK(sum.device_ != nullptr, "mseLossInto: a loss on {} into a host LossSum", pred.shapeString());
  sameDevice("mseLoss", pred, target);
  sameDevice("mseLoss", pred, dpred);
  requireMathDType("mseLoss", {&pred, &target, &dpred});
  DS_CHECK(pred.numel() == target.numel() && pred.numel() == dpred.numel() && pred.numel() > 0,
           "mseLoss: pred {} target {}", pred.shapeString(), target.shapeString());
#if DS_WITH_CUDA
  const std::size_t n = pred.numel();
  cuda::mseLossInto(pred.raw(), target.raw(), n, gradScale, dpred.raw(), elemOf(pred.dtype()), sum.device_,
                    weight / static_cast<double>(n));
#endif
}

double mseLoss(const Tensor& pred, const Tensor& target, float gradScale, Tensor& dpred) {
  sameDevice("mseLoss", pred, target);
  sameDevice("mseLoss", pred, dpred);
  requireMathDType("mseLoss", {&pred, &target, &dpred});
  DS_CHECK(pred.numel() == target.numel() && pred.numel() == dpred.numel() && pred.numel() > 0,
           "mseLoss: pred {} target {}", pred.shapeString(), target.shapeString());
  const std::size_t n = pred.numel();
  if (pred.isCuda()) {
#if DS_WITH_CUDA
    return cuda::mseLoss(pred.raw(), target.raw(), n, gradScale, dpred.raw(), elemOf(pred.dtype()));
#else
    noCuda("mseLoss");
#endif
  }
  const float k = gradScale * 2.0f / static_cast<float>(n);
  return withElems(pred, [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    const T* t = static_cast<const T*>(target.raw());
    T* d = static_cast<T*>(dpred.raw());
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float e = toF(p[i]) - toF(t[i]);
      sum += static_cast<double>(e) * e;
      put(d[i], k * e);
    }
    return sum / static_cast<double>(n);
  });
}

void scaleCopy(const Tensor& src, float alpha, Tensor& dst) {
  sameDevice("scaleCopy", src, dst);
  DS_CHECK(src.numel() == dst.numel(), "scaleCopy: {} elements into {}", src.numel(), dst.numel());
  const std::size_t n = src.numel();
  if (src.isCuda()) {
#if DS_WITH_CUDA
    cuda::scaleCopy(src.raw(), elemOf(src.dtype()), alpha, dst.raw(), elemOf(dst.dtype()), n);
    return;
#else
    noCuda("scaleCopy");
#endif
  }
  if (src.dtype() == DType::kF32 && dst.dtype() == DType::kF32) {
    const float* s = src.data<float>();
    float* d = dst.data<float>();
    if (alpha == 1.0f) {
      if (s != d) std::memcpy(d, s, n * sizeof(float));
    } else {
      for (std::size_t i = 0; i < n; ++i) d[i] = alpha * s[i];
    }
    return;
  }
  const void* s = src.raw();
  void* d = dst.raw();
  for (std::size_t i = 0; i < n; ++i) storeFloat(d, dst.dtype(), i, alpha * loadAsFloat(s, src.dtype(), i));
}

void scale(Tensor& x, float alpha) { scaleCopy(x, alpha, x); }

void fillZero(Tensor& x) {
  if (x.isCuda()) {
    scaleCopy(x, 0.0f, x);
    return;
  }
  std::memset(x.raw(), 0, x.bytes());
}

void copy(const Tensor& src, Tensor& dst) {
  DS_CHECK(src.bytes() == dst.bytes() && src.dtype() == dst.dtype(), "copy: {} {} into {} {}",
           comm::dtypeName(src.dtype()), src.shapeString(), comm::dtypeName(dst.dtype()), dst.shapeString());
  if (!src.isCuda() && !dst.isCuda()) {
    if (src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.bytes());
    return;
  }
#if DS_WITH_CUDA
  int kind = src.isCuda() ? (dst.isCuda() ? 2 : 1) : 0;
  cuda::copyBytes(dst.raw(), src.raw(), src.bytes(), kind);
#else
  noCuda("copy");
#endif
}

void sgdStep(Tensor& param, const Tensor& grad, Tensor& momentumBuf, bool firstStep, float lr, float momentum,
             float dampening, float weightDecay) {
  sameDevice("sgd", param, grad);
  requireF32("sgd (bf16 parameters step through f32 master weights)", param);
  requireF32("sgd", grad);
  DS_CHECK(param.numel() == grad.numel(), "sgd: param and grad differ in size");
  const std::size_t n = param.numel();
  if (param.isCuda()) {
#if DS_WITH_CUDA
    cuda::sgdStep(param.data<float>(), grad.data<float>(),
                  momentum != 0.0f ? momentumBuf.data<float>() : nullptr, n, firstStep, lr, momentum,
                  dampening, weightDecay);
    return;
#else
    noCuda("sgd");
#endif
  }
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* buf = momentum != 0.0f ? momentumBuf.data<float>() : nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    float d = g[i];
    if (weightDecay != 0.0f) d += weightDecay * p[i];
    if (buf != nullptr) {
      buf[i] = firstStep ? d : momentum * buf[i] + (1.0f - dampening) * d;
      d = buf[i];
    }
    p[i] -= lr * d;
  }
}

void adamwStep(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, long step, float lr, float beta1,
               float beta2, float eps, float weightDecay) {
  sameDevice("adamw", param, grad);
  requireF32("adamw (bf16 parameters step through f32 master weights)", param);
  requireF32("adamw", grad);
  DS_CHECK(param.numel() == grad.numel() && m.numel() == param.numel() && v.numel() == param.numel(),
           "adamw: state sizes differ");
  DS_CHECK(step >= 1, "adamw step counts from 1");
  const std::size_t n = param.numel();
  const float bc1 = 1.0f - static_cast<float>(std::pow(beta1, static_cast<double>(step)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(beta2, static_cast<double>(step)));
  if (param.isCuda()) {
#if DS_WITH_CUDA
    cuda::adamwStep(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, lr, beta1,
                    beta2, eps, weightDecay, bc1, bc2);
    return;
#else
    noCuda("adamw");
#endif
  }
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  const float stepSize = lr / bc1;
  const float sqrtBc2 = std::sqrt(bc2);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] *= 1.0f - lr * weightDecay;
    pm[i] = beta1 * pm[i] + (1.0f - beta1) * g[i];
    pv[i] = beta2 * pv[i] + (1.0f - beta2) * g[i] * g[i];
    float denom = std::sqrt(pv[i]) / sqrtBc2 + eps;
    p[i] -= stepSize * pm[i] / denom;
  }
}

void synchronize(const Device& device) {
  if (device.type != DeviceType::kCuda) return;
#if DS_WITH_CUDA
  cuda::synchronize();
#else
  noCuda("synchronize");
#endif
}

DeviceClock::DeviceClock(const Device& device, std::size_t points) : times_(points), marked_(points, false) {
  if (device.type != DeviceType::kCuda) return;
#if DS_WITH_CUDA
  try {
    for (std::size_t i = 0; i < points; ++i) events_.push_back(cuda::eventCreate());
  } catch (...) {
    for (void* e : events_) cuda::eventDestroy(e);
    throw;
  }
#else
  noCuda("DeviceClock");
#endif
}

DeviceClock::~DeviceClock() {
#if DS_WITH_CUDA
  for (void* e : events_) cuda::eventDestroy(e);
#endif
}

void DeviceClock::mark(std::size_t point) {
  marked_.at(point) = true;
#if DS_WITH_CUDA
  if (onDevice()) {
    cuda::eventRecord(events_[point]);
    return;
  }
#endif
  times_[point] = std::chrono::steady_clock::now();
}

void DeviceClock::clear() { std::fill(marked_.begin(), marked_.end(), false); }

std::int64_t DeviceClock::ns(std::size_t from, std::size_t to) const {
  if (!marked_.at(from) || !marked_.at(to)) return 0;
#if DS_WITH_CUDA
  if (onDevice()) return static_cast<std::int64_t>(cuda::eventElapsedMs(events_[from], events_[to]) * 1e6);
#endif
  return std::chrono::duration_cast<std::chrono::nanoseconds>(times_[to] - times_[from]).count();
}

int setBlasThreads(int n) {
#if DS_BLAS_REFERENCE
  // The bundle's netlib BLAS is single-threaded and slow: CPU figures from it are not OpenBLAS's.
  static bool said = false;
  if (!said) {
    said = true;
    log::warn("this dsperf uses the reference (netlib) BLAS of the relocatable bundle: CPU GEMMs run single-threaded "
              "and several times slower than with OpenBLAS, so CPU train figures are not comparable; GPU runs use cuBLAS");
  }
  return 1;
#else
  int previous = openblas_get_num_threads();
  openblas_set_num_threads(n);
  return previous;
#endif
}

}  // namespace ds::ddp::ops
