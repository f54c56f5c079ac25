// c10d's key-value semantics in one place, shared by HashStore, FileStore and the TcpStore server so
// that every store answers add/compareSet/append the same way. Not thread-safe: callers lock.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/store/store.h"

namespace ds::store::detail {

// Parses a counter written by add(). Throws ProtocolError naming the key when the value is not a
// decimal integer (someone set() text there).
std::int64_t parseCounter(const std::string& key, const Bytes& value);

class KvMap {
 public:
  void set(const std::string& key, Bytes value) { map_[key] = std::move(value); }
  // nullptr when absent. The pointer is valid until the next mutation.
  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  // Throws ProtocolError if the value is not a counter or the sum overflows.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // c10d: absent + empty expected -> set; absent + non-empty expected -> returns expected unchanged;
  // present and equal -> set; otherwise returns the current value.
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired);
  void append(const std::string& key, const Bytes& value);
  bool erase(const std::string& key) { return map_.erase(key) != 0; }
  void clear() { map_.clear(); }
  std::int64_t size() const { return static_cast<std::int64_t>(map_.size()); }
  // The keys of `keys` not present, in order.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

 private:
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace ds::store::detail
