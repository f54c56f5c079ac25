#include "bench/coll/harness.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>

#include "bench/coll/data_check.h"
#include "engine/common/error.h"

namespace ds::bench::coll {

namespace {

using Clock = std::chrono::steady_clock;

double usSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

template <typename T>
void put(store::Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}

template <typename T>
T take(const store::Bytes& b, std::size_t& off) {
  if (off + sizeof(T) > b.size()) throw ProtocolError("dsbench coll: a rank's timing record is truncated");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  off += sizeof(T);
  return v;
}

}  // namespace

double combineTimes(const std::vector<double>& perRank, int average) {
  if (perRank.empty()) return 0;
  switch (average) {
    case 0:
      return perRank[0];
    case 2:
      return *std::min_element(perRank.begin(), perRank.end());
    case 3:
      return *std::max_element(perRank.begin(), perRank.end());
    default: {
      double s = 0;
      for (double v : perRank) s += v;
      return s / static_cast<double>(perRank.size());
    }
  }
}

Harness::Harness(comm::ProcessGroup& pg, store::Store& store, comm::Memory& memory, HarnessOptions options)
    : pg_(pg), store_(store), mem_(memory), o_(std::move(options)) {}

Harness::~Harness() {
  // Unwinding from a failed wait: an op abandoned by -T can run on the group's worker until the
  // group's own timeout (minutes), so the buffers are kept at once; the tool then leaves by _Exit.
  const bool failing = std::uncaught_exceptions() > 0;
  if (pg_.waitIdle(failing ? comm::Duration(0) : comm::ProcessGroup::kAbandonedOpGrace)) return;
  send_.leak();
  recv_.leak();
}

void Harness::prepare(const CollSpec& spec, comm::DType dtype, std::size_t maxBytes) {
  spec_ = &spec;
  dtype_ = dtype;
  elt_ = comm::dtypeSize(dtype);
  CollCounts c = spec.counts(maxBytes / elt_, pg_.size());
  std::size_t bytes = std::max(c.sendCount, c.recvCount) * elt_;
  send_ = comm::DeviceBuffer();
  recv_ = comm::DeviceBuffer();
  send_ = comm::DeviceBuffer(mem_, bytes);
  recv_ = comm::DeviceBuffer(mem_, bytes);
  staging_.assign(mem_.isHost() ? 0 : bytes, 0);
}

Launch Harness::launch(const CollCounts& c, bool inPlace, comm::ReduceOp op, int root) {
  auto* recv = static_cast<char*>(recv_.data());
  const auto rank = static_cast<std::size_t>(pg_.rank());
  void* s = inPlace ? recv + c.sendInplaceOffset * rank * elt_ : send_.data();
  void* r = inPlace ? recv + c.recvInplaceOffset * rank * elt_ : recv;
  RunArgs a;
  a.send = comm::Buffer{s, c.sendCount, dtype_, mem_.device()};
  a.recv = comm::Buffer{r, c.recvCount, dtype_, mem_.device()};
  a.op = op;
  a.root = root;
  return spec_->run(pg_, a);
}

void Harness::fillInputs(const CollCounts& c, bool inPlace, const CheckArgs& a) {
  auto* recv = static_cast<char*>(recv_.data());
  char* target = inPlace ? recv + c.sendInplaceOffset * static_cast<std::size_t>(pg_.rank()) * elt_
                         : static_cast<char*>(send_.data());
  // Stale results must not pass the check: clear the receive buffer first.
  mem_.zero(recv_.data(), recv_.bytes());
  void* host = mem_.isHost() ? static_cast<void*>(target) : static_cast<void*>(staging_.data());
  fillHost(host, c.sendCount, dtype_, spec_->period,
           [&](std::size_t i) { return spec_->input(a, pg_.rank(), i); });
  if (!mem_.isHost()) mem_.toDevice(target, staging_.data(), c.sendCount * elt_);
}

long long Harness::checkOnce(const CollCounts& c, bool inPlace, const CheckArgs& a) {
  fillInputs(c, inPlace, a);
  Launch l = launch(c, inPlace, a.op, a.root);
  l.wait(o_.waitTimeout);
  const auto* recv = static_cast<const char*>(recv_.data());
  const char* result =
      inPlace ? recv + c.recvInplaceOffset * static_cast<std::size_t>(pg_.rank()) * elt_ : recv;
  const void* host = result;
  if (!mem_.isHost()) {
    mem_.toHost(staging_.data(), result, c.recvCount * elt_);
    host = staging_.data();
  }
  return countWrong(*spec_, a, host);
}

void Harness::barrier() { pg_.barrier()->wait(o_.waitTimeout); }

std::string Harness::nextKey() { return fmt::format("{}/{}", o_.storePrefix, seq_++); }

// The ranks' results of a size are exchanged through the store, after the collective. A rank that
// dies (or hangs) between two collectives never writes its key; the store's timeout then names only
// keys. This says which ranks did not report, as a failed collective names its rank.
std::vector<store::Bytes> Harness::gatherKeys(const std::string& base, const std::vector<int>& ranks) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(fmt::format("{}/{}", base, r));
  try {
    return store_.multiGet(keys, o_.waitTimeout);
  } catch (const TimeoutError& e) {
    std::vector<int> missing;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      bool there = false;
      try {
        there = store_.check({keys[i]}, std::chrono::seconds(2));
      } catch (const Error&) {
        // the store itself is gone: every rank counts as missing
      }
      if (!there) missing.push_back(ranks[i]);
    }
    if (missing.empty()) throw;
    const std::string list = fmt::format("{}", fmt::join(missing, ", "));
    const std::string within =
        o_.waitTimeout
            ? fmt::format("within {} ms",
                          std::chrono::duration_cast<std::chrono::milliseconds>(*o_.waitTimeout).count())
            : std::string("in time");
    throw TimeoutError(
        fmt::format("the exchange of timings failed on rank {}: rank(s) {} did not send their results {} (is "
                    "rank {} alive? it "
                    "died or hangs between two collectives; its own output or the launcher's says why). {}",
                    pg_.rank(), list, within, missing.front(), e.what()));
  }
}

