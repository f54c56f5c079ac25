// Fleet mode's JSON (reports/diag/fleet_schema.h): the fixture and a report built here survive a
// write and a read unchanged, alone and inside a dsdiag report; every kind of damage is refused with a
// sentence naming the file and the field.
#include "reports/diag/fleet_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "reports/diag/diag_schema.h"
#include "reports/diag/fleet_json.h"
#include "reports/json_io.h"

using namespace ds::report;
using nlohmann::json;

namespace {

const std::string kFixture = std::string(DS_REPORTS_TEST_DATA) + "/fleet16.json";

json fixtureJson() { return readJson(kFixture); }

// What a file holds after a write: to_json, dumped and parsed again (parents set, as a read file has).
json throughText(const json& j) { return parseJsonText(dumpJson(j, 1), "written.json"); }

FleetReport builtReport() {
  FleetReport r;
  r.input.worldSize = 4;
  for (int i = 0; i < 4; ++i) {
    FleetRank k;
    k.rank = i;
    k.host = i == 3 ? "gpu-<b>&\"3\"" : "gpu-" + std::to_string(i);
    k.localRank = 0;
    k.probePort = 30000 + i;
    k.ifaces = {{"eth0", "10.0.0." + std::to_string(i + 1), 24, 1500}, {"ib0", "fe80::1", 64, 2044}};
    k.ncclSocketIfname = i == 1 ? "ib" : "";
    k.glooSocketIfname = i == 2 ? "eth0" : "";
    k.affinityCpus = 8 + i;
    k.cpuQuota = i == 1 ? 0.05 : -1;
    k.cpuQuotaFile = i == 1 ? "/sys/fs/cgroup/job/cpu.max" : "";
    k.joined = i != 3;
    k.frozen = i == 2;
    k.exited = i == 1;
    k.reported = i == 0;
    k.lastStage = kFleetStages[i];
    k.silentForS = i == 2 ? 6.5 : 0;
    k.lastError = i == 1 ? "Rank 1 read the fleet's member list but not the leaders' records" : "";
    r.input.ranks.push_back(k);
  }
  r.input.reach = {{0, 6, 5, {{0, 1, "eth0", "eth0", "10.0.0.2", "connection refused", false, 0.4}}},
                   {1, 6, 6, {}}};
  PairResult ok{0, 1, 0, "links", PairOutcome::kOk, 41.5, 1.93, "", 25166080, 1448};
  PairResult failed{0, 2, 1, "links", PairOutcome::kFailed, std::nan(""), std::nan(""), "reset by peer"};
  PairResult timeout{1, 2, 1, "confirm", PairOutcome::kTimeout, 0, 0, "no answer within 10 s"};
  PairResult skipped{2, 3, 2, "all_pairs", PairOutcome::kSkipped, 0, 0, "rank 2 is frozen"};
  r.input.pairs = {ok, failed, timeout, skipped};
  r.input.bisect = {{{0, 1}, true, ""}, {{2, 3}, false, "ring over 2,3 timed out after 5 s"}};
  r.input.connectTimeoutS = 1.5;
  r.input.minLinkGBps = 0.5;
  r.input.slowLinkMs = 2;
  r.input.standalone = true;
  Evidence frozen{"frozen", "links", "rank 2 sent no heartbeat for 6.5 s", {}, 6.5, std::nan("")};
  Evidence slow{"link_slow", "links", "bandwidth with gpu-0 0.01 GB/s", {0, 1}, 0.01, 1.93};
  r.judgement.hosts = {
      {"gpu-0", {0}, HostState::kHealthy, {}, "eth0"},
      {"gpu-1", {1}, HostState::kSuspect, {slow}, "eth0,ib"},
      {"gpu-2", {2}, HostState::kSuspect, {frozen}, ""},
      {"gpu-<b>&\"3\"", {3}, HostState::kNoResult, {{"no_result", "join", "never joined", {}, 0, 0}}, ""}};
  r.judgement.links = {{"gpu-0", "gpu-1", 0, 1, {slow}}};
  r.judgement.medianBandwidthGBps = 1.93;
  r.judgement.madBandwidthGBps = 0.04;
  r.judgement.medianLatencyUs = 41.5;
  r.judgement.madLatencyUs = 1.25;
  r.judgement.jobSocketIfname = "";
  r.judgement.notes = {"one note", "ünïcode note"};
  r.judgement.retest = {{1, 0}, {1, 3}};
  r.stats.rounds = 3;
  r.stats.pairs = 4;
  r.stats.messages = 1LL << 40;
  r.stats.stageSeconds = {{"join", 0.25}, {"links", 3.5}};
  return r;
}

// NaN != NaN: compares the measurements that are NaN by position, then the rest with NaN cleared.
void clearNaN(double& v) {
  if (std::isnan(v)) v = -12345;
}
FleetReport withoutNaN(FleetReport r) {
  for (auto& k : r.input.ranks) clearNaN(k.silentForS);
  for (auto& p : r.input.pairs) {
    clearNaN(p.latencyUs);
    clearNaN(p.bandwidthGBps);
  }
  for (auto& h : r.judgement.hosts) {
    for (auto& e : h.evidence) {
      clearNaN(e.measured);
      clearNaN(e.fleetMedian);
    }
  }
  for (auto& l : r.judgement.links) {
    for (auto& e : l.evidence) {
      clearNaN(e.measured);
      clearNaN(e.fleetMedian);
    }
  }
  return r;
}

// FleetInput has no operator== in the contract: field by field, then the rest whole.
void expectSame(const FleetReport& a0, const FleetReport& b0) {
  FleetReport a = withoutNaN(a0), b = withoutNaN(b0);
  EXPECT_EQ(a.input.worldSize, b.input.worldSize);
  EXPECT_EQ(a.input.ranks, b.input.ranks);
  EXPECT_EQ(a.input.reach, b.input.reach);
  EXPECT_EQ(a.input.pairs, b.input.pairs);
  EXPECT_EQ(a.input.bisect, b.input.bisect);
  EXPECT_EQ(a.input.connectTimeoutS, b.input.connectTimeoutS);
  EXPECT_EQ(a.input.minLinkGBps, b.input.minLinkGBps);
  EXPECT_EQ(a.input.slowLinkMs, b.input.slowLinkMs);
  EXPECT_EQ(a.input.standalone, b.input.standalone);
  EXPECT_EQ(a.judgement, b.judgement);
  EXPECT_EQ(a.stats, b.stats);
}

// The ConfigError message of reading `j` (fails the test when it reads).
std::string readError(const json& j, const std::string& origin = "fleet.json") {
  try {
    fleetFromJson(throughText(j), origin);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read without error: " << j.dump().substr(0, 300);
  return "";
}

}  // namespace

TEST(FleetSchema, NamesRoundTripAndOtherTextIsRefused) {
  for (auto s : {HostState::kHealthy, HostState::kSuspect, HostState::kNoResult})
    EXPECT_EQ(parseHostState(hostStateName(s)), s);
  for (auto o : {PairOutcome::kOk, PairOutcome::kFailed, PairOutcome::kTimeout, PairOutcome::kSkipped})
    EXPECT_EQ(parsePairOutcome(pairOutcomeName(o)), o);
  EXPECT_STREQ(hostStateName(HostState::kNoResult), "no_result");
  EXPECT_THROW(parseHostState("Healthy"), ds::ConfigError);
  EXPECT_THROW(parseHostState(""), ds::ConfigError);
  EXPECT_THROW(parsePairOutcome("timed_out"), ds::ConfigError);
}

TEST(FleetSchema, FixtureReadsAndWritesBackTheSameDocument) {
  json in = fixtureJson();
  FleetReport r = fleetFromJson(in, kFixture);
  EXPECT_EQ(r.input.worldSize, 16);
  ASSERT_EQ(r.judgement.hosts.size(), 16u);
  EXPECT_EQ(r.judgement.hosts[6].host, "node07");
  EXPECT_EQ(r.judgement.hosts[6].state, HostState::kSuspect);
  EXPECT_TRUE(r.input.ranks[13].frozen);
  ASSERT_EQ(r.judgement.links.size(), 1u);
  EXPECT_EQ(r.judgement.links[0].rankA, 2);
  EXPECT_TRUE(std::isnan(r.judgement.links[0].evidence[1].measured));  // null in the file
  json out = r;
  EXPECT_EQ(out["summary"], json({{"hosts", 16},
                                  {"healthy", 14},
                                  {"suspect", 2},
                                  {"no_result", 0},
                                  {"suspect_links", 1},
                                  {"exit_code", 2}}));
  out.erase("summary");
  // The fixture is a 1.1 file: it is written back as 1.3, whose additions are reaching_ifaces (1.2)
  // and each rank's last_error (1.3).
  ASSERT_EQ(in["schema_version"], "1.1");
  EXPECT_TRUE(out["judgement"]["reaching_ifaces"].empty());
  in["schema_version"] = "1.3";
  in["judgement"]["reaching_ifaces"] = json::array();
  for (auto& k : in["input"]["ranks"]) {
    ASSERT_FALSE(k.contains("last_error"));
    k["last_error"] = "";
  }
  EXPECT_EQ(out, in) << "keys or values changed on the way through";
  expectSame(fleetFromJson(throughText(r), "again.json"), r);
}

TEST(FleetSchema, EveryFieldOfABuiltReportRoundTrips) {
  FleetReport r = builtReport();
  json j = throughText(r);
  EXPECT_EQ(j["schema"], "dsperf.fleet");
  EXPECT_EQ(j["schema_version"], "1.3");
  EXPECT_EQ(j["input"]["ranks"][1]["last_error"], "Rank 1 read the fleet's member list but not the leaders' records");
  EXPECT_TRUE(j["input"]["pairs"][1]["bandwidth_gbps"].is_null()) << "NaN is written as null";
  EXPECT_EQ(j["input"]["pairs"][0]["sent_bytes"], 25166080);
  EXPECT_EQ(j["input"]["pairs"][0]["retrans_bytes"], 1448);
  EXPECT_FALSE(j["input"]["pairs"][1].contains("sent_bytes")) << "counters not known: not written";
  EXPECT_EQ(j["judgement"]["retest"], json::parse("[[1,0],[1,3]]"));
  EXPECT_EQ(j["input"]["ranks"][1]["nccl_socket_ifname"], "ib");
  EXPECT_EQ(j["stats"]["messages"], 1LL << 40);
  FleetReport back = fleetFromJson(j, "built.json");
  EXPECT_TRUE(std::isnan(back.input.pairs[1].bandwidthGBps));
  EXPECT_TRUE(std::isnan(back.judgement.hosts[2].evidence[0].fleetMedian));
  expectSame(back, r);
  // Every default-constructed struct too (an empty fleet: could not run).
  FleetReport empty;
  expectSame(fleetFromJson(throughText(empty), "empty.json"), empty);
}

TEST(FleetSchema, ExitCodeIsTwoForAnySuspectHostLinkOrMissingResult) {
  FleetJudgement j;
  EXPECT_EQ(fleetExitCode(j), 0);
  j.hosts = {{"a", {0}, HostState::kHealthy, {}, ""}, {"b", {1}, HostState::kHealthy, {}, ""}};
  EXPECT_EQ(fleetExitCode(j), 0);
  j.hosts[1].state = HostState::kNoResult;
  EXPECT_EQ(fleetExitCode(j), 2);
  j.hosts[1].state = HostState::kSuspect;
  EXPECT_EQ(fleetExitCode(j), 2);
  j.hosts[1].state = HostState::kHealthy;
  j.links = {{"a", "b", 0, 1, {}}};
  EXPECT_EQ(fleetExitCode(j), 2);
}

TEST(FleetSchema, DiagReportCarriesTheFleetAndOldReportsStillRead) {
  DiagReport d;
  d.mode = "world";
  d.worldSize = 16;
  d.host = "node01";
  DiagRecord rec;
  rec.id = "net.x";
  rec.family = "net";
  rec.message = "fine";
  d.checks = {rec};
  json plain = diagToJson(d);
  EXPECT_FALSE(plain.contains("fleet")) << "no fleet object outside fleet mode";
  EXPECT_FALSE(diagFromJson(throughText(plain), "old.json").fleet.has_value());
  EXPECT_EQ(plain["summary"]["exit_code"], 0);

  d.fleet = fleetFromJson(fixtureJson(), kFixture);
  json j = throughText(diagToJson(d));
  ASSERT_TRUE(j.contains("fleet"));
  EXPECT_EQ(j["fleet"]["schema"], "dsperf.fleet");
  EXPECT_EQ(j["summary"]["exit_code"], 2) << "a suspect host makes the report's exit code 2";
  EXPECT_EQ(diagReportExitCode(d), 2);
  EXPECT_EQ(diagExitCode(d.checks), 0);
  DiagReport back = diagFromJson(j, "diag.json");
  ASSERT_TRUE(back.fleet.has_value());
  expectSame(*back.fleet, *d.fleet);

  // Damage inside the embedded object names the field from the top of the file.
  j["fleet"]["input"]["pairs"][4]["outcome"] = "slow";
  try {
    diagFromJson(throughText(j), "diag.json");
    ADD_FAILURE() << "a bad outcome was read";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find("diag.json: at /fleet/input/pairs/4/outcome: 'slow' is not a fleet pair"),
        std::string::npos)
        << e.what();
  }
  j["fleet"]["input"]["pairs"][4]["outcome"] = "ok";
  j["fleet"]["input"]["pairs"][4]["latency_us"] = "fast";
  try {
    diagFromJson(throughText(j), "diag.json");
    ADD_FAILURE() << "a string latency was read";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "diag.json: at /fleet/input/pairs/4/latency_us: expected a number, found a "
                  "string (\"fast\")"),
              std::string::npos)
        << e.what();
  }
  j["fleet"] = 3;
  try {
    diagFromJson(throughText(j), "diag.json");
    ADD_FAILURE() << "a number as the fleet object was read";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("diag.json: at /fleet: expected a fleet object, found number"),
              std::string::npos)
        << e.what();
  }
}

