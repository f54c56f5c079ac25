#include "reports/diag/fleet_schema.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "engine/common/error.h"
#include "reports/diag/fleet_json.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

using nlohmann::json;

const char* hostStateName(HostState s) {
  switch (s) {
    case HostState::kHealthy:
      return "healthy";
    case HostState::kSuspect:
      return "suspect";
    case HostState::kNoResult:
      return "no_result";
  }
  return "?";
}

HostState parseHostState(const std::string& s) {
  if (s == "healthy") return HostState::kHealthy;
  if (s == "suspect") return HostState::kSuspect;
  if (s == "no_result") return HostState::kNoResult;
  throw ConfigError(
      fmt::format("'{}' is not a fleet host state; expected healthy, suspect or no_result.", s));
}

const char* pairOutcomeName(PairOutcome o) {
  switch (o) {
    case PairOutcome::kOk:
      return "ok";
    case PairOutcome::kFailed:
      return "failed";
    case PairOutcome::kTimeout:
      return "timeout";
    case PairOutcome::kSkipped:
      return "skipped";
  }
  return "?";
}

const char* pairOutcomeText(PairOutcome o) { return o == PairOutcome::kTimeout ? "timed out" : pairOutcomeName(o); }

PairOutcome parsePairOutcome(const std::string& s) {
  if (s == "ok") return PairOutcome::kOk;
  if (s == "failed") return PairOutcome::kFailed;
  if (s == "timeout") return PairOutcome::kTimeout;
  if (s == "skipped") return PairOutcome::kSkipped;
  throw ConfigError(
      fmt::format("'{}' is not a fleet pair outcome; expected ok, failed, timeout or skipped.", s));
}

FleetCounts countFleet(const FleetJudgement& j) {
  FleetCounts c;
  c.hosts = static_cast<int>(j.hosts.size());
  for (const auto& h : j.hosts) {
    switch (h.state) {
      case HostState::kHealthy:
        ++c.healthy;
        break;
      case HostState::kSuspect:
        ++c.suspect;
        break;
      case HostState::kNoResult:
        ++c.noResult;
        break;
    }
  }
  c.suspectLinks = static_cast<int>(j.links.size());
  return c;
}

int fleetExitCode(const FleetJudgement& j) {
  FleetCounts c = countFleet(j);
  return c.suspect > 0 || c.noResult > 0 || c.suspectLinks > 0 ? 2 : 0;
}

namespace {

// A measurement that is not a finite number (not measured) is written as null and read back as NaN:
// nlohmann would write NaN as null anyway, and a reader could not read that back.
json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json toJson(const Evidence& e) {
  return json{{"kind", e.kind},
              {"stage", e.stage},
              {"text", e.text},
              {"peers", e.peers},
              {"measured", num(e.measured)},
              {"fleet_median", num(e.fleetMedian)}};
}

json evidenceJson(const std::vector<Evidence>& ev) {
  json a = json::array();
  for (const auto& e : ev) a.push_back(toJson(e));
  return a;
}

// ---- reading ----

// Where a fleet object is read from, for the errors.
struct FleetReader {
  const std::string& origin;
  std::string root;    // JSON pointer of the fleet object in its file ("" or "/fleet")
  int worldSize = -1;  // -1: one record on its own (from the store), the fleet's size unknown

  [[noreturn]] void bad(const std::string& at, const std::string& problem) const {
    throw ConfigError(fmt::format(
        "{}: at {}: {}. {}", origin, at.empty() ? "the top level" : at, problem,
        worldSize < 0 ? "It is not a fleet record this dsdiag writes: do all ranks run the same dsperf build?"
                      : "It is not a valid dsdiag fleet report: it was changed or damaged after it was "
                        "written; regenerate it with `dsdiag --world --json FILE`."));
  }

  const json& field(const json& j, const char* key) const { return j.at(key); }

