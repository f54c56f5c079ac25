// Where discovery reads environment variables from. The process environment in production; a map
// in tests, so that every launcher's variable set can be checked without touching the real env.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ds::env {

class EnvSource {
 public:
  virtual ~EnvSource() = default;
  // The variable's value, or nullopt when unset. An empty value counts as set.
  virtual std::optional<std::string> get(std::string_view name) const = 0;
};

class ProcessEnv final : public EnvSource {
 public:
  std::optional<std::string> get(std::string_view name) const override;
};

class MapEnv final : public EnvSource {
 public:
  MapEnv() = default;
  explicit MapEnv(std::map<std::string, std::string, std::less<>> vars) : vars_(std::move(vars)) {}
  MapEnv(std::initializer_list<std::pair<const std::string, std::string>> vars) : vars_(vars) {}
  std::optional<std::string> get(std::string_view name) const override;
  void set(std::string name, std::string value) { vars_[std::move(name)] = std::move(value); }

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

// Parses an environment value as an integer in [min, max]. Throws ConfigError naming the variable,
// the value and the valid range ("RANK='abc' is not an integer; ..."). `valid` describes the range
// in words for the message, e.g. "0 to WORLD_SIZE-1".
long long parseIntVar(std::string_view name, std::string_view value, long long min, long long max,
                      std::string_view valid);

// Parses an environment value as a byte count: "1048576", "64K", "1M", "2G" (binary; k/KiB forms
// too), at most 1 TiB. Throws ConfigError naming the variable and the accepted form.
std::size_t parseBytesVar(std::string_view name, const std::string& text);

}  // namespace ds::env
