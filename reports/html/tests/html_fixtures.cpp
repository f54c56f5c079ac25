#include "reports/html/tests/html_fixtures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/testing/paths.h"
#include "reports/json_io.h"

namespace ds::report::html::testing {

SweepRun makeSweep(const SweepFixture& f) {
  SweepRun run;
  run.args.minBytes = 8;
  run.args.maxBytes = 16 << 20;
  run.args.stepFactor = 8;
  run.args.iters = 20;
  run.args.warmupIters = 2;
  run.args.check = 1;
  run.args.ops = {"sum"};
  run.args.dtypes = {"f32"};
  run.args.collectives = f.collectives;
  run.args.backends = {f.backend};
  run.metadata.commandLine = "dsbench coll -b 8 -e 16M -f 8 -J sweep.json";
  run.metadata.hosts = {f.host};
  run.metadata.worldSize = f.worldSize;
  for (int r = 0; r < f.worldSize; ++r) {
    run.metadata.ranks.push_back({r, r, 0, f.host, 1000L + r, "cpu test"});
  }
  run.metadata.launcher = "dsrun/torchrun";
  run.metadata.versions = {{"dsperf", "0.1.0"}, {"gloo", "0.5.0"}};
  run.metadata.env = {{"NCCL_SOCKET_IFNAME", f.envValue}, {"OMP_NUM_THREADS", "1"}};
  run.metadata.startTime = f.startTime;
  run.metadata.endTime = f.startTime;
  for (const auto& coll : f.collectives) {
    for (std::size_t bytes = 8; bytes <= (16u << 20); bytes *= 8) {
      SweepMeasurement m;
      m.backend = f.backend;
      m.collective = coll;
      m.dtype = "f32";
      m.op = coll == "allreduce" ? "sum" : "none";
      m.worldSize = f.worldSize;
      m.requestedBytes = m.bytes = bytes;
      m.count = bytes / 4;
      m.busFactor = coll == "allreduce" ? 1.5 : 0.75;
      double share = std::log2(static_cast<double>(bytes)) / 24.0;
      for (PlaceResult* p : {&m.outOfPlace, &m.inPlace}) {
        p->measured = true;
        p->iters = 20;
        p->busBw = f.peakBusBw * share * (p == &m.inPlace ? 0.9 : 1.0);
        p->algBw = p->busBw / m.busFactor;
        p->timeUs = p->algBw > 0 ? static_cast<double>(bytes) / (p->algBw * 1e3) : 0;
        p->wrong = 0;
        if (!f.perRankData) continue;
        p->iter = computeIterStats({p->timeUs, p->timeUs * 1.1, p->timeUs * 0.95, p->timeUs * 3.0});
        if (f.tailsUnknown) p->iter.p90Us = p->iter.p999Us = std::nullopt;
        for (int r = 0; r < f.worldSize; ++r) {
          RankTiming t;
          t.rank = r;
          t.timeUs = p->timeUs * (r == 1 ? 1.2 : 1.0);
          p->ranks.push_back(t);
        }
        p->slowestRank = 1;
        p->spreadPct = 20.0;
      }
      run.results.push_back(m);
    }
  }
  run.summary = summarize(run.results);
  return run;
}

std::vector<TrainRunRecord> makeTrain(const std::string& backend) {
  std::vector<TrainRunRecord> runs;
  for (bool overlap : {true, false}) {
    for (double cap : {1.0, 25.0}) {
      TrainRunRecord r;
      r.model = "mlp:256x4";
      r.params = 263168;
      r.worldSize = 2;
      r.backend = backend;
      r.device = "cpu";
      r.perRankBatch = 32;
      r.steps = 10;
      r.warmup = 2;
      r.optimizer = "sgd";
      r.bucketCapMb = cap;
      r.overlap = overlap;
      r.commHook = "none";
      r.buckets = cap < 2 ? 4 : 1;
      r.forwardMs = summarize({2.0, 2.1});
      r.backwardComputeMs = summarize({4.0, 4.2});
      r.backwardCommMs = summarize({3.0, 3.1});
      r.exposedCommMs = summarize(overlap ? std::vector<double>{1.0, 1.1} : std::vector<double>{3.0, 3.1});
      r.optimizerMs = summarize({0.5, 0.5});
      r.commBusyMs = summarize({3.0, 3.0});
      r.stepMs = summarize(overlap ? std::vector<double>{8.0, 8.2} : std::vector<double>{10.0, 10.2});
      r.samplesPerSec = 64 / 0.008;
      r.overlapEfficiency = overlap ? 0.66 : 0.0;
      r.hiddenCommMs = overlap ? 2.0 : 0.0;
      r.lossStart = 1.0;
      r.lossEnd = 0.5;
      runs.push_back(r);
    }
  }
  return runs;
}

DiagReport makeDiag(const std::string& host) {
  DiagReport d;
  d.mode = "world";
  d.worldSize = 2;
  d.host = host;
  d.toolVersion = "0.1.0";
  DiagRecord pass{"net.master_port_free",
                  "net",
                  DiagStatus::kPass,
                  "port 29500 is free",
                  "",
                  nlohmann::json::object(),
                  0,
                  host};
  DiagRecord fail{"env.world_size",
                  "env",
                  DiagStatus::kFail,
                  "WORLD_SIZE=4 but 2 processes started",
                  "start 4 processes or set WORLD_SIZE=2",
                  nlohmann::json::object(),
                  -1,
                  host};
  d.checks = {pass, fail};
  return d;
}

RunFile sweepRunFile(const SweepFixture& f, const std::string& path) {
  RunFile r;
  r.path = path;
  r.kind = RunKind::kSweep;
  r.schemaVersion = "1.0";
  r.label = f.label;
  r.runId = "0123456789abcdef";
  r.sweep = makeSweep(f);
  r.raw = sweepToJson(*r.sweep);
  return r;
}

RunFile trainRunFile(const std::string& path) {
  RunFile r;
  r.path = path;
  r.kind = RunKind::kTrain;
  r.schemaVersion = "1.0";
  r.train = makeTrain();
  r.trainMetadata = {{"command_line", "dsbench train"}, {"hosts", {"node-a"}}, {"world_size", 2}};
  r.raw = trainToJson(*r.train, r.trainMetadata);
  return r;
}

RunFile diagRunFile(const std::string& host, const std::string& path) {
  RunFile r;
  r.path = path;
  r.kind = RunKind::kDiag;
  r.schemaVersion = "1.0";
  r.diag = makeDiag(host);
  r.raw = diagToJson(*r.diag);
  return r;
}

void writeSweepFile(const std::string& path, const SweepFixture& f) {
  nlohmann::json j = sweepToJson(makeSweep(f));
  if (!f.label.empty()) j["metadata"]["label"] = f.label;
  writeJsonAtomic(path, j);
}

void writeTrainFile(const std::string& path) {
  writeJsonAtomic(path, trainToJson(makeTrain(), {{"command_line", "dsbench train"},
                                                  {"hosts", {"node-a"}},
                                                  {"world_size", 2},
                                                  {"start_time", "2026-11-29T10:00:00Z"}}));
}

void writeDiagFile(const std::string& path, const std::string& host) {
  writeJsonAtomic(path, diagToJson(makeDiag(host)));
}

DiagReport makeFleetDiag(int hosts, const std::string& renamedHost) {
  DiagReport d = makeDiag("node01");
  d.mode = "world";
  d.worldSize = hosts;
  FleetReport f;
  if (hosts == 16) {
    const std::string path = std::string(DS_REPORTS_TEST_DATA) + "/fleet16.json";
    f = fleetFromJson(readJson(path), path);
    if (!renamedHost.empty()) {
      f.input.ranks[4].host = renamedHost;
      f.judgement.hosts[4].host = renamedHost;
    }
  } else {
    f.input.worldSize = hosts;
    std::mt19937 rng(26);
    std::uniform_real_distribution<double> spread(1.8, 2.0);
    auto pair = [&](int a, int b, int round) {
      PairResult p{std::min(a, b), std::max(a, b), round, "links", PairOutcome::kOk, 40, spread(rng), ""};
      if (a == 16 || b == 16) p.bandwidthGBps = 0.03;
      if ((a == 2 && b == 3) || (a == 3 && b == 2)) {
        p.outcome = PairOutcome::kFailed;
        p.bandwidthGBps = 0;
        p.error = "connection refused";
      }
      f.input.pairs.push_back(p);
    };
    for (int i = 0; i < hosts; ++i) pair(i, (i + 1) % hosts, i % 2);
    std::vector<int> order(hosts);
    std::iota(order.begin(), order.end(), 0);
    for (int round = 2; round < 12; ++round) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int i = 0; i + 1 < hosts; i += 2) pair(order[i], order[i + 1], round);
    }
    for (int i = 0; i < hosts; ++i) {
      FleetRank k;
      k.rank = i;
      k.host = fmt::format("gpu{:04d}", i + 1);
      k.joined = k.reported = true;
      f.input.ranks.push_back(k);
      HostVerdict h{k.host, {i}, HostState::kHealthy, {}, "ib0"};
      if (i == 16) {
        h.state = HostState::kSuspect;
        h.evidence = {{"link_slow",
                       "links",
                       "bandwidth with gpu0001 (rank 0) 0.03 GB/s, fleet median 1.9 GB/s",
                       {0},
                       0.03,
                       1.9}};
      }
      f.judgement.hosts.push_back(h);
    }
    f.judgement.links = {
        {"gpu0003",
         "gpu0004",
         2,
         3,
         {{"link_failed", "links", "the link test failed: connection refused", {2, 3}, 0, 0}}}};
    f.judgement.medianBandwidthGBps = 1.9;
    f.judgement.madBandwidthGBps = 0.05;
    f.judgement.medianLatencyUs = 40;
    f.judgement.jobSocketIfname = "ib0";
    f.stats.rounds = 12;
    f.stats.pairs = static_cast<int>(f.input.pairs.size());
  }
  d.fleet = std::move(f);
  return d;
}

