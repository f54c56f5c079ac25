// The gloo backend: Gloo 0.5.0 (Debian snapshot 2022-05-18), TCP transport, options API only.
//
// Rules this file keeps (REFERENCE.md §8):
// - Only the options API (gloo::allreduce(AllreduceOptions&), ...) and unbound buffers. The old
//   algorithm classes (AllreduceRing, ...) pin each socket's SO_SNDBUF to their first message and make
//   later large transfers 10-100x slower; they must never run on this group's connections.
// - Every op carries a tag derived from its sequence number and the op's own timeout, so a stale
//   message can never match a later op and every wait is bounded by desc.timeout.
// - Types Gloo lacks are widened: bf16 is reduced in an f32 temporary and rounded back once. f16 uses
//   raw bits reduced by reduceInto (see F16Bits; each pairwise step computes in f32 and rounds, as
//   PyTorch's Gloo backend does). avg is sum on the wire, then divideBy (integers truncate toward zero).
// - Count 0 (the same on every rank by construction) returns without touching Gloo, whose
//   allreduce enforces elements > 0.
// - World size 1 runs locally (copies); Gloo's ring ops need a peer.
// - An op's Gloo options (its unbound buffers) are destroyed only when the next op completes (kept_):
//   destroying them at once made the op's thread spin in sched_yield, waiting for Gloo's event-loop
//   thread to let go of the last buffer, for up to a scheduler tick whenever the two shared a core.
#include "engine/comm/backends/gloo/gloo_process_group.h"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "engine/comm/backends/gloo/gloo_interface.h"
#include "engine/comm/backends/gloo/gloo_store_adapter.h"
#include "engine/comm/half.h"
#include "engine/comm/reduce.h"
#include "engine/common/error.h"
#include "engine/common/log.h"

namespace ds::comm {
namespace {

using Func = std::function<void(void*, const void*, const void*, size_t)>;

// Gloo writes to sockets without MSG_NOSIGNAL: a peer that died would kill us with SIGPIPE instead of
// surfacing as an IoException. Ignore SIGPIPE process-wide unless the program installed a handler
// (Python does the same at startup, which is why PyTorch never sees this).
void ignoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction cur {};
    if (::sigaction(SIGPIPE, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL) {
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      sigemptyset(&ign.sa_mask);
      ::sigaction(SIGPIPE, &ign, nullptr);
    }
  });
}

// f16 as raw bits. Gloo's own float16 must never be stored through: its operator= skips the store
// when the destination's old bits, read as an integer, convert to the new value (gloo/types.h:
// operator!= compares `*this == rhs.x`, which picks the int overload). So gloo::sum<float16> into a
// buffer holding 0x0002 leaves 0x0002 where 2.0 is due, and copies of float16 arrays go wrong the
// same way.
struct F16Bits {
  std::uint16_t bits;
};

// Gloo's c = a op b on f16 bits through reduceInto (dst op= src, in f32 with one rounding per
// element, as Gloo's float16 functions did). c may be a (Gloo reduces in place) or b (the ring
// reduce_scatter's last step writes into its own input chunk); every wire op is commutative.
Func f16ReduceFunc(ReduceOp op) {
  return [wire = wireOp(op)](void* c, const void* a, const void* b, size_t n) {
    if (c == b) return reduceInto(c, a, n, DType::kF16, wire);
    if (c != a) std::memcpy(c, a, n * sizeof(F16Bits));
    reduceInto(c, b, n, DType::kF16, wire);
  };
}

// Gloo's element-wise functions (gloo/math.h); the cast picks the 4-argument overload. f16: ours.
template <typename T>
Func reduceFunc(ReduceOp op) {
  if constexpr (std::is_same_v<T, F16Bits>) {
    return f16ReduceFunc(op);
  } else {
    using Fn = void (*)(void*, const void*, const void*, size_t);
    switch (wireOp(op)) {
      case ReduceOp::kSum:
        return static_cast<Fn>(&::gloo::sum<T>);
      case ReduceOp::kProd:
        return static_cast<Fn>(&::gloo::product<T>);
      case ReduceOp::kMin:
        return static_cast<Fn>(&::gloo::min<T>);
      case ReduceOp::kMax:
        return static_cast<Fn>(&::gloo::max<T>);
      case ReduceOp::kAvg:
        break;
    }
    throw InternalError("gloo: unhandled reduce op");
  }
}

