#include "diag/world/world_mode.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "diag/util.h"
#include "diag/world/cross_checks.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/net.h"
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
  std::vector<LinkResult> links;    // measured by the lower rank of each pair
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
  if (pg.broken()) return;
  if (sel.selected("world.link_matrix")) {
    // Pairs in one global order; each rank does its own pairs in that order, so the lower rank of
    // the earliest unfinished pair always has its peer ready (no deadlock with blocking sends).
    const std::size_t largeCount = std::max<std::size_t>(1, opt.linkLargeBytes / sizeof(float));
    std::vector<float> small(2, 1.f), large(largeCount, 1.f);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (me != a && me != b) continue;
        int peer = me == a ? b : a;
        LinkResult l;
        l.a = a;
        l.b = b;
        try {
          auto exchange = [&](std::vector<float>& v, int tag) {
            if (me == a) {
              pg.send(buf(v), peer, tag, timeout)->wait(timeout);
              pg.recv(buf(v), peer, tag, timeout)->wait(timeout);
            } else {
              pg.recv(buf(v), peer, tag, timeout)->wait(timeout);
              pg.send(buf(v), peer, tag, timeout)->wait(timeout);
            }
          };
          exchange(small, 21);  // warm-up (connection setup)
          std::vector<double> rtts;
          for (int i = 0; i < 7; ++i) {
            auto t0 = Clock::now();
            exchange(small, 21);
            rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          }
          std::sort(rtts.begin(), rtts.end());
          l.latencyUs = rtts[rtts.size() / 2] / 2;
          exchange(large, 22);  // warm-up
          double best = 1e300;
          for (int i = 0; i < 2; ++i) {
            auto t0 = Clock::now();
            exchange(large, 22);
            best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
          }
          l.bandwidthGBps = 2.0 * static_cast<double>(large.size() * sizeof(float)) / best / 1e9;
        } catch (const std::exception& e) {
          l.error = e.what();
        }
        if (me == a) out.links.push_back(l);
        if (pg.broken()) return;
      }
    }
  }
}

Json collectivesJson(const Collectives& c) {
  Json links = Json::array();
  for (const auto& l : c.links) {
    links.push_back({{"a", l.a}, {"b", l.b}, {"latency_us", l.latencyUs}, {"bandwidth_GBps", l.bandwidthGBps},
                     {"error", l.error}});
  }
  return {{"smoke_ran", c.smokeRan}, {"smoke_ok", c.smokeOk}, {"smoke_got", c.smokeGot},
          {"smoke_error", c.smokeError}, {"links", links}};
}

}  // namespace