  // A number or null (not measured: NaN); `nonNegative` refuses a negative value.
  double number(const json& j, const char* key, const std::string& at, bool nonNegative = true) const {
    const json& v = j.at(key);
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    double d = v.get<double>();
    if (nonNegative && d < 0) bad(at + "/" + key, fmt::format("expected a number >= 0, found {}", v.dump()));
    return d;
  }

  // A rank: a whole number from 0 to world_size - 1.
  int rank(const json& j, const char* key, const std::string& at) const {
    int r = readInt<int>(j.at(key));
    checkRank(r, at + "/" + key);
    return r;
  }
  void checkRank(int r, const std::string& at) const {
    if (worldSize < 0 && r < 0) bad(at, fmt::format("rank {} is not a rank (ranks count from 0)", r));
    if (worldSize >= 0 && (r < 0 || r >= worldSize)) {
      bad(at, fmt::format("rank {} is outside the fleet (world_size {}, ranks 0 to {})", r, worldSize,
                          worldSize - 1));
    }
  }
  std::vector<int> ranks(const json& j, const char* key, const std::string& at) const {
    std::vector<int> out;
    readTo(j.at(key), out);
    for (std::size_t i = 0; i < out.size(); ++i) checkRank(out[i], fmt::format("{}/{}/{}", at, key, i));
    return out;
  }

  const json& array(const json& j, const char* key) const {
    const json& a = j.at(key);
    if (!a.is_array()) {
      throw json::type_error::create(302, std::string("type must be array, but is ") + a.type_name(), &a);
    }
    return a;
  }

  FleetIface iface(const json& j, const std::string& = "") const {
    FleetIface i;
    readTo(j.at("name"), i.name);
    readTo(j.at("addr"), i.addr);
    readTo(j.at("prefix_len"), i.prefixLen);
    readTo(j.at("mtu"), i.mtu);
    return i;
  }

  FleetRank fleetRank(const json& j, const std::string& at) const {
    FleetRank r;
    r.rank = rank(j, "rank", at);
    readTo(j.at("host"), r.host);
    readTo(j.at("local_rank"), r.localRank);
    readTo(j.at("probe_port"), r.probePort);
    for (const auto& i : array(j, "ifaces")) r.ifaces.push_back(iface(i, at));
    readTo(j.at("nccl_socket_ifname"), r.ncclSocketIfname);
    readTo(j.at("gloo_socket_ifname"), r.glooSocketIfname);
    // 1.1: the CPU budget (absent in 1.0 files: unknown).
    if (j.contains("affinity_cpus")) readTo(j.at("affinity_cpus"), r.affinityCpus);
    if (j.contains("cpu_quota") && !j.at("cpu_quota").is_null()) {
      r.cpuQuota = number(j, "cpu_quota", at);
      if (r.cpuQuota <= 0) bad(at, fmt::format("cpu_quota {} is not a positive number of CPUs", r.cpuQuota));
    }
    if (j.contains("cpu_quota_file")) readTo(j.at("cpu_quota_file"), r.cpuQuotaFile);
    readTo(j.at("joined"), r.joined);
    readTo(j.at("frozen"), r.frozen);
    readTo(j.at("exited"), r.exited);
    readTo(j.at("reported"), r.reported);
    readTo(j.at("last_stage"), r.lastStage);
    r.silentForS = number(j, "silent_for_s", at);
    if (j.contains("last_error")) readTo(j.at("last_error"), r.lastError);  // 1.3
    return r;
  }

  ReachSummary reach(const json& j, const std::string& at) const {
    ReachSummary s;
    s.rank = rank(j, "rank", at);
    readTo(j.at("probes"), s.probes);
    readTo(j.at("ok"), s.ok);
    if (s.probes < 0 || s.ok < 0 || s.ok > s.probes) {
      bad(at, fmt::format("{} of {} probes succeeded, which cannot be", s.ok, s.probes));
    }
    const json& failures = array(j, "failures");
    for (std::size_t i = 0; i < failures.size(); ++i)
      s.failures.push_back(reachFailure(failures[i], fmt::format("{}/failures/{}", at, i)));
    return s;
  }

