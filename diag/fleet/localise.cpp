// Fleet localisation (see localise.h and docs/dev/fleet-mode.md, "Localisation").
//
// The order matters: ranks that froze, exited or never reported are settled first (their pairs
// prove nothing about their peers); then reachability (a pair that cannot connect is explained
// before its link test is looked at); then the link pairs of the remaining units: slow hosts by the
// median of their pairs, hosts with bad pairs to several peers that are healthy elsewhere, and
// single bad links; then bisection, interface names and MTUs. Everything from the link stage is
// re-tested (stage "confirm") before it is named.
#include "diag/fleet/localise.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "diag/fleet/plan.h"
#include "diag/util.h"

namespace ds::diag::fleet {

using report::Evidence;
using report::FleetInput;
using report::FleetJudgement;
using report::FleetRank;
using report::HostState;
using report::HostVerdict;
using report::LinkVerdict;
using report::PairOutcome;
using report::PairResult;
using report::ReachFailure;
using T = JudgeThresholds;

std::string rankLabel(const FleetInput& in, int rank) {
  if (rank >= 0 && rank < static_cast<int>(in.ranks.size()) && !in.ranks[rank].host.empty())
    return fmt::format("{} (rank {})", in.ranks[rank].host, rank);
  return fmt::format("rank {}", rank);
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

const char* outcomeName(PairOutcome o) {
  switch (o) {
    case PairOutcome::kOk:
      return "ok";
    case PairOutcome::kFailed:
      return "failed";
    case PairOutcome::kTimeout:
      return "timed out";
    case PairOutcome::kSkipped:
      return "skipped";
  }
  return "?";
}

// Median of v (v is reordered). NaN when empty.
double median(std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + mid);
  return (lo + hi) / 2;
}

// Median absolute deviation from `center` (v is overwritten).
double mad(std::vector<double>& v, double center) {
  for (double& x : v) x = std::fabs(x - center);
  return median(v);
}

std::string gbps(double x) {
  if (x >= 10) return fmt::format("{:.1f} GB/s", x);
  if (x >= 0.1) return fmt::format("{:.2f} GB/s", x);
  return fmt::format("{:.3g} GB/s", x);
}

std::string seconds(double s) { return fmt::format("{:.1f} s", s); }

// "a", "a and b", "a, b, c and 4 more".
std::string listOf(const std::vector<std::string>& items, std::size_t show = 4) {
  if (items.empty()) return "";
  std::size_t n = std::min(items.size(), show);
  std::string s = items[0];
  for (std::size_t i = 1; i < n; ++i) s += (i + 1 == n && n == items.size() ? " and " : ", ") + items[i];
  if (items.size() > n) s += fmt::format(" and {} more", items.size() - n);
  return s;
}

// Natural order: "node2" before "node10".
bool naturalLess(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && a[i2] == '0') ++i2;
      while (j2 < b.size() && b[j2] == '0') ++j2;
      std::size_t ie = i2, je = j2;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      if (ie - i2 != je - j2) return ie - i2 < je - j2;
      int c = a.compare(i2, ie - i2, b, j2, je - j2);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// "10.79.0.0/24" for an interface (IPv4 or IPv6, masked); "" when the address does not parse.
std::string subnetOf(const report::FleetIface& f) {
  unsigned char buf[16] = {};
  int family = f.addr.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  if (inet_pton(family, f.addr.c_str(), buf) != 1) return "";
  int bytes = family == AF_INET ? 4 : 16;
  int prefix = std::clamp(f.prefixLen, 0, bytes * 8);
  for (int i = 0; i < bytes; ++i) {
    int keep = std::clamp(prefix - i * 8, 0, 8);
    buf[i] &= static_cast<unsigned char>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, buf, text, sizeof text);
  return fmt::format("{}/{}", text, prefix);
}

struct Unit {
  std::string name;
  std::vector<int> ranks;  // ascending
  int leader = -1;         // lowest joined rank: the one that runs the network tests
  bool dead = false;       // a rank froze or exited
  bool leaderReported = false;
  bool reachSuspect = false;  // named by reachability (its pairs are explained by that)
  std::vector<Evidence> evidence;
  std::string ncclSocketIfname;  // recommended value ("" = leave unset)
};

// A link-stage suspect waiting for (or judged by) its confirmation pairs.
struct HostSuspect {
  int unit = 0;
  Evidence evidence;  // what the link stage saw
  bool slow = false;  // by the median of its pairs (else by bad pairs with several peers)
};

struct LinkSuspect {
  int ua = 0, ub = 0;
  int ra = 0, rb = 0;
  Evidence evidence;
};

class Judge {
 public:
  explicit Judge(const FleetInput& in) : in_(in) {}

  FleetJudgement run() {
    buildUnits();
    settleRanks();
    prepareNet();
    reachability();
    linkStage();
    bisection();
    interfaces();
    mtus();
    cpus();
    confirmOrRetest();
    assemble();
    return std::move(out_);
  }

 private:
  const FleetInput& in_;
  int world_ = 0;
  std::vector<Unit> units_;
  std::vector<int> unitOf_;  // rank -> unit
  FleetJudgement out_;
  // Unit pairs whose TCP probes failed: their link pairs are explained by reachability.
  std::unordered_set<std::uint64_t> reachFailedPairs_;
  // Interfaces (unit, iface name) with a failure attributed to them.
  std::set<std::pair<int, std::string>> badIfaces_;
  std::vector<HostSuspect> hostSuspects_;
  std::vector<LinkSuspect> linkSuspects_;
  std::unordered_set<int> linkCandidates_;  // units that are not healthy enough to confirm others
  double lmed_ = std::nan(""), ls_ = T::kMinRelativeSpread;
  double latMed_ = 0, latSigma_ = 0;
  int liveUnits_ = 0;
  std::unordered_map<std::string, int> subnetCount_;
  std::vector<std::vector<std::string>> good_;  // per unit: interfaces that reached every peer

  const FleetRank* rank(int r) const {
    return r >= 0 && r < static_cast<int>(in_.ranks.size()) ? &in_.ranks[r] : nullptr;
  }
  std::string label(int r) const { return rankLabel(in_, r); }
  bool validRank(int r) const { return r >= 0 && r < world_; }
  // A unit whose leader's network results can be trusted and which can vouch for its peers.
  bool netOk(int u) const { return !units_[u].dead && units_[u].leaderReported; }
  bool linkEligible(int u) const { return netOk(u) && !units_[u].reachSuspect; }

  std::string addrOf(int r, const std::string& iface) const {
    if (const FleetRank* fr = rank(r))
      for (const auto& f : fr->ifaces)
        if (f.name == iface) return f.addr;
    return "";
  }

  void buildUnits() {
    world_ = std::max(in_.worldSize, static_cast<int>(in_.ranks.size()));
    unitOf_.assign(world_, -1);
    std::unordered_map<std::string, int> byName;
    for (int r = 0; r < world_; ++r) {
      const FleetRank* fr = rank(r);
      std::string key;
      if (in_.standalone || fr == nullptr || fr->host.empty())
        key = label(r);
      else
        key = fr->host;
      auto [it, fresh] = byName.emplace(key, static_cast<int>(units_.size()));
      if (fresh) {
        units_.emplace_back();
        units_.back().name = key;
      }
      Unit& u = units_[it->second];
      u.ranks.push_back(r);
      unitOf_[r] = it->second;
      if (fr != nullptr && fr->joined && u.leader < 0) u.leader = r;
    }
    for (auto& u : units_) {
      const FleetRank* fr = u.leader >= 0 ? rank(u.leader) : nullptr;
      u.leaderReported = fr != nullptr && fr->reported && !fr->frozen && !fr->exited;
    }
  }

