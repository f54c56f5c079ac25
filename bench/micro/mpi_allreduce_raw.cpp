// ds_mpi_allreduce_raw: MPI_Allreduce on f32 with sum, timed as nccl-tests times a collective, and
// nothing of dsperf's engine in the timed path. It is the "raw MPI" peer of scripts/bench-peers.sh:
// what the engine's mpi backend costs over it is the engine's overhead.
//
//   mpirun -np 2 build/bin/ds_mpi_allreduce_raw -b 8 -e 256M -f 2 --min-time 0.05 -J raw.json
//
// Per size and per place (out-of-place, then in-place): -w warm-up ops, one checked op (-c 1: the
// result is compared with the exact sum), a barrier, then -n ops back to back (more with --min-time,
// agreed across ranks from the slowest rank's pilot), each timed. The row's time is the loop time
// per op averaged over ranks (nccl-tests' -a 1); busbw = size / time × 2(n-1)/n (REFERENCE.md §5).
// --nonblocking times MPI_Iallreduce + MPI_Wait instead (Open MPI's libnbc, the engine's path)
// and names the rows "mpi-raw-nb". Rank 0 prints the nccl-tests table and writes the dsperf.sweep
// JSON (-J). Exit: 0 ok, 7 wrong data, 5 bad flags, 3 an MPI error.
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/exit_codes.h"
#include "bench/metadata.h"
#include "bench/micro/bench_args.h"
#include "engine/comm/memory.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "reports/sweep/sweep_reporter.h"

namespace {

using Clock = std::chrono::steady_clock;
using ds::bench::micro::allreduceRow;
using ds::bench::micro::SweepFlags;
namespace report = ds::report;

constexpr int kMaxIters = 1 << 20;

const char* kAbout =
    "MPI_Allreduce (f32, sum) timed as nccl-tests does, without dsperf's engine: the raw-MPI peer of\n"
    "scripts/bench-peers.sh. Run it as mpirun -np N ds_mpi_allreduce_raw [flags].";

void mpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw ds::BackendError(
      fmt::format("{} failed: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

struct Raw {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  bool nonblocking = false;

  void allreduce(const void* send, void* recv, int count) const {
    if (!nonblocking) {
      mpiCheck(MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
      return;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    mpiCheck(MPI_Iallreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm, &req), "MPI_Iallreduce");
    mpiCheck(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
  }
};

// Input of rank r at element i: small integers, so that every sum is exact in f32.
float inputValue(int r, std::size_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 13)); }

struct PlaceTiming {
  double loopUs = 0;
  std::vector<double> itersUs;
  long long wrong = 0;
};

// Times one place of one size on this rank (collective: every rank calls it with the same args).
PlaceTiming timePlace(const Raw& mpi, const SweepFlags& f, bool check, bool inPlace, float* send, float* recv,
                      int count) {
  const void* src = inPlace ? MPI_IN_PLACE : send;
  PlaceTiming t;
  for (int i = 0; i < f.warmupIters; ++i) mpi.allreduce(src, recv, count);
  if (check) {
    float* in = inPlace ? recv : send;
    for (int i = 0; i < count; ++i) in[i] = inputValue(mpi.rank, static_cast<std::size_t>(i));
    if (!inPlace) std::memset(recv, 0, static_cast<std::size_t>(count) * sizeof(float));
    mpi.allreduce(src, recv, count);
    const int n = mpi.size;
    for (int i = 0; i < count; ++i) {
      float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 13));
      if (recv[i] != want) ++t.wrong;
    }
  }
  // Zeros while timing: repeated in-place sums then stay finite.
  std::memset(recv, 0, static_cast<std::size_t>(count) * sizeof(float));
  std::memset(send, 0, static_cast<std::size_t>(count) * sizeof(float));

  int iters = f.iters;
  if (f.minTimeS > 0) {
    double perOpUs = 0;
    for (long k = 1;; k *= 4) {
      mpiCheck(MPI_Barrier(mpi.comm), "MPI_Barrier");
      auto t0 = Clock::now();
      for (long i = 0; i < k; ++i) mpi.allreduce(src, recv, count);
      double mine = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      double slowest = 0;
      mpiCheck(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, mpi.comm), "MPI_Allreduce");
      perOpUs = slowest / static_cast<double>(k);
      if ((k >= 4 && slowest >= f.minTimeS * 1e6 / 10) || k * 4 > kMaxIters) break;
    }
    double want = std::ceil(f.minTimeS * 1e6 / std::max(perOpUs, 0.01));
    iters = static_cast<int>(std::clamp(want, static_cast<double>(f.iters), static_cast<double>(kMaxIters)));
  }

  t.itersUs.resize(static_cast<std::size_t>(iters));
  mpiCheck(MPI_Barrier(mpi.comm), "MPI_Barrier");
  auto start = Clock::now();
  auto prev = start;
  for (int i = 0; i < iters; ++i) {
    mpi.allreduce(src, recv, count);
    auto now = Clock::now();
    t.itersUs[static_cast<std::size_t>(i)] = std::chrono::duration<double, std::micro>(now - prev).count();
    prev = now;
  }
  t.loopUs = std::chrono::duration<double, std::micro>(prev - start).count() / iters;
  return t;
}

