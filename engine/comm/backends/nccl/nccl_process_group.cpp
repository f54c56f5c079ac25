#include "engine/comm/backends/nccl/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "engine/comm/backends/nccl/nccl_api.h"
#include "engine/comm/backends/nccl/nccl_version.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/store/store.h"

#if NCCL_VERSION_CODE < 21400
#error "the nccl backend needs NCCL 2.14 or newer (non-blocking communicators); rebuild with a newer CUDA/NCCL"
#endif

namespace ds::comm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kNcclAdvice =
    "Rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,COLL,NET narrows it) to see NCCL's reason, and run dsdiag "
    "on this node to check the GPUs, driver, NCCL version and network.";
constexpr const char* kCudaAdvice =
    "Check the GPU with nvidia-smi (Xid errors in dmesg point to hardware or driver faults) and run dsdiag on this "
    "node.";
// Teardown waits at most this long for queued ops and for ncclCommFinalize before it aborts.
constexpr std::chrono::milliseconds kTeardownGrace{10000};

std::string cudaText(cudaError_t e) { return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e)); }

std::string lastErrorText(ncclComm_t comm) {
  const char* s = ncclApi().ncclGetLastError(comm);
  return s != nullptr && *s != '\0' ? std::string(s) : std::string("(none)");
}

ncclDataType_t toNccl(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
    case DType::kI8: return ncclInt8;
  }
  throw InternalError(fmt::format("nccl: unknown dtype {}", static_cast<int>(t)));
}

ncclRedOp_t toNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;  // native since NCCL 2.10: integers truncate, floats divide
  }
  throw InternalError(fmt::format("nccl: unknown reduce op {}", static_cast<int>(op)));
}

// Pauses between polls: a few microseconds at first, growing to 1 ms, so that short ops are seen
// quickly and long waits cost no CPU.
class Backoff {
 public:
  void pause() {
    std::this_thread::sleep_for(delay_);
    delay_ = std::min(delay_ * 2, std::chrono::microseconds(1000));
  }

 private:
  std::chrono::microseconds delay_{2};
};

// Makes `device` current for the scope and gives the caller's device back afterwards (c10d's
// device guard), so that an op issued from any thread does not change that thread's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
    error_ = cudaSetDevice(device);
    if (error_ == cudaSuccess && current >= 0) previous_ = current;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  cudaError_t error() const { return error_; }

 private:
  int previous_ = -1;
  cudaError_t error_ = cudaSuccess;
};

// The communicator, shared by the group and its Works (a Work may outlive its group). `mu` guards
// `comm`: every NCCL call on it, the abort and the teardown hold it, so a Work never queries a
// communicator that another thread is destroying.
struct CommState {
  std::mutex mu;
  ncclComm_t comm = nullptr;  // null once aborted or destroyed
  std::string goneReason;     // why comm is null
  int rank = 0;
  int size = 1;
  int device = 0;
  std::string groupName;

  // Guards `groupAlive` while a Work's timeout handler uses the group (diagnoseTimeout).
  std::mutex groupMu;
  bool groupAlive = true;

  std::string where() const {
    return fmt::format("rank {} of {} (cuda:{}, group '{}')", rank, size, device, groupName);
  }
  // Caller holds mu. ncclCommAbort ends whatever the communicator still runs on the GPU; it is
  // local and does not wait for peers.
  void abortLocked(const std::string& reason) {
    if (comm == nullptr) return;
    DeviceGuard guard(device);
    ncclResult_t r = ncclApi().ncclCommAbort(comm);
    if (r != ncclSuccess && r != ncclInProgress) {
      log::warn("nccl: ncclCommAbort on {} returned {}", where(), ncclApi().ncclGetErrorString(r));
    }
    comm = nullptr;
    goneReason = fmt::format("its NCCL communicator was aborted because {}", reason);
  }
  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    abortLocked(reason);
  }
  // Caller holds mu and comm is set: ncclSuccess, ncclInProgress or the communicator's error.
  ncclResult_t asyncErrorLocked() {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclApi().ncclCommGetAsyncError(comm, &state);
    return r != ncclSuccess ? r : state;
  }
  std::string goneMessage() const {
    return fmt::format("the nccl process group '{}' on {} is unusable: {}. Restart the job once the first error's "
                       "cause is fixed.",
                       groupName, where(), goneReason);
  }
};

