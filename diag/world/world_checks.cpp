#include "diag/world/world_checks.h"

#include <algorithm>

#include "engine/common/ranges.h"

namespace ds::diag {
namespace {

constexpr WorldStep kSteps[] = {WorldStep::kGather, WorldStep::kRecords, WorldStep::kFleet, WorldStep::kSmoke,
                                WorldStep::kClock};

std::vector<int> neverJoined(const report::FleetReport& fr) {
  std::vector<int> out;
  for (const auto& r : fr.input.ranks) {
    if (!r.joined) out.push_back(r.rank);
  }
  return out;
}

// The evidence texts of the judgement (hosts, then links) of the given kinds.
std::vector<std::string> evidenceOf(const report::FleetJudgement& j, const std::vector<std::string>& kinds) {
  std::vector<std::string> lines;
  auto wanted = [&](const auto& e) { return std::find(kinds.begin(), kinds.end(), e.kind) != kinds.end(); };
  for (const auto& h : j.hosts) {
    for (const auto& e : h.evidence) {
      if (wanted(e)) lines.push_back(e.text);
    }
  }
  for (const auto& l : j.links) {
    for (const auto& e : l.evidence) {
      if (wanted(e)) lines.push_back(e.text);
    }
  }
  return lines;
}

// Each host that is not healthy and each suspect link, with its evidence, for world.hosts.
std::vector<std::string> verdictLines(const report::FleetJudgement& j) {
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
  return parts;
}

}  // namespace

DiagRecord worldRecord(const char* id, Finding f) {
  return DiagRecord{id, "world", f.status, std::move(f.message), std::move(f.remedy), std::move(f.data),
                    -1, ""};
}

std::vector<DiagRecord> runWorldStep(const WorldFacts& facts, const Selection& sel, WorldStep step) {
  std::vector<DiagRecord> out;
  for (const auto& c : worldChecks()) {
    if (c.step != step || !sel.selected(c.id)) continue;
    if (needsProcessGroup(step) && !facts.processGroupSkipped.empty()) {
      out.push_back(worldRecord(
          c.id, skip(fmt::format(
                    "Not run: {} (the backend's full-mesh connect would hang on them; see world.hosts)",
                    facts.processGroupSkipped))));
    } else {
      out.push_back(worldRecord(c.id, c.judge(facts)));
    }
  }
  return out;
}

std::vector<DiagRecord> runWorldChecks(const WorldFacts& facts, const Selection& sel) {
  std::vector<DiagRecord> out;
  for (WorldStep step : kSteps) {
    for (auto& r : runWorldStep(facts, sel, step)) out.push_back(std::move(r));
  }
  return out;
}

namespace world {

Finding rendezvous(const WorldFacts& f) {
  const int n = f.worldSize;
  const auto never = neverJoined(*f.fleet);
  if (never.empty()) return pass(fmt::format("{} rank(s) joined the store in {:.2f} s", n, f.joinSeconds));
  return fail(
      fmt::format("Rank(s) {} never joined the store within {:.0f} s ({} of {} joined); the others went on "
                  "without them",
                  formatRanges(never), f.joinSeconds, n - never.size(), n),
      "Those ranks were not started, died before joining, hang before reaching dsdiag, or cannot reach "
      "MASTER_ADDR:MASTER_PORT: look at their output, or run dsdiag on their hosts.",
      {{"missing", never}});
}

Finding gather(const WorldFacts& f) {
  const auto never = neverJoined(*f.fleet);
  std::vector<int> silentLocal;  // joined, but their local report never came
  for (int r : f.missing) {
    if (std::find(never.begin(), never.end(), r) == never.end()) silentLocal.push_back(r);
  }
  if (silentLocal.empty())
    return pass(fmt::format("All {} joined rank(s) reported", f.worldSize - never.size()));
  return fail(
      fmt::format("Rank(s) {} joined but never reported their local checks within {} ms: they hang or died "
                  "(world.hosts names the stage where they stopped)",
                  formatRanges(silentLocal), f.timeout.count()),
      "Look at the output of those ranks; rerun with a larger --timeout if their checks are slow (DNS, "
      "connect timeouts).",
      {{"missing", silentLocal}});
}

Finding clockSkew(const WorldFacts& f) {
  if (!f.clock.notRun.empty()) return skip("Not run: " + f.clock.notRun);
  if (f.clock.error.empty()) return judgeClockSkew(f.clock.samples);
  return fail("Clock exchange failed: " + f.clock.error, "See world.link_matrix and world.smoke_allreduce.");
}

Finding smokeAllreduce(const WorldFacts& f) {
  const auto& s = f.smoke;
  const std::string on =
      f.jobBackend == f.transport
          ? "on " + f.transport
          : fmt::format("on {} (not on the job's {}: {}; run `dsbench world --backend {}` under the same "
                        "launcher for its smoke test)",
                        f.transport, f.jobBackend,
                        f.transportWhy.empty() ? "dsdiag could not run it here" : f.transportWhy, f.jobBackend);
  if (s.errors.empty() && s.silent.empty()) {
    return pass(fmt::format("allreduce(sum) of 1024 floats {}: {} on every rank as expected, {:.0f} us", on,
                            s.expected, s.timeUs),
                {{"backend", f.transport}, {"expected", s.expected}, {"time_us", s.timeUs}});
  }
  return fail(
      fmt::format(
          "Smoke allreduce {} failed: {}{}", on, join(s.errors, "; "),
          s.silent.empty() ? "" : fmt::format("; rank(s) {} sent no result", formatRanges(s.silent))),
      "A wrong sum means a broken transport or mixed versions; a timeout names the rank that did not "
      "arrive. See world.link_matrix and the net rows.",
      {{"errors", s.errors}, {"expected", s.expected}});
}

Finding reachability(const WorldFacts& f) {
  const auto& j = f.fleet->judgement;
  int probes = 0, ok = 0;
  for (const auto& r : f.fleet->input.reach) {
    probes += r.probes;
    ok += r.ok;
  }
  Json data{{"probes", probes}, {"ok", ok}};
  if (!j.jobSocketIfname.empty()) data["socket_ifname"] = j.jobSocketIfname;
  if (auto bad = evidenceOf(j, {"unreachable", "reach_partial"}); !bad.empty()) {
    return fail(fmt::format("{}", join(bad, " ")),
                "Fix the route or firewall between those hosts, or leave the host out (--exclude-file); the "
                "interface "
                "advice below names the interfaces that reach every peer.",
                data);
  }
  if (auto ifBad = evidenceOf(j, {"ifname", "mtu"}); !ifBad.empty()) {
    return warn(join(ifBad, " "), "Set the same working interface and MTU on every host.", data);
  }
  return pass(probes == 0 ? "One host: no peer to probe"
                          : fmt::format("All {} TCP probes between host leaders answered{}", probes,
                                        j.jobSocketIfname.empty()
                                            ? ""
                                            : fmt::format("; NCCL_SOCKET_IFNAME={} works on every host",
                                                          j.jobSocketIfname)),
              data);
}

Finding linkMatrix(const WorldFacts& f) {
  const auto& fr = *f.fleet;
  const auto& j = fr.judgement;
  int badPairs = 0;  // pairs with a rank that stopped
  for (const auto& p : fr.input.pairs) badPairs += p.outcome == report::PairOutcome::kOk ? 0 : 1;
  Json data{{"pairs", fr.input.pairs.size()},
            {"rounds", fr.stats.rounds},
            {"median_GBps", j.medianBandwidthGBps},
            {"median_latency_us", j.medianLatencyUs}};
  if (fr.input.pairs.empty()) return skip("No link pairs ran (one host, or no live peers)", data);
  if (auto bad = evidenceOf(j, {"link_slow", "link_failed", "link_lossy"}); !bad.empty()) {
    return fail(join(bad, " "),
                "Check the named host's NIC (speed, errors: ethtool -S), cable and switch port, then rerun; "
                "the exclude "
                "file lists the hosts to leave out meanwhile.",
                data);
  }
  return pass(
      fmt::format(
          "{} pair(s) in {} round(s): fleet median {:.3g} GB/s, {:.0f} us one way{}", fr.input.pairs.size(),
          fr.stats.rounds, j.medianBandwidthGBps, j.medianLatencyUs,
          badPairs ? fmt::format(" ({} pair(s) with a rank that stopped, see world.hosts)", badPairs) : ""),
      data);
}

Finding hosts(const WorldFacts& f) {
  const auto& j = f.fleet->judgement;
  std::vector<std::string> suspects, noResult;
  for (const auto& h : j.hosts) {
    if (h.state == report::HostState::kSuspect) suspects.push_back(h.host);
    if (h.state == report::HostState::kNoResult) noResult.push_back(h.host);
  }
  for (const auto& l : j.links) suspects.push_back(l.hostA + "<->" + l.hostB);
  Json data{{"hosts", j.hosts.size()}, {"suspects", suspects}, {"no_result", noResult}};
  if (suspects.empty() && noResult.empty())
    return pass(fmt::format("All {} host(s) healthy", j.hosts.size()), data);
  return fail(
      fmt::format("{} suspect(s), {} host(s) with no result of {}: {}", suspects.size(), noResult.size(),
                  j.hosts.size(), join(verdictLines(j), " | ")),
      "Take the suspects out of the job (sbatch --exclude with the exclude file, or DeepSpeed's --exclude), "
      "repair them, and rerun dsdiag --world on them.",
      data);
}

Finding rendezvousFailed(int rank, double seconds, const std::string& error) {
  return fail(fmt::format("Rank {} could not join the job's store after {:.1f} s: {}", rank, seconds, error),
              "Start every rank (WORLD_SIZE of them) with the same MASTER_ADDR/MASTER_PORT; the net and env "
              "rows above "
              "say what is wrong on this node.",
              {{"error", error}});
}

Finding noVerdict(const std::string& error) { return fail(error, "Look at rank 0's output."); }

}  // namespace world
}  // namespace ds::diag
