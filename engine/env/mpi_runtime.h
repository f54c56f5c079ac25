// The process-wide MPI runtime. MPI may be initialised once per process and never again after
// MPI_Finalize, so every user (launcher discovery, the mpi backend) goes through this one place.
// Only present when built with MPI (DS_WITH_MPI).
//
// Exit: when we initialised MPI, MPI_Finalize runs at exit (atexit). After markBroken() (an MPI
// operation timed out and its request was abandoned), or while a request is still in flight on
// another thread (see InFlight), MPI_Finalize could wait forever for the peers
// of that request, so exit calls MPI_Abort instead: the launcher then ends every rank of the job,
// with exit code kBrokenAbortCode.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace ds::mpi {

// The code MPI_Abort is given at exit after markBroken(); mpirun exits with it.
inline constexpr int kBrokenAbortCode = 1;

// Calls MPI_Init_thread(MPI_THREAD_MULTIPLE requested) once, unless MPI is already initialised, and
// registers MPI_Finalize at exit. Thread-safe. Throws BackendError if MPI cannot start.
void ensureInitialized();
// The provided thread level (MPI_THREAD_*), valid after ensureInitialized().
int threadLevel();
// True once MPI_Finalize (or MPI_Abort) ran or started: no MPI call may follow.
bool finalized();
// Registers `fn` to run at exit just before MPI_Finalize (to free datatypes and ops created once
// per process). Not run when exit aborts after markBroken(). Thread-safe.
void onFinalize(std::function<void()> fn);

// Records that an MPI request was abandoned (a timeout): the ranks are out of step. From now on
// exit aborts the job instead of finalising (see above). The first reason is kept. Thread-safe.
void markBroken(const std::string& reason);
bool broken();
// markBroken(reason), then MPI_Abort(kBrokenAbortCode) at once, saying why on stderr: for a
// blocking call that timed out on a thread that cannot be given back (the process group's watchdog
// found the caller's thread stuck inside it), where no exit would ever come. Never returns.
[[noreturn]] void abortHungCall(const std::string& reason);
// The reason given to the first markBroken(), or "".
std::string brokenReason();

// Counts MPI requests that are posted and not yet completed, so that exit can tell that one is
// still in flight (a thread abandoned at exit) and abort instead of finalising. Construct before
// posting, destroy after completion; never destroyed for an abandoned request (markBroken instead).
class InFlight {
 public:
  InFlight();
  ~InFlight();
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};
// True when some InFlight is alive.
bool anyInFlight();

// Serialises MPI calls between threads when the library gives less than MPI_THREAD_MULTIPLE
// (several process groups, each with its own worker thread, share one MPI). With
// MPI_THREAD_MULTIPLE it does not lock. Hold it only around MPI calls, never while sleeping.
class CallGuard {
 public:
  CallGuard();
  ~CallGuard();
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  bool locked_ = false;
};

}  // namespace ds::mpi
