// The records of `dsbench coll` (collective sweeps): what one measured row is, what a whole run is,
// and their versioned JSON (schema "dsperf.sweep"). Measuring code fills these; the formatters in
// this folder turn them into the nccl-tests text table, the final JSON and the JSON-lines journal.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/host/hardware.h"
#include "reports/schema/placement.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

inline constexpr const char* kSweepSchemaName = "dsperf.sweep";
inline constexpr const char* kSweepSchemaVersion = kSchemaVersion;  // reports/schema/schema_version.h

// Statistics of per-iteration times, in microseconds (REFERENCE.md §5 key names, plus p90_us and
// p999_us since schema 1.2).
struct IterStats {
  int n = 0;
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0, cvPct = 0;
  // The tails added in schema 1.2: empty when unknown (a file of schema 1.1 or older, an nccl-tests
  // import without per-iteration times). Printers show "-" for them, never 0; writers leave the key out.
  std::optional<double> p90Us, p999Us;
};
// Pure: percentiles by linear interpolation between closest ranks (numpy's default; p99.9 of fewer
// than 1000 values lies between the two largest), the sample standard deviation (n-1), cv =
// stdev/avg in percent. An empty input gives all zeros (p90 and p99.9 too: known, and n says there
// were no iterations).
IterStats computeIterStats(std::vector<double> us);

// One repeat of a row (dsbench coll --repeat R): the row's figures as that pass over the sizes
// measured them. The repeats of a row are what dsreport compare tests.
struct RepeatStat {
  double timeUs = 0;  // per op, combined across ranks as -a says
  double algBw = 0, busBw = 0;
  IterStats iter;  // of the per-iteration maximum over ranks, in this repeat
};

// One rank's view of one measurement.
struct RankTiming {
  int rank = 0;
  double timeUs = 0;  // this rank's time per op: its whole timed loop divided by the iterations
  IterStats iter;     // its own per-iteration times
};

// Out-of-place or in-place half of a row (nccl-tests' column groups).
struct PlaceResult {
  bool measured = false;
  int iters = 0;
  double timeUs = 0;     // per op, combined across ranks as -a says
  double algBw = 0;      // GB/s, GB = 1e9 bytes
  double busBw = 0;      // GB/s
  long long wrong = -1;  // elements wrong summed over ranks; -1 when not checked (-c 0)
  // Statistics of the per-iteration maximum over ranks (the slowest rank of each iteration).
  IterStats iter;
  // The rank with the largest time per op and how much larger it was than the smallest, in percent.
  int slowestRank = 0;
  double spreadPct = 0;
  std::vector<RankTiming> ranks;
  // dsbench coll -I 1|2 (JSON "times_us", schema 1.2): every timed iteration's time, the maximum over
  // ranks, in iteration order, the -K skipped ones included (as nccl-tests' JSON keeps them), so that
  // a reader can draw the distribution. Empty without -I (files stay small), and in older files.
  std::vector<double> timesUs;
  // Every repeat, in repeat order, when the sweep ran more than once (--repeat R > 1; JSON
  // "repeats", schema 1.1). The fields above are then those of the median repeat. Empty: one pass.
  std::vector<RepeatStat> repeats;
};

// One row of the table: one size of one collective, dtype and op, on one backend.
struct SweepMeasurement {
  std::string backend;
  std::string collective;  // allreduce, allgather, ...
  std::string dtype;       // our name: f32, bf16, ...
  std::string op;          // sum, prod, min, max, avg; "none" for collectives that do not reduce
  int root = -1;           // -1 for collectives without a root (as nccl-tests prints it)
  int worldSize = 0;
  std::size_t requestedBytes = 0;  // the size the sweep asked for
  std::size_t bytes = 0;           // the size column: max(send, receive) bytes after rounding
  std::size_t count = 0;           // the count column: elements passed to the collective
  double busFactor = 0;
  PlaceResult outOfPlace;
  PlaceResult inPlace;
  // scripts/bench-peers.sh's placement matrix: which placement the row was measured under
  // ("unbound", "mpirun-default", "shared-core", "hog"); empty elsewhere (then left out of the JSON).
  std::string placement;
  bool rounded() const;  // bytes differ from requestedBytes (nccl-tests' rounding)
};

// A rank as the run saw it.
struct SweepRank {
  int rank = 0;
  int localRank = 0;
  int nodeRank = 0;
  std::string host;
  long pid = 0;
  std::string device;
  int localRankArg = -1;  // the launcher's --local_rank argument; -1: none (see RankRecord)
  std::optional<Placement> placement = std::nullopt;  // affinity and node load (absent in older files)
};

