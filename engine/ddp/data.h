// Synthetic teacher-student data and PyTorch's DistributedSampler.
//
// The dataset is a fixed random "teacher" network y = W2 tanh(W1 x) applied to x ~ N(0, 1), all
// deterministic from a seed, so that every rank holds the same samples and a student MLP's loss
// really falls. The sampler gives each rank its shard of the index space with
// torch.utils.data.DistributedSampler's rules.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ddp/tensor.h"

namespace ds::ddp {

struct DatasetOptions {
  std::size_t samples = 1024;
  int inDim = 64;
  int outDim = 64;
  int teacherHidden = 32;
  std::uint64_t seed = 1234;
};

class TeacherStudentDataset {
 public:
  // Generates every sample up front (samples x (in + out) floats on the host). Throws ConfigError on
  // zero sizes.
  explicit TeacherStudentDataset(const DatasetOptions& options);
  std::size_t size() const { return options_.samples; }
  const DatasetOptions& options() const { return options_; }
  // Rows `indices` of x and y, as [n, in] and [n, out] tensors on `device`. On a GPU, x and y are
  // written in place when they already are f32 tensors of that shape on that device (a loop's, kept
  // across steps: no allocation and free per batch), else replaced.
  void batch(const std::vector<std::size_t>& indices, Tensor& x, Tensor& y, Device device = {}) const;

 private:
  DatasetOptions options_;
  std::vector<float> x_;
  std::vector<float> y_;
};

struct SamplerOptions {
  int numReplicas = 1;
  int rank = 0;
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool dropLast = false;
};

// torch.utils.data.DistributedSampler: a permutation of [0, n) seeded by seed + epoch (identical on
// every rank; the same rule as torch, not torch's random stream), then either padded by wrapping
// around to a multiple of numReplicas (dropLast = false) or cut to one (dropLast = true), then
// rank r takes every numReplicas-th index from r.
class DistributedSampler {
 public:
  // Throws ConfigError when rank is outside [0, numReplicas) or numReplicas < 1.
  DistributedSampler(std::size_t datasetSize, const SamplerOptions& options);
  void setEpoch(std::uint64_t epoch) { epoch_ = epoch; }
  std::uint64_t epoch() const { return epoch_; }
  // Samples per rank per epoch (torch's num_samples) and their total.
  std::size_t numSamples() const { return numSamples_; }
  std::size_t totalSize() const { return numSamples_ * static_cast<std::size_t>(options_.numReplicas); }
  // This rank's indices for the current epoch, in order.
  std::vector<std::size_t> indices() const;

 private:
  std::size_t size_;
  SamplerOptions options_;
  std::uint64_t epoch_ = 0;
  std::size_t numSamples_ = 0;
};

}  // namespace ds::ddp
