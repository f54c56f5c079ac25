// The mpi backend: collectives on a duplicate of MPI_COMM_WORLD, in two ways, chosen from the op
// alone so that every rank makes the same kind of call (MPI never matches a blocking collective with
// a nonblocking one):
// - every op but the large ones below, wherever it runs (the fast path may take it): a nonblocking
//   MPI call completed by mpidetail::waitAll (yield, then growing sleeps; never a spin, never a
//   hang), which keeps the op's timeout itself; a small allreduce of two ranks is one exchange of
//   point-to-point messages (postExchangeAllreduce) instead of libnbc's MPI_Iallreduce;
// - allreduce, broadcast and allgather above kLargestNonblockingBytes (or DS_PG_INLINE_MAX_BYTES if
//   smaller): the blocking MPI call (MPI_Allreduce, ...), as PyTorch's ProcessGroupMPI does, on the
//   group's worker thread, or on the caller's thread when the process has one CPU (the base's "one
//   core": a handoff to a worker on the caller's own core cost ~20 us per op). A nonblocking
//   collective goes through Open MPI's libnbc schedules, which cost +235% at >= 1 MiB against the
//   blocking call's tuned algorithms (and already more than the handoff to the worker at 256 KiB).
//   A blocking call cannot time out, so the base times it out (keepsOwnTimeout): a caller's
//   Work::wait at the op's deadline, or else the group's watchdog thread, names the missing ranks
//   from the heartbeats and the group turns unusable, while the call stays in flight (mpi::InFlight)
//   and exit aborts the job instead of finalising MPI. On the caller's thread nobody can wait: the
//   watchdog logs the same diagnosis and aborts the job at once (abortHungCall).
//
// Types: the C types MPI has; f16 and bf16 travel as a 2-byte contiguous type, reduced by one
// user-defined commutative MPI_Op per (type, op) that calls reduceInto. avg runs as sum and is
// divided afterwards (divideBy). Element counts above the chunk limit (INT_MAX, MPI's count type)
// are split into several requests.
//
// Threads: the base runs ops on its worker thread, or small ones on the caller's thread (the fast
// path: posted there and tested through the wait loop's spin and yield phases; if still not done,
// the worker waits for the rest), never two of one group at once; send and recv are posted on the
// caller's thread and tested on the group's p2p completion threads (ProcessGroup::postPointToPoint),
// beside the worker; MPI must provide at least
// MPI_THREAD_SERIALIZED, and mpi::CallGuard serialises groups below MPI_THREAD_MULTIPLE.
//
// Timeouts: a request that outlives desc.timeout cannot be cancelled (MPI has no cancel for
// collectives), so it is abandoned: its temporary buffers are leaked on purpose, mpi::markBroken()
// makes every later op of every mpi group fail at once and turns MPI_Finalize at exit into
// MPI_Abort. The caller's buffers of that op must be treated as still in use by MPI.
#include "engine/comm/backends/mpi/mpi_process_group.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/comm/backends/mpi/mpi_wait.h"
#include "engine/comm/reduce.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/env/mpi_runtime.h"
#include "engine/env/world_info.h"

