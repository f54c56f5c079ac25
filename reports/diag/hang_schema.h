// `dsdiag hang`'s records: the verdict on a hung job, read from every rank's Flight Recorder dump
// (diag/hang/analyse.h fills them). reports/ turns them into JSON (schema "dsperf.hang"), text
// (hang_text.h) and an HTML page (reports/html/hang_html.h). Plain data: no diag/ or engine types,
// so every reader of a report can include this.
//
// Versions: 1.0 (the first); 1.1 adds group_timelines (each group's last collectives, ranks that
// look alike collapsed into one row) and each waiting record's chain_ends_at, and keeps the per-rank
// timelines of at most 64 ranks (every rank of a job that small, else the ranks the verdict names),
// so that a report of 16,384 ranks stays a few MB. A 1.0 file reads with both new fields empty.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds::report {

inline constexpr const char* kHangSchemaName = "dsperf.hang";
inline constexpr const char* kHangSchemaVersion = "1.1";

// The verdict and dsdiag's exit codes (docs/dsdiag.md: 0 all pass, 1 warnings only, 2 a failure, 3 the
// tool could not run), which a job script reads the same way for `dsdiag hang`:
//   kNoFaultFound  0  every group agrees and nothing is pending: nothing to blame ("all pass");
//   kCannotDecide  1  the dumps cannot name a rank; the report says what is missing (a warning: a
//                     person must look, but no rank is accused);
//   kCulpritFound  2  at least one rank named with evidence (a failure found);
//   bad input      3  no dump could be read at all, or a flag was wrong: decided by the CLI before
//                     any verdict exists (kHangBadInputExit).
enum class HangVerdict { kCulpritFound, kNoFaultFound, kCannotDecide };
inline constexpr int kHangBadInputExit = 3;
const char* hangVerdictName(HangVerdict v);  // "culprit_found", "no_fault_found", "cannot_decide"
HangVerdict parseHangVerdict(const std::string& s);  // throws ConfigError on other text
int hangExitCode(HangVerdict v);                      // 2, 0, 1 as above

// Why a rank is named (or, for kBlockedByOtherGroup, why a rank that others wait for is not).
enum class FaultKind {
  kNeverEntered,         // it did not enqueue the op its peers wait in, and went on with other work
  kMismatchedOp,         // it entered the same sequence id with another collective
  kMismatchedSize,       // ... with other tensor sizes (torch's rules: all_gather / reduce_scatter aware)
  kMismatchedDtype,      // ... with other dtypes
  kP2pUnmatched,         // a send or recv whose partner op was never posted by this rank
  kStalledHost,          // it stopped issuing work: its enqueue lags and it issued nothing after
  kStalledDevice,        // it enqueued the op but its completion (or start) lags its peers'
  kBlockedByOtherGroup,  // a waiter only: it is stuck in another group's op (never a culprit)
  kNoDump,               // it left no dump and its peers all wait for it
};
const char* faultKindName(FaultKind k);  // "never_entered", ..., "no_dump"
FaultKind parseFaultKind(const std::string& s);

// One claim with where it can be checked.
struct HangEvidence {
  std::string claim;   // "rank 12 never enqueued all_reduce #20537 of group 0"
  std::string file;    // the dump, or "logs/rank3.err:1042"
  std::string detail;  // the fields behind it: "pg_status '0': last_enqueued 20536, last_completed 20536"
  bool operator==(const HangEvidence&) const = default;
};

// The group an op belongs to: pg_config's key ("0", "1", or a hash), its desc ("default_pg").
struct HangGroupRef {
  std::string pgName;
  std::string pgDesc;
  bool operator==(const HangGroupRef&) const = default;
};

struct HangCulprit {
  int rank = -1;
  std::string host;  // "" when no source named it
  HangGroupRef group;
  std::string pgId;  // the group's pg_id in this rank's dump ("" when unknown)
  std::optional<int64_t> seq;  // collective_seq_id, or p2p_seq_id when p2p
  bool p2p = false;
  std::string op;  // "all_reduce", "send"
  FaultKind kind = FaultKind::kNeverEntered;
  std::string summary;  // the verdict sentence for this rank
  std::vector<HangEvidence> evidence;
  bool operator==(const HangCulprit&) const = default;
};

// A member of a group that left no dump, and what its peers last saw of it.
struct HangNoDump {
  int rank = -1;
  std::string host;
  HangGroupRef group;                   // the group the sighting is from ("" when in no group)
  std::optional<int64_t> lastSeenSeq;   // the last op all its dumped peers completed in that group
  std::string detail;                   // "its peers last saw it at #20536 of group 0 (default_pg)"
  bool operator==(const HangNoDump&) const = default;
};

// Ranks found waiting in the same op for the same reason.
struct HangWaiting {
  HangGroupRef group;
  std::optional<int64_t> seq;
  bool p2p = false;
  std::string op;
  std::vector<int> ranks;
  std::optional<int64_t> sinceNs;  // the earliest time_created_ns of that op among them
  std::vector<int> waitsFor;       // the ranks they wait for directly
  bool blockedByOtherGroup = false;  // they are waited for in another group, but are stuck here
  std::string reason;              // "wait for rank 12", "blocked in group 1 broadcast #7, itself ..."
  std::vector<int> chainEndsAt;    // the culprits the chain of waits ends at (1.1; empty: undecided)
  bool operator==(const HangWaiting&) const = default;
};

