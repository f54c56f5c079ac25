// dsreport compare: two runs of the same kind (sweep or train) matched row by row, with a
// noise-aware verdict per matched item and the run-level differences that make a comparison unfair.
//
// Matching. Sweep rows match on (collective, backend, dtype, op, root, size in bytes, out-of-place /
// in-place); train runs on their configuration (model, world size, backend, per-rank batch, bucket cap,
// overlap, comm hook, optimizer, gradient-as-bucket-view). Whatever is in only one run, or cannot be
// trusted (wrong data), is listed in notCompared, never silently dropped.
//
// Verdict. Per matched item, with t = the time the metric comes from (sweep: time per op in us; train:
// median step time in ms) and se = the standard error of that time estimated from the run's own
// per-iteration spread (sweep: time * cv / sqrt(n), cv = stdev / mean of the per-iteration times; train: a
// robust sd from (p90 - p50) / 1.2816, times 1.2533 / sqrt(steps) for a median):
//   - changePct: how much the metric got better (+) or worse (-), in percent of the baseline. Sweeps
//     compare bus bandwidth (lower is worse; time for 0-byte rows), train compares step time (higher
//     is worse).
//   - noise = noiseK * sqrt(se_base^2 + se_cur^2): what the two runs' spread explains.
//   - kRegressed / kImproved: |changePct| > thresholdPct AND |t_cur - t_base| > noise.
//   - kNoise: |changePct| > thresholdPct but the difference is within noise.
//   - kUnchanged: |changePct| <= thresholdPct.
//   When a run carries no per-iteration statistics (nccl-tests text imports), noise is unknown
//   (noiseKnown false) and the threshold alone decides; the row says so.
//
// Run-level mismatches (recorded in `mismatches`): different kinds, world sizes or hosts (hosts only
// when !ignoreHosts), labels (a note only). A world-size or kind mismatch, or hosts differing without
// ignoreHosts, makes the runs not comparable: no items, exit code 2. A run that records no hosts (a
// train journal, an import without rank lines) is compared with a note instead.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/run/run_file.h"

namespace ds::report {

struct CompareOptions {
  double thresholdPct = 5.0;  // --threshold PCT
  double noiseK = 3.0;        // --noise-k: standard errors a difference must exceed
  bool ignoreHosts = false;   // --ignore-hosts: compare runs on different hosts (still listed)
};

enum class Verdict { kUnchanged, kNoise, kImproved, kRegressed };
// "unchanged", "noise", "improved", "regressed"
const char* verdictName(Verdict v);

struct ComparedItem {
  // What matched. Sweeps fill collective..place; train runs fill config.
  std::string collective, backend, dtype, op;
  int root = -1;
  std::size_t bytes = 0;
  std::string place;   // "out-of-place" or "in-place"
  std::string config;  // train: "mlp:1024x24 ws=4 gloo batch=32 cap=25MB overlap=on hook=allreduce sgd"
  std::string label() const;  // one line naming the item, for tables

  std::string metric;  // "busbw" (GB/s), "time" (us) or "step" (ms)
  std::string unit;    // "GB/s", "us", "ms"
  bool higherIsBetter = true;
  double base = 0, cur = 0;  // the metric in each run
  double changePct = 0;      // + better, - worse, percent of base
  // The noise test, on times (us for sweeps, ms for train).
  double baseTime = 0, curTime = 0;
  double noise = 0;  // noiseK * sqrt(se_base^2 + se_cur^2); valid when noiseKnown
  bool noiseKnown = false;
  Verdict verdict = Verdict::kUnchanged;
  std::string reason;  // one sentence: why this verdict (threshold, noise, figures)
};

// Something present or usable in only one of the runs.
struct NotCompared {
  std::string what;    // "allgather gloo f32 (12 sizes)" or a train config
  std::string reason;  // "only in the baseline", "wrong data in the current run", ...
};

struct RunBrief {
  std::string path, label, runId, kind, startTime, source;
  int worldSize = 0;
  std::vector<std::string> hosts, backends;
};

struct CompareResult {
  CompareOptions options;
  RunBrief base, cur;
  std::vector<std::string> mismatches;  // run-level, one sentence each
  bool comparable = true;               // false: a run-level mismatch forbids comparing (exit 2)
  std::vector<ComparedItem> items;      // every matched item, in the baseline's order
  std::vector<NotCompared> notCompared;
  int regressions = 0, improvements = 0, unchanged = 0, noisy = 0;
  // 0 no regression, 1 at least one regression, 2 nothing could be compared.
  int exitCode() const;
};

// Pure. Never throws for mismatched runs (they are described in the result); throws ConfigError when
// a run is of a kind compare does not read (diag, world).
CompareResult compareRuns(const RunFile& base, const RunFile& cur, const CompareOptions& options = {});

// The console report: run headers, mismatches, a table of regressions and improvements (worst first),
// the count of unchanged / within-noise items, the not-compared section and the verdict line.
std::string formatCompareText(const CompareResult& r);

// The result as JSON ("dsperf.compare"), for CI systems and the HTML view.
nlohmann::json compareToJson(const CompareResult& r);

}  // namespace ds::report
