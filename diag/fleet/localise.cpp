// Fleet localisation (see localise.h and docs/dev/fleet-mode.md, "Localisation").
//
// The order matters: ranks that froze, exited or never reported are settled first (their pairs
// prove nothing about their peers); then reachability (a pair that cannot connect is explained
// before its link test is looked at); then the link pairs of the remaining units: slow hosts by the
// median of their pairs, hosts with bad pairs to several peers that are healthy elsewhere, and
// single bad links; then bisection, and the advice (interface names, MTUs, CPU limits: advice.cpp).
// Everything from the link stage is re-tested (stage "confirm") before it is named. judge(), at the
// end of this file, runs the stages in that order; each is a function or a small class below.
#include "diag/fleet/localise.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "diag/fleet/advice.h"
#include "diag/fleet/localise_detail.h"
#include "diag/fleet/plan.h"
#include "engine/common/median.h"

namespace ds::diag::fleet {

using detail::Fleet;
using detail::listOf;
using detail::subnetOf;
using detail::Unit;
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

// ---------------------------------------------------------------- the fleet's units
namespace detail {

Fleet::Fleet(const FleetInput& input) : in(input) {
  world = std::max(in.worldSize, static_cast<int>(in.ranks.size()));
  unitOf.assign(world, -1);
  std::unordered_map<std::string, int> byName;
  for (int r = 0; r < world; ++r) {
    const FleetRank* fr = rank(r);
    std::string key;
    if (in.standalone || fr == nullptr || fr->host.empty())
      key = label(r);
    else
      key = fr->host;
    auto [it, fresh] = byName.emplace(key, static_cast<int>(units.size()));
    if (fresh) {
      units.emplace_back();
      units.back().name = key;
    }
    Unit& u = units[it->second];
    u.ranks.push_back(r);
    unitOf[r] = it->second;
    if (fr != nullptr && fr->joined && u.leader < 0) u.leader = r;
  }
  for (auto& u : units) {
    const FleetRank* fr = u.leader >= 0 ? rank(u.leader) : nullptr;
    u.leaderReported = fr != nullptr && fr->reported && !fr->frozen && !fr->exited;
  }
}

void Fleet::countNet() {
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (!netOk(static_cast<int>(u))) continue;
    ++liveUnits_;
    std::set<std::string> mine;
    for (const auto& i : rank(units[u].leader)->ifaces) mine.insert(subnetOf(i));
    for (const auto& sn : mine)
      if (!sn.empty()) ++subnetCount_[sn];
  }
}

std::string Fleet::label(int r) const { return rankLabel(in, r); }

int Fleet::subnetUnits(const std::string& subnet) const {
  auto it = subnetCount_.find(subnet);
  return it == subnetCount_.end() ? 0 : it->second;
}

std::string Fleet::addrOf(int r, const std::string& iface) const {
  if (const FleetRank* fr = rank(r))
    for (const auto& f : fr->ifaces)
      if (f.name == iface) return f.addr;
  return "";
}

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

std::string listOf(const std::vector<std::string>& items, std::size_t show) {
  if (items.empty()) return "";
  std::size_t n = std::min(items.size(), show);
  std::string s = items[0];
  for (std::size_t i = 1; i < n; ++i) s += (i + 1 == n && n == items.size() ? " and " : ", ") + items[i];
  if (items.size() > n) s += fmt::format(" and {} more", items.size() - n);
  return s;
}

}  // namespace detail

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The median of v (engine/common/median.h); NaN when empty: no pair, no typical value.
double median(const std::vector<double>& v) { return v.empty() ? std::nan("") : ds::median(v); }

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

// ---------------------------------------------------------------- ranks
// Evidence for every rank that never joined, froze, exited or never reported; a unit with a frozen
// or exited rank is dead (its pairs prove nothing about its peers).
void settleRanks(Fleet& fleet) {
  for (int r = 0; r < fleet.world; ++r) {
    const FleetRank* fr = fleet.rank(r);
    Unit& u = fleet.units[fleet.unitOf[r]];
    std::string stage = fr != nullptr && !fr->lastStage.empty() ? fr->lastStage : "join";
    auto add = [&](const char* kind, const std::string& at, std::string text, double measured) {
      u.evidence.push_back({kind, at, std::move(text), {}, measured, 0});
    };
    if (fr == nullptr || !fr->joined) {
      add("no_result", "join",
          fmt::format(
              "{} never joined the fleet rendezvous before the join deadline: it did not start, cannot "
              "reach the store, or started too late; {}",
              fleet.label(r),
              fr != nullptr && !fr->lastError.empty() ? "its own error: " + fr->lastError
                                                       : std::string("check that host and its launcher log")),
          0);
    } else if (fr->frozen) {
      u.dead = true;
      add("frozen", stage,
          fmt::format(
              "{} stopped sending heartbeats during stage \"{}\" (silent for {}): the process is stopped "
              "(SIGSTOP), hung, or its host is gone; look at it with py-spy/gdb or check the host",
              fleet.label(r), stage, seconds(fr->silentForS)),
          fr->silentForS);
    } else if (fr->exited) {
      u.dead = true;
      add("exited", stage,
          fr->lastError.empty()
              ? fmt::format("{} exited during stage \"{}\" (its last heartbeat said it failed, or its connections "
                            "were reset); read its stderr",
                            fleet.label(r), stage)
              : fmt::format("{} gave up during stage \"{}\" and exited; its own error: {}", fleet.label(r), stage,
                            fr->lastError),
          fr->silentForS);
    } else if (!fr->reported) {
      add("no_result", stage,
          fmt::format("{} joined but its results never reached rank 0 (last stage \"{}\"); its heartbeat was "
                      "still alive, so it was slow rather than stopped{}",
                      fleet.label(r), stage, fr->lastError.empty() ? "" : "; its own error: " + fr->lastError),
          0);
    }
  }
}

// ---------------------------------------------------------------- reachability
// The first failed probe of each direction between two units.
struct ReachDir {
  const ReachFailure* ab = nullptr;  // lower unit -> higher unit
  const ReachFailure* ba = nullptr;
};
using ReachEdges = std::unordered_map<std::uint64_t, ReachDir>;  // pairKey(unit, unit) -> its failures

// The evidence of reachability's findings, as an operator reads it.
class ReachEvidence {
 public:
  explicit ReachEvidence(const Fleet& fleet) : fleet_(fleet) {}

