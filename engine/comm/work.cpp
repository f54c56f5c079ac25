#include "engine/comm/work.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <iterator>

#include "engine/common/error.h"

namespace ds::comm {

namespace {

// Each op's names, in OpType's order: dsperf's, and torch's (ProcessGroupNCCL / ProcessGroupGloo).
struct OpNames {
  OpType type;
  const char* ours;
  const char* torch;
};
constexpr OpNames kOpNames[] = {
    {OpType::kAllreduce, "allreduce", "all_reduce"},
    {OpType::kBroadcast, "broadcast", "broadcast"},
    {OpType::kReduce, "reduce", "reduce"},
    {OpType::kAllgather, "allgather", "all_gather"},
    {OpType::kReduceScatter, "reduce_scatter", "reduce_scatter"},
    {OpType::kAlltoall, "alltoall", "all_to_all"},
    {OpType::kBarrier, "barrier", "barrier"},
    {OpType::kSend, "send", "send"},
    {OpType::kRecv, "recv", "recv"},
};
static_assert(std::size(kOpNames) == static_cast<std::size_t>(OpType::kRecv) + 1, "one row per OpType");

const OpNames* namesOf(OpType t) {
  const auto i = static_cast<std::size_t>(t);
  return i < std::size(kOpNames) && kOpNames[i].type == t ? &kOpNames[i] : nullptr;
}

}  // namespace

const char* opName(OpType t) {
  const OpNames* n = namesOf(t);
  return n ? n->ours : "?";
}

const char* torchOpName(OpType t) {
  const OpNames* n = namesOf(t);
  return n ? n->torch : "unknown";
}

std::string OpDesc::fingerprint() const {
  if (type == OpType::kBarrier) return "barrier()";
  std::string s = fmt::format("{}({}, count={}", opName(type), dtypeName(dtype), count);
  if (type == OpType::kAllreduce || type == OpType::kReduce || type == OpType::kReduceScatter) {
    s += fmt::format(", op={}", reduceOpName(op));
  }
  if (type == OpType::kBroadcast || type == OpType::kReduce) s += fmt::format(", root={}", root);
  if (type == OpType::kSend || type == OpType::kRecv) s += fmt::format(", peer={}, tag={}", root, tag);
  return s + ")";
}

std::string OpDesc::describe() const {
  return fmt::format("{} #{}{} ({} bytes)", fingerprint(), isPointToPoint() ? "p" : "", seq, bytes);
}

bool Work::isCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::wait(Timeout timeout) {
  if (waitSpin_.count() > 0 && !doneSeen_.load(std::memory_order_acquire)) {
    // Yield, not spin: a thread of this rank (the worker, Gloo's loop) or a peer sharing the CPU
    // runs at each turn. Measured (issue 29, 2 ranks unbound, gloo 8 B): blocked main threads waited
    // up to a 4 ms tick for a CPU that had gone idle after the wake-up, 25 of 47 waits over 1 ms.
    auto limit = waitSpin_;
    if (timeout) limit = std::min<std::chrono::nanoseconds>(limit, *timeout);
    const auto until = Clock::now() + limit;
    while (!doneSeen_.load(std::memory_order_acquire) && Clock::now() < until) sched_yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  const bool ownTimeout = !timeout || *timeout >= desc_.timeout;
  auto deadline = ownTimeout ? issued_ + desc_.timeout : Clock::now() + *timeout;
  if (!cv_.wait_until(lock, deadline, [&] { return done_; })) {
    if (!ownTimeout) {
      throw TimeoutError(
          fmt::format("wait() gave up after {} ms on {}, which is still running (its own timeout is "
                      "{} ms).",
                      timeout->count(), desc_.describe(), desc_.timeout.count()));
    }
    expireLocked(lock);
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::expire() {
  std::unique_lock<std::mutex> lock(mu_);
  return expireLocked(lock);
}

bool Work::expireLocked(std::unique_lock<std::mutex>& lock) {
  if (expiring_) {
    cv_.wait(lock, [&] { return done_; });
    return false;
  }
  if (done_) return false;
  expiring_ = true;
  auto handler = std::move(sharedOnTimeout_);
  lock.unlock();
  std::exception_ptr err = handler ? (*handler)(desc_)
                                   : std::make_exception_ptr(TimeoutError(
                                         fmt::format("{} did not finish within its timeout of {} ms.",
                                                     desc_.describe(), desc_.timeout.count())));
  lock.lock();
  if (!done_) {
    // The op is abandoned: later waits see the same error.
    done_ = true;
    error_ = err;
    finished_ = Clock::now();
    doneSeen_.store(true, std::memory_order_release);
    if (desc_.frHandle) detail::flightFinished(desc_.frHandle, false, finished_);
  }
  cv_.notify_all();
  return true;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::chrono::nanoseconds Work::duration() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_ || started_ == Clock::time_point{}) return std::chrono::nanoseconds(0);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(finished_ - started_);
}

bool Work::completedIn(std::chrono::nanoseconds& took) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return false;
  if (error_) std::rethrow_exception(error_);
  took = started_ == Clock::time_point{} ? std::chrono::nanoseconds(0)
                                         : std::chrono::duration_cast<std::chrono::nanoseconds>(finished_ - started_);
  return true;
}

void Work::markStarted() { markStarted(Clock::now()); }

void Work::markStarted(Clock::time_point at) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = at;
  }
  if (desc_.frHandle) detail::flightStarted(desc_.frHandle, at);
}

void Work::markCompleted(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;  // already failed by a timeout
    done_ = true;
    error_ = std::move(error);
    finished_ = Clock::now();
    doneSeen_.store(true, std::memory_order_release);
  }
  if (desc_.frHandle) detail::flightFinished(desc_.frHandle, error_ == nullptr, finished_);
  // Notified after the unlock, as c10d's Work::finish does: a waiter woken under the lock would run
  // into it and sleep again (two more switches on a one-core rank). Whoever completes the Work holds
  // a reference to it, so it outlives this call even when the waiter drops its own.
  cv_.notify_all();
}

}  // namespace ds::comm
