// The shm backend (see shm_process_group.h for the knobs and shm_segment.h for the segment).
//
// Synchronisation: every local rank owns a step counter in the segment and bumps it at each sync
// point; all ranks pass the same sync points in the same order, so "rank j has reached my step" is
// the whole protocol. Data slots alternate by parity at every use (`epoch_`), and every use has at
// least one sync, so a slot is never rewritten before every reader of its previous contents is done.
// A waiter spins for DS_SHM_SPIN_US (pause; after a few turns, sched_yield at each turn while a
// peer it waits for last ran on the waiter's own CPU, so that the peer, queued there, gets it), then
// sleeps on the peer's counter with FUTEX_WAIT; a rank wakes sleepers with FUTEX_WAKE only when one
// announced itself. Every sleep is a slice of at most 50 ms, after which the waiter checks its
// deadline (the op's timeout), whether the peer gave up (its `failed` flag) and whether the peer
// process still exists (a pidfd), and names the rank.
//
// Large allreduce, per chunk of one slot: each rank copies the slices of its input that other ranks
// reduce into its slot (not its own slice), sync, reduces its own slice from its input and the
// peers' slots into its output and its slot, sync, copies the other slices of the result from the
// peers' slots. With one slot a chunk, the staging stays in the caches, so main memory sees
// about what a zero-copy allreduce moves.
#include "engine/comm/backends/shm/shm_process_group.h"

#include <fmt/format.h>
#include <immintrin.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/comm/backends/shm/shm_kernels.h"
#include "engine/comm/backends/shm/shm_p2p.h"
#include "engine/comm/backends/shm/shm_segment.h"
#include "engine/comm/reduce.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/env/env_source.h"
#include "engine/env/world_info.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"

namespace ds::comm {
namespace shm {

std::size_t defaultSlotBytes(int localRanks) {
  // 512 KiB: a chunk's staging then stays in the caches between the copy in and the copies out, and
  // an in-place op writes its result into lines it has just read. The figures are the README's
  // ("4 MiB slots became 512 KiB", bench-peers section): on a 2-core EPYC (512 KiB L2 a core), 2
  // ranks, f32 allreduce of 32/128 MiB, busbw roughly doubled under every placement (unbound 5.35/4.73
  // GB/s against 2.88/2.65 with 4 MiB slots; mpirun's binding 4.37/4.95 against 2.64/2.63); 256 KiB
  // and 1 MiB slots within 10% of 512 KiB.
  const std::size_t budget = std::size_t{32} << 20;  // all slots of the host
  std::size_t slot = budget / (2 * static_cast<std::size_t>(std::max(1, localRanks)));
  slot = std::clamp<std::size_t>(slot, std::size_t{256} << 10, std::size_t{512} << 10);
  return slot / 4096 * 4096;
}

ShmConfig configFromEnv() {
  ShmConfig c;
  auto get = [](const char* n) -> const char* {
    const char* v = std::getenv(n);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (const char* v = get("DS_SHM_BUFFER_BYTES")) {
    c.slotBytes = env::parseBytesVar("DS_SHM_BUFFER_BYTES", v);
    if (c.slotBytes < 4096 || c.slotBytes > (1ull << 30)) {
      throw ConfigError(
          fmt::format("DS_SHM_BUFFER_BYTES={} is out of range; give 4K to 1G, or unset it for the default "
                      "(512K, less above 32 ranks a host).",
                      v));
    }
  }
  if (const char* v = get("DS_SHM_SMALL_BYTES")) c.smallBytes = env::parseBytesVar("DS_SHM_SMALL_BYTES", v);
  if (const char* v = get("DS_SHM_INLINE_BYTES"))
    c.inlineBytes = env::parseBytesVar("DS_SHM_INLINE_BYTES", v);
  if (const char* v = get("DS_SHM_SPIN_US")) {
    char* end = nullptr;
    double us = std::strtod(v, &end);
    if (end == v || *end != '\0' || us < 0 || us > 1e6) {
      throw ConfigError(
          fmt::format("DS_SHM_SPIN_US='{}' is not valid; give microseconds from 0 to 1000000.", v));
    }
    c.spin = std::chrono::nanoseconds(static_cast<long long>(us * 1000));
  }
  if (const char* v = get("DS_SHM_TEST_SLOWDOWN")) {
    char* end = nullptr;
    double f = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(f >= 1.0 && f <= 4.0)) {
      throw ConfigError(fmt::format(
          "DS_SHM_TEST_SLOWDOWN='{}' is not valid; give a factor from 1 to 4 (a test-only knob that makes "
          "every shm op slower by that factor), or unset it.",
          v));
    }
    c.testSlowdown = f;
  }
  if (const char* v = get("DS_SHM_DIR")) c.dir = v;
  if (const char* v = get("DS_SHM_INTER_BACKEND")) {
    c.interBackend = v;
    if (c.interBackend != "gloo") {
      throw ConfigError(fmt::format(
          "DS_SHM_INTER_BACKEND='{}' is not supported; only gloo can link the hosts of a shm group (the mpi "
          "backend cannot form sub-groups). Unset it.",
          v));
    }
  }
  return c;
}

}  // namespace shm

namespace {

using Clock = std::chrono::steady_clock;
using namespace shm;

// memcpy for the collectives' slices, which are often empty (0-byte ops, a rank with no share, the
// same buffer in and out): memcpy with a null pointer or an overlapping (identical) range is
// undefined behaviour even for 0 bytes, so those copies are skipped here, once.
void copyBytes(void* dst, const void* src, std::size_t n) {
  if (n > 0 && dst != src) std::memcpy(dst, src, n);
}

int pidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

inline bool reached(std::uint32_t v, std::uint32_t target) {
  return static_cast<std::int32_t>(v - target) >= 0;
}

class ShmProcessGroup final : public ProcessGroup {
 public:
  ShmProcessGroup(ProcessGroupOptions options, ShmConfig config);
  ~ShmProcessGroup() override;

