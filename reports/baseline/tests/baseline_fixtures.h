// Synthetic nightly runs for the baseline and check tests: one single-host dsbench coll sweep per
// host and night, with the busbw each host is meant to show.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "reports/baseline/sample.h"
#include "reports/run/run_file.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::report::testing {

// A single-host sweep of allreduce (gloo, f32, sum, 2 ranks) at 1 MiB and 64 MiB on `host`, night
// `night` (its start time), the 64 MiB row at `busbw` GB/s and the 1 MiB one at a tenth of it.
// `wrong` elements wrong in the 64 MiB row.
inline RunFile nightlyRun(const std::string& host, int night, double busbw,
                          const std::string& cpu = "Xeon 8480C", long long wrong = 0) {
  SweepRun s;
  s.metadata.hosts = {host};
  s.metadata.worldSize = 2;
  s.metadata.startTime = fmt::format("2026-11-{:02d}T02:00:00Z", night);
  s.metadata.versions = {{"gloo", "0.0.0"}, {"dsperf", "1.0"}};
  HostHardware hw;
  hw.host = host;
  hw.cpuModel = cpu;
  s.metadata.hardware = {hw};
  for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{64} << 20}) {
    SweepMeasurement m;
    m.backend = "gloo";
    m.collective = "allreduce";
    m.dtype = "f32";
    m.op = "sum";
    m.worldSize = 2;
    m.requestedBytes = m.bytes = bytes;
    m.count = bytes / 4;
    m.busFactor = 1;
    PlaceResult& p = m.outOfPlace;
    p.measured = true;
    p.iters = 20;
    p.busBw = p.algBw = bytes == (std::size_t{1} << 20) ? busbw / 10 : busbw;
    p.timeUs = static_cast<double>(bytes) / (p.algBw * 1e3);
    p.wrong = bytes == (std::size_t{1} << 20) ? 0 : wrong;
    s.results.push_back(m);
  }
  s.summary = summarize(s.results);
  return classifyRun(sweepToJson(s), fmt::format("{}-night{}.json", host, night));
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