// Calls f(T{}) with the C++ type Gloo reduces `t` as. bf16 never gets here (see widen()).
template <typename F>
decltype(auto) withType(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kF16:
      return f(F16Bits{});
    case DType::kI32:
      return f(std::int32_t{});
    case DType::kI64:
      return f(std::int64_t{});
    case DType::kU8:
      return f(std::uint8_t{});
    case DType::kI8:
      return f(std::int8_t{});
    case DType::kBF16:
      break;
  }
  throw InternalError(fmt::format("gloo: no native type for {}", dtypeName(t)));
}

std::uint32_t tagOf(const OpDesc& d) { return static_cast<std::uint32_t>(d.seq); }

// send/recv slots: a prefix no Gloo collective uses (theirs are 0x01-0x08, see gloo/types.h), then the
// user's tag, laid out like gloo::Slot::build. Sends and receives with equal (peer, tag) match in order.
constexpr std::uint64_t kP2pSlotPrefix = 0x40;
std::uint64_t p2pSlot(int tag) {
  return (kP2pSlotPrefix << 56) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) << 24);
}
// Each send is preceded by its size (8 bytes) on a slot of its own: Gloo's TCP pair ends the process
// (GLOO_ENFORCE in its event loop: "op.preamble.length <= op.nbytes") when a message is larger than
// the receive posted for it, so a receive learns the size first and posts the data only when it fits.
constexpr std::uint64_t kP2pSizeSlotPrefix = 0x43;
std::uint64_t p2pSizeSlot(int tag) {
  return (kP2pSizeSlotPrefix << 56) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) << 24);
}
// The exchange allreduce's slot: its own prefix, then the op's tag (its sequence number).
constexpr std::uint64_t kExchangeSlotPrefix = 0x41;
std::uint64_t exchangeSlot(std::uint32_t tag) {
  return (kExchangeSlotPrefix << 56) | (static_cast<std::uint64_t>(tag) << 24);
}

// The ring reduce_scatter's slot: its own prefix, then the op's tag. Its p-1 messages from the left
// neighbour share it and match in the order they were sent.
constexpr std::uint64_t kReduceScatterSlotPrefix = 0x42;
std::uint64_t reduceScatterSlot(std::uint32_t tag) {
  return (kReduceScatterSlotPrefix << 56) | (static_cast<std::uint64_t>(tag) << 24);
}

// bf16 <-> f32 temporaries: Gloo has no bfloat16, so bf16 is reduced in f32 and rounded back once
// (more accurate than rounding after every pairwise step; twice the wire bytes).
std::vector<float> widenBf16(const Buffer& b) {
  std::vector<float> out(b.count);
  const auto* p = static_cast<const std::uint16_t*>(b.data);
  for (std::size_t i = 0; i < b.count; ++i) out[i] = bf16ToFloat(p[i]);
  return out;
}
void narrowBf16(const float* src, std::size_t n, void* dst) {
  auto* p = static_cast<std::uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) p[i] = floatToBf16(src[i]);
}