  ReachFailure reachFailure(const json& f, const std::string& at) const {
    ReachFailure r;
    r.from = rank(f, "from", at);
    r.to = rank(f, "to", at);
    readTo(f.at("from_iface"), r.fromIface);
    readTo(f.at("to_iface"), r.toIface);
    readTo(f.at("to_addr"), r.toAddr);
    readTo(f.at("error"), r.error);
    readTo(f.at("timed_out"), r.timedOut);
    r.ms = number(f, "ms", at);
    return r;
  }

  BisectStep bisectStep(const json& j, const std::string& at) const {
    BisectStep s;
    s.ranks = ranks(j, "ranks", at);
    readTo(j.at("ok"), s.ok);
    readTo(j.at("error"), s.error);
    return s;
  }

  PairResult pair(const json& j, const std::string& at) const {
    PairResult p;
    p.a = rank(j, "a", at);
    p.b = rank(j, "b", at);
    if (p.a == p.b) bad(at, fmt::format("a pair of rank {} with itself", p.a));
    readTo(j.at("round"), p.round);
    if (p.round < 0) bad(at + "/round", fmt::format("expected a round >= 0, found {}", p.round));
    readTo(j.at("stage"), p.stage);
    try {
      p.outcome = parsePairOutcome(j.at("outcome").get<std::string>());
    } catch (const ConfigError& e) {
      bad(at + "/outcome", e.what());
    }
    p.latencyUs = number(j, "latency_us", at);
    p.bandwidthGBps = number(j, "bandwidth_gbps", at);
    // 1.3; absent in older files (not measured).
    if (j.contains("sent_bytes")) readTo(j.at("sent_bytes"), p.sentBytes);
    if (j.contains("retrans_bytes")) readTo(j.at("retrans_bytes"), p.retransBytes);
    if (p.retransBytes > p.sentBytes)
      bad(at + "/retrans_bytes", fmt::format("{} bytes sent again of {} sent", p.retransBytes, p.sentBytes));
    readTo(j.at("error"), p.error);
    return p;
  }

  Evidence evidence(const json& j, const std::string& at) const {
    Evidence e;
    readTo(j.at("kind"), e.kind);
    readTo(j.at("stage"), e.stage);
    readTo(j.at("text"), e.text);
    e.peers = ranks(j, "peers", at);
    e.measured = number(j, "measured", at, false);
    e.fleetMedian = number(j, "fleet_median", at, false);
    return e;
  }

  std::vector<Evidence> evidenceList(const json& j, const std::string& at) const {
    std::vector<Evidence> out;
    const json& a = array(j, "evidence");
    for (std::size_t i = 0; i < a.size(); ++i)
      out.push_back(evidence(a[i], fmt::format("{}/evidence/{}", at, i)));
    return out;
  }

  HostVerdict host(const json& j, const std::string& at) const {
    HostVerdict h;
    readTo(j.at("host"), h.host);
    h.ranks = ranks(j, "ranks", at);
    try {
      h.state = parseHostState(j.at("state").get<std::string>());
    } catch (const ConfigError& e) {
      bad(at + "/state", e.what());
    }
    h.evidence = evidenceList(j, at);
    readTo(j.at("nccl_socket_ifname"), h.ncclSocketIfname);
    return h;
  }

  LinkVerdict link(const json& j, const std::string& at) const {
    LinkVerdict l;
    readTo(j.at("host_a"), l.hostA);
    readTo(j.at("host_b"), l.hostB);
    l.rankA = rank(j, "rank_a", at);
    l.rankB = rank(j, "rank_b", at);
    l.evidence = evidenceList(j, at);
    return l;
  }

