// What `dsreport dashboard` shows, as plain data: one time series per metric of the history
// database, each point judged against a rolling baseline of the points before it. The history
// module (this folder) fills it from SQLite; the HTML renderer only draws it and decides nothing.
//
// How a point is judged (the contract the renderer explains to the reader). The same test as
// dsreport compare (reports/compare/compare.h), with the history as the baseline side:
//   - The current level at a point is that point and the `recent - 1` points before it (default 3
//     points in all); the history is the `window` points before those (default 8), in run time order.
//     With fewer than `minHistory` history points (default 5) there is no verdict.
//   - Its baseline is the median of the history; its change is the median of the current level
//     against it, in percent; its noise is the history's spread (1.4826 x median absolute deviation,
//     in the series' unit).
//   - It is regressed when the change is worse than the baseline by more than `thresholdPct` percent
//     AND a two-sided Mann-Whitney U test of the current level against the history gives p <= alpha;
//     improved likewise in the better direction. A rank test, so a series that alternates between
//     two levels is judged by where its recent points rank among both levels, not against whichever
//     level happens to hold the median (the rolling median + MAD rule flagged every other point of
//     such a series, and measured its noise as zero).
//   - A step change is flagged once the current level is mostly on the new side (with 3 recent
//     points: at the third point after the step), and stays flagged until the history has moved
//     with it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ds::report::history {

struct DashboardOptions {
  int window = 8;             // history points before the current level: the baseline side
  int recent = 3;             // points of the current level (the judged point and those before it)
  int minHistory = 5;         // fewer history points than this: no baseline, no verdict
  double thresholdPct = 5.0;  // smallest change, in percent of the baseline, that is flagged
  double alpha = 0.05;        // and the U test must give p at or below this
  // Filters; empty means all. A series is kept when its label, backend and collective are listed.
  // Train series have the collective "train".
  std::vector<std::string> labels;
  std::vector<std::string> backends;
  std::vector<std::string> collectives;
  // Message sizes (bytes) of the busbw series to keep; empty means every size present.
  std::vector<std::size_t> sizes;
};

struct DashboardPoint {
  std::string time;        // the run's start time, ISO 8601 UTC (its ingest time when the file had none)
  std::string runId;       // 16 hex characters (RunFile::runId)
  std::string sourceFile;  // the file name it was ingested from, as given to ingest
  double value = 0;
  bool hasBaseline = false;  // false: too little history, baseline/noise/changePct/verdicts unset
  double baseline = 0;       // median of the history points
  double noise = 0;          // 1.4826 x median absolute deviation of those points
  double changePct = 0;  // (median of the current level - baseline) / baseline x 100, signed as the values
  double p = 1;          // the U test's two-sided p-value
  bool regressed = false;
  bool improved = false;
};

struct DashboardSeries {
  // Stable identity of the series, for element ids and links: "busbw|label|backend|collective|dtype|
  // op|bytes|world" or "train_step_p50|label|backend|config". Contains user text: escape it.
  std::string id;
  std::string metric;  // "busbw" (out-of-place, GB/s) or "train_step_p50" (ms)
  std::string title;   // human title, e.g. "allreduce busbw, 1 MiB, f32 sum"
  std::string unit;    // "GB/s" or "ms"
  bool higherIsBetter = true;
  std::string label;       // cluster / system label; empty when the runs had none
  std::string backend;     // gloo, mpi, nccl
  std::string collective;  // allreduce, allgather, ...; "train" for train series
  std::string dtype;       // busbw series: f32, bf16, ...; empty for train
  std::string op;          // busbw series: sum, ..., "none"; empty for train
  std::size_t bytes = 0;   // busbw series: the message size; 0 for train
  int worldSize = 0;       // ranks; part of the series' identity (4 and 8 ranks are different series)
  // Train series: the configuration, e.g. "mlp:1024x24, world 4, cpu, batch 32, bucket 25 MB,
  // overlap, hook none"; empty for busbw series.
  std::string config;
  std::vector<DashboardPoint> points;  // oldest first
  int regressions = 0;                 // points flagged regressed
  int improvements = 0;                // points flagged improved
  // A point of the current level (the newest `recent` points) is regressed: what needs attention now.
  bool latestRegressed = false;
};

struct DashboardData {
  std::string dbPath;
  DashboardOptions options;         // as applied
  int runs = 0;                     // runs in the database that fed at least one shown series
  std::string firstTime, lastTime;  // time range of those runs
  // Every label, backend and collective in the database (not only the filtered ones), sorted, for
  // the renderer's filter controls.
  std::vector<std::string> labels;
  std::vector<std::string> backends;
  std::vector<std::string> collectives;
  // Sorted by label, backend, collective ("train" last), dtype, op, bytes / config.
  std::vector<DashboardSeries> series;
};

// A message size as the series titles write it: "1 MiB", "1.5 KiB", "8 B".
std::string sizeText(std::size_t bytes);

// Checks the rule's settings: a ConfigError that says what to change when they do not fit (a window
// or level too small for the U test to ever reach alpha, a minimum history beyond the window, ...).
void checkDashboardOptions(const DashboardOptions& options);

// Fills the baseline, noise, changePct and verdicts of every point of `series` (its points must be
// oldest first, with values set) and its counters, by the rule at the top of this file. Pure.
void judgeSeries(DashboardSeries& series, const DashboardOptions& options);

// Reads the history database at `dbPath` (made by `dsreport ingest`) and builds every series that
// passes the filters. Throws ConfigError when the file is missing, is not a dsreport history
// database, or was written by a newer dsreport; IoError when SQLite cannot read it. Waits up to 30 s
// for a concurrent ingest's write lock to clear.
DashboardData queryDashboard(const std::string& dbPath, const DashboardOptions& options = {});

}  // namespace ds::report::history
