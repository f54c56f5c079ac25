#include "reports/history/tests/history_fixtures.h"

#include <fmt/format.h>

#include "reports/json_io.h"

namespace ds::report::history::testing {

std::string isoTime(int hours) {
  int day = 1 + hours / 24;
  // Days past January run into later months well enough for ordering: only lexical order matters.
  int month = 1 + (day - 1) / 28;
  day = 1 + (day - 1) % 28;
  return fmt::format("2026-{:02d}-{:02d}T{:02d}:00:00Z", month, day, hours % 24);
}

SweepRun makeSweep(const SweepSpec& spec) {
  SweepRun run;
  run.args.minBytes = spec.sizes.front();
  run.args.maxBytes = spec.sizes.back();
  run.args.stepFactor = 2;
  run.args.iters = 20;
  run.args.warmupIters = 5;
  run.args.check = 1;
  run.args.ops = {"sum"};
  run.args.dtypes = {"f32"};
  run.args.collectives = spec.collectives;
  run.args.backends = {spec.backend};
  run.metadata.commandLine = "dsbench coll -b 1M -e 256M";
  run.metadata.hosts = {"node-a", "node-b"};
  run.metadata.worldSize = spec.worldSize;
  run.metadata.launcher = "dsrun";
  run.metadata.versions = {{"dsperf", "0.1.0"}, {"git_sha", "abc1234"}};
  run.metadata.startTime = spec.startTime;
  run.metadata.endTime = spec.startTime;
  run.metadata.label = spec.label;
  for (const auto& coll : spec.collectives) {
    for (std::size_t bytes : spec.sizes) {
      SweepMeasurement m;
      m.backend = spec.backend;
      m.collective = coll;
      m.dtype = "f32";
      m.op = "sum";
      m.worldSize = spec.worldSize;
      m.requestedBytes = m.bytes = bytes;
      m.count = bytes / 4;
      m.busFactor = 2.0 * (spec.worldSize - 1) / spec.worldSize;
      for (PlaceResult* p : {&m.outOfPlace, &m.inPlace}) {
        p->measured = true;
        p->iters = 20;
        p->busBw = p == &m.outOfPlace ? spec.busBw : 0.9 * spec.busBw;
        p->algBw = p->busBw / m.busFactor;
        p->timeUs = static_cast<double>(bytes) / (p->algBw * 1e3);
        p->wrong = 0;
        p->iter = computeIterStats({p->timeUs, p->timeUs * 1.01, p->timeUs * 0.99});
        p->slowestRank = 1;
        p->spreadPct = 1.5;
      }
      run.results.push_back(m);
    }
  }
  run.summary = summarize(run.results);
  return run;
}

std::string writeSweep(const std::string& path, const SweepSpec& spec) {
  writeJsonAtomic(path, sweepToJson(makeSweep(spec)));
  return path;
}

std::string writeTrain(const std::string& path, const TrainSpec& spec) {
  std::vector<TrainRunRecord> runs;
  for (double cap : spec.bucketCapsMb) {
    TrainRunRecord r;
    r.model = "mlp:1024x4";
    r.params = 4 * 1024 * 1024;
    r.worldSize = 2;
    r.backend = spec.backend;
    r.device = "cpu";
    r.perRankBatch = 32;
    r.steps = 20;
    r.warmup = 3;
    r.optimizer = "sgd";
    r.bucketCapMb = cap;
    r.commHook = "none";
    r.buckets = 3;
    r.stepMs = summarize(std::vector<double>{spec.stepMs * 0.98, spec.stepMs, spec.stepMs * 1.02});
    r.forwardMs = summarize(std::vector<double>{spec.stepMs * 0.3});
    r.samplesPerSec = 64 / (spec.stepMs / 1000.0);
    r.lossStart = 2.0;
    r.lossEnd = 1.0;
    runs.push_back(r);
  }
  nlohmann::json meta{{"command_line", "dsbench train"},
                      {"hosts", {"node-a"}},
                      {"start_time", spec.startTime},
                      {"end_time", spec.startTime},
                      {"versions", {{"dsperf", "0.1.0"}}}};
  if (!spec.label.empty()) meta["label"] = spec.label;
  writeJsonAtomic(path, trainToJson(runs, meta));
  return path;
}

}  // namespace ds::report::history::testing
