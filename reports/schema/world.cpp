#include "reports/schema/world.h"

#include "engine/common/error.h"

namespace ds::report {

void to_json(nlohmann::json& j, const RankRecord& r) {
  j = nlohmann::json{{"rank", r.rank},
                     {"world_size", r.worldSize},
                     {"local_rank", r.localRank},
                     {"local_world_size", r.localWorldSize},
                     {"node_rank", r.nodeRank},
                     {"host", r.host},
                     {"pid", r.pid},
                     {"accelerator", r.accelerator},
                     {"device", r.device},
                     {"backend", r.backend},
                     {"job_id", r.jobId},
                     {"provenance", r.provenance}};
}

void from_json(const nlohmann::json& j, RankRecord& r) {
  j.at("rank").get_to(r.rank);
  j.at("world_size").get_to(r.worldSize);
  j.at("local_rank").get_to(r.localRank);
  j.at("local_world_size").get_to(r.localWorldSize);
  j.at("node_rank").get_to(r.nodeRank);
  j.at("host").get_to(r.host);
  j.at("pid").get_to(r.pid);
  j.at("accelerator").get_to(r.accelerator);
  j.at("device").get_to(r.device);
  j.at("backend").get_to(r.backend);
  j.at("job_id").get_to(r.jobId);
  j.at("provenance").get_to(r.provenance);
}

nlohmann::json worldToJson(const std::vector<RankRecord>& ranks, const SmokeResult& smoke) {
  nlohmann::json j{{"schema", kWorldSchemaName}, {"schema_version", kWorldSchemaVersion}, {"ranks", ranks}};
  if (smoke.ran) {
    j["smoke"] = {{"op", "allreduce"},          {"backend", smoke.backend}, {"ok", smoke.ok},
                  {"expected", smoke.expected}, {"got", smoke.got},         {"time_us", smoke.micros}};
  }
  return j;
}

std::vector<RankRecord> worldFromJson(const nlohmann::json& j, const std::string& origin) {
  try {
    if (j.value("schema", "") != kWorldSchemaName) {
      throw ConfigError(fmt::format("{} is not a dsperf world report (schema '{}', expected '{}').", origin,
                                    j.value("schema", ""), kWorldSchemaName));
    }
    checkSchemaVersion(j, kWorldSchemaName, origin);
    return j.at("ranks").get<std::vector<RankRecord>>();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{} is not a valid dsperf world report: {}", origin, e.what()));
  }
}

}  // namespace ds::report
