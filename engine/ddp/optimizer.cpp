#include "engine/ddp/optimizer.h"

#include <fmt/format.h>

#include "engine/common/error.h"
#include "engine/ddp/ops.h"

namespace ds::ddp {

namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o) : o_(o), weightDecay_(o.weightDecay.value_or(0.0f)) {}
  std::string name() const override { return "sgd"; }
  void step(std::vector<Parameter>& params) override {
    if (buffers_.empty() && o_.momentum != 0.0f) {
      for (auto& p : params)
        buffers_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
    }
    DS_CHECK(o_.momentum == 0.0f || buffers_.size() == params.size(),
             "optimizer called with another parameter list");
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor none;
      ops::sgdStep(params[i].value, params[i].grad, o_.momentum != 0.0f ? buffers_[i] : none, steps_ == 0,
                   o_.lr, o_.momentum, o_.dampening, weightDecay_);
    }
    ++steps_;
  }

 private:
  OptimizerOptions o_;
  float weightDecay_;
  std::vector<Tensor> buffers_;
  long steps_ = 0;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(const OptimizerOptions& o) : o_(o), weightDecay_(o.weightDecay.value_or(0.01f)) {}
  std::string name() const override { return "adamw"; }
  void step(std::vector<Parameter>& params) override {
    if (m_.empty()) {
      for (auto& p : params) {
        m_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
        v_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
      }
    }
    DS_CHECK(m_.size() == params.size(), "optimizer called with another parameter list");
    ++steps_;
    for (std::size_t i = 0; i < params.size(); ++i) {
      ops::adamwStep(params[i].value, params[i].grad, m_[i], v_[i], steps_, o_.lr, o_.beta1, o_.beta2, o_.eps,
                     weightDecay_);
    }
  }

 private:
  OptimizerOptions o_;
  float weightDecay_;
  std::vector<Tensor> m_, v_;
  long steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& o) {
  if (!(o.lr > 0.0f))
    throw ConfigError(fmt::format("optimizer: learning rate must be positive, got {}", o.lr));
  if (o.kind == "sgd") return std::make_unique<Sgd>(o);
  if (o.kind == "adamw") return std::make_unique<AdamW>(o);
  throw ConfigError(fmt::format("unknown optimizer '{}'; expected sgd or adamw", o.kind));
}

}  // namespace ds::ddp
