#include "engine/store/hash_store.h"

#include "engine/common/error.h"

namespace ds::store {

using Clock = std::chrono::steady_clock;

void HashStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                           Duration timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto allThere = [&] {
    for (const auto& k : keys) {
      if (!map_.contains(k)) return false;
    }
    return true;
  };
  if (!changed_.wait_until(lock, deadline, allThere)) {
    auto elapsed = std::chrono::duration_cast<Duration>(Clock::now() - start);
    throw TimeoutError(waitTimeoutMessage(*this, map_.missing(keys), timeout, elapsed));
  }
}

void HashStore::setImpl(const std::string& key, const Bytes& value, Duration) {
  {
    std::lock_guard lock(mu_);
    map_.set(key, value);
  }
  changed_.notify_all();
}

Bytes HashStore::getImpl(const std::string& key, Duration timeout) {
  std::unique_lock lock(mu_);
  waitLocked(lock, {key}, timeout);
  return *map_.find(key);
}

std::int64_t HashStore::addImpl(const std::string& key, std::int64_t delta, Duration) {
  std::int64_t v;
  {
    std::lock_guard lock(mu_);
    v = map_.add(key, delta);
  }
  changed_.notify_all();
  return v;
}

Bytes HashStore::compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                                Duration) {
  Bytes v;
  {
    std::lock_guard lock(mu_);
    v = map_.compareSet(key, expected, desired);
  }
  changed_.notify_all();
  return v;
}

bool HashStore::checkImpl(const std::vector<std::string>& keys, Duration) {
  std::lock_guard lock(mu_);
  return map_.missing(keys).empty();
}

bool HashStore::deleteKeyImpl(const std::string& key, Duration) {
  std::lock_guard lock(mu_);
  return map_.erase(key);
}

std::int64_t HashStore::numKeysImpl(Duration) {
  std::lock_guard lock(mu_);
  return map_.size();
}

void HashStore::waitImpl(const std::vector<std::string>& keys, Duration timeout) {
  std::unique_lock lock(mu_);
  waitLocked(lock, keys, timeout);
}

void HashStore::appendImpl(const std::string& key, const Bytes& value, Duration) {
  {
    std::lock_guard lock(mu_);
    map_.append(key, value);
  }
  changed_.notify_all();
}

std::vector<Bytes> HashStore::multiGetImpl(const std::vector<std::string>& keys, Duration timeout) {
  std::unique_lock lock(mu_);
  waitLocked(lock, keys, timeout);
  std::vector<Bytes> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(*map_.find(k));
  return out;
}

void HashStore::multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                             Duration timeout) {
  if (keys.size() != values.size()) {
    Store::multiSetImpl(keys, values, timeout);  // throws the size-mismatch ConfigError
    return;
  }
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < keys.size(); ++i) map_.set(keys[i], values[i]);
  }
  changed_.notify_all();
}

}  // namespace ds::store
