// dsreport compare: two runs of the same kind (sweep or train) matched row by row, with a
// noise-aware verdict per matched item and the run-level differences that make a comparison unfair.
//
// Matching. Sweep rows match on (collective, backend, dtype, op, root, size in bytes, out-of-place /
// in-place); train runs on their configuration (model, world size, backend, per-rank batch, bucket cap,
// overlap, comm hook, optimizer, gradient-as-bucket-view). Whatever is in only one run, or cannot be
// trusted (wrong data), is listed in notCompared, never silently dropped.
//
// Samples: one per run. Each side is one or more runs (dsreport compare A1 A2 -- B1 B2). Per matched
// item, each run gives one sample: the median of its repeats (dsbench coll --repeat R, a train
// configuration's repeats' median step times) or its one time (schema 1.0 files, nccl-tests imports).
// The run, not the repeat, is the unit of the test: repeats inside one run share its process, its
// page placement, its cores and its minute of the neighbours' load, and on a shared 2-core machine two
// runs of the same build differ by 10-30% where the repeats of one run agree within 2% (measured by
// scripts/verdict-calibration.sh). Pooling repeats as if they were runs cried regression in 4 of 20
// identical pairs. So one run a side can say "unchanged" but never "regressed": it is inconclusive
// beyond the threshold, and the remedy is more runs, not more repeats. Repeats still make each run's
// sample steadier.
//
// Verdict per item, on the times t (sweep: us per op; train: median step ms):
//   - changePct: how much the metric got better (+) or worse (-), in percent of the baseline, from
//     the medians of the samples. Sweeps compare bus bandwidth (time for 0-byte rows), train the
//     step time.
//   - kUnchanged: |changePct| <= thresholdPct (the minimum effect that matters).
//   - kInconclusive: beyond the threshold, but the runs are too few for the test to ever reach
//     alpha (2 / C(n_base + n_cur, n_base) > alpha: fewer than 4 a side at 5%). Says how many runs
//     would do.
//   - kRegressed / kImproved: beyond the threshold and significant: a two-sided Mann-Whitney U test
//     of the two sides' run samples, with the Benjamini-Hochberg procedure at alpha over all the items
//     of the comparison (so a 30-size sweep does not raise 30 chances of a false alarm).
//   - kNoise: beyond the threshold, enough runs, not significant.
//   noisePct: the run-to-run spread in the unit of the change: a robust standard deviation (1.4826 x
//   median absolute deviation) of each side's run samples in percent of its median, the two combined
//   as sqrt(a^2 + b^2); unknown (noiseKnown false) with fewer than 2 runs a side.
//
// Whole run (overall). Each run is summarised by the geometric mean over the items it has of its
// time divided by the baseline side's median time for that item; the change is the ratio of the two
// sides' medians of these, as a change in percent of the metric (+ better), with a seeded 95%
// bootstrap interval over the runs (bootstrapGeomeanRatio). Its verdict follows the per-item rules,
// with a U test of the two sides' run summaries, a test of its own at alpha (not one of the items'
// family, where 5 runs a side could never beat alpha / (items + 1)): a regression of every size by a
// little is found even when no single size is significant.
//
// Exit code: 2 not comparable; 1 a regressed item or a regressed sweep; 4 (inconclusive) no
// regression, but an inconclusive item or sweep; 0 otherwise.
//
// Run-level mismatches (recorded in `mismatches`): different kinds, world sizes or hosts (hosts only
// when !ignoreHosts), labels (a note only). A world-size or kind mismatch, or hosts differing without
// ignoreHosts, makes the runs not comparable: no items, exit code 2. A run that records no hosts (a
// train journal, an import without rank lines) is compared with a note instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/run/run_file.h"

namespace ds::report {

struct CompareOptions {
  double thresholdPct = 5.0;  // --threshold PCT: the smallest change that counts
  double alpha = 0.05;        // --alpha: the items' false-discovery rate, and the whole-run test's level
  bool ignoreHosts = false;   // --ignore-hosts: compare runs on different hosts (still listed)
  int bootstrapResamples = 2000;
  std::uint64_t seed = 1;  // of the bootstrap: the same inputs give the same interval
};

enum class Verdict { kUnchanged, kNoise, kImproved, kRegressed, kInconclusive };
// "unchanged", "noise", "improved", "regressed", "inconclusive"
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
  // The test, on times (us for sweeps, ms for train): medians and samples (one per run) of each side.
  double baseTime = 0, curTime = 0;
  std::vector<double> baseSamples, curSamples;
  std::vector<int> baseRuns, curRuns;  // the run (index in its side) of each sample
  int baseRepeats = 0, curRepeats = 0;  // the repeats behind the samples (>= the samples)
  double noisePct = 0;  // spread of the samples in percent (the unit of changePct); valid when noiseKnown
  bool noiseKnown = false;
  double p = 1;     // two-sided U test p-value
  double minP = 1;  // the smallest p these sample counts can give
  Verdict verdict = Verdict::kUnchanged;
  std::string reason;  // one sentence: why this verdict (threshold, noise, figures)
};

// Something present or usable in only one of the runs.
struct NotCompared {
  std::string what;    // "allgather gloo f32 (12 sizes)" or a train config
  std::string reason;  // "only in the baseline", "wrong data in the current run", ...
};

struct RunBrief {
  std::string path, label, runId, kind, startTime, source;  // of the side's first run
  std::vector<std::string> paths;                           // every run of the side
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
  int regressions = 0, improvements = 0, unchanged = 0, noisy = 0, inconclusive = 0;
  // The whole-run verdict: geometric-mean change of the metric over the items (+ better), its
  // bootstrap interval over the runs, in percent, and the U test of the runs' summaries.
  double overallChangePct = 0, overallLoPct = 0, overallHiPct = 0;
  bool overallIntervalKnown = false;  // both sides have >= 2 runs
  double overallP = 1, overallMinP = 1;
  Verdict overall = Verdict::kUnchanged;
  std::string overallReason;
  int baseRunCount = 0, curRunCount = 0;  // runs a side
  // 0 no regression, 1 a regression, 2 nothing could be compared, 4 inconclusive.
  int exitCode() const;
};

inline constexpr int kCompareExitInconclusive = 4;

// Pure. Never throws for mismatched runs (they are described in the result); throws ConfigError when
// a run is of a kind compare does not read (diag, world) or a side is empty.
CompareResult compareRuns(const std::vector<RunFile>& base, const std::vector<RunFile>& cur,
                          const CompareOptions& options = {});
CompareResult compareRuns(const RunFile& base, const RunFile& cur, const CompareOptions& options = {});

// The runs a side would need for the U test to reach `alpha` with that many on the other side
// too: the smallest n with 2 / C(2n, n) <= alpha (4 at 5%), plus one for headroom.
int runsNeeded(double alpha);

// The console report: run headers, mismatches, a table of regressions and improvements (worst first),
// the count of unchanged / within-noise items, the not-compared section and the verdict line.
std::string formatCompareText(const CompareResult& r);

// The result as JSON ("dsperf.compare"), for CI systems and the HTML view.
nlohmann::json compareToJson(const CompareResult& r);

}  // namespace ds::report
