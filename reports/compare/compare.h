// dsreport compare: two runs of the same kind (sweep or train) matched row by row, with a
// noise-aware verdict per matched item and the run-level differences that make a comparison unfair.
//
// Matching. Sweep rows match on (collective, backend, dtype, op, root, size in bytes, out-of-place /
// in-place); train runs on their configuration (model, world size, backend, per-rank batch, bucket cap,
// overlap, comm hook, optimizer, gradient-as-bucket-view). Whatever is in only one run, or cannot be
// trusted (wrong data), is listed in notCompared, never silently dropped.
//
// Samples. Each side is one or more runs (dsreport compare A1 A2 -- B1 B2). Per matched item, a side's
// samples are the repeat-level times of every run of that side, pooled: a sweep row's `repeats`
// (dsbench coll --repeat R) or its one time per op, a train configuration's repeats' median step
// times or its one median step time. Files without repeats (schema 1.0, nccl-tests imports) give
// one sample per file. Per-iteration spread inside one pass is never used: it does not see what
// moves between runs (page placement, core assignment, the neighbours' load).
//
// Verdict per item, on the times t (sweep: us per op; train: median step ms):
//   - changePct: how much the metric got better (+) or worse (-), in percent of the baseline, from
//     the medians of the samples. Sweeps compare bus bandwidth (time for 0-byte rows), train the
//     step time.
//   - kUnchanged: |changePct| <= thresholdPct (the minimum effect that matters).
//   - kInconclusive: beyond the threshold, but the samples are too few for the test to ever reach
//     alpha (2 / C(n_base + n_cur, n_base) > alpha: fewer than 4 a side at 5%). Says how many
//     repeats would do.
//   - kRegressed / kImproved: beyond the threshold and significant: a two-sided Mann-Whitney U test
//     of the two sides' samples, with the Benjamini-Hochberg procedure at alpha over all the items
//     of the comparison (so a 30-size sweep does not raise 30 chances of a false alarm).
//   - kNoise: beyond the threshold, enough samples, not significant.
//   noisePct: the spread of the samples in the unit of the change: a robust standard deviation
//   (1.4826 x median absolute deviation) of each side in percent of its median, the two combined
//   as sqrt(a^2 + b^2); unknown (noiseKnown false) with fewer than 2 samples a side.
//
// Sweep-level (overall). The geometric mean over the items of the time ratio cur / base, as a
// change in percent of the metric (+ better), with a seeded 95% bootstrap interval
// (bootstrapGeomeanRatio). kRegressed when the whole interval is worse than -thresholdPct,
// kImproved when it is all better than +thresholdPct, kUnchanged when it lies within the threshold,
// else kInconclusive; with fewer than 2 samples a side the interval means nothing, and the point
// estimate within the threshold is kUnchanged, beyond it kInconclusive.
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
  double alpha = 0.05;        // --alpha: false-discovery rate of the U tests over the items
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
  // The test, on times (us for sweeps, ms for train): medians and samples of each side.
  double baseTime = 0, curTime = 0;
  std::vector<double> baseSamples, curSamples;
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
  // The sweep-level verdict: geometric-mean change of the metric over the items (+ better) and its
  // bootstrap interval, in percent.
  double overallChangePct = 0, overallLoPct = 0, overallHiPct = 0;
  bool overallIntervalKnown = false;  // both sides had >= 2 samples for some item
  Verdict overall = Verdict::kUnchanged;
  std::string overallReason;
  int minSamples = 0;  // the fewest samples a side had for an item
  // 0 no regression, 1 a regression, 2 nothing could be compared, 4 inconclusive.
  int exitCode() const;
};

inline constexpr int kCompareExitInconclusive = 4;

// Pure. Never throws for mismatched runs (they are described in the result); throws ConfigError when
// a run is of a kind compare does not read (diag, world) or a side is empty.
CompareResult compareRuns(const std::vector<RunFile>& base, const std::vector<RunFile>& cur,
                          const CompareOptions& options = {});
CompareResult compareRuns(const RunFile& base, const RunFile& cur, const CompareOptions& options = {});

// The repeats a side would need for the U test to reach `alpha` with that many on the other side
// too: the smallest n with 2 / C(2n, n) <= alpha (4 at 5%), plus one for headroom.
int repeatsNeeded(double alpha);

// The console report: run headers, mismatches, a table of regressions and improvements (worst first),
// the count of unchanged / within-noise items, the not-compared section and the verdict line.
std::string formatCompareText(const CompareResult& r);

// The result as JSON ("dsperf.compare"), for CI systems and the HTML view.
nlohmann::json compareToJson(const CompareResult& r);

}  // namespace ds::report