  // Unit u, blamed on one subnet by its failures with `peers`; `probing`: the units that reported
  // their probes (the denominator of "most peers").
  Evidence unit(int u, std::vector<int> peers, const ReachEdges& edges, int probing) const {
    std::sort(peers.begin(), peers.end());
    // Who cannot reach u (inbound) and whom u cannot reach (outbound).
    std::vector<const ReachFailure*> in, outb;
    for (int v : peers) {
      const ReachDir& d = edges.at(pairKey(u, v));
      const ReachFailure* toU = u < v ? d.ba : d.ab;
      const ReachFailure* fromU = u < v ? d.ab : d.ba;
      if (toU) in.push_back(toU);
      if (fromU) outb.push_back(fromU);
    }
    int others = std::max(1, probing - 1);
    int leader = fleet_.units[u].leader;
    const std::string& name = fleet_.units[u].name;
    Evidence e;
    e.stage = "reachability";
    e.peers = peers;
    std::sort(e.peers.begin(), e.peers.end());
    for (int& p : e.peers) p = fleet_.units[p].leader;
    const ReachFailure* sample = !in.empty() ? in.front() : outb.front();
    e.measured = sample->ms / 1000.0;
    std::string err = errorText(*sample);
    if (static_cast<int>(in.size()) * 2 > others) {
      e.kind = "unreachable";
      std::string addr =
          sample == in.front()
              ? (sample->toAddr.empty() ? fleet_.addrOf(leader, sample->toIface) : sample->toAddr)
              : fleet_.addrOf(leader, sample->fromIface);
      std::string iface = sample == in.front() ? sample->toIface : sample->fromIface;
      std::string back =
          outb.size() == in.size() ? fmt::format("; {} cannot reach them either", name)
          : outb.empty()
              ? fmt::format("; {} itself reaches them (inbound traffic to it is blocked: a firewall rule?)",
                            name)
              : fmt::format("; {} cannot reach {} of them", name, outb.size());
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
          listOf(names), target(*in.front()), in.front()->toIface, errorText(*in.front()), name);
    }
    return e;
  }

  // A pair of units that cannot connect on one subnet while both reach everyone else.
  std::string link(const ReachDir& d) const {
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
    if (fleet_.twoUnitFleet()) text += "; with only two hosts this cannot be pinned on either end";
    return text;
  }

 private:
  const Fleet& fleet_;

  std::string label(int r) const { return fleet_.label(r); }

  std::string errorText(const ReachFailure& f) const {
    if (!f.error.empty()) return f.error;
    if (f.timedOut) return fmt::format("timed out after {}", seconds(fleet_.in.connectTimeoutS));
    return "failed";
  }

  // "fleet1 (rank 1, 10.79.0.2)"
  std::string target(const ReachFailure& f) const {
    std::string addr = f.toAddr.empty() ? fleet_.addrOf(f.to, f.toIface) : f.toAddr;
    std::string host = fleet_.rank(f.to) != nullptr ? fleet_.rank(f.to)->host : "";
    if (host.empty() || fleet_.in.standalone)
      return addr.empty() ? label(f.to) : fmt::format("{} ({})", label(f.to), addr);
    return addr.empty() ? label(f.to) : fmt::format("{} (rank {}, {})", host, f.to, addr);
  }
};

// The TCP probes that failed, per subnet. A unit that at least two peers clean elsewhere cannot reach
// (or be reached by) is named, unless another of its interfaces reaches everyone (then the advice
// leaves the failing one out); a failing pair whose ends reach everyone else is a suspect link,
// unless another subnet joins them. Each failure is attributed to an interface (Fleet::badIfaces).
class Reachability {
 public:
  Reachability(Fleet& fleet, FleetJudgement& out) : fleet_(fleet), out_(out) {}

  // Returns the unit pairs whose probes failed: their link pairs are explained by reachability.
  std::unordered_set<std::uint64_t> run() {
    collect();
    // Per subnet: blame units, then links.
    for (auto& [subnet, edges] : bySubnet_) attribute(edges, blameUnits(subnet, edges));
    nameUnits();
    nameLinks();
    return std::move(failedPairs_);
  }

 private:
  // A failing pair of units that no blamed unit explains.
  struct LinkFailure {
    int a = 0, b = 0;
    const ReachDir* d = nullptr;
  };

  Fleet& fleet_;
  FleetJudgement& out_;
  int probing_ = 0;  // units that reported their probes: the denominator of "most peers"
  std::map<std::string, ReachEdges> bySubnet_;
  std::unordered_set<std::uint64_t> failedPairs_;
  std::map<int, std::vector<Evidence>> blamedEvidence_;
  std::set<std::pair<int, std::string>> blamedOn_;  // (unit, subnet)
  std::vector<LinkFailure> linkFailures_;

  // The failures between units that can speak for them, by the subnet they left from; the first
  // failure of each direction speaks for the rest.
  void collect() {
    for (std::size_t u = 0; u < fleet_.units.size(); ++u)
      if (fleet_.netOk(static_cast<int>(u))) ++probing_;
    for (const auto& rs : fleet_.in.reach)
      for (const auto& f : rs.failures) {
        if (!fleet_.validRank(f.from) || !fleet_.validRank(f.to)) {
          out_.notes.push_back(
              fmt::format("A reachability failure from rank {} to rank {} was ignored: the world "
                          "has {} ranks (a bug in the probe's report)",
                          f.from, f.to, fleet_.world));
          continue;
        }
        int a = fleet_.unitOf[f.from], b = fleet_.unitOf[f.to];
        if (a == b || !fleet_.netOk(a) || fleet_.units[b].dead)
          continue;  // a dead peer explains its own silence
        ReachDir& d = bySubnet_[subnetOfFailure(f)][pairKey(a, b)];
        const ReachFailure*& slot = a < b ? d.ab : d.ba;
        if (slot == nullptr) slot = &f;
        failedPairs_.insert(pairKey(a, b));
      }
  }

  // The units of one subnet with failures to at least two peers that fail with nobody else, the units
  // with most failing peers first. A unit named on a subnet is a suspect only when it has no
  // interface that reached everyone (nameUnits).
  std::unordered_set<int> blameUnits(const std::string& subnet, const ReachEdges& edges) {
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
      blamedOn_.insert({u, subnet});
      blamedEvidence_[u].push_back(ReachEvidence(fleet_).unit(u, peers[u], edges, probing_));
    }
    return blamed;
  }

  // Each failure to an interface: the blamed end's, else the end it left from. The pairs with no
  // blamed end are link failures.
  void attribute(const ReachEdges& edges, const std::unordered_set<int>& blamed) {
    for (auto& [key, d] : edges) {
      int a = static_cast<int>(key >> 32), b = static_cast<int>(key & 0xffffffffu);
      for (const ReachFailure* f : {d.ab, d.ba}) {
        if (f == nullptr) continue;
        int from = fleet_.unitOf[f->from], to = fleet_.unitOf[f->to];
        if (blamed.count(to) && !blamed.count(from))
          fleet_.badIfaces.insert({to, f->toIface});
        else
          fleet_.badIfaces.insert({from, f->fromIface});
      }
      if (!blamed.count(a) && !blamed.count(b)) linkFailures_.push_back({a, b, &d});
    }
  }

  void nameUnits() {
    for (auto& [u, ev] : blamedEvidence_) {
      if (hasCleanInterface(u)) {
        for (auto& e : ev)
          out_.notes.push_back(
              fmt::format("{} Another interface of {} reaches every peer, so it is not named; keep "
                          "the failing interface out of NCCL_SOCKET_IFNAME (see the advice).",
                          e.text, fleet_.units[u].name));
        continue;
      }
      fleet_.units[u].reachSuspect = true;
      for (auto& e : ev) fleet_.units[u].evidence.push_back(std::move(e));
    }
  }

  // Single failing pairs whose ends reach everyone else: suspect links (unless another subnet joins
  // them, which the advice handles).
  void nameLinks() {
    std::map<std::uint64_t, LinkVerdict> links;
    for (const auto& lf : linkFailures_) {
      const ReachDir& d = *lf.d;
      const ReachFailure* f = d.ab ? d.ab : d.ba;
      auto [it, fresh] = links.emplace(pairKey(lf.a, lf.b), LinkVerdict{});
      LinkVerdict& lv = it->second;
      if (fresh) {
        lv.rankA = std::min(f->from, f->to);
        lv.rankB = std::max(f->from, f->to);
        lv.hostA = fleet_.units[fleet_.unitOf[lv.rankA]].name;
        lv.hostB = fleet_.units[fleet_.unitOf[lv.rankB]].name;
      }
      lv.evidence.push_back(
          {"unreachable", "reachability", ReachEvidence(fleet_).link(d), {f->to}, f->ms / 1000.0, 0});
    }
    // Two units joined by another clean subnet: advice only.
    for (auto& [key, lv] : links) {
      int a = fleet_.unitOf[lv.rankA], b = fleet_.unitOf[lv.rankB];
      if (shareCleanSubnet(a, b)) {
        for (auto& e : lv.evidence)
          out_.notes.push_back(e.text +
                               fmt::format("; {} and {} still reach each other on another interface, so the "
                                           "link is not named",
                                           fleet_.units[a].name, fleet_.units[b].name));
        continue;
      }
      out_.links.push_back(std::move(lv));
    }
  }

  std::string subnetOfFailure(const ReachFailure& f) const {
    if (const FleetRank* fr = fleet_.rank(f.from))
      for (const auto& i : fr->ifaces)
        if (i.name == f.fromIface) {
          std::string s = subnetOf(i);
          if (!s.empty()) return s;
        }
    return "iface " + f.fromIface;
  }

  // Whether the unit has an interface on a subnet shared with other units where it was not blamed.
  bool hasCleanInterface(int u) const {
    const FleetRank* fr = fleet_.rank(fleet_.units[u].leader);
    if (fr == nullptr) return false;
    for (const auto& i : fr->ifaces) {
      std::string s = subnetOf(i);
      if (s.empty() || blamedOn_.count({u, s}) || fleet_.badIfaces.count({u, i.name})) continue;
      if (fleet_.subnetUnits(s) >= 2) return true;
    }
    return false;
  }

  bool shareCleanSubnet(int a, int b) const {
    const FleetRank* fa = fleet_.rank(fleet_.units[a].leader);
    const FleetRank* fb = fleet_.rank(fleet_.units[b].leader);
    if (fa == nullptr || fb == nullptr) return false;
    std::set<std::string> sa;
    for (const auto& i : fa->ifaces) sa.insert(subnetOf(i));
    for (const auto& i : fb->ifaces) {
      std::string s = subnetOf(i);
      if (s.empty() || !sa.count(s)) continue;
      auto it = bySubnet_.find(s);
      if (it == bySubnet_.end() || !it->second.count(pairKey(a, b))) return true;
    }
    return false;
  }
};

