#include "reports/sweep/sweep_schema.h"

#include <algorithm>
#include <cmath>

#include "engine/common/error.h"
#include "reports/stats.h"

namespace ds::report {

IterStats computeIterStats(std::vector<double> us) {
  IterStats s;
  s.n = static_cast<int>(us.size());
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.minUs = us.front();
  s.maxUs = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.avgUs = sum / static_cast<double>(us.size());
  s.p50Us = quantileSorted(us, 0.50);
  s.p95Us = quantileSorted(us, 0.95);
  s.p99Us = quantileSorted(us, 0.99);
  if (us.size() > 1) {
    double ss = 0;
    for (double v : us) ss += (v - s.avgUs) * (v - s.avgUs);
    s.stdevUs = std::sqrt(ss / static_cast<double>(us.size() - 1));
  }
  s.cvPct = s.avgUs > 0 ? 100.0 * s.stdevUs / s.avgUs : 0;
  return s;
}

bool SweepMeasurement::rounded() const { return bytes != requestedBytes; }

SweepSummary summarize(const std::vector<SweepMeasurement>& rows, double minBusBw) {
  SweepSummary s;
  s.rows = static_cast<int>(rows.size());
  double bw = 0;
  int n = 0;
  for (const auto& r : rows) {
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace}) {
      if (!p->measured) continue;
      bw += p->busBw;
      ++n;
      if (p->wrong > 0) s.outOfBounds += p->wrong;
    }
  }
  s.avgBusBw = n > 0 ? bw / n : 0;
  s.minBusBw = minBusBw;
  // nccl-tests fails a run whose average is below 90% of NCCL_TESTS_MIN_BW.
  s.bwBelowMin = minBusBw >= 0 && n > 0 && s.avgBusBw < 0.9 * minBusBw;
  if (s.outOfBounds > 0)
    s.status = "wrong_data";
  else if (s.bwBelowMin)
    s.status = "bandwidth_below_min";
  return s;
}

void to_json(nlohmann::json& j, const IterStats& s) {
  j = {{"n", s.n},          {"min_us", s.minUs},     {"max_us", s.maxUs},
       {"avg_us", s.avgUs}, {"p50_us", s.p50Us},     {"p95_us", s.p95Us},
       {"p99_us", s.p99Us}, {"stdev_us", s.stdevUs}, {"cv_pct", s.cvPct}};
}

void from_json(const nlohmann::json& j, IterStats& s) {
  j.at("n").get_to(s.n);
  j.at("min_us").get_to(s.minUs);
  j.at("max_us").get_to(s.maxUs);
  j.at("avg_us").get_to(s.avgUs);
  j.at("p50_us").get_to(s.p50Us);
  j.at("p95_us").get_to(s.p95Us);
  j.at("p99_us").get_to(s.p99Us);
  j.at("stdev_us").get_to(s.stdevUs);
  j.at("cv_pct").get_to(s.cvPct);
}

namespace {

nlohmann::json placeToJson(const PlaceResult& p) {
  if (!p.measured) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : p.ranks) ranks.push_back({{"rank", r.rank}, {"time_us", r.timeUs}, {"iter", r.iter}});
  return {{"time", p.timeUs},
          {"alg_bw", p.algBw},
          {"bus_bw", p.busBw},
          {"nwrong", p.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.wrong)},
          {"iters", p.iters},
          {"iter", p.iter},
          {"straggler", {{"rank", p.slowestRank}, {"spread_pct", p.spreadPct}}},
          {"ranks", ranks}};
}

PlaceResult placeFromJson(const nlohmann::json& j) {
  PlaceResult p;
  if (j.is_null()) return p;
  p.measured = true;
  j.at("time").get_to(p.timeUs);
  j.at("alg_bw").get_to(p.algBw);
  j.at("bus_bw").get_to(p.busBw);
  p.wrong = j.at("nwrong").is_null() ? -1 : j.at("nwrong").get<long long>();
  j.at("iters").get_to(p.iters);
  j.at("iter").get_to(p.iter);
  j.at("straggler").at("rank").get_to(p.slowestRank);
  j.at("straggler").at("spread_pct").get_to(p.spreadPct);
  for (const auto& r : j.at("ranks")) {
    RankTiming t;
    r.at("rank").get_to(t.rank);
    r.at("time_us").get_to(t.timeUs);
    r.at("iter").get_to(t.iter);
    p.ranks.push_back(t);
  }
  return p;
}

}  // namespace

void to_json(nlohmann::json& j, const SweepMeasurement& m) {
  j = {{"backend", m.backend},
       {"collective", m.collective},
       {"dtype", m.dtype},
       {"op", m.op},
       {"root", m.root},
       {"world_size", m.worldSize},
       {"requested_bytes", m.requestedBytes},
       {"size", m.bytes},
       {"count", m.count},
       {"bus_factor", m.busFactor},
       {"out_of_place", placeToJson(m.outOfPlace)},
       {"in_place", placeToJson(m.inPlace)}};
}

void from_json(const nlohmann::json& j, SweepMeasurement& m) {
  j.at("backend").get_to(m.backend);
  j.at("collective").get_to(m.collective);
  j.at("dtype").get_to(m.dtype);
  j.at("op").get_to(m.op);
  j.at("root").get_to(m.root);
  j.at("world_size").get_to(m.worldSize);
  j.at("requested_bytes").get_to(m.requestedBytes);
  j.at("size").get_to(m.bytes);
  j.at("count").get_to(m.count);
  j.at("bus_factor").get_to(m.busFactor);
  m.outOfPlace = placeFromJson(j.at("out_of_place"));
  m.inPlace = placeFromJson(j.at("in_place"));
}