// An NCCL error that leaves the communicator unusable (as opposed to a bad argument of one call).
bool fatalForComm(ncclResult_t r) { return r != ncclInvalidArgument && r != ncclInvalidUsage; }

void cudaCheck(cudaError_t e, const CommState& s, const std::string& what) {
  if (e != cudaSuccess) {
    throw BackendError(fmt::format("{} failed on {}: {}. {}", what, s.where(), cudaText(e), kCudaAdvice));
  }
}

// The Work of one nccl op: done when its end event is, failed when the communicator reports an
// asynchronous error or the op outlives its timeout (both abort the communicator).
class NcclWork final : public Work {
 public:
  NcclWork(OpDesc desc, std::shared_ptr<CommState> state) : Work(std::move(desc)), state_(std::move(state)) {}
  ~NcclWork() override {
    DeviceGuard guard(state_->device);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (end_ != nullptr) cudaEventDestroy(end_);
  }

  // Called by enqueue() on the issuing thread with the group's device current.
  void createEvents() {
    cudaCheck(cudaEventCreate(&start_), *state_, fmt::format("cudaEventCreate for {}", desc_.describe()));
    cudaCheck(cudaEventCreate(&end_), *state_, fmt::format("cudaEventCreate for {}", desc_.describe()));
  }
  cudaEvent_t startEvent() const { return start_; }
  cudaEvent_t endEvent() const { return end_; }
  void markLaunched() {
    std::lock_guard<std::mutex> lock(mu_);
    launched_ = true;
    started_ = Clock::now();
  }

  // Builds the error of a timed-out op from its cause (the group's diagnoseTimeout); called once.
  using TimeoutHandler = std::function<std::exception_ptr(const OpDesc&, const std::string& cause)>;
  void setNcclTimeoutHandler(TimeoutHandler h) {
    std::lock_guard<std::mutex> lock(mu_);
    timeoutHandler_ = std::move(h);
  }

  bool isCompleted() override { return poll(); }
  bool completedIn(std::chrono::nanoseconds& took) override {
    if (!poll()) return false;
    wait();  // rethrows its error
    took = duration();
    return true;
  }