// ---------------------------------------------------------------- link stage
// A link pair between two units whose link results count, with its verdict.
struct Edge {
  const PairResult* p;
  int ua, ub;
  double r = -kInf;  // log ratio to the fleet median (ok pairs)
  bool failed = false, bwBad = false, latBad = false, lossBad = false;
  bool bad() const { return failed || bwBad || latBad || lossBad; }
};

// The link stage's pairs and the fleet's reference distribution they are judged against.
struct LinkPairs {
  std::vector<Edge> edges;            // link-stage pairs between eligible units
  std::vector<Edge> confirm;          // stage "confirm"
  std::vector<std::vector<int>> adj;  // unit -> indices into edges
  bool confirmRan = false;
  double lmed = std::nan(""), ls = T::kMinRelativeSpread;  // log bandwidth: median, robust sigma
  double latMed = 0, latSigma = 0;
  double lossMed = 0;  // the median fraction of bytes sent again, over passed pairs that say
};

// The share of a pair's bytes that TCP sent again; NaN where not known (or too little was sent).
double resentFraction(const PairResult& p) {
  if (p.sentBytes < JudgeThresholds::kLossMinSentBytes) return std::nan("");
  return static_cast<double>(p.retransBytes) / static_cast<double>(p.sentBytes);
}

std::string resentText(const PairResult& p) {
  return fmt::format("{:.1f}% of {:.1f} MB sent again", 100 * resentFraction(p), static_cast<double>(p.sentBytes) / 1e6);
}

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

// What the link stage leaves for confirmation.
struct LinkFindings {
  LinkPairs pairs;
  std::vector<HostSuspect> hostSuspects;
  std::vector<LinkSuspect> linkSuspects;
  std::unordered_set<int> candidates;  // units that are not healthy enough to confirm others
};

// "fleet2 (rank 2): 0.40 GB/s, fleet3 (rank 3): timed out": what u's pairs measured, by peer.
std::string peerValues(const Fleet& fleet, int u, const std::vector<const Edge*>& es, bool latency = false) {
  std::vector<std::string> parts;
  for (const Edge* e : es) {
    int peerRank = fleet.unitOf[e->p->a] == u ? e->p->b : e->p->a;
    if (e->failed)
      parts.push_back(fmt::format("{}: {}", fleet.label(peerRank),
                                  e->p->error.empty() ? report::pairOutcomeText(e->p->outcome) : e->p->error));
    else if (latency && e->latBad)
      parts.push_back(fmt::format("{}: {:.0f} us", fleet.label(peerRank), e->p->latencyUs));
    else if (e->lossBad)
      parts.push_back(fmt::format("{}: {}, {}", fleet.label(peerRank), gbps(e->p->bandwidthGBps), resentText(*e->p)));
    else
      parts.push_back(fmt::format("{}: {}", fleet.label(peerRank), gbps(e->p->bandwidthGBps)));
  }
  return listOf(parts, 4);
}

// The evidence of the link stage's findings, as an operator reads it.
class LinkEvidence {
 public:
  LinkEvidence(const Fleet& fleet, const LinkPairs& pairs, const FleetJudgement& out)
      : fleet_(fleet), pairs_(pairs), out_(out) {}

  // A unit slow with fewer than two peers: the note that says why it is not named.
  std::string singlePeerNote(int u, std::size_t witnesses) const {
    bool onePeer = pairs_.adj[u].size() <= 1;
    return fmt::format(
        "{} is slow with {} of its tested peers, but a host is named only when it is bad with two "
        "different peers that are healthy elsewhere{}; re-run with more hosts (or --all-pairs) to tell "
        "whether the host or its peer is at fault",
        label(fleet_.units[u].leader), witnesses, onePeer ? " and it was tested with one peer only" : "");
  }

