// Shared by the gloo-thread tests, the mpirun worker and the mpirun tests: the small training runs
// whose results are compared with a single process.
#pragma once

#include <string>
#include <vector>

#include "engine/ddp/train_loop.h"

namespace ds::ddp::testing {

// The equivalence tolerance: max |param_ddp - param_single| after kSteps steps, for parameters of
// order 0.1-1. Only fp32 summation order differs (an allreduce of per-rank means against one mean
// over the global batch): measured 0-6e-8 on gloo and mpi with SGD and AdamW. 1e-6 leaves 15x room
// and still catches a missing division, a skipped bucket or one step of wrong data (those move
// parameters by more than 1e-3).
inline constexpr double kParamTolerance = 1e-6;
inline constexpr int kGlobalBatch = 16;
inline constexpr int kSteps = 6;

// A DDP run of `worldSize` ranks: per-rank batch kGlobalBatch / worldSize / accumulation, several
// buckets (small caps), ranks starting from different seeds (DDP's broadcast must fix that).
TrainConfig ddpConfig(const std::string& optimizer, int worldSize, int accumulation = 1);
// The single process the DDP run must match: batch kGlobalBatch, no accumulation, rank 0's seed.
TrainConfig referenceConfig(const std::string& optimizer);

struct Diff {
  double maxAbs = 0;
  std::size_t index = 0;
  std::size_t sizeA = 0, sizeB = 0;
};
Diff compareParams(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ds::ddp::testing
