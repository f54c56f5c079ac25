#include "reports/sweep/sweep_schema.h"

#include <algorithm>
#include <cmath>

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/stats.h"
#include "reports/sweep/expected.h"

namespace ds::report {

IterStats computeIterStats(std::vector<double> us) {
  IterStats s;
  s.n = static_cast<int>(us.size());
  s.p90Us = s.p999Us = 0;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.minUs = us.front();
  s.maxUs = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.avgUs = sum / static_cast<double>(us.size());
  s.p50Us = quantileSorted(us, 0.50);
  s.p90Us = quantileSorted(us, 0.90);
  s.p95Us = quantileSorted(us, 0.95);
  s.p99Us = quantileSorted(us, 0.99);
  s.p999Us = quantileSorted(us, 0.999);
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
  // Schema 1.2; an unknown tail (read from an older file) stays unknown rather than becoming 0.
  if (s.p90Us) j["p90_us"] = *s.p90Us;
  if (s.p999Us) j["p999_us"] = *s.p999Us;
}

void from_json(const nlohmann::json& j, IterStats& s) {
  readTo(j.at("n"), s.n);
  readTo(j.at("min_us"), s.minUs);
  readTo(j.at("max_us"), s.maxUs);
  readTo(j.at("avg_us"), s.avgUs);
  readTo(j.at("p50_us"), s.p50Us);
  readTo(j.at("p95_us"), s.p95Us);
  readTo(j.at("p99_us"), s.p99Us);
  readTo(j.at("stdev_us"), s.stdevUs);
  readTo(j.at("cv_pct"), s.cvPct);
  s.p90Us = s.p999Us = std::nullopt;  // schema 1.2; absent or null in older files: unknown
  for (auto [key, out] : {std::pair{"p90_us", &s.p90Us}, std::pair{"p999_us", &s.p999Us}}) {
    if (j.contains(key) && !j.at(key).is_null()) *out = j.at(key).get<double>();
  }
}

namespace {

PlaceResult mergePlace(const std::vector<const PlaceResult*>& reps) {
  std::vector<std::size_t> order(reps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return reps[a]->timeUs < reps[b]->timeUs; });
  PlaceResult p = *reps[order[(order.size() - 1) / 2]];
  p.repeats.clear();
  long long wrong = -1;
  for (const PlaceResult* r : reps) {
    if (r->wrong >= 0) wrong = std::max(wrong, 0LL) + r->wrong;
    p.repeats.push_back(RepeatStat{r->timeUs, r->algBw, r->busBw, r->iter});
  }
  p.wrong = wrong;
  return p;
}

}  // namespace

SweepMeasurement mergeRepeats(const std::vector<SweepMeasurement>& reps) {
  DS_CHECK(!reps.empty(), "mergeRepeats of no measurement");
  if (reps.size() == 1) return reps.front();
  SweepMeasurement m = reps.front();
  for (auto [field, out] : {std::pair{&SweepMeasurement::outOfPlace, &m.outOfPlace},
                            std::pair{&SweepMeasurement::inPlace, &m.inPlace}}) {
    if (!((reps.front().*field).measured)) continue;
    std::vector<const PlaceResult*> places;
    for (const auto& r : reps) places.push_back(&(r.*field));
    *out = mergePlace(places);
  }
  return m;
}

namespace {

nlohmann::json placeToJson(const PlaceResult& p) {
  if (!p.measured) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : p.ranks) ranks.push_back({{"rank", r.rank}, {"time_us", r.timeUs}, {"iter", r.iter}});
  nlohmann::json j{{"time", p.timeUs},
                   {"alg_bw", p.algBw},
                   {"bus_bw", p.busBw},
                   {"nwrong", p.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.wrong)},
                   {"iters", p.iters},
                   {"iter", p.iter},
                   {"straggler", {{"rank", p.slowestRank}, {"spread_pct", p.spreadPct}}},
                   {"ranks", ranks}};
  if (!p.timesUs.empty()) j["times_us"] = p.timesUs;  // -I 1|2 only (schema 1.2)
  if (!p.repeats.empty()) {
    nlohmann::json reps = nlohmann::json::array();
    for (const auto& r : p.repeats) {
      reps.push_back({{"time", r.timeUs}, {"alg_bw", r.algBw}, {"bus_bw", r.busBw}, {"iter", r.iter}});
    }
    j["repeats"] = std::move(reps);
  }
  return j;
}