// "[127.0.0.1]:1234" in a Gloo message -> "127.0.0.1".
std::string peerHostIn(const std::string& msg) {
  auto open = msg.find("peer [");
  if (open == std::string::npos) open = msg.find("error [");
  if (open == std::string::npos) return "";
  open = msg.find('[', open);
  auto close = msg.find(']', open);
  if (close == std::string::npos) return "";
  return msg.substr(open + 1, close - open - 1);
}

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(ProcessGroupOptions options, detail::GlooInterfaceChoice iface);
  ~GlooProcessGroup() override;

  std::string backendName() const override { return "gloo"; }

 protected:
  void doAllreduce(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doBroadcast(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doReduce(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doAllgather(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doReduceScatter(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doAlltoall(const OpDesc& desc, const Buffer& in, const Buffer& out) override;
  void doBarrier(const OpDesc& desc) override;
  // send and recv on Gloo's unbound buffers, posted when issued (as torch's ProcessGroupGloo posts
  // isend/irecv); Gloo's event-loop thread moves them, and a completion thread waits for each.
  std::unique_ptr<PostedP2p> postPointToPoint(const OpDesc& desc, const Buffer& data) override;
  class PostedBuffer;
  // The recvs of each (peer, tag): how many were issued and how many posted their data receive.
  struct RecvTurn {
    std::uint64_t posted = 0;
    std::uint64_t dataPosted = 0;
  };
  std::mutex recvOrderMu_;
  std::condition_variable recvOrderCv_;
  std::map<std::pair<int, int>, RecvTurn> recvOrder_;
  // On one core (ProcessGroup's class comment) gloo's ops still run on the worker, as torch's
  // ProcessGroupGloo runs every op on its worker threads. Run on the caller, an op waits inside
  // Gloo on Gloo's condition variable, which leaves the core idle until Gloo's event-loop thread is
  // woken by the peer's bytes; on this VM the wake-up of an idle vCPU waits at times for the next
  // scheduler tick, so the p99 of an 8-byte allreduce under mpirun's binding was 3-4 ms. On the
  // worker, the caller's Work::wait keeps the core busy yielding (DS_PG_WAIT_SPIN_US) and the
  // loop thread runs at the caller's next yield (docs/dev/benchmarks.md, "Where the tails come from").
  bool callerMayRunToEnd(const OpDesc&) const override { return false; }

 private:
  void connect();
  // Runs a Gloo call, translating its exceptions: a timeout -> ds::TimeoutError (the base then names
  // the missing ranks); anything else -> ds::BackendError with Gloo's text and the peer's ranks when
  // the text names an address. After a failure Gloo's pairs are closed, so later ops fail at once.
  template <typename F>
  void guarded(const char* what, F&& f);
  std::string ranksAt(const std::string& host) const;
  // Records the first failure (guarded's "failed earlier").
  void fail(std::string what) {
    std::lock_guard<std::mutex> lock(failureMu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    failure_ = std::move(what);
    failed_.store(true, std::memory_order_release);
  }
  void keep(std::shared_ptr<void> op) { kept_ = std::move(op); }
  // Allreduce of n elements of native type (or f32) with Gloo: small ones by exchange, the rest by
  // Gloo's own allreduce.
  void allreduceNative(const OpDesc& desc, DType t, void* in, void* out, std::size_t n);
  // Small allreduces as one exchange (issue 29): every rank sends its whole input to every other rank
  // and reduces the n inputs itself, in rank order, so that every rank computes the same bits. Gloo's
  // ring takes 2(n-1) steps, each a message and a wake-up of the thread waiting for it (tens to
  // hundreds of us a step on a VM, where 8 bytes take well under 1 us to move); the exchange takes
  // one. It moves (n-1) x the bytes per rank instead of 2(n-1)/n x, so it serves only while that is
  // small: (n-1) x bytes <= kExchangeMaxBytes. Bounded by desc.timeout like every Gloo wait.
  template <typename T>
  void allreduceByExchange(const OpDesc& desc, const T* in, T* out, std::size_t n, const Func& fn);
  static constexpr std::size_t kExchangeMaxBytes = std::size_t{256} << 10;
  // reduce_scatter of n elements per rank (input: p chunks of n) as a ring on unbound buffers: p-1
  // steps, each passing a partial sum of one chunk to the right neighbour and adding this rank's own
  // chunk to what came from the left; after the last step this rank holds the whole reduction of
  // its chunk. It moves (p-1)/p of the input per rank, half of what an allreduce would (this Gloo
  // has no reduce_scatter in its options API; its ReduceScatterHalvingDoubling is one of the old
  // algorithm classes this file must not use). `out` may be this rank's chunk of `in`.
  void reduceScatterNative(const OpDesc& desc, DType t, const void* in, void* out, std::size_t n);
  template <typename T>
  void reduceScatterRing(const OpDesc& desc, const T* in, T* out, std::size_t n, const Func& fn);

  detail::GlooInterfaceChoice iface_;
  std::unique_ptr<detail::GlooStoreAdapter> adapter_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::rendezvous::Context> context_;
  std::vector<std::string> rankHosts_;  // the address each rank's device bound to, for error messages
  // Set once Gloo failed (the worker and the p2p completion threads may fail at once): failed_ says
  // whether, failure_ (under failureMu_) what.
  std::atomic<bool> failed_{false};
  std::mutex failureMu_;
  std::string failure_;
  // The last op's Gloo options (its unbound buffers), destroyed when the next op completes. Gloo's
  // event-loop thread holds a reference to a buffer until it has finished handling the receive into
  // it, which is after it woke the op's thread; destroying the buffer before then makes the op's
  // thread spin in sched_yield until the loop thread lets go, and on a shared core the loop thread
  // is the one it just preempted: up to a scheduler tick (~4 ms). One op later it has long let go.
  // The buffers only point at the op's memory and never touch it again. Ops never run two at once.
  std::shared_ptr<void> kept_;
  // Scratch memory of the exchange allreduce and the ring reduce_scatter, in two sets that ops take
  // in turn, so an op's memory is reused only after the op between has completed: when each op's
  // own memory used to be freed (kept_). Grown, never shrunk. Fresh memory per op cost a page fault
  // per 4 KiB and an munmap: at 64 MiB, a quarter of a reduce_scatter's time. (Reused memory holds
  // old bits: nothing here may store through Gloo's float16, see F16Bits.)
  std::vector<std::byte> scratch_[2][2];
  int scratchSet_ = 0;
  // Starts an op's use of scratch: takes the other set.
  void nextScratch() { scratchSet_ ^= 1; }
  template <typename T>
  T* scratch(int which, std::size_t n) {
    auto& v = scratch_[scratchSet_][which];
    if (v.size() < n * sizeof(T)) v.resize(n * sizeof(T));
    return reinterpret_cast<T*>(v.data());
  }
};

GlooProcessGroup::GlooProcessGroup(ProcessGroupOptions options, detail::GlooInterfaceChoice iface)
    : ProcessGroup(std::move(options)), iface_(std::move(iface)) {
  if (size() == 1) return;
  try {
    connect();
  } catch (...) {
    shutdown();
    throw;
  }
}

GlooProcessGroup::~GlooProcessGroup() {
  shutdown();  // no op may run while the context goes away
  kept_.reset();
  context_.reset();
  device_.reset();
}

void GlooProcessGroup::connect() {
  const auto& o = options();
  const auto timeout = o.timeout;
  adapter_ =
      std::make_unique<detail::GlooStoreAdapter>(*o.store, fmt::format("pg/{}/gloo/", o.groupName), timeout);

  ::gloo::transport::tcp::attr attr;
  if (!iface_.iface.empty()) {
    attr.iface = iface_.iface;
  } else {
    attr.hostname = iface_.hostname;
  }
  try {
    device_ = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw BackendError(fmt::format("gloo could not open a TCP device on {} ({}): {}",
                                   iface_.iface.empty() ? iface_.hostname : iface_.iface, iface_.reason,
                                   e.what()));
  }
  log::debug("gloo group '{}' rank {}: device {} ({})", o.groupName, rank(), device_->str(), iface_.reason);

  // Our own "joined" keys, before Gloo's: when the mesh cannot form they say who never arrived.
  const std::string& host = iface_.hostname;
  adapter_->set(fmt::format("joined/{}", rank()), std::vector<char>(host.begin(), host.end()));

  context_ = std::make_shared<::gloo::rendezvous::Context>(rank(), size());
  context_->setTimeout(timeout);
  std::string failure;
  bool timedOut = false;
  try {
    context_->connectFullMesh(*adapter_, device_);
  } catch (const TimeoutError& e) {
    timedOut = true;
    failure = e.what();
  } catch (const ::gloo::IoException& e) {
    timedOut = std::strstr(e.what(), "imed out") != nullptr || std::strstr(e.what(), "timeout") != nullptr;
    failure = e.what();
  } catch (const ::gloo::EnforceNotMet& e) {
    failure = e.what();
  } catch (const ::gloo::Exception& e) {
    failure = e.what();
  }
  if (failure.empty()) {
    rankHosts_.resize(size());
    for (int r = 0; r < size(); ++r) {
      auto v = adapter_->get(fmt::format("joined/{}", r));
      rankHosts_[r].assign(v.begin(), v.end());
    }
    return;
  }
  std::vector<int> missing;
  for (int r = 0; r < size(); ++r) {
    if (!o.store->check({adapter_->prefix() + fmt::format("joined/{}", r)}, std::chrono::seconds(5)))
      missing.push_back(r);
  }
  std::string who =
      missing.empty()
          ? "every rank joined the rendezvous, so a connection between ranks failed (firewall, wrong "
            "interface: check GLOO_SOCKET_IFNAME)"
          : fmt::format(
                "ranks {} never joined group '{}' (not started, crashed, or a different "
                "group/store)",
                fmt::join(missing, ", "), o.groupName);
  std::string msg =
      fmt::format("gloo rank {} of {} could not connect to its peers within {} ms: {}. Cause: {}", rank(),
                  size(), timeout.count(), who, failure);
  if (timedOut) throw TimeoutError(msg);
  throw BackendError(msg);
}

std::string GlooProcessGroup::ranksAt(const std::string& host) const {
  std::vector<int> rs;
  for (int r = 0; r < static_cast<int>(rankHosts_.size()); ++r) {
    if (r != rank() && rankHosts_[r] == host) rs.push_back(r);
  }
  if (rs.empty()) return "";
  if (rs.size() == 1) return fmt::format(" (the peer at {} is rank {})", host, rs[0]);
  return fmt::format(" (the peer at {} is one of ranks {})", host, fmt::join(rs, ", "));
}

template <typename F>
void GlooProcessGroup::guarded(const char* what, F&& f) {
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(failureMu_);
    throw BackendError(fmt::format("the gloo connections of group '{}' failed earlier ({}); restart the job.",
                                   options().groupName, failure_));
  }
  std::string err;
  try {
    f();
    return;
  } catch (const ::gloo::IoException& e) {
    std::string m = e.what();
    if (m.find("Timed out") != std::string::npos || m.find("timed out") != std::string::npos) {
      fail(fmt::format("{} timed out", what));
      throw TimeoutError(m);
    }
    err = m + ranksAt(peerHostIn(m)) +
          ". That peer probably died or destroyed its group; its own log has the first error";
  } catch (const ::gloo::EnforceNotMet& e) {
    err = e.what();
  } catch (const ::gloo::Exception& e) {
    err = e.what();
  }
  fail(err);
  throw BackendError(err);
}

void GlooProcessGroup::allreduceNative(const OpDesc& desc, DType t, void* in, void* out, std::size_t n) {
  withType(t, [&](auto tv) {
    using T = decltype(tv);
    if (static_cast<std::size_t>(size() - 1) * n * sizeof(T) <= kExchangeMaxBytes) {
      allreduceByExchange(desc, static_cast<const T*>(in), static_cast<T*>(out), n, reduceFunc<T>(desc.op));
      return;
    }
    auto opts = std::make_shared<::gloo::AllreduceOptions>(context_);
    if (in != out) opts->setInput(static_cast<T*>(in), n);
    opts->setOutput(static_cast<T*>(out), n);
    opts->setReduceFunction(reduceFunc<T>(desc.op));
    opts->setTag(tagOf(desc));
    opts->setTimeout(desc.timeout);
    guarded("allreduce", [&] { ::gloo::allreduce(*opts); });
    keep(std::move(opts));
  });
}

template <typename T>
void GlooProcessGroup::allreduceByExchange(const OpDesc& desc, const T* in, T* out, std::size_t n,
                                           const Func& fn) {
  const int p = size(), me = rank();
  const std::size_t bytes = n * sizeof(T);
  const std::uint64_t slot = exchangeSlot(tagOf(desc));
  // Every rank's input in rank order (this rank's copied in: `in` may be `out`), in the group's
  // scratch. The unbound buffers live until the next op completes (kept_), as Gloo's own options do.
  struct Exchange {
    std::unique_ptr<::gloo::transport::UnboundBuffer> send, recv;
  };
  auto x = std::make_shared<Exchange>();
  nextScratch();
  T* all = scratch<T>(0, n * static_cast<std::size_t>(p));
  std::copy_n(in, n, all + n * static_cast<std::size_t>(me));
  guarded("allreduce", [&] {
    x->send = context_->createUnboundBuffer(all + n * static_cast<std::size_t>(me), bytes);
    x->recv = context_->createUnboundBuffer(all, bytes * static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      if (r == me) continue;
      x->recv->recv(r, slot, bytes * static_cast<std::size_t>(r), bytes);
      x->send->send(r, slot);
    }
    for (int k = 0; k < p - 1; ++k) x->send->waitSend(desc.timeout);
    for (int k = 0; k < p - 1; ++k) x->recv->waitRecv(desc.timeout);
  });
  // The same order on every rank: ((x0 op x1) op x2) ... (p >= 2: one rank runs locally).
  fn(out, all, all + n, n);
  for (int r = 2; r < p; ++r) fn(out, out, all + n * static_cast<std::size_t>(r), n);
  keep(std::move(x));
}

void GlooProcessGroup::doAllreduce(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
    return;
  }
  if (in.dtype == DType::kBF16) {
    std::vector<float> tmp = widenBf16(in);
    allreduceNative(desc, DType::kF32, tmp.data(), tmp.data(), tmp.size());
    if (desc.op == ReduceOp::kAvg) divideBy(tmp.data(), tmp.size(), DType::kF32, size());
    narrowBf16(tmp.data(), tmp.size(), out.data);
    return;
  }
  allreduceNative(desc, in.dtype, in.data, out.data, in.count);
  if (desc.op == ReduceOp::kAvg) divideBy(out.data, out.count, out.dtype, size());
}

void GlooProcessGroup::doBroadcast(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
    return;
  }
  // Pure data movement: bytes, whatever the dtype.
  auto opts = std::make_shared<::gloo::BroadcastOptions>(context_);
  if (rank() == desc.root && in.data != out.data)
    opts->setInput(static_cast<std::uint8_t*>(in.data), in.bytes());
  opts->setOutput(static_cast<std::uint8_t*>(out.data), out.bytes());
  opts->setRoot(desc.root);
  opts->setTag(tagOf(desc));
  opts->setTimeout(desc.timeout);
  guarded("broadcast", [&] { ::gloo::broadcast(*opts); });
  keep(std::move(opts));
}

void GlooProcessGroup::doReduce(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  const bool root = rank() == desc.root;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
    return;
  }
  // Gloo's ring reduce uses `out` as scratch on every rank. Our contract writes output at root only,
  // so non-root ranks reduce into a scratch buffer (their input is only read).
  auto run = [&](DType t, void* src, void* dst, std::size_t n) {
    withType(t, [&](auto tv) {
      using T = decltype(tv);
      auto opts = std::make_shared<::gloo::ReduceOptions>(context_);
      if (src != dst) opts->setInput(static_cast<T*>(src), n);
      opts->setOutput(static_cast<T*>(dst), n);
      opts->setRoot(desc.root);
      opts->setReduceFunction(reduceFunc<T>(desc.op));
      opts->setTag(tagOf(desc));
      opts->setTimeout(desc.timeout);
      guarded("reduce", [&] { ::gloo::reduce(*opts); });
      keep(std::move(opts));
    });
  };
  if (in.dtype == DType::kBF16) {
    std::vector<float> tmp = widenBf16(in);  // ours: in-place is fine on every rank
    run(DType::kF32, tmp.data(), tmp.data(), tmp.size());
    if (root) {
      if (desc.op == ReduceOp::kAvg) divideBy(tmp.data(), tmp.size(), DType::kF32, size());
      narrowBf16(tmp.data(), tmp.size(), out.data);
    }
    return;
  }
  if (root) {
    run(in.dtype, in.data, out.data, in.count);
    if (desc.op == ReduceOp::kAvg) divideBy(out.data, out.count, out.dtype, size());
  } else {
    std::vector<std::uint8_t> scratch(in.bytes());
    run(in.dtype, in.data, scratch.data(), in.count);
  }
}

void GlooProcessGroup::doAllgather(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
    return;
  }
  auto opts = std::make_shared<::gloo::AllgatherOptions>(context_);
  if (!desc.inPlace)
    opts->setInput(static_cast<std::uint8_t*>(in.data), in.bytes());  // in-place: in is our slot
  opts->setOutput(static_cast<std::uint8_t*>(out.data), out.bytes());
  opts->setTag(tagOf(desc));
  opts->setTimeout(desc.timeout);
  guarded("allgather", [&] { ::gloo::allgather(*opts); });
  keep(std::move(opts));
}

