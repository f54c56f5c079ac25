// A decorator that puts every key under "prefix/" in an underlying store, so that several users
// (process groups, barriers, runs) share one store without clashing (c10d/Gloo PrefixStore).
// Thread-safe if the underlying store is. numKeys() counts the whole underlying store, as in c10d.
#pragma once

#include <memory>

#include "engine/store/store.h"

namespace ds::store {

class PrefixStore : public Store {
 public:
  // Non-owning: `base` must outlive this PrefixStore.
  PrefixStore(std::string prefix, Store& base);
  // Owning (shared).
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  const std::string& prefix() const { return prefix_; }
  Store& base() { return *base_; }
  std::string describe() const override;

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
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace ds::store
