#include "bench/coll/coll.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "bench/coll/collective.h"
#include "bench/coll/harness.h"
#include "bench/coll/host_hardware.h"
#include "bench/exit_codes.h"
#include "bench/metadata.h"
#include "bench/world/world.h"
#include "engine/comm/memory.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"
#include "engine/init.h"
#include "reports/sweep/sweep_reporter.h"

namespace ds::bench::coll {

namespace {

using Clock = std::chrono::steady_clock;

int exitCodeFor(const std::exception& e) {
  if (dynamic_cast<const TimeoutError*>(&e)) return kExitTimeout;
  if (dynamic_cast<const BackendError*>(&e)) {
    return std::string(e.what()).rfind("CUDA error", 0) == 0 ? kExitCuda : kExitBackend;
  }
  if (dynamic_cast<const IoError*>(&e) || dynamic_cast<const ProtocolError*>(&e)) return kExitIo;
  if (dynamic_cast<const ConfigError*>(&e)) return kExitConfig;
  return kExitInternal;
}

const char* statusFor(int code) {
  switch (code) {
    case kExitTimeout:
      return "timeout";
    case kExitConfig:
      return "config_error";
    default:
      return "error";
  }
}

report::SweepArgs argsRecord(const CollOptions& o, const std::vector<std::string>& backends) {
  report::SweepArgs a;
  a.minBytes = o.minBytes;
  a.maxBytes = o.maxBytes;
  a.stepBytes = o.stepBytes;
  a.stepFactor = o.stepFactor;
  a.iters = o.iters;
  a.warmupIters = o.warmupIters;
  a.check = o.check;
  for (auto op : o.ops) a.ops.emplace_back(comm::reduceOpName(op));
  for (auto t : o.dtypes) a.dtypes.emplace_back(comm::dtypeName(t));
  a.collectives = o.collectives;
  a.backends = backends;
  a.root = o.root;
  a.average = o.average;
  a.timeoutS = o.timeoutS.value_or(0);
  a.minTimeS = o.minTimeS;
  a.blocking = o.blocking;
  a.repeat = o.repeat;
  a.perIterTiming = o.perIterTiming;
  a.perIterSkip = o.perIterSkip;
  return a;
}

// Every rank's identity (bench/world's gatherWorld), as the sweep's metadata keeps it; rank 0 keeps
// the list, the others an empty one.
std::vector<report::SweepRank> gatherRanks(World& world) {
  auto all = gatherWorld(world);
  std::vector<report::SweepRank> out;
  if (world.rank() != 0) return out;
  for (const auto& w : all) {
    report::SweepRank r;
    r.rank = w.rank;
    r.localRank = w.localRank;
    r.nodeRank = w.nodeRank;
    r.host = w.host;
    r.pid = w.pid;
    r.device = w.device;
    r.localRankArg = w.localRankArg;
    r.placement = w.placement;
    out.push_back(r);
  }
  return out;
}

std::unique_ptr<report::SweepReporter> makeReporters(const CollOptions& o) {
  auto multi = std::make_unique<report::MultiReporter>();
  // The journal first: a row on the screen is then always already in the journal, even when the run
  // is killed between the two.
  std::string journal = !o.journalPath.empty() ? o.journalPath
                        : !o.jsonPath.empty()  ? report::journalPathFor(o.jsonPath)
                                               : "";
  if (!journal.empty()) multi->add(std::make_unique<report::JournalReporter>(journal));
  multi->add(std::make_unique<report::TextReporter>(stdout));
  if (!o.jsonPath.empty()) multi->add(std::make_unique<report::JsonReporter>(o.jsonPath));
  if (::isatty(STDERR_FILENO)) multi->add(std::make_unique<report::ProgressReporter>(stderr));
  return multi;
}

double minBusBwFromEnv() {
  const char* v = std::getenv("NCCL_TESTS_MIN_BW");
  if (!v || !*v) return -1;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || d < 0) {
    throw ConfigError(
        fmt::format("NCCL_TESTS_MIN_BW='{}' is not a bandwidth in GB/s; unset it or give a number.", v));
  }
  return d;
}

// Each rank holds a send and a receive buffer of -e bytes (nccl: on the device, with one host staging
// copy); refuse before allocating what this node does not have (-e 16G was an OOM kill, -e 64G an
// "internal error: std::bad_alloc").
void checkSweepMemory(const CollOptions& o) {
  const bool hostBuffers = o.backends.empty() || o.backends.size() > 1 || o.backends.front() != "nccl";
  const int ranks = sys::launcherLocalRanks();
  const double buffer = static_cast<double>(o.maxBytes);
  const double perRank = buffer * (hostBuffers ? 2 : 1);
  sys::checkMemory(perRank * ranks, sys::readMemoryInfo(),
                   fmt::format("-e/--maxbytes {} ({} per rank: {} buffer(s) of {}, x {} rank(s) on this node)",
                               sys::bytesText(buffer), sys::bytesText(perRank), hostBuffers ? 2 : 1,
                               sys::bytesText(buffer), ranks),
                   "Lower -e/--maxbytes, or start fewer ranks on this node.");
}

}  // namespace

