// Synthetic nightly runs for the baseline and check tests: one single-host dsbench coll sweep per
// host and night, with the busbw each host is meant to show.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "reports/run/run_file.h"
#include "reports/sample/sample.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::report::testing {

// A single-host sweep of allreduce (f32, sum) at 1 MiB and 64 MiB on host `hw.host` with `backend`
// and `world` ranks, night `night` (its start time), the 64 MiB row at `busbw` GB/s and the 1 MiB
// one at a tenth of it; `wrong` elements wrong in the 64 MiB row. The run records `hw`.
inline RunFile nightlyRunOn(const hw::HostHardware& hw, int night, double busbw, const std::string& backend,
                            int world, long long wrong = 0) {
  SweepRun s;
  s.metadata.hosts = {hw.host};
  s.metadata.worldSize = world;
  s.metadata.startTime = fmt::format("2026-11-{:02d}T02:00:00Z", night);
  s.metadata.versions = {{"gloo", "0.0.0"}, {"nccl", "2.21.5"}, {"dsperf", "1.0"}};
  for (int r = 0; r < world; ++r) {
    SweepRank rank;
    rank.rank = rank.localRank = r;
    rank.host = hw.host;
    s.metadata.ranks.push_back(rank);
  }
  s.metadata.hardware = {hw};
  for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{64} << 20}) {
    SweepMeasurement m;
    m.backend = backend;
    m.collective = "allreduce";
    m.dtype = "f32";
    m.op = "sum";
    m.worldSize = world;
    m.requestedBytes = m.bytes = bytes;
    m.count = bytes / 4;
    m.busFactor = 2.0 * (world - 1) / world;
    PlaceResult& p = m.outOfPlace;
    p.measured = true;
    p.iters = 20;
    p.busBw = bytes == (std::size_t{1} << 20) ? busbw / 10 : busbw;
    p.algBw = p.busBw / m.busFactor;
    p.timeUs = static_cast<double>(bytes) / (p.algBw * 1e3);
    p.wrong = bytes == (std::size_t{1} << 20) ? 0 : wrong;
    s.results.push_back(m);
  }
  s.summary = summarize(s.results);
  return classifyRun(sweepToJson(s), fmt::format("{}-night{}.json", hw.host, night));
}

// The same with gloo on 2 ranks on a host that records only its CPU model.
inline RunFile nightlyRun(const std::string& host, int night, double busbw,
                          const std::string& cpu = "Xeon 8480C", long long wrong = 0) {
  hw::HostHardware hw;
  hw.host = host;
  hw.cpuModel = cpu;
  return nightlyRunOn(hw, night, busbw, "gloo", 2, wrong);
}

// The samples of runs, concatenated.
inline std::vector<Sample> samplesOfRuns(const std::vector<RunFile>& runs) {
  std::vector<Sample> out;
  for (const auto& r : runs) {
    auto s = samplesOf(r);
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

}  // namespace ds::report::testing
