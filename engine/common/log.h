// Minimal logging to stderr. Lines carry a "[dsperf]" tag and, when known, the rank, so that the
// interleaved output of many ranks stays readable. Thread-safe: one write() per line.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ds::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// The threshold comes from DS_LOG_LEVEL (debug, info, warn, error); default info.
Level threshold();
void setThreshold(Level level);
// The rank printed in each line; -1 (the default) prints none.
void setRank(int rank);

void write(Level level, std::string_view msg);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (threshold() <= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ds::log
