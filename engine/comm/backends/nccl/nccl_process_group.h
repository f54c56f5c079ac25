// The nccl backend of ProcessGroup: one NCCL communicator and one CUDA stream per group, on
// options.device (cuda:<index>).
//
// Ops are launched inline on the calling thread, onto the group's own non-blocking stream, bracketed
// by CUDA events; the returned Work completes when the end event does (c10d's WorkNCCL). So:
// - Inputs must be ready before the call: the group's stream does not wait for the caller's streams
//   (after a cudaMemcpy from pageable memory, or work on another stream, synchronise first).
// - Outputs are ready once Work::wait() returns or isCompleted() is true.
// - Work::duration() is the GPU time between the events (cudaEventElapsedTime).
// - barrier() blocks the caller until the barrier's allreduce finished on the GPU.
// - send/recv ignore the tag (NCCL has none): sends and receives between two ranks match in order.
// Launch errors are reported by Work::wait() as for the other backends. A timeout or an NCCL
// asynchronous error aborts the communicator (ncclCommAbort); every later op of the group fails.
// Needs NCCL >= 2.14 (non-blocking communicators bound init and abort by the group's timeout).
#pragma once

#include <memory>

#include "engine/comm/process_group.h"

namespace ds::comm {

// Creates the nccl process group for options.rank of options.size. Collective: every rank calls it.
// Rank 0 publishes the NCCL unique id under "pg/<groupName>/nccl/uid" in options.store; the others
// wait for it up to options.timeout, and communicator init is bounded by the same timeout.
// Throws ConfigError (not a cuda device, no such device), TimeoutError (a rank never came) or
// BackendError (CUDA or NCCL failed), with a message naming what to fix.
std::unique_ptr<ProcessGroup> makeNcclProcessGroup(const ProcessGroupOptions& options);

}  // namespace ds::comm