  Evidence slow(int u, const std::vector<int>& witnesses) const {
    std::vector<double> bws;
    std::vector<const Edge*> low;
    for (int i : pairs_.adj[u]) {
      const Edge& e = pairs_.edges[i];
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
    for (int v : witnesses) ev.peers.push_back(fleet_.units[v].leader);
    ev.text = fmt::format(
        "{} is slow with {} of its {} peers: its pairs' median is {}, {:.2f}x the fleet median {} "
        "({}), and those peers are normal with their other peers",
        label(fleet_.units[u].leader), witnesses.size(), n, gbps(med),
        med / std::max(out_.medianBandwidthGBps, 1e-12), gbps(out_.medianBandwidthGBps),
        peerValues(fleet_, u, low));
    return ev;
  }

  Evidence badPairs(int u, const std::vector<int>& witnesses) const {
    std::vector<const Edge*> bad;
    int failed = 0, lat = 0, lossy = 0;
    for (int i : pairs_.adj[u]) {
      const Edge& e = pairs_.edges[i];
      int v = e.ua == u ? e.ub : e.ua;
      if (!e.bad() || std::find(witnesses.begin(), witnesses.end(), v) == witnesses.end()) continue;
      bad.push_back(&e);
      failed += e.failed;
      lat += e.latBad && !e.failed && !e.bwBad && !e.lossBad;
      lossy += e.lossBad;
    }
    Evidence ev;
    ev.stage = "links";
    ev.fleetMedian = out_.medianBandwidthGBps;
    for (int v : witnesses) ev.peers.push_back(fleet_.units[v].leader);
    std::string who = label(fleet_.units[u].leader);
    // Lossy first when as many lossy as failed pairs: under loss the pairs that failed and the ones
    // TCP carried through with resends are the same fault.
    if (lossy > 0 && lossy >= failed && (failed + lossy) * 2 >= static_cast<int>(bad.size())) {
      // Failed or lossy: the pairs that passed show the loss that made the others fail.
      ev.kind = "link_lossy";
      ev.fleetMedian = pairs_.lossMed;
      for (const Edge* e : bad) ev.measured = std::max(ev.measured, e->lossBad ? resentFraction(*e->p) : 0.0);
      ev.text = fmt::format(
          "{} loses packets with {} peers that are normal with their other peers ({}; fleet median {:.1f}% sent "
          "again): look at its NIC's and switch port's error counters (ethtool -S, CRC errors) and its cable",
          who, bad.size(), peerValues(fleet_, u, bad), 100 * pairs_.lossMed);
    } else if (failed * 2 >= static_cast<int>(bad.size())) {
      ev.kind = "link_failed";
      ev.text = fmt::format("link tests of {} failed with {} peers that pass their other pairs ({})", who,
                            bad.size(), peerValues(fleet_, u, bad));
    } else if (lat * 2 > static_cast<int>(bad.size())) {
      ev.kind = "link_slow";
      ev.fleetMedian = out_.medianLatencyUs;
      ev.measured = bad.front()->p->latencyUs;
      ev.text = fmt::format(
          "{} answers slowly with {} peers that are normal with their other peers ({}; fleet median "
          "{:.0f} us)",
          who, bad.size(), peerValues(fleet_, u, bad, true), out_.medianLatencyUs);
    } else {
      ev.kind = "link_slow";
      ev.measured = bad.front()->p->bandwidthGBps;
      ev.text = fmt::format(
          "{} has bad pairs with {} peers that are normal with their other peers ({}; fleet median "
          "{})",
          who, bad.size(), peerValues(fleet_, u, bad), gbps(out_.medianBandwidthGBps));
    }
    return ev;
  }

  Evidence link(const Edge& e, const std::vector<std::vector<int>>& badPeers) const {
    Evidence ev;
    ev.stage = e.p->stage;
    ev.peers = {e.p->a, e.p->b};
    ev.fleetMedian = out_.medianBandwidthGBps;
    std::string pair = fmt::format("the pair {} - {}", label(e.p->a), label(e.p->b));
    const double minLink = fleet_.in.minLinkGBps;
    if (e.failed) {
      ev.kind = "link_failed";
      ev.text =
          fmt::format("{} failed ({})", pair, e.p->error.empty() ? report::pairOutcomeText(e.p->outcome) : e.p->error);
    } else if (e.lossBad) {
      ev.kind = "link_lossy";
      ev.measured = resentFraction(*e.p);
      ev.fleetMedian = pairs_.lossMed;
      ev.text = fmt::format("{} lost packets: {} by TCP (fleet median {:.1f}%), at {}", pair, resentText(*e.p),
                            100 * pairs_.lossMed, gbps(e.p->bandwidthGBps));
    } else if (e.bwBad) {
      ev.kind = "link_slow";
      ev.measured = e.p->bandwidthGBps;
      ev.text = fmt::format(
          "{} ran at {}, {:.2f}x the fleet median {}{}", pair, gbps(e.p->bandwidthGBps),
          e.p->bandwidthGBps / std::max(out_.medianBandwidthGBps, 1e-12), gbps(out_.medianBandwidthGBps),
          minLink > 0 && e.p->bandwidthGBps < minLink ? fmt::format(" (below --min-link-gbps {})", minLink)
                                                      : "");
    } else {
      ev.kind = "link_slow";
      ev.measured = e.p->latencyUs;
      ev.fleetMedian = out_.medianLatencyUs;
      ev.text = fmt::format("{} answered in {:.0f} us one way, fleet median {:.0f} us", pair, e.p->latencyUs,
                            out_.medianLatencyUs);
    }
    bool aOther = badPeers[e.ua].size() > 1, bOther = badPeers[e.ub].size() > 1;
    if (fleet_.twoUnitFleet())
      ev.text += "; with only two hosts a bad pair cannot be pinned on either end (add a third host)";
    else if (!aOther && !bOther)
      ev.text += "; both ends are normal with their other peers";
    else
      ev.text +=
          fmt::format("; {} also has other bad pairs, so this may be a host fault that could not be pinned",
                      aOther ? fleet_.units[e.ua].name : fleet_.units[e.ub].name);
    return ev;
  }

 private:
  const Fleet& fleet_;
  const LinkPairs& pairs_;
  const FleetJudgement& out_;

  std::string label(int r) const { return fleet_.label(r); }
};

// The link stage: the fleet's reference bandwidth and latency from its pairs, each pair's verdict,
// then slow hosts (by the median of their pairs), hosts with bad pairs to several peers that are
// healthy elsewhere, and the bad pairs neither explains (suspect links). Nothing is named here:
// confirmation re-tests every suspect first.
class LinkStage {
 public:
  LinkStage(const Fleet& fleet, const std::unordered_set<std::uint64_t>& reachFailedPairs,
            FleetJudgement& out)
      : fleet_(fleet),
        reachFailedPairs_(reachFailedPairs),
        out_(out),
        pairs_(found_.pairs),
        units_(fleet.units.size()) {}

  LinkFindings run() {
    collectPairs();
    referenceBandwidth();
    referenceLatency();
    referenceLoss();
    for (auto& e : pairs_.edges) classify(e);
    for (auto& e : pairs_.confirm) classify(e);
    // A fleet that is slow as a whole (most pairs below --min-link-gbps): every host below the floor
    // is named; there is no healthy peer to compare with.
    if (fleet_.in.minLinkGBps > 0 && floorMode()) return std::move(found_);
    suspect_.assign(units_, 0);
    findSlowHosts();
    findBadPairHosts();
    for (std::size_t u = 0; u < units_; ++u)
      if (cand_[u] || suspect_[u]) found_.candidates.insert(static_cast<int>(u));
    findSuspectLinks();
    return std::move(found_);
  }

 private:
  const Fleet& fleet_;
  const std::unordered_set<std::uint64_t>& reachFailedPairs_;
  FleetJudgement& out_;
  LinkFindings found_;
  LinkPairs& pairs_;
  const std::size_t units_;
  std::vector<char> cand_;  // units that pass 1 flags as slow
  double hostCut_ = -std::log(1 / T::kHostRatio);
  std::vector<char> suspect_;               // units named by the link stage
  std::vector<std::vector<int>> badPeers_;  // unit -> peers it has bad pairs with (no suspect among them)

  static bool ok(const Edge& e) { return e.p->outcome == PairOutcome::kOk && e.p->bandwidthGBps > 0; }
  LinkEvidence evidence() const { return LinkEvidence(fleet_, pairs_, out_); }

  bool usablePair(const PairResult& p, int& ua, int& ub) {
    if (!fleet_.validRank(p.a) || !fleet_.validRank(p.b)) {
      out_.notes.push_back(
          fmt::format("A link pair ({}, {}) was ignored: the world has {} ranks (a bug in the "
                      "pair's report)",
                      p.a, p.b, fleet_.world));
      return false;
    }
    ua = fleet_.unitOf[p.a];
    ub = fleet_.unitOf[p.b];
    if (ua == ub || p.outcome == PairOutcome::kSkipped) return false;
    return fleet_.linkEligible(ua) && fleet_.linkEligible(ub) && !reachFailedPairs_.count(pairKey(ua, ub));
  }

