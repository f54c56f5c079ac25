// ProcessGroup: collectives among the ranks of a group, on one backend (c10d's Backend).
//
// Every call is asynchronous and returns a Work. Collectives run in the order they were issued;
// send and recv are posted to the transport when issued, where the backend can (postPointToPoint),
// and complete in whatever order their peers allow, so that every rank may send first. Buffers
// are type-erased (comm/types.h); "in-place" means input and output are the same memory (for
// allgather: input is this rank's slot of output; for reduce_scatter: output is this rank's slot of
// input).
//
// A backend implements the blocking do*() functions it supports; the base class validates buffers,
// numbers ops, runs them on the group's worker thread, checks them across ranks under
// DS_DISTRIBUTED_DEBUG=DETAIL, and turns a timeout into a TimeoutError naming the ranks that never
// arrived (from the heartbeats every rank publishes to the store). Anything a backend does not
// override throws "backend X does not support Y".
//
// Fast path: handing an op to the worker thread and waking the caller afterwards costs two thread
// switches (~9 us per op on this machine, against ~1 us for an 8-byte MPI allreduce). A backend that
// can start an op without blocking opts in (inlineEligible/startInline): when no earlier op of the
// group is queued or running, the op starts on the caller's thread, and if it completes within the
// backend's short budget the Work is returned already completed; otherwise the rest of it goes to the
// worker thread, ahead of any later op. Either way the caller gets a Work, ops run in issue order,
// seq numbers and heartbeats advance, and timeouts are diagnosed as before. Only ops of at most
// DS_PG_INLINE_MAX_BYTES bytes (default kDefaultInlineMaxBytes; 0 turns the fast path off) take it,
// so that a large op never holds up the caller (DDP overlaps those with its backward pass). Off
// under DETAIL, whose store round trips dwarf the saving. A small op issued while only small ops are
// queued or running (the rest of one whose peer was late) waits for them, at most smallOpDrain
// (2 ms), and then takes the fast path, rather than queueing behind them: otherwise a back-to-back
// loop of small ops stays on the worker, each op paying the handoff.
//
// One core: when this process may run on a single CPU (its affinity mask: mpirun's default binding,
// srun --cpu-bind=cores, taskset), the worker thread could only run on the caller's own core, so a
// handoff costs two context switches on it and the worker competes with the caller for it (measured
// under mpirun -np 2: 34-44 us for an 8-byte shm allreduce instead of ~1 us). There, every op of a
// host-memory group runs to its end on the caller's thread whenever nothing of the group is queued
// or running, whatever its size, unless its backend keeps it on the worker (callerMayRunToEnd; gloo
// does, for every op): issuing blocks until the op is done, or fails by its own timeout (diagnosed
// as always), and the Work comes back completed. Nothing overlaps with the caller then,
// which a single core could not do anyway. DS_PG_INLINE_MAX_BYTES=0 turns this off too. An op whose
// call cannot time out by itself (keepsOwnTimeout: mpi's blocking collectives) runs there too when
// its backend allows (callerMayRunToEnd), watched by the group's watchdog as on the worker: past
// its deadline the watchdog logs the usual diagnosis and, since the caller's thread cannot be given
// back from inside the call, ends the job (abortHungCall; mpi: MPI_Abort, as an exit after a
// timeout does), as NCCL's watchdog does in PyTorch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/flight_recorder.h"
#include "engine/comm/liveness.h"
#include "engine/comm/types.h"
#include "engine/comm/work.h"
#include "engine/common/error.h"
#include "engine/store/store.h"

namespace ds::env {
struct WorldInfo;
}

