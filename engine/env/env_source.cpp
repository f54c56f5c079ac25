#include "engine/env/env_source.h"

#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "engine/common/error.h"

namespace ds::env {

std::optional<std::string> ProcessEnv::get(std::string_view name) const {
  const char* v = std::getenv(std::string(name).c_str());  // NOLINT(concurrency-mt-unsafe)
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> MapEnv::get(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

long long parseIntVar(std::string_view name, std::string_view value, long long min, long long max,
                      std::string_view valid) {
  std::string_view trimmed = value;
  while (!trimmed.empty() && (trimmed.front() == ' ' || trimmed.front() == '\t')) trimmed.remove_prefix(1);
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  long long out = 0;
  const char* first = trimmed.data();
  const char* last = trimmed.data() + trimmed.size();
  if (!trimmed.empty() && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (trimmed.empty() || ec == std::errc::invalid_argument || ptr != last) {
    throw ConfigError(
        fmt::format("{}='{}' is not an integer; it must be a whole number from {}. Check the "
                    "launcher command or job script that sets {}.",
                    name, value, valid, name));
  }
  if (ec == std::errc::result_out_of_range || out > max) {
    throw ConfigError(fmt::format("{}={} is too large; it must be {}.", name, value, valid));
  }
  if (out < 0 && min >= 0) {
    throw ConfigError(fmt::format("{}={} is negative; it must be {}.", name, value, valid));
  }
  if (out < min) {
    throw ConfigError(fmt::format("{}={} is out of range; it must be {}.", name, value, valid));
  }
  return out;
}

std::size_t parseBytesVar(std::string_view name, const std::string& text) {
  auto bad = [&] {
    return ConfigError(
        fmt::format("{}='{}' is not a byte count; give a number with an optional K, M or G "
                    "suffix (binary), e.g. 1M.",
                    name, text));
  };
  if (text.empty()) throw bad();
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string suffix = text.substr(pos);
  unsigned long long mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    mult = 1ull << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    mult = 1ull << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    mult = 1ull << 30;
  } else if (!suffix.empty()) {
    throw bad();
  }
  if (text[0] == '-' || v > (1ull << 40) / mult) throw bad();
  return static_cast<std::size_t>(v * mult);
}

}  // namespace ds::env
