// What `dsreport dashboard --fleet` shows, as plain data: every host's figures over time for a few
// patterns (a pattern = one metric of one collective, backend, size and world size, the same for
// every host; reports/baseline/sample.h), each relative to the fleet, with each host's drift and its
// check verdicts, and the quarantine list. The history module (this folder) fills it from SQLite; the
// renderer (reports/html/fleet_dashboard_html.h) only draws it.
//
// Only per-host figures (samples of scope "host": a single-host sweep's rows, a fleet run's median
// of each host's links) are shown: a multi-host run's figure belongs to the job, a link's to two
// hosts.
//
// How the page's numbers are made (the contract the renderer explains to the reader):
//   - Columns are time buckets of one width, the same for every pattern: the width is a round span
//     (1 h, 1 day, 7 days, ...) near the period at which hosts are measured (the median gap between a
//     host's runs: nightly runs give one column a night), widened until at most maxColumns buckets hold
//     data. Buckets start in the quietest time of the period (the largest gap in the runs' time of
//     day, for daily buckets), so a night's runs share one bucket. Empty buckets are left out.
//   - A cell is the median of the host's samples of the pattern in the bucket (usually one). It is
//     shown relative to the fleet median: the median of the cells of the hosts of the same SKU in the
//     same bucket (so a fleet-wide change, such as a new NCCL, moves the median and not every cell).
//     The relative value is kept in whole percent (0..254 %; 255 means no sample), which is what keeps
//     a page of 1,000 hosts x 365 nights small; a host's series on its panel is read back from it
//     (relative value x that bucket's median), so it is rounded to 1 % of the median.
//   - Drift of a host: the median of the last quarter of its cells against the median of the first
//     quarter (at least kMinDriftPoints cells), in percent, signed as the values (negative: it went
//     down); also the same for its relative values (its drift against the fleet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reports/history/host_history.h"

namespace ds::report::history {

inline constexpr int kMinDriftPoints = 4;

struct FleetOptions {
  std::vector<std::string> labels;    // run labels to keep; empty: all
  std::vector<std::string> patterns;  // pattern keys to show; empty: chosen (below)
  std::vector<std::string> metrics;   // when choosing: only these metrics; empty: all
  std::size_t maxPatterns = 8;        // when choosing: at most this many, the largest message sizes first
  int maxColumns = 400;               // time buckets of the heatmap
  std::string since, until;           // ISO 8601 UTC, inclusive; "" open (SampleFilter's rules)
  int k = 2, n = 3;                   // quarantine: failed k of the last n checks
};

struct FleetColumn {
  double firstMs = 0, lastMs = 0;  // the earliest and latest sample in it, ms since the epoch (UTC)
  int runs = 0;                    // runs with a sample in it (of the shown patterns)
};

struct HostDrift {
  int host = 0;           // index into FleetData::hosts
  int points = 0;         // cells it has
  double first = 0;       // median of the first quarter of its cells, in the pattern's unit
  double last = 0;        // median of the last quarter
  double pct = 0;         // (last - first) / first x 100
  double vsFleetPct = 0;  // the same of its relative values: its drift against the fleet median
  double worsePct = 0;    // pct in the direction that matters: positive is worse
};

struct FleetPattern {
  std::string key;    // patternKey()
  std::string title;  // "allreduce busbw, 1 GiB, nccl f32 sum, 8 ranks"
  std::string metric, unit;
  bool higherIsBetter = true;
  std::size_t samples = 0;  // host samples read
  int hosts = 0;            // hosts with at least one cell
  // hosts.size() x columns.size(), row-major by host: the cell relative to its SKU's median in
  // whole percent (0..254), 255 where the host has no sample in the bucket.
  std::vector<std::uint8_t> cells;
  // Per SKU (index into FleetData::skus), per column: the median of that SKU's cells (0: none).
  std::vector<std::vector<double>> medians;
  std::vector<double> fleetMedian;  // per column, every SKU together (0: none)
  std::vector<HostDrift> drift;     // hosts with at least kMinDriftPoints cells, worst first
  bool fleetDriftKnown = false;
  double fleetDriftPct = 0;  // drift of fleetMedian, the same rule
};

// A host's latest check verdicts, for its row and panel.
struct FleetHostChecks {
  std::string states;  // its last n states, oldest first, as checkStateLetter writes them
  int failed = 0;      // failed among them
  HostCheckRecord latest;
  HostCheckRecord lastFailure;  // checkId empty when none of them failed
};

struct FleetData {
  std::string dbPath;
  FleetOptions options;            // as applied
  std::vector<std::string> hosts;  // sorted; hosts with a shown sample or a check
  std::vector<std::string> skus;   // sorted
  std::vector<int> hostSku;        // per host: its newest sample's SKU (index into skus), -1 none
  double columnWidthMs = 0;
  std::vector<FleetColumn> columns;
  std::vector<FleetPattern> patterns;
  std::vector<std::string> leftOut;             // pattern keys with host samples that are not shown
  std::vector<std::string> labels;              // every run label in the database
  int runs = 0;                                 // runs with a shown sample
  std::string firstTime, lastTime;              // of those runs (UTC)
  std::size_t jobSamples = 0, linkSamples = 0;  // samples not shown (scope job, link)
  int checks = 0;                               // checks ingested
  std::vector<FleetHostChecks> hostChecks;      // per host
  std::vector<QuarantinedHost> quarantine;      // failed k of their last n checks, sorted by host
};

// The heatmap's relative value of a cell: round(value / median x 100), at most 254; 255 (none) when
// the median is not positive. Pure.
std::uint8_t relativeCell(double value, double median);

// The quarantine list in fleet mode's exclude-file format (docs/fleet.md): one line, the Slurm hostlist
// of the quarantined hosts ("node[03,17-18]"), or "" when none, for `srun --exclude=./FILE`. Host
// names that cannot stand in a hostlist (empty, or with ',', '[', ']' or white space) are left out and
// added to `unlisted` when given.
std::string quarantineExcludeFile(const FleetData& data, std::vector<std::string>* unlisted = nullptr);

// Checks the options: ConfigError saying what to change (k and n, a column count, times).
void checkFleetOptions(const FleetOptions& options);

// Reads the history database at `dbPath` and builds the fleet view. Throws ConfigError when the file
// is missing, not a dsreport history, newer than this dsreport, or a given pattern has no host
// samples (naming the patterns there are); IoError when SQLite cannot read it.
FleetData queryFleet(const std::string& dbPath, const FleetOptions& options = {});

}  // namespace ds::report::history