  void collectPairs() {
    pairs_.adj.assign(units_, {});
    for (const auto& p : fleet_.in.pairs) {
      if (p.stage == "confirm") pairs_.confirmRan = true;
      int ua, ub;
      if (!usablePair(p, ua, ub)) continue;
      Edge e{&p, ua, ub};
      if (p.stage == "confirm") {
        pairs_.confirm.push_back(e);
      } else {
        pairs_.adj[ua].push_back(static_cast<int>(pairs_.edges.size()));
        pairs_.adj[ub].push_back(static_cast<int>(pairs_.edges.size()));
        pairs_.edges.push_back(e);
      }
    }
  }

  // Pass 1: the reference is the median unit's median pair, which a few slow hosts (up to nearly
  // half of them) cannot drag down, unlike the median of pairs (a slow host spoils all its pairs).
  // Units whose score is below the host cut are candidates; the fleet's distribution comes from the
  // pairs between the others.
  void referenceBandwidth() {
    cand_.assign(units_, 0);
    std::vector<double> unitMed;
    std::vector<double> buf;
    for (std::size_t u = 0; u < units_; ++u) {
      buf.clear();
      for (int i : pairs_.adj[u])
        if (ok(pairs_.edges[i])) buf.push_back(std::log(pairs_.edges[i].p->bandwidthGBps));
      if (!buf.empty()) unitMed.push_back(median(buf));
    }
    if (unitMed.empty()) return;
    double lref = median(unitMed);
    std::vector<double> score(units_, std::nan(""));
    std::vector<double> scores;
    for (std::size_t u = 0; u < units_; ++u) {
      buf.clear();
      for (int i : pairs_.adj[u])
        if (ok(pairs_.edges[i])) buf.push_back(std::log(pairs_.edges[i].p->bandwidthGBps) - lref);
      if (!buf.empty()) scores.push_back(score[u] = median(buf));
    }
    double c = median(scores);
    double sH = std::max(1.4826 * mad(scores, c), T::kMinRelativeSpread);
    hostCut_ = -std::max(std::log(1 / T::kHostRatio), T::kHostMads * sH);
    for (std::size_t u = 0; u < units_; ++u)
      if (!std::isnan(score[u]) && score[u] < hostCut_) cand_[u] = 1;
    // The fleet's distribution: pairs between units that pass 1 did not flag.
    std::vector<double> logs, lin;
    for (const auto& e : pairs_.edges)
      if (ok(e) && !cand_[e.ua] && !cand_[e.ub]) {
        logs.push_back(std::log(e.p->bandwidthGBps));
        lin.push_back(e.p->bandwidthGBps);
      }
    if (logs.empty())
      for (const auto& e : pairs_.edges)
        if (ok(e)) logs.push_back(std::log(e.p->bandwidthGBps)), lin.push_back(e.p->bandwidthGBps);
    pairs_.lmed = median(logs);
    pairs_.ls = std::max(1.4826 * mad(logs, pairs_.lmed), T::kMinRelativeSpread);
    out_.medianBandwidthGBps = median(lin);
    out_.madBandwidthGBps = mad(lin, out_.medianBandwidthGBps);
  }

  void referenceLatency() {
    std::vector<double> lat;
    for (const auto& e : pairs_.edges)
      if (e.p->outcome == PairOutcome::kOk && e.p->latencyUs > 0) lat.push_back(e.p->latencyUs);
    if (lat.empty()) return;
    pairs_.latMed = median(lat);
    double m = mad(lat, pairs_.latMed);
    pairs_.latSigma = std::max(1.4826 * m, T::kMinRelativeSpread * pairs_.latMed);
    out_.medianLatencyUs = pairs_.latMed;
    out_.madLatencyUs = m;
  }

  void referenceLoss() {
    std::vector<double> f;
    // Passed pairs only: a failed one's counters are one end's, over a partial transfer.
    for (const auto& e : pairs_.edges)
      if (double x = resentFraction(*e.p); e.p->outcome == PairOutcome::kOk && !std::isnan(x)) f.push_back(x);
    if (f.empty()) return;
    pairs_.lossMed = median(f);
    int lossy = 0;
    for (double x : f) lossy += x >= T::kLossFraction;
    if (lossy * 2 > static_cast<int>(f.size()))
      out_.notes.push_back(fmt::format(
          "{} of {} pairs had at least {:.0f}% of their bytes sent again by TCP (fleet median {:.1f}%): packets are "
          "lost all over the fleet (a switch, a shared uplink, flow control off), not at one host; only a pair "
          "that resent {:.0f}x the fleet's median or more is judged on loss",
          lossy, f.size(), 100 * T::kLossFraction, 100 * pairs_.lossMed, T::kLossFleetRatio));
  }

  void classify(Edge& e) const {
    const PairResult& p = *e.p;
    const FleetInput& in = fleet_.in;
    const double lmed = pairs_.lmed, latMed = pairs_.latMed;
    e.failed = p.outcome == PairOutcome::kFailed || p.outcome == PairOutcome::kTimeout;
    if (e.failed) return;
    if (double x = resentFraction(p); !std::isnan(x))
      e.lossBad = x >= T::kLossFraction && x >= T::kLossFleetRatio * pairs_.lossMed;
    e.r = p.bandwidthGBps > 0 && !std::isnan(lmed) ? std::log(p.bandwidthGBps) - lmed : -kInf;
    double pairCut = -std::max(std::log(1 / T::kPairRatio), T::kPairMads * pairs_.ls);
    e.bwBad = (p.bandwidthGBps > 0 && !std::isnan(lmed) && e.r < pairCut) || p.bandwidthGBps <= 0 ||
              (in.minLinkGBps > 0 && p.bandwidthGBps < in.minLinkGBps);
    if (p.latencyUs > 0) {
      bool abs = in.slowLinkMs > 0 && p.latencyUs > in.slowLinkMs * 1000;
      bool rel = latMed > 0 && p.latencyUs > T::kLatencyRatio * latMed &&
                 p.latencyUs > latMed + T::kPairMads * pairs_.latSigma && p.latencyUs > T::kLatencyFloorUs;
      e.latBad = abs || rel;
    }
  }

  // Most pairs below --min-link-gbps: a note, and every unit whose median pair is below the floor.
  bool floorMode() {
    const double minLink = fleet_.in.minLinkGBps;
    int below = 0, okPairs = 0;
    for (const auto& e : pairs_.edges)
      if (e.p->outcome == PairOutcome::kOk) {
        ++okPairs;
        below += e.p->bandwidthGBps < minLink;
      }
    if (okPairs == 0 || below * 2 <= okPairs) return false;
    out_.notes.push_back(
        fmt::format("{} of {} pairs ran below --min-link-gbps {} (fleet median {}): the whole fleet "
                    "is slow (a switch, a shared uplink, the wrong network or the floor itself)",
                    below, okPairs, minLink, gbps(out_.medianBandwidthGBps)));
    std::vector<double> buf;
    for (std::size_t u = 0; u < units_; ++u) {
      buf.clear();
      for (int i : pairs_.adj[u])
        if (pairs_.edges[i].p->outcome == PairOutcome::kOk) buf.push_back(pairs_.edges[i].p->bandwidthGBps);
      if (buf.empty()) continue;
      double m = median(buf);
      if (m >= minLink) continue;
      Evidence ev{
          "link_slow",
          "links",
          fmt::format("{} runs its {} pairs at a median {}, below --min-link-gbps {}; most of the fleet is "
                      "below it too",
                      fleet_.label(fleet_.units[u].leader), buf.size(), gbps(m), minLink),
          {},
          m,
          out_.medianBandwidthGBps};
      found_.hostSuspects.push_back({static_cast<int>(u), ev, true});
      found_.candidates.insert(static_cast<int>(u));
    }
    return true;
  }