RunFile fleetRunFile(int hosts, const std::string& renamedHost, const std::string& path) {
  RunFile r;
  r.path = path;
  r.kind = RunKind::kDiag;
  r.schemaVersion = "1.1";
  r.diag = makeFleetDiag(hosts, renamedHost);
  r.raw = diagToJson(*r.diag);
  return r;
}

HangReport makeHangReport(const std::string& host) {
  HangReport r;
  r.verdict = HangVerdict::kCulpritFound;
  r.headline = "Rank 3 on node-b never entered all_reduce #21 of group 0 (default_pg); ranks 0-2 wait for it.";
  r.worldSize = 4;
  r.dumpsRead = 3;
  HangCulprit c;
  c.rank = 3;
  c.host = host;
  c.group = {"0", "default_pg"};
  c.seq = 21;
  c.op = "all_reduce";
  c.kind = FaultKind::kNeverEntered;
  c.summary = "rank 3 never enqueued all_reduce #21";
  c.evidence.push_back({"rank 3 stopped at #20", "dumps/rank_3", "pg_status '0': last_enqueued 20"});
  r.culprits.push_back(c);
  r.noDump.push_back({2, "node-a", {"0", "default_pg"}, 20, "its peers last saw it at #20"});
  HangWaiting w;
  w.group = {"0", "default_pg"};
  w.seq = 21;
  w.op = "all_reduce";
  w.ranks = {0, 1};
  w.waitsFor = {3};
  w.reason = "wait for rank 3";
  w.chainEndsAt = {3};
  r.waiting.push_back(w);
  r.groups.push_back({{"0", "default_pg"}, {0, 1, 2, 3}, 3, 20, 21, 20, 21});
  r.problems.push_back("dumps/rank_9 <b>is not</b> a Flight Recorder dump");
  r.inputs = {"dumps/rank_0", "dumps/rank_1", "dumps/rank_3"};
  HangTimeline t{0, "0", {}};
  t.entries.push_back({20, false, "all_reduce", "completed", {{16}}, {{16}}, std::nullopt});
  t.entries.push_back({21, false, "all_reduce", "started", {{16}}, {{16}}, std::nullopt});
  r.timelines.push_back(t);
  HangGroupTimeline g;
  g.group = {"0", "default_pg"};
  g.firstSeq = 20;
  g.ops = {"all_reduce", "all_reduce"};
  g.divergentSeq = 21;
  g.rows.push_back({{0, 1}, {HangCell::kCompleted, HangCell::kStarted}, {}});
  g.rows.push_back({{2}, {HangCell::kNoDump, HangCell::kNoDump}, {}});
  g.rows.push_back({{3}, {HangCell::kCompleted, HangCell::kNotEntered}, {}});
  r.groupTimelines.push_back(g);
  return r;
}

}  // namespace ds::report::html::testing