PlaceResult placeFromJson(const nlohmann::json& j) {
  PlaceResult p;
  if (j.is_null()) return p;
  p.measured = true;
  readTo(j.at("time"), p.timeUs);
  readTo(j.at("alg_bw"), p.algBw);
  readTo(j.at("bus_bw"), p.busBw);
  p.wrong = j.at("nwrong").is_null() ? -1 : readInt<long long>(j.at("nwrong"));
  readTo(j.at("iters"), p.iters);
  readTo(j.at("iter"), p.iter);
  readTo(j.at("straggler").at("rank"), p.slowestRank);
  readTo(j.at("straggler").at("spread_pct"), p.spreadPct);
  for (const auto& r : j.at("ranks")) {
    RankTiming t;
    readTo(r.at("rank"), t.rank);
    readTo(r.at("time_us"), t.timeUs);
    readTo(r.at("iter"), t.iter);
    p.ranks.push_back(t);
  }
  if (j.contains("times_us")) readTo(j.at("times_us"), p.timesUs);  // schema 1.2, -I 1|2
  if (j.contains("repeats")) {  // schema 1.1
    for (const auto& r : j.at("repeats")) {
      RepeatStat s;
      readTo(r.at("time"), s.timeUs);
      readTo(r.at("alg_bw"), s.algBw);
      readTo(r.at("bus_bw"), s.busBw);
      readTo(r.at("iter"), s.iter);
      p.repeats.push_back(s);
    }
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
  if (!m.placement.empty()) j["placement"] = m.placement;
}

void from_json(const nlohmann::json& j, SweepMeasurement& m) {
  readTo(j.at("backend"), m.backend);
  readTo(j.at("collective"), m.collective);
  readTo(j.at("dtype"), m.dtype);
  readTo(j.at("op"), m.op);
  readTo(j.at("root"), m.root);
  readTo(j.at("world_size"), m.worldSize);
  readTo(j.at("requested_bytes"), m.requestedBytes);
  readTo(j.at("size"), m.bytes);
  readTo(j.at("count"), m.count);
  readTo(j.at("bus_factor"), m.busFactor);
  m.outOfPlace = placeFromJson(j.at("out_of_place"));
  m.inPlace = placeFromJson(j.at("in_place"));
  m.placement = textOr(j, "placement", "");
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
       {"repeat", a.repeat},
       {"collectives", a.collectives},
       {"backends", a.backends},
       {"per_iter_timing", a.perIterTiming},
       {"per_iter_skip", a.perIterSkip}};
}

void from_json(const nlohmann::json& j, SweepArgs& a) {
  readTo(j.at("minbytes"), a.minBytes);
  readTo(j.at("maxbytes"), a.maxBytes);
  readTo(j.at("stepbytes"), a.stepBytes);
  readTo(j.at("stepfactor"), a.stepFactor);
  readTo(j.at("iters"), a.iters);
  readTo(j.at("warmup_iters"), a.warmupIters);
  readTo(j.at("check"), a.check);
  readTo(j.at("op"), a.ops);
  readTo(j.at("datatype"), a.dtypes);
  readTo(j.at("root"), a.root);
  readTo(j.at("average"), a.average);
  readTo(j.at("timeout_s"), a.timeoutS);
  readTo(j.at("min_time_s"), a.minTimeS);
  readTo(j.at("blocking"), a.blocking);
  a.repeat = readIntOr(j, "repeat", 1);  // schema 1.1
  a.perIterTiming = readIntOr(j, "per_iter_timing", 0);  // schema 1.2
  a.perIterSkip = readIntOr(j, "per_iter_skip", 0);
  readTo(j.at("collectives"), a.collectives);
  readTo(j.at("backends"), a.backends);
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
    if (r.localRankArg >= 0) ranks.back()["local_rank_arg"] = r.localRankArg;
    if (r.placement) ranks.back()["placement"] = *r.placement;
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
  if (!m.hardware.empty()) j["hardware"] = m.hardware;
}

