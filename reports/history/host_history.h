// The per-host history for other modules: the samples of the history database (every judgeable
// figure of every ingested run, keyed by host, link and rank; reports/baseline/sample.h) with
// filters, the patterns they cover, each host's check verdicts, and the quarantine list (hosts that
// failed k of their last n checks). `dsreport baseline` builds baselines from loadSamples; the fleet
// dashboard reads the same tables (fleet_data.h).
//
//   Database db(path, Database::Mode::kExisting, 30000);
//   prepareForRead(db);  // checks the file, migrates an older layout
//   SampleFilter f;
//   f.metrics = {"busbw"};
//   f.scopes = {"host"};
//   f.lastRuns = 10;     // each host's newest 10 runs
//   std::vector<Sample> samples = loadSamples(db, f);
//
// Sample::time is the run's start time as the history stores it (ISO 8601 UTC, normalised by ingest;
// the ingest time when the file had none); Sample::label the run's label as stored (ingest --label
// overrides the file's).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/history/sqlite_db.h"
#include "reports/sample/sample.h"

namespace ds::report::history {

// Which samples to read. Every list is a filter when not empty (a sample passes when its field is
// one of the listed values); the filters combine with AND.
struct SampleFilter {
  std::vector<std::string> labels;  // run labels ("" is the unlabelled runs)
  std::string since, until;  // ISO 8601 UTC times, inclusive; "" open. "2026-03-01" is that day's start
  std::vector<std::string> metrics;   // busbw, link_bw, link_latency
  std::vector<std::string> scopes;    // host, link, job
  std::vector<std::string> hosts;     // Sample::host (for scope job: the job's host list)
  std::vector<std::string> patterns;  // patternKey()s
  std::vector<std::string> skus;      // hw::skuKey()s, "unknown", "mixed"
  // Each host's newest N runs only (runs that gave that host a sample passing the other filters),
  // so a baseline of "the last 10 nights" is the same per host whether hosts ran together or apart.
  // 0: all.
  int lastRuns = 0;
};

// The samples that pass, oldest first (by time, then run, then the order of samplesOf). Throws
// ConfigError on a time that is not ISO 8601 or a negative lastRuns, IoError on SQLite failures.
std::vector<Sample> loadSamples(Database& db, const SampleFilter& filter);
// The same on a file: opens it for reading (ConfigError when missing, not a history or newer).
std::vector<Sample> loadSamples(const std::string& dbPath, const SampleFilter& filter);

// A pattern that has samples, with how many and of how many hosts, for pickers and checks.
struct PatternInfo {
  std::string key;  // patternKey()
  std::string metric, collective, backend, dtype, op, place, unit;
  std::size_t bytes = 0;
  int worldSize = 0;
  bool higherIsBetter = true;
  std::size_t samples = 0;     // of scope host (the per-host figures)
  std::size_t hosts = 0;       // distinct hosts with a sample of scope host
  std::size_t allSamples = 0;  // of any scope
};
// Every pattern in the database, sorted by metric, collective, backend, dtype, op, bytes, place, world.
std::vector<PatternInfo> listPatterns(Database& db);

// One host's verdict in one ingested check.
struct HostCheckRecord {
  std::string checkId, time, host, sku;
  std::string state;    // healthy, unhealthy, no_baseline, no_result, cannot_judge
  std::string summary;  // "Healthy", "ERROR: <rule>: expected X, measured Y"
  std::string rule;     // the first rule that fired; "" when none did
  std::string pattern;  // its figure
  double measured = 0, expected = 0;
};
// A host failed a check when its state was unhealthy or no_result (a host that reported nothing is
// not fit to run jobs either); no_baseline and cannot_judge are not failures: nothing judged it (nor
// passed it).
bool checkFailed(const std::string& state);
// A state as one letter, for compact per-host strips: h healthy, u unhealthy, b no baseline, r no
// result, j cannot judge; '?' for other text.
char checkStateLetter(const std::string& state);
// And back, in words for people: 'j' -> "cannot judge"; "unknown" for another letter.
const char* checkStateWords(char letter);

// Each listed host's checks (all hosts when `hosts` is empty), newest first, at most `last` per host
// (0: all). Sorted by host, then newest first.
std::vector<HostCheckRecord> loadHostChecks(Database& db, const std::vector<std::string>& hosts = {},
                                            int last = 0);

struct QuarantinedHost {
  std::string host;
  int failed = 0;               // failed checks among its last `checks`
  int checks = 0;               // its checks considered: min(n, checks it has)
  HostCheckRecord lastFailure;  // its newest failed check
  HostCheckRecord latest;       // its newest check
};
// The hosts that failed at least k of their last n checks (a host with fewer than n checks is judged
// on those it has), sorted by host. ConfigError unless 1 <= k <= n.
std::vector<QuarantinedHost> quarantine(Database& db, int k, int n);
// The same rule on checks already read: loadHostChecks(db, hosts, n)'s result (sorted by host, newest
// first), judged at k.
std::vector<QuarantinedHost> quarantineOf(const std::vector<HostCheckRecord>& checks, int k);

}  // namespace ds::report::history