std::vector<store::Bytes> Harness::allGather(const store::Bytes& mine) {
  std::string base = nextKey();
  store_.set(fmt::format("{}/{}", base, pg_.rank()), mine, o_.waitTimeout);
  std::vector<int> ranks;
  for (int r = 0; r < pg_.size(); ++r) ranks.push_back(r);
  return gatherKeys(base, ranks);
}

std::vector<store::Bytes> Harness::gatherToRoot(const store::Bytes& mine) {
  std::string base = nextKey();
  if (pg_.rank() != 0) {
    store_.set(fmt::format("{}/{}", base, pg_.rank()), mine, o_.waitTimeout);
    return {};
  }
  std::vector<int> ranks;
  std::vector<std::string> keys;
  for (int r = 1; r < pg_.size(); ++r) {
    ranks.push_back(r);
    keys.push_back(fmt::format("{}/{}", base, r));
  }
  std::vector<store::Bytes> all{mine};
  if (!keys.empty()) {
    auto others = gatherKeys(base, ranks);
    // Timing records can be large (--min-time): keep the store from growing with the sweep.
    for (const auto& k : keys) store_.deleteKey(k, o_.waitTimeout);
    for (auto& b : others) all.push_back(std::move(b));
  }
  return all;
}

void Harness::warmup(comm::ReduceOp op, int root, std::size_t minBytes, std::size_t maxBytes) {
  if (o_.warmupIters <= 0) return;
  for (std::size_t bytes : {maxBytes, minBytes}) {
    CollCounts c = spec_->counts(bytes / elt_, pg_.size());
    std::vector<Launch> ls;
    for (int i = 0; i < o_.warmupIters; ++i) ls.push_back(launch(c, false, op, root));
    for (const auto& l : ls) l.wait(o_.waitTimeout);
  }
}