  // Slow hosts: the median of its pairs with unflagged peers below the host cut, and at least two
  // such peers with a low pair.
  void findSlowHosts() {
    std::vector<double> buf;
    for (std::size_t u = 0; u < units_; ++u) {
      if (!cand_[u]) continue;
      buf.clear();
      std::vector<int> witnesses;
      std::vector<double> all;
      for (int i : pairs_.adj[u]) {
        const Edge& e = pairs_.edges[i];
        int v = e.ua == static_cast<int>(u) ? e.ub : e.ua;
        if (!ok(e)) continue;
        all.push_back(e.r);
        if (cand_[v]) continue;
        buf.push_back(e.r);
        if (e.r < hostCut_) witnesses.push_back(v);
      }
      double s = buf.empty() ? median(all) : median(buf);
      if (!(s < hostCut_)) continue;
      if (witnesses.size() < 2) {
        out_.notes.push_back(evidence().singlePeerNote(static_cast<int>(u), witnesses.size()));
        continue;
      }
      suspect_[u] = 1;
      found_.hostSuspects.push_back(
          {static_cast<int>(u), evidence().slow(static_cast<int>(u), witnesses), true});
    }
  }

  // Hosts with bad pairs (failed, very slow, slow to answer) to at least two peers that are healthy
  // elsewhere; the units with most bad peers first, so that a faulty host explains its peers' pairs.
  void findBadPairHosts() {
    badPeers_.assign(units_, {});
    for (const auto& e : pairs_.edges) {
      if (!e.bad() || suspect_[e.ua] || suspect_[e.ub]) continue;
      badPeers_[e.ua].push_back(e.ub);
      badPeers_[e.ub].push_back(e.ua);
    }
    for (auto& b : badPeers_) {
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
    }
    std::vector<int> order;
    for (std::size_t u = 0; u < units_; ++u)
      if (badPeers_[u].size() >= 2) order.push_back(static_cast<int>(u));
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return badPeers_[x].size() != badPeers_[y].size() ? badPeers_[x].size() > badPeers_[y].size() : x < y;
    });
    for (int u : order) {
      std::vector<int> witnesses;
      for (int v : badPeers_[u]) {
        if (suspect_[v]) continue;
        bool clean = std::all_of(badPeers_[v].begin(), badPeers_[v].end(),
                                 [&](int w) { return w == u || suspect_[w]; });
        if (clean) witnesses.push_back(v);
      }
      if (witnesses.size() < 2) continue;
      suspect_[u] = 1;
      found_.hostSuspects.push_back({u, evidence().badPairs(u, witnesses), false});
    }
  }

  // The bad pairs no suspect host explains: suspect links.
  void findSuspectLinks() {
    std::unordered_set<std::uint64_t> seen;
    for (const auto& e : pairs_.edges) {
      if (!e.bad() || suspect_[e.ua] || suspect_[e.ub]) continue;
      if (!seen.insert(pairKey(e.ua, e.ub)).second) continue;
      LinkSuspect ls{e.ua, e.ub, e.p->a, e.p->b, evidence().link(e, badPeers_)};
      found_.candidates.insert(e.ua);
      found_.candidates.insert(e.ub);
      found_.linkSuspects.push_back(std::move(ls));
    }
  }
};

// ---------------------------------------------------------------- bisection
// A failing ring that contains no smaller failing ring names its ranks that passed in no other group,
// unless one of its ranks is known frozen or gone (heartbeats): that rank explains the ring's failure,
// and its neighbour, which passed in no other group only because the bisection stopped there, is not
// to blame.
void bisection(Fleet& fleet, FleetJudgement& out) {
  const auto& steps = fleet.in.bisect;
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
      if (!passed.count(r) && fleet.validRank(r)) culprits.push_back(r);
    std::vector<std::string> ranks;
    for (int r : failing[i]) ranks.push_back(std::to_string(r));
    std::string group = listOf(ranks, 8);
    if (culprits.empty()) {
      out.notes.push_back(
          fmt::format("The bisection's ring over ranks {} failed ({}), but each of them passed in "
                      "another group: no single rank is to blame (a transient fault?)",
                      group, failingSteps[i]->error));
      continue;
    }
    std::vector<std::string> dead;
    for (int r : failing[i])
      if (fleet.validRank(r) && fleet.units[fleet.unitOf[r]].dead) dead.push_back(fleet.label(r));
    if (!dead.empty()) {
      out.notes.push_back(fmt::format(
          "The bisection's ring over ranks {} failed ({}); {} stopped or exited (heartbeats), which explains it, "
          "so no other rank of that ring is named",
          group, failingSteps[i]->error.empty() ? "no error text" : failingSteps[i]->error, listOf(dead, 4)));
      continue;
    }
    for (int r : culprits) {
      Unit& u = fleet.units[fleet.unitOf[r]];
      if (u.dead || !named.insert(r).second) continue;
      u.evidence.push_back(
          {"bisect", "bisect",
           fmt::format("the bisection's ring collective over ranks {} failed ({}); {} is the one "
                       "rank of that group that passed in no other group",
                       group, failingSteps[i]->error.empty() ? "no error text" : failingSteps[i]->error,
                       fleet.label(r)),
           std::vector<int>(failing[i].begin(), failing[i].end()), 0, 0});
    }
  }
}

// ---------------------------------------------------------------- confirmation
// Before the confirmation round (no pairs of stage "confirm" yet): every link-stage suspect is a note
// and a re-test request (FleetJudgement::retest). After it: a suspect bad again with healthy peers is
// named with both pieces of evidence; one whose re-tests were normal is a note.
class Confirmation {
 public:
  Confirmation(Fleet& fleet, LinkFindings& found, FleetJudgement& out)
      : fleet_(fleet), found_(found), out_(out) {}

  void run() {
    for (std::size_t u = 0; u < fleet_.units.size(); ++u)
      if (fleet_.linkEligible(static_cast<int>(u)) && !found_.candidates.count(static_cast<int>(u)) &&
          fleet_.units[u].evidence.empty())
        healthy_.push_back(fleet_.units[u].leader);
    healthySet_.insert(healthy_.begin(), healthy_.end());
    for (const auto& e : found_.pairs.confirm) {
      confirmOf_[e.ua].push_back(&e);
      confirmOf_[e.ub].push_back(&e);
      confirmPair_[pairKey(e.ua, e.ub)] = &e;
    }
    std::vector<int> toRetest;
    for (auto& hs : found_.hostSuspects) confirmHost(hs, toRetest);
    // One call for all suspects: it spreads them over different healthy peers (few rounds).
    if (!toRetest.empty())
      out_.retest = confirmationPairs(toRetest, healthy_, ranPairs(), 0x5eedULL, T::kConfirmPeers);
    for (auto& ls : found_.linkSuspects) confirmLink(ls);
    hostsBehindLinks();
  }

 private:
  Fleet& fleet_;
  LinkFindings& found_;
  FleetJudgement& out_;
  std::vector<int> healthy_;  // leaders of units with no evidence and no part in a suspicion
  std::unordered_set<int> healthySet_;
  std::unordered_map<int, std::vector<const Edge*>> confirmOf_;  // unit -> its confirmation pairs
  std::unordered_map<std::uint64_t, const Edge*> confirmPair_;
  // The link suspects named because their re-test was bad again.
  struct BadAgain {
    int ua, ub, ra, rb;
    const Edge* again;
  };
  std::vector<BadAgain> badAgain_;

