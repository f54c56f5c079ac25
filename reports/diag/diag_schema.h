// dsdiag's result records and their versioned JSON ("dsperf.diag"). Checks fill DiagRecords; only
// reports/ turns them into tables and files.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/diag/fleet_schema.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

inline constexpr const char* kDiagSchemaVersion = kSchemaVersion;  // reports/schema/schema_version.h
inline constexpr const char* kDiagSchemaName = "dsperf.diag";

// Ordered by severity: worst() and the exit code rely on kPass < kSkip < kWarn < kFail.
enum class DiagStatus { kPass, kSkip, kWarn, kFail };

// "PASS", "WARN", "FAIL", "SKIP".
const char* diagStatusName(DiagStatus s);
// Throws ConfigError on other text.
DiagStatus parseDiagStatus(const std::string& s);

// One finding of one check on one rank.
struct DiagRecord {
  std::string id;      // stable, "family.name", e.g. "net.master_port_free"
  std::string family;  // "env", "net", "gpu", "nccl", "mpi", "system", "world"
  DiagStatus status = DiagStatus::kPass;
  std::string message;  // what was found and, when it is a problem, why it matters
  std::string remedy;   // what to do; empty on PASS
  nlohmann::json data = nlohmann::json::object();
  int rank = -1;  // -1: cross-rank (world) finding or a single process without a rank
  std::string host;
};

struct DiagReport {
  std::string mode = "local";  // "local" or "world"
  int worldSize = 1;
  std::string host;
  std::string toolVersion;
  std::vector<int> missingRanks;  // world mode: ranks that never reported
  std::vector<DiagRecord> checks;
  // Fleet mode (dsdiag --world on many hosts): the probes, link pairs and per-host verdicts. Absent
  // otherwise, and in files written before fleet mode.
  std::optional<FleetReport> fleet;
};

struct DiagCounts {
  int pass = 0, warn = 0, fail = 0, skip = 0;
};
DiagCounts countStatuses(const std::vector<DiagRecord>& records);

// dsdiag's documented exit codes: 0 all pass (or skipped), 1 warnings only, 2 a failure.
// (3, the tool could not run, is decided by main.)
int diagExitCode(const std::vector<DiagRecord>& records);
// The report's: the worse of diagExitCode(checks) and, in fleet mode, fleetExitCode (2 when a host or
// link is suspect or a host sent no result).
int diagReportExitCode(const DiagReport& report);

void to_json(nlohmann::json& j, const DiagRecord& r);
void from_json(const nlohmann::json& j, DiagRecord& r);

// {"schema": "dsperf.diag", "schema_version": "1.0", "mode", "world_size", "host", "tool_version",
//  "summary": {pass, warn, fail, skip, exit_code}, "missing_ranks": [...], "checks": [...],
//  "fleet": {...} (fleet mode only; reports/diag/fleet_schema.h)}. exit_code is diagReportExitCode.
nlohmann::json diagToJson(const DiagReport& report);
// Checks schema name and version; throws ConfigError naming `origin` on a mismatch or malformed input.
DiagReport diagFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace ds::report