namespace ds::comm {
namespace {

using mpidetail::check;
using mpidetail::Clock;

// --- f16 / bf16: datatypes and ops, created once per process, freed before MPI_Finalize ---------

struct HalfTypes {
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op ops[2][4] = {};  // [0: f16, 1: bf16][sum, prod, min, max]
};

template <DType T, ReduceOp Op>
void halfOp(void* in, void* inout, int* len, MPI_Datatype*) {
  reduceInto(inout, in, static_cast<std::size_t>(*len), T, Op);
}

template <DType T>
void createHalfOps(MPI_Op* ops) {
  check(MPI_Op_create(&halfOp<T, ReduceOp::kSum>, 1, &ops[0]), "MPI_Op_create");
  check(MPI_Op_create(&halfOp<T, ReduceOp::kProd>, 1, &ops[1]), "MPI_Op_create");
  check(MPI_Op_create(&halfOp<T, ReduceOp::kMin>, 1, &ops[2]), "MPI_Op_create");
  check(MPI_Op_create(&halfOp<T, ReduceOp::kMax>, 1, &ops[3]), "MPI_Op_create");
}

const HalfTypes& halfTypes() {
  static HalfTypes types;
  static std::once_flag once;
  std::call_once(once, [] {
    mpi::CallGuard guard;
    check(MPI_Type_contiguous(2, MPI_BYTE, &types.f16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&types.f16), "MPI_Type_commit");
    check(MPI_Type_contiguous(2, MPI_BYTE, &types.bf16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&types.bf16), "MPI_Type_commit");
    createHalfOps<DType::kF16>(types.ops[0]);
    createHalfOps<DType::kBF16>(types.ops[1]);
    mpi::onFinalize([] {
      for (auto& row : types.ops) {
        for (auto& op : row) MPI_Op_free(&op);
      }
      MPI_Type_free(&types.f16);
      MPI_Type_free(&types.bf16);
    });
  });
  return types;
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kU8:
      return MPI_UINT8_T;
    case DType::kI8:
      return MPI_INT8_T;
    case DType::kF16:
      return halfTypes().f16;
    case DType::kBF16:
      return halfTypes().bf16;
  }
  throw InternalError("unknown dtype");
}

int opIndex(ReduceOp op) {
  switch (wireOp(op)) {
    case ReduceOp::kSum:
      return 0;
    case ReduceOp::kProd:
      return 1;
    case ReduceOp::kMin:
      return 2;
    case ReduceOp::kMax:
      return 3;
    case ReduceOp::kAvg:
      break;
  }
  throw InternalError("avg has no wire op");
}

MPI_Op mpiOp(DType t, ReduceOp op) {
  if (t == DType::kF16) return halfTypes().ops[0][opIndex(op)];
  if (t == DType::kBF16) return halfTypes().ops[1][opIndex(op)];
  static const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return kOps[opIndex(op)];
}

char* at(const Buffer& b, std::size_t elem) { return static_cast<char*>(b.data) + elem * dtypeSize(b.dtype); }

// Calls fn(offset, length) for pieces of at most maxChunk elements covering [0, count).
template <typename F>
void forChunks(std::size_t count, std::size_t maxChunk, F fn) {
  for (std::size_t off = 0; off < count; off += maxChunk) fn(off, std::min(maxChunk, count - off));
}

// The largest allreduce, broadcast or allgather (bytes per rank) that takes a nonblocking MPI call;
// larger ones take the blocking call on the worker thread. libnbc's schedules cost more than the
// handoff to the worker from here on (2 ranks, per op, nonblocking on the caller against blocking
// on the worker: 16 KiB 20 vs 26 us, 256 KiB 415 vs 123 us, 1 MiB 5460 vs 405 us under mpirun's
// binding; unbound 170 vs 121 us at 256 KiB; a loaded machine).
constexpr std::size_t kLargestNonblockingBytes = std::size_t{64} << 10;

// The largest allreduce (bytes per rank) that two ranks run as one exchange (postExchangeAllreduce).
constexpr std::size_t kExchangeMaxBytes = std::size_t{64} << 10;

std::size_t chunkLimitFromEnv() {
  const char* v = std::getenv("DS_MPI_MAX_CHUNK");
  if (v == nullptr || *v == '\0') return INT_MAX;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 1 || n > INT_MAX) {
    throw ConfigError(
        fmt::format("DS_MPI_MAX_CHUNK='{}' is not valid; use a number of elements from 1 to {} "
                    "(unset: {}, MPI's largest count).",
                    v, INT_MAX, INT_MAX));
  }
  return static_cast<std::size_t>(n);
}

// What one op posted: its requests and everything they point into that the op owns. On a timeout
// the whole thing is leaked, since MPI may still write into it.
struct Pending {
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Datatype> types;
  std::vector<std::vector<char>> scratch;
  mpi::InFlight inFlight;  // exit aborts rather than finalises while this lives (or after a leak)

  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() {
    if (types.empty() || mpi::finalized()) return;
    mpi::CallGuard guard;
    for (auto& t : types) MPI_Type_free(&t);
  }
  char* temp(std::size_t bytes) {
    scratch.emplace_back(std::max<std::size_t>(bytes, 1));
    return scratch.back().data();
  }
  // A type of `len` contiguous elements of `base` whose extent is `extentElems` elements: one
  // rank's piece of a chunk inside an array of per-rank slots.
  MPI_Datatype slotType(MPI_Datatype base, std::size_t len, std::size_t extentElems, std::size_t elemSize) {
    MPI_Datatype contig = MPI_DATATYPE_NULL;
    MPI_Datatype resized = MPI_DATATYPE_NULL;
    check(MPI_Type_contiguous(static_cast<int>(len), base, &contig), "MPI_Type_contiguous");
    check(MPI_Type_create_resized(contig, 0, static_cast<MPI_Aint>(extentElems * elemSize), &resized),
          "MPI_Type_create_resized");
    MPI_Type_free(&contig);
    check(MPI_Type_commit(&resized), "MPI_Type_commit");
    types.push_back(resized);
    return resized;
  }
};

void abandon(Pending& p) {
  auto* leaked = new Pending;  // NOLINT: intentionally never freed
  leaked->reqs.swap(p.reqs);
  leaked->types.swap(p.types);
  leaked->scratch.swap(p.scratch);
}

