// Helpers for the gloo backend tests: N ranks as N threads over one in-memory store.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/store/hash_store.h"

namespace ds::comm::testing {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline ProcessGroupOptions glooOptions(int rank, int size, std::shared_ptr<store::Store> store,
                                       Duration timeout = std::chrono::seconds(20)) {
  ProcessGroupOptions o;
  o.rank = rank;
  o.size = size;
  o.store = std::move(store);
  o.timeout = timeout;
  o.groupName = "gloo-test";
  o.heartbeatInterval = Duration(0);
  return o;
}

// Runs body(group) on `size` threads, each with its own gloo group over one HashStore. Groups are
// created together and destroyed only after every body returned (a rank that closes its connections
// early would fail its peers' last op). Exceptions from a body are test failures naming the rank.
inline void runRanks(int size, const std::function<void(ProcessGroup&)>& body,
                     const std::function<void(ProcessGroupOptions&)>& tweak = {}) {
  auto store = std::make_shared<store::HashStore>(std::chrono::seconds(30));
  std::barrier sync(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<ProcessGroup> pg;
      try {
        auto o = glooOptions(r, size, store);
        if (tweak) tweak(o);
        pg = createProcessGroup("gloo", o);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": creating the group failed: " << e.what();
      }
      sync.arrive_and_wait();
      if (pg) {
        try {
          body(*pg);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << r << ": " << e.what();
        }
      }
      sync.arrive_and_wait();
      pg.reset();
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace ds::comm::testing
