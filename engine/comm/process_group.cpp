#include "engine/comm/process_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/env/env_source.h"
#include "engine/host/resources.h"

namespace ds::comm {
namespace {

using Clock = std::chrono::steady_clock;

// The group whose worker loop runs on this thread, if any (onWorkerThread()).
thread_local const ProcessGroup* tlsWorkerOf = nullptr;

// Appends "." to a message that does not end a sentence, so another sentence can follow.
std::string sentence(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  if (!text.empty() && text.back() != '.' && text.back() != ')') text += '.';
  return text;
}

}  // namespace

ProcessGroup::ProcessGroup(ProcessGroupOptions options) : options_(std::move(options)) {
  if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size) {
    throw ConfigError(
        fmt::format("process group '{}': rank {} of size {} is not valid (rank must be 0 to size-1).",
                    options_.groupName, options_.rank, options_.size));
  }
  if (!options_.globalRanks.empty()) {
    std::vector<int> sorted = options_.globalRanks;
    std::sort(sorted.begin(), sorted.end());
    if (static_cast<int>(sorted.size()) != options_.size || sorted.front() < 0 ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      throw ConfigError(fmt::format(
          "process group '{}': its members' global ranks [{}] are not {} distinct ranks >= 0, one per "
          "member; give each member's rank in the world once, in the group's rank order (or none for "
          "ranks 0-{}).",
          options_.groupName, fmt::join(options_.globalRanks, ", "), options_.size, options_.size - 1));
    }
  }
  DS_CHECK(options_.store != nullptr, "a process group needs a store");
  if (options_.flightRecorder) FlightRecorder::instance().checkConfig();  // a bad TORCH_FR_* fails here
  inlineMaxBytes_ = options_.detailDebug ? 0 : inlineMaxBytesFromEnv(std::getenv("DS_PG_INLINE_MAX_BYTES"));
  if (const char* v = std::getenv("DS_PG_WAIT_SPIN_US")) options_.waitSpin = waitSpinFromEnv(v);
  const int cpus = options_.cpus > 0 ? options_.cpus : sys::affinityCpuCount();
  callerRunsOps_ = cpus == 1 && inlineMaxBytes_ > 0 && options_.device.type == DeviceType::kCpu;
  std::weak_ptr<bool> alive = alive_;
  timeoutHandler_ = std::make_shared<const std::function<std::exception_ptr(const OpDesc&)>>(
      [this, alive](const OpDesc& d) {
        auto a = alive.lock();
        if (!a || !*a) {
          return std::make_exception_ptr(
              TimeoutError(fmt::format("{} did not finish within {} ms.", d.describe(), d.timeout.count())));
        }
        return diagnoseTimeout(d, fmt::format("it did not finish within {} ms", d.timeout.count()));
      });
  LivenessOptions lo;
  lo.rank = options_.rank;
  lo.size = options_.size;
  lo.groupName = options_.groupName;
  lo.store = options_.heartbeatStore ? options_.heartbeatStore : options_.store;
  lo.heartbeatInterval = options_.heartbeatInterval;
  lo.watchdogGrace = kWatchdogGrace;
  lo.stopping = &stopping_;
  LivenessHooks hooks;
  hooks.abortHungCall = [this](const OpDesc& d) { abortHungCall(d); };
  hooks.afterExpiry = [this] {
    if (broken_) failQueued();
  };
  hooks.afterBeat = [this] {
    const int pg = frPg_.load();
    if (pg >= 0) FlightRecorder::instance().pollDumpSignal(pg, heartbeatStore());
  };
  liveness_ = std::make_unique<GroupLiveness>(std::move(lo), std::move(hooks));
  liveness_->start();
}

ProcessGroup::~ProcessGroup() { shutdown(); }

void ProcessGroup::shutdown() {
  *alive_ = false;
  stopP2p();
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) {
    // After a timeout the worker may be stuck inside a backend call that never returns; it gets a
    // bounded moment to finish and is otherwise abandoned (the process is expected to exit).
    bool exited = true;
    if (broken_) {
      std::unique_lock<std::mutex> lock(queueMu_);
      exited = queueCv_.wait_for(lock, std::chrono::seconds(2), [&] { return workerExited_; });
    }
    if (exited) {
      worker_.join();
    } else {
      worker_.detach();
    }
  }
  liveness_->stop();  // the watchdog, then the heartbeat
  if (frPg_.load() >= 0) FlightRecorder::instance().unregisterGroup(frPg_.load());
}