  void wait(Timeout timeout = {}) override {
    const bool ownTimeout = !timeout || *timeout >= desc_.timeout;
    const auto deadline = ownTimeout ? issued_ + desc_.timeout : Clock::now() + *timeout;
    Backoff backoff;
    while (!poll()) {
      if (Clock::now() >= deadline) {
        if (!ownTimeout) {
          throw TimeoutError(fmt::format("wait() gave up after {} ms on {}, which is still running on the GPU (its "
                                         "own timeout is {} ms).",
                                         timeout->count(), desc_.describe(), desc_.timeout.count()));
        }
        timedOut();
        break;
      }
      backoff.pause();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }

  std::chrono::nanoseconds duration() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_ || error_ || !launched_) return std::chrono::nanoseconds(0);
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, end_) != cudaSuccess) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(ms) * 1e6));
  }

 private:
  // One look at the op; true once it finished (successfully or not).
  bool poll() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return true;
      if (!launched_) return false;
    }
    cudaError_t e = cudaEventQuery(end_);
    if (e == cudaSuccess) {
      markCompleted();
      return true;
    }
    if (e != cudaErrorNotReady) {
      markCompleted(std::make_exception_ptr(
          BackendError(fmt::format("nccl {} failed on {}: CUDA reported {} while it ran. {}", desc_.describe(),
                                   state_->where(), cudaText(e), kCudaAdvice))));
      return true;
    }
    // Still running: has NCCL failed underneath it (a peer died, a network error)?
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->comm == nullptr) {
      markCompleted(std::make_exception_ptr(BackendError(
          fmt::format("nccl {} cannot finish: {}", desc_.describe(), state_->goneMessage()))));
      return true;
    }
    ncclResult_t a = state_->asyncErrorLocked();
    if (a == ncclSuccess || a == ncclInProgress) return false;
    std::string last = lastErrorText(state_->comm);
    state_->abortLocked(fmt::format("{} hit an asynchronous NCCL error ({})", desc_.describe(), ncclApi().ncclGetErrorString(a)));
    markCompleted(std::make_exception_ptr(BackendError(
        fmt::format("nccl {} failed on {}: NCCL reported an asynchronous error: {} (NCCL last error: {}). The "
                    "communicator was aborted and the group is unusable. {}",
                    desc_.describe(), state_->where(), ncclApi().ncclGetErrorString(a), last, kNcclAdvice))));
    return true;
  }

  // The op's own timeout ran out: abort the communicator (which ends its kernels), then let the
  // group name the ranks that never arrived.
  void timedOut() {
    std::string last;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->comm != nullptr) last = lastErrorText(state_->comm);
      state_->abortLocked(fmt::format("{} timed out after {} ms", desc_.describe(), desc_.timeout.count()));
    }
    TimeoutHandler handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      handler = std::move(timeoutHandler_);
      timeoutHandler_ = nullptr;
    }
    std::string cause = fmt::format(
        "it did not finish on the GPU within {} ms (NCCL last error: {}); the NCCL communicator was aborted. {}",
        desc_.timeout.count(), last.empty() ? "(none)" : last, kNcclAdvice);
    std::exception_ptr err =
        handler ? handler(desc_, cause)
                : std::make_exception_ptr(
                      TimeoutError(fmt::format("nccl {} timed out on {}: {}", desc_.describe(), state_->where(), cause)));
    markCompleted(err);
  }

  std::shared_ptr<CommState> state_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_ = nullptr;
  bool launched_ = false;  // guarded by mu_; the end event is recorded
  TimeoutHandler timeoutHandler_;  // guarded by mu_
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(const ProcessGroupOptions& options);
  ~NcclProcessGroup() override;

  std::string backendName() const override { return "nccl"; }
  bool ordersAfterDeviceWork() const override { return true; }
  // "2.23.4", as torch's dumps give it (the library loaded, which this group opened).
  std::string commLibVersion() const override {
    const NcclVersions v = ncclVersions(false);
    return v.loaded && v.runtimeError.empty() ? v.runtime.str() : "";
  }

 protected:
  std::shared_ptr<Work> enqueue(OpDesc desc, std::function<void()> body) override;
  void doAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doBroadcast(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doReduce(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doAllgather(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doReduceScatter(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doAlltoall(const OpDesc& d, const Buffer& in, const Buffer& out) override;
  void doBarrier(const OpDesc& d) override;
  void doSend(const OpDesc& d, const Buffer& data) override;
  void doRecv(const OpDesc& d, const Buffer& data) override;

 private:
  void init();
  ncclUniqueId exchangeUniqueId();
  // Frees the stream, scratch memory and communicator. Waits (bounded) for queued ops when
  // `graceful`, else aborts at once. Never throws.
  void release(bool graceful) noexcept;
  // Runs `fn` (NCCL calls on the communicator) under the state lock and waits, bounded by the op's
  // timeout, until the non-blocking communicator has put the work on the stream.
  void launch(const OpDesc& d, const char* call, const std::function<ncclResult_t(ncclComm_t)>& fn);
  // Caller holds state_->mu. Polls until the communicator is no longer ncclInProgress.
  ncclResult_t settleLocked(Clock::time_point deadline, bool& timedOut);

  std::shared_ptr<CommState> state_ = std::make_shared<CommState>();
  cudaStream_t stream_ = nullptr;
  // Recorded on the device's default stream at each issue and waited for by stream_ (see
  // ordersAfterDeviceWork): the wait takes the event's state when it is called, so one event serves
  // every op, issued one at a time under orderMu_.
  cudaEvent_t issued_ = nullptr;
  std::mutex orderMu_;
  void* scratch_ = nullptr;  // one int32 on the device, for barrier
};

NcclProcessGroup::NcclProcessGroup(const ProcessGroupOptions& options) : ProcessGroup(options) {
  state_->rank = options.rank;
  state_->size = options.size;
  state_->device = options.device.index;
  state_->groupName = options.groupName;
  try {
    init();
  } catch (...) {
    release(false);
    shutdown();
    throw;
  }
}

NcclProcessGroup::~NcclProcessGroup() {
  shutdown();
  {
    std::lock_guard<std::mutex> lock(state_->groupMu);
    state_->groupAlive = false;
  }
  release(true);
}

void NcclProcessGroup::init() {
  const auto& o = options();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    throw BackendError(fmt::format(
        "the nccl backend needs a CUDA GPU, but {} on rank {}. Check nvidia-smi, the driver and "
        "CUDA_VISIBLE_DEVICES, or use the gloo backend on CPU; dsdiag reports what is missing.",
        e != cudaSuccess ? fmt::format("CUDA reports no usable device: {}", cudaText(e))
                         : std::string("CUDA sees 0 devices"),
        o.rank));
  }
  if (o.device.index < 0 || o.device.index >= count) {
    throw ConfigError(fmt::format("nccl: rank {} was given cuda:{}, but only {} CUDA device(s) are visible (0 to {}). "
                                  "Start at most {} ranks per node, or fix LOCAL_RANK / CUDA_VISIBLE_DEVICES.",
                                  o.rank, o.device.index, count, count - 1, count));
  }
  DeviceGuard guard(o.device.index);
  cudaCheck(guard.error(), *state_, fmt::format("cudaSetDevice({})", o.device.index));
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), *state_, "cudaStreamCreateWithFlags");
  cudaCheck(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming), *state_, "cudaEventCreateWithFlags");
  cudaCheck(cudaMalloc(&scratch_, 16), *state_, "cudaMalloc of the barrier scratch");
  cudaCheck(cudaMemset(scratch_, 0, 16), *state_, "cudaMemset of the barrier scratch");

  ncclUniqueId id = exchangeUniqueId();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and abort can then be bounded by our timeout
  std::lock_guard<std::mutex> lock(state_->mu);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclApi().ncclCommInitRankConfig(&comm, o.size, id, o.rank, &config);
  state_->comm = comm;
  bool timedOut = false;
  if (r == ncclInProgress) r = settleLocked(Clock::now() + o.timeout, timedOut);
  if (timedOut) {
    std::string last = lastErrorText(comm);
    state_->abortLocked("its init timed out");
    throw TimeoutError(fmt::format(
        "NCCL communicator init of group '{}' did not finish within {} ms on {} (NCCL last error: {}). Every rank of "
        "the group must create it at the same time: some rank did not get here (it died, is stuck earlier, or runs a "
        "different program), or this node cannot reach the others over the network NCCL chose. {}",
        o.groupName, o.timeout.count(), state_->where(), last, kNcclAdvice));
  }
  if (r != ncclSuccess) {
    std::string last = lastErrorText(comm);
    if (state_->comm != nullptr) state_->abortLocked("its init failed");
    throw BackendError(fmt::format("ncclCommInitRankConfig failed on {} ({} ranks): {} (NCCL last error: {}). {}",
                                   state_->where(), o.size, ncclApi().ncclGetErrorString(r), last, kNcclAdvice));
  }
  log::debug("nccl: group '{}' ready on {}", o.groupName, state_->where());
}

