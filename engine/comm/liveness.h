// GroupLiveness: a process group's fault handling, apart from the group that issues and runs the
// ops (as c10d keeps its HeartbeatMonitor and watchdog apart from the backends).
//
// - Progress and heartbeats: the group reports the collective it entered and the last it completed
//   (entered()/completed(), lock-free, on the hot path); a Heartbeat (comm/heartbeat.h) publishes
//   them under "pg/<group>/hb/<rank>" as "<counter> <entered> <completed> <failed 0|1>" every
//   heartbeatInterval (when the group has more than one rank and the interval is not 0).
// - Timeout diagnosis: diagnoseTimeout() builds the TimeoutError of an op that outlived its timeout,
//   naming the ranks that never arrived (missingRanks(): two looks at every rank's heartbeat a few
//   intervals apart). publishFailure() marks this rank's heartbeat "failed", so that peers
//   diagnosing the same incident do not blame it.
// - The watchdog: a thread, started at the first watch(), that expires the watched op (one whose
//   backend call cannot time out by itself) kWatchdogGrace after its deadline, logs the error when
//   no wait() raised it, ends the job when the op is stuck on the caller's thread (hooks.abortHungCall),
//   then lets the group fail what is queued behind it (hooks.afterExpiry).
//
// Threads: the heartbeat and the watchdog; both end at stop(), or at their next look once the
// group's `stopping` flag is set.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/comm/heartbeat.h"
#include "engine/comm/work.h"
#include "engine/store/store.h"

namespace ds::comm {

struct LivenessOptions {
  int rank = 0;
  int size = 1;
  std::string groupName = "default";
  // The connection for heartbeats and diagnosis (the group's heartbeatStore, or its store).
  std::shared_ptr<store::Store> store;
  // 0 turns heartbeats, and with them the naming of missing ranks, off.
  Duration heartbeatInterval = std::chrono::seconds(1);
  // How long after an op's deadline the watchdog expires it.
  Duration watchdogGrace = std::chrono::milliseconds(500);
  // The group's shutdown flag (set before it stops the threads); must outlive this object.
  const std::atomic<bool>* stopping = nullptr;
};

// What the watchdog asks of its group; called on the watchdog thread.
struct LivenessHooks {
  // An op on the caller's thread outlived its deadline inside a call nobody can interrupt.
  std::function<void(const OpDesc&)> abortHungCall;
  // After each expiry: the group fails the ops queued behind the expired one when it is broken.
  std::function<void()> afterExpiry;
  // After each heartbeat, on the heartbeat thread (the flight recorder's dump signal).
  std::function<void()> afterBeat;
};

class GroupLiveness {
 public:
  GroupLiveness(LivenessOptions options, LivenessHooks hooks);
  ~GroupLiveness();
  GroupLiveness(const GroupLiveness&) = delete;
  GroupLiveness& operator=(const GroupLiveness&) = delete;

  // Starts the heartbeat thread (when heartbeats are on).
  void start();
  // Wakes and joins the watchdog, then the heartbeat thread.
  void stop();

  // --- progress (any thread; lock-free) ---
  void entered(std::uint64_t seq) { entered_ = seq; }
  void completed(std::uint64_t seq) { completed_ = seq; }

  // --- the watchdog ---
  // Starts watching `work` (the worker, or the caller's thread when `onCaller`, is about to run it),
  // or stops (null). Wakes the watchdog only when this deadline comes before the one it sleeps to.
  void watch(std::shared_ptr<Work> work, bool onCaller = false);

  // --- diagnosis ---
  // The TimeoutError for `desc` of a `backend` group: "<backend> <op> timed out on rank r of n:
  // <cause>." and who never arrived. Publishes this rank's failure first. Blocks for a few heartbeat
  // intervals while it looks.
  std::exception_ptr diagnoseTimeout(const OpDesc& desc, const std::string& backend,
                                     const std::string& cause);
  // " Ranks that never arrived: 2 (...)." from two looks at the heartbeats a few intervals apart
  // (blocks that long), or "" when every other rank is alive and has reached the op.
  std::string missingRanks(const OpDesc& desc);
  // Publishes a last heartbeat marked "failed". Once; bounded; best effort.
  void publishFailure();

 private:
  bool heartbeatsOn() const { return o_.heartbeatInterval.count() > 0 && o_.size > 1; }
  bool stopping() const { return stop_.load() || (o_.stopping != nullptr && o_.stopping->load()); }
  std::string key(const std::string& suffix) const;
  void watchdogLoop();

  LivenessOptions o_;
  LivenessHooks hooks_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> entered_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<bool> failedPublished_{false};
  std::unique_ptr<Heartbeat> heartbeat_;  // null when heartbeats are off

  std::mutex watchMu_;
  std::condition_variable watchCv_;
  std::shared_ptr<Work> watched_;  // guarded by watchMu_
  bool watchedOnCaller_ = false;   // watched_ runs on the caller's thread; guarded by watchMu_
  // The deadline the watchdog sleeps until (max: it waits for an op); guarded by watchMu_.
  Work::Clock::time_point watchdogArmedUntil_ = Work::Clock::time_point::max();
  std::thread watchdog_;
  bool watchdogStarted_ = false;  // guarded by watchMu_
};

}  // namespace ds::comm
