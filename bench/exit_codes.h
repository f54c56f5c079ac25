// dsbench's exit codes. 2, 3, 4 and 7 are nccl-tests' (REFERENCE.md §5); the others are ours.
#pragma once

#include <functional>

namespace ds::bench {

enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,   // a dsperf bug or an unexpected exception
  kExitCuda = 2,       // CUDA error (nccl-tests)
  kExitBackend = 3,    // NCCL / Gloo / MPI error (nccl-tests: NCCL error)
  kExitTimeout = 4,    // a bounded wait ran out (nccl-tests)
  kExitConfig = 5,     // bad flags, environment or input file
  kExitIo = 6,         // store unreachable, file not writable, protocol error
  kExitWrongData = 7,  // wrong results or bandwidth below the minimum (nccl-tests)
};

// Runs body, printing any ds::Error as one "dsbench: error: ..." line and mapping it to its code.
int runMain(const char* tool, const std::function<int()>& body);

}  // namespace ds::bench
