#include "engine/store/barrier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "engine/common/error.h"

namespace ds::store {

namespace {

using Clock = std::chrono::steady_clock;

// How much longer than rank 0 the other ranks wait for its verdict.
Duration verdictGrace(Duration timeout) { return std::clamp(timeout / 2, Duration(1000), Duration(10000)); }

Duration left(Clock::time_point deadline) {
  return std::max(Duration(0), std::chrono::duration_cast<Duration>(deadline - Clock::now()));
}

void checkArgs(const char* what, const std::string& name, int rank, int worldSize) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize) {
    throw ConfigError(
        fmt::format("{} '{}': rank {} is not in a world of size {}; rank must be in [0, worldSize)", what,
                    name, rank, worldSize));
  }
}

}  // namespace

void storeBarrier(Store& store, const std::string& name, int rank, int worldSize, Timeout timeout) {
  checkArgs("storeBarrier", name, rank, worldSize);
  const Duration total = timeout.value_or(store.timeout());
  const auto start = Clock::now();
  const auto deadline = start + total;
  const std::string base = "barrier/" + name;
  const std::string countKey = base + "/count";
  const std::string doneKey = base + "/done";
  const std::int64_t arrived = store.add(countKey, 1, total);
  if (arrived > worldSize) {
    throw ConfigError(
        fmt::format("storeBarrier '{}' was entered by {} ranks but the world size is {}: the name "
                    "was reused or ranks disagree on the world size; give each barrier instance its "
                    "own name",
                    name, arrived, worldSize));
  }
  if (arrived == worldSize) {
    store.set(doneKey, toBytes("1"), left(deadline));
    return;
  }
  try {
    store.wait({doneKey}, left(deadline));
  } catch (const TimeoutError& e) {
    std::string count = "an unknown number";
    try {
      count = std::to_string(store.add(countKey, 0, Duration(2000)));
    } catch (const Error&) {
      // The store itself may be gone; the original error says so.
    }
    throw TimeoutError(
        fmt::format("storeBarrier '{}' timed out after {} ms on rank {}: {} of {} ranks arrived "
                    "(check the missing ranks' logs: crashed, hung or slower than the timeout). {}",
                    name, total.count(), rank, count, worldSize, e.what()));
  }
}

void monitoredBarrier(Store& store, const std::string& name, int rank, int worldSize, Duration timeout) {
  checkArgs("monitoredBarrier", name, rank, worldSize);
  const std::string base = "monitored_barrier/" + name;
  const std::string verdictKey = base + "/verdict";
  auto arrivalKey = [&](int r) { return fmt::format("{}/arrived/{}", base, r); };
  static constexpr std::string_view kOk = "ok";

  if (rank != 0) {
    const auto deadline = Clock::now() + timeout + verdictGrace(timeout);
    store.set(arrivalKey(rank), toBytes("1"), timeout);
    std::string verdict;
    try {
      verdict = toString(store.get(verdictKey, left(deadline)));
    } catch (const TimeoutError& e) {
      throw TimeoutError(
          fmt::format("monitoredBarrier '{}' on rank {}: rank 0 did not publish its verdict within "
                      "{} ms (is rank 0 alive and did it reach this barrier?). {}",
                      name, rank, (timeout + verdictGrace(timeout)).count(), e.what()));
    }
    if (verdict != kOk) {
      throw TimeoutError(
          fmt::format("monitoredBarrier '{}' on rank {} failed: rank 0 reports: {}", name, rank, verdict));
    }
    return;
  }

  std::vector<std::string> keys;
  for (int r = 1; r < worldSize; ++r) keys.push_back(arrivalKey(r));
  try {
    if (!keys.empty()) store.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 1; r < worldSize; ++r) {
      if (!store.check({arrivalKey(r)})) missing.push_back(r);
    }
    if (!missing.empty()) {
      std::string msg =
          fmt::format("{} {} failed to pass monitoredBarrier in {} ms",
                      missing.size() == 1 ? "Rank" : "Ranks", fmt::join(missing, ", "), timeout.count());
      try {
        store.set(verdictKey, toBytes(msg));
      } catch (const Error&) {
        // Publishing is best effort: the others time out on their own.
      }
      throw TimeoutError(
          fmt::format("[Rank 0]: {} (barrier '{}'; check those ranks' logs: crashed, hung, or "
                      "slower than the timeout)",
                      msg, name));
    }
    // They all arrived just as the wait ran out.
  }
  store.set(verdictKey, toBytes(kOk));
}

}  // namespace ds::store
