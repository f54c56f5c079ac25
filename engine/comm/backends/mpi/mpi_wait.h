// Completing nonblocking MPI requests without spinning and without hanging (internal to the mpi
// backend; also used by its latency benchmark).
//
// Open MPI makes progress only inside MPI calls on the waiting thread, so a sleeping waiter also
// delays its peers. The loop therefore tests with a short pure-spin phase, then sched_yield() (free
// when the core is ours, and gives the core away when ranks outnumber cores, where busy polling is
// 500-1000x slower, REFERENCE.md §8), then nanosleep with a growing pause up to maxSleep. A wait
// that needs more than a few hundred µs is large or out of step; ~1 ms of added latency is then
// acceptable, while burning a core for minutes (a peer that is late or dead) is not.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace ds::comm::mpidetail {

using Clock = std::chrono::steady_clock;

struct PollPolicy {
  // Test back to back (no syscall) this long after the start.
  std::chrono::nanoseconds spin{std::chrono::microseconds(5)};
  // Then sched_yield() between tests until this long after the start, plus yieldPerMiB for every
  // MiB the op moves (up to maxYield): a large op makes progress only while its ranks keep testing,
  // so sleeping inside its expected transfer time (~1 GB/s here) would stall the peers too.
  std::chrono::nanoseconds yield{std::chrono::microseconds(100)};
  std::chrono::nanoseconds yieldPerMiB{std::chrono::milliseconds(1)};
  std::chrono::nanoseconds maxYield{std::chrono::milliseconds(20)};
  // Then sleep, starting here and multiplying by `growth` up to maxSleep.
  std::chrono::nanoseconds firstSleep{std::chrono::microseconds(2)};
  std::chrono::nanoseconds maxSleep{std::chrono::milliseconds(1)};
  double growth = 1.5;
};

// DS_MPI_WAIT="spin_us,yield_us,first_sleep_us,max_sleep_us" overrides the defaults (yield_us is
// the base, before the per-MiB part) (tuning for
// oversubscribed nodes: spin 0). Unset: the defaults. Throws ConfigError on a malformed value.
PollPolicy pollPolicyFromEnv(const char* value);

// How long waitAll() tests without sleeping (spin, then yield) for an op moving `bytes` per rank:
// policy.yield plus yieldPerMiB per MiB, at most policy.yield + maxYield.
std::chrono::nanoseconds yieldPhase(const PollPolicy& policy, std::size_t bytes);

enum class WaitResult { kDone, kTimedOut };

// Tests `reqs[0..n)` (MPI_Testall), which move `bytes` per rank, until all are complete or `deadline` passes.
// On kDone the requests are MPI_REQUEST_NULL and `statuses` (n entries, may be MPI_STATUSES_IGNORE) are
// filled. On kTimedOut the requests stay posted: the caller must treat MPI as broken. Throws BackendError
// (with MPI's error text and `what()`, called only then: formatting a name on every op would cost
// more than an 8-byte allreduce) when MPI reports an error. Takes ds::mpi::CallGuard around each
// MPI call, never while sleeping.
WaitResult waitAll(MPI_Request* reqs, int n, MPI_Status* statuses, std::size_t bytes,
                   Clock::time_point deadline, const PollPolicy& policy, const std::function<std::string()>& what);

// While one lives (on any thread), Open MPI's progress loop gives the core away (sched_yield) whenever a
// poll found nothing to do, instead of polling back to back. A blocking collective on the worker thread
// polls like that while it waits for a late peer or the next fragment, and on a node where the rank's
// caller computes beside it (DDP's backward with overlap) the spin takes the caller's CPU (figures: README,
// "Where the CPU goes with overlap": 2 ranks on 2 cores, 25m preset, 8 runs interleaved with 8 without it,
// the worker used 44-70 ms of CPU per step with overlap against 44-99, and backward compute took 2.7x the
// forward against 3.2x). Open MPI turns the same switch (mpi_yield_when_idle) on by itself only when a node
// is oversubscribed. Scoped to the blocking calls (>= 64 KiB, where a yield's ~0.3 us when nothing else
// wants the core is noise), so the small ops' own wait loop keeps its spin phase. Nested and concurrent
// guards count; the last one out restores the setting. Where the MPI is not Open MPI (no
// opal_progress_set_yield_when_idle in the process) or the setting is already on (mpi_yield_when_idle=1,
// oversubscribed), it does nothing.
class YieldWhileIdle {
 public:
  YieldWhileIdle();
  ~YieldWhileIdle();
  YieldWhileIdle(const YieldWhileIdle&) = delete;
  YieldWhileIdle& operator=(const YieldWhileIdle&) = delete;
  // Whether this process can switch it (Open MPI's symbols found and the setting not already on).
  static bool available();

 private:
  bool engaged_ = false;
};

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string errorText(int code);
// Throws BackendError "<what>: <MPI error text>" unless rc == MPI_SUCCESS.
void check(int rc, const char* what);

}  // namespace ds::comm::mpidetail
