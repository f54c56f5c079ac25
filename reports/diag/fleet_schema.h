// Fleet mode's records (dsdiag --world on many hosts): who joined, what each TCP probe and each
// link pair measured, and the per-host verdicts that localisation derives from them. Measuring code
// (diag/fleet) fills these; reports/ turns them into JSON (the "fleet" object of a dsperf.diag
// report), text, HTML and exclude files. Plain data: no engine types, so reports/ can read them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::report {

inline constexpr const char* kFleetSchemaName = "dsperf.fleet";
inline constexpr const char* kFleetSchemaVersion = "1.3";  // 1.1: a rank's CPU budget; 1.2: reaching_ifaces;
                                                           // 1.3: a rank's last_error, a pair's
                                                           // sent_bytes and retrans_bytes

// The three states operators use (Azure HPC health checks, superbench): a host with no finding, a
// host named with evidence, and a host that never delivered a result.
enum class HostState { kHealthy, kSuspect, kNoResult };
const char* hostStateName(HostState s);  // "healthy", "suspect", "no_result"
HostState parseHostState(const std::string& s);  // throws ConfigError on other text

// The stages a rank goes through, in order; a frozen rank is named with the last one it reached.
// "join", "local_checks", "reachability", "links", "confirm", "bisect", "report", "done".
inline constexpr const char* kFleetStages[] = {"join",    "local_checks", "reachability", "links",
                                               "confirm", "bisect",       "report",       "done"};

struct FleetIface {
  std::string name;  // "eth0"
  std::string addr;  // IPv4 (or IPv6) address as text
  int prefixLen = 0;
  int mtu = 0;
  bool operator==(const FleetIface&) const = default;
};

// One rank as it joined the fleet rendezvous (published by the rank itself).
struct FleetRank {
  int rank = 0;
  std::string host;  // hostname as the rank saw it
  int localRank = -1;
  int probePort = 0;                // its probe listener
  std::vector<FleetIface> ifaces;   // candidate interfaces: up, not loopback
  std::string ncclSocketIfname;     // NCCL_SOCKET_IFNAME in its environment ("" = unset)
  std::string glooSocketIfname;     // GLOO_SOCKET_IFNAME
  int affinityCpus = 0;             // CPUs in its affinity mask (0 = unknown)
  double cpuQuota = -1;             // its cgroup's CPU limit in CPUs (-1 = none or unknown)
  std::string cpuQuotaFile;         // the file that sets it ("" = none)
  // What rank 0 learnt about it:
  bool joined = false;       // registered in the store within the join deadline
  bool frozen = false;       // its heartbeat stopped (SIGSTOP, a hang, a dead host)
  bool exited = false;       // its heartbeat says it died (or its connections were reset)
  bool reported = false;     // its results reached rank 0
  std::string lastStage;     // the last stage its heartbeat named
  double silentForS = 0;     // seconds without a heartbeat when rank 0 judged it
  std::string lastError;     // the error it published as it gave up ("" = none or never seen)
  bool operator==(const FleetRank&) const = default;
};

// One TCP connect probe that did not succeed (successes are only counted: O(n) data on rank 0).
struct ReachFailure {
  int from = 0, to = 0;        // ranks
  std::string fromIface;       // the interface the probe left from (source address bound)
  std::string toIface;         // the peer's interface it aimed at
  std::string toAddr;
  std::string error;           // "timed out after 2.0 s", "connection refused", "no route to host", ...
  bool timedOut = false;
  double ms = 0;               // how long the attempt took
  bool operator==(const ReachFailure&) const = default;
};

// Reachability as one rank saw it.
struct ReachSummary {
  int rank = 0;
  int probes = 0;  // connects attempted (peers x interfaces)
  int ok = 0;
  std::vector<ReachFailure> failures;
  bool operator==(const ReachSummary&) const = default;
};

enum class PairOutcome { kOk, kFailed, kTimeout, kSkipped };
const char* pairOutcomeName(PairOutcome o);  // "ok", "failed", "timeout", "skipped"
// The same in a sentence: "ok", "failed", "timed out", "skipped".
const char* pairOutcomeText(PairOutcome o);
PairOutcome parsePairOutcome(const std::string& s);

// One link test between two ranks (run over their own TCP connection, with its own deadline).
struct PairResult {
  int a = 0, b = 0;            // ranks, a < b; a measures and reports
  int round = 0;               // the round it ran in (0-based, across stages)
  std::string stage = "links"; // "links", "confirm" or "all_pairs"
  PairOutcome outcome = PairOutcome::kOk;
  double latencyUs = 0;        // half the median small-message round trip
  double bandwidthGBps = 0;    // large message, both directions, GB = 1e9 bytes
  std::string error;           // non-empty unless kOk
  // The kernel's TCP counters over the pair's connection, both ends summed where the peer answered
  // (else the measuring end's): data bytes sent and bytes sent again. 0 sent: not known.
  std::uint64_t sentBytes = 0, retransBytes = 0;
  bool operator==(const PairResult&) const = default;
};

