// An in-process store: a map under one mutex, waits on a condition variable. For tests and for
// world size 1. Thread-safe; waits block the calling thread up to their timeout.
#pragma once

#include <condition_variable>
#include <mutex>

#include "engine/store/kv_map.h"
#include "engine/store/store.h"

namespace ds::store {

class HashStore : public Store {
 public:
  explicit HashStore(Duration timeout = kDefaultTimeout) : Store(timeout) {}
  std::string describe() const override { return "HashStore (in-process)"; }

 protected:
  void setImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  Bytes getImpl(const std::string& key, Duration timeout) override;
  std::int64_t addImpl(const std::string& key, std::int64_t delta, Duration timeout) override;
  Bytes compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                       Duration timeout) override;
  bool checkImpl(const std::vector<std::string>& keys, Duration timeout) override;
  bool deleteKeyImpl(const std::string& key, Duration timeout) override;
  std::int64_t numKeysImpl(Duration timeout) override;
  void waitImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void appendImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  std::vector<Bytes> multiGetImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                    Duration timeout) override;

 private:
  // Blocks with mu_ held (via lock) until keys are all present; throws TimeoutError.
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, Duration timeout);

  std::mutex mu_;
  std::condition_variable changed_;
  detail::KvMap map_;
};

}  // namespace ds::store
