// ds_membw_probe: how fast this machine copies memory, and the allreduce bus bandwidth that implies
// for an ideal zero-copy intra-node allreduce: the "limit" line of scripts/bench-peers.sh.
//
//   build/bin/ds_membw_probe -b 8 -e 256M -f 2 --ranks 2,4 --min-time 0.02 -J limit.json
//
// Measured per size S (memcpy of S bytes from a buffer to another, both touched beforehand; the
// best of 3 trials, each repeating the copy for at least --min-time):
//   B1(S) = copy GB/s of one core            = S / (time of one memcpy of S)
//   Bk(S) = copy GB/s of k cores at once     = k·S / (time until the last of k threads copied S)
//           with k = min(n, cores), one thread per core, each on its own buffers.
// GB = 1e9 bytes; a copy of S counts S bytes (it reads S and writes S; STREAM's "Copy" would count
// 2S).
//
// The limit for n ranks: in an ideal in-place allreduce over shared memory (no staging copies, the
// reduction itself free), each rank reduces a 1/n slice: it reads that slice from all n buffers (S
// bytes in all) and writes the result into all n buffers (S bytes): the memory traffic of one memcpy
// of S. n ranks do n such copies on k cores, so at best
//   t(S)   = n·S / Bk(S)
//   algbw  = S / t = Bk / n
//   busbw  = algbw · 2(n-1)/n = Bk(S) · 2(n-1) / n²     (n = 2: busbw = B2 / 2)
// Where the buffers fit in the caches (small S) the line is the cache's copy rate and latency, not
// memory, bounds real collectives; it is meaningful where 2S per core exceeds the caches.
//
// Rows go to the dsperf.sweep JSON (-J) as backend "membw-limit", one row per size and n, with
// time = t(S) and the same figures in both the in-place and out-of-place columns (an out-of-place
// zero-copy allreduce moves the same bytes); not a collective that ran: a bound.
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/exit_codes.h"
#include "bench/metadata.h"
#include "bench/micro/bench_args.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"
#include "reports/sweep/sweep_reporter.h"

namespace {

using Clock = std::chrono::steady_clock;
using ds::bench::micro::allreduceRow;
using ds::bench::micro::SweepFlags;
namespace report = ds::report;

const char* kAbout =
    "Copy GB/s of one core and of k cores at once per size, and the implied busbw limit of an ideal\n"
    "zero-copy in-place allreduce of n ranks: Bk(S)·2(n-1)/n² with k = min(n, cores). See the\n"
    "comment at the top of bench/micro/membw_probe.cpp for the derivation.";

int cores() { return ds::sys::affinityCpuCount(); }

// The n-th core this process may run on (wrapping), for pinning thread i.
int coreNumber(int i) {
  const std::vector<int> ids = ds::sys::affinityCpus();
  return ids.empty() ? -1 : ids[static_cast<std::size_t>(i) % ids.size()];
}

void pinTo(int core) {
  if (core < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

struct Buffers {
  char* src = nullptr;
  char* dst = nullptr;
  std::size_t bytes = 0;
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  explicit Buffers(std::size_t n) : bytes(n) {
    std::size_t rounded = (std::max<std::size_t>(n, 1) + 4095) / 4096 * 4096;
    src = static_cast<char*>(std::aligned_alloc(4096, rounded));
    dst = static_cast<char*>(std::aligned_alloc(4096, rounded));
    if (src == nullptr || dst == nullptr) {
      throw ds::ConfigError(
          fmt::format("cannot allocate 2 × {} bytes for the copy probe; lower -e.", rounded));
    }
    std::memset(src, 1, rounded);  // touch every page before timing
    std::memset(dst, 2, rounded);
  }
  ~Buffers() {
    std::free(src);
    std::free(dst);
  }
};

void copyOnce(const Buffers& b, std::size_t bytes) {
  std::memcpy(b.dst, b.src, bytes);
  asm volatile("" ::: "memory");  // the copy must happen: nothing reads dst
}

// Aggregate copy GB/s of `k` threads, each copying `bytes` `reps` times on its own buffers, started
// together; the time runs until the last thread is done. Best of `trials`.
double copyRate(std::vector<std::unique_ptr<Buffers>>& bufs, int k, std::size_t bytes, long reps,
                int trials) {
  double best = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::barrier sync(k + 1);
    std::vector<double> secs(static_cast<std::size_t>(k));
    std::vector<std::thread> threads;
    for (int i = 0; i < k; ++i) {
      threads.emplace_back([&, i] {
        pinTo(coreNumber(i));
        copyOnce(*bufs[static_cast<std::size_t>(i)], bytes);  // warm
        sync.arrive_and_wait();
        auto t0 = Clock::now();
        for (long r = 0; r < reps; ++r) copyOnce(*bufs[static_cast<std::size_t>(i)], bytes);
        secs[static_cast<std::size_t>(i)] = std::chrono::duration<double>(Clock::now() - t0).count();
      });
    }
    sync.arrive_and_wait();
    for (auto& t : threads) t.join();
    double slowest = *std::max_element(secs.begin(), secs.end());
    if (slowest > 0)
      best = std::max(best, static_cast<double>(k) * static_cast<double>(bytes) * reps / slowest / 1e9);
  }
  return best;
}

// Repetitions so that one thread's loop lasts at least minTime (and at least `atLeast`).
long repsFor(const Buffers& b, std::size_t bytes, double minTimeS, int atLeast) {
  copyOnce(b, bytes);
  long k = 1;
  while (true) {
    auto t0 = Clock::now();
    for (long r = 0; r < k; ++r) copyOnce(b, bytes);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= minTimeS / 4 || k >= (1L << 26)) {
      double per = s / static_cast<double>(k);
      return std::max<long>(atLeast, static_cast<long>(std::ceil(minTimeS / std::max(per, 1e-9))));
    }
    k *= 4;
  }
}

std::vector<int> parseRanks(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 2 || v > 1024) {
      throw ds::ConfigError(fmt::format(
          "--ranks '{}' is not valid; give a comma list of world sizes of at least 2, e.g. 2,4.", text));
    }
    out.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  SweepFlags f;
  f.iters = 1;
  f.minTimeS = 0.02;
  std::vector<int> ranks{2};
  CLI::App app{kAbout, "ds_membw_probe"};
  ds::bench::micro::addSweepFlags(app, f);
  app.add_option_function<std::string>(
         "--ranks", [&ranks](const std::string& v) { ranks = parseRanks(v); },
         "world sizes whose busbw limit to print, a comma list (default 2)")
      ->check(ds::cli::checkedBy([](const std::string& v) { parseRanks(v); }));
  if (auto rc = ds::bench::micro::parseFlags(app, f, argc, argv)) return *rc;
  if (f.minTimeS <= 0) f.minTimeS = 0.02;
  const int ncores = cores();
  std::set<int> ks;
  for (int n : ranks) ks.insert(std::min(n, ncores));
  const int kmax = *ks.rbegin();
  auto sizes = ds::bench::micro::sweepSizes(f, 4);
  const std::size_t maxBytes = sizes.empty() ? 4 : sizes.back();