// Combines every rank's timing on rank 0 (nccl-tests' -a 1: the average of the ranks' loop times).
report::PlaceResult combine(const Raw& mpi, const PlaceTiming& t, double bytes, double factor, bool check) {
  const int n = mpi.size;
  std::vector<double> loops(static_cast<std::size_t>(n));
  mpiCheck(MPI_Gather(&t.loopUs, 1, MPI_DOUBLE, loops.data(), 1, MPI_DOUBLE, 0, mpi.comm), "MPI_Gather");
  long long wrong = 0;
  mpiCheck(MPI_Reduce(&t.wrong, &wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, mpi.comm), "MPI_Reduce");
  std::vector<double> slowest(t.itersUs.size());
  mpiCheck(MPI_Reduce(t.itersUs.data(), slowest.data(), static_cast<int>(t.itersUs.size()), MPI_DOUBLE,
                      MPI_MAX, 0, mpi.comm),
           "MPI_Reduce");
  report::PlaceResult p;
  if (mpi.rank != 0) return p;
  p.measured = true;
  p.iters = static_cast<int>(t.itersUs.size());
  double sum = 0;
  for (double v : loops) sum += v;
  p.timeUs = sum / n;
  p.algBw = p.timeUs > 0 ? bytes / 1e9 / (p.timeUs * 1e-6) : 0;
  p.busBw = p.algBw * factor;
  p.wrong = check ? wrong : -1;
  p.iter = report::computeIterStats(slowest);
  auto mx = std::max_element(loops.begin(), loops.end());
  auto mn = std::min_element(loops.begin(), loops.end());
  p.slowestRank = static_cast<int>(mx - loops.begin());
  p.spreadPct = *mn > 0 ? 100.0 * (*mx - *mn) / *mn : 0;
  for (int r = 0; r < n; ++r) {
    // Other ranks' per-iteration times stay on their ranks; their loop time is what combines.
    report::IterStats none;
    p.ranks.push_back(report::RankTiming{r, loops[static_cast<std::size_t>(r)],
                                         r == 0 ? report::computeIterStats(t.itersUs) : none});
  }
  return p;
}

std::vector<report::SweepRank> gatherRanks(const Raw& mpi) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::vector<char> hosts(static_cast<std::size_t>(mpi.size) * sizeof host);
  long pid = static_cast<long>(::getpid());
  std::vector<long> pids(static_cast<std::size_t>(mpi.size));
  mpiCheck(MPI_Gather(host, sizeof host, MPI_CHAR, hosts.data(), sizeof host, MPI_CHAR, 0, mpi.comm),
           "MPI_Gather");
  mpiCheck(MPI_Gather(&pid, 1, MPI_LONG, pids.data(), 1, MPI_LONG, 0, mpi.comm), "MPI_Gather");
  // Each rank's placement as JSON text in a fixed slot (a cpu list of a big node stays well inside).
  constexpr std::size_t kSlot = 1024;
  std::string mine = nlohmann::json(ds::bench::coll::currentPlacement()).dump().substr(0, kSlot - 1);
  mine.resize(kSlot, '\0');
  std::vector<char> placements(static_cast<std::size_t>(mpi.size) * kSlot);
  mpiCheck(MPI_Gather(mine.data(), kSlot, MPI_CHAR, placements.data(), kSlot, MPI_CHAR, 0, mpi.comm),
           "MPI_Gather");
  std::vector<report::SweepRank> out;
  if (mpi.rank != 0) return out;
  for (int r = 0; r < mpi.size; ++r) {
    report::SweepRank x;
    x.rank = r;
    x.localRank = r;
    x.host = std::string(hosts.data() + static_cast<std::size_t>(r) * sizeof host);
    x.pid = pids[static_cast<std::size_t>(r)];
    x.device = "cpu";
    try {
      x.placement =
          nlohmann::json::parse(std::string(placements.data() + static_cast<std::size_t>(r) * kSlot))
              .get<report::Placement>();
    } catch (const std::exception&) {
      // a cut-off cpu list: the row stays without a placement
    }
    out.push_back(x);
  }
  return out;
}

