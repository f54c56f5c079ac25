#include "engine/ddp/mlp.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "engine/common/error.h"
#include "engine/ddp/random.h"

namespace ds::ddp {

namespace {

constexpr const char* kSpecForms =
    "a preset (1m, 25m, 100m) or mlp:WIDTHxLAYERS[,act=gelu|relu][,bias=1|0][,in=N][,out=N], e.g. mlp:1024x8";

int parsePositive(const std::string& text, const std::string& whole, const char* what) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0) {
    throw ConfigError(fmt::format("model spec '{}': {} '{}' is not a positive integer; expected {}", whole,
                                  what, text, kSpecForms));
  }
  return v;
}

}  // namespace

std::size_t MlpSpec::paramCount() const {
  std::size_t n = 0;
  for (int l = 0; l < layers; ++l) {
    std::size_t fanIn = static_cast<std::size_t>(l == 0 ? in() : width);
    std::size_t fanOut = static_cast<std::size_t>(l == layers - 1 ? out() : width);
    n += fanIn * fanOut + (bias ? fanOut : 0);
  }
  return n;
}

double MlpSpec::gemmFlopsPerSample() const {
  double flops = 0;
  for (int l = 0; l < layers; ++l) {
    const double fanIn = l == 0 ? in() : width;
    const double fanOut = l == layers - 1 ? out() : width;
    flops += (l == 0 ? 4.0 : 6.0) * fanIn * fanOut;
  }
  return flops;
}

std::string MlpSpec::toString() const {
  std::string s = fmt::format("mlp:{}x{}", width, layers);
  if (activation != ops::Activation::kGelu) s += fmt::format(",act={}", ops::activationName(activation));
  if (!bias) s += ",bias=0";
  if (inDim > 0 && inDim != width) s += fmt::format(",in={}", inDim);
  if (outDim > 0 && outDim != width) s += fmt::format(",out={}", outDim);
  return s;
}

const std::vector<ModelPreset>& modelPresets() {
  static const std::vector<ModelPreset> presets{
      {"1m", "mlp:512x4", "4 layers of 512: 1.05M parameters (4.2 MB of f32 gradients)"},
      {"25m", "mlp:1024x24", "24 layers of 1024: 25.2M parameters (101 MB of f32 gradients)"},
      {"100m", "mlp:2048x24", "24 layers of 2048: 100.7M parameters (403 MB of f32 gradients)"},
  };
  return presets;
}