  std::string backendName() const override { return "shm"; }
  bool supports(OpType type, DType dtype, ReduceOp op) const override;

 protected:
  void doAllreduce(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doBroadcast(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doReduce(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doAllgather(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doReduceScatter(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doAlltoall(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doBarrier(const OpDesc& desc) override;
  // The base's fast path: ops of at most DS_SHM_INLINE_BYTES start on the caller's thread when
  // nothing of the group is queued or running (the base decides that, and keeps the issue order).
  bool inlineEligible(const OpDesc& desc) const override;
  // On one core, ops of at most DS_SHM_INLINE_BYTES run on the caller; larger ones go to the worker.
  // Measured under mpirun's binding with a compile sharing the cores (2 ranks, f32 allreduce, µs per
  // op, caller vs worker): 8 B 1.1 vs 26-31, 32 KiB 15 vs 50, but 512 KiB 940-1320 vs 250-280. A
  // rank that runs its large op on the caller competes for its core's fair share all op long, while
  // a worker that blocks while the peer is late is woken with the scheduler's favour.
  bool callerMayRunToEnd(const OpDesc& desc) const override { return desc.bytes <= cfg_.inlineBytes; }
  std::function<void()> startInline(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                    Clock::time_point issued) override;
  // send and recv through a ring per ordered pair of this host's ranks (shm_p2p.h), posted when
  // issued; between hosts of a hierarchy there is no such path, and the post says so.
  std::unique_ptr<PostedP2p> postPointToPoint(const OpDesc& desc, const Buffer& data) override;

 private:
  // The ring file of the pair (src -> dst, local indexes) and the peer's description for its waits.
  std::unique_ptr<P2pRing> openRing(int srcLocal, int dstLocal);
  std::string ringName(int srcLocal, int dstLocal);
  // At destruction: removes the names of the pairs toward this rank that are still linked.
  void removeInboundRings();
  P2pPeer p2pPeer(int peer, int peerLocal);
  struct Ctx {
    const OpDesc& desc;
    Clock::time_point deadline;
  };

  void setupHosts();
  void setupSegment();
  void setupInter();
  void releasePeers();
  // Sets spin_, spinWorker_ and oversubscribed_ from the local ranks' published CPU masks.
  void choosePlacement();

  // --- sync ---
  void post();
  // Publishes the CPU this thread runs on in this rank's control block; returns it (-1: unknown).
  int publishCpu();
  // Whether a local rank that has not reached `target` last ran on this thread's CPU (or either CPU
  // is unknown): then it may be queued behind this thread, and a waiter yields to it.
  bool peerQueuedHere(std::uint32_t target);
  // Waits until local rank j has reached this rank's step: spins until `spinUntil` (a zero
  // time_point: DS_SHM_SPIN_US from now), then sleeps on its futex in slices. Returns false when
  // `giveUpAt` passes first (the caller hands the rest to the worker); throws when the peer died,
  // gave up, or ctx.deadline passed.
  bool waitFor(int j, const Ctx& ctx, Clock::time_point spinUntil = {},
               Clock::time_point giveUpAt = Clock::time_point::max());
  void waitAll(const Ctx& ctx);
  void checkPeer(int j, const Ctx& ctx);
  bool peerDead(int j);
  int parity() { return static_cast<int>(epoch_++ & 1); }
  // Runs body; on an error flags this rank as failed in the segment, so that local peers stop waiting.
  template <typename F>
  void guarded(const OpDesc& desc, int part, F&& body);

  // --- local collectives over the ranks of this host (indices 0..ln_-1) ---
  void localAllreduce(const Ctx& ctx, const char* in, char* out, std::size_t count, DType t, ReduceOp op,
                      int divisor);
  void localReduceScatter(const Ctx& ctx, const char* in, char* out, std::size_t count, DType t, ReduceOp op,
                          int divisor);
  void localAllgather(const Ctx& ctx, const char* in, char* out, std::size_t bytes);
  void localBroadcast(const Ctx& ctx, int rootIndex, const char* in, char* out, std::size_t bytes);
  void localAlltoall(const Ctx& ctx, const char* in, char* out, std::size_t blockBytes);
  void localBarrier(const Ctx& ctx);

  // --- hierarchy (several hosts): shm within a host, inter_ among the leaders ---
  void hierAllreduce(const Ctx& ctx, const Buffer& in, char* out, ReduceOp op);
  char* scratch(std::size_t bytes);
  // DS_SHM_TEST_SLOWDOWN: spends `extra` copying within scratch memory.
  void burn(std::chrono::duration<double> extra);
  // DS_SHM_TEST_SLOWDOWN: the fastest time per kind of op (see guarded()).
  std::unordered_map<std::uint64_t, Clock::duration> fastest_;
  bool leader() const { return li_ == 0; }
  Ctx ctxFor(const OpDesc& d) const { return Ctx{d, Clock::now() + d.timeout}; }

  ShmConfig cfg_;
  std::string host_;
  std::vector<std::string> hostNames_;       // per host index
  std::vector<std::vector<int>> hostRanks_;  // global ranks per host, ascending
  std::vector<int> hostOf_;                  // host index per global rank
  int myHost_ = 0;
  int li_ = 0;  // local index
  int ln_ = 1;  // local size
  bool hier_ = false;
  std::unique_ptr<Segment> seg_;
  std::vector<int> pidfds_;
  std::vector<pid_t> peerPids_;
  std::uint32_t step_ = 0;
  std::uint64_t epoch_ = 0;
  std::chrono::nanoseconds spin_{0};        // a wait on the caller's thread (inline, one core)
  std::chrono::nanoseconds spinWorker_{0};  // a wait on the group's worker thread
  int covered_ = 1;                         // CPUs the host's ranks may run on, together
  bool yieldInSpin_ = true;                 // a local peer may run on this rank's CPUs
  bool oversubscribed_ = false;
  std::unique_ptr<ProcessGroup> inter_;
  std::vector<char> scratch_;
  // send/recv sides per peer (group rank), made at the first op with that peer; posted ops (which
  // refer to them) end in shutdown(), before these go. Touched under the base's issue lock only.
  std::map<int, std::unique_ptr<P2pSender>> senders_;
  std::map<int, std::unique_ptr<P2pReceiver>> receivers_;
};

// How long a small op waits on the caller's thread for a late peer (spinning for DS_SHM_SPIN_US,
// then sleeping on the futex) before the rest goes to the worker thread, so that wait() with a short
// timeout returns on time. The op's own deadline is unaffected.
constexpr auto kInlineBudget = std::chrono::milliseconds(2);
// How long the worker thread of a one-CPU rank spins before it blocks, where no local peer may run on
// its CPU (choosePlacement). Measured under mpirun -np 2 (one core each), 128 MiB allreduce, 4 runs
// each: p50 28.4-31.8 ms against 31.5-36.4 ms blocking at once, and 20 us blocked 1,500-6,400
// times a run where 50 us blocked ~1,000 (of them ~700 outside the ops).
constexpr auto kOneCpuWorkerSpin = std::chrono::microseconds(50);

ShmProcessGroup::ShmProcessGroup(ProcessGroupOptions options, ShmConfig config)
    : ProcessGroup(std::move(options)), cfg_(std::move(config)) {
  try {
    setupHosts();
    setupSegment();
    if (hier_) setupInter();
  } catch (...) {
    shutdown();
    releasePeers();
    throw;
  }
}

ShmProcessGroup::~ShmProcessGroup() {
  shutdown();  // no op may run while the segment goes away
  removeInboundRings();
  inter_.reset();
  releasePeers();
  seg_.reset();
}

void ShmProcessGroup::releasePeers() {
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
  pidfds_.clear();
}

std::string storeKey(const ProcessGroupOptions& o, const std::string& suffix) {
  return fmt::format("pg/{}/shm/{}", o.groupName, suffix);
}

void ShmProcessGroup::setupHosts() {
  const auto& o = options();
  host_ = cfg_.host.empty() ? net::hostName() : cfg_.host;
  hostOf_.assign(size(), 0);
  if (size() == 1) {
    hostNames_ = {host_};
    hostRanks_ = {{0}};
    return;
  }
  auto& s = store();
  s.set(storeKey(o, fmt::format("host/{}", rank())), store::toBytes(host_), o.timeout);
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(storeKey(o, fmt::format("host/{}", r)));
  std::vector<store::Bytes> values;
  try {
    values = s.multiGet(keys, o.timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < size(); ++r) {
      if (!s.check({keys[r]}, std::chrono::seconds(5))) missing.push_back(r);
    }
    throw TimeoutError(fmt::format(
        "shm group '{}': rank {} waited {} ms for every rank to publish its host; ranks {} never did (they "
        "did not create the group, or died).",
        o.groupName, rank(), o.timeout.count(), fmt::join(missing, ", ")));
  }
  std::map<std::string, int> index;
  for (int r = 0; r < size(); ++r) {
    std::string h = store::toString(values[r]);
    auto [it, fresh] = index.emplace(h, static_cast<int>(hostNames_.size()));
    if (fresh) {
      hostNames_.push_back(h);
      hostRanks_.emplace_back();
    }
    hostOf_[r] = it->second;
    hostRanks_[it->second].push_back(r);
  }
  myHost_ = hostOf_[rank()];
  hier_ = hostNames_.size() > 1;
}

void ShmProcessGroup::setupSegment() {
  const auto& o = options();
  const auto& mine = hostRanks_[myHost_];
  ln_ = static_cast<int>(mine.size());
  li_ = static_cast<int>(std::find(mine.begin(), mine.end(), rank()) - mine.begin());
  if (ln_ > kMaxLocalRanks) {
    throw ConfigError(fmt::format("shm group '{}' has {} ranks on host {}; the shm backend takes at most {}.",
                                  o.groupName, ln_, host_, kMaxLocalRanks));
  }
  SegmentSpec spec;
  spec.dir = cfg_.dir;
  spec.jobId = o.world != nullptr ? o.world->jobId.value : "";
  spec.group = o.groupName;
  spec.host = host_;
  spec.nranks = ln_;
  spec.slotBytes = cfg_.slotBytes > 0 ? cfg_.slotBytes : defaultSlotBytes(ln_);
  if (ln_ == 1) {
    // Alone on the host: a private segment keeps every code path the same. It is never published.
    spec.generation = 0;
    seg_ = Segment::create(spec);
    seg_->markAttached(0);
    return;
  }
  auto& s = store();
  // The generation: every incarnation of this group name on this host counts its ranks in, so a group
  // re-created under the same name never meets its predecessor's segment.
  const std::string hostKey = storeKey(o, fmt::format("{}/", hostNames_[myHost_]));
  std::int64_t joined = s.add(hostKey + "join", 1, o.timeout);
  spec.generation = static_cast<std::uint64_t>((joined - 1) / ln_);
  const std::string segKey = hostKey + fmt::format("segment/{}", spec.generation);
  if (leader()) {
    try {
      seg_ = Segment::create(spec);
    } catch (const Error& e) {
      // The host's other ranks wait for the segment's name: tell them why there is none, and give them
      // a bounded moment to read it (this rank may host the store, which goes when it exits).
      try {
        s.set(segKey, store::toBytes(std::string("error ") + e.what()), std::chrono::seconds(5));
        const auto until = Clock::now() + std::chrono::seconds(5);
        while (s.add(segKey + "/seen", 0, std::chrono::seconds(5)) < ln_ - 1 && Clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      } catch (const Error&) {
      }
      throw;
    }
    s.set(segKey, store::toBytes(fmt::format("ok {} {}", seg_->name(), seg_->nonce())), o.timeout);
    seg_->markAttached(0);
  } else {
    std::string value;
    try {
      value = store::toString(s.get(segKey, o.timeout));
    } catch (const TimeoutError&) {
      throw TimeoutError(fmt::format(
          "shm group '{}': rank {} waited {} ms for rank {} (the first rank on host {}) to create the shared "
          "segment; it never published it (it failed, see its error, or never created the group).",
          o.groupName, rank(), o.timeout.count(), mine[0], host_));
    }
    if (value.rfind("error ", 0) == 0) {
      try {
        s.add(segKey + "/seen", 1, std::chrono::seconds(5));
      } catch (const Error&) {
      }
      throw ConfigError(
          fmt::format("shm group '{}': rank {} (the first rank on host {}) could not create the "
                      "shared segment, so rank {} cannot join: {}",
                      o.groupName, mine[0], host_, rank(), value.substr(6)));
    }
    DS_CHECK(value.rfind("ok ", 0) == 0, "bad segment key '{}'", value);
    value = value.substr(3);
    auto space = value.rfind(' ');
    DS_CHECK(space != std::string::npos, "bad segment key '{}'", value);
    std::uint64_t nonce = std::stoull(value.substr(space + 1));
    seg_ = Segment::attach(spec, value.substr(0, space), nonce);
    seg_->markAttached(li_);
  }
  // Every local rank must attach before any op: until then the name is still linked (a crash would
  // leave it behind) and the peers' pids are unknown.
  auto deadline = Clock::now() + o.timeout;
  auto pause = std::chrono::microseconds(20);
  while (!seg_->allAttached()) {
    if (Clock::now() > deadline) {
      std::vector<int> missing;
      for (int l = 0; l < ln_; ++l) {
        if (seg_->ctl(l).pid.load() == 0) missing.push_back(mine[l]);
      }
      seg_->unlink();
      throw TimeoutError(fmt::format(
          "shm group '{}': rank {} waited {} ms for the ranks of host {} to attach to the shared segment; "
          "ranks {} never did (they died, or see another /dev/shm: another container without --ipc=host?).",
          o.groupName, rank(), o.timeout.count(), host_, fmt::join(missing, ", ")));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
  choosePlacement();
  const std::uint64_t myNs = pidNamespaceInode();
  const pid_t self = ::getpid();
  pidfds_.assign(ln_, -1);
  peerPids_.assign(ln_, 0);
  for (int l = 0; l < ln_; ++l) {
    pid_t pid = seg_->ctl(l).pid.load();
    peerPids_[l] = pid;
    if (l == li_ || pid == self || seg_->ctl(l).pidNamespace != myNs) continue;
    pidfds_[l] = pidfdOpen(pid);
  }
  log::debug(
      "shm group '{}' rank {}: {} local rank(s) on {}, segment {} ({} bytes a slot), {} kernels, {} CPUs "
      "among them{}, spin {} ns on the caller, {} ns on the worker{}",
      o.groupName, rank(), ln_, host_, seg_->name(), seg_->slotBytes(), isaName(activeIsa()), covered_,
      oversubscribed_ ? " (oversubscribed)" : "", spin_.count(), spinWorker_.count(),
      yieldInSpin_ ? ", yielding" : "");
}

void ShmProcessGroup::choosePlacement() {
  // The host's ranks have a core each when their affinity masks together cover at least as many
  // CPUs as there are ranks (mpirun's default binding: one core each; unbound ranks on a big
  // enough host). Then a waiter spins on its own core and a peer's step is ~0.1 us away. Otherwise
  // (two ranks under taskset -c 0, more ranks than cores) a peer may be queued behind the waiter on
  // its CPU: a short spin that yields at every turn hands it the core. The worker thread of a rank
  // with one CPU spins only where no local peer may run on that CPU (mpirun's default binding), and
  // for kOneCpuWorkerSpin: its caller may be computing on the same core, but a block costs that core
  // two context switches, and a 128 MiB op blocked at each of its 512 chunk syncs (27,000 futex
  // calls a run against ~700 with this spin; 10 us still blocked 2,000-18,000 times). Where a peer
  // may share the CPU it blocks at once, so the peer gets the core. (Requiring two CPUs for every
  // rank made 1 MiB ops of unbound ranks on 2 cores 1.5-2x slower, measured under load.)
  yieldInSpin_ = sharesCpus(*seg_, ln_, li_);
  const int known = ln_ == 1 ? sys::affinityCpuCount() : cpusCovered(*seg_, ln_);
  covered_ = known > 0 ? known : sys::affinityCpuCount();
  oversubscribed_ = ln_ > covered_;
  if (cfg_.spin.count() >= 0) {
    spin_ = spinWorker_ = cfg_.spin;
    return;
  }
  spin_ = oversubscribed_ ? std::chrono::nanoseconds(std::chrono::microseconds(2))
                          : std::chrono::nanoseconds(std::chrono::microseconds(20));
  spinWorker_ = sys::affinityCpuCount() >= 2 ? spin_
                : yieldInSpin_               ? std::chrono::nanoseconds(0)
                                             : std::chrono::nanoseconds(kOneCpuWorkerSpin);
}

void ShmProcessGroup::setupInter() {
  if (!leader()) return;
  ProcessGroupOptions io = options();
  io.rank = myHost_;
  io.size = static_cast<int>(hostNames_.size());
  io.groupName = options().groupName + "/shm-inter";
  io.globalRanks.clear();     // its ranks are host numbers; it is not recorded (below)
  io.flightRecorder = false;  // its ops are parts of this group's, which the recorder has
  inter_ = createProcessGroup(cfg_.interBackend, io);
}

bool ShmProcessGroup::supports(OpType type, DType, ReduceOp) const {
  if (type == OpType::kAlltoall) return !hier_;
  return true;
}

// ---------------------------------------------------------------------------------------------------
// send and recv.

std::string ShmProcessGroup::ringName(int srcLocal, int dstLocal) {
  RankCtl& dst = seg_->ctl(dstLocal);
  return p2pFileName(dst.pidNamespace, dst.pid.load(), seg_->nonce(), srcLocal, dstLocal);
}

std::unique_ptr<P2pRing> ShmProcessGroup::openRing(int srcLocal, int dstLocal) {
  // Two data slots' worth: a 16 KiB message of a pipeline stage never waits for its receiver.
  return std::make_unique<P2pRing>(cfg_.dir, ringName(srcLocal, dstLocal), 2 * seg_->slotBytes(),
                                   dstLocal == li_);
}

void ShmProcessGroup::removeInboundRings() {
  // Pairs toward this rank whose sender attached and whose receive never came: their names are left.
  if (!seg_) return;
  for (int j = 0; j < ln_; ++j) {
    if (j != li_) ::unlink((cfg_.dir + "/" + ringName(j, li_)).c_str());
  }
}

P2pPeer ShmProcessGroup::p2pPeer(int peer, int peerLocal) {
  return P2pPeer{rank(), peer, host_, [this, peerLocal] { return peerDead(peerLocal); }};
}

std::unique_ptr<ProcessGroup::PostedP2p> ShmProcessGroup::postPointToPoint(const OpDesc& desc, const Buffer& data) {
  const int peer = desc.root;
  if (hostOf_[peer] != myHost_) {
    throw ConfigError(fmt::format(
        "the shm backend moves send and recv only between ranks of one host, and rank {} is on host {} while "
        "rank {} is on host {}. Use the gloo or mpi backend for point-to-point across hosts",
        rank(), host_, peer, hostNames_[hostOf_[peer]]));
  }
  const auto& local = hostRanks_[myHost_];
  const int j = static_cast<int>(std::find(local.begin(), local.end(), peer) - local.begin());
  if (desc.type == OpType::kSend) {
    auto& side = senders_[peer];
    if (!side) side = std::make_unique<P2pSender>(openRing(li_, j), p2pPeer(peer, j));
    return side->post(data.data, data.bytes(), desc.tag);
  }
  auto& side = receivers_[peer];
  if (!side) side = std::make_unique<P2pReceiver>(openRing(j, li_), p2pPeer(peer, j));
  return side->post(data.data, data.bytes(), desc.tag);
}

// ---------------------------------------------------------------------------------------------------
// Inline execution of small ops.

bool ShmProcessGroup::inlineEligible(const OpDesc& desc) const {
  return desc.bytes <= cfg_.inlineBytes && !desc.isPointToPoint();
}

std::function<void()> ShmProcessGroup::startInline(const OpDesc& desc, const Buffer& in, const Buffer& out,
                                                   Clock::time_point issued) {
  const std::size_t bytes = in.bytes();
  if (desc.type != OpType::kAllreduce || hier_ || ln_ == 1 || bytes > cfg_.smallBytes ||
      bytes > seg_->slotBytes() || in.count == 0) {
    // Everything else runs here to the end, as on the worker.
    dispatch(desc, in, out);
    return nullptr;
  }
  // The one-step allreduce, split where a late peer would block: post here, wait briefly, and if a
  // peer has not posted by then, the worker waits for it and reduces.
  const Clock::time_point deadline = issued + desc.timeout;
  const int p = parity();
  const ReduceOp op = wireOp(desc.op);
  const int divisor = desc.op == ReduceOp::kAvg ? ln_ : 1;
  auto reduce = [this, p, op, divisor](const Buffer& i, const Buffer& o) {
    const void* ins[kMaxLocalRanks];
    for (int r = 0; r < ln_; ++r) ins[r] = r == li_ ? i.data : seg_->slot(r, p);
    reduceN(o.data, nullptr, ins, ln_, i.count, i.dtype, op, divisor);
  };
  int next = 0;  // the first local rank not yet known to have posted
  guarded(desc, 2, [&] {
    std::memcpy(seg_->slot(li_, p), in.data, bytes);
    post();
    const Ctx ctx{desc, deadline};
    const auto spinUntil = issued + spin_;
    const auto giveUpAt = issued + std::max<std::chrono::nanoseconds>(spin_, kInlineBudget);
    for (; next < ln_; ++next) {
      if (next != li_ && !waitFor(next, ctx, spinUntil, giveUpAt)) return;
    }
    reduce(in, out);
  });
  if (next == ln_) return nullptr;
  return [this, desc, in, out, deadline, next, reduce] {
    guarded(desc, 1, [&] {
      const Ctx ctx{desc, deadline};
      for (int j = next; j < ln_; ++j) {
        if (j != li_) waitFor(j, ctx);
      }
      reduce(in, out);
    });
  };
}

// ---------------------------------------------------------------------------------------------------
// Sync.

int ShmProcessGroup::publishCpu() {
  const int cpu = ::sched_getcpu();  // 4-5 ns here (see post())
  std::atomic<std::int32_t>& mine = seg_->ctl(li_).cpu;
  // Written only when it changed: peers poll this cache line for `step`.
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
  return cpu;
}

bool ShmProcessGroup::peerQueuedHere(std::uint32_t target) {
  const int cpu = publishCpu();
  for (int r = 0; r < ln_; ++r) {
    if (r == li_) continue;
    const RankCtl& c = seg_->ctl(r);
    const int at = c.cpu.load(std::memory_order_relaxed);
    if ((cpu < 0 || at < 0 || at == cpu) && !reached(c.step.load(std::memory_order_acquire), target))
      return true;
  }
  return false;
}

void ShmProcessGroup::post() {
  RankCtl& c = seg_->ctl(li_);
  // Every op pays one sched_getcpu here (4-5 ns on this VM, glibc 2.36): an 8 B allreduce measured
  // the same with and without it (p50 0.36 vs 0.37 us unbound, 0.38 vs 0.40 under mpirun's binding,
  // medians of 4 runs each), and without it a rank that is always last to arrive never says where
  // it runs.
  publishCpu();
  c.step.store(++step_, std::memory_order_seq_cst);
  if (c.sleepers.load(std::memory_order_seq_cst) != 0) wakeFutex(&c.step);
}

bool ShmProcessGroup::peerDead(int j) {
  int fd = pidfds_.empty() ? -1 : pidfds_[j];
  if (fd >= 0) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    return ::poll(&p, 1, 0) > 0;  // a pidfd turns readable when the process exits
  }
  pid_t pid = peerPids_.empty() ? 0 : peerPids_[j];
  if (pid <= 0 || pid == ::getpid() || seg_->ctl(j).pidNamespace != pidNamespaceInode()) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

void ShmProcessGroup::checkPeer(int j, const Ctx& ctx) {
  const int peer = hostRanks_[myHost_][j];
  if (seg_->ctl(j).failed.load() != 0) {
    throw BackendError(
        fmt::format("rank {} on this host gave up on this op after an error of its own (see "
                    "its message); rank {} stops waiting for it",
                    peer, rank()));
  }
  if (peerDead(j)) {
    throw BackendError(
        fmt::format("rank {} (pid {}) on host {} exited while rank {} waited for it at shm step "
                    "{}: it crashed or was killed; see its log",
                    peer, peerPids_[j], host_, rank(), step_));
  }
  if (Clock::now() > ctx.deadline) {
    throw TimeoutError(fmt::format("rank {} waited {} ms for rank {} at shm step {} (rank {} is at step {})",
                                   rank(), ctx.desc.timeout.count(), peer, step_, peer,
                                   seg_->ctl(j).step.load()));
  }
}

bool ShmProcessGroup::waitFor(int j, const Ctx& ctx, Clock::time_point spinUntil,
                              Clock::time_point giveUpAt) {
  RankCtl& c = seg_->ctl(j);
  const std::uint32_t target = step_;
  if (reached(c.step.load(std::memory_order_acquire), target)) return true;
  const auto spin = onWorkerThread() ? spinWorker_ : spin_;
  if (spin.count() > 0) {
    const auto until = spinUntil == Clock::time_point{} ? Clock::now() + spin : spinUntil;
    bool yielding = false;
    for (unsigned i = 1;; ++i) {
      _mm_pause();
      if (reached(c.step.load(std::memory_order_acquire), target)) return true;
      // The first turns stay pure: a peer on another core is ~0.1 us away. After them the core is
      // given away at every turn, but only while a local rank this one waits for last ran on this
      // very CPU (each rank publishes its CPU at every post and wait): then it may be queued behind
      // this rank, and a pure spin only delays it (measured on 2 shared cores: time per op ~ the
      // spin, 28-33 us at 20 us; yielding every 8th turn 2.3 us, every 2nd 0.7 us). When the peer
      // is on another CPU, a yield cannot help it and hands this core to whatever else runs here
      // for a timeslice: with one busy process beside 2 unbound ranks on 2 cores, yielding at
      // every turn made an 8 B allreduce 30 us at the median (raw MPI: 0.33). A yield can last a
      // whole timeslice, so the clock is read at every yielding turn, and every 32 turns of a pure
      // spin: the spin stays bounded by DS_SHM_SPIN_US. Where no local peer may run on this rank's
      // CPUs at all (mpirun's default binding), the spin is always pure.
      if (i > 32 && (yielding || i % 32 == 0)) {
        if (Clock::now() > until) break;
        yielding = yieldInSpin_ && peerQueuedHere(target);
        if (yielding) ::sched_yield();
      }
    }
  }
  const auto slice = std::chrono::milliseconds(50);
  for (;;) {
    const auto now = Clock::now();
    if (now >= giveUpAt) {
      checkPeer(j, ctx);  // a dead peer or a passed deadline is reported here, not handed on
      return false;
    }
    c.sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::uint32_t v = c.step.load(std::memory_order_seq_cst);
    if (!reached(v, target) && c.failed.load() == 0) {
      auto left = std::min(ctx.deadline, giveUpAt) - now;
      waitFutex(&c.step, v, std::clamp<std::chrono::nanoseconds>(left, std::chrono::microseconds(10), slice));
    }
    c.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(c.step.load(std::memory_order_acquire), target)) return true;
    checkPeer(j, ctx);
  }
}

void ShmProcessGroup::waitAll(const Ctx& ctx) {
  for (int j = 0; j < ln_; ++j) {
    if (j != li_) waitFor(j, ctx);
  }
}

template <typename F>
void ShmProcessGroup::guarded(const OpDesc& desc, int part, F&& body) {
  try {
    const auto t0 = Clock::now();
    body();
    if (cfg_.testSlowdown > 1.0) {
      // The extra time is a factor of the fastest this kind of op (type, size, part) has been on
      // this rank, not of this op's own time: that includes waiting for a peer's extra time, and the
      // slowdown would compound from op to op (x1.11 cost small messages 80%).
      const std::uint64_t key = (static_cast<std::uint64_t>(desc.type) << 56) ^
                                (static_cast<std::uint64_t>(part) << 55) ^ desc.bytes;
      const auto took = Clock::now() - t0;
      auto [it, fresh] = fastest_.try_emplace(key, took);
      if (!fresh) it->second = std::min(it->second, took);
      burn(std::chrono::duration<double>(it->second) * (cfg_.testSlowdown - 1.0));
    }
  } catch (...) {
    RankCtl& c = seg_->ctl(li_);
    c.failed.store(1);
    c.step.fetch_add(0);  // a write barrier for the flag before the wake
    wakeFutex(&c.step);
    throw;
  }
}

void ShmProcessGroup::burn(std::chrono::duration<double> extra) {
  // Copies 4 KiB blocks within scratch memory until `extra` has passed: memory traffic on this
  // rank's core, as a slower kernel would cost (DS_SHM_TEST_SLOWDOWN). The clock is read before
  // each block (~0.1 us of copying): one 64 KiB block made a 1 us op several times slower.
  constexpr std::size_t kBlock = 4 << 10;
  char* s = scratch(2 * kBlock);
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(extra);
  while (Clock::now() < until) std::memmove(s + kBlock, s, kBlock);
}

char* ShmProcessGroup::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

// ---------------------------------------------------------------------------------------------------
// Local collectives.

void ShmProcessGroup::localBarrier(const Ctx& ctx) {
  if (ln_ == 1) return;
  post();
  waitAll(ctx);
}

void ShmProcessGroup::localAllreduce(const Ctx& ctx, const char* in, char* out, std::size_t count, DType t,
                                     ReduceOp op, int divisor) {
  const std::size_t es = dtypeSize(t);
  const std::size_t bytes = count * es;
  if (ln_ == 1) {
    copyBytes(out, in, bytes);
    if (divisor > 1) divideBy(out, count, t, divisor);
    return;
  }
  const void* ins[kMaxLocalRanks];
  if (bytes <= cfg_.smallBytes && bytes <= seg_->slotBytes()) {
    // One step: everyone posts its whole input, everyone reduces all of them.
    const int p = parity();
    copyBytes(seg_->slot(li_, p), in, bytes);
    post();
    waitAll(ctx);
    for (int r = 0; r < ln_; ++r) ins[r] = r == li_ ? static_cast<const void*>(in) : seg_->slot(r, p);
    if (count > 0) reduceN(out, nullptr, ins, ln_, count, t, op, divisor);
    return;
  }
  const std::size_t chunk = seg_->slotBytes() / es;
  const std::size_t align = std::max<std::size_t>(1, 64 / es);
  for (std::size_t off = 0; off < count; off += chunk) {
    const std::size_t c = std::min(chunk, count - off);
    auto sliceStart = [&](int j) {
      if (j >= ln_) return c;
      return std::min(c, (c * static_cast<std::size_t>(j) / ln_) / align * align);
    };
    const int p = parity();
    char* mine = seg_->slot(li_, p);
    for (int j = 0; j < ln_; ++j) {
      if (j == li_) continue;
      std::size_t s = sliceStart(j), e = sliceStart(j + 1);
      copyBytes(mine + s * es, in + (off + s) * es, (e - s) * es);
    }
    post();
    waitAll(ctx);
    const std::size_t s = sliceStart(li_), e = sliceStart(li_ + 1);
    for (int r = 0; r < ln_; ++r) {
      ins[r] = r == li_ ? static_cast<const void*>(in + (off + s) * es) : seg_->slot(r, p) + s * es;
    }
    if (e > s) reduceN(out + (off + s) * es, mine + s * es, ins, ln_, e - s, t, op, divisor);
    post();
    waitAll(ctx);
    for (int j = 0; j < ln_; ++j) {
      if (j == li_) continue;
      std::size_t sj = sliceStart(j), ej = sliceStart(j + 1);
      copyBytes(out + (off + sj) * es, seg_->slot(j, p) + sj * es, (ej - sj) * es);
    }
  }
}

void ShmProcessGroup::localReduceScatter(const Ctx& ctx, const char* in, char* out, std::size_t count,
                                         DType t, ReduceOp op, int divisor) {
  const std::size_t es = dtypeSize(t);
  if (ln_ == 1) {
    copyBytes(out, in, count * es);
    if (divisor > 1) divideBy(out, count, t, divisor);
    return;
  }
  const std::size_t per = std::max<std::size_t>(1, seg_->slotBytes() / (es * ln_));
  const void* ins[kMaxLocalRanks];
  std::size_t off = 0;
  do {
    const std::size_t l = std::min(per, count - off);
    const int p = parity();
    char* mine = seg_->slot(li_, p);
    for (int j = 0; j < ln_; ++j) {
      if (j != li_) copyBytes(mine + j * per * es, in + (j * count + off) * es, l * es);
    }
    post();
    waitAll(ctx);
    for (int r = 0; r < ln_; ++r) {
      ins[r] = r == li_ ? static_cast<const void*>(in + (li_ * count + off) * es)
                        : seg_->slot(r, p) + li_ * per * es;
    }
    if (l > 0) reduceN(out + off * es, nullptr, ins, ln_, l, t, op, divisor);
    off += l;
  } while (off < count);
}

void ShmProcessGroup::localAllgather(const Ctx& ctx, const char* in, char* out, std::size_t bytes) {
  if (ln_ == 1) {
    copyBytes(out, in, bytes);
    return;
  }
  const std::size_t per = seg_->slotBytes();
  std::size_t off = 0;
  do {
    const std::size_t l = std::min(per, bytes - off);
    const int p = parity();
    copyBytes(seg_->slot(li_, p), in + off, l);
    post();
    waitAll(ctx);
    for (int j = 0; j < ln_; ++j) {
      char* dst = out + j * bytes + off;
      const char* src = j == li_ ? in + off : seg_->slot(j, p);
      copyBytes(dst, src, l);
    }
    off += l;
  } while (off < bytes);
}

void ShmProcessGroup::localBroadcast(const Ctx& ctx, int rootIndex, const char* in, char* out,
                                     std::size_t bytes) {
  if (ln_ == 1) {
    copyBytes(out, in, bytes);
    return;
  }
  const std::size_t per = seg_->slotBytes();
  std::size_t off = 0;
  do {
    const std::size_t l = std::min(per, bytes - off);
    const int p = parity();
    // Everyone waits for everyone, not only for the root: a rank that writes its slot two uses later
    // must know that every rank has finished reading the use before this one.
    if (li_ == rootIndex) {
      copyBytes(seg_->slot(li_, p), in + off, l);
      copyBytes(out + off, in + off, l);
      post();
      waitAll(ctx);
    } else {
      post();
      waitAll(ctx);
      copyBytes(out + off, seg_->slot(rootIndex, p), l);
    }
    off += l;
  } while (off < bytes);
}

void ShmProcessGroup::localAlltoall(const Ctx& ctx, const char* in, char* out, std::size_t blockBytes) {
  if (ln_ == 1) {
    copyBytes(out, in, blockBytes);
    return;
  }
  const std::size_t per = std::max<std::size_t>(1, seg_->slotBytes() / ln_);
  std::size_t off = 0;
  do {
    const std::size_t l = std::min(per, blockBytes - off);
    const int p = parity();
    char* mine = seg_->slot(li_, p);
    for (int j = 0; j < ln_; ++j) {
      if (j != li_) copyBytes(mine + j * per, in + j * blockBytes + off, l);
    }
    copyBytes(out + li_ * blockBytes + off, in + li_ * blockBytes + off, l);
    post();
    waitAll(ctx);
    for (int j = 0; j < ln_; ++j) {
      if (j != li_) copyBytes(out + j * blockBytes + off, seg_->slot(j, p) + li_ * per, l);
    }
    off += l;
  } while (off < blockBytes);
}

// ---------------------------------------------------------------------------------------------------
// The ops.

void ShmProcessGroup::hierAllreduce(const Ctx& ctx, const Buffer& in, char* out, ReduceOp op) {
  const ReduceOp wire = wireOp(op);
  localAllreduce(ctx, static_cast<const char*>(in.data), out, in.count, in.dtype, wire, 1);
  if (leader()) {
    Buffer b{out, in.count, in.dtype, in.device};
    inter_->allreduce(b, b, wire, ctx.desc.timeout)->wait();
  }
  localBroadcast(ctx, 0, out, out, in.bytes());
  if (op == ReduceOp::kAvg) divideBy(out, in.count, in.dtype, size());
}

void ShmProcessGroup::doAllreduce(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    if (hier_) return hierAllreduce(ctx, in, static_cast<char*>(out.data), desc.op);
    localAllreduce(ctx, static_cast<const char*>(in.data), static_cast<char*>(out.data), in.count, in.dtype,
                   wireOp(desc.op), desc.op == ReduceOp::kAvg ? ln_ : 1);
  });
}

void ShmProcessGroup::doReduce(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    // Every rank computes the reduction (the same traffic as a reduce through shared memory); only the
    // root keeps it.
    char* target = rank() == desc.root ? static_cast<char*>(out.data) : scratch(in.bytes());
    if (hier_) return hierAllreduce(ctx, in, target, desc.op);
    localAllreduce(ctx, static_cast<const char*>(in.data), target, in.count, in.dtype, wireOp(desc.op),
                   desc.op == ReduceOp::kAvg ? ln_ : 1);
  });
}

void ShmProcessGroup::doReduceScatter(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    if (!hier_) {
      return localReduceScatter(ctx, static_cast<const char*>(in.data), static_cast<char*>(out.data),
                                out.count, in.dtype, wireOp(desc.op), desc.op == ReduceOp::kAvg ? ln_ : 1);
    }
    char* all = scratch(in.bytes());
    hierAllreduce(ctx, in, all, desc.op);
    if (out.bytes() != 0) std::memmove(out.data, all + rank() * out.bytes(), out.bytes());
  });
}

void ShmProcessGroup::doAllgather(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    const std::size_t b = in.bytes();
    if (!hier_)
      return localAllgather(ctx, static_cast<const char*>(in.data), static_cast<char*>(out.data), b);
    // Gather the host's inputs, exchange whole hosts among leaders (padded to the largest host), put
    // every block at its rank's place, and hand the result to the host.
    std::size_t maxLocal = 0;
    for (const auto& h : hostRanks_) maxLocal = std::max(maxLocal, h.size());
    const std::size_t hosts = hostRanks_.size();
    char* local = scratch(maxLocal * b * (hosts + 1));
    char* all = local + maxLocal * b;
    localAllgather(ctx, static_cast<const char*>(in.data), local, b);
    if (leader()) {
      Buffer send{local, in.count * maxLocal, in.dtype, in.device};
      Buffer recv{all, in.count * maxLocal * hosts, in.dtype, in.device};
      inter_->allgather(send, recv, desc.timeout)->wait();
      for (std::size_t h = 0; h < hosts && b > 0; ++h) {
        for (std::size_t l = 0; l < hostRanks_[h].size(); ++l) {
          std::memcpy(static_cast<char*>(out.data) + hostRanks_[h][l] * b, all + (h * maxLocal + l) * b, b);
        }
      }
    }
    localBroadcast(ctx, 0, static_cast<char*>(out.data), static_cast<char*>(out.data), out.bytes());
  });
}

void ShmProcessGroup::doBroadcast(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    const int rootHost = hostOf_[desc.root];
    const auto& mine = hostRanks_[myHost_];
    char* o = static_cast<char*>(out.data);
    if (myHost_ == rootHost) {
      int ri = static_cast<int>(std::find(mine.begin(), mine.end(), desc.root) - mine.begin());
      localBroadcast(ctx, ri, static_cast<const char*>(in.data), o, in.bytes());
    }
    if (!hier_) return;
    if (leader()) {
      Buffer b{o, out.count, out.dtype, out.device};
      inter_->broadcast(b, b, rootHost, desc.timeout)->wait();
    }
    if (myHost_ != rootHost) localBroadcast(ctx, 0, o, o, out.bytes());
  });
}

void ShmProcessGroup::doAlltoall(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (hier_) unsupported("alltoall across hosts");
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    localAlltoall(ctx, static_cast<const char*>(in.data), static_cast<char*>(out.data), in.bytes() / ln_);
  });
}

void ShmProcessGroup::doBarrier(const OpDesc& desc) {
  guarded(desc, 0, [&] {
    Ctx ctx = ctxFor(desc);
    localBarrier(ctx);
    if (!hier_) return;
    if (leader()) inter_->barrier(desc.timeout)->wait();
    localBarrier(ctx);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> makeShmProcessGroup(const ProcessGroupOptions& options,
                                                  const ShmConfig& config) {
  if (options.device.type != DeviceType::kCpu) {
    throw ConfigError(
        fmt::format("the shm backend works on host memory only, but this group is on {}; use "
                    "nccl for GPU buffers.",
                    deviceName(options.device)));
  }
  return std::make_unique<ShmProcessGroup>(options, config);
}

std::unique_ptr<ProcessGroup> makeShmProcessGroup(const ProcessGroupOptions& options) {
  return makeShmProcessGroup(options, shm::configFromEnv());
}

}  // namespace ds::comm