ncclUniqueId NcclProcessGroup::exchangeUniqueId() {
  const auto& o = options();
  const std::string key = fmt::format("pg/{}/nccl/uid", o.groupName);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (o.rank == 0) {
    ncclResult_t r = ncclApi().ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      throw BackendError(fmt::format("ncclGetUniqueId failed on {}: {} (NCCL last error: {}). {}", state_->where(),
                                     ncclApi().ncclGetErrorString(r), lastErrorText(nullptr), kNcclAdvice));
    }
    store::Bytes bytes(reinterpret_cast<const std::uint8_t*>(&id), reinterpret_cast<const std::uint8_t*>(&id) + sizeof(id));
    store().set(key, bytes, o.timeout);
    return id;
  }
  store::Bytes bytes;
  try {
    bytes = store().get(key, o.timeout);
  } catch (const TimeoutError& e) {
    throw TimeoutError(fmt::format("rank {} waited {} ms for rank 0's NCCL unique id (store key '{}') and it never "
                                   "came: rank 0 did not create the nccl group '{}' (it died, is stuck earlier, or "
                                   "uses another backend or group name). Store: {}",
                                   o.rank, o.timeout.count(), key, o.groupName, e.what()));
  }
  if (bytes.size() != sizeof(id)) {
    throw ProtocolError(fmt::format("the NCCL unique id under store key '{}' has {} bytes, not {}: another program "
                                    "(or another dsperf version) wrote it. Use a fresh store / port for this job.",
                                    key, bytes.size(), sizeof(id)));
  }
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

