// What `dsreport dashboard` shows, as plain data: one time series per metric of the history
// database, each point judged against a rolling baseline of the points before it. The history
// module (this folder) fills it from SQLite; the HTML renderer only draws it and decides nothing.
//
// How a point is judged (the contract the renderer explains to the reader):
//   - Its baseline is the median of the previous `window` points of the same series (default 5),
//     in run time order. With fewer than `minHistory` previous points (default 3) there is no
//     baseline and no verdict.
//   - Its noise is the spread of those same points: the median absolute deviation scaled by 1.4826,
//     which estimates one standard deviation for normal noise.
//   - It is regressed when it is worse than the baseline (lower busbw, higher step time) by more than
//     `thresholdPct` percent of the baseline AND by more than `noiseFactor` times the noise; improved
//     likewise in the better direction. Both bars must be cleared, so a noisy series needs a larger
//     change than a quiet one before it is flagged.
//   - The baseline rolls: a lasting step change is flagged on the first points after it, until the
//     new level holds the median of the window (3 points with the default window of 5), after
//     which it is the new normal.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ds::report::history {

struct DashboardOptions {
  int window = 5;             // previous points whose median is the baseline
  int minHistory = 3;         // fewer previous points than this: no baseline, no verdict
  double thresholdPct = 5.0;  // smallest change, in percent of the baseline, that is flagged
  double noiseFactor = 3.0;   // and it must exceed this many times the window's noise (scaled MAD)
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
  double baseline = 0;       // median of the previous `window` points
  double noise = 0;          // 1.4826 x median absolute deviation of those points
  double changePct = 0;      // (value - baseline) / baseline x 100, signed as the raw values
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
  bool latestRegressed = false;        // the newest point is regressed: what needs attention now
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

// Fills the baseline, noise, changePct and verdicts of every point of `series` (its points must be
// oldest first, with values set) and its counters, by the rule at the top of this file. Pure.
void judgeSeries(DashboardSeries& series, const DashboardOptions& options);

// Reads the history database at `dbPath` (made by `dsreport ingest`) and builds every series that
// passes the filters. Throws ConfigError when the file is missing, is not a dsreport history
// database, or was written by a newer dsreport; IoError when SQLite cannot read it. Waits up to 30 s
// for a concurrent ingest's write lock to clear.
DashboardData queryDashboard(const std::string& dbPath, const DashboardOptions& options = {});

}  // namespace ds::report::history
