// The "who is who" record of one rank, written by `dsbench world` (and later by dsdiag's world mode).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::report {

inline constexpr int kWorldSchemaVersion = 1;
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
  // "RANK=3 (from OMPI_COMM_WORLD_RANK)" lines, as discovery recorded them.
  std::vector<std::string> provenance;
};

void to_json(nlohmann::json& j, const RankRecord& r);
void from_json(const nlohmann::json& j, RankRecord& r);

// {"schema": "dsperf.world", "schema_version": 1, "ranks": [...]}
nlohmann::json worldToJson(const std::vector<RankRecord>& ranks);
// Checks the schema name and version; throws ConfigError naming `origin` on a mismatch or a
// malformed document.
std::vector<RankRecord> worldFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace ds::report