int runColl(const CollFlags& flags) {
  const CollOptions o = resolveOptions(flags);
  const double minBw = minBusBwFromEnv();
  const auto sizes = sweepSizes(o);
  checkSweepMemory(o);

  InitOptions init;
  init.distBackend = o.backends.empty() ? "" : o.backends.front();
  init.initMethod = o.initMethod;
  auto world = initDistributed(init);
  const int n = world->worldSize();
  const bool root0 = world->rank() == 0;
  std::vector<std::string> backends =
      o.backends.empty() ? std::vector<std::string>{world->backend()} : o.backends;

  // Checks that need the world size; every rank reaches the same verdict. A collective this world
  // cannot run is an error when named, and left out (with a note) when only "all" asked for it.
  std::vector<std::string> collectives;
  std::vector<std::string> leftOut;
  for (const auto& name : o.collectives) {
    const CollSpec& spec = findCollective(name);
    if (spec.facts->rooted && o.root >= n) {
      throw ConfigError(
          fmt::format("-r/--root {} is not a rank of this job of {} rank(s); give 0..{}.", o.root, n, n - 1));
    }
    if (spec.type == comm::OpType::kSend && n < 2) {
      if (std::find(o.collectivesNamed.begin(), o.collectivesNamed.end(), name) != o.collectivesNamed.end()) {
        throw ConfigError(
            "--coll sendrecv needs at least 2 ranks (each sends to the next); start more ranks.");
      }
      leftOut.push_back(
          fmt::format("--coll all: {} left out, it needs at least 2 ranks (each sends to the next) "
                      "and this job has {}",
                      name, n));
      continue;
    }
    collectives.push_back(name);
  }

  report::SweepRun run;
  run.args = argsRecord(o, backends);
  run.metadata.startTime = isoUtcNowMs();
  run.metadata.worldSize = n;
  run.metadata.ranks = gatherRanks(*world);
  std::set<std::string> seenHosts;
  for (const auto& r : run.metadata.ranks) {
    if (seenHosts.insert(r.host).second) run.metadata.hosts.push_back(r.host);
  }
  // What each host can move: the bound every row is judged against (reports/baseline/expected.h).
  run.metadata.hardware = gatherHardware(*world, run.metadata.ranks, run.metadata.hosts);
  // On one host, CPU backends are bound by memory: measure its copy rate with the job's ranks (skipped
  // for sweeps that stay below 1 MiB, where latency bounds, and with DSBENCH_MEMBW_PROBE=0). Every rank
  // reaches the same decision from the launcher's counts and the flags.
  const bool oneHost = world->info().localWorldSize.value == n;
  const bool cpuBackend =
      std::any_of(backends.begin(), backends.end(), [](const auto& b) { return b != "nccl"; });
  const char* probeEnv = std::getenv("DSBENCH_MEMBW_PROBE");
  if (oneHost && cpuBackend && n > 1 && o.maxBytes >= (std::size_t{1} << 20) &&
      !(probeEnv && std::string(probeEnv) == "0")) {
    double bw = measureCopyBandwidth(*world);
    if (root0 && run.metadata.hardware.size() == 1) run.metadata.hardware.front().memBwGBps = bw;
  }
  run.metadata.commandLine = commandLine();
  run.metadata.launcher = launcherName();
  run.metadata.versions =
      libraryVersions(std::find(backends.begin(), backends.end(), "nccl") != backends.end());
  run.metadata.env = relevantEnv();
  run.metadata.label = o.label;

  // Only rank 0 reports; the others feed a reporter that does nothing.
  std::unique_ptr<report::SweepReporter> reporter =
      root0 ? makeReporters(o) : std::make_unique<report::SweepReporter>();
  reporter->start(run);

  int totalRows = 0;
  for (const auto& name : collectives) {
    const CollSpec& spec = findCollective(name);
    totalRows +=
        static_cast<int>(backends.size() * o.dtypes.size() * (spec.facts->reduces ? o.ops.size() : 1) *
                         sizes.size() * static_cast<std::size_t>(o.repeat));
  }
  HarnessOptions ho;
  ho.iters = o.iters;
  ho.warmupIters = o.warmupIters;
  ho.check = o.check;
  ho.minTimeS = o.minTimeS;
  ho.blocking = o.blocking;
  ho.average = o.average;
  ho.perIterSkip = o.perIterSkip;
  ho.keepTimes = o.perIterTiming > 0;
  if (o.timeoutS) {
    ho.waitTimeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(*o.timeoutS * 1000.0)));
  }

  const auto t0 = Clock::now();
  int done = 0;
  auto note = [&](const std::string& text) {
    run.notes.push_back(text);
    reporter->note(text);
  };
  for (const auto& text : leftOut) note(text);
  std::vector<std::unique_ptr<comm::ProcessGroup>> extraGroups;
  int errorCode = 0;
  try {
    for (const auto& backend : backends) {
      comm::ProcessGroup* pg = nullptr;
      if (backend == world->backend()) {
        pg = &world->pg();
      } else {
        comm::ProcessGroupOptions po = world->pg().options();
        po.groupName = "dsbench-coll-" + backend;
        po.device = comm::groupDevice(backend, world->accelerator().name(), world->localRank());
        extraGroups.push_back(comm::createProcessGroup(backend, po));
        pg = extraGroups.back().get();
      }
      {
        // The harness (and its buffers) goes before the group it runs on.
        auto memory = comm::makeMemory(pg->options().device);
        HarnessOptions hob = ho;
        hob.storePrefix = "ds/coll/h/" + backend;
        Harness harness(*pg, world->store(), *memory, hob);
        for (const auto& name : collectives) {
          const CollSpec& spec = findCollective(name);
          report::SweepTable table{
              backend, spec.facts->name,
              fmt::format("{} = {:g} for n = {}", spec.facts->busFactorText, spec.facts->busFactor(n), n)};
          reporter->tableStart(table);
          std::vector<report::SweepMeasurement> rows;
          for (auto dtype : o.dtypes) {
            std::vector<comm::ReduceOp> ops =
                spec.facts->reduces ? o.ops : std::vector<comm::ReduceOp>{comm::ReduceOp::kSum};
            bool prepared = false;
            for (auto op : ops) {
              if (!pg->supports(spec.type, dtype, op)) {
                note(fmt::format("skipped: backend {} does not support {} on {}{}", backend, spec.facts->name,
                                 comm::dtypeName(dtype),
                                 spec.facts->reduces ? fmt::format(" with {}", comm::reduceOpName(op)) : ""));
                done += static_cast<int>(sizes.size()) * o.repeat;
                continue;
              }
              // --repeat: R passes over the sizes, each in a rotated order; every pass measures each
              // size once. A pass after the first gets fresh buffers (other pages, as another run would)
              // and its own warm-up. A row is reported as soon as its last pass is done, so the journal
              // keeps every finished size of a killed run; the table's rows are put back in size order
              // at its end.
              std::vector<std::vector<report::SweepMeasurement>> passes(sizes.size());
              const std::size_t rowsFirst = rows.size(), resultsFirst = run.results.size();
              for (int rep = 0; rep < o.repeat; ++rep) {
                const bool lastPass = rep + 1 == o.repeat;
                if (!prepared || rep > 0) {
                  harness.prepare(spec, dtype, o.maxBytes);
                  prepared = true;
                }
                harness.warmup(op, o.root, o.minBytes, o.maxBytes);
                for (std::size_t idx : repeatOrder(sizes.size(), rep, o.repeat)) {
                  report::SweepProgress p{table,
                                          comm::dtypeName(dtype),
                                          spec.facts->reduces ? comm::reduceOpName(op) : "none",
                                          sizes[idx],
                                          done,
                                          totalRows,
                                          std::chrono::duration<double>(Clock::now() - t0).count()};
                  reporter->progress(p);
                  report::SweepMeasurement m = harness.measure(sizes[idx], op, o.root);
                  m.backend = backend;
                  if (root0) passes[idx].push_back(std::move(m));
                  ++done;
                  if (lastPass && root0) {
                    report::SweepMeasurement row = report::mergeRepeats(passes[idx]);
                    reporter->measurement(row);
                    rows.push_back(row);
                    run.results.push_back(std::move(row));
                  }
                }
              }
              auto bySize = [](const report::SweepMeasurement& x, const report::SweepMeasurement& y) {
                return x.bytes < y.bytes;
              };
              std::stable_sort(rows.begin() + static_cast<std::ptrdiff_t>(rowsFirst), rows.end(), bySize);
              std::stable_sort(run.results.begin() + static_cast<std::ptrdiff_t>(resultsFirst), run.results.end(),
                               bySize);
            }
          }
          reporter->tableEnd(table, rows);
        }
      }
      if (!extraGroups.empty()) extraGroups.pop_back();  // this backend is done; free its connections
    }
  } catch (const ds::Error& e) {
    errorCode = exitCodeFor(e);
    run.summary = report::summarize(run.results, minBw);
    run.summary.status = statusFor(errorCode);
    run.summary.error = e.what();
    run.summary.exitCode = errorCode;
  }

  if (errorCode == 0) {
    run.summary = report::summarize(run.results, minBw);
    run.summary.exitCode = run.summary.outOfBounds > 0 || run.summary.bwBelowMin ? kExitWrongData : kExitOk;
  }
  run.metadata.endTime = isoUtcNowMs();
  if (root0) reporter->finish(run);

  if (errorCode != 0) {
    // The group may be broken with an op still inside its backend: leave without destructors (as
    // runMain does), after saying why.
    std::fprintf(stderr, "dsbench: %s: %s\n", run.summary.status.c_str(), run.summary.error.c_str());
    if (root0 && !o.jsonPath.empty()) {
      std::fprintf(stderr, "dsbench: the %zu row(s) finished before it are in %s (dsreport html %s).\n",
                   run.results.size(), o.jsonPath.c_str(), o.jsonPath.c_str());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(errorCode);
  }
  // Every rank leaves with rank 0's verdict (wrong data is only known there).
  auto& store = world->store();
  int code = run.summary.exitCode;
  if (root0)
    store.set("ds/coll/exit", store::toBytes(std::to_string(code)));
  else
    code = std::stoi(store::toString(store.get("ds/coll/exit")));
  extraGroups.clear();
  destroyProcessGroup();
  return code;
}

}  // namespace ds::bench::coll
