#include "diag/world/world_mode.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "diag/fleet/fleet_mode.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "diag/world/transport.h"
#include "diag/world/world_checks.h"
#include "engine/accelerator/accelerator.h"
#include "engine/comm/memory.h"
#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "engine/common/log.h"
#include "engine/host/net.h"
#include "engine/init.h"
#include "engine/store/store.h"
#include "reports/diag/diag_text.h"

namespace ds::diag {
namespace {

using Clock = std::chrono::steady_clock;
using store::toBytes;
using store::toString;

double nowWallMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Json recordsJson(const std::vector<DiagRecord>& r) { return Json(r); }

// Why this rank cannot drive a GPU for a job on nccl ("" when it can): its accelerator and the
// device its LOCAL_RANK picks, as init_distributed will choose them. The CUDA runtime is asked only
// after the probe child (probes.cpp) found libcuda working and a device, so a driver that crashes or
// hangs is met there, not in this process; likewise libnccl must have loaded in its probe.
std::string gpuProblem(Context& ctx, int localRank) {
  const GpuProbe& gpu = ctx.gpu();
  if (!gpu.cudaLoaded || gpu.devices.empty()) {
    return "no GPU is visible on this rank" + (gpu.cudaError.empty() ? "" : " (" + gpu.cudaError + ")");
  }
  if (!ctx.nccl().loaded) {
    return "libnccl does not load on this rank" + (ctx.nccl().error.empty() ? "" : " (" + ctx.nccl().error + ")");
  }
  env::ProcessEnv env;
  accel::Selection sel;
  try {
    sel = accel::selectAccelerator(env);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (sel.accelerator->name() != "cuda") {
    return sel.overridden ? "DS_ACCELERATOR=" + sel.accelerator->name() + " on this rank"
                          : "no usable CUDA device on this rank" + (sel.reason.empty() ? "" : " (" + sel.reason + ")");
  }
  const int n = sel.accelerator->deviceCount();
  if (localRank >= n) {
    return fmt::format("LOCAL_RANK {} has no GPU of its own ({} visible; CUDA_VISIBLE_DEVICES decides)", localRank, n);
  }
  return "";
}

// What the process-group steps produced on this rank; the others post the smoke part to rank 0.
struct Collectives {
  bool smokeRan = false;
  bool smokeOk = false;
  double smokeGot = 0, smokeExpected = 0, smokeUs = 0;
  std::string smokeError;
  ClockOutcome clock;  // rank 0 only
};

// Waits for `w` at most `timeout`, in slices of a second, and gives up early once the fleet's
// heartbeats name a member frozen or gone (fleet/dead, a few seconds after it stopped): the op is then
// expired as by its own timeout, and the group's diagnosis ("Ranks that never arrived ...") is the
// error. A stopped rank costs the smoke seconds, not the whole --timeout.
void waitWatching(comm::Work& w, fleet::FleetRun& fleet, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return w.wait();  // the op's own timeout: the group's diagnosis
    try {
      return w.wait(std::min<std::chrono::milliseconds>(std::chrono::seconds(1), left));
    } catch (const TimeoutError&) {
      if (w.isCompleted()) return w.wait();  // the op's own error, or done
    }
    if (auto dead = fleet.deadRanks(); !dead.empty()) {
      // Expired as by its own timeout (the group is then broken, so nothing waits on it later); the
      // diagnosis' "did not finish within <timeout>" is not what happened, its list of ranks is.
      const double waited = std::chrono::duration<double>(Clock::now() - (deadline - timeout)).count();
      w.expire();
      std::string diagnosis;
      try {
        w.wait();
        return;
      } catch (const std::exception& e) {
        diagnosis = e.what();
      }
      const auto at = diagnosis.find("Ranks that never arrived");
      throw TimeoutError(fmt::format(
          "{} stopped waiting after {:.1f} s: the fleet's heartbeats name rank(s) {} frozen or gone. {}",
          w.desc().describe(), waited, formatRanges(std::vector<int>(dead.begin(), dead.end())),
          at == std::string::npos ? diagnosis : diagnosis.substr(at)));
    }
  }
}

// Step: allreduce(sum) of 1024 floats, each rank contributing rank + 1, in the memory the group's
// backend reads (the GPU's for nccl).
void runSmoke(comm::ProcessGroup& pg, fleet::FleetRun& fleet, int me, int n, std::chrono::milliseconds timeout,
              Collectives& out) {
  out.smokeRan = true;
  std::vector<float> v(1024, static_cast<float>(me + 1));
  out.smokeExpected = n * (n + 1) / 2.0;
  const std::size_t bytes = v.size() * sizeof(float);
  std::unique_ptr<comm::Memory> mem;
  comm::DeviceBuffer data;
  try {
    mem = comm::makeMemory(pg.options().device);
    data = comm::DeviceBuffer(*mem, bytes);
    mem->toDevice(data.data(), v.data(), bytes);
    auto t0 = Clock::now();
    auto work = pg.allreduce(comm::Buffer{data.data(), v.size(), comm::DType::kF32, mem->device()},
                             comm::ReduceOp::kSum, timeout);
    waitWatching(*work, fleet, timeout);
    out.smokeUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    mem->toHost(v.data(), data.data(), bytes);
    out.smokeGot = v[0];
    out.smokeOk =
        std::all_of(v.begin(), v.end(), [&](float x) { return x == static_cast<float>(out.smokeExpected); });
    if (!out.smokeOk) {
      auto bad = std::find_if(v.begin(), v.end(),
                              [&](float x) { return x != static_cast<float>(out.smokeExpected); });
      out.smokeGot = *bad;
    }
  } catch (const std::exception& e) {
    data.leak();  // the op may still write into it
    out.smokeError = e.what();
  }
}

// Step: NTP-style, rank 0 sends, the peer answers with its wall clock; the round with the smallest
// round trip bounds the error by rtt/2. Fills out.clock on rank 0. The ping and the stamp live in the
// memory the group's backend reads (a GPU's for nccl: the peer's copy of its stamp to the device is
// inside rank 0's round trip, and so inside the error bound).
void runClockExchange(comm::ProcessGroup& pg, fleet::FleetRun& fleet, int me, int n,
                      std::chrono::milliseconds timeout, Collectives& out) {
  std::unique_ptr<comm::Memory> mem;
  comm::DeviceBuffer ping, stamp;
  try {
    mem = comm::makeMemory(pg.options().device);
    ping = comm::DeviceBuffer(*mem, sizeof(float));
    stamp = comm::DeviceBuffer(*mem, sizeof(double));
    const comm::Buffer pb{ping.data(), 1, comm::DType::kF32, mem->device()};
    const comm::Buffer sb{stamp.data(), 1, comm::DType::kF64, mem->device()};
    for (int r = 1; r < n; ++r) {
      if (me != 0 && me != r) continue;
      ClockSample best{r, 0, 1e300};
      for (int round = 0; round < 5; ++round) {
        double value = 0;
        if (me == 0) {
          double t0 = nowWallMs();
          waitWatching(*pg.send(pb, r, 11, timeout), fleet, timeout);
          waitWatching(*pg.recv(sb, r, 12, timeout), fleet, timeout);
          double t1 = nowWallMs();
          mem->toHost(&value, stamp.data(), sizeof value);
          if (t1 - t0 < best.rttMs) best = {r, value - (t0 + t1) / 2, t1 - t0};
        } else {
          waitWatching(*pg.recv(pb, 0, 11, timeout), fleet, timeout);
          value = nowWallMs();
          mem->toDevice(stamp.data(), &value, sizeof value);
          waitWatching(*pg.send(sb, 0, 12, timeout), fleet, timeout);
        }
      }
      if (me == 0) out.clock.samples.push_back(best);
    }
  } catch (const std::exception& e) {
    ping.leak();
    stamp.leak();
    out.clock.error = e.what();
  }
}

// The job's own backend, once every host is known to be reachable: its full-mesh connect can then
// no longer hang on a missing route. Runs the selected collective steps on it.
Collectives runProcessGroup(fleet::FleetRun& fleet, const std::string& transport, const Selection& sel,
                            const DiagOptions& opt, bool& pgUp) {
  Collectives out;
  fleet.enterStage("process_group");
  InitOptions init;
  init.distBackend = transport;
  init.timeout = opt.timeout;
  init.verbose = false;
  init.joined = &fleet.joined();
  // A rank that froze or left after the fleet's stages never comes to the group's rendezvous: the
  // heartbeats name it within seconds, and the wait ends then rather than after the whole --timeout.
  init.stopWaiting = [&fleet]() -> std::string {
    auto dead = fleet.deadRanks();
    if (dead.empty()) return "";
    return fmt::format("the fleet's heartbeats name rank(s) {} frozen or gone",
                       formatRanges(std::vector<int>(dead.begin(), dead.end())));
  };
  try {
    auto world = initDistributed(init);
    pgUp = true;
    auto& pg = world->pg();
    const int me = world->rank(), n = world->worldSize();
    fleet.enterStage("smoke");
    if (sel.selected("world.smoke_allreduce")) runSmoke(pg, fleet, me, n, opt.timeout, out);
    if (sel.selected("world.clock_skew")) {
      if (!pg.broken()) {
        runClockExchange(pg, fleet, me, n, opt.timeout, out);
      } else {
        out.clock.notRun = "the smoke allreduce left the process group unusable (world.smoke_allreduce says why)";
      }
    }
  } catch (const std::exception& e) {
    out.smokeRan = sel.selected("world.smoke_allreduce");
    out.smokeError = e.what();
  }
  return out;
}

Json collectivesJson(const Collectives& c) {
  return {{"smoke_ran", c.smokeRan},
          {"smoke_ok", c.smokeOk},
          {"smoke_got", c.smokeGot},
          {"smoke_error", c.smokeError}};
}

const std::string kPrefix = "diag/";

// Rank 0: its own smoke result and every other rank's posted one, all within one `timeout`; a rank
// the fleet's heartbeats name frozen or gone is silent at once, not waited for. One store round trip
// per 50 ms asks for every post still awaited (at thousands of ranks, not one per rank); the posts
// are then read with one multiGet.
SmokeOutcome gatherSmoke(fleet::FleetRun& fleet, int n, std::chrono::milliseconds timeout, const Collectives& own) {
  SmokeOutcome out;
  out.expected = own.smokeExpected;
  out.timeUs = own.smokeUs;
  if (own.smokeRan && !own.smokeOk) {
    out.errors.push_back(fmt::format(
        "rank 0: {}", own.smokeError.empty() ? fmt::format("got {}", own.smokeGot) : own.smokeError));
  }
  auto& st = fleet.store();
  auto keyOf = [](int r) { return kPrefix + "post/" + std::to_string(r); };
  const auto deadline = Clock::now() + timeout;
  std::vector<int> present;  // ranks whose post is in the store
  try {
    bool all = false;
    while (true) {
      const auto silent = fleet.silentRanks();
      std::vector<std::string> awaited;
      for (int r = 1; r < n; ++r)
        if (!silent.count(r)) awaited.push_back(keyOf(r));
      all = st.check(awaited);
      if (all || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Every awaited post is there when `all` (the silent ones may be too); otherwise each is asked once.
    const auto silent = fleet.silentRanks();
    for (int r = 1; r < n; ++r)
      if ((all && !silent.count(r)) || st.check({keyOf(r)})) present.push_back(r);
  } catch (const std::exception&) {
    present.clear();  // the store is gone: no post can be read
  }
  std::vector<std::string> keys;
  for (int r : present) keys.push_back(keyOf(r));
  std::vector<store::Bytes> posts;
  try {
    if (!keys.empty()) posts = st.multiGet(keys, timeout);
  } catch (const std::exception&) {
    present.clear();
  }
  std::size_t next = 0;
  for (int r = 1; r < n; ++r) {
    if (next >= present.size() || present[next] != r) {
      out.silent.push_back(r);
      continue;
    }
    const Json j = Json::parse(toString(posts[next++]), nullptr, false);
    if (j.is_discarded()) {
      out.errors.push_back(fmt::format("rank {}: its smoke result in the store is not JSON", r));
      continue;
    }
    if (j.value("smoke_ran", false) && !j.value("smoke_ok", false)) {
      std::string e = j.value("smoke_error", "");
      out.errors.push_back(
          fmt::format("rank {}: {}", r, e.empty() ? fmt::format("got {}", j.value("smoke_got", 0.0)) : e));
    }
  }
  return out;
}

fleet::FleetOptions fleetOptions(const DiagOptions& opt) {
  fleet::FleetOptions fo;
  fo.timeout = opt.timeout;
  fo.connectTimeout = opt.connectTimeout;
  fo.pairTimeout = opt.pairTimeout;
  fo.largeBytes = opt.linkLargeBytes;
  fo.allPairs = opt.allPairs;
  fo.randomMatchings = opt.linkRounds;
  fo.minLinkGBps = opt.minLinkGBps;
  fo.slowLinkMs = opt.slowLinkMs;
  if (const char* f = std::getenv("DSDIAG_TEST_FAULT")) fo.testFault = f;
  return fo;
}

// This rank could not join: it reports on its own. Its local checks say why, the rendezvous row
// says what happened.
// `seconds` counts from `since` to after the local checks, as the message always did.
WorldOutcome joinFailed(Context& ctx, const Selection& sel, const std::string& host,
                        const std::string& toolVersion, Clock::time_point since, const std::string& error) {
  WorldOutcome out;
  out.root = true;
  out.rank = ctx.rank();
  out.report.mode = "local";
  out.report.host = host;
  out.report.toolVersion = toolVersion;
  out.report.worldSize = ctx.worldSize();
  out.report.checks = runLocalChecks(ctx, sel, ctx.rank(), host);
  const double seconds = std::chrono::duration<double>(Clock::now() - since).count();
  out.report.checks.push_back(
      worldRecord("world.rendezvous", world::rendezvousFailed(ctx.rank(), seconds, error)));
  out.report.checks.back().rank = ctx.rank();
  out.report.checks.back().host = host;
  out.exitCode = report::diagExitCode(out.report.checks);
  return out;
}

// Rank 0: every member's local report (its own first), bounded by timeout; `missing` gets the
// ranks that sent none or garbage.
std::vector<RankReport> gatherReports(fleet::FleetRun& fleet, RankReport own,
                                      std::chrono::milliseconds timeout, std::vector<int>& missing) {
  std::vector<RankReport> reports{std::move(own)};
  std::vector<int> others;
  for (int r : fleet.members()) {
    if (r != 0) others.push_back(r);
  }
  auto got = fleet.gather("local", others, Clock::now() + timeout);
  for (int r = 1; r < fleet.worldSize(); ++r) {
    auto it = got.find(r);
    if (it == got.end()) {
      missing.push_back(r);
      continue;
    }
    try {
      auto j = Json::parse(it->second);
      reports.push_back({r, j.value("host", ""), j.value("tool_version", ""),
                         j.at("records").get<std::vector<DiagRecord>>(), j.value("transport", ""),
                         j.value("transport_why", "")});
    } catch (const std::exception&) {
      missing.push_back(r);
    }
  }
  return reports;
}

// Rank 0, after the judgement: whether the process group may run ("go"), or "skip:<why>".
std::string planProcessGroup(const fleet::FleetRun& fleet, const Selection& sel,
                             const std::vector<int>& missing) {
  const bool healthy = report::fleetExitCode(fleet.report().judgement) == 0 && missing.empty() &&
                       static_cast<int>(fleet.members().size()) == fleet.worldSize();
  const bool wanted = sel.selected("world.smoke_allreduce") || sel.selected("world.clock_skew");
  return !wanted   ? "skip:not selected"
         : healthy ? "go"
                   : "skip:the fleet has suspects or ranks without a result";
}

// A rank other than 0, at the end: its local records, and the exit code rank 0 agreed.
WorldOutcome memberOutcome(fleet::FleetRun& fleet, const std::string& host, const std::string& toolVersion,
                           std::vector<DiagRecord> local) {
  WorldOutcome out;
  auto waited = fleet.waitForExit();
  out.rank = fleet.rank();
  out.root = false;
  out.report.mode = "world";
  out.report.host = host;
  out.report.worldSize = fleet.worldSize();
  out.report.checks = std::move(local);
  if (!waited.error.empty())
    out.report.checks.push_back(worldRecord("world.gather", world::noVerdict(waited.error)));
  out.exitCode = waited.exitCode;
  out.report.toolVersion = toolVersion;
  return out;
}

// Rank 0, at the end: every rank's local records, then the world findings judged from the facts.
WorldOutcome rootOutcome(const report::FleetReport& fr, const Selection& sel, const WorldFacts& facts,
                         const std::string& host, const std::string& toolVersion) {
  WorldOutcome out;
  out.rank = 0;
  out.root = true;
  out.report.mode = "world";
  out.report.host = host;
  out.report.worldSize = facts.worldSize;
  out.report.toolVersion = toolVersion;
  out.report.missingRanks = facts.missing;
  for (const auto& r : facts.reports) {
    out.report.checks.insert(out.report.checks.end(), r.records.begin(), r.records.end());
  }
  for (auto& r : runWorldChecks(facts, sel)) out.report.checks.push_back(std::move(r));
  out.report.fleet = fr;
  out.exitCode = report::diagExitCode(out.report.checks);
  return out;
}

}  // namespace

WorldOutcome runWorld(Context& ctx, const Selection& sel, const std::string& toolVersion) {
  const std::string host = net::hostName();
  // Library probes fork; do them before the fleet starts threads.
  ctx.probeAll();
  const std::string jobBackend = ctx.jobBackend();
  const auto available = comm::availableBackends();
  const Transport mine = localTransport(jobBackend, available,
                                        jobBackend == "nccl" ? gpuProblem(ctx, ctx.world() ? ctx.world()->localRank.value : 0) : std::string());
  // Only a process group on nccl touches a GPU; on any other backend dsdiag computes on the CPU.
  if (mine.backend != "nccl") setenv("DS_ACCELERATOR", "cpu", 1);
  log::setThreshold(log::Level::kWarn);
  const auto& opt = ctx.options();
  const auto timeout = opt.timeout;

  // Step: join the job's store.
  auto fleet = std::make_shared<fleet::FleetRun>(fleetOptions(opt));
  std::string joinError;
  auto t0 = Clock::now();
  try {
    fleet->join();
  } catch (const std::exception& e) {
    joinError = e.what();
    fleet->publishError(joinError);  // rank 0's verdict quotes it (a rank that reached the store)
  }
  if (!joinError.empty()) return joinFailed(ctx, sel, host, toolVersion, t0, joinError);
  ctx.storeUp = true;
  // From here on a rank that fails leaves its reason in the store, where rank 0 reads it for the
  // verdict ("its own error: ...") instead of sending the user to its stderr.
  try {
    const int me = fleet->rank(), n = fleet->worldSize();
    log::setRank(me);
    auto& st = fleet->store();

    // Steps: local checks, posted to rank 0; the fleet's network stages.
    fleet->enterStage("local_checks");
    auto local = runLocalChecks(ctx, sel, me, host);
    fleet->post("local", Json{{"host", host},
                              {"tool_version", toolVersion},
                              {"records", recordsJson(local)},
                              {"transport", mine.backend},
                              {"transport_why", mine.why}}
                             .dump());
    fleet->runNetworkStages();

    // Step: rank 0 gathers the local reports, judges the fleet and decides whether the process group
    // may run; the others wait for that decision.
    std::vector<RankReport> reports;
    std::vector<int> missing;
    std::string pgPlan;
    Transport transport;
    if (me == 0) {
      reports = gatherReports(*fleet, RankReport{me, host, toolVersion, local, mine.backend, mine.why},
                              timeout, missing);
      fleet->judgeFinal(missing);
      pgPlan = planProcessGroup(*fleet, sel, missing);
      transport = agreedTransport(jobBackend, available, reports);
      st.set(kPrefix + "transport", toBytes(transport.backend));  // before the plan the others wait for
      st.set(kPrefix + "plan", toBytes(pgPlan));
    } else {
      try {
        pgPlan = toString(st.get(kPrefix + "plan", timeout * 3 + std::chrono::seconds(120)));
        if (pgPlan == "go") transport.backend = toString(st.get(kPrefix + "transport", timeout));
      } catch (const std::exception&) {
        pgPlan = "skip:rank 0 never decided";
      }
    }

    // Steps: the smoke allreduce and the clock exchange, on the process group.
    bool pgUp = false;
    Collectives coll;
    if (pgPlan == "go") coll = runProcessGroup(*fleet, transport.backend, sel, opt, pgUp);

    if (me != 0) {
      if (pgPlan == "go")
        st.set(kPrefix + "post/" + std::to_string(me), toBytes(collectivesJson(coll).dump()));
      auto out = memberOutcome(*fleet, host, toolVersion, std::move(local));
      out.fleet = fleet;
      out.pgUp = pgUp;
      return out;
    }

    // Rank 0: the world checks judge what the steps collected.
    const auto& fr = fleet->report();
    WorldFacts facts;
    facts.worldSize = n;
    facts.fleet = &fr;
    facts.joinSeconds = fleet->joinSeconds();
    facts.missing = missing;
    facts.timeout = timeout;
    facts.reports = reports;
    facts.jobBackend = jobBackend;
    facts.transport = transport.backend;
    facts.transportWhy = transport.why;
    if (pgPlan == "go") {
      facts.smoke = gatherSmoke(*fleet, n, timeout, coll);
      facts.clock = coll.clock;
      // A rank that stopped after the fleet's stages (in the process group's start, the smoke or the
      // clock exchange) is judged again with what the heartbeats now say, so that its host is named in
      // the verdict and the exclude file, not only in the smoke's row.
      if (!facts.smoke.errors.empty() || !facts.smoke.silent.empty() || !coll.clock.error.empty()) {
        fleet->judgeFinal(missing);
      }
    } else {
      facts.processGroupSkipped = pgPlan.rfind("skip:", 0) == 0 ? pgPlan.substr(5) : pgPlan;
    }
    auto out = rootOutcome(fr, sel, facts, host, toolVersion);
    out.fleet = fleet;
    out.pgUp = pgUp;
    return out;
  } catch (const std::exception& e) {
    fleet->publishError(fmt::format("Rank {} on {} failed during stage \"{}\": {}", fleet->rank(), host,
                                    fleet->stage(), e.what()));
    throw;
  }
}

}  // namespace ds::diag

namespace ds::diag {

void finishWorld(const WorldOutcome& outcome) {
  if (!outcome.fleet) return;  // the join failed: nothing to leave
  try {
    if (outcome.rank == 0) outcome.fleet->publishExit(outcome.exitCode);
    if (outcome.pgUp && isInitialized()) {
      // Missing ranks, and ranks the heartbeats name frozen or gone, never reach shutdown: do not
      // wait long for them (a rank frozen in the smoke held rank 0 here for the whole 30 s).
      const bool someoneGone = !outcome.report.missingRanks.empty() || !outcome.fleet->deadRanks().empty();
      currentWorld()->shutdown(someoneGone ? std::chrono::seconds(3) : std::chrono::seconds(30));
      destroyProcessGroup();
    }
    outcome.fleet->leave();
  } catch (const std::exception& e) {
    log::warn("dsdiag: leaving the world: {}", e.what());
  }
}

}  // namespace ds::diag
