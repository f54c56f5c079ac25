#include "reports/train/train_schema.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/stats.h"

namespace ds::report {

Percentiles summarize(std::vector<double> v) {
  Percentiles p;
  p.samples = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  p.p50 = quantileSorted(v, 0.5);
  p.p90 = quantileSorted(v, 0.9);
  p.p99 = quantileSorted(v, 0.99);
  p.min = v.front();
  p.max = v.back();
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return p;
}

void to_json(nlohmann::json& j, const Percentiles& p) {
  j = {{"p50", p.p50}, {"p90", p.p90},   {"p99", p.p99},        {"min", p.min},
       {"max", p.max}, {"mean", p.mean}, {"samples", p.samples}};
}

void from_json(const nlohmann::json& j, Percentiles& p) {
  readTo(j.at("p50"), p.p50);
  readTo(j.at("p90"), p.p90);
  readTo(j.at("p99"), p.p99);
  readTo(j.at("min"), p.min);
  readTo(j.at("max"), p.max);
  readTo(j.at("mean"), p.mean);
  readTo(j.at("samples"), p.samples);
}

void to_json(nlohmann::json& j, const TrainRunRecord& r) {
  j = {{"model", r.model},
       {"params", r.params},
       {"world_size", r.worldSize},
       {"backend", r.backend},
       {"device", r.device},
       {"per_rank_batch", r.perRankBatch},
       {"steps", r.steps},
       {"warmup", r.warmup},
       {"optimizer", r.optimizer},
       {"bucket_cap_mb", r.bucketCapMb},
       {"overlap", r.overlap},
       {"comm_hook", r.commHook},
       {"gradient_as_bucket_view", r.gradientAsBucketView},
       {"buckets", r.buckets},
       {"time_ms",
        {{"forward", r.forwardMs},
         {"backward_compute", r.backwardComputeMs},
         {"backward_comm", r.backwardCommMs},
         {"exposed_comm", r.exposedCommMs},
         {"optimizer", r.optimizerMs},
         {"step", r.stepMs},
         {"comm_busy", r.commBusyMs}}},
       {"samples_per_sec", r.samplesPerSec},
       {"overlap_efficiency", r.overlapEfficiency},
       {"hidden_comm_ms", r.hiddenCommMs},
       {"loss", {{"start", r.lossStart}, {"end", r.lossEnd}}},
       {"ddp_logging",
        {{"avg_forward_compute_time", r.ddp.avg_forward_compute_time},
         {"avg_backward_compute_time", r.ddp.avg_backward_compute_time},
         {"avg_backward_comm_time", r.ddp.avg_backward_comm_time},
         {"avg_backward_compute_comm_overlap_time", r.ddp.avg_backward_compute_comm_overlap_time},
         {"avg_exposed_comm_time", r.ddp.avg_exposed_comm_time},
         {"bucket_sizes", r.ddp.bucket_sizes}}}};
  if (std::isfinite(r.evalLossStart) && std::isfinite(r.evalLossEnd) && r.evalSamples > 0) {
    j["loss"]["eval_start"] = r.evalLossStart;
    j["loss"]["eval_end"] = r.evalLossEnd;
    j["loss"]["eval_samples"] = r.evalSamples;
  }
  // Only where not f32: a file written before --dtype reads back to the same JSON, so its run id (a
  // hash of that JSON) does not change when it is ingested again.
  if (r.dtype != "f32") j["dtype"] = r.dtype;
  if (r.stepDeviceMs.samples > 0) j["time_ms"]["step_device"] = r.stepDeviceMs;
  if (r.gemmFlopsPerStep > 0) {
    j["gemm_flops_per_step"] = r.gemmFlopsPerStep;
    j["gemm_tflops"] = r.gemmTflops;
  }
  if (!r.repeats.empty()) {
    nlohmann::json reps = nlohmann::json::array();
    for (const auto& x : r.repeats)
      reps.push_back({{"step_ms", x.stepMs}, {"samples_per_sec", x.samplesPerSec}});
    j["repeats"] = std::move(reps);
  }
}

TrainRunRecord mergeTrainRepeats(const std::vector<TrainRunRecord>& reps) {
  DS_CHECK(!reps.empty(), "mergeTrainRepeats of no record");
  if (reps.size() == 1) return reps.front();
  std::vector<std::size_t> order(reps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return reps[a].stepMs.p50 < reps[b].stepMs.p50; });
  TrainRunRecord r = reps[order[(order.size() - 1) / 2]];
  r.repeats.clear();
  for (const auto& x : reps) r.repeats.push_back(TrainRepeat{x.stepMs, x.samplesPerSec});
  return r;
}

