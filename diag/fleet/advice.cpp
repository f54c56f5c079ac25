// Localisation's advice (see advice.h): interface settings and values, MTUs, CPU limits.
#include "diag/fleet/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "diag/fleet/localise.h"
#include "diag/util.h"

namespace ds::diag::fleet::detail {

using report::FleetJudgement;
using report::FleetRank;
using T = JudgeThresholds;

namespace {

// ---------------------------------------------------------------- interfaces
bool virtualName(const std::string& n) {
  return n.rfind("docker", 0) == 0 || n.rfind("virbr", 0) == 0 || n.rfind("veth", 0) == 0 ||
         n.rfind("br-", 0) == 0;
}

// Whether a NCCL_SOCKET_IFNAME value selects `name` (REFERENCE.md §6: prefix match, '^' excludes,
// '=' exact).
bool selects(const IfnameSpec& spec, const std::string& name) {
  bool any = std::any_of(spec.entries.begin(), spec.entries.end(),
                         [&](const auto& e) { return ifnameEntryMatches(spec, e, name); });
  return spec.exclude ? !any : any;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> ifaceNames(const FleetRank& fr) {
  std::vector<std::string> all;
  for (const auto& i : fr.ifaces) all.push_back(i.name);
  return all;
}

std::string ifaceList(const FleetRank& fr) {
  std::vector<std::string> names;
  for (const auto& i : fr.ifaces)
    names.push_back(i.addr.empty() ? i.name : fmt::format("{} {}", i.name, i.addr));
  return names.empty() ? "none reported" : listOf(names, 6);
}

// An NCCL value that selects exactly `good` among `all` names.
std::string ncclValue(const std::vector<std::string>& good, const std::vector<std::string>& all) {
  std::string plain;
  for (const auto& g : good) plain += (plain.empty() ? "" : ",") + g;
  IfnameSpec spec = parseIfnameSpec(plain);
  for (const auto& n : all)
    if (selects(spec, n) != contains(good, n)) return "=" + plain;
  return plain;
}

// The interface settings of each rank, the value for each host and the value for the job.
class InterfaceAdvice {
 public:
  InterfaceAdvice(Fleet& fleet, FleetJudgement& out) : fleet_(fleet), out_(out) {}

  void run() {
    good_.resize(fleet_.units.size());
    for (std::size_t u = 0; u < fleet_.units.size(); ++u) good_[u] = computeGoodIfaces(static_cast<int>(u));
    bool needAdvice = !fleet_.badIfaces.empty();
    // NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME that select nothing usable on the rank's host.
    for (int r = 0; r < fleet_.world; ++r) {
      const FleetRank* fr = fleet_.rank(r);
      if (fr == nullptr || !fr->joined || fr->ifaces.empty()) continue;
      bool ncclBad = checkNcclIfname(r, *fr);
      bool glooBad = checkGlooIfname(r, *fr);
      if (ncclBad || glooBad) needAdvice = true;
    }
    out_.reachingIfaces = reachingEveryPeer();
    if (!needAdvice) return;
    std::set<std::string> goodNames;
    std::vector<int> hosts = adviseHosts(goodNames);
    adviseJob(hosts, goodNames);
  }

 private:
  Fleet& fleet_;
  FleetJudgement& out_;
  std::vector<std::vector<std::string>> good_;  // per unit: interfaces that reached every peer

  // The names good on every host that listed interfaces (what NCCL and Gloo will find by themselves
  // when nothing is set); empty for one host.
  std::vector<std::string> reachingEveryPeer() const {
    std::vector<std::string> common;
    bool first = true;
    for (std::size_t u = 0; u < fleet_.units.size(); ++u) {
      const FleetRank* fr = fleet_.rank(fleet_.units[u].leader);
      if (fr == nullptr || !fr->joined || fr->ifaces.empty()) continue;
      std::vector<std::string> good = good_[u];
      std::sort(good.begin(), good.end());
      if (first) {
        common = std::move(good);
        first = false;
        continue;
      }
      std::vector<std::string> both;
      std::set_intersection(common.begin(), common.end(), good.begin(), good.end(), std::back_inserter(both));
      common = std::move(both);
    }
    return common;
  }

  // The interfaces of a unit that reached every peer (on a subnet shared with another unit).
  std::vector<std::string> computeGoodIfaces(int u) const {
    std::vector<std::string> real, virt;
    const FleetRank* fr = fleet_.rank(fleet_.units[u].leader);
    if (fr == nullptr) return real;
    for (const auto& i : fr->ifaces) {
      if (fleet_.badIfaces.count({u, i.name})) continue;
      std::string s = subnetOf(i);
      if (!s.empty() && fleet_.subnetUnits(s) < 2) continue;
      (virtualName(i.name) ? virt : real).push_back(i.name);
    }
    return real.empty() ? virt : real;
  }

  void ifnameEvidence(int r, std::string text) {
    fleet_.units[fleet_.unitOf[r]].evidence.push_back({"ifname", "join", std::move(text), {}, 0, 0});
  }

  // Evidence when the rank's NCCL_SOCKET_IFNAME selects no interface that reaches every peer.
  bool checkNcclIfname(int r, const FleetRank& fr) {
    if (fr.ncclSocketIfname.empty()) return false;
    const auto& good = good_[fleet_.unitOf[r]];
    std::vector<std::string> all = ifaceNames(fr);
    IfnameSpec spec = parseIfnameSpec(fr.ncclSocketIfname);
    std::string problem;
    if (!spec.error.empty()) {
      problem = fmt::format("is malformed ({})", spec.error);
    } else if (!(fleet_.in.standalone && selects(spec, "lo"))) {
      std::vector<std::string> picked;
      for (const auto& n : all)
        if (selects(spec, n)) picked.push_back(n);
      if (picked.empty())
        problem = fmt::format("matches none of its interfaces ({})", ifaceList(fr));
      else if (std::none_of(picked.begin(), picked.end(), [&](const auto& n) { return contains(good, n); }))
        problem = fmt::format("selects only {}, which cannot reach every peer", listOf(picked));
    }
    if (problem.empty()) return false;
    std::string advice = good.empty() ? "unset it" : fmt::format("set it to {}", ncclValue(good, all));
    ifnameEvidence(r,
                   fmt::format("NCCL_SOCKET_IFNAME={} on {} {}: NCCL finds no working socket interface there "
                               "and the job fails at init; {}",
                               quoteValue(fr.ncclSocketIfname), fleet_.label(r), problem, advice));
    return true;
  }

  // Evidence when the rank's GLOO_SOCKET_IFNAME is not one interface that reaches every peer.
  bool checkGlooIfname(int r, const FleetRank& fr) {
    const std::string& g = fr.glooSocketIfname;
    if (g.empty()) return false;
    const auto& good = good_[fleet_.unitOf[r]];
    std::vector<std::string> all = ifaceNames(fr);
    std::string problem;
    if (g.find_first_of("^=,:") != std::string::npos)
      problem = "uses NCCL's list syntax, but Gloo takes one plain interface name";
    else if (!(fleet_.in.standalone && g == "lo") && !contains(all, g))
      problem = fmt::format("names no interface of that host ({})", ifaceList(fr));
    else if (!(fleet_.in.standalone && g == "lo") && !contains(good, g))
      problem = "names an interface that cannot reach every peer";
    if (problem.empty()) return false;
    ifnameEvidence(
        r, fmt::format("GLOO_SOCKET_IFNAME={} on {} {}: Gloo fails with \"Unable to find address for: "
                       "{}\"; {}",
                       quoteValue(g), fleet_.label(r), problem, quoteValue(g),
                       good.empty() ? std::string("unset it") : fmt::format("set it to {}", good.front())));
    return true;
  }

  // Per host: the interfaces that reached every peer, as the host's value where that is not all of
  // them. Returns the hosts that listed interfaces; `goodNames` gets every good name.
  std::vector<int> adviseHosts(std::set<std::string>& goodNames) {
    std::vector<int> hosts;
    for (std::size_t u = 0; u < fleet_.units.size(); ++u) {
      if (!fleet_.netOk(static_cast<int>(u))) continue;
      const FleetRank* fr = fleet_.rank(fleet_.units[u].leader);
      if (fr == nullptr || fr->ifaces.empty()) continue;
      hosts.push_back(static_cast<int>(u));
      const auto& good = good_[u];
      std::vector<std::string> all = ifaceNames(*fr);
      if (good.size() != all.size())
        fleet_.units[u].ncclSocketIfname = good.empty() ? "" : ncclValue(good, all);
      goodNames.insert(good.begin(), good.end());
    }
    return hosts;
  }

  // Job-wide: the names good on some host and bad on none, when they select a good interface and no
  // bad one on every host.
  void adviseJob(const std::vector<int>& hosts, const std::set<std::string>& goodNames) {
    std::set<std::string> badNames;
    for (auto& [u, name] : fleet_.badIfaces) badNames.insert(name);
    std::vector<std::string> list;
    for (const auto& n : goodNames)
      if (!badNames.count(n)) list.push_back(n);
    std::vector<std::string> everyName;
    for (int u : hosts)
      for (const auto& i : fleet_.rank(fleet_.units[u].leader)->ifaces) everyName.push_back(i.name);
    bool covers = !list.empty();
    std::string value;
    if (covers) {
      std::sort(everyName.begin(), everyName.end());
      everyName.erase(std::unique(everyName.begin(), everyName.end()), everyName.end());
      value = ncclValue(list, everyName);
      covers = selectsGoodOnEveryHost(parseIfnameSpec(value), hosts);
    }
    if (covers) {
      out_.jobSocketIfname = value;
      out_.notes.push_back(fmt::format(
          "NCCL_SOCKET_IFNAME={} selects an interface that reaches every peer on every host{}", value,
          list.size() == 1 ? fmt::format(" (GLOO_SOCKET_IFNAME={} too)", list.front())
                           : "; Gloo takes one name per host (see each host's value)"));
    } else {
      out_.notes.push_back(
          "No single NCCL_SOCKET_IFNAME selects a working interface on every host: set it per host "
          "as listed in the host verdicts");
    }
  }

  bool selectsGoodOnEveryHost(const IfnameSpec& spec, const std::vector<int>& hosts) const {
    bool covers = true;
    for (int u : hosts) {
      const auto& good = good_[u];
      bool ok = false, picksBad = false;
      for (const auto& i : fleet_.rank(fleet_.units[u].leader)->ifaces) {
        if (!selects(spec, i.name)) continue;
        (contains(good, i.name) ? ok : picksBad) = true;
      }
      if (!ok || picksBad) covers = false;
    }
    return covers;
  }
};

// ---------------------------------------------------------------- MTUs
struct MtuMember {
  int unit;
  std::string iface;
  int mtu;
};

std::string mtuCounts(const std::map<int, int>& count) {
  std::vector<std::string> parts;
  for (auto [mtu, c] : count) parts.push_back(fmt::format("{} on {}", mtu, c));
  return listOf(parts, 6);
}

// The MTUs of one subnet's members: evidence on each that differs from the majority (on every member
// when no MTU is the majority).
void adviseSubnetMtu(Fleet& fleet, const std::string& subnet, const std::vector<MtuMember>& members) {
  std::map<int, int> count;
  for (const auto& m : members) ++count[m.mtu];
  if (count.size() < 2) return;
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
    const Unit& unit = fleet.units[m.unit];
    std::string text =
        tie ? fmt::format(
                  "{} {} has MTU {} on {}, where the hosts disagree ({}) and none is the majority: large "
                  "packets between them are dropped or fragmented; set one MTU on every host of the subnet",
                  fleet.label(unit.leader), m.iface, m.mtu, subnet, mtuCounts(count))
            : fmt::format(
                  "{} {} has MTU {}, while {} other host(s) on {} use {}: large packets between them are "
                  "dropped or fragmented; set MTU {} on {}'s {}",
                  fleet.label(unit.leader), m.iface, m.mtu, bestCount, subnet, best, best, unit.name,
                  m.iface);
    fleet.units[m.unit].evidence.push_back(
        {"mtu", "join", text, {}, static_cast<double>(m.mtu), static_cast<double>(best)});
  }
}

// ---------------------------------------------------------------- CPUs
struct CpuShare {
  int unit;
  double perRank;
  int rank;
  int sharing;
};

// A host's CPU share per rank: its ranks' cgroup limit divided among the ranks that share the limit's
// file; a rank without a limit has its affinity width. The host's share is its tightest rank's.
std::optional<CpuShare> hostShare(const Fleet& fleet, int u) {
  std::map<std::string, int> sharing;
  for (int r : fleet.units[u].ranks) {
    const FleetRank* fr = fleet.rank(r);
    if (fr != nullptr && fr->joined && fr->cpuQuota > 0) ++sharing[fr->cpuQuotaFile];
  }
  std::optional<CpuShare> tightest;
  for (int r : fleet.units[u].ranks) {
    const FleetRank* fr = fleet.rank(r);
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
    if (!tightest || per < tightest->perRank) tightest = CpuShare{u, per, r, n};
  }
  return tightest;
}

}  // namespace

void adviseInterfaces(Fleet& fleet, FleetJudgement& out) { InterfaceAdvice(fleet, out).run(); }

void adviseMtus(Fleet& fleet) {
  if (fleet.in.standalone) return;
  std::map<std::string, std::vector<MtuMember>> bySubnet;
  for (std::size_t u = 0; u < fleet.units.size(); ++u) {
    if (!fleet.netOk(static_cast<int>(u))) continue;
    for (const auto& i : fleet.rank(fleet.units[u].leader)->ifaces) {
      std::string s = subnetOf(i);
      if (!s.empty() && i.mtu > 0) bySubnet[s].push_back({static_cast<int>(u), i.name, i.mtu});
    }
  }
  for (auto& [subnet, members] : bySubnet) adviseSubnetMtu(fleet, subnet, members);
}

void adviseCpus(Fleet& fleet) {
  if (fleet.in.standalone) return;  // one host: its system.cpu_quota check speaks for it
  std::vector<CpuShare> shares;
  for (std::size_t u = 0; u < fleet.units.size(); ++u)
    if (auto s = hostShare(fleet, static_cast<int>(u))) shares.push_back(*s);
  if (shares.size() < 3) return;  // too few hosts to tell one from the fleet
  std::vector<double> values;
  for (const auto& s : shares) values.push_back(s.perRank);
  std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
  const double median = values[values.size() / 2];
  for (const auto& s : shares) {
    const FleetRank* fr = fleet.rank(s.rank);
    if (fr->cpuQuota <= 0 || s.perRank >= T::kCpuPerRankFloor || s.perRank >= T::kCpuRatio * median) continue;
    fleet.units[s.unit].evidence.push_back(
        {"cpu",
         "join",
         fmt::format(
             "{} may use {:.3g} CPU ({}: cgroup CPU limit {:.3g} CPU shared by {} rank(s)), where the "
             "fleet's median host gives each rank {:.3g} CPU: the kernel stops its ranks for most of "
             "every period and every collective waits for them; raise or remove the limit",
             fleet.label(s.rank), s.perRank, fr->cpuQuotaFile, fr->cpuQuota, s.sharing, median),
         {},
         s.perRank,
         median});
  }
}

}  // namespace ds::diag::fleet::detail
