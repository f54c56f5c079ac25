// The result record of `dsbench train` (one per configuration: bucket cap x overlap x hook) and its
// versioned JSON. Times are milliseconds per optimizer step; the DDP block keeps PyTorch's field
// names (REFERENCE.md §4), in nanoseconds as PyTorch reports them.
#pragma once

#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/schema/schema_version.h"

namespace ds::report {

inline constexpr const char* kTrainSchemaVersion = kSchemaVersion;  // reports/schema/schema_version.h
inline constexpr const char* kTrainSchemaName = "dsperf.train";

// Distribution of one per-step time over the measured steps of every rank.
struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0, mean = 0;
  std::size_t samples = 0;
};
// Linear-interpolated percentiles (numpy's default). Empty input: all zero.
Percentiles summarize(std::vector<double> values);

// PyTorch's DDP logging data (nanoseconds), averaged over its sampled iterations, from rank 0.
struct DdpLoggingRecord {
  long long avg_forward_compute_time = 0;
  long long avg_backward_compute_time = 0;
  long long avg_backward_comm_time = 0;
  long long avg_backward_compute_comm_overlap_time = 0;
  long long avg_exposed_comm_time = 0;
  std::vector<std::size_t> bucket_sizes;  // bytes, in launch order
};

// One repeat of a configuration (dsbench train --repeat R): its step-time distribution and
// throughput as that pass measured them.
struct TrainRepeat {
  Percentiles stepMs;
  double samplesPerSec = 0;
};

struct TrainRunRecord {
  // What ran.
  std::string model;  // canonical spec, e.g. "mlp:1024x24"
  std::size_t params = 0;
  int worldSize = 0;
  std::string backend;
  std::string device;  // cpu or cuda
  // The parameters', activations' and gradients' dtype: "f32" or "bf16" (JSON "dtype", written only
  // when not f32: files without it are f32).
  std::string dtype = "f32";
  int perRankBatch = 0;
  int steps = 0;   // measured steps
  int warmup = 0;  // steps run before measuring
  std::string optimizer;
  double bucketCapMb = 0;
  bool overlap = true;  // false: one bucket launched after backward
  std::string commHook;
  bool gradientAsBucketView = false;
  int buckets = 0;
  // Per-step splits (ms): forward, backward compute, backward comm (first launch to all reduced),
  // exposed comm (what the step waited for after backward), optimizer, whole step, and the busy time
  // of the collectives themselves.
  Percentiles forwardMs, backwardComputeMs, backwardCommMs, exposedCommMs, optimizerMs, stepMs, commBusyMs;
  // CUDA runs (schema 1.3, JSON time_ms.step_device; samples 0 elsewhere and in older files): the step's
  // device time from CUDA events, first forward to zero_grad with the batch already loaded, as torch's
  // peer times its step. stepMs is the host's clock and includes the batch's load.
  Percentiles stepDeviceMs;
  double samplesPerSec = 0;  // global batch / median step time
  // The model's GEMM FLOPs per rank per step (MlpSpec::gemmFlopsPerSample x per-rank batch) and what
  // they achieve at the median step time of the slowest rank, in TFLOP/s per rank (JSON
  // gemm_flops_per_step and gemm_tflops, optional: 0 when unknown, older files).
  double gemmFlopsPerStep = 0;
  double gemmTflops = 0;
  // Hidden comm / total comm: 1 - exposed / busy, over all measured steps (0 when no comm).
  double overlapEfficiency = 0;
  double hiddenCommMs = 0;  // mean per step
  double lossStart = 0;     // mean over ranks, first step
  double lossEnd = 0;       // mean over ranks, last step
  // The loss on a fixed evaluation batch (the same samples at both ends, no gradient) before the first
  // and after the last step: the one to trust for "did it learn". NaN when not taken (older files,
  // --eval-samples 0); JSON loss.eval_start / eval_end / eval_samples, left out then.
  double evalLossStart = std::numeric_limits<double>::quiet_NaN();
  double evalLossEnd = std::numeric_limits<double>::quiet_NaN();
  int evalSamples = 0;
  DdpLoggingRecord ddp;
  // Every repeat, in repeat order, when the configurations ran more than once (--repeat R > 1; JSON
  // "repeats", schema 1.1). The fields above are then those of the repeat with the median step time.
  std::vector<TrainRepeat> repeats;
};

// Pure: the same configuration measured once per repeat into one record: the repeat with the median
// step time (p50; the lower middle one for an even count) stands for it, and every repeat's step
// times and throughput are kept in `repeats`. A single record comes back as is.
TrainRunRecord mergeTrainRepeats(const std::vector<TrainRunRecord>& reps);

void to_json(nlohmann::json& j, const Percentiles& p);
void from_json(const nlohmann::json& j, Percentiles& p);
void to_json(nlohmann::json& j, const TrainRunRecord& r);
void from_json(const nlohmann::json& j, TrainRunRecord& r);

// {"schema": "dsperf.train", "schema_version": "1.0", "runs": [...], "metadata": {...}}; metadata (the
// command line, hosts, versions, env, start and end times) is left out when null.
nlohmann::json trainToJson(const std::vector<TrainRunRecord>& runs, const nlohmann::json& metadata = nullptr);
// Appends one finished run to a JSON-lines journal ({"schema": "dsperf.train.journal", "run": ...}),
// flushed at once, so a killed run keeps what it measured. Throws IoError naming the path.
void appendTrainJournal(const std::string& path, const TrainRunRecord& run);
// Checks schema and version; throws ConfigError naming `origin` on a mismatch or malformed input.
std::vector<TrainRunRecord> trainFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace ds::report