// One op posted to MPI: its requests and owned buffers, its deadline, and what must run once its
// requests completed (avg's division, copies out of temporaries, recv's size check).
struct Posted {
  Pending pending;
  std::vector<MPI_Status> statuses;  // recv only; otherwise MPI_STATUSES_IGNORE is used
  std::function<void(Posted&)> after;
  Clock::time_point deadline;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(const ProcessGroupOptions& options)
      : ProcessGroup(options),
        policy_(mpidetail::pollPolicyFromEnv(std::getenv("DS_MPI_WAIT"))),
        maxChunk_(chunkLimitFromEnv()) {
    mpi::ensureInitialized();
    if (mpi::threadLevel() < MPI_THREAD_SERIALIZED) {
      throw BackendError(
          fmt::format("the MPI library provides thread level {} but the mpi backend needs "
                      "MPI_THREAD_SERIALIZED ({}) or more: "
                      "it calls MPI from the process group's worker thread. Use an MPI built with thread "
                      "support (Open MPI, "
                      "MPICH and Intel MPI all are), or if MPI was initialised before dsperf, request "
                      "MPI_THREAD_MULTIPLE there.",
                      mpi::threadLevel(), MPI_THREAD_SERIALIZED));
    }
    if (mpi::broken()) throw brokenError("create a process group");
    int mpiRank = 0;
    int mpiSize = 0;
    {
      mpi::CallGuard guard;
      MPI_Comm_rank(MPI_COMM_WORLD, &mpiRank);
      MPI_Comm_size(MPI_COMM_WORLD, &mpiSize);
    }
    checkWorld(options, mpiRank, mpiSize);
    createComm(options.timeout);
  }

