#include "engine/env/mpi_runtime.h"

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "engine/common/error.h"
#include "engine/env/slurm.h"

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

// Says why on stderr, then MPI_Abort: the launcher ends every rank of the job.
[[noreturn]] void abortWith(const char* why) {
  gExiting = true;
  std::fprintf(stderr, "dsperf: %s The launcher will end the other ranks too.\n", why);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kBrokenAbortCode);
  std::abort();  // MPI_Abort does not return; should it, the process must end all the same
}

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!gWeInitialized || finalized != 0) return;
  gExiting = true;
  if (gBroken || gInFlight.load() > 0) {
    if (!gBroken) markBroken("an MPI operation was still running on another thread at exit");
    // A request that timed out is still posted; MPI_Finalize would wait for peers that may never
    // come (or are themselves stuck), so the job would hang at exit. Abort ends every rank instead.
    abortWith(fmt::format("an MPI operation timed out earlier ({}) and was abandoned; calling MPI_Abort "
                          "instead of MPI_Finalize, which could hang.",
                          brokenReason())
                  .c_str());
  }
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(gHooksMu);
    hooks.swap(gHooks);
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
  MPI_Finalize();
}
// Under srun no mpirun stands behind the tasks: MPI_Init finds the world through the PMI that srun's
// --mpi plugin serves, and a library that does not speak it aborts the whole process inside
// MPI_Init. Refuse before that, naming the plugin that works. Open MPI (Debian's, at least) is built
// with PMIx and without Slurm's PMI-2; MPICH speaks PMI-2 and, when built for it, PMIx.
void checkSrunPlugin() {
  env::ProcessEnv env;
  if (env::slurmPlace(env) != env::SlurmPlace::kStep || env.get("OMPI_COMM_WORLD_RANK")) return;
  auto tasks = env::firstSet(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  if (!tasks || tasks->second == "1") return;  // a singleton needs no PMI
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);  // callable before MPI_Init (MPI-3)
  const bool openMpi = std::string_view(version).find("Open MPI") != std::string_view::npos;
  const std::string plugin = env::slurmMpiPlugin(env);
  if (plugin == "pmix" || (!openMpi && plugin == "pmi2")) return;
  const std::string_view text(version);
  const std::string firstLine(text.substr(0, text.find('\n')));
  throw ConfigError(fmt::format(
      "backend mpi under srun needs a PMI that this MPI library ({}) speaks, but this step was started with "
      "--mpi={}{}, so MPI_Init would abort. Start it with `srun --mpi={} ...` (`srun --mpi=list` shows the "
      "plugins of this Slurm), or use backend gloo, which needs no MPI.",
      firstLine, plugin, plugin == "none" ? " (no PMIX_RANK or PMI_RANK in the environment)" : "",
      openMpi ? "pmix" : "pmi2"));
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
    checkSrunPlugin();  // throws; call_once then runs again on the next call
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

void abortHungCall(const std::string& reason) {
  markBroken(reason);
  abortWith(fmt::format("an MPI operation timed out ({}) while its caller's thread was blocked inside "
                        "it, which MPI cannot interrupt; calling MPI_Abort.",
                        brokenReason())
                .c_str());
}

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