ncclResult_t NcclProcessGroup::settleLocked(Clock::time_point deadline, bool& timedOut) {
  Backoff backoff;
  while (true) {
    ncclResult_t r = state_->asyncErrorLocked();
    if (r != ncclInProgress) return r;
    if (Clock::now() >= deadline) {
      timedOut = true;
      return ncclInProgress;
    }
    backoff.pause();
  }
}

void NcclProcessGroup::release(bool graceful) noexcept {
  DeviceGuard guard(state_->device);
  try {
    bool drained = false;
    if (graceful && stream_ != nullptr) {
      // Let queued ops finish, so that Works still held see their results.
      auto deadline = Clock::now() + std::min<Duration>(options().timeout, kTeardownGrace);
      Backoff backoff;
      while (true) {
        cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaSuccess) {
          drained = true;
          break;
        }
        if (e != cudaErrorNotReady || Clock::now() >= deadline) break;
        backoff.pause();
      }
    }
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->comm != nullptr) {
        bool destroyed = false;
        if (drained && state_->asyncErrorLocked() == ncclSuccess) {
          ncclResult_t r = ncclApi().ncclCommFinalize(state_->comm);
          bool timedOut = false;
          if (r == ncclInProgress) r = settleLocked(Clock::now() + kTeardownGrace, timedOut);
          if (r == ncclSuccess) {
            // After a successful finalize, destroy is local; the handle is gone whatever it returns.
            ncclResult_t d = ncclApi().ncclCommDestroy(state_->comm);
            if (d != ncclSuccess) log::warn("nccl: ncclCommDestroy on {} returned {}", state_->where(), ncclApi().ncclGetErrorString(d));
            state_->comm = nullptr;
            state_->goneReason = "the process group was destroyed";
            destroyed = true;
          }
        }
        if (!destroyed) state_->abortLocked("the process group was destroyed while ops were still running");
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (issued_ != nullptr) cudaEventDestroy(issued_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  } catch (const std::exception& e) {
    log::warn("nccl: teardown of group '{}' failed: {}", state_->groupName, e.what());
  }
  scratch_ = nullptr;
  stream_ = nullptr;
  issued_ = nullptr;
}

