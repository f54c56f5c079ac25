#include "engine/common/mpi_runtime.h"

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "engine/common/error.h"

namespace ds::mpi {
namespace {
std::once_flag gOnce;
int gLevel = MPI_THREAD_SINGLE;
bool gWeInitialized = false;
std::atomic<bool> gBroken{false};
std::atomic<bool> gExiting{false};
std::mutex gReasonMu;
std::string gReason;
std::mutex gCallMu;
std::atomic<int> gInFlight{0};
std::mutex gHooksMu;
std::vector<std::function<void()>> gHooks;

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!gWeInitialized || finalized != 0) return;
  gExiting = true;
  if (gBroken || gInFlight.load() > 0) {
    if (!gBroken) markBroken("an MPI operation was still running on another thread at exit");
    // A request that timed out is still posted; MPI_Finalize would wait for peers that may never
    // come (or are themselves stuck), so the job would hang at exit. Abort ends every rank instead.
    std::fprintf(
        stderr,
        "dsperf: an MPI operation timed out earlier (%s) and was abandoned; calling MPI_Abort instead of "
        "MPI_Finalize, which could hang. The launcher will end the other ranks too.\n",
        brokenReason().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kBrokenAbortCode);
    return;
  }
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(gHooksMu);
    hooks.swap(gHooks);
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
  MPI_Finalize();
}
}  // namespace

void ensureInitialized() {
  std::call_once(gOnce, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) {
      MPI_Query_thread(&gLevel);
      return;
    }
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &gLevel);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING] = {};
      int len = 0;
      MPI_Error_string(rc, text, &len);
      throw BackendError(
          fmt::format("MPI_Init_thread failed: {}. Is this process started by mpirun/srun with "
                      "a matching MPI library?",
                      text));
    }
    gWeInitialized = true;
    std::atexit(finalizeAtExit);
  });
}

int threadLevel() { return gLevel; }

bool finalized() {
  if (gExiting) return true;
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

void onFinalize(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(gHooksMu);
  gHooks.push_back(std::move(fn));
}

void markBroken(const std::string& reason) {
  std::lock_guard<std::mutex> lock(gReasonMu);
  if (!gBroken.exchange(true)) gReason = reason;
}

bool broken() { return gBroken.load(); }

std::string brokenReason() {
  std::lock_guard<std::mutex> lock(gReasonMu);
  return gReason;
}

InFlight::InFlight() { gInFlight.fetch_add(1); }
InFlight::~InFlight() { gInFlight.fetch_sub(1); }
bool anyInFlight() { return gInFlight.load() > 0; }

CallGuard::CallGuard() {
  if (gLevel < MPI_THREAD_MULTIPLE) {
    gCallMu.lock();
    locked_ = true;
  }
}

CallGuard::~CallGuard() {
  if (locked_) gCallMu.unlock();
}

}  // namespace ds::mpi