// One process group as the dumps show it.
struct HangGroup {
  HangGroupRef group;
  std::vector<int> members;
  int dumps = 0;                          // members whose dump was read
  std::optional<int64_t> minSeq, maxSeq;  // collective seq ids present in the dumps' entries
  std::optional<int64_t> lastCompletedByAll;  // the last seq every dumped member completed
  std::optional<int64_t> firstDivergentSeq;   // where members first disagree (op, size, dtype, progress)
  bool operator==(const HangGroup&) const = default;
};

// What the dumps could not settle, and what would settle it.
struct HangUndecided {
  HangGroupRef group;
  std::optional<int64_t> seq;
  std::vector<int> ranks;  // the ranks the question is about
  std::string reason;      // "rank 12 left no dump; its peers last saw it at #20538 ..."
  bool operator==(const HangUndecided&) const = default;
};

// The last entries of one rank on one group, oldest first, for the HTML timeline.
struct HangTimelineEntry {
  std::optional<int64_t> seq;  // collective_seq_id, or p2p_seq_id when p2p
  bool p2p = false;
  std::string op;
  std::string state;  // "scheduled", "started", "completed", "" when the dump did not say
  std::vector<std::vector<int64_t>> inputSizes, outputSizes;
  std::optional<int64_t> timeCreatedNs;
  bool operator==(const HangTimelineEntry&) const = default;
};
struct HangTimeline {
  int rank = -1;
  std::string pgName;
  std::vector<HangTimelineEntry> entries;
  bool operator==(const HangTimeline&) const = default;
};

// Where one rank stands at one collective of a group, from its pg_status watermarks (or, without
// them, its entries' states): completed, started, enqueued and not started ("scheduled"), never
// enqueued, the rank left no dump, or its dump says nothing of the group.
enum class HangCell { kCompleted, kStarted, kScheduled, kNotEntered, kNoDump, kUnknown };
const char* hangCellName(HangCell c);  // "completed", "started", "scheduled", "not_entered", "no_dump", "unknown"
HangCell parseHangCell(const std::string& s);  // throws ConfigError on other text

// Ranks whose rows are alike: the same cell at every column and the same columns mismatched.
struct HangTimelineRow {
  std::vector<int> ranks;
  std::vector<HangCell> cells;            // one per column
  std::vector<int64_t> mismatchedSeqs;    // columns where their op, sizes or dtypes differ from the others'
  bool operator==(const HangTimelineRow&) const = default;
};
// One group's last collectives: columns firstSeq, firstSeq + 1, ..., one per op; a row per kind of
// rank. Rows with most ranks first.
struct HangGroupTimeline {
  HangGroupRef group;
  int64_t firstSeq = 0;
  std::vector<std::string> ops;  // per column: the op most members recorded there ("" when none did)
  std::optional<int64_t> divergentSeq;  // the group's first divergent seq, when it is a column
  std::vector<HangTimelineRow> rows;
  bool operator==(const HangGroupTimeline&) const = default;
};

struct HangReport {
  HangVerdict verdict = HangVerdict::kCannotDecide;
  std::string headline;  // one line: the verdict sentence
  int worldSize = 0;     // ranks named by any group or dump
  int dumpsRead = 0;
  std::vector<HangCulprit> culprits;
  std::vector<HangNoDump> noDump;
  std::vector<HangWaiting> waiting;
  std::vector<HangGroup> groups;
  std::vector<HangUndecided> undecided;
  std::vector<std::string> problems;  // sentences about the input (unreadable files, disagreements)
  std::vector<std::string> inputs;    // every file read
  std::vector<HangTimeline> timelines;            // per rank: at most 64 ranks (see the top)
  std::vector<HangGroupTimeline> groupTimelines;  // per group (1.1)
  bool operator==(const HangReport&) const = default;
};

nlohmann::json toJson(const HangReport& r);
// Strict: checks "schema" and "schema_version" and every field's type; throws ConfigError naming
// `origin` and the field (JSON pointer).
HangReport hangReportFromJson(const nlohmann::json& j, const std::string& origin = "the hang report");

// The hang report in `path`, or nullopt when the file is not one (its "schema" is not dsperf.hang,
// or it is not JSON at all: the other readers say what it is). A file that means to be a hang report
// but does not read (truncated, damaged, a newer major version) throws ConfigError naming the path
// and what is wrong; IoError when it cannot be read.
std::optional<HangReport> readHangReportFile(const std::string& path);

// time_created_ns as ISO 8601 UTC to the second ("2026-03-02T14:02:11Z"); "" for a value that is not
// a wall-clock time between the years 2000 and 2200 (a monotonic clock, garbage).
std::string hangIsoTime(int64_t ns);

}  // namespace ds::report