void from_json(const nlohmann::json& j, TrainRunRecord& r) {
  readTo(j.at("model"), r.model);
  readTo(j.at("params"), r.params);
  readTo(j.at("world_size"), r.worldSize);
  readTo(j.at("backend"), r.backend);
  readTo(j.at("device"), r.device);
  if (j.contains("dtype")) readTo(j.at("dtype"), r.dtype);
  readTo(j.at("per_rank_batch"), r.perRankBatch);
  readTo(j.at("steps"), r.steps);
  readTo(j.at("warmup"), r.warmup);
  readTo(j.at("optimizer"), r.optimizer);
  readTo(j.at("bucket_cap_mb"), r.bucketCapMb);
  readTo(j.at("overlap"), r.overlap);
  readTo(j.at("comm_hook"), r.commHook);
  readTo(j.at("gradient_as_bucket_view"), r.gradientAsBucketView);
  readTo(j.at("buckets"), r.buckets);
  const auto& t = j.at("time_ms");
  readTo(t.at("forward"), r.forwardMs);
  readTo(t.at("backward_compute"), r.backwardComputeMs);
  readTo(t.at("backward_comm"), r.backwardCommMs);
  readTo(t.at("exposed_comm"), r.exposedCommMs);
  readTo(t.at("optimizer"), r.optimizerMs);
  readTo(t.at("step"), r.stepMs);
  readTo(t.at("comm_busy"), r.commBusyMs);
  if (t.contains("step_device")) readTo(t.at("step_device"), r.stepDeviceMs);  // schema 1.3
  readTo(j.at("samples_per_sec"), r.samplesPerSec);
  if (j.contains("gemm_flops_per_step")) readTo(j.at("gemm_flops_per_step"), r.gemmFlopsPerStep);
  if (j.contains("gemm_tflops")) readTo(j.at("gemm_tflops"), r.gemmTflops);
  readTo(j.at("overlap_efficiency"), r.overlapEfficiency);
  readTo(j.at("hidden_comm_ms"), r.hiddenCommMs);
  readTo(j.at("loss").at("start"), r.lossStart);
  readTo(j.at("loss").at("end"), r.lossEnd);
  if (j.at("loss").contains("eval_start") && j.at("loss").contains("eval_end")) {
    readTo(j.at("loss").at("eval_start"), r.evalLossStart);
    readTo(j.at("loss").at("eval_end"), r.evalLossEnd);
    if (j.at("loss").contains("eval_samples")) readTo(j.at("loss").at("eval_samples"), r.evalSamples);
  }
  const auto& d = j.at("ddp_logging");
  readTo(d.at("avg_forward_compute_time"), r.ddp.avg_forward_compute_time);
  readTo(d.at("avg_backward_compute_time"), r.ddp.avg_backward_compute_time);
  readTo(d.at("avg_backward_comm_time"), r.ddp.avg_backward_comm_time);
  readTo(d.at("avg_backward_compute_comm_overlap_time"), r.ddp.avg_backward_compute_comm_overlap_time);
  readTo(d.at("avg_exposed_comm_time"), r.ddp.avg_exposed_comm_time);
  readTo(d.at("bucket_sizes"), r.ddp.bucket_sizes);
  if (j.contains("repeats")) {  // schema 1.1
    for (const auto& x : j.at("repeats")) {
      TrainRepeat t;
      readTo(x.at("step_ms"), t.stepMs);
      readTo(x.at("samples_per_sec"), t.samplesPerSec);
      r.repeats.push_back(t);
    }
  }
}

nlohmann::json trainToJson(const std::vector<TrainRunRecord>& runs, const nlohmann::json& metadata) {
  nlohmann::json j{{"schema", kTrainSchemaName}, {"schema_version", kTrainSchemaVersion}, {"runs", runs}};
  if (!metadata.is_null()) j["metadata"] = metadata;
  return j;
}

void appendTrainJournal(const std::string& path, const TrainRunRecord& run) {
  std::string line =
      dumpJson(nlohmann::json{
          {"schema", "dsperf.train.journal"}, {"schema_version", kTrainSchemaVersion}, {"run", run}}) +
      "\n";
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    throw IoError(fmt::format("cannot append to the journal {}: {}", path, errnoText(errno)));
  }
  bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size();
  ok = std::fflush(f) == 0 && ok;
  ::fsync(::fileno(f));
  std::fclose(f);
  if (!ok) throw IoError(fmt::format("cannot append to the journal {} (disk full?)", path));
}

std::vector<TrainRunRecord> trainFromJson(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || textOr(j, "schema", "") != kTrainSchemaName) {
    throw ConfigError(
        fmt::format("{}: not a dsbench train result (schema is not \"{}\")", origin, kTrainSchemaName));
  }
  checkSchemaVersion(j, kTrainSchemaName, origin);
  return readFields(j, origin, kTrainSchemaName, [&] { return j.at("runs").get<std::vector<TrainRunRecord>>(); });
}

}  // namespace ds::report
