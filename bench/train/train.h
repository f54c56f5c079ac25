// `dsbench train`: end-to-end DDP training-step timing. Builds the MLP preset, wraps it in DDP on
// the world's process group, trains on synthetic teacher-student data, and reports per-step
// forward / backward compute / backward comm / exposed comm / optimizer percentiles, samples/s and
// how much of the comm the overlap hid, for every bucket cap x overlap setting asked for.
#pragma once

#include <string>
#include <vector>

#include "engine/ddp/train_loop.h"
#include "reports/train/train_schema.h"

namespace ds::bench {

struct TrainOptions {
  std::string model = "25m";              // --model: preset (1m, 25m, 100m) or mlp:WxL[,...]
  int batch = 32;                         // --batch: samples per rank per step
  int steps = 20;                         // --steps: measured steps per configuration
  int warmup = 3;                         // --warmup: steps run first and not measured
  int repeat = 1;                         // --repeat: passes over the configurations (rotated order)
  std::string backend;                    // --backend; empty: the accelerator's default
  std::string initMethod;                 // --init-method
  int timeoutSeconds = 0;                 // --timeout
  std::vector<double> bucketCapMb{25.0};  // --bucket-cap-mb: one run per value
  std::string overlap = "both";           // --overlap: on, off (one bucket after backward), both or auto
  std::string commHook = "allreduce";     // --comm-hook: allreduce, fp16, bf16
  // --dtype: the parameters', activations' and gradients' dtype, one run per value (f32, bf16; bf16
  // needs CUDA, see runTrain).
  std::vector<std::string> dtypes{"f32"};
  bool gradientAsBucketView = false;      // --gradient-as-bucket-view
  std::string optimizer = "sgd";          // --optimizer: sgd or adamw
  float lr = 0;                           // --lr; 0: 0.01 (sgd) or 1e-3 (adamw)
  std::size_t samples = 0;                // --samples; 0: 4 steps' worth, at least 1024
  int blasThreads = 0;                    // --blas-threads; 0: cores / ranks on this node
  int evalSamples = 64;                   // --eval-samples: the fixed evaluation batch (0: none)
  std::string jsonPath;                   // --json (rank 0)
  // --label: the cluster or system (metadata.label in the JSON); checked by report::checkLabel.
  std::string label;
  bool labelGiven = false;
  // --scaling: after the runs above, the first configuration again at world sizes 1..N, each on a
  // sub-group of ranks 0..k-1 (the others wait); gloo only (the mpi backend has no sub-groups yet).
  bool scaling = false;
  bool verbose = true;
};

// One rank's measured steps of one configuration, as the summary needs them.
struct StepSample {
  double forwardMs = 0, backwardComputeMs = 0, backwardCommMs = 0, exposedCommMs = 0, optimizerMs = 0,
         stepMs = 0, commBusyMs = 0, loss = 0;
  double deviceStepMs = 0;  // CUDA events (StepRecord::deviceStepNs); 0 on the host
};

// Pure: every rank's measured steps (perRank[r][step]) into the run record's statistics: split
// percentiles over all ranks' steps, samples/s from the median of the per-step maximum over ranks,
// overlap efficiency = 1 - sum(exposed) / sum(busy) (clamped to [0, 1]), losses averaged over ranks.
void summarizeSteps(const std::vector<std::vector<StepSample>>& perRank, int globalBatch,
                    report::TrainRunRecord& out);

// --dtype's values: f32 (float32, float, fp32) or bf16 (bfloat16). Throws ConfigError naming the
// value and the accepted names for anything else.
comm::DType parseTrainDType(const std::string& text);

// Collective (every rank of the job runs it). Returns the exit code (bench/exit_codes.h).
int runTrain(const TrainOptions& options);

}  // namespace ds::bench
