// Optimizers with PyTorch's update rules: SGD (momentum, dampening, weight decay) and AdamW
// (decoupled weight decay, bias-corrected moments). State is created lazily per parameter, in f32.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/ddp/mlp.h"

namespace ds::ddp {

struct OptimizerOptions {
  std::string kind = "sgd";  // sgd or adamw
  float lr = 0.01f;
  float momentum = 0.9f;   // sgd
  float dampening = 0.0f;  // sgd
  // Empty: torch's default (sgd 0, adamw 0.01).
  std::optional<float> weightDecay;
  float beta1 = 0.9f;  // adamw
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update of every parameter from its grad. The parameters must be the same list every call.
  // bf16 parameters are updated through f32 master weights, as DeepSpeed's bf16 optimizer does: the
  // first step copies each bf16 parameter into an f32 master; every step widens the bf16 gradient to
  // f32, updates the master (and the optimizer state, all f32) and writes the master back rounded to
  // bf16. Updates smaller than a bf16 step thus accumulate instead of being rounded away.
  void step(std::vector<Parameter>& params);

 protected:
  // One update of f32 values from f32 gradients (the parameters themselves, or their masters).
  virtual void update(std::vector<Tensor>& values, const std::vector<Tensor>& grads) = 0;

 private:
  // Per parameter: the f32 master and gradient of a bf16 parameter; undefined for an f32 one.
  std::vector<Tensor> masters_, grads32_;
};

// Throws ConfigError for an unknown kind or a non-positive learning rate.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options);

}  // namespace ds::ddp
