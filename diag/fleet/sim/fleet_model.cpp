// The synthetic fleet (see fleet_model.h).
#include "diag/fleet/sim/fleet_model.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace ds::bench::fleet {

using diag::fleet::pairKey;
using diag::fleet::Round;
using diag::fleet::SplitMix64;

namespace {

// Messages of one link pair: connect, warm-up both ways, 7 ping-pongs, the large message both ways
// twice (best of 2).
constexpr int kMessagesPerPair = 1 + 2 + 7 * 2 + 2 * 2;

double normal(SplitMix64& rng) {
  double u1 = 0;
  while (u1 <= 0) u1 = rng.uniform();
  double u2 = rng.uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

std::string addrOf(int host) {
  unsigned v = static_cast<unsigned>(host) + 2;
  return fmt::format("10.{}.{}.{}", (v >> 16) & 255, (v >> 8) & 255, v & 255);
}

bool blocked(const FleetModel& m, int a, int b) {
  if (m.unreachable.count(a) || m.unreachable.count(b)) return true;
  auto ia = m.cannotReach.find(a);
  if (ia != m.cannotReach.end() && ia->second.count(b)) return true;
  auto ib = m.cannotReach.find(b);
  return ib != m.cannotReach.end() && ib->second.count(a);
}

}  // namespace

int leaderOf(const FleetModel& m, int host) { return host * m.ranksPerHost; }
int hostOf(const FleetModel& m, int rank) { return rank / m.ranksPerHost; }

report::FleetInput makeInput(FleetModel& m) {
  if (m.speed.empty()) m.speed.assign(m.hosts, 1.0);
  report::FleetInput in;
  in.worldSize = m.hosts * m.ranksPerHost;
  in.minLinkGBps = m.minLinkGBps;
  in.standalone = m.standalone;
  in.connectTimeoutS = 2;
  in.ranks.resize(in.worldSize);
  for (int r = 0; r < in.worldSize; ++r) {
    int h = hostOf(m, r);
    auto& fr = in.ranks[r];
    fr.rank = r;
    fr.host = m.standalone ? "box" : fmt::format("fleet{}", h);
    fr.localRank = r % m.ranksPerHost;
    fr.probePort = 29600;
    fr.ifaces = {{"eth0", m.standalone ? "127.0.0.1" : addrOf(h), 8, h == m.mtuHost ? 9000 : 1500}};
    fr.affinityCpus = m.affinityCpus;
    if (auto q = m.cpuQuota.find(h); q != m.cpuQuota.end()) {
      fr.cpuQuota = q->second;
      fr.cpuQuotaFile = fmt::format("/sys/fs/cgroup/fleet{}/cpu.max", h);
    }
    fr.joined = true;
    bool frozen = m.frozen.count(h) && r == leaderOf(m, h);
    fr.frozen = frozen;
    fr.reported = !frozen;
    fr.lastStage = frozen ? "links" : "done";
    fr.silentForS = frozen ? 6 : 0;
  }
  // Reachability as each leader saw it: only failures are listed (O(n + failures)).
  std::map<int, report::ReachSummary> reach;
  auto summary = [&](int h) -> report::ReachSummary& {
    auto& s = reach[h];
    s.rank = leaderOf(m, h);
    return s;
  };
  auto fail = [&](int from, int to) {
    report::ReachFailure f;
    f.from = leaderOf(m, from);
    f.to = leaderOf(m, to);
    f.fromIface = f.toIface = "eth0";
    f.toAddr = addrOf(to);
    f.timedOut = true;
    f.error = "timed out after 2.0 s";
    f.ms = 2000;
    summary(from).failures.push_back(std::move(f));
  };
  for (int h : m.unreachable)
    for (int p = 0; p < m.hosts; ++p)
      if (p != h && !m.frozen.count(p)) fail(h, p), fail(p, h);
  for (auto& [h, peers] : m.cannotReach)
    for (int p : peers)
      if (!m.unreachable.count(h) && !m.unreachable.count(p)) fail(h, p), fail(p, h);
  for (int h = 0; h < m.hosts; ++h) {
    if (m.frozen.count(h)) continue;
    auto& s = summary(h);
    s.probes = m.hosts - 1;
    s.ok = s.probes - static_cast<int>(s.failures.size());
  }
  for (auto& [h, s] : reach)
    if (!m.frozen.count(h)) in.reach.push_back(std::move(s));
  return in;
}

void runRounds(const FleetModel& m, const std::vector<Round>& rounds, const std::string& stage,
               report::FleetInput& in, SplitMix64& rng, RunCost& cost) {
  for (const auto& round : rounds) {
    for (auto [a, b] : round) {
      int ha = hostOf(m, a), hb = hostOf(m, b);
      report::PairResult p;
      p.a = a;
      p.b = b;
      p.round = cost.rounds;
      p.stage = stage;
      if (m.frozen.count(ha) || m.frozen.count(hb)) {
        p.outcome = report::PairOutcome::kTimeout;
        p.error = "no answer within the pair deadline (10.0 s)";
      } else if (blocked(m, ha, hb)) {
        p.outcome = report::PairOutcome::kFailed;
        p.error = "connect: timed out after 2.0 s";
      } else if (m.failing.count(ha) || m.failing.count(hb)) {
        p.outcome = report::PairOutcome::kTimeout;
        p.error = "no answer within the pair deadline (10.0 s)";
      } else {
        double f = std::min(m.speed[ha], m.speed[hb]);
        auto lf = m.linkFactor.find(pairKey(ha, hb));
        if (lf != m.linkFactor.end()) f *= lf->second;
        p.bandwidthGBps = m.baseGBps * f * std::exp(m.sigma * normal(rng));
        p.latencyUs = m.latencyUs * std::exp(0.1 * normal(rng));
        // Both ends' counters: 3 x 4 MiB each way, and the small messages.
        p.sentBytes = 2 * (3 * (std::uint64_t{4} << 20) + 64);
        double lost = 0;
        if (auto l = m.loss.find(ha); l != m.loss.end()) lost += l->second;
        if (auto l = m.loss.find(hb); l != m.loss.end()) lost += l->second;
        if (auto l = m.linkLoss.find(pairKey(ha, hb)); l != m.linkLoss.end()) lost += l->second;
        // A stray tail-loss probe (one segment) on one pair in 7; no draw, so the model's other
        // numbers stay what they were for a seed.
        const double probes = (a + b + p.round) % 7 == 0 ? 1448 : 0;
        p.retransBytes = static_cast<std::uint64_t>(lost * static_cast<double>(p.sentBytes) + probes);
      }
      in.pairs.push_back(std::move(p));
      ++cost.pairs;
      cost.messages += kMessagesPerPair;
    }
    ++cost.rounds;
  }
}

report::FleetJudgement simulate(FleetModel& m, std::uint64_t seed, RunCost& cost, bool allPairs) {
  report::FleetInput in = makeInput(m);
  std::vector<int> units;
  for (int h = 0; h < m.hosts; ++h) units.push_back(leaderOf(m, h));
  SplitMix64 rng(seed ^ 0xfeedULL);
  auto rounds = allPairs
                    ? diag::fleet::planAllPairs(units)
                    : diag::fleet::planLinkRounds(units, diag::fleet::defaultRandomMatchings(m.hosts), seed);
  runRounds(m, rounds, "links", in, rng, cost);
  cost.linkRounds = cost.rounds;
  auto t0 = std::chrono::steady_clock::now();
  auto j = diag::fleet::judge(in);
  cost.judgeSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!j.retest.empty()) {
    runRounds(m, diag::fleet::packIntoRounds(j.retest), "confirm", in, rng, cost);
    t0 = std::chrono::steady_clock::now();
    j = diag::fleet::judge(in);
    cost.judgeSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return j;
}

Named named(const FleetModel& m, const report::FleetJudgement& j) {
  Named n;
  for (const auto& h : j.hosts)
    if (h.state == report::HostState::kSuspect)
      for (int r : h.ranks) n.hosts.insert(hostOf(m, r));
  for (const auto& l : j.links) {
    int a = hostOf(m, l.rankA), b = hostOf(m, l.rankB);
    n.links.insert({std::min(a, b), std::max(a, b)});
  }
  return n;
}

}  // namespace ds::bench::fleet
