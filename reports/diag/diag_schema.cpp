#include "reports/diag/diag_schema.h"

#include <algorithm>

#include "engine/common/error.h"
#include "reports/diag/fleet_json.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

namespace ds::report {

const char* diagStatusName(DiagStatus s) {
  switch (s) {
    case DiagStatus::kPass:
      return "PASS";
    case DiagStatus::kWarn:
      return "WARN";
    case DiagStatus::kFail:
      return "FAIL";
    case DiagStatus::kSkip:
      return "SKIP";
  }
  return "?";
}

DiagStatus parseDiagStatus(const std::string& s) {
  if (s == "PASS") return DiagStatus::kPass;
  if (s == "WARN") return DiagStatus::kWarn;
  if (s == "FAIL") return DiagStatus::kFail;
  if (s == "SKIP") return DiagStatus::kSkip;
  throw ConfigError(fmt::format("'{}' is not a dsdiag status; expected PASS, WARN, FAIL or SKIP.", s));
}

DiagCounts countStatuses(const std::vector<DiagRecord>& records) {
  DiagCounts c;
  for (const auto& r : records) {
    switch (r.status) {
      case DiagStatus::kPass:
        ++c.pass;
        break;
      case DiagStatus::kWarn:
        ++c.warn;
        break;
      case DiagStatus::kFail:
        ++c.fail;
        break;
      case DiagStatus::kSkip:
        ++c.skip;
        break;
    }
  }
  return c;
}

int diagExitCode(const std::vector<DiagRecord>& records) {
  auto c = countStatuses(records);
  if (c.fail > 0) return 2;
  if (c.warn > 0) return 1;
  return 0;
}

int diagReportExitCode(const DiagReport& report) {
  int code = diagExitCode(report.checks);
  return report.fleet ? std::max(code, fleetExitCode(report.fleet->judgement)) : code;
}

void to_json(nlohmann::json& j, const DiagRecord& r) {
  j = nlohmann::json{{"id", r.id},           {"family", r.family}, {"status", diagStatusName(r.status)},
                     {"message", r.message}, {"remedy", r.remedy}, {"data", r.data},
                     {"rank", r.rank},       {"host", r.host}};
}

void from_json(const nlohmann::json& j, DiagRecord& r) {
  readTo(j.at("id"), r.id);
  readTo(j.at("family"), r.family);
  r.status = parseDiagStatus(j.at("status").get<std::string>());
  readTo(j.at("message"), r.message);
  readTo(j.at("remedy"), r.remedy);
  r.data = j.value("data", nlohmann::json::object());
  r.rank = readIntOr(j, "rank", -1);
  r.host = textOr(j, "host", "");
}

nlohmann::json diagToJson(const DiagReport& report) {
  auto c = countStatuses(report.checks);
  nlohmann::json j{{"schema", kDiagSchemaName},
                        {"schema_version", kDiagSchemaVersion},
                        {"mode", report.mode},
                        {"world_size", report.worldSize},
                        {"host", report.host},
                        {"tool_version", report.toolVersion},
                        {"summary",
                         {{"pass", c.pass},
                          {"warn", c.warn},
                          {"fail", c.fail},
                          {"skip", c.skip},
                          {"exit_code", diagReportExitCode(report)}}},
                        {"missing_ranks", report.missingRanks},
                        {"checks", report.checks}};
  if (report.fleet) j["fleet"] = *report.fleet;
  return j;
}

DiagReport diagFromJson(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || textOr(j, "schema", "") != kDiagSchemaName) {
    throw ConfigError(fmt::format("{} is not a dsdiag report (schema '{}', expected '{}').", origin,
                                  textOr(j, "schema", ""), kDiagSchemaName));
  }
  checkSchemaVersion(j, kDiagSchemaName, origin);
  return readFields(j, origin, kDiagSchemaName, [&] {
    DiagReport r;
    readTo(j.at("mode"), r.mode);
    readTo(j.at("world_size"), r.worldSize);
    r.host = textOr(j, "host", "");
    r.toolVersion = textOr(j, "tool_version", "");
    if (j.contains("missing_ranks")) readTo(j.at("missing_ranks"), r.missingRanks);
    const auto& checks = j.at("checks");
    if (!checks.is_array())
      throw nlohmann::json::type_error::create(302, std::string("type must be array, but is ") + checks.type_name(),
                                               &checks);
    for (std::size_t i = 0; i < checks.size(); ++i) {
      try {
        r.checks.push_back(checks[i].get<DiagRecord>());
      } catch (const ConfigError& e) {  // a status that is not one of ours
        throw ConfigError(fmt::format("{}: at /checks/{}/status: {}", origin, i, e.what()));
      }
    }
    if (j.contains("fleet") && !j.at("fleet").is_null()) r.fleet = fleetFromJsonAt(j.at("fleet"), origin, "/fleet");
    return r;
  });
}

}  // namespace ds::report
