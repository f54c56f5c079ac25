#include "engine/comm/backends/gloo/gloo_store_adapter.h"

namespace ds::comm::detail {

GlooStoreAdapter::GlooStoreAdapter(store::Store& base, std::string prefix, std::chrono::milliseconds timeout)
    : base_(base), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  base_.set(this->key(key), store::Bytes(data.begin(), data.end()), timeout_);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  store::Bytes b = base_.get(this->key(key), timeout_);
  return std::vector<char>(b.begin(), b.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key(k));
  base_.wait(full, timeout.count() > 0 ? timeout : timeout_);
}

}  // namespace ds::comm::detail