std::shared_ptr<Work> NcclProcessGroup::enqueue(OpDesc desc, std::function<void()> body) {
  auto work = std::make_shared<NcclWork>(desc, state_);
  std::weak_ptr<CommState> weak = state_;
  work->setNcclTimeoutHandler([this, weak](const OpDesc& d, const std::string& cause) {
    auto state = weak.lock();
    if (state) {
      std::lock_guard<std::mutex> lock(state->groupMu);
      if (state->groupAlive) return diagnoseTimeout(d, cause);
    }
    return std::make_exception_ptr(TimeoutError(fmt::format("nccl {} timed out: {}", d.describe(), cause)));
  });
  try {
    DeviceGuard guard(state_->device);
    cudaCheck(guard.error(), *state_, fmt::format("cudaSetDevice({}) for {}", state_->device, desc.describe()));
    work->createEvents();
    {
      // After the work the caller queued on the device's default stream (a kernel that wrote the
      // buffer), as torch's ProcessGroupNCCL orders its stream after the current one.
      std::lock_guard<std::mutex> order(orderMu_);
      cudaCheck(cudaEventRecord(issued_, cudaStreamLegacy), *state_,
                fmt::format("cudaEventRecord on the default stream before {}", desc.describe()));
      cudaCheck(cudaStreamWaitEvent(stream_, issued_, 0), *state_,
                fmt::format("cudaStreamWaitEvent before {}", desc.describe()));
    }
    cudaCheck(cudaEventRecord(work->startEvent(), stream_), *state_,
              fmt::format("cudaEventRecord before {}", desc.describe()));
    runOp(desc, body);
    cudaCheck(cudaEventRecord(work->endEvent(), stream_), *state_,
              fmt::format("cudaEventRecord after {}", desc.describe()));
    work->markLaunched();
  } catch (...) {
    work->markCompleted(std::current_exception());
    return work;
  }
  if (desc.type == OpType::kBarrier) {
    try {
      work->wait();  // bounded by the barrier's timeout; a failure stays in the Work for the caller
    } catch (const std::exception&) {
    }
  }
  return work;
}

void NcclProcessGroup::launch(const OpDesc& d, const char* call, const std::function<ncclResult_t(ncclComm_t)>& fn) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->comm == nullptr) throw BackendError(state_->goneMessage());
  ncclResult_t r = fn(state_->comm);
  bool timedOut = false;
  bool async = false;
  if (r == ncclInProgress) {
    async = true;
    r = settleLocked(Clock::now() + d.timeout, timedOut);
  }
  if (timedOut) {
    std::string last = lastErrorText(state_->comm);
    state_->abortLocked(fmt::format("{} could not be launched within {} ms", d.describe(), d.timeout.count()));
    throw TimeoutError(fmt::format("{} was still being launched by NCCL after {} ms on {} (NCCL last error: {}); the "
                                   "communicator was aborted. {}",
                                   call, d.timeout.count(), state_->where(), last, kNcclAdvice));
  }
  if (r != ncclSuccess) {
    std::string last = lastErrorText(state_->comm);
    bool fatal = async || fatalForComm(r);
    if (fatal) state_->abortLocked(fmt::format("{} failed: {}", call, ncclApi().ncclGetErrorString(r)));
    throw BackendError(fmt::format("{} returned '{}' on {} (NCCL last error: {}).{} {}", call, ncclApi().ncclGetErrorString(r),
                                   state_->where(), last,
                                   fatal ? " The communicator was aborted and the group is unusable." : "",
                                   kNcclAdvice));
  }
}

void NcclProcessGroup::doAllreduce(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  launch(d, "ncclAllReduce", [&](ncclComm_t c) {
    return ncclApi().ncclAllReduce(in.data, out.data, in.count, toNccl(in.dtype), toNccl(d.op), c, stream_);
  });
}

void NcclProcessGroup::doBroadcast(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  launch(d, "ncclBroadcast", [&](ncclComm_t c) {
    return ncclApi().ncclBroadcast(in.data, out.data, in.count, toNccl(in.dtype), d.root, c, stream_);
  });
}

void NcclProcessGroup::doReduce(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  launch(d, "ncclReduce", [&](ncclComm_t c) {
    return ncclApi().ncclReduce(in.data, out.data, in.count, toNccl(in.dtype), toNccl(d.op), d.root, c, stream_);
  });
}

// In place when in == out + rank*in.count, NCCL's own rule, which is also ours.
void NcclProcessGroup::doAllgather(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  launch(d, "ncclAllGather", [&](ncclComm_t c) {
    return ncclApi().ncclAllGather(in.data, out.data, in.count, toNccl(in.dtype), c, stream_);
  });
}