MlpSpec parseModelSpec(const std::string& text) {
  for (const auto& p : modelPresets()) {
    if (text == p.name || text == fmt::format("mlp-{}", p.name)) return parseModelSpec(p.spec);
  }
  if (text.rfind("mlp:", 0) != 0) {
    throw ConfigError(fmt::format("unknown model '{}'; expected {}", text, kSpecForms));
  }
  std::vector<std::string> parts;
  std::string rest = text.substr(4);
  for (std::size_t start = 0;;) {
    auto comma = rest.find(',', start);
    parts.push_back(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  MlpSpec s;
  auto x = parts[0].find('x');
  if (x == std::string::npos) {
    throw ConfigError(
        fmt::format("model spec '{}': '{}' is not WIDTHxLAYERS; expected {}", text, parts[0], kSpecForms));
  }
  s.width = parsePositive(parts[0].substr(0, x), text, "width");
  s.layers = parsePositive(parts[0].substr(x + 1), text, "layers");
  for (std::size_t i = 1; i < parts.size(); ++i) {
    auto eq = parts[i].find('=');
    std::string key = parts[i].substr(0, eq);
    std::string value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (key == "act" && value == "gelu") {
      s.activation = ops::Activation::kGelu;
    } else if (key == "act" && value == "relu") {
      s.activation = ops::Activation::kRelu;
    } else if (key == "bias" && (value == "1" || value == "0")) {
      s.bias = value == "1";
    } else if (key == "in") {
      s.inDim = parsePositive(value, text, "in");
    } else if (key == "out") {
      s.outDim = parsePositive(value, text, "out");
    } else {
      throw ConfigError(
          fmt::format("model spec '{}': unknown option '{}'; expected {}", text, parts[i], kSpecForms));
    }
  }
  return s;
}

Mlp::Mlp(const MlpSpec& spec, std::uint64_t seed, Device device, DType dtype)
    : spec_(spec), device_(device), dtype_(dtype) {
  if (spec.width <= 0 || spec.layers <= 0) {
    throw ConfigError(fmt::format("model {}: width and layers must be positive", spec.toString()));
  }
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    throw ConfigError(fmt::format("model {}: parameters of {} are not supported; use f32 or bf16",
                                  spec.toString(), comm::dtypeName(dtype)));
  }
  Rng rng(seed);
  for (int l = 0; l < spec.layers; ++l) {
    Layer layer;
    layer.in = l == 0 ? spec.in() : spec.width;
    layer.out = l == spec.layers - 1 ? spec.out() : spec.width;
    layer.activation = l != spec.layers - 1 && spec.activation != ops::Activation::kNone;
    const double bound = 1.0 / std::sqrt(static_cast<double>(layer.in));
    auto make = [&](const std::string& name, std::vector<std::int64_t> shape) {
      std::vector<float> values(numelOf(shape));
      for (auto& v : values) v = static_cast<float>(rng.uniform(-bound, bound));
      Parameter p;
      p.name = name;
      p.value = Tensor::fromVector(shape, values, device);
      if (dtype != DType::kF32) p.value = p.value.toDType(dtype);
      p.grad = Tensor::zeros(shape, dtype, device);
      params_.push_back(std::move(p));
      return params_.size() - 1;
    };
    layer.weight = make(fmt::format("layers.{}.weight", l), {layer.out, layer.in});
    if (spec.bias) layer.bias = make(fmt::format("layers.{}.bias", l), {layer.out});
    layers_.push_back(std::move(layer));
  }
}

void Mlp::ensureBatch(std::int64_t batch) {
  if (batch == batch_) return;
  int widest = std::max(spec_.in(), spec_.out());
  widest = std::max(widest, spec_.width);
  for (auto& layer : layers_) {
    layer.pre = Tensor::zeros({batch, layer.out}, dtype_, device_);
    layer.post = layer.activation ? Tensor::zeros({batch, layer.out}, dtype_, device_) : layer.pre;
  }
  gradA_ = Tensor::zeros({batch * widest}, dtype_, device_);
  gradB_ = Tensor::zeros({batch * widest}, dtype_, device_);
  batch_ = batch;
}

const Tensor& Mlp::forward(const Tensor& x) {
  if (x.shape().size() != 2 || x.dim(1) != spec_.in()) {
    throw ConfigError(fmt::format("model {} takes [batch, {}] inputs, got {}", spec_.toString(), spec_.in(),
                                  x.shapeString()));
  }
  if (x.dtype() != dtype_) {
    throw ConfigError(fmt::format("model {} has {} parameters and takes {} inputs, got {}; convert the batch "
                                  "first (Tensor::toDType)",
                                  spec_.toString(), comm::dtypeName(dtype_), comm::dtypeName(dtype_),
                                  comm::dtypeName(x.dtype())));
  }
  ensureBatch(x.dim(0));
  Tensor input = x;
  for (auto& layer : layers_) {
    layer.input = input;
    ops::gemm(false, true, 1.0f, input, params_[layer.weight].value, 0.0f, layer.pre);
    if (spec_.bias) ops::addBias(layer.pre, params_[layer.bias].value);
    if (layer.activation) ops::activationForward(spec_.activation, layer.pre, layer.post);
    input = layer.post;
  }
  haveForward_ = true;
  return layers_.back().post;
}

void Mlp::backward(const Tensor& dOut, const GradReadyFn& onReady) {
  DS_CHECK(haveForward_, "Mlp::backward without a forward");
  DS_CHECK(dOut.numel() == static_cast<std::size_t>(batch_) * static_cast<std::size_t>(spec_.out()),
           "dOut {} does not match the last forward's output [{}, {}]", dOut.shapeString(), batch_,
           spec_.out());
  // dy: the gradient w.r.t. this layer's pre-activation output; ping-pongs between the scratch buffers.
  Tensor dy = dOut.reshape({batch_, spec_.out()});
  bool inA = false;
  for (std::size_t li = layers_.size(); li-- > 0;) {
    Layer& layer = layers_[li];
    if (layer.activation) {
      Tensor dpre =
          (inA ? gradB_ : gradA_).view(0, static_cast<std::size_t>(batch_) * layer.out, {batch_, layer.out});
      ops::activationBackward(spec_.activation, layer.pre, dy, dpre);
      dy = dpre;
      inA = !inA;
    }
    // dW[out, in] += dy^T [out, batch] . x [batch, in]
    ops::gemm(true, false, 1.0f, dy, layer.input, 1.0f, params_[layer.weight].grad);
    if (onReady) onReady(layer.weight);
    if (spec_.bias) {
      ops::biasGrad(dy, 1.0f, 1.0f, params_[layer.bias].grad);
      if (onReady) onReady(layer.bias);
    }
    if (li == 0) break;
    // dx[batch, in] = dy [batch, out] . W [out, in]
    Tensor dx =
        (inA ? gradB_ : gradA_).view(0, static_cast<std::size_t>(batch_) * layer.in, {batch_, layer.in});
    ops::gemm(false, false, 1.0f, dy, params_[layer.weight].value, 0.0f, dx);
    dy = dx;
    inA = !inA;
  }
  haveForward_ = false;
}

void Mlp::zeroGrad() {
  for (auto& p : params_) ops::fillZero(p.grad);
}

}  // namespace ds::ddp