std::string ProcessGroup::key(const std::string& suffix) const {
  return fmt::format("pg/{}/{}", options_.groupName, suffix);
}

bool ProcessGroup::supports(OpType, DType, ReduceOp) const { return true; }

std::string ProcessGroup::commLibVersion() const { return ""; }

std::vector<int> ProcessGroup::globalRanks() const {
  if (!options_.globalRanks.empty()) return options_.globalRanks;
  std::vector<int> ranks(static_cast<std::size_t>(options_.size));
  for (int r = 0; r < options_.size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  return ranks;
}

void ProcessGroup::registerFlightRecorder() {
  std::lock_guard<std::mutex> lock(issueMu_);
  registerFlightRecorderLocked();
}

void ProcessGroup::registerFlightRecorderLocked() {
  if (frPg_.load() != kFrUnregistered) return;
  int id = -1;
  auto& fr = FlightRecorder::instance();
  if (options_.flightRecorder && fr.enabled()) {
    FlightGroup g;
    g.name = options_.groupName;
    // torch's names: the world group's desc is "default_pg", a group made without one "undefined".
    g.desc = options_.groupName == "default" ? "default_pg" : "undefined";
    g.backend = backendName();
    g.rank = options_.rank;
    g.ranks = globalRanks();
    g.commLibVersion = commLibVersion();
    id = fr.registerGroup(g);
  }
  frPg_.store(id);
}

void ProcessGroup::recordOp(OpDesc& desc, const Buffer& in, const Buffer& out, bool started,
                            Work::Clock::time_point at) {
  if (frPg_.load(std::memory_order_relaxed) == kFrUnregistered) registerFlightRecorderLocked();
  const int pg = frPg_.load(std::memory_order_relaxed);
  if (pg < 0) return;
  FlightOp op;
  op.type = desc.type;
  op.dtype = desc.dtype;
  op.inCount = desc.type == OpType::kBarrier ? 0 : in.count;
  op.outCount = desc.type == OpType::kBarrier ? 0 : out.count;
  // As torch's: a collective carries the p2p counter so far, a p2p op the last collective's seq.
  op.collectiveSeq = desc.isPointToPoint() ? nextSeq_ - 1 : desc.seq;
  op.p2pSeq = p2pSeq_;
  op.opId = opCount_;
  op.peer = desc.isPointToPoint() ? desc.root : -1;
  op.timeout = desc.timeout;
  op.started = started;
  desc.frHandle = FlightRecorder::instance().record(pg, op, at);
}

void ProcessGroup::flightRecorderFailure() {
  const int pg = frPg_.load();
  if (pg < 0 || frFailed_.exchange(true)) return;
  FlightRecorder::instance().onTimeout(pg, heartbeatStore());
}

void ProcessGroup::unsupported(const char* what) const {
  throw BackendError(fmt::format("backend {} does not support {}.", backendName(), what));
}

bool ProcessGroup::inlineEligible(const OpDesc&) const { return false; }
bool ProcessGroup::callerMayRunToEnd(const OpDesc& desc) const { return keepsOwnTimeout(desc); }
bool ProcessGroup::keepsOwnTimeout(const OpDesc&) const { return true; }
void ProcessGroup::abortHungCall(const OpDesc&) { std::abort(); }

std::function<void()> ProcessGroup::startInline(const OpDesc& desc, const Buffer&, const Buffer&,
                                                std::chrono::steady_clock::time_point) {
  throw InternalError(fmt::format("backend {} took the fast path for {} without implementing startInline().",
                                  backendName(), desc.describe()));
}

void ProcessGroup::doAllreduce(const OpDesc&, const Buffer&, const Buffer&) { unsupported("allreduce"); }
void ProcessGroup::doBroadcast(const OpDesc&, const Buffer&, const Buffer&) { unsupported("broadcast"); }
void ProcessGroup::doReduce(const OpDesc&, const Buffer&, const Buffer&) { unsupported("reduce"); }
void ProcessGroup::doAllgather(const OpDesc&, const Buffer&, const Buffer&) { unsupported("allgather"); }
void ProcessGroup::doReduceScatter(const OpDesc&, const Buffer&, const Buffer&) {
  unsupported("reduce_scatter");
}
void ProcessGroup::doAlltoall(const OpDesc&, const Buffer&, const Buffer&) { unsupported("alltoall"); }
std::unique_ptr<ProcessGroup::PostedP2p> ProcessGroup::postPointToPoint(const OpDesc&, const Buffer&) {
  return nullptr;
}
void ProcessGroup::doSend(const OpDesc&, const Buffer&) { unsupported("send"); }
void ProcessGroup::doRecv(const OpDesc&, const Buffer&) { unsupported("recv"); }

void ProcessGroup::doBarrier(const OpDesc& desc) {
  std::int32_t one = 1;
  Buffer b{&one, 1, DType::kI32, Device{}};
  OpDesc d = desc;
  d.type = OpType::kAllreduce;
  d.dtype = DType::kI32;
  d.count = 1;
  d.op = ReduceOp::kSum;
  doAllreduce(d, b, b);
}

void ProcessGroup::checkBuffer(const char* what, const Buffer& b) const {
  if (b.count > 0 && b.data == nullptr) {
    throw ConfigError(fmt::format("{}: the {} buffer has {} elements but no memory (null pointer).",
                                  backendName(), what, b.count));
  }
  if (b.device.type != options_.device.type) {
    throw ConfigError(fmt::format("{}: the {} buffer is on {}, but this process group works on {}.",
                                  backendName(), what, deviceName(b.device), deviceName(options_.device)));
  }
}

void ProcessGroup::checkRank(const char* what, int r) const {
  if (r < 0 || r >= options_.size) {
    throw ConfigError(fmt::format("{}: {} {} is not a rank of this group (0 to {}).", backendName(), what, r,
                                  options_.size - 1));
  }
}

OpDesc ProcessGroup::makeDesc(OpType type, const Buffer& in, Timeout timeout) const {
  OpDesc d;
  d.type = type;
  d.dtype = in.dtype;
  d.count = in.count;
  d.timeout = timeout.value_or(options_.timeout);
  d.bytes = in.bytes();
  if (d.timeout.count() <= 0) {
    throw ConfigError(
        fmt::format("{}: timeout {} ms is not valid; it must be positive.", opName(type), d.timeout.count()));
  }
  return d;
}

namespace {
void requireSameType(const char* op, const Buffer& in, const Buffer& out) {
  if (in.dtype != out.dtype) {
    throw ConfigError(fmt::format("{}: input is {} but output is {}; they must be the same type.", op,
                                  dtypeName(in.dtype), dtypeName(out.dtype)));
  }
}
void requireCount(const char* op, const char* which, std::size_t got, std::size_t want, const char* rule) {
  if (got != want) {
    throw ConfigError(
        fmt::format("{}: the {} has {} elements, but must have {} ({}).", op, which, got, want, rule));
  }
}
}  // namespace

std::shared_ptr<Work> ProcessGroup::allreduce(const Buffer& in, const Buffer& out, ReduceOp op, Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("allreduce", in, out);
  requireCount("allreduce", "output", out.count, in.count, "the same as the input");
  OpDesc d = makeDesc(OpType::kAllreduce, in, t);
  d.op = op;
  d.inPlace = in.data == out.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Buffer& in, const Buffer& out, int root, Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("broadcast", in, out);
  requireCount("broadcast", "output", out.count, in.count, "the same as the input");
  checkRank("broadcast root", root);
  OpDesc d = makeDesc(OpType::kBroadcast, in, t);
  d.root = root;
  d.inPlace = in.data == out.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::reduce(const Buffer& in, const Buffer& out, int root, ReduceOp op,
                                           Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("reduce", in, out);
  requireCount("reduce", "output", out.count, in.count, "the same as the input");
  checkRank("reduce root", root);
  OpDesc d = makeDesc(OpType::kReduce, in, t);
  d.root = root;
  d.op = op;
  d.inPlace = in.data == out.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::allgather(const Buffer& in, const Buffer& out, Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("allgather", in, out);
  requireCount("allgather", "output", out.count, in.count * size(), "input count × group size");
  OpDesc d = makeDesc(OpType::kAllgather, in, t);
  d.bytes = out.bytes();
  d.inPlace = static_cast<char*>(out.data) + rank() * in.bytes() == in.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::reduceScatter(const Buffer& in, const Buffer& out, ReduceOp op,
                                                  Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("reduce_scatter", in, out);
  requireCount("reduce_scatter", "input", in.count, out.count * size(), "output count × group size");
  OpDesc d = makeDesc(OpType::kReduceScatter, out, t);
  d.op = op;
  d.bytes = in.bytes();
  d.inPlace = static_cast<char*>(in.data) + rank() * out.bytes() == out.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::alltoall(const Buffer& in, const Buffer& out, Timeout t) {
  checkBuffer("input", in);
  checkBuffer("output", out);
  requireSameType("alltoall", in, out);
  requireCount("alltoall", "output", out.count, in.count, "the same as the input");
  if (in.count % size() != 0) {
    throw ConfigError(
        fmt::format("alltoall: {} elements cannot be split evenly among {} ranks; use a multiple of {}.",
                    in.count, size(), size()));
  }
  OpDesc d = makeDesc(OpType::kAlltoall, in, t);
  d.inPlace = in.data == out.data;
  return issue(d, in, out);
}

std::shared_ptr<Work> ProcessGroup::barrier(Timeout t) {
  const Buffer none{nullptr, 0, DType::kI32, options_.device};
  OpDesc d = makeDesc(OpType::kBarrier, none, t);
  return issue(d, none, none);
}

std::shared_ptr<Work> ProcessGroup::send(const Buffer& data, int dst, int tag, Timeout t) {
  checkBuffer("send", data);
  checkRank("send destination", dst);
  if (dst == rank()) throw ConfigError(fmt::format("send: rank {} cannot send to itself.", rank()));
  OpDesc d = makeDesc(OpType::kSend, data, t);
  d.root = dst;
  d.tag = tag;
  return issue(d, data, data);
}

std::shared_ptr<Work> ProcessGroup::recv(const Buffer& data, int src, int tag, Timeout t) {
  checkBuffer("recv", data);
  checkRank("recv source", src);
  if (src == rank()) throw ConfigError(fmt::format("recv: rank {} cannot receive from itself.", rank()));
  OpDesc d = makeDesc(OpType::kRecv, data, t);
  d.root = src;
  d.tag = tag;
  return issue(d, data, data);
}

void ProcessGroup::dispatch(const OpDesc& d, const Buffer& in, const Buffer& out) {
  switch (d.type) {
    case OpType::kAllreduce:
      return doAllreduce(d, in, out);
    case OpType::kBroadcast:
      return doBroadcast(d, in, out);
    case OpType::kReduce:
      return doReduce(d, in, out);
    case OpType::kAllgather:
      return doAllgather(d, in, out);
    case OpType::kReduceScatter:
      return doReduceScatter(d, in, out);
    case OpType::kAlltoall:
      return doAlltoall(d, in, out);
    case OpType::kBarrier:
      return doBarrier(d);
    case OpType::kSend:
      return doSend(d, in);
    case OpType::kRecv:
      return doRecv(d, in);
  }
}

std::shared_ptr<Work> ProcessGroup::issue(OpDesc desc, const Buffer& in, const Buffer& out) {
  if (!supports(desc.type, desc.dtype, desc.op)) {
    bool reducing = desc.type == OpType::kAllreduce || desc.type == OpType::kReduce ||
                    desc.type == OpType::kReduceScatter;
    throw BackendError(fmt::format("backend {} does not support {} on {}{}.", backendName(),
                                   opName(desc.type), dtypeName(desc.dtype),
                                   reducing ? fmt::format(" with op {}", reduceOpName(desc.op)) : ""));
  }
  if (broken_) throw unusableError();
  std::unique_lock<std::mutex> lock(issueMu_);
  desc.seq = desc.isPointToPoint() ? ++p2pSeq_ : nextSeq_++;
  ++opCount_;
  if (desc.isPointToPoint()) {
    // Posted now where the backend can: never queued behind the group's collectives or other p2p ops.
    std::unique_ptr<PostedP2p> posted;
    std::exception_ptr postError;
    try {
      posted = postPointToPoint(desc, in);
    } catch (const ConfigError&) {
      // A send or recv this group cannot make (shm across hosts): the caller's mistake, raised at once
      // as the argument checks are, and never numbered.
      --p2pSeq_;
      --opCount_;
      throw;
    } catch (...) {
      postError = std::current_exception();
    }
    if (posted || postError) {
      const auto issued = Work::Clock::now();
      recordOp(desc, in, out, /*started=*/true, issued);
      lock.unlock();
      if (postError) return std::make_shared<Work>(desc, issued, Work::Clock::now(), translated(desc, postError));
      return issuePosted(desc, std::move(posted), issued);
    }
    // Not posted (the backend has no such path): the op takes the ways below.
  }
  // On the caller's thread the op's one clock read serves its Work and its flight recorder entry.
  if (callerRunsOps_ && callerMayRunToEnd(desc) && claimInline()) {
    const auto issued = Work::Clock::now();
    recordOp(desc, in, out, /*started=*/true, issued);
    lock.unlock();
    return runOnCaller(desc, in, out, issued);
  }
  if (fastPathClass(desc) && (claimInline() || claimInlineAfterSmall(desc, Work::Clock::now()))) {
    const auto issued = Work::Clock::now();
    recordOp(desc, in, out, /*started=*/true, issued);
    // Later ops (other threads) queue behind this one: the worker waits for running_ to clear.
    lock.unlock();
    if (broken_) {
      // The ops this one waited for timed out meanwhile.
      releaseCaller();
      if (desc.frHandle) detail::flightFinished(desc.frHandle, false, Work::Clock::now());
      throw unusableError();
    }
    return runInline(desc, in, out, issued);
  }
  recordOp(desc, in, out, /*started=*/false, Work::Clock::now());
  // The body gets the numbered desc, so backends see the op's seq (tags, messages). It is built only
  // here: the fast path has no use for it, and it costs an allocation.
  return enqueue(desc, [this, desc, in, out] { dispatch(desc, in, out); });
}

std::shared_ptr<Work> ProcessGroup::makeWork(const OpDesc& desc) {
  auto work = std::make_shared<Work>(desc);
  work->setTimeoutHandler(timeoutHandler_);
  work->setWaitSpin(options_.waitSpin);
  return work;
}

std::shared_ptr<Work> ProcessGroup::makeWork(const OpDesc& desc, Work::Clock::time_point issued) {
  auto work = std::make_shared<Work>(desc, issued);
  work->setTimeoutHandler(timeoutHandler_);
  work->setWaitSpin(options_.waitSpin);
  return work;
}

void ProcessGroup::startWorkerLocked() {
  if (!workerStarted_) {
    workerStarted_ = true;
    worker_ = std::thread([this] { workerLoop(); });
  }
}

std::shared_ptr<Work> ProcessGroup::enqueue(OpDesc desc, std::function<void()> body) {
  auto work = makeWork(desc);
  const bool small = fastPathClass(desc);
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    startWorkerLocked();
    queue_.push_back(Task{work, [this, desc, body = std::move(body)] { runOp(desc, body); }, false, small});
    if (!small) ++bigPending_;
  }
  queueCv_.notify_one();
  return work;
}

bool ProcessGroup::waitIdle(Duration limit) {
  const auto until = Work::Clock::now() + limit;
  {
    std::unique_lock<std::mutex> lock(queueMu_);
    if (!idleCv_.wait_until(lock, until, [&] { return workerExited_ || (!running_ && queue_.empty()); })) {
      return false;
    }
  }
  std::unique_lock<std::mutex> lock(p2pMu_);
  return p2pIdleCv_.wait_until(lock, until, [&] { return p2pBusy_ == 0; });
}

std::shared_ptr<Work> ProcessGroup::issuePosted(const OpDesc& desc, std::unique_ptr<PostedP2p> posted,
                                                Work::Clock::time_point issued) {
  // A prompt peer (an eager send, a message already there) completes it here, without a handoff.
  std::exception_ptr error;
  bool done = false;
  try {
    guarded(desc, [&] { done = posted->completeBriefly(); });
  } catch (...) {
    error = std::current_exception();
    done = true;
  }
  if (done) return std::make_shared<Work>(desc, issued, Work::Clock::now(), error);
  auto work = makeWork(desc, issued);
  work->markStarted(issued);
  {
    std::lock_guard<std::mutex> lock(p2pMu_);
    if (!p2pStopping_) {
      ++p2pBusy_;
      p2pQueue_.push_back(P2pTask{work, std::move(posted)});
      // A thread per pending op: one that waits for a late peer must not hold up the others. A woken
      // thread counts as waiting until it runs, so a second post before then starts another.
      if (p2pQueue_.size() > static_cast<std::size_t>(p2pWaiting_)) {
        p2pThreads_.emplace_back([this] { p2pLoop(); });
      } else {
        p2pCv_.notify_one();
      }
      return work;
    }
  }
  posted->abort();
  work->markCompleted(std::make_exception_ptr(BackendError(
      fmt::format("{} was issued while the {} process group '{}' was being destroyed; it did not run.",
                  desc.describe(), backendName(), options_.groupName))));
  return work;
}

void ProcessGroup::p2pLoop() {
  // The last op this thread completed, destroyed when it takes the next (or exits): a transport may
  // still hold on to a posted op's state for a moment after waking its waiter (gloo: see kept_ there).
  std::unique_ptr<PostedP2p> kept;
  std::unique_lock<std::mutex> lock(p2pMu_);
  while (true) {
    while (p2pQueue_.empty() && !p2pStopping_) {
      ++p2pWaiting_;
      p2pCv_.wait(lock);
      --p2pWaiting_;
    }
    if (p2pQueue_.empty()) break;  // stopping
    P2pTask task = std::move(p2pQueue_.front());
    p2pQueue_.pop_front();
    PostedP2p* op = task.posted.get();
    p2pRunning_.push_back(op);
    lock.unlock();
    kept.reset();
    const OpDesc& desc = task.work->desc();
    std::exception_ptr error;
    try {
      op->complete(task.work->deadline());
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    p2pRunning_.erase(std::find(p2pRunning_.begin(), p2pRunning_.end(), op));
    const bool stopping = p2pStopping_;
    lock.unlock();
    if (error && stopping) {
      error = std::make_exception_ptr(pendingAtShutdown(desc));
    } else if (error) {
      error = translated(desc, error);
    }
    kept = std::move(task.posted);
    lock.lock();
    if (--p2pBusy_ == 0) p2pIdleCv_.notify_all();
    lock.unlock();
    task.work->markCompleted(error);
    lock.lock();
  }
}

std::exception_ptr ProcessGroup::translated(const OpDesc& desc, std::exception_ptr error) {
  try {
    rethrowTranslated(desc, std::move(error));
  } catch (...) {
    return std::current_exception();
  }
}

BackendError ProcessGroup::pendingAtShutdown(const OpDesc& desc) const {
  return BackendError(
      fmt::format("{} was still pending on rank {} when its {} process group '{}' was destroyed; destroy a "
                  "group only after every op of it completed (wait() on each send and recv).",
                  desc.describe(), rank(), backendName(), options_.groupName));
}

void ProcessGroup::stopP2p() {
  std::deque<P2pTask> dropped;
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(p2pMu_);
    p2pStopping_ = true;
    dropped.swap(p2pQueue_);
    p2pBusy_ -= static_cast<int>(dropped.size());
    for (PostedP2p* op : p2pRunning_) op->abort();
    threads.swap(p2pThreads_);
  }
  p2pCv_.notify_all();
  for (auto& task : dropped) {
    task.posted->abort();
    task.work->markCompleted(std::make_exception_ptr(pendingAtShutdown(task.work->desc())));
  }
  for (auto& t : threads) t.join();
}

bool ProcessGroup::claimInline() {
  std::lock_guard<std::mutex> lock(queueMu_);
  if (running_ || !queue_.empty() || stopping_) return false;
  running_ = true;
  return true;
}

bool ProcessGroup::claimInlineAfterSmall(const OpDesc& desc, Work::Clock::time_point issued) {
  // A small op found the group busy. When what runs or waits is only small ops, they are the rest of
  // one whose peer was late (its caller's budget ran out) and those queued behind it: queueing this
  // one too would hand every later op of a back-to-back loop to the worker, each paying a handoff
  // and a wake-up (measured: 2 ranks, 8 B shm allreduce, 3 million ops, the worker woke ~3,000
  // times and the mean time per op was 8x the median). Waiting here for them to finish costs one
  // wake-up, after which the ops are back on the caller's thread. A larger op ahead (DDP's bucket
  // allreduce) is never waited for here: the caller's thread must not block behind it. Nor is a
  // rest that stays stuck: past options().smallOpDrain (2 ms, the shm backend's budget for a small
  // op on the caller's thread, so issuing blocks no longer than the fast path itself may; the caller
  // may be about to do what unblocks the peers) this op queues behind it as before.
  std::unique_lock<std::mutex> lock(queueMu_);
  auto idle = [&] { return stopping_ || (!running_ && queue_.empty()); };
  if (bigPending_ > 0 || stopping_) return false;
  const auto until = issued + std::min<Work::Clock::duration>(desc.timeout, options_.smallOpDrain);
  if (!idleCv_.wait_until(lock, until, idle)) return false;
  if (stopping_ || running_ || !queue_.empty()) return false;
  running_ = true;
  return true;
}

std::shared_ptr<Work> ProcessGroup::runInline(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                              Work::Clock::time_point issued) {
  const bool collective = !desc.isPointToPoint();
  std::function<void()> rest;
  std::exception_ptr error;
  if (collective) liveness_->entered(desc.seq);
  try {
    guarded(desc, [&] { rest = startInline(desc, in, out, issued); });
  } catch (...) {
    error = std::current_exception();
  }
  if (error || !rest) {
    if (!error && collective) liveness_->completed(desc.seq);
    // Born completed: no lock to start and complete it (a fair share of an 8-byte op).
    auto work = std::make_shared<Work>(desc, issued, Work::Clock::now(), error);
    releaseCaller();
    return work;
  }
  // Not done within the backend's budget: the worker finishes it before anything issued later.
  auto work = makeWork(desc, issued);
  work->markStarted(issued);
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    startWorkerLocked();
    queue_.push_front(Task{work,
                           [this, desc, collective, rest = std::move(rest)] {
                             guarded(desc, rest);
                             if (collective) liveness_->completed(desc.seq);
                           },
                           /*started=*/true, /*small=*/true});
    running_ = false;
  }
  queueCv_.notify_one();
  return work;
}

std::shared_ptr<Work> ProcessGroup::runOnCaller(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                                Work::Clock::time_point issued) {
  std::exception_ptr error;
  // A call that cannot time out by itself is watched here as on the worker (a wake of the watchdog
  // only when this deadline comes before the one it sleeps until: not once per op); the others get
  // a Work born completed.
  if (keepsOwnTimeout(desc)) {
    try {
      runOpWith(desc, [&] { dispatch(desc, in, out); });
    } catch (...) {
      error = std::current_exception();
    }
    auto work = std::make_shared<Work>(desc, issued, Work::Clock::now(), error);
    releaseCaller();
    return work;
  }
  auto work = makeWork(desc, issued);
  work->markStarted(issued);
  watch(work, /*onCaller=*/true);
  try {
    runOpWith(desc, [&] { dispatch(desc, in, out); });
  } catch (...) {
    error = std::current_exception();
  }
  watch(nullptr);
  work->markCompleted(error);
  releaseCaller();
  return work;
}

void ProcessGroup::releaseCaller() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    running_ = false;
    wake = !queue_.empty();
  }
  if (wake) queueCv_.notify_one();
  idleCv_.notify_all();
}

bool ProcessGroup::onWorkerThread() const { return tlsWorkerOf == this; }

void ProcessGroup::workerLoop() {
  tlsWorkerOf = this;
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      queueCv_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) {
        workerExited_ = true;
        queueCv_.notify_all();
        idleCv_.notify_all();
        return;
      }
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    if (!task.started) task.work->markStarted();
    const bool watched = !keepsOwnTimeout(task.work->desc());
    if (watched) watch(task.work);
    std::exception_ptr error;
    try {
      task.body();
    } catch (...) {
      error = std::current_exception();
    }
    if (watched) watch(nullptr);
    // Cleared before the Work completes: a caller that returns from wait() and issues the next op
    // must find the group idle, or that op would miss the fast path.
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      running_ = false;
      if (!task.small) --bigPending_;
      idle = queue_.empty();
    }
    // Only an idle group is waited for (waitIdle, claimInlineAfterSmall): no wake per queued op.
    if (idle) idleCv_.notify_all();
    task.work->markCompleted(error);
  }
}