// One damaged copy of the fixture per case, and the words its error must contain.
struct Damage {
  const char* what;
  std::function<void(json&)> apply;
  std::vector<std::string> expected;
};

TEST(FleetSchema, DamagedInputIsRefusedNamingTheFileAndTheField) {
  const std::vector<Damage> cases = {
      {"not an object",
       [](json& j) { j = json::array(); },
       {"fleet.json: at the top level: expected a fleet object"}},
      {"another schema",
       [](json& j) { j["schema"] = "dsperf.diag"; },
       {"fleet.json: at /schema: the schema is 'dsperf.diag', expected 'dsperf.fleet'"}},
      {"newer major",
       [](json& j) { j["schema_version"] = "2.0"; },
       {"fleet.json was written by a newer dsperf", "Upgrade"}},
      {"bad version",
       [](json& j) { j["schema_version"] = "v1"; },
       {"fleet.json", "\"schema_version\" is \"v1\""}},
      {"missing input",
       [](json& j) { j.erase("input"); },
       {"fleet.json: at /input: expected a value, found nothing"}},
      {"missing outcome",
       [](json& j) { j["input"]["pairs"][3].erase("outcome"); },
       {"fleet.json: at /input/pairs/3/outcome: expected a value, found nothing (the field is missing)",
        "dsdiag --world --json FILE"}},
      {"unknown outcome",
       [](json& j) { j["input"]["pairs"][3]["outcome"] = "slow"; },
       {"at /input/pairs/3/outcome: 'slow' is not a fleet pair outcome; expected ok, failed, timeout or "
        "skipped"}},
      {"unknown state",
       [](json& j) { j["judgement"]["hosts"][2]["state"] = "dead"; },
       {"at /judgement/hosts/2/state: 'dead' is not a fleet host state"}},
      {"rank out of the fleet",
       [](json& j) { j["input"]["pairs"][5]["b"] = 99; },
       {"at /input/pairs/5/b: rank 99 is outside the fleet (world_size 16, ranks 0 to 15)"}},
      {"negative rank",
       [](json& j) {
         j["input"]["reach"][0]["failures"] = json::parse(R"([{"from":-1,"to":2,
        "from_iface":"eth0","to_iface":"eth0","to_addr":"x","error":"e","timed_out":false,"ms":1}])");
       },
       {"at /input/reach/0/failures/0/from: rank -1 is outside the fleet"}},
      {"pair with itself",
       [](json& j) { j["input"]["pairs"][0]["b"] = j["input"]["pairs"][0]["a"]; },
       {"at /input/pairs/0: a pair of rank"}},
      {"negative bandwidth",
       [](json& j) { j["input"]["pairs"][1]["bandwidth_gbps"] = -1.5; },
       {"at /input/pairs/1/bandwidth_gbps: expected a number >= 0, found -1.5"}},
      {"more sent again than sent",
       [](json& j) {
         j["input"]["pairs"][1]["sent_bytes"] = 100;
         j["input"]["pairs"][1]["retrans_bytes"] = 200;
       },
       {"at /input/pairs/1/retrans_bytes: 200 bytes sent again of 100 sent"}},
      {"negative byte count",
       [](json& j) {
         j["input"]["pairs"][1]["sent_bytes"] = -4;
         j["input"]["pairs"][1]["retrans_bytes"] = 0;
       },
       {"sent_bytes"}},
      {"string number",
       [](json& j) { j["input"]["pairs"][1]["bandwidth_gbps"] = "fast"; },
       {"at /input/pairs/1/bandwidth_gbps: expected a number, found a string (\"fast\")"}},
      {"huge int",
       [](json& j) { j["input"]["pairs"][1]["round"] = 1e30; },
       {"at /input/pairs/1/round: expected a whole number"}},
      {"pairs not an array",
       [](json& j) { j["input"]["pairs"] = json::object(); },
       {"at /input/pairs: expected an array, found an object"}},
      {"rank listed twice",
       [](json& j) { j["input"]["ranks"][1]["rank"] = 0; },
       {"at /input/ranks/1/rank: rank 0 is listed twice"}},
      {"more ranks than the world",
       [](json& j) { j["input"]["world_size"] = 4; },
       {"at /input/ranks: 16 ranks listed in a fleet of world_size 4"}},
      {"probes", [](json& j) { j["input"]["reach"][0]["ok"] = 99; }, {"at /input/reach/0: 99 of 15 probes"}},
      {"retest of one rank",
       [](json& j) { j["judgement"]["retest"] = json::parse("[[1]]"); },
       {"at /judgement/retest/0: expected a pair of ranks [suspect, peer], found [1]"}},
      {"evidence peer",
       [](json& j) { j["judgement"]["links"][0]["evidence"][0]["peers"] = json::parse("[2, 16]"); },
       {"at /judgement/links/0/evidence/0/peers/1: rank 16 is outside the fleet"}},
      {"host ranks",
       [](json& j) { j["judgement"]["hosts"][0]["ranks"] = "0"; },
       {"at /judgement/hosts/0/ranks: expected an array, found a string"}},
      {"stage seconds",
       [](json& j) { j["stats"]["stage_seconds"] = json::array(); },
       {"at /stats/stage_seconds: expected an object, found an array"}},
      {"stage second",
       [](json& j) { j["stats"]["stage_seconds"]["links"] = -2; },
       {"at /stats/stage_seconds/links: expected a number >= 0"}},
      {"iface",
       [](json& j) { j["input"]["ranks"][4]["ifaces"][0].erase("mtu"); },
       {"at /input/ranks/4/ifaces/0/mtu: expected a value, found nothing"}},
      {"cpu quota",
       [](json& j) { j["input"]["ranks"][5]["cpu_quota"] = 0; },
       {"at /input/ranks/5: cpu_quota 0 is not a positive number of CPUs"}},
  };
  for (const auto& c : cases) {
    json j = fixtureJson();
    c.apply(j);
    std::string msg = readError(j);
    for (const auto& e : c.expected) EXPECT_NE(msg.find(e), std::string::npos) << c.what << ": " << msg;
  }
}

