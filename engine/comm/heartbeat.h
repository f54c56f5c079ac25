// Heartbeat: one rank's "I am alive, and here is where I am" in the store, published by a thread
// of its own every interval. The one heartbeat of the project: the process group's liveness
// (comm/liveness.h) and fleet mode (diag/fleet) both publish through it.
//
// Beat format (one for every user): "<counter> <state>". The counter starts at 1 and grows by one
// per beat, so a reader that sees the same value twice, an interval or more apart, knows the
// publisher stopped (killed, stopped, hung); <state> is the user's (the process group: "<entered
// seq> <completed seq> <failed 0|1>"; fleet mode: the stage's name). parseBeat() splits the two.
//
// Threading: the thread beats at once when started, then every `interval`, until stop(). A store
// error is reported once (onFirstError) and the thread carries on. beatNow() publishes from the
// caller's thread, whether or not the thread runs (a last "failed" or "done" beat).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/store/store.h"

namespace ds::comm {

struct HeartbeatOptions {
  // Where the beats go. Must outlive the Heartbeat.
  std::shared_ptr<store::Store> store;
  // This rank's key, e.g. "pg/default/hb/3".
  std::string key;
  // The pause between two beats of the thread.
  std::chrono::milliseconds interval{1000};
  // The bound of each of the thread's writes.
  std::chrono::milliseconds setTimeout{5000};
  // The <state> part of a beat, read at each beat (on the heartbeat thread, or the caller's for
  // beatNow()). Must not block for long.
  std::function<std::string()> state;
  // Called on the heartbeat thread when a write fails for the first time (later failures are
  // silent: the store is down, and the first message said so).
  std::function<void(const std::exception&)> onFirstError;
  // Called on the heartbeat thread after each of its beats (written or not); may read the store.
  std::function<void()> afterBeat;
  // Optional: the thread also stops when this becomes true (checked where it checks its own stop:
  // before each beat, and when its pause ends). Its owner sets it when it starts shutting down.
  const std::atomic<bool>* stopping = nullptr;
};

// A beat read back: its counter and its state.
struct Beat {
  std::uint64_t counter = 0;
  std::string state;
};
// "<counter> <state>" -> Beat; nullopt when the value does not start with a counter.
std::optional<Beat> parseBeat(const std::string& value);
// The value of beat `counter` with `state`.
std::string formatBeat(std::uint64_t counter, const std::string& state);

class Heartbeat {
 public:
  explicit Heartbeat(HeartbeatOptions options);
  ~Heartbeat();  // stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Starts the thread (once).
  void start();
  // Wakes the thread and waits for it to end (it finishes a write in progress, bounded by
  // setTimeout). Idempotent.
  void stop();
  // Publishes the next beat from the calling thread, bounded by `timeout`. Throws the store's error.
  void beatNow(std::chrono::milliseconds timeout);
  // The next beat's value (the counter advances), for a caller that writes it itself, e.g. in one
  // round trip with other keys.
  std::string nextValue();
  const std::string& key() const { return o_.key; }

 private:
  void loop();
  bool stopRequested() const { return stop_.load() || (o_.stopping != nullptr && o_.stopping->load()); }

  HeartbeatOptions o_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t counter_ = 0;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ds::comm