  std::vector<std::unique_ptr<Buffers>> bufs;
  for (int i = 0; i < kmax; ++i) bufs.push_back(std::make_unique<Buffers>(maxBytes));

  report::SweepRun runRec;
  runRec.args.minBytes = f.minBytes;
  runRec.args.maxBytes = f.maxBytes;
  runRec.args.stepFactor = f.stepFactor;
  runRec.args.iters = f.iters;
  runRec.args.minTimeS = f.minTimeS;
  runRec.args.ops = {"sum"};
  runRec.args.dtypes = {"f32"};
  runRec.args.collectives = {"allreduce"};
  runRec.args.backends = {"membw-limit"};
  runRec.args.check = 0;
  runRec.metadata.worldSize = ranks.front();
  runRec.metadata.hosts = {ds::net::hostName()};
  runRec.metadata.commandLine = ds::bench::coll::commandLine();
  runRec.metadata.launcher = "none";
  runRec.metadata.versions = ds::bench::coll::libraryVersions();
  runRec.metadata.env = ds::bench::coll::relevantEnv();
  runRec.metadata.startTime = ds::isoUtcNowMs();
  runRec.notes.push_back(
      "membw-limit: not a collective that ran, a bound: the busbw of an ideal zero-copy in-place allreduce "
      "of n ranks, Bk(S)·2(n-1)/n², where Bk(S) is the measured memcpy GB/s (bytes copied) of k = "
      "min(n, cores) cores copying S bytes at once; each rank of such an allreduce reads S and writes S "
      "(a 1/n slice from and to every rank's buffer), so n ranks need n copies of S on k cores; t = n·S/Bk");

  std::printf(
      "# ds_membw_probe: %d core(s); GB = 1e9 bytes; a copy of S bytes counts S (it reads S and writes S)\n",
      ncores);
  std::printf(
      "# limit busbw(n) = Bk·2(n-1)/n², k = min(n, cores): an ideal zero-copy in-place allreduce makes\n"
      "#   each rank read S and write S (a 1/n slice from and to every rank's buffer), i.e. one memcpy\n"
      "#   of S per rank, n of them on k cores: t = n·S/Bk, algbw = S/t, busbw = algbw·2(n-1)/n.\n");
  std::printf("#\n# %12s  %12s", "size (B)", "B1 GB/s");
  for (int k : ks) std::printf("  %8s%-4d", "B", k);
  for (int n : ranks) std::printf("  limit n=%-3d", n);
  std::printf("\n");

  for (std::size_t bytes : sizes) {
    long reps = repsFor(*bufs[0], bytes, f.minTimeS, f.iters);
    double b1 = copyRate(bufs, 1, bytes, reps, 3);
    std::printf("  %12zu  %12.2f", bytes, b1);
    std::map<int, double> bk;
    for (int k : ks) {
      bk[k] = k == 1 ? b1 : copyRate(bufs, k, bytes, reps, 3);
      std::printf("  %12.2f", bk[k]);
    }
    for (int n : ranks) {
      const int k = std::min(n, ncores);
      const double tUs = static_cast<double>(n) * static_cast<double>(bytes) / (bk[k] * 1e9) * 1e6;
      report::SweepMeasurement m = allreduceRow("membw-limit", n, bytes);
      report::PlaceResult p;
      p.measured = true;
      p.iters = static_cast<int>(reps);
      p.timeUs = tUs;
      p.algBw = static_cast<double>(bytes) / 1e9 / (tUs * 1e-6);
      p.busBw = p.algBw * m.busFactor;
      p.wrong = -1;
      m.outOfPlace = p;
      m.inPlace = p;
      std::printf("  %11.2f", p.busBw);
      runRec.results.push_back(m);
    }
    std::printf("\n");
    std::fflush(stdout);
    runRec.notes.push_back(fmt::format("membw-limit at {} B: B1 = {:.2f} GB/s{}", bytes, b1, [&] {
      std::string s;
      for (auto& [k, v] : bk) {
        if (k > 1) s += fmt::format(", B{} = {:.2f} GB/s", k, v);
      }
      return s;
    }()));
  }
  runRec.summary = report::summarize(runRec.results);
  runRec.metadata.endTime = ds::isoUtcNowMs();
  if (!f.jsonPath.empty()) report::JsonReporter(f.jsonPath).finish(runRec);
  return ds::bench::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::bench::runMain("ds_membw_probe", [&] { return run(argc, argv); });
}
