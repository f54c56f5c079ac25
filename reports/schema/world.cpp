#include "reports/schema/world.h"

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

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
  if (r.localRankArg >= 0) j["local_rank_arg"] = r.localRankArg;
  if (r.placement) j["placement"] = *r.placement;
}

void from_json(const nlohmann::json& j, RankRecord& r) {
  readTo(j.at("rank"), r.rank);
  readTo(j.at("world_size"), r.worldSize);
  readTo(j.at("local_rank"), r.localRank);
  readTo(j.at("local_world_size"), r.localWorldSize);
  readTo(j.at("node_rank"), r.nodeRank);
  readTo(j.at("host"), r.host);
  readTo(j.at("pid"), r.pid);
  readTo(j.at("accelerator"), r.accelerator);
  readTo(j.at("device"), r.device);
  readTo(j.at("backend"), r.backend);
  readTo(j.at("job_id"), r.jobId);
  readTo(j.at("provenance"), r.provenance);
  if (j.contains("local_rank_arg")) readTo(j.at("local_rank_arg"), r.localRankArg);
  if (j.contains("placement")) r.placement = j.at("placement").get<Placement>();
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
  if (textOr(j, "schema", "") != kWorldSchemaName) {
    throw ConfigError(fmt::format("{} is not a dsperf world report (schema '{}', expected '{}').", origin,
                                  textOr(j, "schema", ""), kWorldSchemaName));
  }
  checkSchemaVersion(j, kWorldSchemaName, origin);
  return readFields(j, origin, kWorldSchemaName, [&] { return j.at("ranks").get<std::vector<RankRecord>>(); });
}

}  // namespace ds::report