// In place when out == in + rank*out.count, NCCL's own rule, which is also ours.
void NcclProcessGroup::doReduceScatter(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (out.count == 0) return;
  launch(d, "ncclReduceScatter", [&](ncclComm_t c) {
    return ncclApi().ncclReduceScatter(in.data, out.data, out.count, toNccl(in.dtype), toNccl(d.op), c, stream_);
  });
}

void NcclProcessGroup::doAlltoall(const OpDesc& d, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  const int n = size();
  const std::size_t chunk = in.count / n;
  const std::size_t chunkBytes = chunk * dtypeSize(in.dtype);
  const ncclDataType_t t = toNccl(in.dtype);
  // In place, a chunk could be overwritten by a receive before it was sent: send from a copy, made
  // and freed in stream order.
  const char* src = static_cast<const char*>(in.data);
  void* copy = nullptr;
  if (in.data == out.data) {
    cudaCheck(cudaMallocAsync(&copy, in.bytes(), stream_), *state_, fmt::format("cudaMallocAsync of {} bytes for in-place alltoall", in.bytes()));
    cudaCheck(cudaMemcpyAsync(copy, in.data, in.bytes(), cudaMemcpyDeviceToDevice, stream_), *state_,
              "cudaMemcpyAsync for in-place alltoall");
    src = static_cast<const char*>(copy);
  }
  struct FreeCopy {
    void* p;
    cudaStream_t s;
    ~FreeCopy() {
      if (p != nullptr) cudaFreeAsync(p, s);
    }
  } freeCopy{copy, stream_};
  char* dst = static_cast<char*>(out.data);
  launch(d, "ncclSend/ncclRecv (alltoall)", [&](ncclComm_t c) {
    ncclResult_t r = ncclApi().ncclGroupStart();
    if (r != ncclSuccess) return r;
    ncclResult_t first = ncclSuccess;
    for (int peer = 0; peer < n && first == ncclSuccess; ++peer) {
      ncclResult_t s = ncclApi().ncclSend(src + peer * chunkBytes, chunk, t, peer, c, stream_);
      if (s != ncclSuccess && s != ncclInProgress) first = s;
      s = ncclApi().ncclRecv(dst + peer * chunkBytes, chunk, t, peer, c, stream_);
      if (s != ncclSuccess && s != ncclInProgress && first == ncclSuccess) first = s;
    }
    ncclResult_t end = ncclApi().ncclGroupEnd();  // always close the group, even after an error
    return first != ncclSuccess ? first : end;
  });
}

// Only launches; enqueue() then waits for it, so that barrier() returns once the GPU passed it.
void NcclProcessGroup::doBarrier(const OpDesc& d) {
  launch(d, "ncclAllReduce (barrier)", [&](ncclComm_t c) {
    return ncclApi().ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, c, stream_);
  });
}

void NcclProcessGroup::doSend(const OpDesc& d, const Buffer& data) {
  if (data.count == 0) return;
  launch(d, "ncclSend", [&](ncclComm_t c) {
    return ncclApi().ncclSend(data.data, data.count, toNccl(data.dtype), d.root, c, stream_);
  });
}

void NcclProcessGroup::doRecv(const OpDesc& d, const Buffer& data) {
  if (data.count == 0) return;
  launch(d, "ncclRecv", [&](ncclComm_t c) {
    return ncclApi().ncclRecv(data.data, data.count, toNccl(data.dtype), d.root, c, stream_);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> makeNcclProcessGroup(const ProcessGroupOptions& options) {
  if (options.device.type != DeviceType::kCuda) {
    throw ConfigError(fmt::format("the nccl backend works on CUDA devices, but process group '{}' was asked to use "
                                  "{}. Use device cuda:<local rank>, or the gloo backend for CPU tensors.",
                                  options.groupName, deviceName(options.device)));
  }
  return std::make_unique<NcclProcessGroup>(options);
}

}  // namespace ds::comm

namespace ds::comm {
namespace {
// Linking dsengine_nccl makes "nccl" available to createProcessGroup.
const BackendRegistrar kRegisterNccl("nccl", &makeNcclProcessGroup);
}  // namespace
}  // namespace ds::comm
