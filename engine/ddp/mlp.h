// The model under test: a configurable MLP with a hand-written forward and backward (no autograd).
// Backward computes the layers last to first and reports each parameter the moment its gradient is
// complete, which is what lets DDP launch a bucket's allreduce while backward goes on.
//
// Spec strings: "mlp:WIDTHxLAYERS[,act=gelu|relu][,bias=1|0][,in=N][,out=N]" (in and out default to
// the width), or a preset name (modelPresets()). LAYERS linear layers: in->W, (W->W)*, W->out, with
// the activation after every layer but the last. Parameters are registered as PyTorch's nn.Linear
// does: layers.<i>.weight ([out, in]) then layers.<i>.bias ([out]).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/ddp/ops.h"
#include "engine/ddp/tensor.h"

namespace ds::ddp {

struct MlpSpec {
  int width = 1024;
  int layers = 8;
  int inDim = 0;   // 0: the width
  int outDim = 0;  // 0: the width
  ops::Activation activation = ops::Activation::kGelu;
  bool bias = true;

  int in() const { return inDim > 0 ? inDim : width; }
  int out() const { return outDim > 0 ? outDim : width; }
  std::size_t paramCount() const;
  // Floating-point operations of the GEMMs of one training step, per sample: forward 2*in*out per
  // layer; backward 2*in*out for the weight gradient and, for every layer but the first, 2*in*out for
  // the input gradient (nothing needs the gradient of the data). Bias adds, activations and the
  // optimizer are left out, as model-FLOPs counts (MFU) do. In doubles: a spec may be huge.
  double gemmFlopsPerSample() const;
  // The canonical spec string, e.g. "mlp:1024x24" (options only where not the default).
  std::string toString() const;
};

struct ModelPreset {
  const char* name;  // "1m", "25m", "100m"
  const char* spec;
  const char* what;
};
// ~1M, ~25M and ~100M parameters.
const std::vector<ModelPreset>& modelPresets();

// Parses a preset name or an "mlp:..." spec. Throws ConfigError naming the text and the accepted forms.
MlpSpec parseModelSpec(const std::string& text);

struct Parameter {
  std::string name;
  Tensor value;
  // Accumulated by backward (+=), zeroed by zeroGrad. DDP may rebind it to a view into a bucket.
  Tensor grad;
};

// Called by backward with a parameter's index as soon as its gradient is final for this backward.
using GradReadyFn = std::function<void(std::size_t paramIndex)>;

class Mlp {
 public:
  // Weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear's default), from `seed`, drawn
  // in f32 and rounded to `dtype` (f32 or bf16, as model.to(torch.bfloat16)): parameters, gradients and
  // activations are then all of that dtype. Throws ConfigError for another dtype.
  Mlp(const MlpSpec& spec, std::uint64_t seed, Device device = {}, DType dtype = DType::kF32);

  const MlpSpec& spec() const { return spec_; }
  const Device& device() const { return device_; }
  DType dtype() const { return dtype_; }
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }

  // x: [batch, in], of the model's dtype (ConfigError otherwise). Returns [batch, out]; keeps what
  // backward needs. The result stays valid until the
  // next forward.
  const Tensor& forward(const Tensor& x);
  // dOut: [batch, out], the loss gradient for the last forward. Accumulates into every
  // Parameter::grad and calls onReady(i) right after parameter i's gradient is written (order: each
  // layer's weight, then its bias, last layer first). Not reentrant.
  void backward(const Tensor& dOut, const GradReadyFn& onReady = {});
  void zeroGrad();

 private:
  struct Layer {
    std::size_t weight = 0;  // index into params_
    std::size_t bias = 0;    // valid when spec_.bias
    int in = 0;
    int out = 0;
    bool activation = false;
    Tensor input;  // [batch, in] (aliases the previous layer's output)
    Tensor pre;    // [batch, out] pre-activation
    Tensor post;   // [batch, out] after the activation (== pre storage when none)
  };
  void ensureBatch(std::int64_t batch);

  MlpSpec spec_;
  Device device_;
  DType dtype_ = DType::kF32;
  std::vector<Parameter> params_;
  std::vector<Layer> layers_;
  std::int64_t batch_ = -1;
  Tensor gradA_;  // scratch: gradient w.r.t. a layer's output
  Tensor gradB_;  // scratch: gradient w.r.t. a layer's input
  bool haveForward_ = false;
};

}  // namespace ds::ddp