Harness::Timing Harness::timePlace(const CollCounts& c, bool inPlace, comm::ReduceOp op, int root) {
  CheckArgs a{pg_.rank(), pg_.size(), root, op, dtype_, 99, c};
  if (o_.check > 0) fillInputs(c, inPlace, a);
  // One op to settle (nccl-tests' "sync"), then line the ranks up.
  launch(c, inPlace, op, root).wait(o_.waitTimeout);
  barrier();

  int iters = o_.iters;
  if (o_.minTimeS > 0) {
    // Pilot rounds of 1, 4, 16, ... ops (at least two rounds) until a round lasts a tenth of --min-time, so
    // that one slow first op (a cold path, a scheduling hiccup) cannot stand for the size. All ranks decide
    // from the slowest rank's round, so they run the same number of ops.
    double perOpUs = 0;
    for (long k = 1;; k *= 4) {
      auto t0 = Clock::now();
      for (long i = 0; i < k; ++i) launch(c, inPlace, op, root).wait(o_.waitTimeout);
      double mine = usSince(t0);
      store::Bytes b;
      put(b, mine);
      double slowest = 0;
      for (const auto& x : allGather(b)) {
        std::size_t off = 0;
        slowest = std::max(slowest, take<double>(x, off));
      }
      perOpUs = slowest / static_cast<double>(k);
      if ((k >= 4 && slowest >= o_.minTimeS * 1e6 / 10) || k * 4 > o_.maxAdaptiveIters) break;
    }
    double want = std::ceil(o_.minTimeS * 1e6 / std::max(perOpUs, 0.01));
    iters = static_cast<int>(
        std::clamp(want, static_cast<double>(o_.iters), static_cast<double>(o_.maxAdaptiveIters)));
    barrier();
  }

  Timing t;
  t.itersUs.resize(static_cast<std::size_t>(iters));
  if (o_.blocking) {
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      auto t0 = Clock::now();
      launch(c, inPlace, op, root).wait(o_.waitTimeout);
      t.itersUs[static_cast<std::size_t>(i)] = usSince(t0);
      total += t.itersUs[static_cast<std::size_t>(i)];
      barrier();
    }
    t.loopUs = total / iters;
  } else {
    // Every op is issued, then every one still running is waited for (nccl-tests' loop). An op that
    // is already complete when issued (the fast path) gives its time and its Work back at once: kept
    // until the end, 20,000 Works grew the heap a page every ~12 ops, and the page faults of that
    // growth were 1 in 12 ops' time (2 ranks, 8 B shm allreduce: p99 4.4 us against a 0.3 us
    // median). The slots are allocated and touched before the clock starts.
    std::vector<Launch> ls(static_cast<std::size_t>(iters));  // the ops still running when issued
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < ls.size(); ++i) {
      Launch l = launch(c, inPlace, op, root);
      if (!l.completedIn(t.itersUs[i])) ls[i] = std::move(l);
    }
    for (std::size_t i = 0; i < ls.size(); ++i) {
      if (!ls[i].works.empty()) ls[i].wait(o_.waitTimeout);
    }
    t.loopUs = usSince(t0) / iters;
    for (std::size_t i = 0; i < ls.size(); ++i) {
      if (!ls[i].works.empty()) t.itersUs[i] = ls[i].durationUs();
    }
  }

  // The check runs outside the timed loop, on fresh data each time (nccl-tests' -c).
  t.wrong = 0;
  for (int k = 0; k < o_.check; ++k) {
    a.rep = ++rep_;
    t.wrong += checkOnce(c, inPlace, a);
  }
  return t;
}