void from_json(const nlohmann::json& j, SweepMetadata& m) {
  readTo(j.at("command_line"), m.commandLine);
  readTo(j.at("hosts"), m.hosts);
  readTo(j.at("world_size"), m.worldSize);
  for (const auto& r : j.at("ranks")) {
    SweepRank x;
    readTo(r.at("rank"), x.rank);
    readTo(r.at("local_rank"), x.localRank);
    readTo(r.at("node_rank"), x.nodeRank);
    readTo(r.at("host"), x.host);
    readTo(r.at("pid"), x.pid);
    readTo(r.at("device"), x.device);
    if (r.contains("local_rank_arg")) readTo(r.at("local_rank_arg"), x.localRankArg);
    if (r.contains("placement")) x.placement = r.at("placement").get<Placement>();
    m.ranks.push_back(x);
  }
  readTo(j.at("launcher"), m.launcher);
  readTo(j.at("versions"), m.versions);
  readTo(j.at("env"), m.env);
  readTo(j.at("start_time"), m.startTime);
  readTo(j.at("end_time"), m.endTime);
  m.label = textOr(j, "label", "");
  m.source = textOr(j, "source", "");
  if (j.contains("hardware")) readTo(j.at("hardware"), m.hardware);
}

std::vector<PlacedRank> placedRanks(const SweepMetadata& m) {
  std::vector<PlacedRank> out;
  for (const auto& r : m.ranks) out.push_back({r.rank, r.host, r.placement});
  return out;
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
  readTo(j.at("out_of_bounds"), s.outOfBounds);
  readTo(j.at("avg_bus_bw"), s.avgBusBw);
  readTo(j.at("rows"), s.rows);
  readTo(j.at("min_bus_bw"), s.minBusBw);
  readTo(j.at("bw_below_min"), s.bwBelowMin);
  readTo(j.at("status"), s.status);
  readTo(j.at("error"), s.error);
  readTo(j.at("exit_code"), s.exitCode);
}

nlohmann::json sweepToJson(const SweepRun& run) {
  nlohmann::json j = {{"schema", kSweepSchemaName}, {"schema_version", kSweepSchemaVersion},
                      {"args", run.args},           {"metadata", run.metadata},
                      {"results", run.results},     {"notes", run.notes},
                      {"summary", run.summary}};
  // Each row's hardware bound and the fraction of it achieved (reports/baseline/expected.h), when the
  // run recorded its hardware; derived, so readers recompute it rather than read it back.
  if (!run.metadata.hardware.empty()) {
    for (std::size_t i = 0; i < run.results.size(); ++i)
      j["results"][i]["bound"] = boundToJson(rowBound(run.results[i], run.metadata));
  }
  return j;
}

SweepRun sweepFromJson(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || textOr(j, "schema", "") != kSweepSchemaName) {
    throw ConfigError(fmt::format("{} is not a dsperf sweep result (schema '{}', expected '{}').", origin,
                                  textOr(j, "schema", ""), kSweepSchemaName));
  }
  checkSchemaVersion(j, kSweepSchemaName, origin);
  return readFields(j, origin, kSweepSchemaName, [&] {
    SweepRun run;
    readTo(j.at("args"), run.args);
    readTo(j.at("metadata"), run.metadata);
    readTo(j.at("results"), run.results);
    readTo(j.at("notes"), run.notes);
    readTo(j.at("summary"), run.summary);
    return run;
  });
}

}  // namespace ds::report