  FleetReport report(const json& j) {
    if (!j.is_object()) bad(root, fmt::format("expected a fleet object, found {}", j.type_name()));
    if (textOr(j, "schema", "") != kFleetSchemaName) {
      bad(root + "/schema",
          fmt::format("the schema is '{}', expected '{}'", textOr(j, "schema", ""), kFleetSchemaName));
    }
    checkSchemaVersion(j, kFleetSchemaName, origin);
    FleetReport r;
    const json& in = j.at("input");
    const std::string inAt = root + "/input";
    readTo(in.at("world_size"), r.input.worldSize);
    if (r.input.worldSize < 0)
      bad(inAt + "/world_size", fmt::format("expected a number >= 0, found {}", r.input.worldSize));
    worldSize = r.input.worldSize;
    const json& ranks = array(in, "ranks");
    if (ranks.size() > static_cast<std::size_t>(worldSize)) {
      bad(inAt + "/ranks",
          fmt::format("{} ranks listed in a fleet of world_size {}", ranks.size(), worldSize));
    }
    std::set<int> seen;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const std::string at = fmt::format("{}/ranks/{}", inAt, i);
      r.input.ranks.push_back(fleetRank(ranks[i], at));
      if (!seen.insert(r.input.ranks.back().rank).second) {
        bad(at + "/rank", fmt::format("rank {} is listed twice", r.input.ranks.back().rank));
      }
    }
    const json& reach = array(in, "reach");
    for (std::size_t i = 0; i < reach.size(); ++i)
      r.input.reach.push_back(this->reach(reach[i], fmt::format("{}/reach/{}", inAt, i)));
    const json& pairs = array(in, "pairs");
    r.input.pairs.reserve(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i)
      r.input.pairs.push_back(pair(pairs[i], fmt::format("{}/pairs/{}", inAt, i)));
    const json& bisect = array(in, "bisect");
    for (std::size_t i = 0; i < bisect.size(); ++i)
      r.input.bisect.push_back(bisectStep(bisect[i], fmt::format("{}/bisect/{}", inAt, i)));
    r.input.connectTimeoutS = number(in, "connect_timeout_s", inAt);
    r.input.minLinkGBps = number(in, "min_link_gbps", inAt);
    r.input.slowLinkMs = number(in, "slow_link_ms", inAt);
    readTo(in.at("standalone"), r.input.standalone);

    const json& ju = j.at("judgement");
    const std::string juAt = root + "/judgement";
    const json& hosts = array(ju, "hosts");
    for (std::size_t i = 0; i < hosts.size(); ++i)
      r.judgement.hosts.push_back(host(hosts[i], fmt::format("{}/hosts/{}", juAt, i)));
    const json& links = array(ju, "links");
    for (std::size_t i = 0; i < links.size(); ++i)
      r.judgement.links.push_back(link(links[i], fmt::format("{}/links/{}", juAt, i)));
    r.judgement.medianBandwidthGBps = number(ju, "median_bandwidth_gbps", juAt);
    r.judgement.madBandwidthGBps = number(ju, "mad_bandwidth_gbps", juAt);
    r.judgement.medianLatencyUs = number(ju, "median_latency_us", juAt);
    r.judgement.madLatencyUs = number(ju, "mad_latency_us", juAt);
    readTo(ju.at("job_socket_ifname"), r.judgement.jobSocketIfname);
    if (ju.contains("reaching_ifaces")) readTo(ju.at("reaching_ifaces"), r.judgement.reachingIfaces);  // 1.2
    readTo(ju.at("notes"), r.judgement.notes);
    const json& retest = array(ju, "retest");
    for (std::size_t i = 0; i < retest.size(); ++i) {
      const std::string at = fmt::format("{}/retest/{}", juAt, i);
      std::vector<int> two;
      readTo(retest[i], two);
      if (two.size() != 2)
        bad(at, fmt::format("expected a pair of ranks [suspect, peer], found {}", retest[i].dump()));
      checkRank(two[0], at + "/0");
      checkRank(two[1], at + "/1");
      r.judgement.retest.emplace_back(two[0], two[1]);
    }

