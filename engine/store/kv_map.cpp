#include "engine/store/kv_map.h"

#include <charconv>

#include "engine/common/error.h"

namespace ds::store::detail {

std::int64_t parseCounter(const std::string& key, const Bytes& value) {
  std::int64_t n = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  auto [ptr, ec] = std::from_chars(begin, end, n);
  if (value.empty() || ec != std::errc() || ptr != end) {
    std::string shown(begin, std::min<size_t>(value.size(), 40));
    throw ProtocolError(fmt::format(
        "add() on key '{}': its value '{}{}' is not a decimal integer; add() only works on keys that "
        "hold counters (do not set() a counter key to text)",
        key, shown, value.size() > 40 ? "..." : ""));
  }
  return n;
}

const Bytes* KvMap::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

std::int64_t KvMap::add(const std::string& key, std::int64_t delta) {
  std::int64_t current = 0;
  if (auto it = map_.find(key); it != map_.end()) current = parseCounter(key, it->second);
  std::int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    throw ProtocolError(
        fmt::format("add({}) on key '{}' (value {}) overflows a 64-bit counter", delta, key, current));
  }
  std::string text = std::to_string(sum);
  map_[key] = Bytes(text.begin(), text.end());
  return sum;
}

Bytes KvMap::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (expected.empty()) {
      map_[key] = desired;
      return desired;
    }
    return expected;
  }
  if (it->second == expected) it->second = desired;
  return it->second;
}

void KvMap::append(const std::string& key, const Bytes& value) {
  auto& v = map_[key];
  v.insert(v.end(), value.begin(), value.end());
}

std::vector<std::string> KvMap::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!contains(k)) out.push_back(k);
  }
  return out;
}

}  // namespace ds::store::detail