int run(int argc, char** argv) {
  SweepFlags f;
  bool nonblocking = false;
  int check = 1;
  CLI::App app{kAbout, "ds_mpi_allreduce_raw"};
  ds::bench::micro::addSweepFlags(app, f);
  app.add_flag("--nonblocking", nonblocking, "MPI_Iallreduce + MPI_Wait (rows named mpi-raw-nb)");
  app.add_option("-c,--check", check, "1: one op per size and place checked against the exact sum before the timed ones (default); 0: none")
      ->transform(ds::cli::integer(0, 1));
  if (auto rc = ds::bench::micro::parseFlags(app, f, argc, argv)) return *rc;
  if (f.maxBytes / sizeof(float) > static_cast<std::size_t>(INT32_MAX)) {
    throw ds::ConfigError(fmt::format("-e {} is more than MPI's count limit of {} floats; use 8G at most.",
                                      f.maxBytes, INT32_MAX));
  }

  int provided = 0;
  mpiCheck(MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided), "MPI_Init_thread");
  Raw mpi;
  mpi.nonblocking = nonblocking;
  mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &mpi.comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(mpi.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mpi.comm, &mpi.rank);
  MPI_Comm_size(mpi.comm, &mpi.size);
  const int n = mpi.size;
  const double factor = 2.0 * (n - 1) / n;
  const std::string backend = nonblocking ? "mpi-raw-nb" : "mpi-raw";
  auto sizes = ds::bench::micro::sweepSizes(f, sizeof(float));

  report::SweepRun runRec;
  runRec.args.minBytes = f.minBytes;
  runRec.args.maxBytes = f.maxBytes;
  runRec.args.stepFactor = f.stepFactor;
  runRec.args.iters = f.iters;
  runRec.args.warmupIters = f.warmupIters;
  runRec.args.check = check;
  runRec.args.ops = {"sum"};
  runRec.args.dtypes = {"f32"};
  runRec.args.collectives = {"allreduce"};
  runRec.args.backends = {backend};
  runRec.args.minTimeS = f.minTimeS;
  runRec.metadata.worldSize = n;
  runRec.metadata.ranks = gatherRanks(mpi);
  for (const auto& r : runRec.metadata.ranks) {
    if (std::find(runRec.metadata.hosts.begin(), runRec.metadata.hosts.end(), r.host) ==
        runRec.metadata.hosts.end())
      runRec.metadata.hosts.push_back(r.host);
  }
  runRec.metadata.commandLine = ds::bench::coll::commandLine();
  runRec.metadata.launcher = ds::bench::coll::launcherName();
  runRec.metadata.versions = ds::bench::coll::libraryVersions();
  runRec.metadata.env = ds::bench::coll::relevantEnv();
  runRec.metadata.startTime = ds::isoUtcNowMs();
  runRec.notes.push_back(fmt::format(
      "{}: {} called directly from the benchmark loop (no dsperf engine), f32 sum, one op after another; "
      "the time is the loop time per op averaged over ranks",
      backend, nonblocking ? "MPI_Iallreduce + MPI_Wait" : "MPI_Allreduce"));

  std::unique_ptr<report::SweepReporter> reporter = std::make_unique<report::SweepReporter>();
  if (mpi.rank == 0) {
    auto multi = std::make_unique<report::MultiReporter>();
    multi->add(std::make_unique<report::TextReporter>(stdout));
    if (!f.jsonPath.empty()) multi->add(std::make_unique<report::JsonReporter>(f.jsonPath));
    reporter = std::move(multi);
  }
  reporter->start(runRec);
  report::SweepTable table{backend, "allreduce", fmt::format("2(n-1)/n = {:g} for n = {}", factor, n)};
  reporter->tableStart(table);

  const std::size_t maxCount = sizes.empty() ? 1 : sizes.back() / sizeof(float);
  // dsbench's own host allocator, zero-filled (every page touched before timing): the engine and
  // this peer time buffers placed alike, as a torch tensor is (engine/comm/memory.cpp says why that
  // matters to Open MPI).
  std::unique_ptr<ds::comm::Memory> host = ds::comm::makeMemory(ds::comm::Device{});
  ds::comm::DeviceBuffer sendBuf(*host, maxCount * sizeof(float));
  ds::comm::DeviceBuffer recvBuf(*host, maxCount * sizeof(float));
  auto* send = static_cast<float*>(sendBuf.data());
  auto* recv = static_cast<float*>(recvBuf.data());
  std::vector<report::SweepMeasurement> rows;
  for (std::size_t bytes : sizes) {
    const int count = static_cast<int>(bytes / sizeof(float));
    report::SweepMeasurement m = allreduceRow(backend, n, bytes);
    for (bool inPlace : {false, true}) {
      PlaceTiming t = timePlace(mpi, f, check != 0, inPlace, send, recv, count);
      (inPlace ? m.inPlace : m.outOfPlace) = combine(mpi, t, static_cast<double>(bytes), factor, check != 0);
    }
    if (mpi.rank == 0) {
      reporter->measurement(m);
      rows.push_back(m);
      runRec.results.push_back(m);
    }
  }
  reporter->tableEnd(table, rows);
  runRec.summary = report::summarize(runRec.results);
  runRec.summary.exitCode = runRec.summary.outOfBounds > 0 ? ds::bench::kExitWrongData : ds::bench::kExitOk;
  if (runRec.summary.outOfBounds > 0) runRec.summary.status = "wrong_data";
  runRec.metadata.endTime = ds::isoUtcNowMs();
  if (mpi.rank == 0) reporter->finish(runRec);
  int code = runRec.summary.exitCode;
  MPI_Bcast(&code, 1, MPI_INT, 0, mpi.comm);
  MPI_Comm_free(&mpi.comm);
  MPI_Finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::bench::runMain("ds_mpi_allreduce_raw", [&] { return run(argc, argv); });
}
