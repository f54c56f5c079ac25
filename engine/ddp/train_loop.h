// A complete data-parallel training run: dataset, DistributedSampler, MLP, DDP and optimizer, with
// per-step timings. Used by `dsbench train` and by the equivalence tests (a run without a process
// group is the single-process reference).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/ddp/data.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/mlp.h"
#include "engine/ddp/optimizer.h"

namespace ds::ddp {

struct TrainConfig {
  MlpSpec model;
  // Every rank builds its model from modelSeed + rank * seedStridePerRank; DDP's broadcast from
  // rank 0 must make them equal (tests set a stride to prove it).
  std::uint64_t modelSeed = 42;
  std::uint64_t seedStridePerRank = 0;
  // The dataset's in/out dims are taken from the model.
  std::size_t samples = 1024;
  int teacherHidden = 32;
  std::uint64_t dataSeed = 1234;
  bool shuffle = true;
  std::uint64_t samplerSeed = 0;
  // Samples per rank per micro-step, micro-steps per optimizer step (all but the last under no_sync;
  // the loss gradient is scaled by 1/accumulation), optimizer steps.
  int batch = 16;
  int accumulation = 1;
  int steps = 10;
  OptimizerOptions optimizer;
  DdpOptions ddp;
  Device device{};
  // The model's parameters, activations and gradients (f32 or bf16; bf16: each batch is rounded to
  // bf16, the gradients are reduced in bf16 and the optimizer steps f32 master weights).
  DType dtype = DType::kF32;
  // After every step, allgather a checksum of the parameters and throw InternalError unless every
  // rank's is bit-identical.
  bool checkReplicas = false;
  // Samples of a fixed evaluation batch (dataset indices 0..evalSamples-1, the same on every rank):
  // its loss is taken before the first step and after the last, with no gradient, so that start and
  // end compare the same data (a training step's loss is another batch each step). 0: none.
  int evalSamples = 0;
};

struct StepRecord {
  double loss = 0;  // this rank's mean loss over the step's micro-batches
  std::int64_t stepNs = 0;  // host clock: the batch's load to the step's end, device drained
  // CUDA devices only (0 on the host): the step's device time, CUDA events from the first forward to
  // the end of zero_grad, the batches already loaded, as torch's peer times its step.
  std::int64_t deviceStepNs = 0;
  // Summed over the step's micro-steps (comm comes from the synced one).
  IterationStats ddp;
};

struct TrainResult {
  std::vector<StepRecord> steps;
  std::vector<float> finalParams;  // every parameter, flattened in registration order
  std::vector<BucketSpec> buckets;
  DdpLoggingData logging;
  std::uint64_t finalChecksum = 0;
  int replicaChecks = 0;  // steps whose checksums were compared across ranks
  std::size_t paramCount = 0;
  // The evaluation batch's mean loss before the first and after the last step; NaN without one.
  double evalLossStart = std::numeric_limits<double>::quiet_NaN();
  double evalLossEnd = std::numeric_limits<double>::quiet_NaN();
};

// Collective when pg is given (every rank calls it with the same config); pg == nullptr trains one
// process without DDP. Throws ConfigError for a bad config (batch larger than the shard, ...).
TrainResult train(const TrainConfig& config, comm::ProcessGroup* pg);

// FNV-1a over the bytes of every parameter (host copies for GPU tensors).
std::uint64_t parameterChecksum(const std::vector<Parameter>& params);

}  // namespace ds::ddp
