#include "diag/fleet/fleet_mode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "diag/fleet/fleet_iface.h"
#include "diag/fleet/localise.h"
#include "diag/fleet/plan.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/ranges.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"
#include "reports/diag/diag_text.h"

namespace ds::diag::fleet {
namespace {

using Json = nlohmann::json;
using store::toBytes;
using store::toString;
using std::chrono::milliseconds;

std::string envOr(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Member lists travel through the store as range lists ("0-3,5,7-9", engine/common/ranges.h); an
// empty list is "".
std::vector<int> rankList(const std::string& text) {
  return text.empty() ? std::vector<int>{} : parseRanges(text, "the fleet's rank list", "rank list", "rank");
}

std::string lastStageOf(const std::string& beat) {
  auto sp = beat.find(' ');
  return sp == std::string::npos ? "" : beat.substr(sp + 1);
}

}  // namespace

FleetRun::FleetRun(FleetOptions o) : o_(std::move(o)) {}

FleetRun::~FleetRun() {
  stop_ = true;
  if (hb_) hb_->stop();
  if (watch_.joinable()) watch_.join();
}

bool FleetRun::isMember(int r) const {
  std::lock_guard lock(mu_);
  if (members_.empty()) return r >= 0 && r < n_;
  return std::binary_search(members_.begin(), members_.end(), r);
}

std::string FleetRun::stage() const {
  std::lock_guard lock(mu_);
  return stage_;
}

void FleetRun::enterStage(const std::string& stage) {
  {
    std::lock_guard lock(mu_);
    stage_ = stage;
  }
  if (!o_.testFault.empty()) {
    auto at = o_.testFault.find('@');
    std::string what = o_.testFault.substr(0, at), where = at == std::string::npos ? "" : o_.testFault.substr(at + 1);
    if (where == stage) {
      // Let the heartbeat name the stage first, as a rank that froze inside it would have.
      try {
        if (hb_) hb_->beatNow(milliseconds(2000));
      } catch (const std::exception&) {
      }
      if (what == "freeze") ::raise(SIGSTOP);
      if (what == "exit") ::raise(SIGKILL);
      if (what == "fail") throw IoError(fmt::format("test fault at stage \"{}\" (DSDIAG_TEST_FAULT)", stage));
    }
  }
}

void FleetRun::join() {
  const auto t0 = Clock::now();
  InitOptions io;
  io.timeout = o_.timeout;
  io.verbose = false;
  joined_ = connectStore(io);
  rank_ = joined_.info.rank.value;
  n_ = joined_.info.worldSize.value;
  jobId_ = joined_.info.jobId.value;
  host_ = net::hostName();
  connectSeconds_ = secondsSince(t0);
  standalone_ = joined_.info.masterAddr.value.rfind("127.", 0) == 0;
  // Test hook "late@join": reach the fleet only after rank 0 has closed the join, as a rank whose
  // first connection attempts to the store were lost does.
  if (o_.testFault == "late@join") store().get(key("roles"), o_.timeout + std::chrono::seconds(30));
  // The host first, on the connection this rank already has: one that stops, or comes too late for
  // the join, is still named by its host (rank 0 reads it again as it judges). Before the probe
  // listener and the heartbeat's own connection, each one more chance to lose a SYN on a lossy path.
  store().set(key("host", rank_), toBytes(host_));
  server_ = std::make_unique<ProbeServer>(standalone_ ? "127.0.0.1" : "", jobId_,
                                          [this](int r) { return isMember(r); });
  hbStore_ = joined_.client();
  comm::HeartbeatOptions ho;
  ho.store = hbStore_;
  ho.key = key("hb", rank_);
  ho.interval = o_.heartbeatInterval;
  ho.setTimeout = std::max(o_.heartbeatInterval * 3, milliseconds(3000));
  ho.state = [this] {
    std::lock_guard lock(mu_);
    return stage_;
  };
  ho.onFirstError = [this](const std::exception& e) {
    log::warn("fleet: rank {}'s heartbeat cannot reach the store: {}", rank_, e.what());
  };
  ho.stopping = &stop_;
  hb_ = std::make_unique<comm::Heartbeat>(std::move(ho));
  hb_->beatNow(o_.timeout);  // the first beat before this rank counts as joined
  hb_->start();
  // Joined the store but not the fleet yet: a rank that stops here is one rank 0 never counts in.
  enterStage("join");
  publishSelf();
  store().add(key("joined"), 1);
  waitForMembers();
  joinSeconds_ = secondsSince(t0);
  if (rank_ == 0) {
    watchStore_ = joined_.client();
    watch_ = std::thread([this] { watchLoop(); });
  }
}

void FleetRun::publishError(const std::string& what) noexcept {
  if (!hbStore_) return;
  // Short, so that it passes a path that only small messages pass (an MTU black hole).
  constexpr std::size_t kMaxBytes = 480;
  std::string text = what.size() > kMaxBytes ? what.substr(0, kMaxBytes - 3) + "..." : what;
  try {
    hbStore_->set(key("error", rank_), toBytes(text), milliseconds(3000));
  } catch (const std::exception& e) {
    log::debug("fleet: rank {} could not leave its error in the store: {}", rank_, e.what());
  }
}

void FleetRun::publishSelf() {
  report::FleetRank me;
  me.rank = rank_;
  me.host = host_;
  me.localRank = joined_.info.localRank.value;
  me.probePort = server_->port();
  me.ifaces = candidateInterfaces(standalone_);
  me.ncclSocketIfname = envOr("NCCL_SOCKET_IFNAME");
  me.glooSocketIfname = envOr("GLOO_SOCKET_IFNAME");
  // The CPU budget, for localisation's fleet-relative CPU rule (a host under a tight cgroup limit).
  me.affinityCpus = static_cast<int>(sys::affinityCpus().size());
  const sys::CgroupCpu quota =
      sys::readCgroupCpu(envOr("DSDIAG_PROCFS", "/proc"), envOr("DSDIAG_SYSFS", "/sys"));
  me.cpuQuota = quota.quotaCpus;
  me.cpuQuotaFile = quota.file;
  me.joined = true;
  store().set(key("rank", rank_), toBytes(Json(me).dump()));
}

void FleetRun::waitForMembers() {
  if (rank_ == 0) {
    const auto t0 = Clock::now(), deadline = t0 + o_.timeout;
    std::int64_t count = 0, last = -1;
    auto lastChange = t0;
    for (;;) {
      count = store().add(key("joined"), 0);
      if (count != last) {
        last = count;
        lastChange = Clock::now();
      }
      if (count >= n_ || Clock::now() >= deadline) break;
      // Half the job is here and nobody came for a while: go on with those who did.
      if (count * 2 >= n_ && Clock::now() - lastChange >= o_.joinStall) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    std::vector<int> members;
    if (count >= n_) {
      for (int r = 0; r < n_; ++r) members.push_back(r);
    } else {
      for (int r = 0; r < n_; ++r) {
        if (r == 0 || store().check({key("rank", r)})) members.push_back(r);
      }
    }
    std::vector<std::string> keys;
    for (int r : members) keys.push_back(key("rank", r));
    auto values = store().multiGet(keys, milliseconds(30000));
    ranks_.assign(static_cast<std::size_t>(n_), report::FleetRank{});
    for (int r = 0; r < n_; ++r) ranks_[static_cast<std::size_t>(r)].rank = r;
    // A rank that reached the store but not the fleet left at least its host.
    for (int r = 0; r < n_; ++r) {
      if (std::binary_search(members.begin(), members.end(), r)) continue;
      const std::string hk = key("host", r);
      if (store().check({hk})) ranks_[static_cast<std::size_t>(r)].host = toString(store().get(hk));
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      try {
        ranks_[static_cast<std::size_t>(members[i])] = Json::parse(toString(values[i])).get<report::FleetRank>();
      } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("rank {} published a fleet record rank 0 cannot read ({}): mixed dsperf "
                                        "versions? Install the same dsperf on every node.",
                                        members[i], e.what()));
      }
    }
    {
      std::lock_guard lock(mu_);
      members_ = members;
    }
    seed_ = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
            (static_cast<std::uint64_t>(::getpid()) << 32);
    auto lead = leaders();
    Json leadersJson = Json::array();
    for (int r : lead) leadersJson.push_back(ranks_[static_cast<std::size_t>(r)]);
    const std::string leadersText = leadersJson.dump();
    store().set(key("leaders"), toBytes(leadersText));
    store().set(key("roles"), toBytes(Json{{"members", formatRanges(members)},
                                           {"leaders", formatRanges(lead)},
                                           {"leaders_bytes", leadersText.size()},
                                           {"seed", std::to_string(seed_)},
                                           {"standalone", standalone_}}
                                          .dump()));
    return;
  }
  // Rank 0 decides within its join timeout; allow for its start-up and the reads.
  Json roles;
  try {
    roles = Json::parse(toString(store().get(key("roles"), o_.timeout + std::chrono::seconds(30))));
  } catch (const TimeoutError&) {
    throw TimeoutError(fmt::format("Rank {} joined the store but rank 0 never published the fleet's member list "
                                   "within {} s: rank 0 is stuck or died (look at its output).",
                                   rank_, (o_.timeout.count() + 30000) / 1000));
  }
  std::vector<int> members = rankList(roles.at("members").get<std::string>());
  seed_ = std::stoull(roles.at("seed").get<std::string>());
  standalone_ = roles.value("standalone", standalone_);
  {
    std::lock_guard lock(mu_);
    members_ = members;
  }
  if (!std::binary_search(members.begin(), members.end(), rank_)) {
    // Short (publishError keeps 480 bytes): rank 0's verdict quotes it.
    const std::string& store = joined_.info.masterAddr.value;
    throw TimeoutError(
        connectSeconds_ >= 2.0
            ? fmt::format("Rank {} on {} joined after rank 0 had closed the join: its connection to the store "
                          "at {} took {:.1f} s, a slow or lossy path between this host and the store's host "
                          "(try `ping -c 100 {}` from here); rank 0 reports it as 'no result'.",
                          rank_, host_, store, connectSeconds_, store)
            : fmt::format("Rank {} on {} joined after rank 0 had closed the join (it reached the store in {:.1f} "
                          "s, so it started late); rank 0 reports it as 'no result'. Start every rank at once, "
                          "or give a larger --timeout.",
                          rank_, host_, connectSeconds_));
  }
  auto lead = rankList(roles.at("leaders").get<std::string>());
  ranks_.assign(static_cast<std::size_t>(n_), report::FleetRank{});
  for (int r = 0; r < n_; ++r) ranks_[static_cast<std::size_t>(r)].rank = r;
  if (std::binary_search(lead.begin(), lead.end(), rank_)) {
    Json all;
    constexpr auto kLeadersWait = milliseconds(30000);
    try {
      all = Json::parse(toString(store().get(key("leaders"), kLeadersWait)));
    } catch (const TimeoutError&) {
      // Rank 0 sets "leaders" before "roles", so it was there: the reply did not come through.
      // The small reads before it did (and the heartbeats still do): what an MTU black hole does.
      throw TimeoutError(fmt::format(
          "Rank {} on {} read the fleet's member list ({} bytes) from the store at {} but not the leaders' records "
          "({} bytes) within {} s, while its small messages got through: large packets between this host and "
          "the store's host are lost. Look for an MTU black hole on that path (compare the MTU of this host's "
          "NIC, its switch port and the store's host; `ping -M do -s 1472 {}` from here tests 1500).",
          rank_, host_, roles.dump().size(),
          joined_.info.masterAddr.value, roles.value("leaders_bytes", std::size_t{0}),
          kLeadersWait.count() / 1000, joined_.info.masterAddr.value));
    }
    for (const auto& j : all) {
      auto fr = j.get<report::FleetRank>();
      if (fr.rank >= 0 && fr.rank < n_) ranks_[static_cast<std::size_t>(fr.rank)] = fr;
    }
  }
}

std::vector<int> FleetRun::leaders() const {
  // Rank 0 knows every member's host; the others learn the leaders from "roles" (and only a leader
  // reads their records).
  std::vector<int> out;
  std::set<std::string> seen;
  std::lock_guard lock(mu_);
  for (int r : members_) {
    const auto& fr = ranks_[static_cast<std::size_t>(r)];
    if (standalone_) {
      out.push_back(r);
    } else if (!fr.host.empty() && seen.insert(fr.host).second) {
      out.push_back(r);
    }
  }
  return out;
}

void FleetRun::watchLoop() {
  std::vector<int> watched;
  {
    std::lock_guard lock(mu_);
    for (int r : members_) {
      if (r != 0) watched.push_back(r);
    }
  }
  std::vector<std::string> keys;
  for (int r : watched) keys.push_back(key("hb", r));
  while (!stop_) {
    auto t0 = Clock::now();
    if (!keys.empty()) {
      try {
        auto values = watchStore_->multiGet(keys, std::max(o_.heartbeatInterval * 3, milliseconds(3000)));
        const auto now = Clock::now();
        bool changed = false;
        std::lock_guard lock(mu_);
        for (std::size_t i = 0; i < watched.size(); ++i) {
          const int r = watched[i];
          std::string v = toString(values[i]);
          auto it = lastBeat_.find(r);
          if (it == lastBeat_.end() || it->second.first != v) {
            lastBeat_[r] = {v, now};
            continue;
          }
          const std::string stage = lastStageOf(v);
          if (stage == "done" || frozen_.count(r) || exited_.count(r)) continue;
          if (now - it->second.second >= o_.frozenAfter) {
            // Silent: a process that is gone refuses connections on its probe port (its host's
            // kernel answers); a stopped one still accepts them but never answers our hello.
            const auto& fr = ranks_[static_cast<std::size_t>(r)];
            ReachOptions ro;
            ro.jobId = jobId_;
            ro.myRank = rank_;
            ro.connectTimeout = milliseconds(1000);
            ro.retry = false;
            long long ignored = 0;
            std::string addr = standalone_ || fr.ifaces.empty() ? "127.0.0.1" : fr.ifaces.front().addr;
            auto probe = probeAll({{r, "", "", "", addr, fr.probePort}}, ro, ignored);
            const bool refused = !probe.failures.empty() &&
                                 probe.failures.front().error.find("refused") != std::string::npos;
            (refused ? exited_ : frozen_).insert(r);
            changed = true;
          }
        }
        if (changed) {
          std::vector<int> dead(frozen_.begin(), frozen_.end());
          dead.insert(dead.end(), exited_.begin(), exited_.end());
          std::sort(dead.begin(), dead.end());
          std::string text = formatRanges(dead);
          if (text != lastDeadPublished_) {
            watchStore_->set(key("dead"), toBytes(text));
            lastDeadPublished_ = text;
          }
        }
      } catch (const std::exception& e) {
        log::debug("fleet: watching the heartbeats: {}", e.what());
      }
    }
    auto left = o_.heartbeatInterval - std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
    for (auto slept = milliseconds(0); slept < left && !stop_; slept += milliseconds(50)) {
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
}

std::set<int> FleetRun::silentRanks() const {
  std::lock_guard lock(mu_);
  std::set<int> s = frozen_;
  s.insert(exited_.begin(), exited_.end());
  return s;
}

std::set<int> FleetRun::deadRanks() {
  if (rank_ == 0) return silentRanks();
  try {
    if (!store().check({key("dead")})) return {};
    auto v = rankList(toString(store().get(key("dead"), milliseconds(5000))));
    return {v.begin(), v.end()};
  } catch (const std::exception&) {
    return {};
  }
}

void FleetRun::post(const std::string& name, const std::string& value) {
  store().set(key(name, rank_), toBytes(value));
  store().add(key(name + "/count"), 1);
}

std::map<int, std::string> FleetRun::gather(const std::string& name, const std::vector<int>& expect,
                                            Clock::time_point deadline) {
  std::map<int, std::string> got;
  const auto want = static_cast<std::int64_t>(expect.size());
  std::vector<int> posted;
  for (;;) {
    std::int64_t count = store().add(key(name + "/count"), 0);
    auto silent = silentRanks();
    std::int64_t silentExpected = 0;
    for (int r : expect) silentExpected += silent.count(r);
    const bool timeUp = Clock::now() >= deadline;
    if (count >= want || count + silentExpected >= want || timeUp) {
      // Who posted: all of them, or a look at each key (O(n), once or twice per stage).
      posted.clear();
      std::vector<std::string> keys;
      for (int r : expect) keys.push_back(key(name, r));
      // The count also counts posts of ranks not expected here (rank 0's own): one look at all the
      // keys settles it, else one per key.
      if (count >= want && store().check(keys)) {
        posted = expect;
      } else {
        for (int r : expect) {
          if (store().check({key(name, r)})) posted.push_back(r);
        }
      }
      bool waitingOnLive = false;
      for (int r : expect) {
        if (!silent.count(r) && std::find(posted.begin(), posted.end(), r) == posted.end()) waitingOnLive = true;
      }
      if (!waitingOnLive || timeUp) break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  std::vector<std::string> keys;
  for (int r : posted) keys.push_back(key(name, r));
  if (!keys.empty()) {
    auto values = store().multiGet(keys, milliseconds(30000));
    for (std::size_t i = 0; i < posted.size(); ++i) got[posted[i]] = toString(values[i]);
  }
  return got;
}

std::vector<ReachTarget> FleetRun::reachTargets(const std::vector<int>& units) const {
  std::vector<ReachTarget> out;
  const auto& mine = ranks_[static_cast<std::size_t>(rank_)].ifaces;
  std::set<std::string> myAddrs;
  for (const auto& f : mine) myAddrs.insert(f.addr);
  std::vector<int> peers;
  auto at = std::find(units.begin(), units.end(), rank_);
  const std::size_t start = at == units.end() ? 0 : static_cast<std::size_t>(at - units.begin());
  if (static_cast<int>(units.size()) <= kFullMeshHosts) {
    for (std::size_t k = 1; k < units.size(); ++k) peers.push_back(units[(start + k) % units.size()]);
  } else {
    // At scale: the link plan's peers and a random sample (every host is still probed by many).
    std::set<int> pick;
    for (const auto& round : planLinkRounds(units, defaultRandomMatchings(static_cast<int>(units.size())), seed_)) {
      for (const auto& [a, b] : round) {
        if (a == rank_) pick.insert(b);
        if (b == rank_) pick.insert(a);
      }
    }
    SplitMix64 rng(seed_ ^ static_cast<std::uint64_t>(rank_));
    while (pick.size() < 64) pick.insert(units[rng.below(units.size())]);
    pick.erase(rank_);
    peers.assign(pick.begin(), pick.end());
  }
  for (int peer : peers) {
    const auto& theirs = ranks_[static_cast<std::size_t>(peer)];
    for (const auto& f : mine) {
      const report::FleetIface* target = nullptr;
      for (const auto& g : theirs.ifaces) {
        if (sameSubnet(f, g)) {
          target = &g;
          break;
        }
      }
      if (target == nullptr) {
        for (const auto& g : theirs.ifaces) {
          if (g.name == f.name) target = &g;
        }
      }
      // No interface of the peer on this network, or an address that is ours too (docker0's
      // 172.17.0.1 on every host): nothing to learn here.
      if (target == nullptr || (!standalone_ && myAddrs.count(target->addr))) continue;
      out.push_back({peer, f.name, standalone_ ? "" : f.addr, target->name, target->addr, theirs.probePort});
    }
  }
  return out;
}

std::vector<report::PairResult> FleetRun::runRounds(const std::vector<std::vector<std::pair<int, int>>>& rounds,
                                                    int firstTag, const std::string& stage) {
  std::vector<report::PairResult> out;
  LinkOptions lo;
  lo.jobId = jobId_;
  lo.myRank = rank_;
  lo.largeBytes = o_.largeBytes;
  lo.connectTimeout = o_.connectTimeout;
  // A rank whose pairs already went bad (failed, or slower than kBadPairTime) with several peers is a
  // suspect whatever its remaining pairs show, and each of them could cost a pair timeout: one lossy
  // host made the 64-host links stage 40-69 s. Its remaining pairs of the stage are short tests. Not
  // in the confirmation stage, whose pairs are the evidence.
  std::set<int> badPeers;
  const bool mayShorten = stage != "confirm";
  for (std::size_t k = 0; k < rounds.size(); ++k) {
    int peer = -1;
    for (const auto& [a, b] : rounds[k]) {
      if (a == rank_) peer = b;
      if (b == rank_) peer = a;
      if (peer >= 0) break;
    }
    if (peer < 0) continue;
    const int tag = firstTag + static_cast<int>(k);
    // A pair that cannot run is recorded (by its lower rank) as skipped, with the reason.
    std::string skipWhy;
    if (deadRanks().count(peer)) {
      skipWhy = fmt::format("skipped: rank {} had stopped responding (no heartbeat)", peer);
    } else if (unreachable_.count({std::min(rank_, peer), std::max(rank_, peer)})) {
      skipWhy = "skipped: the reachability probes found no TCP connection between these two (world.reachability)";
    }
    if (!skipWhy.empty()) {
      if (rank_ < peer) {
        report::PairResult r;
        r.a = rank_;
        r.b = peer;
        r.round = tag;
        r.stage = stage;
        r.outcome = report::PairOutcome::kSkipped;
        r.error = skipWhy;
        out.push_back(r);
      }
      continue;
    }
    // The peer may still be in an earlier pair, and that pair may have run out of time (a host behind
    // an MTU black hole, a lossy link): it comes late, but it comes. Given up on after one pair
    // timeout, it found its partner gone, the pair was recorded as a failure of an innocent link, and
    // lateness ran on through both ranks' next rounds. So the wait lasts while the peer's heartbeat
    // says it is alive, bounded by what k earlier rounds that each ran out of time could cost.
    const auto arriveBy = Clock::now() + o_.pairTimeout * (static_cast<int>(k) + 2);
    const PeerGone peerGone = [this, peer] { return deadRanks().count(peer) > 0; };
    const bool shortTest = mayShorten && static_cast<int>(badPeers.size()) >= kShortTestAfterBadPeers;
    if (rank_ < peer) {
      const auto& p = ranks_[static_cast<std::size_t>(peer)];
      std::string addr = standalone_ || p.ifaces.empty() ? "127.0.0.1" : p.ifaces.front().addr;
      // Prefer the peer's address on a network we share.
      for (const auto& f : ranks_[static_cast<std::size_t>(rank_)].ifaces) {
        for (const auto& g : p.ifaces) {
          if (!standalone_ && sameSubnet(f, g)) addr = g.addr;
        }
      }
      lo.shortTest = shortTest;
      double busy = 0;
      auto r = measurePair(peer, addr, p.probePort, tag, lo, arriveBy, o_.pairTimeout, messages_, peerGone, &busy);
      r.stage = stage;
      if (r.outcome == report::PairOutcome::kFailed || r.outcome == report::PairOutcome::kTimeout ||
          (r.outcome == report::PairOutcome::kOk && busy > std::chrono::duration<double>(kBadPairTime).count()))
        badPeers.insert(peer);
      out.push_back(r);
    } else {
      auto served = servePair(*server_, peer, tag, arriveBy, o_.pairTimeout, peerGone, shortTest);
      if (!served.error.empty())
        log::debug("fleet: rank {} serving rank {} in round {}: {}", rank_, peer, tag, served.error);
      if ((!served.error.empty() && !served.peerGone) ||
          served.busySeconds > std::chrono::duration<double>(kBadPairTime).count())
        badPeers.insert(peer);
    }
  }
  return out;
}

void FleetRun::runNetworkStages() {
  const auto lead = [&] {
    if (rank_ == 0) return leaders();
    // The others read the leaders from "roles".
    auto roles = Json::parse(toString(store().get(key("roles"), milliseconds(30000))));
    return rankList(roles.at("leaders").get<std::string>());
  }();
  const bool amLeader = std::binary_search(lead.begin(), lead.end(), rank_);
  auto stageDeadline = [&] { return Clock::now() + o_.timeout; };
  auto waitGo = [&](const std::string& name) -> Json {
    // Rank 0 may wait for every gather in turn (each bounded by --timeout) before it says go.
    return Json::parse(toString(store().get(key("go/" + name), o_.timeout * 2 + o_.pairTimeout * 4 + milliseconds(60000))));
  };
  auto stageT0 = Clock::now();
  auto lap = [&](const std::string& stage) {
    report_.stats.stageSeconds[stage] = secondsSince(stageT0);
    stageT0 = Clock::now();
  };

  // --- reachability ---
  enterStage("reachability");
  if (amLeader) {
    ReachOptions ro;
    ro.jobId = jobId_;
    ro.myRank = rank_;
    ro.connectTimeout = o_.connectTimeout;
    auto summary = probeAll(reachTargets(lead), ro, messages_);
    post("reach", Json(summary).dump());
  }
  std::vector<int> units;
  if (rank_ == 0) {
    for (const auto& [r, v] : gather("reach", lead, stageDeadline())) {
      report_.input.reach.push_back(Json::parse(v).get<report::ReachSummary>());
    }
    lap("reachability");
    auto silent = silentRanks();
    for (int r : lead) {
      if (!silent.count(r)) units.push_back(r);
    }
    // Pairs that found no TCP path in either direction: the link stage would only time out on them
    // again (a connect timeout per pair); they are reported as skipped, with the reason.
    std::set<std::pair<int, int>> noPath;
    for (const auto& r : report_.input.reach) {
      for (const auto& f : r.failures) noPath.insert({std::min(f.from, f.to), std::max(f.from, f.to)});
    }
    store().set(key("go/links"), toBytes(Json{{"units", units}, {"no_path", noPath}}.dump()));
    unreachable_ = noPath;
  }
  if (!amLeader) return;
  if (rank_ != 0) {
    auto go = waitGo("links");
    units = go.at("units").get<std::vector<int>>();
    unreachable_ = go.value("no_path", std::set<std::pair<int, int>>{});
  }

  // --- links ---
  enterStage("links");
  const int matchings = o_.randomMatchings >= 0 ? o_.randomMatchings : defaultRandomMatchings(static_cast<int>(units.size()));
  auto rounds = o_.allPairs ? planAllPairs(units) : planLinkRounds(units, matchings, seed_);
  std::vector<report::PairResult> mine;
  if (std::binary_search(units.begin(), units.end(), rank_)) mine = runRounds(rounds, 0, o_.allPairs ? "all_pairs" : "links");
  post("links", Json{{"pairs", mine}, {"messages", messages_}}.dump());
  const int linkRounds = static_cast<int>(rounds.size());
  if (rank_ == 0) {
    long long fleetMessages = 0;
    for (const auto& [r, v] : gather("links", units, stageDeadline() + o_.pairTimeout * linkRounds)) {
      auto j = Json::parse(v);
      for (auto& p : j.at("pairs").get<std::vector<report::PairResult>>()) report_.input.pairs.push_back(p);
      fleetMessages += j.value("messages", 0LL);
    }
    report_.stats.messages = fleetMessages;
    lap("links");
  }

  // --- confirm ---
  std::vector<std::vector<std::pair<int, int>>> confirm;
  if (rank_ == 0) {
    report_.input.worldSize = n_;
    report_.input.ranks = ranks_;
    auto silent = silentRanks();
    std::set<int> posted;
    for (const auto& r : report_.input.reach) posted.insert(r.rank);
    for (auto& fr : report_.input.ranks) {
      fr.frozen = silent.count(fr.rank) > 0;
      // Until the local reports are gathered (judgeFinal), a rank counts as reported when it is a
      // live member: its host's leader posted the network results judged here.
      fr.reported = fr.joined && !fr.frozen;
      std::lock_guard lock(mu_);
      auto it = lastBeat_.find(fr.rank);
      if (it != lastBeat_.end()) fr.lastStage = lastStageOf(it->second.first);
    }
    report_.input.connectTimeoutS = o_.connectTimeout.count() / 1000.0;
    report_.input.minLinkGBps = o_.minLinkGBps;
    report_.input.slowLinkMs = o_.slowLinkMs;
    report_.input.standalone = standalone_;
    auto first = judge(report_.input);
    std::vector<Pair> retest;
    for (const auto& [a, b] : first.retest) {
      if (!silent.count(a) && !silent.count(b)) retest.emplace_back(a, b);
    }
    confirm = packIntoRounds(retest);
    store().set(key("go/confirm"), toBytes(Json{{"rounds", confirm}}.dump()));
  } else {
    confirm = waitGo("confirm").at("rounds").get<std::vector<std::vector<std::pair<int, int>>>>();
  }
  enterStage("confirm");
  std::vector<report::PairResult> confirmed;
  if (!confirm.empty()) confirmed = runRounds(confirm, 1000, "confirm");
  post("confirm", Json(confirmed).dump());
  if (rank_ == 0) {
    if (!confirm.empty()) {
      for (const auto& [r, v] : gather("confirm", units, stageDeadline() + o_.pairTimeout * static_cast<int>(confirm.size()))) {
        for (auto& p : Json::parse(v).get<std::vector<report::PairResult>>()) report_.input.pairs.push_back(p);
      }
    }
    lap("confirm");
    report_.stats.rounds = linkRounds + static_cast<int>(confirm.size());
  }
  runBisect(units);
  if (rank_ == 0) lap("bisect");
  enterStage("report");
}

void FleetRun::runBisect(const std::vector<int>& units) {
  // A ring over the probe connections among all live units, then, when it fails, in each half of
  // the failing group, recursing into the halves that fail: hang-type faults that no single pair
  // showed. Each step is one key rank 0 writes; every unit reads every step (O(log n) steps).
  enterStage("bisect");
  auto addrOf = [this](int r) -> std::pair<std::string, int> {
    const auto& p = ranks_[static_cast<std::size_t>(r)];
    std::string addr = standalone_ || p.ifaces.empty() ? "127.0.0.1" : p.ifaces.front().addr;
    for (const auto& f : ranks_[static_cast<std::size_t>(rank_)].ifaces) {
      for (const auto& g : p.ifaces) {
        if (!standalone_ && sameSubnet(f, g)) addr = g.addr;
      }
    }
    return {addr, p.probePort};
  };
  std::vector<std::vector<int>> groups;
  if (rank_ == 0) {
    auto silent = silentRanks();
    std::vector<int> live;
    for (int r : units) {
      if (!silent.count(r)) live.push_back(r);
    }
    // Only a fleet that looks healthy so far: a known fault (a missing path, a failed pair, a
    // silent rank) would only fail the ring again, costing a deadline per step, and is named already.
    bool known = !unreachable_.empty() || !silent.empty();
    for (const auto& p : report_.input.pairs) known = known || p.outcome != report::PairOutcome::kOk;
    if (live.size() >= 3 && !known) groups.push_back(live);
  }
  for (int step = 0; step < 64; ++step) {
    if (rank_ == 0) {
      store().set(key("bisect", step), toBytes(Json{{"groups", groups}}.dump()));
    } else {
      try {
        auto j = Json::parse(toString(store().get(key("bisect", step),
                                                  o_.timeout * 2 + o_.pairTimeout * 2 + milliseconds(60000))));
        groups = j.at("groups").get<std::vector<std::vector<int>>>();
      } catch (const std::exception& e) {
        log::warn("fleet: rank {} gave up waiting for bisection step {}: {}", rank_, step, e.what());
        return;
      }
    }
    if (groups.empty()) return;
    const int tag = 2000 + step;
    for (const auto& g : groups) {
      if (!std::binary_search(g.begin(), g.end(), rank_)) continue;
      auto e = ringCollective(*server_, g, tag, addrOf, jobId_, rank_, Clock::now() + o_.pairTimeout, messages_);
      post(fmt::format("bisect{}", step), e);
    }
    if (rank_ != 0) continue;
    std::vector<int> expect;
    for (const auto& g : groups) expect.insert(expect.end(), g.begin(), g.end());
    std::sort(expect.begin(), expect.end());
    auto got = gather(fmt::format("bisect{}", step), expect, Clock::now() + o_.pairTimeout + o_.timeout);
    // A failing group that holds a rank the heartbeats now name frozen or gone is explained by that
    // rank; halving it would fail again in every half that holds it (a pair timeout per step). Its
    // live members are tried once more as one ring instead, for a second fault among them.
    const auto silentNow = silentRanks();
    std::vector<std::vector<int>> next;
    for (const auto& g : groups) {
      report::BisectStep b;
      b.ranks = g;
      std::vector<std::string> errors;
      for (int r : g) {
        auto it = got.find(r);
        if (it == got.end()) {
          errors.push_back(fmt::format("rank {} sent no result", r));
        } else if (!it->second.empty()) {
          errors.push_back(it->second);
        }
      }
      b.ok = errors.empty();
      b.error = fmt::format("{}", fmt::join(errors, "; "));
      report_.input.bisect.push_back(b);
      std::vector<int> alive;
      for (int r : g)
        if (!silentNow.count(r)) alive.push_back(r);
      if (!b.ok && alive.size() < g.size()) {
        if (alive.size() >= 3) next.push_back(std::move(alive));
      } else if (!b.ok && g.size() > 2) {
        std::size_t half = g.size() / 2;
        next.emplace_back(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(half));
        next.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(half), g.end());
      }
    }
    groups = next;
  }
}

void FleetRun::judgeFinal(const std::vector<int>& missing) {
  auto silent = silentRanks();
  std::set<int> members(members_.begin(), members_.end());
  std::set<int> gone(missing.begin(), missing.end());
  // The reasons the ranks that stopped or never reported left (publishError): a check and a get per such rank.
  std::map<int, std::string> errors;
  for (int r = 0; r < n_; ++r) {
    if (r == rank_ || !(silent.count(r) || gone.count(r) || !members.count(r))) continue;
    const std::string k = key("error", r);
    try {
      if (store().check({k}, milliseconds(3000))) errors[r] = toString(store().get(k, milliseconds(3000)));
    } catch (const std::exception& e) {
      log::debug("fleet: reading rank {}'s error: {}", r, e.what());
    }
  }
  // The hosts of the ranks that reached the store only after the join closed (a lossy path to it).
  for (auto& fr : report_.input.ranks) {
    if (members.count(fr.rank) || !fr.host.empty()) continue;
    const std::string k = key("host", fr.rank);
    try {
      if (store().check({k}, milliseconds(3000))) fr.host = toString(store().get(k, milliseconds(3000)));
    } catch (const std::exception& e) {
      log::debug("fleet: reading rank {}'s host: {}", fr.rank, e.what());
    }
  }
  for (auto& fr : report_.input.ranks) {
    if (auto e = errors.find(fr.rank); e != errors.end()) fr.lastError = e->second;
    fr.joined = members.count(fr.rank) > 0;
    fr.frozen = silent.count(fr.rank) > 0 && !exited_.count(fr.rank);
    fr.exited = exited_.count(fr.rank) > 0;
    fr.reported = fr.joined && !gone.count(fr.rank);
    std::lock_guard lock(mu_);
    auto it = lastBeat_.find(fr.rank);
    if (it != lastBeat_.end()) {
      fr.lastStage = lastStageOf(it->second.first);
      fr.silentForS = fr.frozen || fr.exited ? secondsSince(it->second.second) : 0;
    }
  }
  report_.judgement = judge(report_.input);
  report_.stats.pairs = static_cast<int>(report_.input.pairs.size());
}

void FleetRun::publishExit(int code) { store().set(key("exit"), toBytes(std::to_string(code))); }

FleetMemberOutcome FleetRun::waitForExit() {
  FleetMemberOutcome out;
  try {
    // Rank 0 gathers, judges and prints; it may wait for several stages, each bounded.
    out.exitCode = std::stoi(toString(store().get(key("exit"), o_.timeout * 4 + o_.pairTimeout * 40 + milliseconds(60000))));
  } catch (const std::exception& e) {
    out.exitCode = 2;
    out.error = fmt::format("rank 0 never published the fleet's verdict: {}", e.what());
  }
  return out;
}

void FleetRun::leave() {
  enterStage("done");
  stop_ = true;
  if (hb_) hb_->stop();
  if (watch_.joinable()) watch_.join();
  try {
    if (hb_) hb_->beatNow(milliseconds(2000));
    std::int64_t left = store().add(key("left"), 1, milliseconds(5000));
    if (rank_ == 0) {
      // Rank 0 hosts the store: give the others a bounded chance to read the verdict and leave.
      auto deadline = Clock::now() + std::chrono::seconds(10);
      const std::int64_t want = static_cast<std::int64_t>(members_.size() - silentRanks().size());
      while (left < want && Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(50));
        left = store().add(key("left"), 0, milliseconds(5000));
      }
    }
  } catch (const std::exception&) {
  }
}

}  // namespace ds::diag::fleet
