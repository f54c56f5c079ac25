// The maths of the DDP engine, dispatched on the tensors' device: OpenBLAS on the host, cuBLAS and
// small CUDA kernels on a GPU (compiled only when built with CUDA). All matrices are row-major.
//
// The model's maths (gemm, bias, activations, loss) take f32 or bf16, one dtype for every tensor of a
// call; bf16 is computed in f32 and rounded once when stored, as torch does: cuBLAS with bf16 inputs
// and CUBLAS_COMPUTE_32F on a GPU; on the host the bf16 values are widened to f32 (exactly) for
// OpenBLAS's SGEMM, because Debian's OpenBLAS 0.3.21 is built without its bf16 GEMM (cblas_sbgemm is
// declared but not exported). Host bf16 is therefore a reference for tests, not a fast path. The
// optimizers' steps take f32 only (master weights, optimizer.h).
//
// Every function throws ConfigError when tensors sit on different devices, and DS_CHECKs shapes.
// GPU functions run on the default stream and return without synchronising; synchronize() waits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/ddp/tensor.h"

namespace ds::ddp::ops {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major; op(X) = X^T when trans*. A is [m,k] (or [k,m]
// when transA), B is [k,n] (or [n,k] when transB).
void gemm(bool transA, bool transB, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c);

// y[r, :] += bias for every row r of y ([rows, n]); bias is [n].
void addBias(Tensor& y, const Tensor& bias);
// grad[n] = alpha * sum over rows of dy[rows, n] + beta * grad.
void biasGrad(const Tensor& dy, float alpha, float beta, Tensor& grad);

enum class Activation : std::uint8_t { kGelu, kRelu, kNone };
const char* activationName(Activation a);
// out = act(in) (may alias).
void activationForward(Activation a, const Tensor& in, Tensor& out);
// dx = dy * act'(pre) (dx may alias dy).
void activationBackward(Activation a, const Tensor& pre, const Tensor& dy, Tensor& dx);

// Mean squared error over all elements: returns mean((pred - target)^2) and writes
// dpred = gradScale * 2 (pred - target) / numel.
double mseLoss(const Tensor& pred, const Tensor& target, float gradScale, Tensor& dpred);

// Losses summed where they are computed: on a GPU a double on the device (no read-back per loss), on
// the host a double. value() brings the sum to the host (on a GPU it waits for the default stream).
class LossSum {
 public:
  explicit LossSum(const Device& device);
  ~LossSum();
  LossSum(const LossSum&) = delete;
  LossSum& operator=(const LossSum&) = delete;
  void reset();
  double value() const;

 private:
  friend void mseLossInto(const Tensor&, const Tensor&, float, Tensor&, LossSum&, double);
  void* device_ = nullptr;  // cuda::sumCreate's handle on a GPU
  double host_ = 0;
};
// As mseLoss, adding weight * mean((pred - target)^2) to `sum` instead of returning it: on a GPU it
// returns without waiting for the device.
void mseLossInto(const Tensor& pred, const Tensor& target, float gradScale, Tensor& dpred, LossSum& sum, double weight);

// dst = alpha * src, converting dtypes (f32/f16/bf16) as needed. Same numel.
void scaleCopy(const Tensor& src, float alpha, Tensor& dst);
// x *= alpha (any float dtype).
void scale(Tensor& x, float alpha);
void fillZero(Tensor& x);
// dst = src, same dtype and numel, any devices (host <-> GPU allowed).
void copy(const Tensor& src, Tensor& dst);

// PyTorch's SGD: buf = momentum*buf + (1-dampening)*g (buf = g on the first step), p -= lr*buf;
// weight decay adds wd*p to g first. momentum == 0 skips the buffer.
void sgdStep(Tensor& param, const Tensor& grad, Tensor& momentumBuf, bool firstStep, float lr, float momentum,
             float dampening, float weightDecay);
// PyTorch's AdamW (decoupled weight decay): p *= 1 - lr*wd; m, v moments; bias-corrected step
// (step counts from 1).
void adamwStep(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, long step, float lr, float beta1,
               float beta2, float eps, float weightDecay);

// Waits for queued GPU work on the current device; no-op on the host.
void synchronize(const Device& device);

// Points in a device's work, for timing spans of it without draining it. On the host, the steady
// clock when a point is marked. On a CUDA device, an event recorded on the default stream when marked:
// it times the device's own work, its idle gaps (a host that keeps it waiting) included and the host's
// queueing ahead not, as torch's DDP logger and its peers time theirs; reading a span waits for its
// later point's event (read after the device got there, e.g. after the step's synchronize, it costs
// nothing). A span with a point never marked since clear() reads 0.
class DeviceClock {
 public:
  DeviceClock(const Device& device, std::size_t points);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;
  bool onDevice() const { return !events_.empty(); }
  void mark(std::size_t point);
  bool marked(std::size_t point) const { return marked_.at(point); }
  void clear();
  // Nanoseconds from `from` to `to` (negative when `to` came first); 0 unless both are marked.
  std::int64_t ns(std::size_t from, std::size_t to) const;

 private:
  std::vector<void*> events_;  // CUDA events, one per point (empty on the host)
  std::vector<std::chrono::steady_clock::time_point> times_;
  std::vector<bool> marked_;
};

// Limits OpenBLAS to `n` threads (several ranks on few cores: 1 each). Returns the previous count.
int setBlasThreads(int n);

}  // namespace ds::ddp::ops