// The flags of the run, as parsed (nccl-tests names).
struct SweepArgs {
  std::size_t minBytes = 0, maxBytes = 0, stepBytes = 0;
  int stepFactor = 0;  // 0 = additive steps of stepBytes
  int iters = 0, warmupIters = 0, check = 0;
  std::vector<std::string> ops, dtypes, collectives, backends;
  int root = 0;
  int average = 1;
  double timeoutS = 0;  // 0 = none beyond the process group's
  double minTimeS = 0;
  bool blocking = false;
  int repeat = 1;  // --repeat: passes over the sizes (JSON "repeat", schema 1.1; older files: 1)
  // -I/--per_iter_timing: 0 no per-iteration columns in the text table, 1 nccl-tests' i_min i_max i_p99
  // i_cv%, 2 the tails i_p50 i_p90 i_p99 i_p99.9 i_max; with 1 or 2 the JSON keeps times_us. -K
  // /--per_iter_skip: the first N timed iterations are left out of every per-iteration statistic (not
  // out of the loop time). JSON "per_iter_timing", "per_iter_skip" (schema 1.2; older files: 0).
  int perIterTiming = 0;
  int perIterSkip = 0;
};

struct SweepMetadata {
  std::string commandLine;
  std::vector<std::string> hosts;  // distinct, in rank order
  int worldSize = 0;
  std::vector<SweepRank> ranks;
  std::string launcher;                         // dsrun/torchrun, mpirun, srun or none
  std::map<std::string, std::string> versions;  // dsperf, git_sha, nccl, nccl_header, open_mpi, gloo
  std::map<std::string, std::string> env;       // DS_*, DSBENCH_*, NCCL_*, OMPI_*, GLOO_*, ...
  std::string startTime, endTime;               // ISO 8601 UTC
  // The cluster or system this run describes (dsbench --label, dsreport import --label), so that one
  // history serves many; empty when none (then left out of the JSON).
  std::string label;
  // Where the figures came from when dsbench did not measure them, e.g. "nccl-tests 2.13.9 (imported
  // from nightly.txt)"; empty for dsbench's own runs (then left out of the JSON).
  std::string source;
  // What each host's hardware can move (engine/host/hardware.h), one entry per host in `hosts`
  // order; empty when not recorded (older files, imports; then left out of the JSON).
  std::vector<hw::HostHardware> hardware;
};

// How a run ended. exitCode follows bench/exit_codes.h.
struct SweepSummary {
  long long outOfBounds = 0;  // total wrong elements (nccl-tests "Out of bounds values")
  double avgBusBw = 0;        // mean busbw over every measured place of every row, as nccl-tests
  int rows = 0;
  double minBusBw = -1;  // NCCL_TESTS_MIN_BW, -1 when unset
  bool bwBelowMin = false;
  std::string status = "ok";  // ok, wrong_data, bandwidth_below_min, timeout, error
  std::string error;          // what stopped the run, when it stopped early
  int exitCode = 0;
};

struct SweepRun {
  SweepArgs args;
  SweepMetadata metadata;
  std::vector<SweepMeasurement> results;
  // Remarks a reader needs: skipped combinations ("backend X does not support ..."), ...
  std::vector<std::string> notes;
  SweepSummary summary;
};

// Pure: the same row measured once per repeat (in repeat order) into one row. The repeat with the
// median time per op (the lower middle one for an even count) stands for the row: its time,
// bandwidths, per-iteration statistics, ranks and straggler. Wrong elements are summed over the
// repeats, and every repeat's figures are kept in `repeats`. A single measurement comes back as is.
SweepMeasurement mergeRepeats(const std::vector<SweepMeasurement>& reps);

// The ranks' placements (reports/schema/placement.h), in rank order.
std::vector<PlacedRank> placedRanks(const SweepMetadata& m);

// Average busbw and total wrong over the rows, as nccl-tests' footer computes them.
SweepSummary summarize(const std::vector<SweepMeasurement>& rows, double minBusBw = -1);

void to_json(nlohmann::json& j, const IterStats& s);
void from_json(const nlohmann::json& j, IterStats& s);
void to_json(nlohmann::json& j, const SweepMeasurement& m);
void from_json(const nlohmann::json& j, SweepMeasurement& m);
void to_json(nlohmann::json& j, const SweepArgs& a);
void from_json(const nlohmann::json& j, SweepArgs& a);
void to_json(nlohmann::json& j, const SweepMetadata& m);
void from_json(const nlohmann::json& j, SweepMetadata& m);
void to_json(nlohmann::json& j, const SweepSummary& s);
void from_json(const nlohmann::json& j, SweepSummary& s);

// {"schema": "dsperf.sweep", "schema_version": "1.0", "args", "metadata", "results", "summary"}
nlohmann::json sweepToJson(const SweepRun& run);
// Checks the schema name and major version (checkSchemaVersion); throws ConfigError naming `origin` when they
// differ or the document is malformed.
SweepRun sweepFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace ds::report