  void settleRanks() {
    for (int r = 0; r < world_; ++r) {
      const FleetRank* fr = rank(r);
      Unit& u = units_[unitOf_[r]];
      std::string stage = fr != nullptr && !fr->lastStage.empty() ? fr->lastStage : "join";
      if (fr == nullptr || !fr->joined) {
        u.evidence.push_back(
            {"no_result",
             "join",
             fmt::format("{} never joined the fleet rendezvous before the join deadline: it did not "
                         "start, cannot reach the store, or started too late; check that host and "
                         "its launcher log",
                         label(r)),
             {},
             0,
             0});
      } else if (fr->frozen) {
        u.dead = true;
        u.evidence.push_back(
            {"frozen",
             stage,
             fmt::format("{} stopped sending heartbeats during stage \"{}\" (silent for {}): the "
                         "process is stopped (SIGSTOP), hung, or its host is gone; look at it with "
                         "py-spy/gdb or check the host",
                         label(r), stage, seconds(fr->silentForS)),
             {},
             fr->silentForS,
             0});
      } else if (fr->exited) {
        u.dead = true;
        u.evidence.push_back(
            {"exited",
             stage,
             fmt::format("{} exited during stage \"{}\" (its last heartbeat said it failed, or its "
                         "connections were reset); read its stderr",
                         label(r), stage),
             {},
             fr->silentForS,
             0});
      } else if (!fr->reported) {
        u.evidence.push_back(
            {"no_result",
             stage,
             fmt::format("{} joined but its results never reached rank 0 (last stage \"{}\"); its "
                         "heartbeat was still alive, so it was slow rather than stopped",
                         label(r), stage),
             {},
             0,
             0});
      }
    }
  }

  // ---------------------------------------------------------------- reachability
  struct Dir {
    const ReachFailure* ab = nullptr;  // lower unit -> higher unit
    const ReachFailure* ba = nullptr;
  };

  std::string subnetOfFailure(const ReachFailure& f) const {
    if (const FleetRank* fr = rank(f.from))
      for (const auto& i : fr->ifaces)
        if (i.name == f.fromIface) {
          std::string s = subnetOf(i);
          if (!s.empty()) return s;
        }
    return "iface " + f.fromIface;
  }

  std::string errorText(const ReachFailure& f) const {
    if (!f.error.empty()) return f.error;
    if (f.timedOut) return fmt::format("timed out after {}", seconds(in_.connectTimeoutS));
    return "failed";
  }

  // "fleet1 (rank 1, 10.79.0.2)"
  std::string target(const ReachFailure& f) const {
    std::string addr = f.toAddr.empty() ? addrOf(f.to, f.toIface) : f.toAddr;
    std::string host = rank(f.to) != nullptr ? rank(f.to)->host : "";
    if (host.empty() || in_.standalone)
      return addr.empty() ? label(f.to) : fmt::format("{} ({})", label(f.to), addr);
    return addr.empty() ? label(f.to) : fmt::format("{} (rank {}, {})", host, f.to, addr);
  }

  void reachability() {
    // Units that reported their probes: the denominators of "most peers".
    int probing = 0;
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (netOk(static_cast<int>(u))) ++probing;
    std::map<std::string, std::unordered_map<std::uint64_t, Dir>> bySubnet;
    for (const auto& rs : in_.reach)
      for (const auto& f : rs.failures) {
        if (!validRank(f.from) || !validRank(f.to)) {
          out_.notes.push_back(
              fmt::format("A reachability failure from rank {} to rank {} was ignored: the world "
                          "has {} ranks (a bug in the probe's report)",
                          f.from, f.to, world_));
          continue;
        }
        int a = unitOf_[f.from], b = unitOf_[f.to];
        if (a == b || !netOk(a) || units_[b].dead) continue;  // a dead peer explains its own silence
        Dir& d = bySubnet[subnetOfFailure(f)][pairKey(a, b)];
        const ReachFailure*& slot = a < b ? d.ab : d.ba;
        if (slot == nullptr) slot = &f;  // the first failure of that direction speaks for the rest
        reachFailedPairs_.insert(pairKey(a, b));
      }
    // Per subnet: blame units, then links. A unit named on a subnet is a suspect only when it has no
    // interface that reached everyone (else the advice leaves the bad interface out).
    std::map<int, std::vector<Evidence>> blamedEvidence;
    std::set<std::pair<int, std::string>> blamedOn;  // (unit, subnet)
    std::vector<std::pair<std::string, const Dir*>> linkFailures;
    std::vector<std::pair<int, int>> linkUnits;
    for (auto& [subnet, edges] : bySubnet) {
      std::unordered_map<int, std::vector<int>> peers;
      for (auto& [key, d] : edges) {
        int a = static_cast<int>(key >> 32), b = static_cast<int>(key & 0xffffffffu);
        peers[a].push_back(b);
        peers[b].push_back(a);
      }
      std::vector<int> order;
      for (auto& [u, p] : peers)
        if (p.size() >= 2) order.push_back(u);
      std::sort(order.begin(), order.end(), [&](int x, int y) {
        return peers[x].size() != peers[y].size() ? peers[x].size() > peers[y].size() : x < y;
      });
      std::unordered_set<int> blamed;
      for (int u : order) {
        std::vector<int> witnesses;
        for (int v : peers[u]) {
          if (blamed.count(v)) continue;
          bool clean =
              std::all_of(peers[v].begin(), peers[v].end(), [&](int w) { return w == u || blamed.count(w); });
          if (clean) witnesses.push_back(v);
        }
        if (witnesses.size() < 2) continue;
        blamed.insert(u);
        blamedOn.insert({u, subnet});
        blamedEvidence[u].push_back(reachEvidence(u, peers[u], edges, probing));
      }
      for (auto& [key, d] : edges) {
        int a = static_cast<int>(key >> 32), b = static_cast<int>(key & 0xffffffffu);
        // Attribute each failure to an interface: the blamed end's, else the end it left from.
        for (const ReachFailure* f : {d.ab, d.ba}) {
          if (f == nullptr) continue;
          int from = unitOf_[f->from], to = unitOf_[f->to];
          if (blamed.count(to) && !blamed.count(from))
            badIfaces_.insert({to, f->toIface});
          else
            badIfaces_.insert({from, f->fromIface});
        }
        if (!blamed.count(a) && !blamed.count(b)) {
          linkFailures.emplace_back(subnet, &d);
          linkUnits.emplace_back(a, b);
        }
      }
    }
    for (auto& [u, ev] : blamedEvidence) {
      if (hasCleanInterface(u, blamedOn)) {
        for (auto& e : ev)
          out_.notes.push_back(
              fmt::format("{} Another interface of {} reaches every peer, so it is not named; keep "
                          "the failing interface out of NCCL_SOCKET_IFNAME (see the advice).",
                          e.text, units_[u].name));
        continue;
      }
      units_[u].reachSuspect = true;
      for (auto& e : ev) units_[u].evidence.push_back(std::move(e));
    }
    // Single failing pairs whose ends reach everyone else: suspect links (unless another subnet
    // joins them, which the advice handles).
    std::map<std::uint64_t, LinkVerdict> links;
    for (std::size_t i = 0; i < linkFailures.size(); ++i) {
      auto [a, b] = linkUnits[i];
      const Dir& d = *linkFailures[i].second;
      const ReachFailure* f = d.ab ? d.ab : d.ba;
      std::string text;
      if (d.ab && d.ba) {
        text = fmt::format(
            "{} cannot open a TCP connection to {} on {}: {}; {} cannot reach it either; both reach "
            "every other peer (a missing route or a firewall rule between these two hosts)",
            label(f->from), target(*f), f->fromIface, errorText(*f), label(f->to));
      } else {
        text = fmt::format(
            "{} cannot open a TCP connection to {} on {}: {}; every other peer answers ({} reaches {} "
            "the other way: a route or firewall rule in one direction)",
            label(f->from), target(*f), f->fromIface, errorText(*f), label(f->to), label(f->from));
      }
      if (twoUnitFleet()) text += "; with only two hosts this cannot be pinned on either end";
      auto key = pairKey(a, b);
      auto [it, fresh] = links.emplace(key, LinkVerdict{});
      LinkVerdict& lv = it->second;
      if (fresh) {
        lv.rankA = std::min(f->from, f->to);
        lv.rankB = std::max(f->from, f->to);
        lv.hostA = units_[unitOf_[lv.rankA]].name;
        lv.hostB = units_[unitOf_[lv.rankB]].name;
      }
      lv.evidence.push_back({"unreachable", "reachability", text, {f->to}, f->ms / 1000.0, 0});
    }
    // Two units joined by another clean subnet: advice only.
    for (auto& [key, lv] : links) {
      int a = unitOf_[lv.rankA], b = unitOf_[lv.rankB];
      if (shareCleanSubnet(a, b, bySubnet)) {
        for (auto& e : lv.evidence)
          out_.notes.push_back(e.text +
                               fmt::format("; {} and {} still reach each other on another interface, so the "
                                           "link is not named",
                                           units_[a].name, units_[b].name));
        continue;
      }
      out_.links.push_back(std::move(lv));
    }
  }

