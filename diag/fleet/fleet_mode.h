// Fleet mode: the stages of dsdiag --world that find the bad host of a fleet (docs/dev/fleet-mode.md).
//
// Every rank joins the job's store only (no process group), publishes itself and heartbeats. Host
// leaders probe each other's TCP reachability and test their links in rounds of disjoint pairs, each
// pair with its own deadline; rank 0 coordinates through the store, watches the heartbeats (a rank
// silent for a few seconds is frozen, and its pairs are skipped), gathers what the others measured,
// re-tests suspects and judges (diag/fleet/localise). Nothing about one bad rank stops the others
// from reporting. Rank 0's work and the store's traffic grow O(n) in ranks (plus the full-mesh
// reachability of host leaders up to kFullMeshHosts hosts).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "diag/fleet/fleet_defaults.h"
#include "diag/fleet/probe.h"
#include "engine/comm/heartbeat.h"
#include "engine/init.h"
#include "reports/diag/fleet_schema.h"

namespace ds::diag::fleet {

// Up to this many hosts every leader probes every other; beyond it, its link-plan peers and a
// random sample (the member list would otherwise be O(n^2) bytes of store traffic).
inline constexpr int kFullMeshHosts = 1024;

struct FleetOptions {
  std::chrono::milliseconds timeout{30000};         // the join, and each gather on rank 0
  std::chrono::milliseconds connectTimeout{2000};   // each reachability connect
  std::chrono::milliseconds pairTimeout{kDefaultPairTimeout};  // each link pair
  std::size_t largeBytes = 4u << 20;
  bool allPairs = false;
  int randomMatchings = -1;  // -1: ceil(log2 hosts)
  double minLinkGBps = 0;
  double slowLinkMs = 10;
  std::chrono::milliseconds heartbeatInterval{1000};
  std::chrono::milliseconds frozenAfter{5000};
  // Ranks that stop joining for this long (once half have joined) are left behind as no_result;
  // the join still ends at `timeout` at the latest.
  std::chrono::milliseconds joinStall{15000};
  // DSDIAG_TEST_FAULT: "freeze@<stage>" (SIGSTOP), "exit@<stage>" (SIGKILL) or "fail@<stage>" (an
  // error) on entering that stage, or "late@join" (connect, then wait until rank 0 has closed the
  // join), for the test beds. Empty in production.
  std::string testFault;
};

// What a rank that is not rank 0 ends with.
struct FleetMemberOutcome {
  int exitCode = 0;
  std::string error;  // why it could not finish (rank 0 vanished, ...)
};

class FleetRun {
 public:
  explicit FleetRun(FleetOptions o);
  ~FleetRun();
  FleetRun(const FleetRun&) = delete;
  FleetRun& operator=(const FleetRun&) = delete;

  // Connects to the store (rank 0 hosts it), opens the probe listener, publishes this rank and
  // starts its heartbeat; rank 0 waits for the others (bounded) and publishes the member list.
  // Throws (ConfigError, IoError, TimeoutError) only when this rank cannot take part at all.
  void join();
  int rank() const { return rank_; }
  int worldSize() const { return n_; }
  const std::string& host() const { return host_; }
  double joinSeconds() const { return joinSeconds_; }
  store::Store& store() { return *joined_.store; }
  const StoreOnly& joined() const { return joined_; }
  // The ranks in the member list (those that joined in time), sorted.
  const std::vector<int>& members() const { return members_; }
  bool isMember(int r) const;

  // Names the stage in the heartbeat (and fires the test hook).
  void enterStage(const std::string& stage);
  // A rank that gives up leaves its reason in the store for rank 0's verdict ("last_error"): one
  // small message on the heartbeat's connection, bounded, never throws. Does nothing before join()
  // has reached the store.
  void publishError(const std::string& what) noexcept;

  // Every member posts `value` under `name`; rank 0 collects them. `gather` returns what the ranks
  // in `expect` posted by the deadline, not waiting for frozen ranks.
  void post(const std::string& name, const std::string& value);
  std::map<int, std::string> gather(const std::string& name, const std::vector<int>& expect,
                                    Clock::time_point deadline);

  // Reachability, links, confirmation and bisection. Every member calls it; leaders do the network
  // work, rank 0 coordinates. Returns on rank 0 with report() filled.
  void runNetworkStages();
  // Rank 0, after runNetworkStages and the gather of local reports: the final verdicts, with the
  // ranks whose local report never came (`missing`) as not reported.
  void judgeFinal(const std::vector<int>& missing);
  // Rank 0, after judgeFinal: everything measured and the verdicts.
  const report::FleetReport& report() const { return report_; }
  // Ranks rank 0 currently counts as frozen or exited.
  std::set<int> silentRanks() const;
  // The stage this rank is in (enterStage's last).
  std::string stage() const;
  // The same on any rank: rank 0's set, or what rank 0 last published (fleet/dead).
  std::set<int> deadRanks();

  // Rank 0 publishes the job's exit code; the others wait for it (bounded) and return it.
  void publishExit(int code);
  FleetMemberOutcome waitForExit();
  // Stops the heartbeat with a last "done" beat; rank 0 waits (bounded) for the others to leave.
  void leave();

 private:
  void watchLoop();
  void publishSelf();
  void waitForMembers();
  std::vector<int> leaders() const;
  std::vector<ReachTarget> reachTargets(const std::vector<int>& units) const;
  std::vector<report::PairResult> runRounds(const std::vector<std::vector<std::pair<int, int>>>& rounds,
                                            int firstTag, const std::string& stage);
  void runBisect(const std::vector<int>& units);
  // The fleet's store keys: "fleet/<k>", and "fleet/<kind>/<id>" for one rank's (or step's) record
  // (hb, host, rank, error, bisect), so every reader and writer of a kind spells it alike.
  std::string key(const std::string& k) const { return "fleet/" + k; }
  std::string key(std::string_view kind, int id) const {
    return "fleet/" + std::string(kind) + "/" + std::to_string(id);
  }

  FleetOptions o_;
  StoreOnly joined_;
  std::shared_ptr<store::Store> hbStore_, watchStore_;
  std::unique_ptr<ProbeServer> server_;
  int rank_ = 0, n_ = 1;
  std::string host_, jobId_;
  double joinSeconds_ = 0;
  double connectSeconds_ = 0;  // from the start of join() to a connection to the store
  bool standalone_ = false;
  std::vector<int> members_;
  std::vector<report::FleetRank> ranks_;  // index = rank; what each member published
  std::uint64_t seed_ = 0;
  report::FleetReport report_;
  long long messages_ = 0;
  std::string stage_ = "join";
  mutable std::mutex mu_;
  std::atomic<bool> stop_{false};
  // "fleet/hb/<rank>" = "<counter> <stage>" (comm/heartbeat.h), from join to leave.
  std::unique_ptr<comm::Heartbeat> hb_;
  std::thread watch_;
  // Rank 0's view of the heartbeats.
  std::map<int, std::pair<std::string, Clock::time_point>> lastBeat_;
  std::set<int> frozen_, exited_;
  std::string lastDeadPublished_;
  std::set<std::pair<int, int>> unreachable_;  // pairs the reachability stage found no path for
};

}  // namespace ds::diag::fleet
