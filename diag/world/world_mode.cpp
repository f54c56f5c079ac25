#include "diag/world/world_mode.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "diag/fleet/fleet_mode.h"
#include "diag/util.h"
#include "diag/world/cross_checks.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/ranges.h"
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
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

DiagRecord worldRecord(const char* id, Finding f) {
  return DiagRecord{id, "world", f.status, std::move(f.message), std::move(f.remedy), std::move(f.data), -1, ""};
}

Json recordsJson(const std::vector<DiagRecord>& r) { return Json(r); }

// The backend dsdiag's own process group uses: the job's, except nccl (dsdiag never loads NCCL)
// which is replaced by gloo (or mpi when gloo is not built).
std::string transportBackend(const std::string& job) {
  auto avail = comm::availableBackends();
  auto has = [&](const std::string& b) { return std::find(avail.begin(), avail.end(), b) != avail.end(); };
  if (job != "nccl" && has(job)) return job;
  if (has("gloo")) return "gloo";
  return avail.empty() ? "gloo" : avail.front();
}

struct Collectives {
  bool smokeRan = false;
  bool smokeOk = false;
  double smokeGot = 0, smokeExpected = 0, smokeUs = 0;
  std::string smokeError;
  std::vector<ClockSample> clocks;  // rank 0 only
  std::string clockError;
};

comm::Buffer buf(std::vector<float>& v) { return comm::Buffer{v.data(), v.size(), comm::DType::kF32, {}}; }

void runCollectives(World& w, const Selection& sel, const DiagOptions& opt, Collectives& out) {
  auto& pg = w.pg();
  const int me = w.rank(), n = w.worldSize();
  const auto timeout = opt.timeout;
  if (sel.selected("world.smoke_allreduce")) {
    out.smokeRan = true;
    std::vector<float> v(1024, static_cast<float>(me + 1));
    out.smokeExpected = n * (n + 1) / 2.0;
    try {
      auto t0 = Clock::now();
      pg.allreduce(buf(v), comm::ReduceOp::kSum, timeout)->wait(timeout);
      out.smokeUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      out.smokeGot = v[0];
      out.smokeOk = std::all_of(v.begin(), v.end(), [&](float x) { return x == static_cast<float>(out.smokeExpected); });
      if (!out.smokeOk) {
        auto bad = std::find_if(v.begin(), v.end(), [&](float x) { return x != static_cast<float>(out.smokeExpected); });
        out.smokeGot = *bad;
      }
    } catch (const std::exception& e) {
      out.smokeError = e.what();
    }
  }
  if (pg.broken()) return;
  if (sel.selected("world.clock_skew")) {
    // NTP-style: rank 0 sends, the peer answers with its wall clock; the round with the smallest
    // round trip bounds the error by rtt/2.
    try {
      for (int r = 1; r < n; ++r) {
        if (me != 0 && me != r) continue;
        ClockSample best{r, 0, 1e300};
        for (int round = 0; round < 5; ++round) {
          std::vector<float> ping(1, 0.f);
          std::vector<double> stamp(1, 0.0);
          comm::Buffer sb{stamp.data(), 1, comm::DType::kF64, {}};
          if (me == 0) {
            double t0 = nowWallMs();
            pg.send(buf(ping), r, 11, timeout)->wait(timeout);
            pg.recv(sb, r, 12, timeout)->wait(timeout);
            double t1 = nowWallMs();
            if (t1 - t0 < best.rttMs) best = {r, stamp[0] - (t0 + t1) / 2, t1 - t0};
          } else {
            pg.recv(buf(ping), 0, 11, timeout)->wait(timeout);
            stamp[0] = nowWallMs();
            pg.send(sb, 0, 12, timeout)->wait(timeout);
          }
        }
        if (me == 0) out.clocks.push_back(best);
      }
    } catch (const std::exception& e) {
      out.clockError = e.what();
    }
  }
}

Json collectivesJson(const Collectives& c) {
  return {{"smoke_ran", c.smokeRan}, {"smoke_ok", c.smokeOk}, {"smoke_got", c.smokeGot},
          {"smoke_error", c.smokeError}};
}

