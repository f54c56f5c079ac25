// Result files (JSON, HTML) are written atomically (temp file in the same folder + fsync + rename), so a killed run
// never leaves a half-written result.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ds::report {

// Serialises for a file: a string with bytes that are not UTF-8 (a hostname or env value from a broken
// locale, an imported text) is written with U+FFFD in their place instead of failing the whole write.
std::string dumpJson(const nlohmann::json& j, int indent = -1);
// Writes text to path through a temp file in the same folder, fsync and rename: a reader sees the old
// file or the whole new one. Throws IoError naming the path and errno; the temp file is removed.
void writeTextAtomic(const std::string& path, const std::string& text);
// writeTextAtomic of dumpJson(j, 2).
void writeJsonAtomic(const std::string& path, const nlohmann::json& j);
// Throws IoError when unreadable, ConfigError naming the path and position when not JSON.
nlohmann::json readJson(const std::string& path);

}  // namespace ds::report
