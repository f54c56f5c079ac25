// Synthetic dsbench/dsdiag results for the HTML tests: records filled as the tools fill them, so the
// pages are rendered from realistic data without running a sweep.
#pragma once

#include <string>
#include <vector>

#include "reports/diag/hang_schema.h"
#include "reports/run/run_file.h"

namespace ds::report::html::testing {

struct SweepFixture {
  std::string host = "node-a";
  std::string label;  // the run's label (RunFile::label and metadata.label)
  std::string backend = "gloo";
  std::vector<std::string> collectives{"allreduce", "allgather"};
  int worldSize = 4;
  double peakBusBw = 10.0;        // GB/s reached at the largest size
  std::string envValue = "eth0";  // NCCL_SOCKET_IFNAME in the metadata
  std::string startTime = "2026-11-29T10:00:00.000Z";
  // false: one time per size and nothing else, as an nccl-tests text import has (no per-rank times, no
  // per-iteration statistics, no rank list).
  bool perRankData = true;
  // true: per-iteration statistics as a file of schema 1.1 or older keeps them (no p90, no p99.9).
  bool tailsUnknown = false;
};

SweepRun makeSweep(const SweepFixture& f);
std::vector<TrainRunRecord> makeTrain(const std::string& backend = "gloo");
DiagReport makeDiag(const std::string& host = "node-a");

// In-memory RunFiles, as loadRunFile would return them.
RunFile sweepRunFile(const SweepFixture& f, const std::string& path = "sweep.json");
RunFile trainRunFile(const std::string& path = "train.json");
RunFile diagRunFile(const std::string& host = "node-a", const std::string& path = "diag.json");

// Files as the tools write them (the label, when set, in metadata.label).
void writeSweepFile(const std::string& path, const SweepFixture& f);
void writeTrainFile(const std::string& path);
void writeDiagFile(const std::string& path, const std::string& host = "node-a");

// A fleet-mode dsdiag report. hosts == 16: the fixture reports/tests/data/fleet16.json (node07 slow,
// node03-node11 unreachable, node14 frozen) with healthy node05 renamed `renamedHost` (when not
// empty). Other sizes: a synthetic fleet gpu0001.. with ring and 10 random matchings, gpu0017 slow
// and the link gpu0003-gpu0004 failed.
DiagReport makeFleetDiag(int hosts = 16, const std::string& renamedHost = "");
RunFile fleetRunFile(int hosts = 16, const std::string& renamedHost = "",
                     const std::string& path = "fleet.json");

// A dsperf.hang 1.1 report of 4 ranks: rank 3 (on `host`) never entered all_reduce #21 of group 0,
// rank 2 left no dump, ranks 0-1 wait; a group timeline, a per-rank timeline, one problem.
HangReport makeHangReport(const std::string& host = "node-b");

}  // namespace ds::report::html::testing
