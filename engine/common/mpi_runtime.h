// The process-wide MPI runtime. MPI may be initialised once per process and never again after
// MPI_Finalize, so every user (launcher discovery, the mpi backend) goes through this one place.
// Only present when built with MPI (DS_WITH_MPI).
#pragma once

namespace ds::mpi {

// Calls MPI_Init_thread(MPI_THREAD_MULTIPLE requested) once, unless MPI is already initialised, and
// registers MPI_Finalize at exit. Thread-safe. Throws BackendError if MPI cannot start.
void ensureInitialized();
// The provided thread level (MPI_THREAD_*), valid after ensureInitialized().
int threadLevel();

}  // namespace ds::mpi