namespace ds::comm {

struct ProcessGroupOptions {
  int rank = 0;
  int size = 1;
  // The members' ranks in the world: member i (this group's rank i) is the world's rank
  // globalRanks[i]. Empty: 0..size-1 (the world group, or a group of the world's first `size` ranks).
  // The flight recorder's pg_config shows them, and torch's analyzer matches a group across the ranks'
  // dumps by them. Otherwise size distinct ranks >= 0, or the group's constructor throws ConfigError.
  std::vector<int> globalRanks;
  // The job's store; the group uses keys under "pg/<groupName>/".
  std::shared_ptr<store::Store> store;
  // A second connection for heartbeats and timeout diagnosis, so that they are not queued behind a
  // long wait on `store`. Null: use `store`.
  std::shared_ptr<store::Store> heartbeatStore;
  // Per-op timeout unless the call gives one.
  Duration timeout = std::chrono::minutes(10);
  std::string groupName = "default";
  // Where this rank's buffers live: cpu, or cuda:<local rank> for nccl.
  Device device{};
  // The world's discovery record, for backends that cross-check it (mpi) or need the master
  // address (gloo's interface choice). May be null in tests.
  const env::WorldInfo* world = nullptr;
  // DS_DISTRIBUTED_DEBUG=DETAIL: check every op's fingerprint across ranks through the store.
  bool detailDebug = false;
  // How often each rank publishes its progress for timeout diagnosis; 0 turns it off.
  Duration heartbeatInterval = std::chrono::seconds(1);
  // The CPUs this process may run on; 0: read its affinity mask (sys::affinityCpuCount()). 1 makes ops
  // run on the caller's thread (the class comment's "one core"); tests set it to pretend a placement.
  int cpus = 0;
  // How long a small op issued behind small ops that run late waits for them to finish before it
  // queues behind them (the class comment's drain); tests lengthen it for a loaded machine.
  std::chrono::microseconds smallOpDrain = std::chrono::milliseconds(2);
  // How long wait() on an op of this group yields the CPU before it blocks (Work::setWaitSpin);
  // DS_PG_WAIT_SPIN_US overrides it. Ops finished on the caller's thread never wait.
  std::chrono::microseconds waitSpin = kDefaultWaitSpin;
  static constexpr std::chrono::microseconds kDefaultWaitSpin{1000};
  // Whether the group's ops go to the process's flight recorder (comm/flight_recorder.h). False for
  // a group a backend runs inside its own ops (shm's inter-host group): the outer op is the entry.
  bool flightRecorder = true;
};

class ProcessGroup {
 public:
  explicit ProcessGroup(ProcessGroupOptions options);
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  virtual std::string backendName() const = 0;
  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  const ProcessGroupOptions& options() const { return options_; }
  // True after an op timed out: the peers are out of step, and every later op fails at once.
  bool broken() const { return broken_.load(); }
  // Waits until no op of this group is queued, running or posted, at most `limit`; true when idle. An op
  // abandoned by a timed-out wait() goes on running on the worker until its backend gives up (the
  // do*() contract: by its own deadline, then the timeout diagnosis), and ops issued after it are
  // still queued: whoever owns memory such ops read or write calls this before freeing it, and keeps
  // the memory when it returns false (a bounded leak in a failing process beats a write into freed
  // memory). nccl ops are never pending here: their timeout aborts the communicator, ending them.
  bool waitIdle(Duration limit);
  // The limit owners of op memory give waitIdle() when tearing down: long enough for an abandoned
  // op's backend to reach its deadline and diagnose the timeout (at most 3 heartbeats, 5 s).
  static constexpr Duration kAbandonedOpGrace = std::chrono::seconds(10);
  // How long after an op's deadline the watchdog expires it: a caller waiting for the op gets there
  // first and raises the error itself (the watchdog then stays quiet).
  static constexpr Duration kWatchdogGrace = std::chrono::milliseconds(500);
  // The largest op (OpDesc::bytes) that may start on the caller's thread (the fast path, see the
  // class comment); 0 when it is off. Backends that do not opt in never take it, whatever this says.
  std::size_t inlineMaxBytes() const { return inlineMaxBytes_; }
  // True when ops run to their end on the caller's thread because this process has one CPU (the
  // class comment's "one core").
  bool callerRunsOps() const { return callerRunsOps_; }

