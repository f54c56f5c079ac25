// Work: the handle of one asynchronous operation (c10d's Work). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/comm/types.h"

namespace ds::comm {

using Duration = std::chrono::milliseconds;
using Timeout = std::optional<Duration>;

enum class OpType : std::uint8_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kBarrier,
  kSend,
  kRecv
};
// The op's name in dsperf's messages and JSON ("allreduce", "allgather", "alltoall").
const char* opName(OpType t);

// An op's entry in the process's flight recorder (comm/flight_recorder.h), with what its group's
// pg_status needs: the group, the collective's seq and whether it is point-to-point. The entry itself
// may have left the ring (a full ring, an entry overtaken), the group's progress still counts the op.
struct FlightHandle {
  std::uint64_t id = 0;  // the entry's record id + 1; 0 when it has no entry in the ring
  int pgId = -1;         // -1: not recorded at all (the recorder is off, or the group is not in it)
  std::int64_t collectiveSeq = -1;
  bool p2p = false;
  explicit operator bool() const { return pgId >= 0; }
};
// The op as torch's profiling names spell it ("all_reduce", "all_gather", "all_to_all"), which the flight
// recorder writes and torch's analyzer matches. Both names come from one table (work.cpp).
const char* torchOpName(OpType t);

// What one operation is: enough to name it in an error and to compare it across ranks.
struct OpDesc {
  OpType type = OpType::kBarrier;
  // Per group, 1-based. Collectives and point-to-point ops are numbered separately: every rank
  // issues the same collectives, so a collective's seq is the same on all ranks (tags, DETAIL
  // checks and timeout diagnosis rely on it), while send/recv happen on some ranks only.
  std::uint64_t seq = 0;
  DType dtype = DType::kF32;
  std::size_t count = 0;  // elements of this rank's input (per-rank chunk for reduce_scatter output)
  ReduceOp op = ReduceOp::kSum;
  int root = -1;  // broadcast/reduce root, send/recv peer; -1 when none
  int tag = 0;
  bool inPlace = false;
  Duration timeout{0};
  std::size_t bytes = 0;  // bytes this op moves per rank, as nccl-tests counts them
  // Its entry in the process's flight recorder (comm/flight_recorder.h); empty: not recorded. The Work
  // reports the op's start and end there.
  FlightHandle frHandle;

  // "allreduce(f32, count=1024, op=sum)": what must match on every rank (no seq).
  std::string fingerprint() const;
  bool isPointToPoint() const { return type == OpType::kSend || type == OpType::kRecv; }
  // "allreduce(f32, count=1024, op=sum) #12 (4096 bytes)"; point-to-point ops are "#p3".
  std::string describe() const;
};

namespace detail {
// The flight recorder's start and end hooks (comm/flight_recorder.cpp).
void flightStarted(const FlightHandle& handle, std::chrono::steady_clock::time_point at);
void flightFinished(const FlightHandle& handle, bool ok, std::chrono::steady_clock::time_point at);
}  // namespace detail

class Work {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Work(OpDesc desc) : desc_(std::move(desc)) {}
  // `issued`: when the op was issued, if the caller already read the clock (a clock read costs
  // ~25-80 ns here, a fair share of an 8-byte allreduce).
  Work(OpDesc desc, Clock::time_point issued) : desc_(std::move(desc)), issued_(issued) {}
  // A Work born completed: an op that ran from `issued` to `finished` on the caller's thread (no
  // lock taken to start and complete it).
  Work(OpDesc desc, Clock::time_point issued, Clock::time_point finished, std::exception_ptr error)
      : desc_(std::move(desc)),
        done_(true),
        doneSeen_(true),
        error_(std::move(error)),
        issued_(issued),
        started_(issued),
        finished_(finished) {
    if (desc_.frHandle) detail::flightFinished(desc_.frHandle, error_ == nullptr, finished);
  }
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  const OpDesc& desc() const { return desc_; }
  virtual bool isCompleted();
  // How long wait() yields the CPU (sched_yield), watching for completion, before it blocks; set by
  // the group (DS_PG_WAIT_SPIN_US). A blocked waiter is woken by the thread that completes the op,
  // often from another CPU, and on a VM that wake-up can sit unhandled until the CPU's next tick.
  void setWaitSpin(std::chrono::nanoseconds spin) { waitSpin_ = spin; }
  // Blocks until the op finished, at most `timeout` (default: the op's own timeout, counted from
  // when it was issued). Rethrows the op's error. When the op's own timeout runs out, the group's
  // timeout handler builds the TimeoutError (naming the ranks that never arrived) and the group is
  // marked broken; a shorter caller timeout throws a TimeoutError and leaves the op running.
  virtual void wait(Timeout timeout = {});
  std::exception_ptr exception();
  // When the op's own timeout runs out: issued + desc().timeout.
  Clock::time_point deadline() const { return issued_ + desc_.timeout; }
  // Time the op took from the start of its execution to completion; zero until it completed.
  virtual std::chrono::nanoseconds duration();
  // In one look: false while the op runs; once it completed, rethrows its error, or sets `took` to
  // duration() and returns true (a benchmark loop's poll of an op the fast path may have finished).
  virtual bool completedIn(std::chrono::nanoseconds& took);

  // --- for process-group implementations ---
  void markStarted();
  void markStarted(Clock::time_point at);
  void markCompleted(std::exception_ptr error = nullptr);
  // Fails the op by its own timeout unless it has completed: runs the timeout handler (once per Work,
  // whoever comes first: wait() or the group's watchdog; a second caller waits for the first's
  // result) and completes the Work with its error. True when this call ran the handler. Blocks
  // while the handler diagnoses (seconds). The op itself is abandoned, as after wait()'s timeout.
  bool expire();
  // Called (once) by wait() when the op's own timeout ran out; returns the error to raise. Shared by
  // many Works (a process group's one handler): no allocation per op.
  void setTimeoutHandler(std::shared_ptr<const std::function<std::exception_ptr(const OpDesc&)>> handler) {
    sharedOnTimeout_ = std::move(handler);
  }

 protected:
  // expire() with mu_ held by `lock`; returns with it held.
  bool expireLocked(std::unique_lock<std::mutex>& lock);

  OpDesc desc_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> doneSeen_{false};  // done_, readable without mu_ (wait()'s yield phase)
  std::chrono::nanoseconds waitSpin_{0};
  bool expiring_ = false;  // a timeout handler runs (expireLocked)
  std::exception_ptr error_;
  Clock::time_point issued_ = Clock::now();
  Clock::time_point started_{};
  Clock::time_point finished_{};
  std::shared_ptr<const std::function<std::exception_ptr(const OpDesc&)>> sharedOnTimeout_;
};

}  // namespace ds::comm