void GlooProcessGroup::doReduceScatter(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (out.count == 0) return;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
    return;
  }
  if (in.dtype == DType::kBF16) {
    std::vector<float> tmp = widenBf16(in);
    float* mine = tmp.data() + static_cast<std::size_t>(rank()) * out.count;
    reduceScatterNative(desc, DType::kF32, tmp.data(), mine, out.count);
    if (desc.op == ReduceOp::kAvg) divideBy(mine, out.count, DType::kF32, size());
    narrowBf16(mine, out.count, out.data);
    return;
  }
  reduceScatterNative(desc, in.dtype, in.data, out.data, out.count);
  if (desc.op == ReduceOp::kAvg) divideBy(out.data, out.count, out.dtype, size());
}

void GlooProcessGroup::reduceScatterNative(const OpDesc& desc, DType t, const void* in, void* out,
                                           std::size_t n) {
  withType(t, [&](auto tv) {
    using T = decltype(tv);
    reduceScatterRing(desc, static_cast<const T*>(in), static_cast<T*>(out), n, reduceFunc<T>(desc.op));
  });
}

template <typename T>
void GlooProcessGroup::reduceScatterRing(const OpDesc& desc, const T* in, T* out, std::size_t n,
                                         const Func& fn) {
  const int p = size(), me = rank();
  const int right = (me + 1) % p, left = (me + p - 1) % p;
  const std::size_t bytes = n * sizeof(T);
  const std::uint64_t slot = reduceScatterSlot(tagOf(desc));
  auto chunk = [&](int c) { return in + n * static_cast<std::size_t>(((c % p) + p) % p); };
  // acc: the partial sum this rank passes on; got: what the left neighbour passed; both in the
  // group's scratch. The unbound buffers live until the next op completes (kept_).
  struct Ring {
    std::unique_ptr<::gloo::transport::UnboundBuffer> input, accBuf, gotBuf;
  };
  auto x = std::make_shared<Ring>();
  nextScratch();
  T* acc = scratch<T>(0, n);
  T* got = scratch<T>(1, n);
  guarded("reduce_scatter", [&] {
    // Gloo only reads from a buffer it sends; the cast lets the caller's input be sent in place.
    x->input = context_->createUnboundBuffer(const_cast<T*>(in), bytes * static_cast<std::size_t>(p));
    x->accBuf = context_->createUnboundBuffer(acc, bytes);
    x->gotBuf = context_->createUnboundBuffer(got, bytes);
    for (int s = 0; s < p - 1; ++s) {
      x->gotBuf->recv(left, slot);
      if (s == 0) {
        x->input->send(right, slot, static_cast<std::size_t>(chunk(me - 1) - in) * sizeof(T), bytes);
        x->input->waitSend(desc.timeout);
      } else {
        x->accBuf->send(right, slot);
        x->accBuf->waitSend(desc.timeout);
      }
      x->gotBuf->waitRecv(desc.timeout);
      // got = the partial of chunk (me - s - 2) from ranks left of here; add this rank's own.
      T* into = s == p - 2 ? out : acc;
      fn(into, got, chunk(me - s - 2), n);
    }
  });
  keep(std::move(x));
}

