#include "engine/common/mpi_runtime.h"

#include <mpi.h>

#include <cstdlib>
#include <mutex>

#include "engine/common/error.h"

namespace ds::mpi {
namespace {
std::once_flag gOnce;
int gLevel = MPI_THREAD_SINGLE;
bool gWeInitialized = false;

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (gWeInitialized && finalized == 0) MPI_Finalize();
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
      throw BackendError(fmt::format("MPI_Init_thread failed: {}. Is this process started by mpirun/srun with "
                                     "a matching MPI library?",
                                     text));
    }
    gWeInitialized = true;
    std::atexit(finalizeAtExit);
  });
}

int threadLevel() { return gLevel; }

}  // namespace ds::mpi