void ProcessGroup::failQueued() {
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    dropped.swap(queue_);
  }
  for (auto& task : dropped) task.work->markCompleted(std::make_exception_ptr(unusableError()));
}

BackendError ProcessGroup::unusableError() const {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(brokenMu_);
    reason = brokenReason_;
  }
  return BackendError(
      fmt::format("the {} process group '{}' is unusable: {} timed out earlier, so the ranks are out "
                  "of step. Restart the job (see the first error for the ranks that were missing).",
                  backendName(), options_.groupName, reason));
}

void ProcessGroup::rethrowTranslated(const OpDesc& desc, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    std::rethrow_exception(diagnoseTimeout(desc, e.what()));
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    if (std::strstr(e.what(), "collective mismatch") != nullptr) throw;
    // A peer that vanished mid-op (connection reset) is named from the heartbeats where possible:
    // on one host the backend's own message can only give an address shared by every rank.
    flightRecorderFailure();
    publishFailure();
    throw BackendError(fmt::format("{} {} failed on rank {}: {}{}", backendName(), desc.describe(), rank(),
                                   sentence(e.what()), missingRanks(desc)));
  } catch (const std::exception& e) {
    flightRecorderFailure();
    publishFailure();
    throw BackendError(
        fmt::format("{} {} failed on rank {}: {}", backendName(), desc.describe(), rank(), e.what()));
  }
}