  ~MpiProcessGroup() override {
    shutdown();
    // After a timeout the worker may have been abandoned inside MPI; the comm is then left to the
    // MPI_Abort at exit.
    if (comm_ != MPI_COMM_NULL && !broken() && !mpi::broken() && !mpi::anyInFlight() && !mpi::finalized()) {
      mpi::CallGuard guard;
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&xcomm_);
    }
  }

  std::string backendName() const override { return "mpi"; }
  // The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ...").
  std::string commLibVersion() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "";
    const std::string all(text, static_cast<std::size_t>(std::max(0, len)));
    return all.substr(0, all.find('\n'));
  }

 protected:
  void doAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out) override {
    if (blocking(d)) return blockingAllreduce(d, in, out);
    runBlocking(d, in, out);
  }
  void doBroadcast(const OpDesc& d, const Buffer& in, const Buffer& out) override {
    if (blocking(d)) return blockingBroadcast(d, in, out);
    runBlocking(d, in, out);
  }
  void doReduce(const OpDesc& d, const Buffer& in, const Buffer& out) override { runBlocking(d, in, out); }
  void doAllgather(const OpDesc& d, const Buffer& in, const Buffer& out) override {
    if (blocking(d)) return blockingAllgather(d, in, out);
    runBlocking(d, in, out);
  }
  void doReduceScatter(const OpDesc& d, const Buffer& in, const Buffer& out) override {
    runBlocking(d, in, out);
  }
  void doAlltoall(const OpDesc& d, const Buffer& in, const Buffer& out) override { runBlocking(d, in, out); }
  void doBarrier(const OpDesc& d) override {
    Buffer none{nullptr, 0, DType::kI32, Device{}};
    runBlocking(d, none, none);
  }
  // send and recv are posted when issued (MPI_Isend, MPI_Irecv, as torch's ProcessGroupMPI posts
  // isend/irecv) and tested on a completion thread, so that every rank may send first.
  std::unique_ptr<PostedP2p> postPointToPoint(const OpDesc& d, const Buffer& data) override {
    auto posted = std::make_unique<PostedRequests>(*this, d);
    post(d, data, data, posted->op, Clock::now());
    return posted;
  }

  // Every op but the blocking ones can start on the caller's thread as a nonblocking MPI call (the
  // base applies the size limit).
  bool inlineEligible(const OpDesc& d) const override { return !blocking(d); }
  // On one core every op runs on the caller: the nonblocking ones timed out by the wait loop, the
  // blocking calls watched by the base's watchdog, which aborts the job when one outlives its
  // deadline (abortHungCall). The worker would only share the caller's core: under mpirun's binding
  // its handoff cost ~20 us per op against raw MPI_Allreduce (256 KiB-1 MiB).
  bool callerMayRunToEnd(const OpDesc&) const override { return true; }
  // The blocking calls have no timeout of their own: the base's watchdog (or a wait()) times them out.
  bool keepsOwnTimeout(const OpDesc& d) const override { return !blocking(d); }
  // The caller's thread is stuck inside a blocking call past its deadline (the watchdog logged the
  // diagnosis): MPI cannot cancel it, so the job ends as an exit after a timeout ends it.
  void abortHungCall(const OpDesc& d) override {
    mpi::abortHungCall(fmt::format("{} of group '{}'", d.fingerprint(), options().groupName));
  }

  // Posts the op, then tests it through the wait loop's spin and yield phases only (the time a
  // prompt peer needs; PollPolicy), and returns the rest when it is not done by then: from there on
  // the wait would sleep, and that is the worker thread's job.
  std::function<void()> startInline(const OpDesc& d, const Buffer& in, const Buffer& out,
                                    Clock::time_point issued) override {
    auto op = std::make_shared<Posted>();
    post(d, in, out, *op, issued);
    if (!op->pending.reqs.empty()) {
      auto budget = issued + mpidetail::yieldPhase(policy_, d.bytes);
      if (!complete(d, *op, std::min(budget, op->deadline))) {
        return [this, d, op] {
          complete(d, *op, op->deadline);
          if (op->after) op->after(*op);
        };
      }
    }
    if (op->after) op->after(*op);
    return nullptr;
  }

 private:
  // --- blocking calls, on the worker thread, or the caller's on one core (see the file comment) ---
  // Whether `d` takes the blocking call. Decided from the op alone, the same on every rank: MPI does
  // not match a blocking collective on one rank with a nonblocking one on another (a rank whose
  // worker was busy would otherwise block where its peers took the fast path, and the job hangs).
  // Blocking ops never take the fast path (which starts an op nonblocking): they run whole, on the
  // worker or, on one core, on the caller's thread; the others stay nonblocking wherever they run.
  bool blocking(const OpDesc& d) const {
    const bool hasBlockingPath =
        d.type == OpType::kAllreduce || d.type == OpType::kBroadcast || d.type == OpType::kAllgather;
    return hasBlockingPath && (d.bytes > inlineMaxBytes() || d.bytes > kLargestNonblockingBytes) &&
           d.count <= maxChunk_;
  }

  // Runs one blocking MPI call: refused once MPI is broken, counted in flight while it runs (a call
  // that never returns makes exit abort), MPI's error turned into a BackendError.
  template <typename F>
  void blockingCall(const OpDesc& d, const char* what, F&& call) {
    if (mpi::broken()) throw brokenError(d.describe());
    mpi::InFlight inFlight;
    mpi::CallGuard guard;
    mpidetail::YieldWhileIdle yield;  // the caller computes beside this call: do not spin its CPU away
    check(call(), what);
  }

  void blockingAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out) {
    blockingCall(d, "MPI_Allreduce", [&] {
      return MPI_Allreduce(d.inPlace ? MPI_IN_PLACE : in.data, out.data, static_cast<int>(d.count),
                           mpiType(d.dtype), mpiOp(d.dtype, d.op), comm_);
    });
    if (d.op == ReduceOp::kAvg) divideBy(out.data, out.count, out.dtype, size());
  }

  void blockingBroadcast(const OpDesc& d, const Buffer& in, const Buffer& out) {
    if (rank() == d.root && !d.inPlace) std::memcpy(out.data, in.data, in.bytes());
    blockingCall(d, "MPI_Bcast", [&] {
      return MPI_Bcast(out.data, static_cast<int>(d.count), mpiType(d.dtype), d.root, comm_);
    });
  }

  void blockingAllgather(const OpDesc& d, const Buffer& in, const Buffer& out) {
    // In place: this rank's data already sits in its slot of out, which is what MPI_IN_PLACE means.
    const MPI_Datatype t = mpiType(d.dtype);
    blockingCall(d, "MPI_Allgather", [&] {
      return MPI_Allgather(d.inPlace ? MPI_IN_PLACE : in.data, static_cast<int>(in.count), t, out.data,
                           static_cast<int>(in.count), t, comm_);
    });
  }

  void runBlocking(const OpDesc& d, const Buffer& in, const Buffer& out) {
    Posted op;
    post(d, in, out, op, Clock::now());
    if (!op.pending.reqs.empty()) complete(d, op, op.deadline);
    if (op.after) op.after(op);
  }

  // Posts `d` into `op`, due by start + d.timeout (no requests: nothing to move). Throws BackendError when
  // MPI refuses it or an earlier op was abandoned.
  void post(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op, Clock::time_point start) {
    if (mpi::broken()) throw brokenError(d.describe());
    op.deadline = start + d.timeout;
    if (d.type == OpType::kSend || d.type == OpType::kRecv) checkTag(d);
    if (d.type != OpType::kBarrier && d.count == 0) return;  // a no-op on every rank, as in c10d
    switch (d.type) {
      case OpType::kAllreduce:
        postAllreduce(d, in, out, op);
        return;
      case OpType::kBroadcast:
        postBroadcast(d, in, out, op);
        return;
      case OpType::kReduce:
        postReduce(d, in, out, op);
        return;
      case OpType::kAllgather:
        postAllgather(d, in, out, op);
        return;
      case OpType::kReduceScatter:
        postReduceScatter(d, in, out, op);
        return;
      case OpType::kAlltoall:
        postAlltoall(d, in, out, op);
        return;
      case OpType::kBarrier: {
        mpi::CallGuard guard;
        op.pending.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Ibarrier(comm_, &op.pending.reqs.back()), "MPI_Ibarrier");
        return;
      }
      case OpType::kSend:
        postSend(d, in, op);
        return;
      case OpType::kRecv:
        postRecv(d, in, op);
        return;
    }
  }

  // Two ranks, small: one exchange of the whole input and a local reduction (exchangeAllreduce).
  bool exchanges(const OpDesc& d) const { return size() == 2 && d.bytes <= kExchangeMaxBytes; }

  // An allreduce of two ranks as one point-to-point exchange (MPI_Irecv + MPI_Isend on xcomm_) and a
  // local reduction: what Open MPI's blocking allreduce does for small messages, without libnbc's
  // schedule, which costs ~0.7 us more per op at 8 B, and still nonblocking, so the op keeps its
  // timeout. Both ranks reduce rank 0's data with rank 1's in that order, so their results are the
  // same bits whatever the op.
  void postExchangeAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    Pending& p = op.pending;
    const MPI_Datatype t = mpiType(d.dtype);
    const int peer = 1 - rank();
    char* theirs = p.temp(d.bytes);
    {
      mpi::CallGuard guard;
      p.reqs.resize(2, MPI_REQUEST_NULL);
      check(MPI_Irecv(theirs, static_cast<int>(d.count), t, peer, 0, xcomm_, &p.reqs[0]), "MPI_Irecv");
      check(MPI_Isend(in.data, static_cast<int>(d.count), t, peer, 0, xcomm_, &p.reqs[1]), "MPI_Isend");
    }
    op.after = [d, in, out, theirs, first = rank() == 0](Posted&) {
      const ReduceOp wire = wireOp(d.op);
      if (first) {
        if (!d.inPlace) std::memcpy(out.data, in.data, d.bytes);
        reduceInto(out.data, theirs, d.count, d.dtype, wire);
      } else {
        reduceInto(theirs, in.data, d.count, d.dtype, wire);
        std::memcpy(out.data, theirs, d.bytes);
      }
      if (d.op == ReduceOp::kAvg) divideBy(out.data, out.count, out.dtype, 2);
    };
  }

  void postAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    if (exchanges(d)) return postExchangeAllreduce(d, in, out, op);
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    MPI_Op mop = mpiOp(d.dtype, d.op);
    {
      mpi::CallGuard guard;
      forChunks(d.count, maxChunk_, [&](std::size_t off, std::size_t len) {
        p.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Iallreduce(d.inPlace ? MPI_IN_PLACE : at(in, off), at(out, off), static_cast<int>(len), t,
                             mop, comm_, &p.reqs.back()),
              "MPI_Iallreduce");
      });
    }
    if (d.op == ReduceOp::kAvg) {
      op.after = [out, n = size()](Posted&) { divideBy(out.data, out.count, out.dtype, n); };
    }
  }

  void postBroadcast(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    if (rank() == d.root && !d.inPlace) std::memcpy(out.data, in.data, in.bytes());
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    mpi::CallGuard guard;
    forChunks(d.count, maxChunk_, [&](std::size_t off, std::size_t len) {
      p.reqs.push_back(MPI_REQUEST_NULL);
      check(MPI_Ibcast(at(out, off), static_cast<int>(len), t, d.root, comm_, &p.reqs.back()), "MPI_Ibcast");
    });
  }

  void postReduce(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    const bool isRoot = rank() == d.root;
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    MPI_Op mop = mpiOp(d.dtype, d.op);
    {
      mpi::CallGuard guard;
      forChunks(d.count, maxChunk_, [&](std::size_t off, std::size_t len) {
        // MPI_IN_PLACE is valid only at the root; elsewhere the input is read and nothing written.
        const void* send = isRoot && d.inPlace ? MPI_IN_PLACE : at(in, off);
        p.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Ireduce(send, isRoot ? at(out, off) : nullptr, static_cast<int>(len), t, mop, d.root, comm_,
                          &p.reqs.back()),
              "MPI_Ireduce");
      });
    }
    if (isRoot && d.op == ReduceOp::kAvg) {
      op.after = [out, n = size()](Posted&) { divideBy(out.data, out.count, out.dtype, n); };
    }
  }

  void postAllgather(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    const std::size_t n = in.count;
    mpi::CallGuard guard;
    if (n <= maxChunk_) {
      // In place: this rank's data already sits in its slot of out, which is what MPI_IN_PLACE means.
      p.reqs.push_back(MPI_REQUEST_NULL);
      check(MPI_Iallgather(d.inPlace ? MPI_IN_PLACE : in.data, static_cast<int>(n), t, out.data,
                           static_cast<int>(n), t, comm_, &p.reqs.back()),
            "MPI_Iallgather");
    } else {
      // Chunk [off, off+len) of every rank's slot: one element of a type whose extent is a slot.
      forChunks(n, maxChunk_, [&](std::size_t off, std::size_t len) {
        MPI_Datatype slot = p.slotType(t, len, n, dtypeSize(d.dtype));
        p.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Iallgather(d.inPlace ? MPI_IN_PLACE : at(in, off), static_cast<int>(len), t, at(out, off),
                             1, slot, comm_, &p.reqs.back()),
              "MPI_Iallgather");
      });
    }
  }

  void postReduceScatter(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    MPI_Op mop = mpiOp(d.dtype, d.op);
    const std::size_t n = out.count;
    const std::size_t es = dtypeSize(d.dtype);
    char* inPlaceResult = nullptr;
    {
      mpi::CallGuard guard;
      if (n <= maxChunk_) {
        // In place, out lies inside in, and MPI forbids overlapping send and receive buffers;
        // MPI_IN_PLACE would take the result at the start of in and may use all of in as scratch.
        // A temporary result leaves the other ranks' slots of in untouched.
        char* dst = d.inPlace ? (inPlaceResult = p.temp(out.bytes())) : static_cast<char*>(out.data);
        p.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Ireduce_scatter_block(in.data, dst, static_cast<int>(n), t, mop, comm_, &p.reqs.back()),
              "MPI_Ireduce_scatter_block");
      } else {
        // Chunk [off, off+len) of every slot is packed into a temporary, since a reduction needs
        // contiguous blocks; the result goes straight to out (the packed input never overlaps it).
        forChunks(n, maxChunk_, [&](std::size_t off, std::size_t len) {
          char* packed = p.temp(len * es * static_cast<std::size_t>(size()));
          for (int r = 0; r < size(); ++r) {
            std::memcpy(packed + static_cast<std::size_t>(r) * len * es, at(in, r * n + off), len * es);
          }
          p.reqs.push_back(MPI_REQUEST_NULL);
          check(MPI_Ireduce_scatter_block(packed, at(out, off), static_cast<int>(len), t, mop, comm_,
                                          &p.reqs.back()),
                "MPI_Ireduce_scatter_block");
        });
      }
    }
    if (inPlaceResult != nullptr || d.op == ReduceOp::kAvg) {
      op.after = [out, inPlaceResult, avg = d.op == ReduceOp::kAvg, n = size()](Posted&) {
        if (inPlaceResult != nullptr) std::memcpy(out.data, inPlaceResult, out.bytes());
        if (avg) divideBy(out.data, out.count, out.dtype, n);
      };
    }
  }

  void postAlltoall(const OpDesc& d, const Buffer& in, const Buffer& out, Posted& op) {
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    const std::size_t n = in.count / static_cast<std::size_t>(size());  // per peer
    const std::size_t es = dtypeSize(d.dtype);
    // In place, the input is copied first: Open MPI's nonblocking in-place alltoall is not relied on.
    const char* src = static_cast<const char*>(in.data);
    if (d.inPlace) {
      char* copy = p.temp(in.bytes());
      std::memcpy(copy, in.data, in.bytes());
      src = copy;
    }
    mpi::CallGuard guard;
    if (n <= maxChunk_) {
      p.reqs.push_back(MPI_REQUEST_NULL);
      check(
          MPI_Ialltoall(src, static_cast<int>(n), t, out.data, static_cast<int>(n), t, comm_, &p.reqs.back()),
          "MPI_Ialltoall");
    } else {
      forChunks(n, maxChunk_, [&](std::size_t off, std::size_t len) {
        MPI_Datatype slot = p.slotType(t, len, n, es);
        p.reqs.push_back(MPI_REQUEST_NULL);
        check(MPI_Ialltoall(src + off * es, 1, slot, at(out, off), 1, slot, comm_, &p.reqs.back()),
              "MPI_Ialltoall");
      });
    }
  }

  void postSend(const OpDesc& d, const Buffer& data, Posted& op) {
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    mpi::CallGuard guard;
    forChunks(d.count, maxChunk_, [&](std::size_t off, std::size_t len) {
      p.reqs.push_back(MPI_REQUEST_NULL);
      check(MPI_Isend(at(data, off), static_cast<int>(len), t, d.root, d.tag, comm_, &p.reqs.back()),
            "MPI_Isend");
    });
  }

  void postRecv(const OpDesc& d, const Buffer& data, Posted& op) {
    Pending& p = op.pending;
    MPI_Datatype t = mpiType(d.dtype);
    std::vector<int> want;
    {
      mpi::CallGuard guard;
      forChunks(d.count, maxChunk_, [&](std::size_t off, std::size_t len) {
        p.reqs.push_back(MPI_REQUEST_NULL);
        want.push_back(static_cast<int>(len));
        check(MPI_Irecv(at(data, off), static_cast<int>(len), t, d.root, d.tag, comm_, &p.reqs.back()),
              "MPI_Irecv");
      });
    }
    op.statuses.resize(p.reqs.size());
    op.after = [t, want = std::move(want), d](Posted& o) {
      std::size_t got = 0;
      for (std::size_t i = 0; i < o.statuses.size(); ++i) {
        int n = 0;
        MPI_Get_count(&o.statuses[i], t, &n);
        got += static_cast<std::size_t>(n);
        if (n != want[i]) {
          throw BackendError(
              fmt::format("recv from rank {} (tag {}) got a message of {} elements where {} were "
                          "expected; the sender's count must equal the receiver's.",
                          d.root, d.tag, got, d.count));
        }
      }
    };
  }

 private:
  void checkWorld(const ProcessGroupOptions& o, int mpiRank, int mpiSize) const {
    std::string want = fmt::format("rank {} of {} (process group options)", o.rank, o.size);
    bool ok = mpiRank == o.rank && mpiSize == o.size;
    if (ok && o.world != nullptr) {
      want = fmt::format("RANK={} (from {}) and WORLD_SIZE={} (from {})", o.world->rank.value,
                         o.world->rank.source, o.world->worldSize.value, o.world->worldSize.source);
      ok = mpiRank == o.world->rank.value && mpiSize == o.world->worldSize.value;
    }
    if (!ok) {
      throw ConfigError(
          fmt::format("the mpi backend needs the MPI world to be the process group, but MPI says this "
                      "process is rank {} of {} "
                      "while dsperf was given {}. Start the job with mpirun (or srun with MPI support) of "
                      "the MPI this build "
                      "uses, one rank per process, not with dsrun/torchrun, and don't override "
                      "RANK/WORLD_SIZE; or pick the "
                      "gloo backend for dsrun jobs.",
                      mpiRank, mpiSize, want));
    }
  }

  void createComm(Duration timeout) {
    Pending p;
    {
      mpi::CallGuard guard;
      p.reqs.resize(2, MPI_REQUEST_NULL);
      check(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &p.reqs[0]), "MPI_Comm_idup");
      check(MPI_Comm_idup(MPI_COMM_WORLD, &xcomm_, &p.reqs[1]), "MPI_Comm_idup");
    }
    auto deadline = Clock::now() + timeout;
    if (mpidetail::waitAll(p.reqs.data(), 2, MPI_STATUSES_IGNORE, 0, deadline, policy_,
                           [] { return std::string("MPI_Comm_idup"); }) == mpidetail::WaitResult::kTimedOut) {
      mpi::markBroken(fmt::format("creating the mpi process group '{}'", options().groupName));
      abandon(p);
      comm_ = MPI_COMM_NULL;
      xcomm_ = MPI_COMM_NULL;
      throw TimeoutError(
          fmt::format("creating the mpi process group '{}' (MPI_Comm_idup of MPI_COMM_WORLD) did not finish "
                      "within {} ms on rank "
                      "{} of {}: some rank of the MPI job did not create it. Every rank must create the "
                      "group; check the other "
                      "ranks' output for an earlier error.",
                      options().groupName, timeout.count(), rank(), size()));
    }
    mpi::CallGuard guard;
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_set_errhandler(xcomm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_set_name(comm_, const_cast<char*>(("ds:" + options().groupName).c_str())),
          "MPI_Comm_set_name");
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tagUb_ = flag != 0 && ub != nullptr ? *ub : 32767;
  }

  void checkTag(const OpDesc& d) const {
    if (d.tag < 0 || d.tag > tagUb_) {
      throw ConfigError(fmt::format("{}: tag {} is outside MPI's range 0 to {} (MPI_TAG_UB).", opName(d.type),
                                    d.tag, tagUb_));
    }
  }

  BackendError brokenError(const std::string& what) const {
    return BackendError(
        fmt::format("cannot {}: an earlier MPI operation ({}) timed out and was abandoned, so the "
                    "ranks are out of step. Restart the job once the cause is fixed.",
                    what, mpi::brokenReason()));
  }

  // Tests op's requests until they complete (true) or `until` passes (false, requests still posted).
  // When `until` is the op's own deadline, running out is a timeout: op's requests are leaked (MPI
  // may still write into their buffers), MPI is marked broken, and TimeoutError is thrown.
  bool complete(const OpDesc& d, Posted& op, Clock::time_point until) {
    auto r = mpidetail::waitAll(op.pending.reqs.data(), static_cast<int>(op.pending.reqs.size()),
                                op.statuses.empty() ? MPI_STATUSES_IGNORE : op.statuses.data(), d.bytes,
                                until, policy_, [&d] { return fmt::format("mpi {}", d.describe()); });
    if (r == mpidetail::WaitResult::kDone) return true;
    if (until < op.deadline) return false;
    mpi::markBroken(fmt::format("{} of group '{}'", d.fingerprint(), options().groupName));
    abandon(op.pending);
    throw TimeoutError(fmt::format("MPI did not complete it within {} ms", d.timeout.count()));
  }

  // A posted send or recv: its requests, tested through the wait loop.
  class PostedRequests final : public PostedP2p {
   public:
    PostedRequests(MpiProcessGroup& pg, OpDesc d) : pg_(pg), d_(std::move(d)) {}
    // The wait loop's spin and yield phases, as the fast path gives an op (startInline).
    bool completeBriefly() override {
      if (!op.pending.reqs.empty()) {
        const auto budget = Clock::now() + mpidetail::yieldPhase(pg_.policy_, d_.bytes);
        if (!test(std::min(budget, op.deadline))) return false;
      }
      if (op.after) op.after(op);
      return true;
    }
    void complete(Clock::time_point) override {
      // op.deadline is the Work's. Tested in slices, so that abort() is seen within one.
      while (!op.pending.reqs.empty() && !test(std::min(op.deadline, Clock::now() + std::chrono::milliseconds(200)))) {
        if (aborted_.load()) {
          // MPI cannot take back a send; the requests stay with MPI, and so MPI can no longer be trusted.
          mpi::markBroken(fmt::format("{} of group '{}', pending when the group was destroyed", d_.fingerprint(),
                                      pg_.options().groupName));
          abandon(op.pending);
          throw BackendError("aborted");
        }
      }
      if (op.after) op.after(op);
    }
    void abort() override { aborted_.store(true); }
    Posted op;

   private:
    // MpiProcessGroup::complete, with MPI's truncation of a recv said as the size mismatch it is.
    bool test(Clock::time_point until) {
      try {
        return pg_.complete(d_, op, until);
      } catch (const BackendError& e) {
        if (d_.type != OpType::kRecv || std::strstr(e.what(), "MPI_ERR_TRUNCATE") == nullptr) throw;
        throw BackendError(fmt::format("recv from rank {} (tag {}) expected {} bytes but rank {} sent more with "
                                       "that tag (MPI_ERR_TRUNCATE); the sender's count and dtype must match the "
                                       "receiver's",
                                       d_.root, d_.tag, d_.bytes, d_.root));
      }
    }

    MpiProcessGroup& pg_;
    OpDesc d_;
    std::atomic<bool> aborted_{false};
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  // The exchange allreduce's own communicator, so that its messages never meet the user's send/recv.
  MPI_Comm xcomm_ = MPI_COMM_NULL;
  mpidetail::PollPolicy policy_;
  std::size_t maxChunk_;
  int tagUb_ = 32767;
};

}  // namespace