void GlooProcessGroup::doAlltoall(const OpDesc& desc, const Buffer& in, const Buffer& out) {
  if (in.count == 0) return;
  if (size() == 1) {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.bytes());
    return;
  }
  // Gloo's alltoall sends chunk j of `in` while receiving chunk j of `out` from rank j: with in == out
  // an arriving chunk could overwrite one not yet sent, so in-place goes through a copy.
  std::vector<std::uint8_t> copy;
  void* src = in.data;
  if (in.data == out.data) {
    copy.assign(static_cast<std::uint8_t*>(in.data), static_cast<std::uint8_t*>(in.data) + in.bytes());
    src = copy.data();
  }
  auto opts = std::make_shared<::gloo::AlltoallOptions>(context_);
  opts->setInput(static_cast<std::uint8_t*>(src), in.bytes());
  opts->setOutput(static_cast<std::uint8_t*>(out.data), out.bytes());
  opts->setTag(tagOf(desc));
  opts->setTimeout(desc.timeout);
  guarded("alltoall", [&] { ::gloo::alltoall(*opts); });
  keep(std::move(opts));
}

void GlooProcessGroup::doBarrier(const OpDesc& desc) {
  if (size() == 1) return;
  auto opts = std::make_shared<::gloo::BarrierOptions>(context_);
  opts->setTag(tagOf(desc));
  opts->setTimeout(desc.timeout);
  guarded("barrier", [&] { ::gloo::barrier(*opts); });
  keep(std::move(opts));
}

