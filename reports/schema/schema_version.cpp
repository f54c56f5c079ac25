#include "reports/schema/schema_version.h"

#include <fmt/format.h>

#include <cctype>
#include <climits>
#include <cstdint>

#include "engine/common/error.h"

namespace ds::report {

std::string SchemaVersion::str() const { return fmt::format("{}.{}", major, minor); }

namespace {

// A non-empty run of digits, no sign, no leading '+'; false on overflow past 6 digits.
bool parseDigits(const std::string& s, int& out) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  out = std::stoi(s);
  return true;
}

}  // namespace

SchemaVersion parseSchemaVersion(const nlohmann::json& value, const std::string& origin) {
  SchemaVersion v;
  if (value.is_number_integer()) {  // the integer 1 of older files; one that does not fit an int is refused
                                    // below
    const bool fits = value.is_number_unsigned()
                          ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX)
                          : value.get<std::int64_t>() >= INT_MIN && value.get<std::int64_t>() <= INT_MAX;
    if (fits) {
      v.major = static_cast<int>(value.get<std::int64_t>());
      if (v.major >= 0) return v;
    }
  }
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    auto dot = s.find('.');
    if (dot != std::string::npos && parseDigits(s.substr(0, dot), v.major) &&
        parseDigits(s.substr(dot + 1), v.minor)) {
      return v;
    }
  }
  throw ConfigError(fmt::format(
      "{}: \"schema_version\" is {}, which is not a dsperf schema version (expected a string "
      "\"MAJOR.MINOR\" such as \"{}\"). The file was not written by dsperf, or was edited by hand.",
      origin, value.is_null() ? std::string("missing") : value.dump(), kSchemaVersion));
}

SchemaVersion checkSchemaVersion(const nlohmann::json& doc, const std::string& schemaName,
                                 const std::string& origin) {
  nlohmann::json value =
      doc.is_object() && doc.contains("schema_version") ? doc.at("schema_version") : nlohmann::json();
  SchemaVersion v = parseSchemaVersion(value, origin);
  if (v.major > kSchemaMajor) {
    throw ConfigError(
        fmt::format("{} was written by a newer dsperf (schema {} {}); this dsperf reads {}.x. Upgrade dsperf "
                    "on this machine.",
                    origin, schemaName, v.str(), kSchemaMajor));
  }
  if (v.major < kSchemaMajor) {
    throw ConfigError(
        fmt::format("{} was written by an older dsperf (schema {} {}); this dsperf reads {}.x. Read it with "
                    "the dsperf release that wrote it.",
                    origin, schemaName, v.str(), kSchemaMajor));
  }
  return v;
}

}  // namespace ds::report
