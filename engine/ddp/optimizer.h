// Optimizers with PyTorch's update rules: SGD (momentum, dampening, weight decay) and AdamW
// (decoupled weight decay, bias-corrected moments). State is created lazily per parameter.
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
  virtual void step(std::vector<Parameter>& params) = 0;
};

// Throws ConfigError for an unknown kind or a non-positive learning rate.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& options);

}  // namespace ds::ddp
