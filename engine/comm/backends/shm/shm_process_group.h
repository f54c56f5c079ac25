// The shm backend: collectives among the ranks of one host through a shared-memory segment, and,
// when the group spans hosts, a hierarchy of shm within each host and gloo among the hosts' first
// ranks (the "leaders").
//
// Configuration (environment, read when a group is created; every rank of a host must agree):
//   DS_SHM_BUFFER_BYTES  bytes of one data slot (K/M/G suffixes). The segment holds two slots per local
//                        rank; larger messages are pipelined through them in chunks. Default: 512 KiB,
//                        less above 32 local ranks so that all slots stay within 32 MiB (at least
//                        256 KiB): a chunk's staging stays in the caches (defaultSlotBytes has the
//                        figures); 4 MiB slots measured 1.6-2x slower at 32-128 MiB.
//   DS_SHM_SMALL_BYTES   allreduce of at most this many bytes takes the one-step path: every rank
//                        posts its whole input and reduces all of them itself (default 16 KiB).
//   DS_SHM_INLINE_BYTES  ops of at most this many bytes run on the calling thread when nothing of the
//                        group is queued, saving two thread hand-offs (default 64 KiB; 0: never). On
//                        one core (ProcessGroup's class comment) they run there to their end.
//   DS_SHM_SPIN_US       how long a waiter spins before it blocks on a futex. Default, from the
//                        placement (every rank publishes its affinity mask in the segment): 20 µs
//                        when the host's ranks have a core each (their masks cover as many CPUs as
//                        there are ranks), else 2 µs, yielding the core at every turn; on the group's
//                        worker thread of a rank with one CPU: 50 µs where no local peer may run on
//                        that CPU (mpirun's binding), else none (the worker must not spin on the
//                        core its caller or a peer needs). Set: that, everywhere.
//   DS_SHM_DIR           the tmpfs directory for the segment (default /dev/shm).
//   DS_SHM_INTER_BACKEND the backend among hosts when the group spans several (gloo; the mpi backend
//                        cannot form sub-groups).
//   DS_SHM_KERNEL        generic|avx2|avx512: force the reduction kernels (default: the best the CPU has).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "engine/comm/process_group.h"

namespace ds::comm {
namespace shm {

struct ShmConfig {
  // 0: the default for the number of local ranks (defaultSlotBytes).
  std::size_t slotBytes = 0;
  std::size_t smallBytes = 16 << 10;
  std::size_t inlineBytes = 64 << 10;
  // Negative: choose from whether the host is oversubscribed.
  std::chrono::nanoseconds spin{-1};
  std::string dir = "/dev/shm";
  std::string interBackend = "gloo";
  // The identity ranks share memory by; empty: the host name. Tests set it to pretend several hosts.
  std::string host;
  // DS_SHM_TEST_SLOWDOWN (test-only, for scripts/verdict-calibration.sh): every op takes this factor
  // of its own time, the extra part spent copying its output into scratch memory (real work on the
  // rank's core, like a slower kernel; never a sleep). 1 = off.
  double testSlowdown = 1.0;
};

// DS_SHM_BUFFER_BYTES' default for `localRanks` ranks on a host.
std::size_t defaultSlotBytes(int localRanks);
// Reads the DS_SHM_* variables above. Throws ConfigError naming the variable and what is valid.
ShmConfig configFromEnv();

}  // namespace shm

// Creates the shm process group. Collective over every rank of options (each rank calls it): the
// ranks exchange host names through the store, each host's first rank creates the segment, the others
// attach. Throws ConfigError (/dev/shm too small, bad DS_SHM_* values), IoError, ProtocolError (a
// segment of another run), TimeoutError (a local rank never attached, named).
std::unique_ptr<ProcessGroup> makeShmProcessGroup(const ProcessGroupOptions& options);
std::unique_ptr<ProcessGroup> makeShmProcessGroup(const ProcessGroupOptions& options,
                                                  const shm::ShmConfig& config);

}  // namespace ds::comm