void to_json(nlohmann::json& j, const SweepArgs& a) {
  j = {{"minbytes", a.minBytes},
       {"maxbytes", a.maxBytes},
       {"stepbytes", a.stepBytes},
       {"stepfactor", a.stepFactor},
       {"iters", a.iters},
       {"warmup_iters", a.warmupIters},
       {"check", a.check},
       {"op", a.ops},
       {"datatype", a.dtypes},
       {"root", a.root},
       {"average", a.average},
       {"timeout_s", a.timeoutS},
       {"min_time_s", a.minTimeS},
       {"blocking", a.blocking},
       {"collectives", a.collectives},
       {"backends", a.backends}};
}

void from_json(const nlohmann::json& j, SweepArgs& a) {
  j.at("minbytes").get_to(a.minBytes);
  j.at("maxbytes").get_to(a.maxBytes);
  j.at("stepbytes").get_to(a.stepBytes);
  j.at("stepfactor").get_to(a.stepFactor);
  j.at("iters").get_to(a.iters);
  j.at("warmup_iters").get_to(a.warmupIters);
  j.at("check").get_to(a.check);
  j.at("op").get_to(a.ops);
  j.at("datatype").get_to(a.dtypes);
  j.at("root").get_to(a.root);
  j.at("average").get_to(a.average);
  j.at("timeout_s").get_to(a.timeoutS);
  j.at("min_time_s").get_to(a.minTimeS);
  j.at("blocking").get_to(a.blocking);
  j.at("collectives").get_to(a.collectives);
  j.at("backends").get_to(a.backends);
}

void to_json(nlohmann::json& j, const SweepMetadata& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : m.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"local_rank", r.localRank},
                     {"node_rank", r.nodeRank},
                     {"host", r.host},
                     {"pid", r.pid},
                     {"device", r.device}});
  }
  j = {{"command_line", m.commandLine},
       {"hosts", m.hosts},
       {"world_size", m.worldSize},
       {"ranks", ranks},
       {"launcher", m.launcher},
       {"versions", m.versions},
       {"env", m.env},
       {"start_time", m.startTime},
       {"end_time", m.endTime}};
  if (!m.label.empty()) j["label"] = m.label;
  if (!m.source.empty()) j["source"] = m.source;
}

void from_json(const nlohmann::json& j, SweepMetadata& m) {
  j.at("command_line").get_to(m.commandLine);
  j.at("hosts").get_to(m.hosts);
  j.at("world_size").get_to(m.worldSize);
  for (const auto& r : j.at("ranks")) {
    SweepRank x;
    r.at("rank").get_to(x.rank);
    r.at("local_rank").get_to(x.localRank);
    r.at("node_rank").get_to(x.nodeRank);
    r.at("host").get_to(x.host);
    r.at("pid").get_to(x.pid);
    r.at("device").get_to(x.device);
    m.ranks.push_back(x);
  }
  j.at("launcher").get_to(m.launcher);
  j.at("versions").get_to(m.versions);
  j.at("env").get_to(m.env);
  j.at("start_time").get_to(m.startTime);
  j.at("end_time").get_to(m.endTime);
  m.label = j.value("label", "");
  m.source = j.value("source", "");
}

void to_json(nlohmann::json& j, const SweepSummary& s) {
  j = {{"out_of_bounds", s.outOfBounds},
       {"avg_bus_bw", s.avgBusBw},
       {"rows", s.rows},
       {"min_bus_bw", s.minBusBw},
       {"bw_below_min", s.bwBelowMin},
       {"status", s.status},
       {"error", s.error},
       {"exit_code", s.exitCode}};
}

void from_json(const nlohmann::json& j, SweepSummary& s) {
  j.at("out_of_bounds").get_to(s.outOfBounds);
  j.at("avg_bus_bw").get_to(s.avgBusBw);
  j.at("rows").get_to(s.rows);
  j.at("min_bus_bw").get_to(s.minBusBw);
  j.at("bw_below_min").get_to(s.bwBelowMin);
  j.at("status").get_to(s.status);
  j.at("error").get_to(s.error);
  j.at("exit_code").get_to(s.exitCode);
}

nlohmann::json sweepToJson(const SweepRun& run) {
  return {{"schema", kSweepSchemaName}, {"schema_version", kSweepSchemaVersion},
          {"args", run.args},           {"metadata", run.metadata},
          {"results", run.results},     {"notes", run.notes},
          {"summary", run.summary}};
}

SweepRun sweepFromJson(const nlohmann::json& j, const std::string& origin) {
  try {
    if (!j.is_object() || j.value("schema", "") != kSweepSchemaName) {
      throw ConfigError(fmt::format("{} is not a dsperf sweep result (schema '{}', expected '{}').", origin,
                                    j.is_object() ? j.value("schema", "") : "", kSweepSchemaName));
    }
    checkSchemaVersion(j, kSweepSchemaName, origin);
    SweepRun run;
    j.at("args").get_to(run.args);
    j.at("metadata").get_to(run.metadata);
    j.at("results").get_to(run.results);
    j.at("notes").get_to(run.notes);
    j.at("summary").get_to(run.summary);
    return run;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{} is not a valid dsperf sweep result: {}", origin, e.what()));
  }
}

}  // namespace ds::report