void ProcessGroup::detailCheck(const OpDesc& desc) {
  auto& s = store();
  std::string fp = desc.fingerprint();
  s.set(key(fmt::format("detail/{}/{}", desc.seq, rank())), store::toBytes(fp), desc.timeout);
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(key(fmt::format("detail/{}/{}", desc.seq, r)));
  try {
    s.wait(keys, desc.timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < size(); ++r) {
      if (!s.check({keys[r]}, std::chrono::seconds(5))) missing.push_back(r);
    }
    throw TimeoutError(fmt::format("DETAIL check: ranks {} did not issue op #{} within {} ms",
                                   fmt::join(missing, ", "), desc.seq, desc.timeout.count()));
  }
  auto values = s.multiGet(keys, desc.timeout);
  std::map<std::string, std::vector<int>> groups;
  for (int r = 0; r < size(); ++r) groups[store::toString(values[r])].push_back(r);
  if (groups.size() > 1) {
    // Rank 0 usually hosts the store: before it raises (and its process may exit), every rank gets
    // a bounded moment to read the fingerprints, so that all of them report the mismatch.
    try {
      if (s.add(key(fmt::format("detail/{}/seen", desc.seq)), 1, desc.timeout) == size()) {
        s.set(key(fmt::format("detail/{}/allseen", desc.seq)), store::toBytes("1"), desc.timeout);
      }
      if (rank() == 0) {
        s.wait({key(fmt::format("detail/{}/allseen", desc.seq))},
               std::min<Duration>(desc.timeout, Duration(10000)));
      }
    } catch (const Error&) {
      // Best effort only: the mismatch itself is what must be reported.
    }
    std::vector<std::string> parts;
    for (const auto& [f, ranks] : groups) {
      parts.push_back(
          fmt::format("{} {} issued {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "), f));
    }
    throw BackendError(
        fmt::format("collective mismatch at op #{} of group '{}' (DS_DISTRIBUTED_DEBUG=DETAIL): {}. Every "
                    "rank must issue the same collectives, in the same order, with the same type, "
                    "count and root.",
                    desc.seq, options_.groupName, fmt::join(parts, "; ")));
  }
  // Every rank has set this op's key, so all are past reading the previous op's keys.
  if (desc.seq > 1) s.deleteKey(key(fmt::format("detail/{}/{}", desc.seq - 1, rank())), desc.timeout);
}

