// The "who is who" record of one rank, written by `dsbench world` (and later by dsdiag's world mode).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/schema/placement.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

inline constexpr const char* kWorldSchemaVersion = kSchemaVersion;  // reports/schema/schema_version.h
inline constexpr const char* kWorldSchemaName = "dsperf.world";

struct RankRecord {
  int rank = 0;
  int worldSize = 0;
  int localRank = 0;
  int localWorldSize = 0;
  int nodeRank = 0;
  std::string host;
  long pid = 0;
  std::string accelerator;
  std::string device;
  std::string backend;
  std::string jobId;
  // The --local_rank / --local-rank argument the launcher passed this rank (-1: none); it was
  // checked against LOCAL_RANK at startup.
  int localRankArg = -1;
  // "RANK=3 (from OMPI_COMM_WORLD_RANK)" lines, as discovery recorded them.
  std::vector<std::string> provenance;
  // CPU affinity and node load at start-up; absent in files written before it was recorded.
  std::optional<Placement> placement = std::nullopt;
};

// A one-element allreduce through the process group, checked against the known answer.
struct SmokeResult {
  bool ran = false;
  bool ok = false;
  std::string backend;
  double expected = 0;
  double got = 0;
  double micros = 0;
};

void to_json(nlohmann::json& j, const RankRecord& r);
void from_json(const nlohmann::json& j, RankRecord& r);

// {"schema": "dsperf.world", "schema_version": "1.0", "ranks": [...], "smoke": {...}}
nlohmann::json worldToJson(const std::vector<RankRecord>& ranks, const SmokeResult& smoke = {});
// Checks the schema name and version; throws ConfigError naming `origin` on a mismatch or a
// malformed document.
std::vector<RankRecord> worldFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace ds::report