  bool twoUnitFleet() const { return liveUnits_ == 2; }

  // Counts computed once (they are asked per host and per evidence): live units, and units per subnet.
  void prepareNet() {
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!netOk(static_cast<int>(u))) continue;
      ++liveUnits_;
      std::set<std::string> mine;
      for (const auto& i : rank(units_[u].leader)->ifaces) mine.insert(subnetOf(i));
      for (const auto& sn : mine)
        if (!sn.empty()) ++subnetCount_[sn];
    }
  }

  // Whether the unit has an interface on a subnet shared with other units where it was not blamed.
  bool hasCleanInterface(int u, const std::set<std::pair<int, std::string>>& blamedOn) const {
    const FleetRank* fr = rank(units_[u].leader);
    if (fr == nullptr) return false;
    for (const auto& i : fr->ifaces) {
      std::string s = subnetOf(i);
      if (s.empty() || blamedOn.count({u, s}) || badIfaces_.count({u, i.name})) continue;
      if (subnetUnits(s) >= 2) return true;
    }
    return false;
  }

  int subnetUnits(const std::string& subnet) const {
    auto it = subnetCount_.find(subnet);
    return it == subnetCount_.end() ? 0 : it->second;
  }

  bool shareCleanSubnet(int a, int b,
                        const std::map<std::string, std::unordered_map<std::uint64_t, Dir>>& bySubnet) const {
    const FleetRank* fa = rank(units_[a].leader);
    const FleetRank* fb = rank(units_[b].leader);
    if (fa == nullptr || fb == nullptr) return false;
    std::set<std::string> sa;
    for (const auto& i : fa->ifaces) sa.insert(subnetOf(i));
    for (const auto& i : fb->ifaces) {
      std::string s = subnetOf(i);
      if (s.empty() || !sa.count(s)) continue;
      auto it = bySubnet.find(s);
      if (it == bySubnet.end() || !it->second.count(pairKey(a, b))) return true;
    }
    return false;
  }

  Evidence reachEvidence(int u, std::vector<int> peers, const std::unordered_map<std::uint64_t, Dir>& edges,
                         int probing) const {
    std::sort(peers.begin(), peers.end());
    // Who cannot reach u (inbound) and whom u cannot reach (outbound).
    std::vector<const ReachFailure*> in, outb;
    for (int v : peers) {
      const Dir& d = edges.at(pairKey(u, v));
      const ReachFailure* toU = u < v ? d.ba : d.ab;
      const ReachFailure* fromU = u < v ? d.ab : d.ba;
      if (toU) in.push_back(toU);
      if (fromU) outb.push_back(fromU);
    }
    int others = std::max(1, probing - 1);
    int leader = units_[u].leader;
    Evidence e;
    e.stage = "reachability";
    e.peers = peers;
    std::sort(e.peers.begin(), e.peers.end());
    for (int& p : e.peers) p = units_[p].leader;
    const ReachFailure* sample = !in.empty() ? in.front() : outb.front();
    e.measured = sample->ms / 1000.0;
    std::string err = errorText(*sample);
    if (static_cast<int>(in.size()) * 2 > others) {
      e.kind = "unreachable";
      std::string addr = sample == in.front()
                             ? (sample->toAddr.empty() ? addrOf(leader, sample->toIface) : sample->toAddr)
                             : addrOf(leader, sample->fromIface);
      std::string iface = sample == in.front() ? sample->toIface : sample->fromIface;
      std::string back =
          outb.size() == in.size() ? fmt::format("; {} cannot reach them either", units_[u].name)
          : outb.empty()           ? fmt::format(
                                         "; {} itself reaches them (inbound traffic to it "
                                                   "is blocked: a firewall rule?)",
                                         units_[u].name)
                         : fmt::format("; {} cannot reach {} of them", units_[u].name, outb.size());
      e.text = fmt::format("{} of {} peers cannot open a TCP connection to {}{} on {}: {}{}", in.size(),
                           others, label(leader), addr.empty() ? "" : " (" + addr + ")", iface, err, back);
      return e;
    }
    e.kind = "reach_partial";
    if (outb.size() >= in.size()) {
      std::vector<std::string> names;
      for (auto* f : outb) names.push_back(target(*f));
      bool both = in.size() == outb.size();
      e.text = fmt::format(
          "{} cannot open a TCP connection to {} on {}: {}; every other peer answers, and {} reach "
          "everyone else{}",
          label(leader), listOf(names), outb.front()->fromIface, errorText(*outb.front()),
          outb.size() == 1 ? "that peer does" : "those peers", both ? " (they cannot reach it either)" : "");
    } else {
      std::vector<std::string> names;
      for (auto* f : in) names.push_back(label(f->from));
      e.text = fmt::format(
          "{} cannot open a TCP connection to {} on {}: {}; they reach every other peer and {} "
          "reaches them",
          listOf(names), target(*in.front()), in.front()->toIface, errorText(*in.front()), units_[u].name);
    }
    return e;
  }

  // ---------------------------------------------------------------- link stage
  struct Edge {
    const PairResult* p;
    int ua, ub;
    double r = -kInf;  // log ratio to the fleet median (ok pairs)
    bool failed = false, bwBad = false, latBad = false;
    bool bad() const { return failed || bwBad || latBad; }
  };
  std::vector<Edge> edges_;            // link-stage pairs between eligible units
  std::vector<Edge> confirm_;          // stage "confirm"
  std::vector<std::vector<int>> adj_;  // unit -> indices into edges_
  bool confirmRan_ = false;

  bool usablePair(const PairResult& p, int& ua, int& ub) {
    if (!validRank(p.a) || !validRank(p.b)) {
      out_.notes.push_back(
          fmt::format("A link pair ({}, {}) was ignored: the world has {} ranks (a bug in the "
                      "pair's report)",
                      p.a, p.b, world_));
      return false;
    }
    ua = unitOf_[p.a];
    ub = unitOf_[p.b];
    if (ua == ub || p.outcome == PairOutcome::kSkipped) return false;
    return linkEligible(ua) && linkEligible(ub) && !reachFailedPairs_.count(pairKey(ua, ub));
  }

  void classify(Edge& e) const {
    const PairResult& p = *e.p;
    e.failed = p.outcome == PairOutcome::kFailed || p.outcome == PairOutcome::kTimeout;
    if (e.failed) return;
    e.r = p.bandwidthGBps > 0 && !std::isnan(lmed_) ? std::log(p.bandwidthGBps) - lmed_ : -kInf;
    double pairCut = -std::max(std::log(1 / T::kPairRatio), T::kPairMads * ls_);
    e.bwBad = (p.bandwidthGBps > 0 && !std::isnan(lmed_) && e.r < pairCut) || p.bandwidthGBps <= 0 ||
              (in_.minLinkGBps > 0 && p.bandwidthGBps < in_.minLinkGBps);
    if (p.latencyUs > 0) {
      bool abs = in_.slowLinkMs > 0 && p.latencyUs > in_.slowLinkMs * 1000;
      bool rel = latMed_ > 0 && p.latencyUs > T::kLatencyRatio * latMed_ &&
                 p.latencyUs > latMed_ + T::kPairMads * latSigma_ && p.latencyUs > T::kLatencyFloorUs;
      e.latBad = abs || rel;
    }
  }

  void linkStage() {
    adj_.assign(units_.size(), {});
    for (const auto& p : in_.pairs) {
      if (p.stage == "confirm") confirmRan_ = true;
      int ua, ub;
      if (!usablePair(p, ua, ub)) continue;
      Edge e{&p, ua, ub};
      if (p.stage == "confirm") {
        confirm_.push_back(e);
      } else {
        adj_[ua].push_back(static_cast<int>(edges_.size()));
        adj_[ub].push_back(static_cast<int>(edges_.size()));
        edges_.push_back(e);
      }
    }
    auto ok = [](const Edge& e) { return e.p->outcome == PairOutcome::kOk && e.p->bandwidthGBps > 0; };
    // Pass 1: the reference is the median unit's median pair, which a few slow hosts (up to nearly
    // half of them) cannot drag down, unlike the median of pairs (a slow host spoils all its pairs).
    std::vector<double> unitMed;
    std::vector<double> buf;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      buf.clear();
      for (int i : adj_[u])
        if (ok(edges_[i])) buf.push_back(std::log(edges_[i].p->bandwidthGBps));
      if (!buf.empty()) unitMed.push_back(median(buf));
    }
    std::vector<char> cand(units_.size(), 0);
    double hostCut = -std::log(1 / T::kHostRatio);
    if (!unitMed.empty()) {
      double lref = median(unitMed);
      std::vector<double> score(units_.size(), std::nan(""));
      std::vector<double> scores;
      for (std::size_t u = 0; u < units_.size(); ++u) {
        buf.clear();
        for (int i : adj_[u])
          if (ok(edges_[i])) buf.push_back(std::log(edges_[i].p->bandwidthGBps) - lref);
        if (!buf.empty()) scores.push_back(score[u] = median(buf));
      }
      double c = median(scores);
      double sH = std::max(1.4826 * mad(scores, c), T::kMinRelativeSpread);
      hostCut = -std::max(std::log(1 / T::kHostRatio), T::kHostMads * sH);
      for (std::size_t u = 0; u < units_.size(); ++u)
        if (!std::isnan(score[u]) && score[u] < hostCut) cand[u] = 1;
      // The fleet's distribution: pairs between units that pass 1 did not flag.
      std::vector<double> logs, lin;
      for (const auto& e : edges_)
        if (ok(e) && !cand[e.ua] && !cand[e.ub]) {
          logs.push_back(std::log(e.p->bandwidthGBps));
          lin.push_back(e.p->bandwidthGBps);
        }
      if (logs.empty())
        for (const auto& e : edges_)
          if (ok(e)) logs.push_back(std::log(e.p->bandwidthGBps)), lin.push_back(e.p->bandwidthGBps);
      lmed_ = median(logs);
      ls_ = std::max(1.4826 * mad(logs, lmed_), T::kMinRelativeSpread);
      out_.medianBandwidthGBps = median(lin);
      out_.madBandwidthGBps = mad(lin, out_.medianBandwidthGBps);
    }
    {
      std::vector<double> lat;
      for (const auto& e : edges_)
        if (e.p->outcome == PairOutcome::kOk && e.p->latencyUs > 0) lat.push_back(e.p->latencyUs);
      if (!lat.empty()) {
        latMed_ = median(lat);
        double m = mad(lat, latMed_);
        latSigma_ = std::max(1.4826 * m, T::kMinRelativeSpread * latMed_);
        out_.medianLatencyUs = latMed_;
        out_.madLatencyUs = m;
      }
    }
    for (auto& e : edges_) classify(e);
    for (auto& e : confirm_) classify(e);

    // A fleet that is slow as a whole (most pairs below --min-link-gbps): every host below the floor
    // is named; there is no healthy peer to compare with.
    if (in_.minLinkGBps > 0 && floorMode()) return;

    std::vector<char> suspect(units_.size(), 0);
    // Slow hosts: the median of its pairs with unflagged peers below the host cut, and at least two
    // such peers with a low pair.
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!cand[u]) continue;
      buf.clear();
      std::vector<int> witnesses;
      std::vector<double> all;
      for (int i : adj_[u]) {
        const Edge& e = edges_[i];
        int v = e.ua == static_cast<int>(u) ? e.ub : e.ua;
        if (!ok(e)) continue;
        all.push_back(e.r);
        if (cand[v]) continue;
        buf.push_back(e.r);
        if (e.r < hostCut) witnesses.push_back(v);
      }
      double s = buf.empty() ? median(all) : median(buf);
      if (!(s < hostCut)) continue;
      if (witnesses.size() < 2) {
        noteSinglePeer(static_cast<int>(u), witnesses.size());
        continue;
      }
      suspect[u] = 1;
      hostSuspects_.push_back({static_cast<int>(u), slowEvidence(static_cast<int>(u), witnesses), true});
    }
    // Hosts with bad pairs (failed, very slow, slow to answer) to at least two peers that are healthy
    // elsewhere; the units with most bad peers first, so that a faulty host explains its peers' pairs.
    std::vector<std::vector<int>> badPeers(units_.size());
    for (const auto& e : edges_) {
      if (!e.bad() || suspect[e.ua] || suspect[e.ub]) continue;
      badPeers[e.ua].push_back(e.ub);
      badPeers[e.ub].push_back(e.ua);
    }
    for (auto& b : badPeers) {
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
    }
    std::vector<int> order;
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (badPeers[u].size() >= 1) order.push_back(static_cast<int>(u));
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return badPeers[x].size() != badPeers[y].size() ? badPeers[x].size() > badPeers[y].size() : x < y;
    });
    for (int u : order) {
      if (badPeers[u].size() < 2) {
        continue;
      }
      std::vector<int> witnesses;
      for (int v : badPeers[u]) {
        if (suspect[v]) continue;
        bool clean =
            std::all_of(badPeers[v].begin(), badPeers[v].end(), [&](int w) { return w == u || suspect[w]; });
        if (clean) witnesses.push_back(v);
      }
      if (witnesses.size() < 2) continue;
      suspect[u] = 1;
      hostSuspects_.push_back({u, badPairsEvidence(u, witnesses), false});
    }
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (cand[u] || suspect[u]) linkCandidates_.insert(static_cast<int>(u));
    // The bad pairs no suspect host explains: suspect links.
    std::unordered_set<std::uint64_t> seen;
    for (const auto& e : edges_) {
      if (!e.bad() || suspect[e.ua] || suspect[e.ub]) continue;
      if (!seen.insert(pairKey(e.ua, e.ub)).second) continue;
      LinkSuspect ls{e.ua, e.ub, e.p->a, e.p->b, linkEvidence(e, badPeers)};
      linkCandidates_.insert(e.ua);
      linkCandidates_.insert(e.ub);
      linkSuspects_.push_back(std::move(ls));
    }
  }

  void noteSinglePeer(int u, std::size_t witnesses) {
    int live = 0;
    for (int i : adj_[u]) (void)i, ++live;
    out_.notes.push_back(fmt::format(
        "{} is slow with {} of its tested peers, but a host is named only when it is bad with two different "
        "peers "
        "that are healthy elsewhere{}; re-run with more hosts (or --all-pairs) to tell whether the host or "
        "its "
        "peer is at fault",
        label(units_[u].leader), witnesses, live <= 1 ? " and it was tested with one peer only" : ""));
  }

  std::string peerValues(int u, const std::vector<const Edge*>& es, bool latency = false) const {
    std::vector<std::string> parts;
    for (const Edge* e : es) {
      int peerRank = unitOf_[e->p->a] == u ? e->p->b : e->p->a;
      if (e->failed)
        parts.push_back(fmt::format("{}: {}", label(peerRank),
                                    e->p->error.empty() ? outcomeName(e->p->outcome) : e->p->error));
      else if (latency && e->latBad)
        parts.push_back(fmt::format("{}: {:.0f} us", label(peerRank), e->p->latencyUs));
      else
        parts.push_back(fmt::format("{}: {}", label(peerRank), gbps(e->p->bandwidthGBps)));
    }
    return listOf(parts, 4);
  }

  Evidence slowEvidence(int u, const std::vector<int>& witnesses) const {
    std::vector<double> bws;
    std::vector<const Edge*> low;
    for (int i : adj_[u]) {
      const Edge& e = edges_[i];
      if (e.p->outcome != PairOutcome::kOk) continue;
      bws.push_back(e.p->bandwidthGBps);
      int v = e.ua == u ? e.ub : e.ua;
      if (std::find(witnesses.begin(), witnesses.end(), v) != witnesses.end()) low.push_back(&e);
    }
    int n = static_cast<int>(bws.size());
    double med = median(bws);
    Evidence ev;
    ev.kind = "link_slow";
    ev.stage = "links";
    ev.measured = med;
    ev.fleetMedian = out_.medianBandwidthGBps;
    for (int v : witnesses) ev.peers.push_back(units_[v].leader);
    ev.text = fmt::format(
        "{} is slow with {} of its {} peers: its pairs' median is {}, {:.2f}x the fleet median {} "
        "({}), and those peers are normal with their other peers",
        label(units_[u].leader), witnesses.size(), n, gbps(med),
        med / std::max(out_.medianBandwidthGBps, 1e-12), gbps(out_.medianBandwidthGBps), peerValues(u, low));
    return ev;
  }

  Evidence badPairsEvidence(int u, const std::vector<int>& witnesses) const {
    std::vector<const Edge*> bad;
    int failed = 0, lat = 0;
    for (int i : adj_[u]) {
      const Edge& e = edges_[i];
      int v = e.ua == u ? e.ub : e.ua;
      if (!e.bad() || std::find(witnesses.begin(), witnesses.end(), v) == witnesses.end()) continue;
      bad.push_back(&e);
      failed += e.failed;
      lat += e.latBad && !e.failed && !e.bwBad;
    }
    Evidence ev;
    ev.stage = "links";
    ev.fleetMedian = out_.medianBandwidthGBps;
    for (int v : witnesses) ev.peers.push_back(units_[v].leader);
    std::string who = label(units_[u].leader);
    if (failed * 2 >= static_cast<int>(bad.size())) {
      ev.kind = "link_failed";
      ev.text = fmt::format("link tests of {} failed with {} peers that pass their other pairs ({})", who,
                            bad.size(), peerValues(u, bad));
    } else if (lat * 2 > static_cast<int>(bad.size())) {
      ev.kind = "link_slow";
      ev.fleetMedian = out_.medianLatencyUs;
      ev.measured = bad.front()->p->latencyUs;
      ev.text = fmt::format(
          "{} answers slowly with {} peers that are normal with their other peers ({}; fleet median "
          "{:.0f} us)",
          who, bad.size(), peerValues(u, bad, true), out_.medianLatencyUs);
    } else {
      ev.kind = "link_slow";
      ev.measured = bad.front()->p->bandwidthGBps;
      ev.text = fmt::format(
          "{} has bad pairs with {} peers that are normal with their other peers ({}; fleet median "
          "{})",
          who, bad.size(), peerValues(u, bad), gbps(out_.medianBandwidthGBps));
    }
    return ev;
  }

  Evidence linkEvidence(const Edge& e, const std::vector<std::vector<int>>& badPeers) const {
    Evidence ev;
    ev.stage = e.p->stage;
    ev.peers = {e.p->a, e.p->b};
    ev.fleetMedian = out_.medianBandwidthGBps;
    std::string pair = fmt::format("the pair {} - {}", label(e.p->a), label(e.p->b));
    if (e.failed) {
      ev.kind = "link_failed";
      ev.text =
          fmt::format("{} failed ({})", pair, e.p->error.empty() ? outcomeName(e.p->outcome) : e.p->error);
    } else if (e.bwBad) {
      ev.kind = "link_slow";
      ev.measured = e.p->bandwidthGBps;
      ev.text = fmt::format("{} ran at {}, {:.2f}x the fleet median {}{}", pair, gbps(e.p->bandwidthGBps),
                            e.p->bandwidthGBps / std::max(out_.medianBandwidthGBps, 1e-12),
                            gbps(out_.medianBandwidthGBps),
                            in_.minLinkGBps > 0 && e.p->bandwidthGBps < in_.minLinkGBps
                                ? fmt::format(" (below --min-link-gbps {})", in_.minLinkGBps)
                                : "");
    } else {
      ev.kind = "link_slow";
      ev.measured = e.p->latencyUs;
      ev.fleetMedian = out_.medianLatencyUs;
      ev.text = fmt::format("{} answered in {:.0f} us one way, fleet median {:.0f} us", pair, e.p->latencyUs,
                            out_.medianLatencyUs);
    }
    bool aOther = badPeers[e.ua].size() > 1, bOther = badPeers[e.ub].size() > 1;
    if (twoUnitFleet())
      ev.text += "; with only two hosts a bad pair cannot be pinned on either end (add a third host)";
    else if (!aOther && !bOther)
      ev.text += "; both ends are normal with their other peers";
    else
      ev.text +=
          fmt::format("; {} also has other bad pairs, so this may be a host fault that could not be pinned",
                      aOther ? units_[e.ua].name : units_[e.ub].name);
    return ev;
  }

  bool floorMode() {
    int below = 0, okPairs = 0;
    for (const auto& e : edges_)
      if (e.p->outcome == PairOutcome::kOk) {
        ++okPairs;
        below += e.p->bandwidthGBps < in_.minLinkGBps;
      }
    if (okPairs == 0 || below * 2 <= okPairs) return false;
    out_.notes.push_back(
        fmt::format("{} of {} pairs ran below --min-link-gbps {} (fleet median {}): the whole fleet "
                    "is slow (a switch, a shared uplink, the wrong network or the floor itself)",
                    below, okPairs, in_.minLinkGBps, gbps(out_.medianBandwidthGBps)));
    std::vector<double> buf;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      buf.clear();
      for (int i : adj_[u])
        if (edges_[i].p->outcome == PairOutcome::kOk) buf.push_back(edges_[i].p->bandwidthGBps);
      if (buf.empty()) continue;
      double m = median(buf);
      if (m >= in_.minLinkGBps) continue;
      Evidence ev{
          "link_slow",
          "links",
          fmt::format("{} runs its {} pairs at a median {}, below --min-link-gbps {}; most of the fleet is "
                      "below it too",
                      label(units_[u].leader), buf.size(), gbps(m), in_.minLinkGBps),
          {},
          m,
          out_.medianBandwidthGBps};
      hostSuspects_.push_back({static_cast<int>(u), ev, true});
      linkCandidates_.insert(static_cast<int>(u));
    }
    return true;
  }

  // ---------------------------------------------------------------- confirmation
  void confirmOrRetest() {
    std::vector<int> healthy;
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (linkEligible(static_cast<int>(u)) && !linkCandidates_.count(static_cast<int>(u)) &&
          units_[u].evidence.empty())
        healthy.push_back(units_[u].leader);
    std::vector<Pair> ran;
    ran.reserve(in_.pairs.size());
    for (const auto& p : in_.pairs) ran.emplace_back(p.a, p.b);
    std::unordered_set<int> healthySet(healthy.begin(), healthy.end());
    std::vector<int> toRetest;
    std::unordered_map<int, std::vector<const Edge*>> confirmOf;  // unit -> its confirmation pairs
    std::unordered_map<std::uint64_t, const Edge*> confirmPair;
    for (const auto& e : confirm_) {
      confirmOf[e.ua].push_back(&e);
      confirmOf[e.ub].push_back(&e);
      confirmPair[pairKey(e.ua, e.ub)] = &e;
    }
    for (auto& hs : hostSuspects_) {
      Unit& u = units_[hs.unit];
      if (healthy.empty()) {
        hs.evidence.text += "; it could not be re-tested: no healthy peer is left to confirm it with";
        u.evidence.push_back(hs.evidence);
        continue;
      }
      std::vector<const Edge*> mine;
      for (const Edge* e : confirmOf[hs.unit])
        if (healthySet.count(e->ua == hs.unit ? units_[e->ub].leader : units_[e->ua].leader))
          mine.push_back(e);
      if (!confirmRan_) {
        toRetest.push_back(u.leader);
        out_.notes.push_back(
            fmt::format("{} (not named yet: it is re-tested with healthy peers first)", hs.evidence.text));
        continue;
      }
      if (mine.empty()) {
        hs.evidence.text += "; it was not re-tested (no confirmation pair ran for it)";
        u.evidence.push_back(hs.evidence);
        continue;
      }
      bool anyFailed = false, anyLat = false;
      double sum = 0;
      int okCount = 0;
      for (const Edge* e : mine) {
        anyFailed |= e->failed;
        anyLat |= e->latBad;
        if (!e->failed) sum += e->r, ++okCount;
      }
      double cut =
          -std::max(std::log(1 / T::kHostRatio), T::kConfirmMads * ls_ / std::sqrt(std::max(okCount, 1)));
      bool slow = okCount > 0 && sum / okCount < cut;
      if (in_.minLinkGBps > 0)
        for (const Edge* e : mine) slow |= !e->failed && e->p->bandwidthGBps < in_.minLinkGBps;
      std::string values = peerValues(hs.unit, mine, anyLat && !slow);
      if (anyFailed || slow || anyLat) {
        u.evidence.push_back(hs.evidence);
        Evidence c{hs.evidence.kind,
                   "confirm",
                   fmt::format("re-tested with {}: bad again ({})",
                               mine.size() == 1 ? "one healthy peer" : "healthy peers", values),
                   {},
                   okCount > 0 ? std::exp(sum / okCount + lmed_) : 0,
                   out_.medianBandwidthGBps};
        for (const Edge* e : mine) c.peers.push_back(unitOf_[e->p->a] == hs.unit ? e->p->b : e->p->a);
        u.evidence.push_back(std::move(c));
      } else {
        out_.notes.push_back(
            fmt::format("{}; but its re-tests were normal ({}), so it is not named (a transient "
                        "slowdown, or load on the peers)",
                        hs.evidence.text, values));
      }
    }
    // One call for all suspects: it spreads them over different healthy peers (few rounds).
    if (!toRetest.empty())
      out_.retest = confirmationPairs(toRetest, healthy, ran, 0x5eedULL, T::kConfirmPeers);
    for (auto& lsus : linkSuspects_) {
      auto found = confirmPair.find(pairKey(lsus.ua, lsus.ub));
      const Edge* again = found == confirmPair.end() ? nullptr : found->second;
      LinkVerdict lv{units_[lsus.ua].name,
                     units_[lsus.ub].name,
                     std::min(lsus.ra, lsus.rb),
                     std::max(lsus.ra, lsus.rb),
                     {}};
      if (!confirmRan_) {
        out_.retest.emplace_back(lsus.ra, lsus.rb);
        out_.notes.push_back(lsus.evidence.text + " (not named yet: the pair is re-tested first)");
        continue;
      }
      if (again == nullptr) {
        lsus.evidence.text += "; it was not re-tested (no confirmation pair ran for it)";
        lv.evidence.push_back(lsus.evidence);
        out_.links.push_back(std::move(lv));
        continue;
      }
      if (again->bad()) {
        lv.evidence.push_back(lsus.evidence);
        std::string v = again->failed  ? (again->p->error.empty() ? "failed" : again->p->error)
                        : again->bwBad ? gbps(again->p->bandwidthGBps)
                                       : fmt::format("{:.0f} us", again->p->latencyUs);
        lv.evidence.push_back({lsus.evidence.kind,
                               "confirm",
                               fmt::format("re-tested: bad again ({})", v),
                               {lsus.ra, lsus.rb},
                               again->failed ? 0 : again->p->bandwidthGBps,
                               out_.medianBandwidthGBps});
        out_.links.push_back(std::move(lv));
      } else {
        out_.notes.push_back(fmt::format("{}; but its re-test was normal ({}), so it is not named",
                                         lsus.evidence.text, gbps(again->p->bandwidthGBps)));
      }
    }
  }

  // ---------------------------------------------------------------- bisection
  void bisection() {
    const auto& steps = in_.bisect;
    if (steps.empty()) return;
    std::unordered_set<int> passed;
    for (const auto& s : steps)
      if (s.ok) passed.insert(s.ranks.begin(), s.ranks.end());
    std::vector<std::set<int>> failing;
    std::vector<const report::BisectStep*> failingSteps;
    for (const auto& s : steps)
      if (!s.ok) {
        failing.emplace_back(s.ranks.begin(), s.ranks.end());
        failingSteps.push_back(&s);
      }
    std::set<int> named;
    for (std::size_t i = 0; i < failing.size(); ++i) {
      bool minimal = true;
      for (std::size_t j = 0; j < failing.size() && minimal; ++j)
        if (j != i && failing[j].size() < failing[i].size() &&
            std::includes(failing[i].begin(), failing[i].end(), failing[j].begin(), failing[j].end()))
          minimal = false;
      if (!minimal) continue;
      std::vector<int> culprits;
      for (int r : failing[i])
        if (!passed.count(r) && validRank(r)) culprits.push_back(r);
      std::vector<std::string> ranks;
      for (int r : failing[i]) ranks.push_back(std::to_string(r));
      std::string group = listOf(ranks, 8);
      if (culprits.empty()) {
        out_.notes.push_back(
            fmt::format("The bisection's ring over ranks {} failed ({}), but each of them passed in "
                        "another group: no single rank is to blame (a transient fault?)",
                        group, failingSteps[i]->error));
        continue;
      }
      for (int r : culprits) {
        Unit& u = units_[unitOf_[r]];
        if (u.dead || !named.insert(r).second) continue;
        u.evidence.push_back(
            {"bisect", "bisect",
             fmt::format("the bisection's ring collective over ranks {} failed ({}); {} is the one "
                         "rank of that group that passed in no other group",
                         group, failingSteps[i]->error.empty() ? "no error text" : failingSteps[i]->error,
                         label(r)),
             std::vector<int>(failing[i].begin(), failing[i].end()), 0, 0});
      }
    }
  }

  // ---------------------------------------------------------------- interfaces
  static bool virtualName(const std::string& n) {
    return n.rfind("docker", 0) == 0 || n.rfind("virbr", 0) == 0 || n.rfind("veth", 0) == 0 ||
           n.rfind("br-", 0) == 0;
  }

  // The interfaces of a unit that reached every peer (on a subnet shared with another unit).
  std::vector<std::string> computeGoodIfaces(int u) const {
    std::vector<std::string> real, virt;
    const FleetRank* fr = rank(units_[u].leader);
    if (fr == nullptr) return real;
    for (const auto& i : fr->ifaces) {
      if (badIfaces_.count({u, i.name})) continue;
      std::string s = subnetOf(i);
      if (!s.empty() && subnetUnits(s) < 2) continue;
      (virtualName(i.name) ? virt : real).push_back(i.name);
    }
    return real.empty() ? virt : real;
  }
  const std::vector<std::string>& goodIfaces(int u) const { return good_[u]; }

  // Whether a NCCL_SOCKET_IFNAME value selects `name` (REFERENCE.md §6: prefix match, '^' excludes,
  // '=' exact).
  static bool selects(const IfnameSpec& spec, const std::string& name) {
    bool any = std::any_of(spec.entries.begin(), spec.entries.end(),
                           [&](const auto& e) { return ifnameEntryMatches(spec, e, name); });
    return spec.exclude ? !any : any;
  }

  std::string ifaceList(const FleetRank& fr) const {
    std::vector<std::string> names;
    for (const auto& i : fr.ifaces)
      names.push_back(i.addr.empty() ? i.name : fmt::format("{} {}", i.name, i.addr));
    return names.empty() ? "none reported" : listOf(names, 6);
  }

  // An NCCL value that selects exactly `good` among `all` names.
  static std::string ncclValue(const std::vector<std::string>& good, const std::vector<std::string>& all) {
    std::string plain;
    for (const auto& g : good) plain += (plain.empty() ? "" : ",") + g;
    IfnameSpec spec = parseIfnameSpec(plain);
    for (const auto& n : all)
      if (selects(spec, n) != (std::find(good.begin(), good.end(), n) != good.end())) return "=" + plain;
    return plain;
  }

  void interfaces() {
    good_.resize(units_.size());
    for (std::size_t u = 0; u < units_.size(); ++u) good_[u] = computeGoodIfaces(static_cast<int>(u));
    bool needAdvice = !badIfaces_.empty();
    std::map<int, std::string> hostValue;  // unit -> recommended value
    // NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME that select nothing usable on the rank's host.
    for (int r = 0; r < world_; ++r) {
      const FleetRank* fr = rank(r);
      if (fr == nullptr || !fr->joined || fr->ifaces.empty()) continue;
      int u = unitOf_[r];
      const auto& good = goodIfaces(u);
      std::vector<std::string> all;
      for (const auto& i : fr->ifaces) all.push_back(i.name);
      std::string advice = good.empty() ? "unset it" : fmt::format("set it to {}", ncclValue(good, all));
      if (!fr->ncclSocketIfname.empty()) {
        IfnameSpec spec = parseIfnameSpec(fr->ncclSocketIfname);
        std::string problem;
        if (!spec.error.empty()) {
          problem = fmt::format("is malformed ({})", spec.error);
        } else if (!(in_.standalone && selects(spec, "lo"))) {
          std::vector<std::string> picked;
          for (const auto& n : all)
            if (selects(spec, n)) picked.push_back(n);
          if (picked.empty())
            problem = fmt::format("matches none of its interfaces ({})", ifaceList(*fr));
          else if (std::none_of(picked.begin(), picked.end(), [&](const auto& n) {
                     return std::find(good.begin(), good.end(), n) != good.end();
                   }))
            problem = fmt::format("selects only {}, which cannot reach every peer", listOf(picked));
        }
        if (!problem.empty()) {
          units_[u].evidence.push_back(
              {"ifname",
               "join",
               fmt::format("NCCL_SOCKET_IFNAME={} on {} {}: NCCL finds no working socket "
                           "interface there and the job fails at init; {}",
                           quoteValue(fr->ncclSocketIfname), label(r), problem, advice),
               {},
               0,
               0});
          needAdvice = true;
        }
      }
      if (!fr->glooSocketIfname.empty()) {
        const std::string& g = fr->glooSocketIfname;
        std::string problem;
        if (g.find_first_of("^=,:") != std::string::npos)
          problem = "uses NCCL's list syntax, but Gloo takes one plain interface name";
        else if (!(in_.standalone && g == "lo") && std::find(all.begin(), all.end(), g) == all.end())
          problem = fmt::format("names no interface of that host ({})", ifaceList(*fr));
        else if (!(in_.standalone && g == "lo") && std::find(good.begin(), good.end(), g) == good.end())
          problem = "names an interface that cannot reach every peer";
        if (!problem.empty()) {
          units_[u].evidence.push_back(
              {"ifname",
               "join",
               fmt::format(
                   "GLOO_SOCKET_IFNAME={} on {} {}: Gloo fails with \"Unable to find address for: {}\"; {}",
                   quoteValue(g), label(r), problem, quoteValue(g),
                   good.empty() ? std::string("unset it") : fmt::format("set it to {}", good.front())),
               {},
               0,
               0});
          needAdvice = true;
        }
      }
    }
    if (!needAdvice) return;
    // Per host: the interfaces that reached every peer. Job-wide: the names good on some host and bad on
    // none, when they cover every host.
    std::set<std::string> goodNames, badNames;
    for (auto& [u, name] : badIfaces_) badNames.insert(name);
    std::vector<int> hosts;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!netOk(static_cast<int>(u))) continue;
      const FleetRank* fr = rank(units_[u].leader);
      if (fr == nullptr || fr->ifaces.empty()) continue;
      hosts.push_back(static_cast<int>(u));
      const auto& good = goodIfaces(static_cast<int>(u));
      std::vector<std::string> all;
      for (const auto& i : fr->ifaces) all.push_back(i.name);
      if (good.size() != all.size()) {
        units_[u].ncclSocketIfname = good.empty() ? "" : ncclValue(good, all);
        (void)hostValue;
      }
      goodNames.insert(good.begin(), good.end());
    }
    std::vector<std::string> list;
    for (const auto& n : goodNames)
      if (!badNames.count(n)) list.push_back(n);
    std::vector<std::string> everyName;
    for (int u : hosts)
      for (const auto& i : rank(units_[u].leader)->ifaces) everyName.push_back(i.name);
    bool covers = !list.empty();
    std::string value;
    if (covers) {
      std::sort(everyName.begin(), everyName.end());
      everyName.erase(std::unique(everyName.begin(), everyName.end()), everyName.end());
      value = ncclValue(list, everyName);
      IfnameSpec spec = parseIfnameSpec(value);
      for (int u : hosts) {
        const auto& good = goodIfaces(u);
        bool ok = false, picksBad = false;
        for (const auto& i : rank(units_[u].leader)->ifaces) {
          if (!selects(spec, i.name)) continue;
          (std::find(good.begin(), good.end(), i.name) != good.end() ? ok : picksBad) = true;
        }
        if (!ok || picksBad) covers = false;
      }
    }
    if (covers) {
      out_.jobSocketIfname = value;
      out_.notes.push_back(
          fmt::format("NCCL_SOCKET_IFNAME={} selects an interface that reaches every peer on every "
                      "host{}",
                      value,
                      list.size() == 1 ? fmt::format(" (GLOO_SOCKET_IFNAME={} too)", list.front())
                                       : "; Gloo takes one name per host (see each host's value)"));
    } else {
      out_.notes.push_back(
          "No single NCCL_SOCKET_IFNAME selects a working interface on every host: set it per host "
          "as listed in the host verdicts");
    }
  }

  void mtus() {
    struct Member {
      int unit;
      std::string iface;
      int mtu;
    };
    std::map<std::string, std::vector<Member>> bySubnet;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!netOk(static_cast<int>(u)) || in_.standalone) continue;
      for (const auto& i : rank(units_[u].leader)->ifaces) {
        std::string s = subnetOf(i);
        if (!s.empty() && i.mtu > 0) bySubnet[s].push_back({static_cast<int>(u), i.name, i.mtu});
      }
    }
    for (auto& [subnet, members] : bySubnet) {
      std::map<int, int> count;
      for (const auto& m : members) ++count[m.mtu];
      if (count.size() < 2) continue;
      int best = 0, bestCount = 0;
      bool tie = false;
      for (auto [mtu, c] : count) {
        if (c > bestCount)
          best = mtu, bestCount = c, tie = false;
        else if (c == bestCount)
          tie = true;
      }
      for (const auto& m : members) {
        if (!tie && m.mtu == best) continue;
        std::string text =
            tie ? fmt::format(
                      "{} {} has MTU {} on {}, where the hosts disagree ({}) and none is the majority: "
                      "large packets between them are dropped or fragmented; set one MTU on every host of "
                      "the subnet",
                      label(units_[m.unit].leader), m.iface, m.mtu, subnet, mtuCounts(count))
                : fmt::format(
                      "{} {} has MTU {}, while {} other host(s) on {} use {}: large packets between them are "
                      "dropped or fragmented; set MTU {} on {}'s {}",
                      label(units_[m.unit].leader), m.iface, m.mtu, bestCount, subnet, best, best,
                      units_[m.unit].name, m.iface);
        units_[m.unit].evidence.push_back(
            {"mtu", "join", text, {}, static_cast<double>(m.mtu), static_cast<double>(best)});
      }
    }
  }

  static std::string mtuCounts(const std::map<int, int>& count) {
    std::vector<std::string> parts;
    for (auto [mtu, c] : count) parts.push_back(fmt::format("{} on {}", mtu, c));
    return listOf(parts, 6);
  }

  // A host's CPU share per rank: its ranks' cgroup limit divided among the ranks that share the limit's
  // file; a rank without a limit has its affinity width. The host's share is its tightest rank's.
  void cpus() {
    if (in_.standalone) return;  // one host: its system.cpu_quota check speaks for it
    struct Share {
      int unit;
      double perRank;
      int rank;
      int sharing;
    };
    std::vector<Share> shares;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      std::map<std::string, int> sharing;
      for (int r : units_[u].ranks) {
        const FleetRank* fr = rank(r);
        if (fr != nullptr && fr->joined && fr->cpuQuota > 0) ++sharing[fr->cpuQuotaFile];
      }
      std::optional<Share> tightest;
      for (int r : units_[u].ranks) {
        const FleetRank* fr = rank(r);
        if (fr == nullptr || !fr->joined) continue;
        double per = 0;
        int n = 1;
        if (fr->cpuQuota > 0) {
          n = sharing[fr->cpuQuotaFile];
          per = fr->cpuQuota / n;
          if (fr->affinityCpus > 0) per = std::min(per, static_cast<double>(fr->affinityCpus));
        } else if (fr->affinityCpus > 0) {
          per = fr->affinityCpus;
        } else {
          continue;  // nothing known (a 1.0 rank)
        }
        if (!tightest || per < tightest->perRank) tightest = Share{static_cast<int>(u), per, r, n};
      }
      if (tightest) shares.push_back(*tightest);
    }
    if (shares.size() < 3) return;  // too few hosts to tell one from the fleet
    std::vector<double> values;
    for (const auto& s : shares) values.push_back(s.perRank);
    std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
    const double median = values[values.size() / 2];
    for (const auto& s : shares) {
      const FleetRank* fr = rank(s.rank);
      if (fr->cpuQuota <= 0 || s.perRank >= T::kCpuPerRankFloor || s.perRank >= T::kCpuRatio * median)
        continue;
      units_[s.unit].evidence.push_back(
          {"cpu",
           "join",
           fmt::format(
               "{} may use {:.3g} CPU ({}: cgroup CPU limit {:.3g} CPU shared by {} rank(s)), where the "
               "fleet's median host gives each rank {:.3g} CPU: the kernel stops its ranks for most of "
               "every period and every collective waits for them; raise or remove the limit",
               label(s.rank), s.perRank, fr->cpuQuotaFile, fr->cpuQuota, s.sharing, median),
           {},
           s.perRank,
           median});
    }
  }

  // ---------------------------------------------------------------- verdicts
  void assemble() {
    for (auto& u : units_) {
      HostVerdict hv;
      hv.host = u.name;
      hv.ranks = u.ranks;
      bool suspect = false, noResult = false;
      for (const auto& e : u.evidence) (e.kind == "no_result" ? noResult : suspect) = true;
      hv.state = suspect ? HostState::kSuspect : noResult ? HostState::kNoResult : HostState::kHealthy;
      hv.evidence = std::move(u.evidence);
      hv.ncclSocketIfname = u.ncclSocketIfname;
      out_.hosts.push_back(std::move(hv));
    }
    std::sort(out_.hosts.begin(), out_.hosts.end(),
              [](const HostVerdict& a, const HostVerdict& b) { return naturalLess(a.host, b.host); });
    std::sort(out_.links.begin(), out_.links.end(), [](const LinkVerdict& a, const LinkVerdict& b) {
      return std::tie(a.rankA, a.rankB) < std::tie(b.rankA, b.rankB);
    });
  }
};

}  // namespace

FleetJudgement judge(const FleetInput& in) { return Judge(in).run(); }

}  // namespace ds::diag::fleet