    const json& st = j.at("stats");
    const std::string stAt = root + "/stats";
    readTo(st.at("rounds"), r.stats.rounds);
    readTo(st.at("pairs"), r.stats.pairs);
    readTo(st.at("messages"), r.stats.messages);
    const json& secs = st.at("stage_seconds");
    if (!secs.is_object()) {
      throw json::type_error::create(302, std::string("type must be object, but is ") + secs.type_name(),
                                     &secs);
    }
    for (const auto& [stage, v] : secs.items())
      r.stats.stageSeconds[stage] = number(secs, stage.c_str(), stAt + "/stage_seconds");
    return r;
  }
};

}  // namespace

void to_json(json& j, const FleetIface& i) {
  j = json{{"name", i.name}, {"addr", i.addr}, {"prefix_len", i.prefixLen}, {"mtu", i.mtu}};
}

void to_json(json& j, const FleetRank& r) {
  j = json{{"rank", r.rank},
           {"host", r.host},
           {"local_rank", r.localRank},
           {"probe_port", r.probePort},
           {"ifaces", r.ifaces},
           {"nccl_socket_ifname", r.ncclSocketIfname},
           {"gloo_socket_ifname", r.glooSocketIfname},
           {"affinity_cpus", r.affinityCpus},
           {"cpu_quota", r.cpuQuota < 0 ? json() : json(num(r.cpuQuota))},
           {"cpu_quota_file", r.cpuQuotaFile},
           {"joined", r.joined},
           {"frozen", r.frozen},
           {"exited", r.exited},
           {"reported", r.reported},
           {"last_stage", r.lastStage},
           {"silent_for_s", num(r.silentForS)},
           {"last_error", r.lastError}};
}

void to_json(json& j, const ReachFailure& f) {
  j = json{{"from", f.from},      {"to", f.to},       {"from_iface", f.fromIface}, {"to_iface", f.toIface},
           {"to_addr", f.toAddr}, {"error", f.error}, {"timed_out", f.timedOut},   {"ms", num(f.ms)}};
}

void to_json(json& j, const ReachSummary& s) {
  j = json{{"rank", s.rank}, {"probes", s.probes}, {"ok", s.ok}, {"failures", s.failures}};
}

void to_json(json& j, const PairResult& p) {
  j = json{{"a", p.a},
           {"b", p.b},
           {"round", p.round},
           {"stage", p.stage},
           {"outcome", pairOutcomeName(p.outcome)},
           {"latency_us", num(p.latencyUs)},
           {"bandwidth_gbps", num(p.bandwidthGBps)},
           {"error", p.error}};
  if (p.sentBytes > 0) {
    j["sent_bytes"] = p.sentBytes;
    j["retrans_bytes"] = p.retransBytes;
  }
}

void to_json(json& j, const BisectStep& s) { j = json{{"ranks", s.ranks}, {"ok", s.ok}, {"error", s.error}}; }

namespace {

// One record on its own: the rank fields are checked to be >= 0 only.
template <class T, class Read>
void readRecord(const json& j, T& v, Read read) {
  static const std::string kOrigin = "a fleet record";
  FleetReader reader{kOrigin, ""};
  v = (reader.*read)(j, "");
}

}  // namespace

void from_json(const json& j, FleetIface& v) { readRecord(j, v, &FleetReader::iface); }
void from_json(const json& j, FleetRank& v) { readRecord(j, v, &FleetReader::fleetRank); }
void from_json(const json& j, ReachFailure& v) { readRecord(j, v, &FleetReader::reachFailure); }
void from_json(const json& j, ReachSummary& v) { readRecord(j, v, &FleetReader::reach); }
void from_json(const json& j, PairResult& v) { readRecord(j, v, &FleetReader::pair); }
void from_json(const json& j, BisectStep& v) { readRecord(j, v, &FleetReader::bisectStep); }

