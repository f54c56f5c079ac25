// The correctness matrix shared by every backend's tests: each case fills known inputs on every
// rank, runs one collective, and compares the result with a reference computed locally from every
// rank's inputs (exact for integers; a tolerance for floats, see kTolerance in matrix.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"

namespace ds::comm::testing {

struct MatrixCase {
  OpType op = OpType::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp rop = ReduceOp::kSum;
  // Per-rank element count: allreduce/broadcast/reduce/send: the buffer; allgather: the input;
  // reduce_scatter: the output; alltoall: one chunk (the buffers hold count × size).
  std::size_t count = 0;
  bool inPlace = false;
  int root = 0;
  // "allreduce f32 sum count=1023 in-place root=0"
  std::string name() const;
};

// Where buffers live. The default is host memory; the nccl tests supply device memory.
struct MemoryOps {
  Device device{};
  std::function<void*(std::size_t)> alloc;
  std::function<void(void*)> free;
  std::function<void(void* dst, const void* hostSrc, std::size_t bytes)> toDevice;
  std::function<void(void* hostDst, const void* src, std::size_t bytes)> toHost;
};
MemoryOps hostMemory();

struct MatrixShape {
  std::vector<std::size_t> counts{0, 1, 1023};
  // Also run a large count (enough for backends to chunk) for a few dtypes with every op.
  std::size_t largeCount = 1 << 18;
  bool pointToPoint = true;
  std::vector<DType> dtypes{std::begin(kAllDTypes), std::end(kAllDTypes)};
};
std::vector<MatrixCase> matrixCases(int worldSize, const MatrixShape& shape = {});

// Collective: every rank of pg runs the same case. Returns "" when this rank's result is right,
// else the case name and the first wrong elements. Exceptions from the backend propagate.
std::string runCase(ProcessGroup& pg, const MatrixCase& c, const MemoryOps& mem = hostMemory());
// Runs every case; returns the failures of this rank.
std::vector<std::string> runCases(ProcessGroup& pg, const std::vector<MatrixCase>& cases,
                                  const MemoryOps& mem = hostMemory());

// The point-to-point patterns that deadlock where a send waits for its peer's recv (issue 41), with
// messages of `count` f32: a ring shift with every rank sending first, pairs (0-1, 2-3, ...) that both
// send first, receives of two tags posted in the opposite order to the sends, two messages of one tag
// (received in order, the second waited for first), a send left pending
// across an allreduce, and a 1F1B pipeline schedule (stage = rank, 4 micro-batches, the sends waited
// for only at the end). Every rank of pg calls it; returns this rank's failures (wrong data).
// Exceptions from the backend (a timeout: a deadlock) propagate.
std::vector<std::string> runP2pPatterns(ProcessGroup& pg, std::size_t count);
// Point-to-point faults between ranks 0 and 1 (the others return at once); afterwards the group may be
// unusable. `what`: "mismatch" (rank 0 sends 16 f32 with tag 9, rank 1 receives 8: rank 1's error
// names both ranks) or "silent" (rank 1 receives from rank 0, which never sends: its error, by pg's own
// timeout, names rank 0; rank 0 waits 1.5x the timeout before it returns). Returns this rank's
// failures.
std::vector<std::string> runP2pFault(ProcessGroup& pg, const std::string& what);

// Runs fn on `worldSize` threads, each with its own group of `backend` over one shared HashStore.
// Rethrows the first exception of any thread after all have finished.
void runThreads(const std::string& backend, int worldSize, const std::function<void(ProcessGroup&)>& fn,
                ProcessGroupOptions base = {});

}  // namespace ds::comm::testing
