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

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string errorText(int code);
// Throws BackendError "<what>: <MPI error text>" unless rc == MPI_SUCCESS.
void check(int rc, const char* what);

}  // namespace ds::comm::mpidetail
