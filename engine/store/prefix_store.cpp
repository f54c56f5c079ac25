#include "engine/store/prefix_store.h"

#include "engine/common/error.h"

namespace ds::store {

PrefixStore::PrefixStore(std::string prefix, Store& base)
    : PrefixStore(std::move(prefix), std::shared_ptr<Store>(&base, [](Store*) {})) {}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : kDefaultTimeout), prefix_(std::move(prefix)), base_(std::move(base)) {
  DS_CHECK(base_ != nullptr, "PrefixStore('{}') needs a store", prefix_);
}

std::string PrefixStore::describe() const {
  return fmt::format("PrefixStore '{}/' over {}", prefix_, base_->describe());
}

std::vector<std::string> PrefixStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const auto& k : ks) out.push_back(key(k));
  return out;
}

// The base's errors already name the prefixed keys and the base's address, which is what a user
// needs to find them, so they pass through unchanged.
void PrefixStore::setImpl(const std::string& k, const Bytes& v, Duration t) { base_->set(key(k), v, t); }
Bytes PrefixStore::getImpl(const std::string& k, Duration t) { return base_->get(key(k), t); }
std::int64_t PrefixStore::addImpl(const std::string& k, std::int64_t d, Duration t) {
  return base_->add(key(k), d, t);
}
Bytes PrefixStore::compareSetImpl(const std::string& k, const Bytes& e, const Bytes& d, Duration t) {
  return base_->compareSet(key(k), e, d, t);
}
bool PrefixStore::checkImpl(const std::vector<std::string>& ks, Duration t) {
  return base_->check(keys(ks), t);
}
bool PrefixStore::deleteKeyImpl(const std::string& k, Duration t) { return base_->deleteKey(key(k), t); }
std::int64_t PrefixStore::numKeysImpl(Duration t) { return base_->numKeys(t); }
void PrefixStore::waitImpl(const std::vector<std::string>& ks, Duration t) { base_->wait(keys(ks), t); }
void PrefixStore::appendImpl(const std::string& k, const Bytes& v, Duration t) {
  base_->append(key(k), v, t);
}
std::vector<Bytes> PrefixStore::multiGetImpl(const std::vector<std::string>& ks, Duration t) {
  return base_->multiGet(keys(ks), t);
}
void PrefixStore::multiSetImpl(const std::vector<std::string>& ks, const std::vector<Bytes>& vs, Duration t) {
  base_->multiSet(keys(ks), vs, t);
}

}  // namespace ds::store