// A 1.0 file has no CPU budget: it reads as unknown, and is written back with the 1.1 fields.
TEST(FleetSchema, VersionOneZeroRanksWithoutACpuBudgetStillRead) {
  json j = fixtureJson();
  j["schema_version"] = "1.0";
  for (auto& r : j["input"]["ranks"]) {
    r.erase("affinity_cpus");
    r.erase("cpu_quota");
    r.erase("cpu_quota_file");
  }
  FleetReport r = fleetFromJson(j, "old.json");
  EXPECT_EQ(r.input.ranks[0].affinityCpus, 0);
  EXPECT_LT(r.input.ranks[0].cpuQuota, 0);
  EXPECT_EQ(r.input.ranks[0].cpuQuotaFile, "");
  json out = r;
  EXPECT_TRUE(out["input"]["ranks"][0]["cpu_quota"].is_null());
}

// The records ranks exchange through the store, one at a time.
TEST(FleetSchema, EachRecordRoundTripsOnItsOwn) {
  FleetReport r = builtReport();
  for (const auto& k : r.input.ranks) {
    EXPECT_EQ(throughText(k).get<FleetRank>(), k);
    for (const auto& i : k.ifaces) EXPECT_EQ(throughText(i).get<FleetIface>(), i);
  }
  for (const auto& s : r.input.reach) {
    EXPECT_EQ(throughText(s).get<ReachSummary>(), s);
    for (const auto& f : s.failures) EXPECT_EQ(throughText(f).get<ReachFailure>(), f);
  }
  EXPECT_EQ(throughText(r.input.pairs[0]).get<PairResult>(), r.input.pairs[0]);
  PairResult failed = throughText(r.input.pairs[1]).get<PairResult>();
  EXPECT_TRUE(std::isnan(failed.bandwidthGBps));
  EXPECT_EQ(failed.error, "reset by peer");
  for (const auto& b : r.input.bisect) EXPECT_EQ(throughText(b).get<BisectStep>(), b);
  json bad = r.input.pairs[0];
  bad["outcome"] = "meh";
  try {
    throughText(bad).get<PairResult>();
    ADD_FAILURE() << "an unknown outcome was read";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("a fleet record: at /outcome: 'meh' is not a fleet pair outcome"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("same dsperf build"), std::string::npos) << e.what();
  }
  bad = r.input.pairs[0];
  bad["a"] = -3;
  EXPECT_THROW(throughText(bad).get<PairResult>(), ds::ConfigError);
  bad.erase("a");
  EXPECT_THROW(throughText(bad).get<PairResult>(), nlohmann::json::exception);  // the caller names the key
}
