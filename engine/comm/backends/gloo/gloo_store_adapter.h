// Gloo's rendezvous Store over ours (REFERENCE.md §8: Gloo here has no TCP store). Gloo's keys live
// under a prefix ("pg/<group>/gloo/") in the job's store, so several groups share one store.
//
// Every call is bounded: wait() without a timeout, and get(), use the adapter's default (the group's
// timeout); a wait that runs out throws ds::TimeoutError (from our store), which Gloo passes through
// unchanged. Thread-safe if the underlying store is.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/store/store.h"

namespace ds::comm::detail {

class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // Non-owning: `base` must outlive the adapter. `prefix` should end in '/'.
  GlooStoreAdapter(store::Store& base, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  // A zero or negative timeout (Gloo's kNoTimeout) means the adapter's default, never "forever".
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  const std::string& prefix() const { return prefix_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + k; }

  store::Store& base_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ds::comm::detail
