// The one version of every dsperf result schema (dsperf.sweep, dsperf.train, dsperf.diag,
// dsperf.world and the journals): "schema_version": "MAJOR.MINOR". A reader accepts any minor of its
// own major (a minor only adds fields, which readers ignore) and refuses another major with a
// sentence that says which dsperf to use. Files written before the string form carry the integer 1,
// which reads as "1.0". reports/schema/dsperf.schema.json is the JSON Schema of these documents.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ds::report {

inline constexpr int kSchemaMajor = 1;
// 1.1: --repeat (sweep "repeats", train "repeats").
// 1.2: the sweep's tails: "p90_us" and "p999_us" in every per-iteration statistics block ("iter";
//      optional: absent in 1.1 files, whose readers then know them as unknown), args "per_iter_timing"
//      and "per_iter_skip" (dsbench coll -I/-K), and each place's "times_us" (with -I 1|2 only).
// 1.3: the train record's "time_ms.step_device" (CUDA runs: the step timed with CUDA events; optional),
//      and the dsperf.gpu document (dsbench gpu).
inline constexpr int kSchemaMinor = 3;
// What every writer puts in "schema_version".
inline constexpr const char* kSchemaVersion = "1.3";

struct SchemaVersion {
  int major = 0;
  int minor = 0;
  std::string str() const;  // "1.0"
};

// "1.0" or "1.12" -> {1, 0} / {1, 12}; an integer N (older files) -> {N, 0}. Throws ConfigError
// naming `origin` for anything else (a missing field, "1", "v1.0", 1.5, a negative number).
SchemaVersion parseSchemaVersion(const nlohmann::json& value, const std::string& origin);

// Checks doc["schema_version"] of a document of schema `schemaName` ("dsperf.sweep", ...) against
// this build's major. Same major: returns the parsed version. Newer major: ConfigError "x.json was
// written by a newer dsperf (schema dsperf.sweep 2.0); this dsperf reads 1.x. Upgrade dsperf on this
// machine." Older major: ConfigError saying to read it with the older dsperf that wrote it.
SchemaVersion checkSchemaVersion(const nlohmann::json& doc, const std::string& schemaName,
                                 const std::string& origin);

}  // namespace ds::report