// A send or recv posted on unbound buffers: its size message and its data (see p2pSizeSlot). A send
// posts both at once; a recv posts the size's receive at once and the data's when the size is known
// (on its completion thread). The base destroys it only after its completion thread took its next op
// (Gloo's loop thread may hold a buffer a moment after the wake-up, see kept_).
class GlooProcessGroup::PostedBuffer final : public PostedP2p {
 public:
  PostedBuffer(GlooProcessGroup& pg, const OpDesc& desc, void* data, std::size_t bytes)
      : pg_(pg), send_(desc.type == OpType::kSend), peer_(desc.root), tag_(desc.tag), data_(data), bytes_(bytes),
        size_(bytes) {}

  void post() {
    if (!send_) {
      std::lock_guard<std::mutex> lock(pg_.recvOrderMu_);
      ticket_ = pg_.recvOrder_[{peer_, tag_}].posted++;
    }
    pg_.guarded(send_ ? "send" : "recv", [&] {
      sizeBuf_ = pg_.context_->createUnboundBuffer(&size_, sizeof size_);
      if (send_) {
        sizeBuf_->send(peer_, p2pSizeSlot(tag_));
        // Count 0 still sends an empty message, so the matching recv completes only after this send.
        dataBuf_ = pg_.context_->createUnboundBuffer(data_, bytes_);
        dataBuf_->send(peer_, p2pSlot(tag_));
      } else {
        sizeBuf_->recv(peer_, p2pSizeSlot(tag_));
      }
    });
  }

