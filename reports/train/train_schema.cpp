#include "reports/train/train_schema.h"
#include "reports/json_io.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/common/error.h"
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
  j.at("p50").get_to(p.p50);
  j.at("p90").get_to(p.p90);
  j.at("p99").get_to(p.p99);
  j.at("min").get_to(p.min);
  j.at("max").get_to(p.max);
  j.at("mean").get_to(p.mean);
  j.at("samples").get_to(p.samples);
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
}

void from_json(const nlohmann::json& j, TrainRunRecord& r) {
  j.at("model").get_to(r.model);
  j.at("params").get_to(r.params);
  j.at("world_size").get_to(r.worldSize);
  j.at("backend").get_to(r.backend);
  j.at("device").get_to(r.device);
  j.at("per_rank_batch").get_to(r.perRankBatch);
  j.at("steps").get_to(r.steps);
  j.at("warmup").get_to(r.warmup);
  j.at("optimizer").get_to(r.optimizer);
  j.at("bucket_cap_mb").get_to(r.bucketCapMb);
  j.at("overlap").get_to(r.overlap);
  j.at("comm_hook").get_to(r.commHook);
  j.at("gradient_as_bucket_view").get_to(r.gradientAsBucketView);
  j.at("buckets").get_to(r.buckets);
  const auto& t = j.at("time_ms");
  t.at("forward").get_to(r.forwardMs);
  t.at("backward_compute").get_to(r.backwardComputeMs);
  t.at("backward_comm").get_to(r.backwardCommMs);
  t.at("exposed_comm").get_to(r.exposedCommMs);
  t.at("optimizer").get_to(r.optimizerMs);
  t.at("step").get_to(r.stepMs);
  t.at("comm_busy").get_to(r.commBusyMs);
  j.at("samples_per_sec").get_to(r.samplesPerSec);
  j.at("overlap_efficiency").get_to(r.overlapEfficiency);
  j.at("hidden_comm_ms").get_to(r.hiddenCommMs);
  j.at("loss").at("start").get_to(r.lossStart);
  j.at("loss").at("end").get_to(r.lossEnd);
  const auto& d = j.at("ddp_logging");
  d.at("avg_forward_compute_time").get_to(r.ddp.avg_forward_compute_time);
  d.at("avg_backward_compute_time").get_to(r.ddp.avg_backward_compute_time);
  d.at("avg_backward_comm_time").get_to(r.ddp.avg_backward_comm_time);
  d.at("avg_backward_compute_comm_overlap_time").get_to(r.ddp.avg_backward_compute_comm_overlap_time);
  d.at("avg_exposed_comm_time").get_to(r.ddp.avg_exposed_comm_time);
  d.at("bucket_sizes").get_to(r.ddp.bucket_sizes);
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
  if (!j.is_object() || j.value("schema", "") != kTrainSchemaName) {
    throw ConfigError(
        fmt::format("{}: not a dsbench train result (schema is not \"{}\")", origin, kTrainSchemaName));
  }
  checkSchemaVersion(j, kTrainSchemaName, origin);
  try {
    return j.at("runs").get<std::vector<TrainRunRecord>>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: malformed train result: {}", origin, e.what()));
  }
}

}  // namespace ds::report