std::exception_ptr ProcessGroup::diagnoseTimeout(const OpDesc& desc, const std::string& cause) {
  {
    std::lock_guard<std::mutex> lock(brokenMu_);
    if (!broken_.exchange(true)) brokenReason_ = desc.describe();
  }
  // Before the diagnosis (seconds): the dump shows the ops as the timeout found them.
  flightRecorderFailure();
  return liveness_->diagnoseTimeout(desc, backendName(), cause);
}

std::size_t inlineMaxBytesFromEnv(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultInlineMaxBytes;
  try {
    return env::parseBytesVar("DS_PG_INLINE_MAX_BYTES", value);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("{} 0 turns the fast path off (unset: {}).", e.what(), kDefaultInlineMaxBytes));
  }
}

std::chrono::microseconds waitSpinFromEnv(const char* value) {
  if (value == nullptr || *value == '\0') return ProcessGroupOptions::kDefaultWaitSpin;
  return std::chrono::microseconds(env::parseIntVar("DS_PG_WAIT_SPIN_US", value, 0, 1000000,
                                                    "0 to 1000000 microseconds: how long a wait on an op "
                                                    "yields the CPU before it sleeps (0: sleep at once)"));
}

bool detailDebugFromEnv(const char* value) {
  if (value == nullptr) return false;
  std::string v(value);
  if (v == "DETAIL") return true;
  if (v.empty() || v == "OFF" || v == "INFO") return false;
  throw ConfigError(fmt::format("DS_DISTRIBUTED_DEBUG='{}' is not valid; use OFF, INFO or DETAIL.", v));
}

}  // namespace ds::comm