// The records world mode adds from the fleet's judgement: reachability, links and hosts.
std::vector<DiagRecord> fleetRecords(const report::FleetReport& f, const Selection& sel) {
  std::vector<DiagRecord> out;
  const auto& j = f.judgement;
  auto add = [&](const char* id, Finding x) {
    if (sel.selected(id)) out.push_back(worldRecord(id, std::move(x)));
  };
  auto evidenceOf = [&](const std::vector<std::string>& kinds) {
    std::vector<std::string> lines;
    for (const auto& h : j.hosts) {
      for (const auto& e : h.evidence) {
        if (std::find(kinds.begin(), kinds.end(), e.kind) != kinds.end()) lines.push_back(e.text);
      }
    }
    for (const auto& l : j.links) {
      for (const auto& e : l.evidence) {
        if (std::find(kinds.begin(), kinds.end(), e.kind) != kinds.end()) lines.push_back(e.text);
      }
    }
    return lines;
  };
  int probes = 0, ok = 0;
  for (const auto& r : f.input.reach) {
    probes += r.probes;
    ok += r.ok;
  }
  auto reachBad = evidenceOf({"unreachable", "reach_partial"});
  auto ifBad = evidenceOf({"ifname", "mtu"});
  Json reachData{{"probes", probes}, {"ok", ok}};
  if (!j.jobSocketIfname.empty()) reachData["socket_ifname"] = j.jobSocketIfname;
  if (!reachBad.empty()) {
    add("world.reachability",
        fail(fmt::format("{}", join(reachBad, " ")),
             "Fix the route or firewall between those hosts, or leave the host out (--exclude-file); the interface "
             "advice below names the interfaces that reach every peer.",
             reachData));
  } else if (!ifBad.empty()) {
    add("world.reachability", warn(join(ifBad, " "), "Set the same working interface and MTU on every host.", reachData));
  } else {
    add("world.reachability",
        pass(probes == 0 ? "One host: no peer to probe"
                         : fmt::format("All {} TCP probes between host leaders answered{}", probes,
                                       j.jobSocketIfname.empty() ? ""
                                                                 : fmt::format("; NCCL_SOCKET_IFNAME={} works on every host",
                                                                               j.jobSocketIfname)),
             reachData));
  }
  int okPairs = 0, badPairs = 0;
  for (const auto& p : f.input.pairs) (p.outcome == report::PairOutcome::kOk ? okPairs : badPairs)++;
  auto linkBad = evidenceOf({"link_slow", "link_failed"});
  Json linkData{{"pairs", f.input.pairs.size()},      {"rounds", f.stats.rounds},
                {"median_GBps", j.medianBandwidthGBps}, {"median_latency_us", j.medianLatencyUs}};
  if (f.input.pairs.empty()) {
    add("world.link_matrix", skip("No link pairs ran (one host, or no live peers)", linkData));
  } else if (!linkBad.empty()) {
    add("world.link_matrix",
        fail(join(linkBad, " "),
             "Check the named host's NIC (speed, errors: ethtool -S), cable and switch port, then rerun; the exclude "
             "file lists the hosts to leave out meanwhile.",
             linkData));
  } else {
    add("world.link_matrix",
        pass(fmt::format("{} pair(s) in {} round(s): fleet median {:.3g} GB/s, {:.0f} us one way{}", f.input.pairs.size(),
                         f.stats.rounds, j.medianBandwidthGBps, j.medianLatencyUs,
                         badPairs ? fmt::format(" ({} pair(s) with a rank that stopped, see world.hosts)", badPairs) : ""),
             linkData));
  }
  std::vector<std::string> suspects, noResult;
  for (const auto& h : j.hosts) {
    if (h.state == report::HostState::kSuspect) suspects.push_back(h.host);
    if (h.state == report::HostState::kNoResult) noResult.push_back(h.host);
  }
  for (const auto& l : j.links) suspects.push_back(l.hostA + "<->" + l.hostB);
  Json hostData{{"hosts", j.hosts.size()}, {"suspects", suspects}, {"no_result", noResult}};
  if (suspects.empty() && noResult.empty()) {
    add("world.hosts", pass(fmt::format("All {} host(s) healthy", j.hosts.size()), hostData));
  } else {
    std::vector<std::string> parts;
    for (const auto& h : j.hosts) {
      if (h.state == report::HostState::kHealthy) continue;
      std::vector<std::string> ev;
      for (const auto& e : h.evidence) ev.push_back(e.text);
      parts.push_back(fmt::format("{} ({}): {}", h.host, report::hostStateName(h.state), join(ev, " ")));
    }
    for (const auto& l : j.links) {
      std::vector<std::string> ev;
      for (const auto& e : l.evidence) ev.push_back(e.text);
      parts.push_back(fmt::format("link {} <-> {}: {}", l.hostA, l.hostB, join(ev, " ")));
    }
    add("world.hosts",
        fail(fmt::format("{} suspect(s), {} host(s) with no result of {}: {}", suspects.size(), noResult.size(),
                         j.hosts.size(), join(parts, " | ")),
             "Take the suspects out of the job (sbatch --exclude with the exclude file, or DeepSpeed's --exclude), "
             "repair them, and rerun dsdiag --world on them.",
             hostData));
  }
  return out;
}

}  // namespace