  std::vector<Pair> ranPairs() const {
    std::vector<Pair> ran;
    ran.reserve(fleet_.in.pairs.size());
    for (const auto& p : fleet_.in.pairs) ran.emplace_back(p.a, p.b);
    return ran;
  }

  void confirmHost(HostSuspect& hs, std::vector<int>& toRetest) {
    Unit& u = fleet_.units[hs.unit];
    if (healthy_.empty()) {
      hs.evidence.text += "; it could not be re-tested: no healthy peer is left to confirm it with";
      u.evidence.push_back(hs.evidence);
      return;
    }
    if (!found_.pairs.confirmRan) {
      toRetest.push_back(u.leader);
      out_.notes.push_back(
          fmt::format("{} (not named yet: it is re-tested with healthy peers first)", hs.evidence.text));
      return;
    }
    std::vector<const Edge*> mine;
    for (const Edge* e : confirmOf_[hs.unit])
      if (healthySet_.count(e->ua == hs.unit ? fleet_.units[e->ub].leader : fleet_.units[e->ua].leader))
        mine.push_back(e);
    if (mine.empty() && hs.evidence.kind != "link_failed") {
      // Slow, not failed, and never re-tested (the confirmation stage was cut short: a rank stopped
      // in it), as for a link: the 64-host bed, 2026-12-07, named an innocent host whose pings with
      // two peers took 1.8 ms against a median of 115 us while a build ran beside the fleet, when a
      // rank frozen in the confirmation stage left it without a re-test.
      out_.notes.push_back(hs.evidence.text + fmt::format("; it was not re-tested (no confirmation pair ran for it), "
                                                          "and {} that {} never re-tested {} not name a host",
                                                          hs.evidence.kind == "link_lossy" ? "resends" : "slowness",
                                                          hs.evidence.kind == "link_lossy" ? "were" : "was",
                                                          hs.evidence.kind == "link_lossy" ? "do" : "does"));
      return;
    }
    if (mine.empty()) {
      hs.evidence.text += "; it was not re-tested (no confirmation pair ran for it)";
      u.evidence.push_back(hs.evidence);
      return;
    }
    // Latency confirms only when every re-test that ran was slow: on a busy host a single ping can be
    // a millisecond late (its scheduling, not its network), and one such re-test of two named an
    // innocent host in the 64-host bed (Fleet.SeveralFaultsAtOnce, 2026-12-07: 1,097 us with one
    // peer, normal with the other). A host whose network adds latency is slow with every peer.
    bool anyFailed = false;
    int latCount = 0, lossCount = 0;
    double sum = 0;
    int okCount = 0;
    for (const Edge* e : mine) {
      anyFailed |= e->failed;
      if (!e->failed) sum += e->r, ++okCount, latCount += e->latBad, lossCount += e->lossBad;
    }
    const bool lateEveryTime = okCount > 0 && latCount == okCount;
    // Loss, as latency, only when every re-test that ran lost packets (or one failed outright).
    const bool lossyEveryTime = okCount > 0 && lossCount == okCount;
    double cut = -std::max(std::log(1 / T::kHostRatio),
                           T::kConfirmMads * found_.pairs.ls / std::sqrt(std::max(okCount, 1)));
    bool slow = okCount > 0 && sum / okCount < cut;
    if (fleet_.in.minLinkGBps > 0)
      for (const Edge* e : mine) slow |= !e->failed && e->p->bandwidthGBps < fleet_.in.minLinkGBps;
    std::string values = peerValues(fleet_, hs.unit, mine, latCount > 0 && !slow);
    if (!(anyFailed || slow || lateEveryTime || lossyEveryTime)) {
      out_.notes.push_back(
          lossCount > 0
              ? fmt::format("{}; but only {} of its {} re-tests lost packets ({}), so it is not named (a busy "
                            "host's retransmission timer can fire early; a lossy path loses on every pair)",
                            hs.evidence.text, lossCount, okCount, values)
          : latCount > 0
              ? fmt::format("{}; but only {} of its {} re-tests answered slowly ({}), so it is not named "
                            "(a host's scheduling delays a ping now and then; a slow network delays every one)",
                            hs.evidence.text, latCount, okCount, values)
              : fmt::format("{}; but its re-tests were normal ({}), so it is not named (a transient "
                            "slowdown, or load on the peers)",
                            hs.evidence.text, values));
      return;
    }
    u.evidence.push_back(hs.evidence);
    Evidence c{hs.evidence.kind,
               "confirm",
               fmt::format("re-tested with {}: bad again ({})",
                           mine.size() == 1 ? "one healthy peer" : "healthy peers", values),
               {},
               okCount > 0 ? std::exp(sum / okCount + found_.pairs.lmed) : 0,
               out_.medianBandwidthGBps};
    if (c.kind == "link_lossy") {  // as the link stage's evidence: the largest share sent again
      c.measured = 0;
      for (const Edge* e : mine) c.measured = std::max(c.measured, e->lossBad ? resentFraction(*e->p) : 0.0);
      c.fleetMedian = found_.pairs.lossMed;
    }
    for (const Edge* e : mine) c.peers.push_back(fleet_.unitOf[e->p->a] == hs.unit ? e->p->b : e->p->a);
    u.evidence.push_back(std::move(c));
  }

  void confirmLink(LinkSuspect& ls) {
    LinkVerdict lv{fleet_.units[ls.ua].name,
                   fleet_.units[ls.ub].name,
                   std::min(ls.ra, ls.rb),
                   std::max(ls.ra, ls.rb),
                   {}};
    if (!found_.pairs.confirmRan) {
      out_.retest.emplace_back(ls.ra, ls.rb);
      out_.notes.push_back(ls.evidence.text + " (not named yet: the pair is re-tested first)");
      return;
    }
    auto found = confirmPair_.find(pairKey(ls.ua, ls.ub));
    if (found == confirmPair_.end() && ls.evidence.kind != "link_failed") {
      // Slow, not failed, and never re-tested: it became a suspect only in this judgement (the fleet's
      // median moved when a rank stopped; 2026-12-07, a ping of 1,362 us against 10 x 136 us), or its
      // re-test did not run. One slow measurement does not name a link.
      out_.notes.push_back(ls.evidence.text + fmt::format("; it was not re-tested (no confirmation pair ran for it), "
                                                          "and {} not name a link",
                                                          ls.evidence.kind == "link_lossy" ? "one pair's resends do"
                                                                                           : "one slow measurement does"));
      return;
    }
    if (found == confirmPair_.end()) {
      ls.evidence.text += "; it was not re-tested (no confirmation pair ran for it)";
      lv.evidence.push_back(ls.evidence);
      out_.links.push_back(std::move(lv));
      return;
    }
    const Edge* again = found->second;
    if (!again->bad()) {
      out_.notes.push_back(fmt::format("{}; but its re-test was normal ({}), so it is not named",
                                       ls.evidence.text, gbps(again->p->bandwidthGBps)));
      return;
    }
    lv.evidence.push_back(ls.evidence);
    badAgain_.push_back({ls.ua, ls.ub, lv.rankA, lv.rankB, again});
    std::string v = again->failed    ? (again->p->error.empty() ? "failed" : again->p->error)
                    : again->lossBad ? resentText(*again->p)
                    : again->bwBad   ? gbps(again->p->bandwidthGBps)
                                     : fmt::format("{:.0f} us", again->p->latencyUs);
    const bool lossyKind = ls.evidence.kind == "link_lossy";
    lv.evidence.push_back({ls.evidence.kind,
                           "confirm",
                           fmt::format("re-tested: bad again ({})", v),
                           {ls.ra, ls.rb},
                           again->failed ? 0 : lossyKind ? resentFraction(*again->p) : again->p->bandwidthGBps,
                           lossyKind ? found_.pairs.lossMed : out_.medianBandwidthGBps});
    out_.links.push_back(std::move(lv));
  }

