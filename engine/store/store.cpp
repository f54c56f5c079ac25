#include "engine/store/store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/common/error.h"

namespace ds::store {

Bytes toBytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

std::string toString(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::vector<Bytes> Store::multiGetImpl(const std::vector<std::string>& keys, Duration timeout) {
  // One deadline for the whole batch, so N keys cannot take N timeouts.
  const auto start = std::chrono::steady_clock::now();
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    auto spent = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    values.push_back(getImpl(key, std::max(Duration(0), timeout - spent)));
  }
  return values;
}

void Store::multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                         Duration timeout) {
  if (keys.size() != values.size()) {
    throw ConfigError(fmt::format("multiSet on {}: {} keys but {} values; pass one value per key", describe(),
                                  keys.size(), values.size()));
  }
  for (size_t i = 0; i < keys.size(); ++i) setImpl(keys[i], values[i], timeout);
}

std::string waitTimeoutMessage(const Store& store, const std::vector<std::string>& keys, Duration timeout,
                               Duration elapsed) {
  return fmt::format("wait timeout after {}ms, keys: {} (store: {}; waited {:.2f} s)", timeout.count(),
                     fmt::join(keys, ", "), store.describe(), std::chrono::duration<double>(elapsed).count());
}

}  // namespace ds::store