WorldOutcome runWorld(Context& ctx, const Selection& sel, const std::string& toolVersion) {
  WorldOutcome out;
  const std::string host = net::hostName();
  // Library probes fork; do them before rendezvous starts threads.
  ctx.probeAll();
  const std::string jobBackend = ctx.jobBackend();
  const std::string transport = transportBackend(jobBackend);
  // dsdiag itself never computes on a GPU: its process group is a CPU one.
  setenv("DS_ACCELERATOR", "cpu", 1);
  log::setThreshold(log::Level::kWarn);

  InitOptions init;
  init.distBackend = transport;
  init.timeout = ctx.options().timeout;
  init.verbose = false;
  std::shared_ptr<World> world;
  std::string initError;
  auto t0 = Clock::now();
  try {
    world = initDistributed(init);
  } catch (const std::exception& e) {
    initError = e.what();
  }
  if (!world) {
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
        fail(fmt::format("Rank {} could not join the job's store (backend {}) after {:.1f} s: {}", ctx.rank(), transport,
                         std::chrono::duration<double>(Clock::now() - t0).count(), initError),
             "Start every rank (WORLD_SIZE of them) with the same MASTER_ADDR/MASTER_PORT; the net and env rows above "
             "say what is wrong on this node.",
             {{"error", initError}, {"backend", transport}})));
    out.report.checks.back().rank = ctx.rank();
    out.report.checks.back().host = host;
    out.exitCode = report::diagExitCode(out.report.checks);
    return out;
  }
  ctx.storeUp = true;
  const int me = world->rank(), n = world->worldSize();
  out.rank = me;
  log::setRank(me);
  auto& st = world->store();
  const auto timeout = ctx.options().timeout;
  const std::string prefix = "diag/";

  auto local = runLocalChecks(ctx, sel, me, host);
  RankReport mine{me, host, toolVersion, local};
  st.set(prefix + "local/" + std::to_string(me),
         toBytes(Json{{"host", host}, {"tool_version", toolVersion}, {"records", recordsJson(local)}}.dump()));

  std::vector<RankReport> reports(1, mine);
  std::vector<int> missing;
  std::string plan;
  if (me == 0) {
    auto deadline = Clock::now() + timeout;
    std::vector<int> pending;
    for (int r = 1; r < n; ++r) pending.push_back(r);
    while (!pending.empty()) {
      std::vector<int> still;
      for (int r : pending) {
        if (!st.check({prefix + "local/" + std::to_string(r)})) still.push_back(r);
      }
      pending = still;
      if (pending.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    missing = pending;
    for (int r = 1; r < n; ++r) {
      if (std::find(missing.begin(), missing.end(), r) != missing.end()) continue;
      try {
        auto j = Json::parse(toString(st.get(prefix + "local/" + std::to_string(r), std::chrono::seconds(5))));
        reports.push_back({r, j.value("host", ""), j.value("tool_version", ""), j.at("records").get<std::vector<DiagRecord>>()});
      } catch (const std::exception&) {
        missing.push_back(r);
      }
    }
    plan = missing.empty() ? "go" : "abort";
    st.set(prefix + "plan", toBytes(plan));
  } else {
    try {
      plan = toString(st.get(prefix + "plan", timeout + std::chrono::seconds(10)));
    } catch (const std::exception&) {
      plan = "abort";
    }
  }

  Collectives coll;
  if (plan == "go") runCollectives(*world, sel, ctx.options(), coll);

  int exitCode = 0;
  if (me != 0) {
    if (plan == "go") st.set(prefix + "post/" + std::to_string(me), toBytes(collectivesJson(coll).dump()));
    try {
      exitCode = std::stoi(toString(st.get(prefix + "exit", timeout * 2 + std::chrono::seconds(10))));
    } catch (const std::exception&) {
      exitCode = 2;  // rank 0 vanished: the job cannot run as is
    }
    out.root = false;
    out.report.mode = "world";
    out.report.host = host;
    out.report.worldSize = n;
    out.report.checks = local;
    out.exitCode = exitCode;
  } else {
    std::vector<DiagRecord> all;
    for (const auto& r : reports) all.insert(all.end(), r.records.begin(), r.records.end());
    auto addWorld = [&](const char* id, Finding f) {
      if (sel.selected(id)) all.push_back(worldRecord(id, std::move(f)));
    };
    addWorld("world.rendezvous", pass(fmt::format("{} rank(s) joined the store with backend {} in {:.2f} s", n, transport,
                                                  std::chrono::duration<double>(Clock::now() - t0).count()),
                                      {{"backend", transport}, {"job_backend", jobBackend}}));
    if (!missing.empty()) {
      std::sort(missing.begin(), missing.end());
      addWorld("world.gather",
               fail(fmt::format("Rank(s) {} never reported within {} ms: they joined the store but hang or died in their "
                                "local checks; cross-rank collectives were not run",
                                report::rankRanges(missing), timeout.count()),
                    "Look at the output of those ranks; rerun with a larger --timeout if their checks are slow (DNS, "
                    "connect timeouts).",
                    {{"missing", missing}}));
    } else {
      addWorld("world.gather", pass(fmt::format("All {} rank(s) reported", n)));
    }
    for (auto& r : crossRankChecks(reports, n)) {
      if (sel.selected(r.id)) all.push_back(std::move(r));
    }
    if (plan == "go") {
      // The other ranks' measurements.
      std::vector<LinkResult> links = coll.links;
      std::vector<std::string> smokeBad;
      if (coll.smokeRan && !coll.smokeOk) smokeBad.push_back(fmt::format("rank 0: {}", coll.smokeError.empty() ? fmt::format("got {}", coll.smokeGot) : coll.smokeError));
      std::vector<int> silent;
      for (int r = 1; r < n; ++r) {
        try {
          auto j = Json::parse(toString(st.get(prefix + "post/" + std::to_string(r), timeout)));
          for (const auto& l : j["links"]) {
            links.push_back({l["a"], l["b"], l["latency_us"], l["bandwidth_GBps"], l["error"]});
          }
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
          addWorld("world.smoke_allreduce",
                   fail(fmt::format("Smoke allreduce {} failed: {}{}", on, join(smokeBad, "; "),
                                    silent.empty() ? "" : fmt::format("; rank(s) {} sent no result", report::rankRanges(silent))),
                        "A wrong sum means a broken transport or mixed versions; a timeout names the rank that did not "
                        "arrive. See world.link_matrix and the net rows.",
                        {{"errors", smokeBad}, {"expected", coll.smokeExpected}}));
        }
      }
      if (sel.selected("world.clock_skew")) {
        addWorld("world.clock_skew",
                 coll.clockError.empty() ? judgeClockSkew(coll.clocks)
                                         : fail("Clock exchange failed: " + coll.clockError,
                                                "See world.link_matrix and world.smoke_allreduce."));
      }
      if (sel.selected("world.link_matrix")) {
        std::vector<std::string> hosts(static_cast<size_t>(n), "?");
        for (const auto& r : reports) hosts[static_cast<size_t>(r.rank)] = r.host;
        std::sort(links.begin(), links.end(), [](const auto& x, const auto& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
        addWorld("world.link_matrix", judgeLinks(links, n, ctx.options().slowLinkMs, hosts));
      }
    } else {
      for (const char* id : {"world.smoke_allreduce", "world.clock_skew", "world.link_matrix"}) {
        addWorld(id, skip("Not run: some ranks never reported (see world.gather)"));
      }
    }
    out.root = true;
    out.report.mode = "world";
    out.report.host = host;
    out.report.worldSize = n;
    out.report.toolVersion = toolVersion;
    out.report.missingRanks = missing;
    out.report.checks = std::move(all);
    out.exitCode = report::diagExitCode(out.report.checks);
  }
  out.report.toolVersion = toolVersion;
  // The caller prints, then calls finishWorld(); rank 0 publishes the exit code there.
  return out;
}

}  // namespace ds::diag

namespace ds::diag {

void finishWorld(const WorldOutcome& outcome) {
  if (!isInitialized()) return;
  try {
    auto w = currentWorld();
    if (w->rank() == 0) {
      w->store().set("diag/exit", store::toBytes(std::to_string(outcome.exitCode)));
    } else if (outcome.report.missingRanks.empty()) {
      // Rank 0 sets diag/exit once it has printed and written the merged report. Leaving before
      // that would let a launcher that stops the job on the first non-zero exit (dsrun, torchrun)
      // kill rank 0 mid-write whenever the verdict is a warning or a failure.
      w->store().wait({"diag/exit"}, std::chrono::seconds(60));
    }
    // Missing ranks never reach shutdown: do not wait long for them.
    w->shutdown(outcome.report.missingRanks.empty() ? std::chrono::seconds(30) : std::chrono::seconds(3));
    destroyProcessGroup();
  } catch (const std::exception& e) {
    log::warn("dsdiag: leaving the world: {}", e.what());
  }
}

}  // namespace ds::diag