bool mpiCudaAware(std::string* why) {
  auto say = [&](std::string text) {
    if (why != nullptr) *why = std::move(text);
  };
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (MPIX_Query_cuda_support() == 1) {
    say("this Open MPI reads CUDA buffers (MPIX_Query_cuda_support() = 1)");
    return true;
  }
  say("this Open MPI was built with CUDA support but it is off at run time (MPIX_Query_cuda_support() = 0; "
      "check OMPI_MCA_opal_cuda_support and its UCX)");
  return false;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  say("this Open MPI was built without CUDA support (mpi-ext.h: MPIX_CUDA_AWARE_SUPPORT 0)");
  return false;
#else
  say("this MPI does not say that it reads CUDA buffers (no MPIX_CUDA_AWARE_SUPPORT in mpi-ext.h)");
  return false;
#endif
}

std::unique_ptr<ProcessGroup> makeMpiProcessGroup(const ProcessGroupOptions& options) {
  std::string why;
  if (options.device.type != DeviceType::kCpu && !mpiCudaAware(&why)) {
    // It would take a device pointer for host memory: a crash or silently wrong sums.
    throw BackendError(fmt::format(
        "backend mpi was asked to work on {} buffers, but {}, so it cannot read device memory. Run backend mpi "
        "on host memory (init_distributed does so on a GPU node unless the MPI is CUDA-aware), use backend "
        "nccl for device buffers, or install a CUDA-aware MPI.",
        deviceName(options.device), why));
  }
  return std::make_unique<MpiProcessGroup>(options);
}

}  // namespace ds::comm
