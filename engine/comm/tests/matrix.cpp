#include "engine/comm/tests/matrix.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "engine/comm/reduce.h"
#include "engine/store/hash_store.h"

namespace ds::comm::testing {
namespace {

bool isSigned(DType t) { return t != DType::kU8; }

bool reducing(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kReduce || t == OpType::kReduceScatter;
}

// Inputs are small integers, so that every sum and product is exact in every dtype (even i8, f16
// and bf16) and the only inexact step is avg's division.
double inputValue(int rank, std::size_t i, DType t, OpType op, ReduceOp rop) {
  const long r = rank;
  const long k = static_cast<long>(i % 1009);
  if (reducing(op)) {
    switch (rop) {
      case ReduceOp::kProd:
        return 1 + (r + k) % 2;
      case ReduceOp::kMin:
      case ReduceOp::kMax:
        return ((r * 5 + k * 3) % 11) - (isSigned(t) ? 5 : 0);
      default:
        return ((r * 3 + k) % 7) - (isSigned(t) ? 3 : 0);
    }
  }
  return ((r * 13 + k) % 100) - (isSigned(t) ? 50 : 0);
}

double fold(ReduceOp rop, double acc, double v) {
  switch (rop) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return acc + v;
    case ReduceOp::kProd:
      return acc * v;
    case ReduceOp::kMin:
      return std::min(acc, v);
    case ReduceOp::kMax:
      return std::max(acc, v);
  }
  return acc;
}

// The reduction over all ranks of element `i` of the inputs, rounded into the dtype.
double reduced(const MatrixCase& c, int n, std::size_t i) {
  double acc = inputValue(0, i, c.dtype, c.op, c.rop);
  for (int r = 1; r < n; ++r) acc = fold(c.rop, acc, inputValue(r, i, c.dtype, c.op, c.rop));
  if (c.rop == ReduceOp::kAvg) acc = isFloating(c.dtype) ? acc / n : std::trunc(acc / n);
  std::uint64_t scratch = 0;
  setElementFromDouble(&scratch, 0, c.dtype, acc);
  return elementAsDouble(&scratch, 0, c.dtype);
}

double tolerance(DType t) {
  switch (t) {
    case DType::kF16:
      return 1e-3;
    case DType::kBF16:
      return 8e-3;
    case DType::kF32:
      return 1e-6;
    case DType::kF64:
      return 1e-12;
    default:
      return 0;
  }
}

struct DeviceBuffer {
  const MemoryOps& mem;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer(const MemoryOps& m, std::size_t b) : mem(m), bytes(b) { ptr = b > 0 ? mem.alloc(b) : nullptr; }
  ~DeviceBuffer() {
    if (ptr != nullptr) mem.free(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

std::string MatrixCase::name() const {
  return fmt::format("{} {}{} count={} {} root={}", opName(op), dtypeName(dtype),
                     reducing(op) ? fmt::format(" {}", reduceOpName(rop)) : "", count,
                     inPlace ? "in-place" : "out-of-place", root);
}

MemoryOps hostMemory() {
  MemoryOps m;
  m.alloc = [](std::size_t b) { return ::operator new(b); };
  m.free = [](void* p) { ::operator delete(p); };
  m.toDevice = [](void* d, const void* s, std::size_t b) { if (b != 0) std::memcpy(d, s, b); };
  m.toHost = [](void* d, const void* s, std::size_t b) { if (b != 0) std::memcpy(d, s, b); };
  return m;
}

std::vector<MatrixCase> matrixCases(int n, const MatrixShape& shape) {
  std::vector<MatrixCase> out;
  const int root = n - 1;  // a non-zero root where there is one
  auto addAll = [&](DType t, std::size_t count, const std::vector<ReduceOp>& rops) {
    for (bool inPlace : {false, true}) {
      for (OpType op : {OpType::kAllreduce, OpType::kReduce, OpType::kReduceScatter}) {
        for (ReduceOp rop : rops)
          out.push_back({op, t, rop, count, inPlace, op == OpType::kReduce ? root : 0});
      }
      out.push_back({OpType::kBroadcast, t, ReduceOp::kSum, count, inPlace, root});
      out.push_back({OpType::kAllgather, t, ReduceOp::kSum, count, inPlace, 0});
    }
    out.push_back({OpType::kAlltoall, t, ReduceOp::kSum, count, false, 0});
    if (shape.pointToPoint && n > 1) out.push_back({OpType::kSend, t, ReduceOp::kSum, count, false, 0});
  };
  std::vector<ReduceOp> allOps(std::begin(kAllReduceOps), std::end(kAllReduceOps));
  for (DType t : shape.dtypes) {
    for (std::size_t count : shape.counts) addAll(t, count, allOps);
  }
  if (shape.largeCount > 0) {
    for (DType t : {DType::kF32, DType::kBF16, DType::kI32}) {
      if (std::find(shape.dtypes.begin(), shape.dtypes.end(), t) != shape.dtypes.end()) {
        addAll(t, shape.largeCount, allOps);
      }
    }
  }
  out.push_back({OpType::kBarrier, DType::kF32, ReduceOp::kSum, 0, false, 0});
  return out;
}

std::string runCase(ProcessGroup& pg, const MatrixCase& c, const MemoryOps& mem) {
  const int n = pg.size();
  const int me = pg.rank();
  const std::size_t es = dtypeSize(c.dtype);
  auto fill = [&](std::vector<char>& host, std::size_t elems, int rank, std::size_t offset) {
    for (std::size_t i = 0; i < elems; ++i) {
      setElementFromDouble(host.data(), offset + i, c.dtype, inputValue(rank, i, c.dtype, c.op, c.rop));
    }
  };
  // Sizes of the input and output as the group sees them.
  std::size_t inElems = c.count;
  std::size_t outElems = c.count;
  if (c.op == OpType::kAllgather) outElems = c.count * n;
  if (c.op == OpType::kReduceScatter) inElems = c.count * n;
  if (c.op == OpType::kAlltoall) inElems = outElems = c.count * n;

  // Element i of rank r's input is inputValue(r, i); for alltoall, chunk j (elements j*count to
  // (j+1)*count - 1) is meant for rank j.
  std::vector<char> hostIn(inElems * es);
  fill(hostIn, inElems, me, 0);
  std::vector<char> hostOut(outElems * es, 0);
  DeviceBuffer inBuf(mem, hostIn.size());
  DeviceBuffer outBuf(mem, hostOut.size());
  auto buf = [&](void* p, std::size_t elems) { return Buffer{p, elems, c.dtype, mem.device}; };
  std::shared_ptr<Work> work;
  void* resultPtr = outBuf.ptr;
  std::size_t resultElems = outElems;

  if (c.op == OpType::kBarrier) {
    pg.barrier()->wait();
    return "";
  }
  if (c.op == OpType::kSend) {
    bool sender = me % 2 == 0 && me + 1 < n;
    bool receiver = me % 2 == 1;
    if (sender) {
      mem.toDevice(inBuf.ptr, hostIn.data(), hostIn.size());
      pg.send(buf(inBuf.ptr, c.count), me + 1, 7)->wait();
      return "";
    }
    if (!receiver) return "";
    pg.recv(buf(outBuf.ptr, c.count), me - 1, 7)->wait();
  } else if (!c.inPlace) {
    if (inBuf.ptr != nullptr) mem.toDevice(inBuf.ptr, hostIn.data(), hostIn.size());
    if (outBuf.ptr != nullptr) mem.toDevice(outBuf.ptr, hostOut.data(), hostOut.size());
    Buffer in = buf(inBuf.ptr, inElems);
    Buffer out = buf(outBuf.ptr, outElems);
    switch (c.op) {
      case OpType::kAllreduce:
        work = pg.allreduce(in, out, c.rop);
        break;
      case OpType::kBroadcast:
        work = pg.broadcast(in, out, c.root);
        break;
      case OpType::kReduce:
        work = pg.reduce(in, out, c.root, c.rop);
        break;
      case OpType::kAllgather:
        work = pg.allgather(in, out);
        break;
      case OpType::kReduceScatter:
        work = pg.reduceScatter(in, out, c.rop);
        break;
      case OpType::kAlltoall:
        work = pg.alltoall(in, out);
        break;
      default:
        break;
    }
    work->wait();
  } else {
    // In place: one buffer of the larger size, holding the input where the op expects it.
    std::size_t big = std::max(inElems, outElems);
    std::vector<char> host(big * es, 0);
    // memcpy from an empty vector's data() (null) is undefined even for 0 bytes (UBSan).
    if (!hostIn.empty()) {
      std::size_t at = c.op == OpType::kAllgather ? me * c.count * es : 0;
      std::memcpy(host.data() + at, hostIn.data(), hostIn.size());
    }
    DeviceBuffer one(mem, host.size());
    if (one.ptr != nullptr) mem.toDevice(one.ptr, host.data(), host.size());
    Buffer all = buf(one.ptr, big);
    switch (c.op) {
      case OpType::kAllreduce:
        work = pg.allreduce(all, all, c.rop);
        break;
      case OpType::kBroadcast:
        work = pg.broadcast(all, all, c.root);
        break;
      case OpType::kReduce:
        work = pg.reduce(all, all, c.root, c.rop);
        break;
      case OpType::kAllgather:
        work = pg.allgather(all.slice(me * c.count, c.count), all);
        break;
      case OpType::kReduceScatter:
        work = pg.reduceScatter(all, all.slice(me * c.count, c.count), c.rop);
        break;
      default:
        break;
    }
    work->wait();
    hostOut.assign(host.size(), 0);
    if (one.ptr != nullptr) mem.toHost(hostOut.data(), one.ptr, host.size());
    if (c.op == OpType::kReduceScatter && c.count != 0) {
      std::memmove(hostOut.data(), hostOut.data() + me * c.count * es, c.count * es);
      resultElems = c.count;
    }
    resultPtr = nullptr;
  }
  if (resultPtr != nullptr && resultElems > 0) mem.toHost(hostOut.data(), resultPtr, resultElems * es);
  if (c.op == OpType::kReduce && me != c.root) return "";  // only the root's output is defined

  std::string errors;
  int wrong = 0;
  for (std::size_t i = 0; i < resultElems; ++i) {
    double want = 0;
    switch (c.op) {
      case OpType::kAllreduce:
      case OpType::kReduce:
        want = reduced(c, n, i);
        break;
      case OpType::kReduceScatter:
        want = reduced(c, n, me * c.count + i);
        break;
      case OpType::kBroadcast:
        want = inputValue(c.root, i, c.dtype, c.op, c.rop);
        break;
      case OpType::kAllgather:
        want = inputValue(static_cast<int>(i / c.count), i % c.count, c.dtype, c.op, c.rop);
        break;
      case OpType::kAlltoall: {
        std::size_t from = i / c.count;
        want = inputValue(static_cast<int>(from), me * c.count + i % c.count, c.dtype, c.op, c.rop);
        break;
      }
      case OpType::kSend:
        want = inputValue(me - 1, i, c.dtype, c.op, c.rop);
        break;
      default:
        break;
    }
    double got = elementAsDouble(hostOut.data(), i, c.dtype);
    double tol = tolerance(c.dtype) * std::max(1.0, std::fabs(want));
    if (!(std::fabs(got - want) <= tol)) {
      if (++wrong <= 5) errors += fmt::format(" [{}] got {} want {};", i, got, want);
    }
  }
  if (wrong == 0) return "";
  return fmt::format("rank {}: {}: {} wrong of {}:{}", me, c.name(), wrong, resultElems, errors);
}

std::vector<std::string> runCases(ProcessGroup& pg, const std::vector<MatrixCase>& cases,
                                  const MemoryOps& mem) {
  std::vector<std::string> failures;
  for (const auto& c : cases) {
    std::string f = runCase(pg, c, mem);
    if (!f.empty()) failures.push_back(f);
  }
  return failures;
}

namespace {

Buffer f32(std::vector<float>& v) { return Buffer{v.data(), v.size(), DType::kF32, Device{}}; }

// What rank `from` sends as message `k`: distinct per sender and message, exact in f32.
std::vector<float> message(int from, int k, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(from * 4096 + k * 64 + static_cast<int>(i % 61));
  return v;
}

}  // namespace

std::vector<std::string> runP2pPatterns(ProcessGroup& pg, std::size_t count) {
  std::vector<std::string> fails;
  const int n = pg.size();
  const int me = pg.rank();
  if (n < 2) return fails;
  auto check = [&](const std::string& what, const std::vector<float>& got, int from, int k) {
    if (got != message(from, k, count)) {
      fails.push_back(fmt::format("{} (count {}): rank {} got the wrong data from rank {} (message {}; first element "
                                  "{}, expected {})",
                                  what, count, me, from, k, got.empty() ? 0.0f : got[0],
                                  count == 0 ? 0.0f : message(from, k, count)[0]));
    }
  };
  // Sends message k to `to` and receives `from`'s message k, both posted before either is waited for.
  auto exchange = [&](const char* what, int to, int from, int tag, int k, bool sendWaitedFirst) {
    auto out = message(me, k, count);
    std::vector<float> in(count);
    auto s = pg.send(f32(out), to, tag);
    auto r = pg.recv(f32(in), from, tag);
    (sendWaitedFirst ? s : r)->wait();
    (sendWaitedFirst ? r : s)->wait();
    check(what, in, from, k);
  };
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  exchange("ring shift, send first", next, prev, 3, 0, true);
  if ((me ^ 1) < n) exchange("pair exchange, both send first", me ^ 1, me ^ 1, 4, 1, false);
  // Two messages to `next` (tags tagA, tagB; message numbers k, k+1), both received from `prev`
  // with the second receive posted and waited for first when `reversed`, else waited for first only.
  auto twoMessages = [&](const char* what, int tagA, int tagB, int k, bool reversed) {
    auto a = message(me, k, count);
    auto b = message(me, k + 1, count);
    std::vector<float> inA(count);
    std::vector<float> inB(count);
    auto sa = pg.send(f32(a), next, tagA);
    auto sb = pg.send(f32(b), next, tagB);
    std::shared_ptr<Work> ra;
    std::shared_ptr<Work> rb;
    if (reversed) {
      rb = pg.recv(f32(inB), prev, tagB);
      ra = pg.recv(f32(inA), prev, tagA);
    } else {
      ra = pg.recv(f32(inA), prev, tagA);
      rb = pg.recv(f32(inB), prev, tagB);
    }
    for (auto* w : {&rb, &ra, &sa, &sb}) (*w)->wait();
    check(what, inA, prev, k);
    check(what, inB, prev, k + 1);
  };
  twoMessages("two tags, received in reverse", 21, 22, 2, true);
  // Two messages of one tag arrive in the order sent, whichever receive is waited for first.
  twoMessages("one tag twice, in order", 23, 23, 5, false);
  {
    // Many of each outstanding at once, waited for only at the end (a benchmark's batch).
    constexpr int kBatch = 24;
    std::deque<std::vector<float>> outs;
    std::vector<std::vector<float>> ins(kBatch, std::vector<float>(count));
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < kBatch; ++k) {
      outs.push_back(message(me, 40 + k, count));
      works.push_back(pg.send(f32(outs.back()), next, 24));
      works.push_back(pg.recv(f32(ins[static_cast<std::size_t>(k)]), prev, 24));
    }
    for (auto& w : works) w->wait();
    for (int k = 0; k < kBatch; ++k) check("a batch outstanding", ins[static_cast<std::size_t>(k)], prev, 40 + k);
  }
  {
    // A send pending across a collective.
    auto out = message(me, 4, count);
    std::vector<float> in(count);
    auto s = pg.send(f32(out), next, 5);
    std::vector<float> one{1.0f};
    pg.allreduce(f32(one))->wait();
    if (one[0] != static_cast<float>(n)) fails.push_back(fmt::format("allreduce beside a send: {}", one[0]));
    pg.recv(f32(in), prev, 5)->wait();
    s->wait();
    check("send pending across an allreduce", in, prev, 4);
  }
  {
    // 1F1B: stage `me` receives activations from me-1 and gradients from me+1; it waits for its
    // receives at once and for its sends only at the end, as pipeline engines do.
    constexpr int kMicro = 4;
    std::deque<std::vector<float>> sent;  // stable addresses while the sends are pending
    std::vector<std::shared_ptr<Work>> sends;
    auto forward = [&](int m) {
      if (me > 0) {
        std::vector<float> act(count);
        pg.recv(f32(act), me - 1, 10)->wait();
        check("1F1B activation", act, me - 1, 10 + m);
      }
      if (me < n - 1) {
        sent.push_back(message(me, 10 + m, count));
        sends.push_back(pg.send(f32(sent.back()), me + 1, 10));
      }
    };
    auto backward = [&](int m) {
      if (me < n - 1) {
        std::vector<float> grad(count);
        pg.recv(f32(grad), me + 1, 11)->wait();
        check("1F1B gradient", grad, me + 1, 30 + m);
      }
      if (me > 0) {
        sent.push_back(message(me, 30 + m, count));
        sends.push_back(pg.send(f32(sent.back()), me - 1, 11));
      }
    };
    const int warmup = std::min(n - me - 1, kMicro);
    for (int m = 0; m < warmup; ++m) forward(m);
    for (int i = 0; i < kMicro - warmup; ++i) {
      forward(warmup + i);
      backward(i);
    }
    for (int i = kMicro - warmup; i < kMicro; ++i) backward(i);
    for (auto& w : sends) w->wait();
  }
  return fails;
}

std::vector<std::string> runP2pFault(ProcessGroup& pg, const std::string& what) {
  std::vector<std::string> fails;
  const int me = pg.rank();
  if (me > 1) return fails;
  auto errorOf = [](const std::shared_ptr<Work>& w) -> std::string {
    try {
      w->wait();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  auto expectNamed = [&](const std::string& err, const std::vector<std::string>& needles) {
    if (err.empty()) {
      fails.push_back(fmt::format("{}: rank {}'s recv succeeded", what, me));
      return;
    }
    for (const auto& needle : needles) {
      if (err.find(needle) == std::string::npos) {
        fails.push_back(fmt::format("{}: rank {}'s error does not say '{}': {}", what, me, needle, err));
      }
    }
  };
  if (what == "mismatch") {
    if (me == 0) {
      std::vector<float> out(16, 1.0f);
      auto s = pg.send(f32(out), 1, 9);
      try {
        s->wait();
      } catch (const std::exception&) {
        // A backend may fail the sender too; the receiver's error is the one checked.
      }
      // Rank 1 must be done with the message before this buffer goes.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return fails;
    }
    std::vector<float> in(8);
    expectNamed(errorOf(pg.recv(f32(in), 0, 9)), {"rank 0", "rank 1"});
    return fails;
  }
  if (what == "silent") {
    if (me == 0) {
      std::this_thread::sleep_for(pg.options().timeout * 3 / 2);
      return fails;
    }
    std::vector<float> in(8);
    expectNamed(errorOf(pg.recv(f32(in), 0, 9)), {"rank 0"});
    return fails;
  }
  fails.push_back("runP2pFault: unknown fault '" + what + "'");
  return fails;
}

void runThreads(const std::string& backend, int worldSize, const std::function<void(ProcessGroup&)>& fn,
                ProcessGroupOptions base) {
  auto store = std::make_shared<store::HashStore>();
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < worldSize; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupOptions o = base;
        o.rank = r;
        o.size = worldSize;
        o.store = store;
        auto pg = createProcessGroup(backend, o);
        fn(*pg);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace ds::comm::testing
