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

 protected:
  void update(std::vector<Tensor>& values, const std::vector<Tensor>& grads) override {
    if (buffers_.empty() && o_.momentum != 0.0f) {
      for (auto& v : values) buffers_.push_back(Tensor::zeros(v.shape(), DType::kF32, v.device()));
    }
    DS_CHECK(o_.momentum == 0.0f || buffers_.size() == values.size(),
             "optimizer called with another parameter list");
    for (std::size_t i = 0; i < values.size(); ++i) {
      Tensor none;
      ops::sgdStep(values[i], grads[i], o_.momentum != 0.0f ? buffers_[i] : none, steps_ == 0, o_.lr,
                   o_.momentum, o_.dampening, weightDecay_);
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

 protected:
  void update(std::vector<Tensor>& values, const std::vector<Tensor>& grads) override {
    if (m_.empty()) {
      for (auto& v : values) {
        m_.push_back(Tensor::zeros(v.shape(), DType::kF32, v.device()));
        v_.push_back(Tensor::zeros(v.shape(), DType::kF32, v.device()));
      }
    }
    DS_CHECK(m_.size() == values.size(), "optimizer called with another parameter list");
    ++steps_;
    for (std::size_t i = 0; i < values.size(); ++i) {
      ops::adamwStep(values[i], grads[i], m_[i], v_[i], steps_, o_.lr, o_.beta1, o_.beta2, o_.eps,
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

void Optimizer::step(std::vector<Parameter>& params) {
  if (masters_.empty()) {
    masters_.resize(params.size());
    grads32_.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].value.dtype() == DType::kF32) continue;
      masters_[i] = params[i].value.toDType(DType::kF32);
      grads32_[i] = Tensor::zeros(params[i].value.shape(), DType::kF32, params[i].value.device());
    }
  }
  DS_CHECK(masters_.size() == params.size(), "optimizer called with another parameter list");
  std::vector<Tensor> values, grads;
  values.reserve(params.size());
  grads.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!masters_[i].defined()) {
      values.push_back(params[i].value);
      grads.push_back(params[i].grad);
      continue;
    }
    ops::scaleCopy(params[i].grad, 1.0f, grads32_[i]);
    values.push_back(masters_[i]);
    grads.push_back(grads32_[i]);
  }
  update(values, grads);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (masters_[i].defined()) ops::scaleCopy(masters_[i], 1.0f, params[i].value);
  }
}

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions& o) {
  if (!(o.lr > 0.0f))
    throw ConfigError(fmt::format("optimizer: learning rate must be positive, got {}", o.lr));
  if (o.kind == "sgd") return std::make_unique<Sgd>(o);
  if (o.kind == "adamw") return std::make_unique<AdamW>(o);
  throw ConfigError(fmt::format("unknown optimizer '{}'; expected sgd or adamw", o.kind));
}

}  // namespace ds::ddp