// One group collective of the bisection (a ring over the probe connections), with its outcome.
struct BisectStep {
  std::vector<int> ranks;
  bool ok = true;
  std::string error;
  bool operator==(const BisectStep&) const = default;
};

// Everything localisation reads.
struct FleetInput {
  int worldSize = 0;
  std::vector<FleetRank> ranks;          // index = rank; ranks that never joined have joined=false
  std::vector<ReachSummary> reach;       // one per reporting rank
  std::vector<PairResult> pairs;         // every pair of every stage
  std::vector<BisectStep> bisect;
  double connectTimeoutS = 2;
  double minLinkGBps = 0;                // absolute floor (0: none): below it a pair is bad even if the whole fleet is
  double slowLinkMs = 0;                 // one-way latency above which a pair is bad (0: judged only relative)
  bool standalone = false;               // all ranks on one host: host verdicts are about ranks
  bool operator==(const FleetInput&) const = default;
};

// A host (or a link) named by localisation, with the evidence an operator can check.
struct Evidence {
  std::string kind;     // "unreachable", "reach_partial", "link_slow", "link_failed", "link_lossy", "frozen", "exited",
                        // "no_result", "bisect", "ifname", "mtu", "cpu"
  std::string stage;    // where it was seen
  std::string text;     // one sentence: "bandwidth with fleet2 (rank 2) 0.004 GB/s, fleet median 1.9 GB/s"
  std::vector<int> peers;   // the other ranks involved
  double measured = 0;      // the value that fired (GB/s, us, s, or for link_lossy the share of bytes
                            // sent again, 0-1), when one did
  double fleetMedian = 0;
  bool operator==(const Evidence&) const = default;
};

struct HostVerdict {
  std::string host;
  std::vector<int> ranks;
  HostState state = HostState::kHealthy;
  std::vector<Evidence> evidence;  // empty when healthy
  std::string ncclSocketIfname;    // the value recommended for this host ("" = leave unset)
  bool operator==(const HostVerdict&) const = default;
};

struct LinkVerdict {
  std::string hostA, hostB;
  int rankA = 0, rankB = 0;
  std::vector<Evidence> evidence;
  bool operator==(const LinkVerdict&) const = default;
};

struct FleetJudgement {
  std::vector<HostVerdict> hosts;   // every host, sorted by name
  std::vector<LinkVerdict> links;   // suspect links (both ends healthy elsewhere)
  // The fleet's own distribution of healthy pairs.
  double medianBandwidthGBps = 0, madBandwidthGBps = 0;
  double medianLatencyUs = 0, madLatencyUs = 0;
  // A single NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME for the whole job (comma list NCCL accepts),
  // or "" when none works for every host; then HostVerdict::ncclSocketIfname per host.
  std::string jobSocketIfname;
  // The interfaces that reached every peer from every host, judged whether or not advice was
  // needed (empty: one host, no interfaces reported, or none common to all). Schema 1.2.
  std::vector<std::string> reachingIfaces;
  std::vector<std::string> notes;   // anything else an operator should read
  // Ranks that localisation wants re-tested before it names them (stage "confirm"); pairs of
  // (suspect, healthy peer). Empty once confirmation ran.
  std::vector<std::pair<int, int>> retest;
  bool operator==(const FleetJudgement&) const = default;
};

// Timing and cost of the run, for the report and the benchmarks.
struct FleetStats {
  int rounds = 0;             // link rounds run (links + confirm + all_pairs)
  int pairs = 0;              // pairs run
  long long messages = 0;     // probe and link messages sent (connects counted as one)
  std::map<std::string, double> stageSeconds;  // stage -> wall seconds on rank 0
  bool operator==(const FleetStats&) const = default;
};

struct FleetReport {
  FleetInput input;
  FleetJudgement judgement;
  FleetStats stats;
  bool operator==(const FleetReport&) const = default;
};

// Each record also on its own: fleet mode's ranks exchange them through the store.
void to_json(nlohmann::json& j, const FleetIface& v);
void from_json(const nlohmann::json& j, FleetIface& v);
void to_json(nlohmann::json& j, const FleetRank& v);
void from_json(const nlohmann::json& j, FleetRank& v);
void to_json(nlohmann::json& j, const ReachFailure& v);
void from_json(const nlohmann::json& j, ReachFailure& v);
void to_json(nlohmann::json& j, const ReachSummary& v);
void from_json(const nlohmann::json& j, ReachSummary& v);
void to_json(nlohmann::json& j, const PairResult& v);
void from_json(const nlohmann::json& j, PairResult& v);
void to_json(nlohmann::json& j, const BisectStep& v);
void from_json(const nlohmann::json& j, BisectStep& v);

void to_json(nlohmann::json& j, const FleetReport& r);
// Checks "schema"/"schema_version"; throws ConfigError naming `origin` on a mismatch or bad field.
FleetReport fleetFromJson(const nlohmann::json& j, const std::string& origin);

// Exit code of a fleet run (dsdiag's codes): 0 every host healthy, 2 a suspect host or link or a
// host with no result, 3 fleet mode could not run at all (decided by the caller).
int fleetExitCode(const FleetJudgement& j);

}  // namespace ds::report