void to_json(json& j, const FleetReport& r) {
  const FleetInput& in = r.input;
  json bisect = json::array();
  for (const auto& s : in.bisect)
    bisect.push_back(json{{"ranks", s.ranks}, {"ok", s.ok}, {"error", s.error}});
  json input{{"world_size", in.worldSize},
             {"ranks", in.ranks},
             {"reach", in.reach},
             {"pairs", in.pairs},
             {"bisect", in.bisect},
             {"connect_timeout_s", num(in.connectTimeoutS)},
             {"min_link_gbps", num(in.minLinkGBps)},
             {"slow_link_ms", num(in.slowLinkMs)},
             {"standalone", in.standalone}};
  const FleetJudgement& ju = r.judgement;
  json hosts = json::array();
  for (const auto& h : ju.hosts) {
    hosts.push_back(json{{"host", h.host},
                         {"ranks", h.ranks},
                         {"state", hostStateName(h.state)},
                         {"evidence", evidenceJson(h.evidence)},
                         {"nccl_socket_ifname", h.ncclSocketIfname}});
  }
  json links = json::array();
  for (const auto& l : ju.links) {
    links.push_back(json{{"host_a", l.hostA},
                         {"host_b", l.hostB},
                         {"rank_a", l.rankA},
                         {"rank_b", l.rankB},
                         {"evidence", evidenceJson(l.evidence)}});
  }
  json retest = json::array();
  for (const auto& [a, b] : ju.retest) retest.push_back(json::array({a, b}));
  json judgement{{"hosts", std::move(hosts)},
                 {"links", std::move(links)},
                 {"median_bandwidth_gbps", num(ju.medianBandwidthGBps)},
                 {"mad_bandwidth_gbps", num(ju.madBandwidthGBps)},
                 {"median_latency_us", num(ju.medianLatencyUs)},
                 {"mad_latency_us", num(ju.madLatencyUs)},
                 {"job_socket_ifname", ju.jobSocketIfname},
                 {"reaching_ifaces", ju.reachingIfaces},
                 {"notes", ju.notes},
                 {"retest", std::move(retest)}};
  json seconds = json::object();
  for (const auto& [stage, s] : r.stats.stageSeconds) seconds[stage] = num(s);
  FleetCounts c = countFleet(ju);
  j = json{{"schema", kFleetSchemaName},
           {"schema_version", kFleetSchemaVersion},
           // Derived from the judgement for readers (jq, dashboards); not read back.
           {"summary",
            {{"hosts", c.hosts},
             {"healthy", c.healthy},
             {"suspect", c.suspect},
             {"no_result", c.noResult},
             {"suspect_links", c.suspectLinks},
             {"exit_code", fleetExitCode(ju)}}},
           {"input", std::move(input)},
           {"judgement", std::move(judgement)},
           {"stats",
            {{"rounds", r.stats.rounds},
             {"pairs", r.stats.pairs},
             {"messages", r.stats.messages},
             {"stage_seconds", std::move(seconds)}}}};
}

FleetReport fleetFromJsonAt(const json& j, const std::string& origin, const std::string& at) {
  FleetReader reader{origin, at};
  try {
    return reader.report(j);
  } catch (const json::exception& e) {
    // nlohmann's pointer (JSON_DIAGNOSTICS) starts at the top of the file; give jsonFieldError a
    // document of the same shape so that it can show the value it found.
    json doc = j;
    if (!at.empty()) {
      json wrapped;
      wrapped[json::json_pointer(at)] = j;
      doc = std::move(wrapped);
    }
    throw jsonFieldError(e, doc, origin, kFleetSchemaName);
  }
}

FleetReport fleetFromJson(const json& j, const std::string& origin) { return fleetFromJsonAt(j, origin, ""); }

}  // namespace ds::report
