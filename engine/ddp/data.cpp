#include "engine/ddp/data.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/common/error.h"
#include "engine/ddp/ops.h"
#include "engine/ddp/random.h"

namespace ds::ddp {

TeacherStudentDataset::TeacherStudentDataset(const DatasetOptions& o) : options_(o) {
  if (o.samples == 0 || o.inDim <= 0 || o.outDim <= 0 || o.teacherHidden <= 0) {
    throw ConfigError(
        fmt::format("dataset: samples ({}), in ({}), out ({}) and teacher width ({}) must be positive",
                    o.samples, o.inDim, o.outDim, o.teacherHidden));
  }
  const auto n = static_cast<std::int64_t>(o.samples);
  Rng rng(o.seed);
  Tensor x = Tensor::zeros({n, o.inDim});
  Tensor w1 = Tensor::zeros({o.teacherHidden, o.inDim});
  Tensor w2 = Tensor::zeros({o.outDim, o.teacherHidden});
  auto fill = [&](Tensor& t, double stddev) {
    float* p = t.data<float>();
    for (std::size_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(stddev * rng.normal());
  };
  fill(x, 1.0);
  // Pre-activations ~ N(0, 1) and outputs of unit-ish variance: a target the student can learn.
  fill(w1, 1.0 / std::sqrt(static_cast<double>(o.inDim)));
  fill(w2, 1.5 / std::sqrt(static_cast<double>(o.teacherHidden)));
  Tensor h = Tensor::zeros({n, o.teacherHidden});
  ops::gemm(false, true, 1.0f, x, w1, 0.0f, h);
  float* ph = h.data<float>();
  for (std::size_t i = 0; i < h.numel(); ++i) ph[i] = std::tanh(ph[i]);
  Tensor y = Tensor::zeros({n, o.outDim});
  ops::gemm(false, true, 1.0f, h, w2, 0.0f, y);
  x_ = x.toVector();
  y_ = y.toVector();
}

void TeacherStudentDataset::batch(const std::vector<std::size_t>& indices, Tensor& x, Tensor& y,
                                  Device device) const {
  const auto n = static_cast<std::int64_t>(indices.size());
  const std::size_t in = static_cast<std::size_t>(options_.inDim);
  const std::size_t out = static_cast<std::size_t>(options_.outDim);
  Tensor hx = Tensor::zeros({n, options_.inDim});
  Tensor hy = Tensor::zeros({n, options_.outDim});
  float* px = hx.data<float>();
  float* py = hy.data<float>();
  for (std::size_t r = 0; r < indices.size(); ++r) {
    DS_CHECK(indices[r] < options_.samples, "sample {} outside a dataset of {}", indices[r],
             options_.samples);
    std::memcpy(px + r * in, x_.data() + indices[r] * in, in * sizeof(float));
    std::memcpy(py + r * out, y_.data() + indices[r] * out, out * sizeof(float));
  }
  if (device.type == DeviceType::kCpu) {
    x = hx;
    y = hy;
  } else {
    // Into the caller's device tensors when they fit (a training loop's, kept across steps): a fresh
    // allocation per batch would also free the last one, and cudaFree waits for the whole device.
    auto into = [&](const Tensor& host, Tensor& dst) {
      if (!dst.defined() || dst.shape() != host.shape() || dst.dtype() != host.dtype() || !(dst.device() == device)) {
        dst = host.to(device);
        return;
      }
      ops::copy(host, dst);
    };
    into(hx, x);
    into(hy, y);
  }
}

DistributedSampler::DistributedSampler(std::size_t datasetSize, const SamplerOptions& o)
    : size_(datasetSize), options_(o) {
  if (o.numReplicas < 1 || o.rank < 0 || o.rank >= o.numReplicas) {
    throw ConfigError(
        fmt::format("DistributedSampler: invalid rank {}, rank should be in the interval [0, {}]", o.rank,
                    o.numReplicas - 1));
  }
  const auto replicas = static_cast<std::size_t>(o.numReplicas);
  if (o.dropLast && size_ % replicas != 0) {
    // torch: math.ceil((len(dataset) - num_replicas) / num_replicas)
    numSamples_ = size_ >= replicas ? (size_ - replicas + replicas - 1) / replicas : 0;
  } else {
    numSamples_ = (size_ + replicas - 1) / replicas;
  }
}

std::vector<std::size_t> DistributedSampler::indices() const {
  std::vector<std::size_t> all(size_);
  std::iota(all.begin(), all.end(), std::size_t{0});
  if (options_.shuffle) {
    Rng rng(options_.seed + epoch_);
    for (std::size_t i = size_; i > 1; --i) std::swap(all[i - 1], all[rng.below(i)]);
  }
  const std::size_t total = totalSize();
  if (!options_.dropLast) {
    // Pad by repeating the permutation from its start until the total is reached.
    std::size_t original = all.size();
    for (std::size_t i = 0; all.size() < total && original > 0; ++i) all.push_back(all[i % original]);
  } else {
    all.resize(total);
  }
  std::vector<std::size_t> mine;
  mine.reserve(numSamples_);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total;
       i += static_cast<std::size_t>(options_.numReplicas)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace ds::ddp