  // A host the link stage could not pin, because the peers it failed with had other bad pairs too (on
  // a busy fleet, a ping a millisecond late), whose links were bad again on re-test with two or more
  // peers whose other bad pairs were not: the host is named, not its links. The 64-host bed,
  // 2026-12-07 (Fleet.PacketLoss): a host with 20 % loss failed with four peers, three of which had
  // one late ping each with another neighbour; all four links were named, the host was not.
  void hostsBehindLinks() {
    std::unordered_map<int, std::vector<const BadAgain*>> byUnit;
    for (const auto& b : badAgain_) {
      byUnit[b.ua].push_back(&b);
      byUnit[b.ub].push_back(&b);
    }
    std::vector<int> order;
    for (const auto& [u, bs] : byUnit)
      if (bs.size() >= 2) order.push_back(u);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return byUnit[x].size() != byUnit[y].size() ? byUnit[x].size() > byUnit[y].size() : x < y;
    });
    std::unordered_set<int> named;
    for (int u : order) {
      if (!fleet_.units[u].evidence.empty()) continue;
      std::vector<int> witnesses;
      std::vector<const BadAgain*> explained;
      for (const BadAgain* b : byUnit[u]) {
        int v = b->ua == u ? b->ub : b->ua;
        if (named.count(v) || !fleet_.units[v].evidence.empty()) continue;
        const auto& theirs = byUnit[v];
        if (std::all_of(theirs.begin(), theirs.end(), [&](const BadAgain* o) {
              return o == b || named.count(o->ua == v ? o->ub : o->ua) > 0;
            })) {
          witnesses.push_back(v);
          explained.push_back(b);
        }
      }
      if (witnesses.size() < 2) continue;
      named.insert(u);
      nameHostBehind(u, witnesses, explained);
    }
  }

  void nameHostBehind(int u, const std::vector<int>& witnesses, const std::vector<const BadAgain*>& links) {
    Unit& unit = fleet_.units[u];
    Evidence first = LinkEvidence(fleet_, found_.pairs, out_).badPairs(u, witnesses);
    first.text += "; at first those peers looked bad with other hosts too, but those pairs were normal when re-tested "
                  "and these were bad again";
    std::vector<const Edge*> again;
    for (const BadAgain* b : links) again.push_back(b->again);
    Evidence c{first.kind, "confirm",
               fmt::format("re-tested with the same peers: bad again ({})", peerValues(fleet_, u, again)),
               first.peers, 0, first.fleetMedian};
    // As the link stage's evidence measured: the largest share sent again, the slowest bandwidth or the
    // latest answer (nothing for failed pairs).
    const bool latency = first.kind == "link_slow" && first.fleetMedian == out_.medianLatencyUs;
    const bool lossy = c.kind == "link_lossy";
    std::vector<double> values;
    for (const Edge* e : again)
      if (!e->failed) values.push_back(lossy ? resentFraction(*e->p) : latency ? e->p->latencyUs : e->p->bandwidthGBps);
    if (!values.empty())
      c.measured = lossy || latency ? *std::max_element(values.begin(), values.end())
                                    : *std::min_element(values.begin(), values.end());
    for (const BadAgain* b : links) {
      auto it = std::find_if(out_.links.begin(), out_.links.end(),
                             [&](const LinkVerdict& lv) { return lv.rankA == b->ra && lv.rankB == b->rb; });
      if (it == out_.links.end()) continue;
      out_.notes.push_back(fmt::format("{}; but {} is named for its own fault ({}), which explains this pair too, "
                                       "so the link is not named",
                                       it->evidence.front().text, fleet_.label(unit.leader), first.kind));
      out_.links.erase(it);
    }
    unit.evidence.push_back(std::move(first));
    unit.evidence.push_back(std::move(c));
  }
};

// ---------------------------------------------------------------- links a host explains
// A single failed connection of the reachability stage is named as a link when both ends reach
// everyone else; but when one end is then named for dropping traffic of its own (its link tests failed
// with several peers, or it froze or exited), that fault explains the connection too, and the link is
// a note. The 64-host bed, 2026-12-07: a host with 20 % packet loss was named, and so was the link
// from it to fleet50, whose hello had gone unanswered for 3 s.
void foldLinksIntoHosts(Fleet& fleet, FleetJudgement& out) {
  auto dropsTraffic = [&fleet](int rank) -> const Evidence* {
    if (!fleet.validRank(rank)) return nullptr;
    for (const auto& e : fleet.units[fleet.unitOf[rank]].evidence)
      if (e.kind == "link_failed" || e.kind == "link_lossy" || e.kind == "frozen" || e.kind == "exited") return &e;
    return nullptr;
  };
  std::vector<LinkVerdict> kept;
  for (auto& lv : out.links) {
    const bool reachOnly = std::all_of(lv.evidence.begin(), lv.evidence.end(),
                                       [](const Evidence& e) { return e.stage == "reachability"; });
    const Evidence* why = nullptr;
    int end = lv.rankA;
    if (reachOnly && (why = dropsTraffic(lv.rankA)) == nullptr) why = dropsTraffic(end = lv.rankB);
    if (why == nullptr) {
      kept.push_back(std::move(lv));
      continue;
    }
    for (const auto& e : lv.evidence)
      out.notes.push_back(fmt::format("{}; but {} is named for its own fault ({}), which explains this connection "
                                      "too, so the link is not named",
                                      e.text, fleet.label(end), why->kind));
  }
  out.links = std::move(kept);
}

// ---------------------------------------------------------------- verdicts
// A verdict per unit (suspect on any evidence but no_result, no_result on that alone), hosts in
// natural order, links by rank.
void assemble(Fleet& fleet, FleetJudgement& out) {
  for (auto& u : fleet.units) {
    HostVerdict hv;
    hv.host = u.name;
    hv.ranks = u.ranks;
    bool suspect = false, noResult = false;
    for (const auto& e : u.evidence) (e.kind == "no_result" ? noResult : suspect) = true;
    hv.state = suspect ? HostState::kSuspect : noResult ? HostState::kNoResult : HostState::kHealthy;
    hv.evidence = std::move(u.evidence);
    hv.ncclSocketIfname = u.ncclSocketIfname;
    out.hosts.push_back(std::move(hv));
  }
  std::sort(out.hosts.begin(), out.hosts.end(),
            [](const HostVerdict& a, const HostVerdict& b) { return naturalLess(a.host, b.host); });
  std::sort(out.links.begin(), out.links.end(), [](const LinkVerdict& a, const LinkVerdict& b) {
    return std::tie(a.rankA, a.rankB) < std::tie(b.rankA, b.rankB);
  });
}

}  // namespace

FleetJudgement judge(const FleetInput& in) {
  FleetJudgement out;
  Fleet fleet(in);
  settleRanks(fleet);
  fleet.countNet();
  const std::unordered_set<std::uint64_t> reachFailedPairs = Reachability(fleet, out).run();
  LinkFindings found = LinkStage(fleet, reachFailedPairs, out).run();
  bisection(fleet, out);
  detail::adviseInterfaces(fleet, out);
  detail::adviseMtus(fleet);
  detail::adviseCpus(fleet);
  Confirmation(fleet, found, out).run();
  foldLinksIntoHosts(fleet, out);
  assemble(fleet, out);
  return out;
}

}  // namespace ds::diag::fleet
