#include "reports/baseline/check_schema.h"

#include <fmt/format.h>

#include <iterator>

#include "engine/common/error.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

using nlohmann::json;

const char* checkStateName(CheckState s) {
  switch (s) {
    case CheckState::kHealthy:
      return "healthy";
    case CheckState::kUnhealthy:
      return "unhealthy";
    case CheckState::kNoBaseline:
      return "no_baseline";
    case CheckState::kNoResult:
      return "no_result";
    case CheckState::kCannotJudge:
      return "cannot_judge";
  }
  return "?";
}

CheckState parseCheckState(const std::string& s) {
  for (CheckState c : kCheckStates)
    if (s == checkStateName(c)) return c;
  throw ConfigError(fmt::format(
      "host state '{}' is not one of healthy, unhealthy, no_baseline, no_result, cannot_judge; a newer "
      "dsreport may have written it: read it with that one",
      s));
}

void to_json(json& j, const CheckFinding& v) {
  j = {{"rule", v.rule},
       {"kind", v.kind},
       {"pattern", v.pattern},
       {"metric", v.metric},
       {"bytes", v.bytes},
       {"unit", v.unit},
       {"measured", v.measured},
       {"expected", v.expected},
       {"threshold", v.threshold},
       {"failed_runs", v.failedRuns},
       {"runs", v.runs},
       {"passed", v.passed},
       {"cannot_judge", v.cannotJudge},
       {"spread", v.spread},
       {"spread_upper", v.spreadUpper},
       {"runs_needed", v.runsNeeded},
       {"pooled_runs", v.pooledRuns},
       {"text", v.text}};
}
void from_json(const json& j, CheckFinding& v) {
  readTo(j.at("rule"), v.rule);
  readTo(j.at("kind"), v.kind);
  readTo(j.at("pattern"), v.pattern);
  readTo(j.at("metric"), v.metric);
  readTo(j.at("bytes"), v.bytes);
  readTo(j.at("unit"), v.unit);
  readTo(j.at("measured"), v.measured);
  readTo(j.at("expected"), v.expected);
  readTo(j.at("threshold"), v.threshold);
  readTo(j.at("failed_runs"), v.failedRuns);
  readTo(j.at("runs"), v.runs);
  readTo(j.at("passed"), v.passed);
  // Since 1.1; a 1.0 file has none (nothing was undecided then).
  if (j.contains("cannot_judge")) readTo(j.at("cannot_judge"), v.cannotJudge);
  if (j.contains("spread")) readTo(j.at("spread"), v.spread);
  if (j.contains("spread_upper")) readTo(j.at("spread_upper"), v.spreadUpper);
  if (j.contains("runs_needed")) readTo(j.at("runs_needed"), v.runsNeeded);
  if (j.contains("pooled_runs")) readTo(j.at("pooled_runs"), v.pooledRuns);
  readTo(j.at("text"), v.text);
}
void to_json(json& j, const HostCheck& v) {
  j = {{"host", v.host},
       {"sku", v.sku},
       {"state", checkStateName(v.state)},
       {"summary", v.summary},
       {"findings", v.findings}};
}
void from_json(const json& j, HostCheck& v) {
  readTo(j.at("host"), v.host);
  readTo(j.at("sku"), v.sku);
  v.state = parseCheckState(j.at("state").get<std::string>());
  readTo(j.at("summary"), v.summary);
  readTo(j.at("findings"), v.findings);
}

int checkExitCode(const CheckReport& r) {
  int rc = 0;
  for (const auto& h : r.hosts) {
    if (h.state == CheckState::kUnhealthy || h.state == CheckState::kNoResult) return 2;
    if (h.state == CheckState::kCannotJudge) rc = kCheckExitCannotJudge;
    if (h.state == CheckState::kNoBaseline && rc == 0) rc = 1;
  }
  return rc;
}

json checkToJson(const CheckReport& r) {
  int counts[std::size(kCheckStates)] = {};
  for (const auto& h : r.hosts) ++counts[static_cast<int>(h.state)];
  return {{"schema", kCheckSchemaName},
          {"schema_version", kCheckSchemaVersion},
          {"time", r.time},
          {"baseline_id", r.baselineId},
          {"rules_file", r.rulesFile},
          {"k", r.k},
          {"n", r.n},
          {"run_ids", r.runIds},
          {"hosts", r.hosts},
          {"summary",
           {{"healthy", counts[0]},
            {"unhealthy", counts[1]},
            {"no_baseline", counts[2]},
            {"no_result", counts[3]},
            {"cannot_judge", counts[4]},
            {"exit_code", checkExitCode(r)}}}};
}

CheckReport checkFromJson(const json& j, const std::string& origin) {
  if (!j.is_object() || j.value("schema", std::string{}) != kCheckSchemaName)
    throw ConfigError(
        fmt::format("{} is not a dsreport check result (schema \"{}\" expected); give the file that "
                    "'dsreport check -o FILE' wrote.",
                    origin, kCheckSchemaName));
  checkSchemaVersion(j, kCheckSchemaName, origin);
  return readFields(j, origin, kCheckSchemaName, [&] {
    CheckReport r;
    readTo(j.at("time"), r.time);
    readTo(j.at("baseline_id"), r.baselineId);
    readTo(j.at("rules_file"), r.rulesFile);
    readTo(j.at("k"), r.k);
    readTo(j.at("n"), r.n);
    readTo(j.at("run_ids"), r.runIds);
    readTo(j.at("hosts"), r.hosts);
    return r;
  });
}

}  // namespace ds::report