report::PlaceResult Harness::combine(const std::vector<Timing>& all, double sBytes, double factor) const {
  report::PlaceResult p;
  p.measured = true;
  std::vector<double> loops;
  std::size_t n = all.empty() ? 0 : all[0].itersUs.size();
  std::vector<double> slowestPerIter(n, 0.0);
  long long wrong = 0;
  // -K: the statistics start after the skipped iterations (there is always one left: skip < -n <= n).
  const auto skip =
      static_cast<std::ptrdiff_t>(std::min<std::size_t>(static_cast<std::size_t>(o_.perIterSkip), n));
  auto statsOf = [skip](const std::vector<double>& v) {
    const std::ptrdiff_t from = std::min<std::ptrdiff_t>(skip, static_cast<std::ptrdiff_t>(v.size()));
    return report::computeIterStats(std::vector<double>(v.begin() + from, v.end()));
  };
  for (std::size_t r = 0; r < all.size(); ++r) {
    const Timing& t = all[r];
    loops.push_back(t.loopUs);
    wrong += t.wrong;
    for (std::size_t i = 0; i < n && i < t.itersUs.size(); ++i)
      slowestPerIter[i] = std::max(slowestPerIter[i], t.itersUs[i]);
    p.ranks.push_back(report::RankTiming{static_cast<int>(r), t.loopUs, statsOf(t.itersUs)});
  }
  p.iters = static_cast<int>(n);
  p.timeUs = combineTimes(loops, o_.average);
  p.iter = statsOf(slowestPerIter);
  if (o_.keepTimes) p.timesUs = slowestPerIter;
  p.wrong = o_.check > 0 ? wrong : -1;
  auto mx = std::max_element(loops.begin(), loops.end());
  auto mn = std::min_element(loops.begin(), loops.end());
  p.slowestRank = static_cast<int>(mx - loops.begin());
  p.spreadPct = *mn > 0 ? 100.0 * (*mx - *mn) / *mn : 0;
  p.algBw = p.timeUs > 0 ? sBytes / 1e9 / (p.timeUs * 1e-6) : 0;
  p.busBw = p.algBw * factor;
  return p;
}

report::SweepMeasurement Harness::measure(std::size_t requestedBytes, comm::ReduceOp op, int root) {
  DS_CHECK(spec_ != nullptr, "Harness::measure before prepare");
  const int n = pg_.size();
  CollCounts c = spec_->counts(requestedBytes / elt_, n);
  report::SweepMeasurement m;
  m.backend = pg_.backendName();
  m.collective = spec_->facts->name;
  m.dtype = comm::dtypeName(dtype_);
  m.op = spec_->facts->reduces ? comm::reduceOpName(op) : "none";
  m.root = spec_->facts->rooted ? root : -1;
  m.worldSize = n;
  m.requestedBytes = requestedBytes;
  m.bytes = std::max(c.sendCount, c.recvCount) * elt_;
  m.count = c.paramCount;
  m.busFactor = spec_->facts->busFactor(n);
  const double s = algBytes(*spec_, c, elt_, n);
  for (bool inPlace : {false, true}) {
    if (inPlace && !spec_->inPlace) continue;
    Timing t = timePlace(c, inPlace, op, root);
    store::Bytes b;
    put(b, t.loopUs);
    put(b, t.wrong);
    for (double v : t.itersUs) put(b, v);
    std::vector<Timing> all;
    for (const auto& x : gatherToRoot(b)) {
      Timing u;
      std::size_t off = 0;
      u.loopUs = take<double>(x, off);
      u.wrong = take<long long>(x, off);
      while (off < x.size()) u.itersUs.push_back(take<double>(x, off));
      all.push_back(std::move(u));
    }
    if (all.empty()) all.push_back(t);  // not rank 0: its own view only
    (inPlace ? m.inPlace : m.outOfPlace) = combine(all, s, m.busFactor);
  }
  return m;
}

}  // namespace ds::bench::coll