  std::shared_ptr<Work> allreduce(const Buffer& input, const Buffer& output, ReduceOp op = ReduceOp::kSum,
                                  Timeout timeout = {});
  std::shared_ptr<Work> allreduce(const Buffer& data, ReduceOp op = ReduceOp::kSum, Timeout timeout = {}) {
    return allreduce(data, data, op, timeout);
  }
  // input and output have the same count; output matters everywhere, input only at root.
  std::shared_ptr<Work> broadcast(const Buffer& input, const Buffer& output, int root, Timeout timeout = {});
  std::shared_ptr<Work> broadcast(const Buffer& data, int root, Timeout timeout = {}) {
    return broadcast(data, data, root, timeout);
  }
  // output is written at root only.
  std::shared_ptr<Work> reduce(const Buffer& input, const Buffer& output, int root,
                               ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  // output.count == input.count * size.
  std::shared_ptr<Work> allgather(const Buffer& input, const Buffer& output, Timeout timeout = {});
  // input.count == output.count * size.
  std::shared_ptr<Work> reduceScatter(const Buffer& input, const Buffer& output, ReduceOp op = ReduceOp::kSum,
                                      Timeout timeout = {});
  // Equal splits: input.count == output.count, divisible by size; chunk j of input goes to rank j.
  std::shared_ptr<Work> alltoall(const Buffer& input, const Buffer& output, Timeout timeout = {});
  std::shared_ptr<Work> barrier(Timeout timeout = {});
  std::shared_ptr<Work> send(const Buffer& data, int dst, int tag = 0, Timeout timeout = {});
  std::shared_ptr<Work> recv(const Buffer& data, int src, int tag = 0, Timeout timeout = {});

  // Whether this backend runs `type` on `dtype` with `op`; the base rejects the rest at issue time
  // with "backend X does not support ...". Default: everything.
  virtual bool supports(OpType type, DType dtype, ReduceOp op) const;
  // The world's rank of each member (options().globalRanks, or 0..size-1 when it is empty).
  std::vector<int> globalRanks() const;

  // The backend library's version for flight recorder dumps (comm_lib_version); default "".
  virtual std::string commLibVersion() const;
  // Whether an op on device buffers is ordered after the device work the issuing thread queued before
  // it (its device's default stream), as torch's ProcessGroupNCCL makes its stream wait on the current
  // one. true for nccl: a caller that wrote a buffer with a kernel may issue at once, without draining
  // the device. false (the default): the backend reads the buffer from the host side (gloo, shm, a
  // CUDA-aware MPI) and the caller must synchronize the device first.
  virtual bool ordersAfterDeviceWork() const { return false; }
  // Registers the group with the process's flight recorder (its pg_config entry: name, desc
  // "default_pg" for the group named "default", else "undefined", ranks: the members' global ranks,
  // options().globalRanks or 0..size-1). createProcessGroup
  // does it; a group made otherwise registers at its first op. Idempotent; a no-op when the recorder
  // is off or options().flightRecorder is false.
  void registerFlightRecorder();

 protected:
  // --- blocking implementations, called on the worker thread in issue order ---
  // Each must finish (or throw) within desc.timeout: throw ds::TimeoutError on timeout, ds::BackendError
  // for backend failures. `in` and `out` may be the same memory (see the class comment).
  virtual void doAllreduce(const OpDesc& desc, const Buffer& in, const Buffer& out);
  virtual void doBroadcast(const OpDesc& desc, const Buffer& in, const Buffer& out);
  virtual void doReduce(const OpDesc& desc, const Buffer& in, const Buffer& out);
  virtual void doAllgather(const OpDesc& desc, const Buffer& in, const Buffer& out);
  virtual void doReduceScatter(const OpDesc& desc, const Buffer& in, const Buffer& out);
  virtual void doAlltoall(const OpDesc& desc, const Buffer& in, const Buffer& out);
  // Default: a one-element allreduce.
  virtual void doBarrier(const OpDesc& desc);
  virtual void doSend(const OpDesc& desc, const Buffer& data);
  virtual void doRecv(const OpDesc& desc, const Buffer& data);

  // --- point-to-point ops posted at issue time (see postPointToPoint) ---
 public:
  // A send or recv the backend has handed to its transport, which moves it without this rank's
  // further help; completing it only waits. Destroyed on the thread that completed it.
  class PostedP2p {
   public:
    virtual ~PostedP2p() = default;
    // Blocks until the op has completed (returns), failed (throws as do*() does) or `deadline` passed
    // (throws ds::TimeoutError). Called once, on one of the group's p2p completion threads.
    virtual void complete(Work::Clock::time_point deadline) = 0;
    // Waits for the op only briefly (a budget of the backend's choosing, microseconds; never the op's
    // timeout), on the issuing thread right after the post: true when it has completed, and then
    // complete() is never called. Throws as complete(). Default: false (the transport cannot be
    // asked without waiting).
    virtual bool completeBriefly() { return false; }
    // Makes a complete() that runs or is about to run give up soon, throwing: the group is being
    // destroyed with the op still pending. Any thread, possibly before complete() started.
    virtual void abort() = 0;
  };

 protected:
  // Posts a send (`data` goes to desc.root) or a recv (into `data` from desc.root) to the transport on
  // the issuing thread, without waiting for the peer, so that ops complete in any order: every rank
  // may send first (a ring shift, a symmetric exchange, a pipeline's schedule), as with torch's
  // isend/irecv. The base completes the Work off the worker thread (a completion thread per pending
  // op, kept for reuse) and never queues the op behind the group's collectives. Called under the
  // group's issue lock, so posts reach the transport in issue order (messages of one peer and tag
  // match in that order). nullptr (the default): the op queues and runs through doSend/doRecv.
  // Throws as do*() does when the transport refuses the post.
  virtual std::unique_ptr<PostedP2p> postPointToPoint(const OpDesc& desc, const Buffer& data);

  // How an op runs. Default: queued to the worker thread, which runs `body` and completes the Work.
  // A backend with its own asynchrony (nccl: streams and events) overrides this.
  virtual std::shared_ptr<Work> enqueue(OpDesc desc, std::function<void()> body);

  // --- the fast path (see the class comment); a backend opts in by overriding both ---
  // Whether `desc` may start on the caller's thread. Called on the issuing thread; must be cheap.
  // Default: no.
  virtual bool inlineEligible(const OpDesc& desc) const;
  // Starts `desc` (the buffers as the do*() function of its type gets them; send/recv/barrier: `in`
  // and `out` are the data, or empty) on the caller's thread, waits for it only briefly (a budget of
  // the backend's choosing, microseconds, never the op's timeout), and returns nullptr when it has
  // completed, or else the blocking rest of it, which the worker thread runs next with the same
  // contract as do*() (finish or throw by issued + desc.timeout). Throws as do*(). `issued` is when
  // the op was issued (the clock is read once per op on this path). Runs under the same exclusion
  // as do*(): no other op of the group runs meanwhile.
  virtual std::function<void()> startInline(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                            std::chrono::steady_clock::time_point issued);
  // Whether `desc` may run to its end on the caller's thread on one core (the class comment).
  // Default: keepsOwnTimeout(desc). A backend that says yes for an op that does not keep its own
  // timeout must end the job in abortHungCall().
  virtual bool callerMayRunToEnd(const OpDesc& desc) const;
  // Whether the do*() of `desc` keeps the op's timeout itself (the do*() contract). Default: yes. A
  // backend whose do*() may block without one (mpi's blocking collectives) says no for those ops:
  // wherever they run (the worker, or the caller's thread where callerMayRunToEnd allows), the
  // group's watchdog times them out at their deadline, whether or not anybody waits for them.
  virtual bool keepsOwnTimeout(const OpDesc& desc) const;
  // Called on the watchdog thread when an op that does not keep its own timeout, running on the
  // caller's thread, outlived its deadline: the diagnosis is logged, the group is broken, and the
  // caller is stuck inside a call nobody can interrupt, so the job must end (mpi: MPI_Abort, which
  // makes the launcher end every rank). Default: std::abort(). A test backend may return instead:
  // the watchdog then carries on as for an op on the worker.
  virtual void abortHungCall(const OpDesc& desc);

  // The TimeoutError for `desc`, naming the ranks that never arrived, from the heartbeats
  // (GroupLiveness::diagnoseTimeout). Marks the group broken. Blocks for a few heartbeat intervals
  // while it looks.
  std::exception_ptr diagnoseTimeout(const OpDesc& desc, const std::string& cause);
  // GroupLiveness::missingRanks.
  std::string missingRanks(const OpDesc& desc) { return liveness_->missingRanks(desc); }
  // GroupLiveness::publishFailure: peers diagnosing the same incident do not count this rank among
  // the causes (it reports its own error).
  void publishFailure() { liveness_->publishFailure(); }
  // Calls the do*() function of d.type (send/recv/barrier: as their do*() take it); for a
  // startInline() that runs an op to the end on the caller's thread.
  void dispatch(const OpDesc& d, const Buffer& in, const Buffer& out);
  // Runs body with the DETAIL check, seq tracking and error wrapping; for enqueue() overrides.
  void runOp(const OpDesc& desc, const std::function<void()>& body) { runOpWith(desc, body); }
  // Must be called by the most-derived destructor (before its members go): stops the worker and
  // heartbeat threads so no op runs on a half-destroyed backend.
  void shutdown();
  // True on this group's worker thread (a do*() function may wait differently there: the worker
  // can share its core with a caller that computes meanwhile).
  bool onWorkerThread() const;
  store::Store& store() { return *options_.store; }
  store::Store& heartbeatStore() {
    return options_.heartbeatStore ? *options_.heartbeatStore : *options_.store;
  }
  [[noreturn]] void unsupported(const char* what) const;

 private:
  std::shared_ptr<Work> issue(OpDesc desc, const Buffer& in, const Buffer& out);
  // The flight recorder's entry for `desc` (issueMu_ held; desc.seq set): its handle goes to
  // desc.frHandle. `started`: it runs on the caller's thread from now on. `at`: issued.
  void recordOp(OpDesc& desc, const Buffer& in, const Buffer& out, bool started, Work::Clock::time_point at);
  void registerFlightRecorderLocked();
  // The first failure or timeout of the group: the flight recorder dumps and signals the other ranks.
  void flightRecorderFailure();
  std::shared_ptr<Work> makeWork(const OpDesc& desc);
  std::shared_ptr<Work> makeWork(const OpDesc& desc, Work::Clock::time_point issued);
  // The posted path (postPointToPoint): a Work already started at `issued`, handed to a completion
  // thread, or failed at once when posting threw.
  std::shared_ptr<Work> issuePosted(const OpDesc& desc, std::unique_ptr<PostedP2p> posted,
                                    Work::Clock::time_point issued);
  void p2pLoop();
  // rethrowTranslated's error as a value (a posted op's error, for its Work).
  std::exception_ptr translated(const OpDesc& desc, std::exception_ptr error);
  // The error of a posted op still pending when the group is destroyed.
  BackendError pendingAtShutdown(const OpDesc& desc) const;
  // Aborts every posted op still pending and joins the completion threads (shutdown()).
  void stopP2p();
  // Claims the right to run an op on the caller's thread: true when nothing is queued or running.
  bool claimInline();
  // claimInline() for an op of the fast path's class; when only such ops are queued or running (the
  // rest of one whose peer was late, and the ops queued behind it), waits for them to finish first,
  // at most until `desc`'s own deadline, instead of queueing behind them. issueMu_ held (so no later
  // op can slip ahead). False: the group is busy with a larger op, stopping, or did not drain.
  bool claimInlineAfterSmall(const OpDesc& desc, Work::Clock::time_point issued);
  // Whether desc belongs to the fast path's class (DS_PG_INLINE_MAX_BYTES, inlineEligible).
  bool fastPathClass(const OpDesc& desc) const {
    return inlineMaxBytes_ > 0 && desc.bytes <= inlineMaxBytes_ && inlineEligible(desc);
  }
  // Runs desc on the caller's thread (claimInline() succeeded); hands the rest to the worker if any.
  // `issued`: when it was issued (read once per op on this path).
  std::shared_ptr<Work> runInline(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                  Work::Clock::time_point issued);
  // Runs desc to its end on the caller's thread (claimInline() succeeded; one core).
  std::shared_ptr<Work> runOnCaller(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                    Work::Clock::time_point issued);
  // Ends a claim of the caller's thread (its op, if any, completed): lets the worker take the next.
  void releaseCaller();
  // Starts the worker thread if needed; queueMu_ held.
  void startWorkerLocked();
  // Runs body with runOp's error translation (TimeoutError diagnosed, others wrapped with the op and
  // rank). A template, so the fast path's inline ops pass their lambda without a std::function.
  template <class Body>
  void guarded(const OpDesc& desc, Body&& body) {
    try {
      body();
    } catch (...) {
      rethrowTranslated(desc, std::current_exception());
    }
  }
  [[noreturn]] void rethrowTranslated(const OpDesc& desc, std::exception_ptr error);
  // runOp() for any callable (the one-core path passes a lambda without a std::function).
  template <class Body>
  void runOpWith(const OpDesc& desc, Body&& body) {
    // Queued behind an op that timed out: fail at once instead of waiting out another timeout (the
    // peers are out of step), so the queue drains and the caller's buffers are soon free to release.
    if (broken_) throw unusableError();
    const bool collective = !desc.isPointToPoint();
    if (collective) liveness_->entered(desc.seq);
    guarded(desc, [&] {
      if (collective && options_.detailDebug && options_.size > 1) detailCheck(desc);
      body();
    });
    if (collective) liveness_->completed(desc.seq);
  }
  OpDesc makeDesc(OpType type, const Buffer& in, Timeout timeout) const;
  void checkBuffer(const char* what, const Buffer& b) const;
  void checkRank(const char* what, int r) const;
  void detailCheck(const OpDesc& desc);
  // "the <backend> process group '<name>' is unusable: <op> timed out earlier ...", for ops issued or
  // dequeued after a timeout.
  BackendError unusableError() const;
  void workerLoop();
  // The watchdog (GroupLiveness): when the op it watches (one that does not keep its own timeout)
  // outlives its deadline by kWatchdogGrace, it expires the op's Work (the usual diagnosis, naming
  // the ranks that never arrived), logs the error unless a wait() raised it first, and fails the ops
  // queued behind it (failQueued: the group is unusable, and the worker may never come back from
  // the call). An op on the caller's thread that is still inside its call then ends the job
  // (abortHungCall). `work` null: stop watching.
  void watch(std::shared_ptr<Work> work, bool onCaller = false) {
    liveness_->watch(std::move(work), onCaller);
  }
  // Fails every queued op at once with unusableError() (their bodies never run).
  void failQueued();
  std::string key(const std::string& suffix) const;

  ProcessGroupOptions options_;
  std::atomic<bool> broken_{false};
  mutable std::mutex brokenMu_;
  std::string brokenReason_;   // the op that timed out first; guarded by brokenMu_
  std::uint64_t nextSeq_ = 1;  // collectives; guarded by issueMu_
  std::uint64_t p2pSeq_ = 0;   // send/recv; guarded by issueMu_
  std::uint64_t opCount_ = 0;  // every op (the flight recorder's op_id); guarded by issueMu_
  std::mutex issueMu_;
  // The group's pg_id in the flight recorder: kFrUnregistered until registered, -1 when not recorded.
  static constexpr int kFrUnregistered = -2;
  std::atomic<int> frPg_{kFrUnregistered};
  std::atomic<bool> frFailed_{false};  // the flight recorder was told of a failure of this group

  struct Task {
    std::shared_ptr<Work> work;
    std::function<void()> body;
    bool started = false;  // the rest of an op that started inline (its start time is already set)
    bool small = false;    // of the fast path's class (fastPathClass)
  };
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::condition_variable idleCv_;  // running_ became false, or the worker exited (waitIdle)
  std::deque<Task> queue_;
  std::atomic<bool> stopping_{false};
  bool workerExited_ = false;  // guarded by queueMu_
  // An op is running (on the worker, or inline on a caller's thread); guarded by queueMu_. The
  // worker takes the next task only when it is false, which keeps ops in issue order.
  bool running_ = false;
  // Queued or running tasks that are not of the fast path's class; guarded by queueMu_. While it is
  // zero, a small op waits for the queue to drain rather than queue behind (claimInlineAfterSmall).
  int bigPending_ = 0;
  std::size_t inlineMaxBytes_ = 0;
  bool callerRunsOps_ = false;
  std::thread worker_;
  bool workerStarted_ = false;

  // Posted point-to-point ops waiting for, or inside, a completion thread; guarded by p2pMu_. A thread
  // takes one op and waits for it; a post that finds no idle thread starts one, so a pending op never
  // waits behind another (a recv whose sender is late must not hold up a completed one).
  struct P2pTask {
    std::shared_ptr<Work> work;
    std::unique_ptr<PostedP2p> posted;
  };
  std::mutex p2pMu_;
  std::condition_variable p2pCv_;      // a task was queued, or stopping
  std::condition_variable p2pIdleCv_;  // p2pBusy_ fell to 0 (waitIdle)
  std::deque<P2pTask> p2pQueue_;
  std::vector<PostedP2p*> p2pRunning_;  // inside complete(); abort() reaches them at shutdown
  std::vector<std::thread> p2pThreads_;
  int p2pWaiting_ = 0;  // threads waiting for a task (woken ones too, until they run)
  int p2pBusy_ = 0;    // tasks queued or being completed
  bool p2pStopping_ = false;

  // Heartbeats, the watchdog and the timeout diagnosis (comm/liveness.h); made in the constructor.
  std::unique_ptr<GroupLiveness> liveness_;
  // Lets a Work that outlives its group see that the group is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Every Work's timeout handler (diagnoseTimeout while the group lives), made once.
  std::shared_ptr<const std::function<std::exception_ptr(const OpDesc&)>> timeoutHandler_;
};

// The backends this process can create, in preference order.
std::vector<std::string> availableBackends();

using BackendFactory = std::unique_ptr<ProcessGroup> (*)(const ProcessGroupOptions&);
// A static BackendRegistrar in a backend's object library makes it available to the tools that link
// it (nccl: only dsbench and the GPU tests, so that other tools never need libnccl).
struct BackendRegistrar {
  BackendRegistrar(const char* name, BackendFactory factory);
};

// The backends this build can create, and the factory. `backend` is nccl, gloo, mpi or shm.
// Throws ConfigError for an unknown or unbuilt backend.
// Whether `backend` works on device (CUDA) buffers when the accelerator is cuda: nccl always, mpi when
// the MPI is CUDA-aware (mpiCudaAware), gloo and shm never (they move host memory). init_distributed
// gives a group on a GPU node a cuda device only when this is true, so the CPU backends work there
// without DS_ACCELERATOR=cpu.
bool backendTakesDeviceBuffers(const std::string& backend);
// The device a group of `backend` works on, for a rank with local rank `localRank` and accelerator
// `accelerator` ("cuda", "cpu", ...): the local GPU where the accelerator is cuda and the backend takes
// device buffers, host memory otherwise. init_distributed and dsbench coll's extra groups both ask it.
Device groupDevice(const std::string& backend, const std::string& accelerator, int localRank);

std::unique_ptr<ProcessGroup> createProcessGroup(const std::string& backend,
                                                 const ProcessGroupOptions& options);

// DS_DISTRIBUTED_DEBUG: OFF (default), INFO or DETAIL; true for DETAIL. Throws ConfigError on others.
bool detailDebugFromEnv(const char* value);

// The fast path's default size limit (ProcessGroup class comment): ops this small are latency-bound,
// and holding the caller for one of them costs less than the handoff would.
inline constexpr std::size_t kDefaultInlineMaxBytes = std::size_t{1} << 20;
// DS_PG_INLINE_MAX_BYTES: unset or empty = kDefaultInlineMaxBytes; a number of bytes, with an
// optional K/M/G (binary) suffix; 0 = off. Throws ConfigError on anything else.
std::size_t inlineMaxBytesFromEnv(const char* value);
// DS_PG_WAIT_SPIN_US: unset or empty = ProcessGroupOptions::kDefaultWaitSpin; whole microseconds from
// 0 to 1000000. Throws ConfigError on anything else.
std::chrono::microseconds waitSpinFromEnv(const char* value);

}  // namespace ds::comm