  void complete(std::chrono::steady_clock::time_point deadline) override {
    if (send_) {
      wait(*sizeBuf_, deadline);
      wait(*dataBuf_, deadline);
      return;
    }
    wait(*sizeBuf_, deadline);
    const std::uint64_t sent = size_;  // the sender's size, now received
    void* into = data_;
    if (sent != bytes_) {
      // Received and dropped, so that the sender completes and the pair stays in step.
      drain_.resize(static_cast<std::size_t>(sent));
      into = drain_.data();
    }
    {
      // Data receives of one (peer, tag) are posted in the order their ops were issued, whichever
      // completion thread learns its size first: Gloo matches a slot's messages in posting order.
      std::unique_lock<std::mutex> order(pg_.recvOrderMu_);
      auto& turn = pg_.recvOrder_[{peer_, tag_}];
      while (turn.dataPosted != ticket_) {
        if (aborted_.load()) throw BackendError("aborted");
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
          throw TimeoutError(fmt::format("an earlier recv from rank {} with tag {} did not get its message in time",
                                         peer_, tag_));
        }
        pg_.recvOrderCv_.wait_until(order, std::min(deadline, now + std::chrono::milliseconds(100)));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (aborted_.load()) throw BackendError("aborted");
        pg_.guarded("recv", [&] {
          dataBuf_ = pg_.context_->createUnboundBuffer(into, static_cast<std::size_t>(sent));
          dataBuf_->recv(peer_, p2pSlot(tag_));
        });
      }
      ++turn.dataPosted;
      pg_.recvOrderCv_.notify_all();
    }
    wait(*dataBuf_, deadline);
    if (sent != bytes_) {
      throw BackendError(fmt::format("recv from rank {} (tag {}) expected {} bytes but rank {} sent {} bytes with "
                                     "that tag; the sender's count and dtype must match the receiver's",
                                     peer_, tag_, bytes_, peer_, sent));
    }
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.store(true);
    for (auto* b : {sizeBuf_.get(), dataBuf_.get()}) {
      if (b == nullptr) continue;
      if (send_) {
        b->abortWaitSend();
      } else {
        b->abortWaitRecv();
      }
    }
  }

 private:
  void wait(::gloo::transport::UnboundBuffer& buf, std::chrono::steady_clock::time_point deadline) {
    // Gloo counts its timeout in whole ms and takes -1 for "the context's": at least 1 ms.
    const auto left = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now()));
    bool done = false;
    pg_.guarded(send_ ? "send" : "recv", [&] { done = send_ ? buf.waitSend(left) : buf.waitRecv(left); });
    if (!done) throw BackendError("aborted");  // abort(): the base says why
  }

  GlooProcessGroup& pg_;
  const bool send_;
  const int peer_;
  const int tag_;
  void* data_;
  const std::size_t bytes_;
  std::uint64_t size_;  // sent: this op's size; received: the sender's
  std::unique_ptr<::gloo::transport::UnboundBuffer> sizeBuf_;
  std::unique_ptr<::gloo::transport::UnboundBuffer> dataBuf_;
  std::vector<char> drain_;
  std::uint64_t ticket_ = 0;  // a recv's place among the recvs of its (peer, tag)
  std::mutex mu_;  // dataBuf_ of a recv is made on the completion thread while abort() may look at it
  std::atomic<bool> aborted_{false};
};

std::unique_ptr<ProcessGroup::PostedP2p> GlooProcessGroup::postPointToPoint(const OpDesc& desc,
                                                                            const Buffer& data) {
  auto posted = std::make_unique<PostedBuffer>(*this, desc, data.data, data.bytes());
  posted->post();
  return posted;
}

}  // namespace

std::unique_ptr<ProcessGroup> makeGlooProcessGroup(const ProcessGroupOptions& options) {
  if (options.device.type != DeviceType::kCpu) {
    throw BackendError(
        fmt::format("backend gloo does not support {} buffers: this Gloo was built without CUDA, so it moves "
                    "host memory only. "
                    "Use the nccl backend for GPU buffers, or put the buffers on cpu.",
                    deviceName(options.device)));
  }
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  auto iface =
      detail::chooseGlooInterface(ifname ? std::optional<std::string>(ifname) : std::nullopt, options.world);
  ignoreSigpipeOnce();
  return std::make_unique<GlooProcessGroup>(options, std::move(iface));
}

}  // namespace ds::comm