WorldOutcome runWorld(Context& ctx, const Selection& sel, const std::string& toolVersion) {
  WorldOutcome out;
  const std::string host = net::hostName();
  // Library probes fork; do them before the fleet starts threads.
  ctx.probeAll();
  const std::string jobBackend = ctx.jobBackend();
  const std::string transport = transportBackend(jobBackend);
  // dsdiag itself never computes on a GPU: its process group is a CPU one.
  setenv("DS_ACCELERATOR", "cpu", 1);
  log::setThreshold(log::Level::kWarn);
  const auto& opt = ctx.options();
  const auto timeout = opt.timeout;

  fleet::FleetOptions fo;
  fo.timeout = timeout;
  fo.connectTimeout = opt.connectTimeout;
  fo.pairTimeout = opt.pairTimeout;
  fo.largeBytes = opt.linkLargeBytes;
  fo.allPairs = opt.allPairs;
  fo.randomMatchings = opt.linkRounds;
  fo.minLinkGBps = opt.minLinkGBps;
  fo.slowLinkMs = opt.slowLinkMs;
  if (const char* f = std::getenv("DSDIAG_TEST_FAULT")) fo.testFault = f;
  auto fleet = std::make_shared<fleet::FleetRun>(fo);
  out.fleet = fleet;
  std::string initError;
  auto t0 = Clock::now();
  try {
    fleet->join();
  } catch (const std::exception& e) {
    initError = e.what();
  }
  if (!initError.empty()) {
    out.fleet.reset();
    // Each rank reports on its own: its local checks say why, the rendezvous row says what happened.
    out.root = true;
    out.rank = ctx.rank();
    out.report.mode = "local";
    out.report.host = host;
    out.report.toolVersion = toolVersion;
    out.report.worldSize = ctx.worldSize();
    out.report.checks = runLocalChecks(ctx, sel, ctx.rank(), host);
    out.report.checks.push_back(worldRecord(
        "world.rendezvous",
        fail(fmt::format("Rank {} could not join the job's store after {:.1f} s: {}", ctx.rank(),
                         std::chrono::duration<double>(Clock::now() - t0).count(), initError),
             "Start every rank (WORLD_SIZE of them) with the same MASTER_ADDR/MASTER_PORT; the net and env rows above "
             "say what is wrong on this node.",
             {{"error", initError}})));
    out.report.checks.back().rank = ctx.rank();
    out.report.checks.back().host = host;
    out.exitCode = report::diagExitCode(out.report.checks);
    return out;
  }
  ctx.storeUp = true;
  const int me = fleet->rank(), n = fleet->worldSize();
  out.rank = me;
  log::setRank(me);
  auto& st = fleet->store();
  const std::string prefix = "diag/";

  fleet->enterStage("local_checks");
  auto local = runLocalChecks(ctx, sel, me, host);
  fleet->post("local", Json{{"host", host}, {"tool_version", toolVersion}, {"records", recordsJson(local)}}.dump());
  fleet->runNetworkStages();

  // Rank 0: every member's local report, then the judgement and whether the process group may run.
  std::vector<RankReport> reports(1, RankReport{me, host, toolVersion, local});
  std::vector<int> missing;
  std::string pgPlan;
  if (me == 0) {
    std::vector<int> others;
    for (int r : fleet->members()) {
      if (r != 0) others.push_back(r);
    }
    auto got = fleet->gather("local", others, Clock::now() + timeout);
    for (int r = 1; r < n; ++r) {
      auto it = got.find(r);
      if (it == got.end()) {
        missing.push_back(r);
        continue;
      }
      try {
        auto j = Json::parse(it->second);
        reports.push_back({r, j.value("host", ""), j.value("tool_version", ""), j.at("records").get<std::vector<DiagRecord>>()});
      } catch (const std::exception&) {
        missing.push_back(r);
      }
    }
    fleet->judgeFinal(missing);
    const auto& judged = fleet->report().judgement;
    const bool healthy = report::fleetExitCode(judged) == 0 && missing.empty() &&
                         static_cast<int>(fleet->members().size()) == n;
    const bool wanted = sel.selected("world.smoke_allreduce") || sel.selected("world.clock_skew");
    pgPlan = !wanted ? "skip:not selected" : healthy ? "go" : "skip:the fleet has suspects or ranks without a result";
    st.set(prefix + "plan", toBytes(pgPlan));
  } else {
    try {
      pgPlan = toString(st.get(prefix + "plan", timeout * 3 + std::chrono::seconds(120)));
    } catch (const std::exception&) {
      pgPlan = "skip:rank 0 never decided";
    }
  }

  // The job's own backend, once every host is known to be reachable: its full-mesh connect can
  // then no longer hang on a missing route.
  Collectives coll;
  if (pgPlan == "go") {
    fleet->enterStage("smoke");
    InitOptions init;
    init.distBackend = transport;
    init.timeout = timeout;
    init.verbose = false;
    init.joined = &fleet->joined();
    try {
      auto world = initDistributed(init);
      out.pgUp = true;
      runCollectives(*world, sel, opt, coll);
    } catch (const std::exception& e) {
      coll.smokeRan = sel.selected("world.smoke_allreduce");
      coll.smokeError = e.what();
    }
  }

  int exitCode = 0;
  if (me != 0) {
    if (pgPlan == "go") st.set(prefix + "post/" + std::to_string(me), toBytes(collectivesJson(coll).dump()));
    auto waited = fleet->waitForExit();
    exitCode = waited.exitCode;
    out.root = false;
    out.report.mode = "world";
    out.report.host = host;
    out.report.worldSize = n;
    out.report.checks = local;
    if (!waited.error.empty()) {
      out.report.checks.push_back(worldRecord("world.gather", fail(waited.error, "Look at rank 0's output.")));
    }
    out.exitCode = exitCode;
    out.report.toolVersion = toolVersion;
    return out;
  }

  std::vector<DiagRecord> all;
  for (const auto& r : reports) all.insert(all.end(), r.records.begin(), r.records.end());
  auto addWorld = [&](const char* id, Finding f) {
    if (sel.selected(id)) all.push_back(worldRecord(id, std::move(f)));
  };
  const auto& fr = fleet->report();
  std::vector<int> neverJoined;
  for (const auto& r : fr.input.ranks) {
    if (!r.joined) neverJoined.push_back(r.rank);
  }
  if (neverJoined.empty()) {
    addWorld("world.rendezvous", pass(fmt::format("{} rank(s) joined the store in {:.2f} s", n, fleet->joinSeconds())));
  } else {
    addWorld(
        "world.rendezvous",
        fail(
            fmt::format(
                "Rank(s) {} never joined the store within {:.0f} s ({} of {} joined); the others went on "
                "without them",
                formatRanges(neverJoined), fleet->joinSeconds(), n - neverJoined.size(), n),
            "Those ranks were not started, died before joining, hang before reaching dsdiag, or cannot reach "
            "MASTER_ADDR:MASTER_PORT: look at their output, or run dsdiag on their hosts.",
            {{"missing", neverJoined}}));
  }
  std::vector<int> silentLocal;
  for (int r : missing) {
    if (std::find(neverJoined.begin(), neverJoined.end(), r) == neverJoined.end()) silentLocal.push_back(r);
  }
  if (!silentLocal.empty()) {
    addWorld(
        "world.gather",
        fail(
            fmt::format(
                "Rank(s) {} joined but never reported their local checks within {} ms: they hang or died "
                "(world.hosts names the stage where they stopped)",
                formatRanges(silentLocal), timeout.count()),
            "Look at the output of those ranks; rerun with a larger --timeout if their checks are slow (DNS, "
            "connect timeouts).",
            {{"missing", silentLocal}}));
  } else {
    addWorld("world.gather", pass(fmt::format("All {} joined rank(s) reported", n - neverJoined.size())));
  }
  for (auto& r : crossRankChecks(reports, n)) {
    if (sel.selected(r.id)) all.push_back(std::move(r));
  }
  for (auto& r : fleetRecords(fr, sel)) all.push_back(std::move(r));
  if (pgPlan == "go") {
    std::vector<std::string> smokeBad;
    if (coll.smokeRan && !coll.smokeOk) {
      smokeBad.push_back(fmt::format("rank 0: {}", coll.smokeError.empty() ? fmt::format("got {}", coll.smokeGot) : coll.smokeError));
    }
    std::vector<int> silent;
    for (int r = 1; r < n; ++r) {
      try {
        auto j = Json::parse(toString(st.get(prefix + "post/" + std::to_string(r), timeout)));
        if (j.value("smoke_ran", false) && !j.value("smoke_ok", false)) {
          std::string e = j.value("smoke_error", "");
          smokeBad.push_back(fmt::format("rank {}: {}", r, e.empty() ? fmt::format("got {}", j.value("smoke_got", 0.0)) : e));
        }
      } catch (const std::exception&) {
        silent.push_back(r);
      }
    }
    if (coll.smokeRan) {
      std::string on = jobBackend == transport
                           ? "on " + transport
                           : fmt::format("on {} (the job's backend {} is not loaded by dsdiag: run `dsbench world "
                                         "--backend {}` under the same launcher for its smoke test)",
                                         transport, jobBackend, jobBackend);
      if (smokeBad.empty() && silent.empty()) {
        addWorld("world.smoke_allreduce",
                 pass(fmt::format("allreduce(sum) of 1024 floats {}: {} on every rank as expected, {:.0f} us", on,
                                  coll.smokeExpected, coll.smokeUs),
                      {{"backend", transport}, {"expected", coll.smokeExpected}, {"time_us", coll.smokeUs}}));
      } else {
        addWorld(
            "world.smoke_allreduce",
            fail(fmt::format(
                     "Smoke allreduce {} failed: {}{}", on, join(smokeBad, "; "),
                     silent.empty() ? "" : fmt::format("; rank(s) {} sent no result", formatRanges(silent))),
                 "A wrong sum means a broken transport or mixed versions; a timeout names the rank that did "
                 "not "
                 "arrive. See world.link_matrix and the net rows.",
                 {{"errors", smokeBad}, {"expected", coll.smokeExpected}}));
      }
    }
    if (sel.selected("world.clock_skew")) {
      addWorld("world.clock_skew", coll.clockError.empty() ? judgeClockSkew(coll.clocks)
                                                           : fail("Clock exchange failed: " + coll.clockError,
                                                                  "See world.link_matrix and world.smoke_allreduce."));
    }
  } else {
    std::string why = pgPlan.rfind("skip:", 0) == 0 ? pgPlan.substr(5) : pgPlan;
    for (const char* id : {"world.smoke_allreduce", "world.clock_skew"}) {
      addWorld(id, skip(fmt::format("Not run: {} (the backend's full-mesh connect would hang on them; see world.hosts)",
                                    why)));
    }
  }
  out.root = true;
  out.report.mode = "world";
  out.report.host = host;
  out.report.worldSize = n;
  out.report.toolVersion = toolVersion;
  out.report.missingRanks = missing;
  out.report.checks = std::move(all);
  out.report.fleet = fr;
  out.exitCode = report::diagExitCode(out.report.checks);
  return out;
}

}  // namespace ds::diag

namespace ds::diag {

void finishWorld(const WorldOutcome& outcome) {
  if (!outcome.fleet) return;  // the join failed: nothing to leave
  try {
    if (outcome.rank == 0) outcome.fleet->publishExit(outcome.exitCode);
    if (outcome.pgUp && isInitialized()) {
      // Missing ranks never reach shutdown: do not wait long for them.
      currentWorld()->shutdown(outcome.report.missingRanks.empty() ? std::chrono::seconds(30) : std::chrono::seconds(3));
      destroyProcessGroup();
    }
    outcome.fleet->leave();
  } catch (const std::exception& e) {
    log::warn("dsdiag: leaving the world: {}", e.what());
  }
}

}  // namespace ds::diag
