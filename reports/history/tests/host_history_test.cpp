// The per-host history: samples stored on ingest (per host, per link, per job) and read back with
// loadSamples exactly as samplesOf made them, the 1 -> 2 migration of an older database, check
// results and the quarantine list, the fleet view's grid, and bad inputs.
#include "reports/history/host_history.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>

#include "engine/common/error.h"
#include "engine/testing/subprocess.h"
#include "reports/history/fleet_data.h"
#include "reports/history/history_schema.h"
#include "reports/history/ingest.h"
#include "reports/history/sqlite_db.h"
#include "reports/history/tests/history_fixtures.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"

using namespace ds::report;
using namespace ds::report::history;
using namespace ds::report::history::testing;
using ds::testing::TempDir;

namespace {

// What identifies a sample and what it measured (the time is the history's normalised one).
std::string describe(const Sample& s) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{:.6g}|{}|{}|{}|{}", s.runId, s.scope, s.host, s.peer, s.rank,
                     patternKey(s), s.value, s.unit, s.higherIsBetter, s.sku, s.stack);
}

std::vector<std::string> describeAll(const std::vector<Sample>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(describe(s));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> expectedOf(const std::vector<std::string>& files) {
  std::vector<Sample> all;
  for (const auto& f : files) {
    auto s = samplesOf(loadRunFile(f));
    all.insert(all.end(), s.begin(), s.end());
  }
  return describeAll(all);
}

std::vector<std::string> hostsOf(const std::vector<Sample>& v) {
  std::set<std::string> h;
  for (const auto& s : v) h.insert(s.host);
  return {h.begin(), h.end()};
}

SweepSpec oneHost(const std::string& host, int hours, double busBw = 10.0) {
  SweepSpec s;
  s.hosts = {host};
  s.startTime = isoTime(hours);
  s.busBw = busBw;
  s.backend = "nccl";
  s.worldSize = 8;
  return s;
}

// The columns of `table` in d's layout, comma-separated: what an older layout's table takes from a
// newer one's (which has more columns).
std::string columnsOf(Database& d, const std::string& table) {
  Statement st(d, fmt::format("SELECT name FROM pragma_table_info('{}')", table));
  std::string cols;
  while (st.step()) cols += (cols.empty() ? "" : ", ") + st.text(0);
  return cols;
}

std::string messageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HostHistory, SingleHostSweepsAreHostSamplesAndMultiHostSweepsTheJobs) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  SweepSpec single = oneHost("gpu001", 0);
  single.gpuName = "NVIDIA H100 80GB HBM3";
  SweepSpec job;  // node-a and node-b
  job.startTime = isoTime(1);
  std::vector<std::string> files{writeSweep(dir.file("single.json"), single),
                                 writeSweep(dir.file("job.json"), job)};
  auto rep = ingestRuns(db, files);
  ASSERT_EQ(rep.added, 2) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.files[0].samples, 2u);  // one per size: out-of-place measured
  EXPECT_NE(formatIngestReport(rep, db).find("2 per-host samples"), std::string::npos)
      << formatIngestReport(rep, db);

  auto all = loadSamples(db, {});
  EXPECT_EQ(describeAll(all), expectedOf(files)) << "the stored samples are samplesOf's";
  SampleFilter hostsOnly;
  hostsOnly.scopes = {"host"};
  auto h = loadSamples(db, hostsOnly);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].host, "gpu001");
  EXPECT_EQ(h[0].time, isoTime(0));
  EXPECT_NE(h[0].sku.find("NVIDIA H100"), std::string::npos) << h[0].sku;
  EXPECT_EQ(h[0].stack, "nccl unknown");
  SampleFilter jobs;
  jobs.scopes = {"job"};
  auto j = loadSamples(db, jobs);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].host, "node-a,node-b") << "a job's samples name its host list";
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM samples_flat"), 4) << "the flat view joins every sample";
}

TEST(HostHistory, FleetRunsAreLinkSamplesOfBothEndsAndEachHostsMedian) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  const std::vector<std::string> hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "gpu06"};
  const std::string fleet = writeFleetDiag(dir.file("fleet.json"), hosts, "gpu04");
  auto rep = ingestRuns(db, {fleet});
  ASSERT_EQ(rep.added, 1) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.files[0].kind, "diag");
  EXPECT_EQ(
      countRows(db, "SELECT count(*) FROM runs WHERE kind = 'diag' AND status = 'suspects' AND world_size = 6"),
      1);
  auto all = loadSamples(db, {});
  EXPECT_EQ(describeAll(all), expectedOf({fleet}));
  // 12 pairs, one failed: 11 links x 2 ends x (bandwidth, latency).
  SampleFilter links;
  links.scopes = {"link"};
  links.metrics = {"link_bw"};
  auto l = loadSamples(db, links);
  EXPECT_EQ(l.size(), 22u);
  for (const auto& s : l) EXPECT_NE(s.host, s.peer);
  SampleFilter host;
  host.scopes = {"host"};
  host.metrics = {"link_bw"};
  host.hosts = {"gpu04", "gpu05"};
  auto m = loadSamples(db, host);
  ASSERT_EQ(m.size(), 2u);
  for (const auto& s : m) {
    if (s.host == "gpu04") {
      EXPECT_NEAR(s.value, 0.2, 1e-9) << "every link of the slow host is slow";
    } else {
      EXPECT_NEAR(s.value, 2.0, 1e-9) << "the median of 3 fast links and 1 slow one";
    }
  }
}

TEST(HostHistory, FiltersCombineAndLastRunsIsPerHost) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  std::vector<std::string> files;
  // gpu001 runs every 24 h, gpu002 twelve hours later; 5 nights each; the last night has label "b".
  for (int night = 0; night < 5; ++night) {
    for (int k = 0; k < 2; ++k) {
      SweepSpec s = oneHost(k ? "gpu002" : "gpu001", night * 24 + k * 12, 10 + night);
      if (night == 4) s.label = "b";
      files.push_back(writeSweep(dir.file(fmt::format("n{}h{}.json", night, k)), s));
    }
  }
  ASSERT_EQ(ingestRuns(db, files).added, 10);
  SampleFilter f;
  f.lastRuns = 2;
  f.hosts = {"gpu002"};
  f.patterns = {"busbw allreduce nccl f32 sum 1048576 out w8"};
  auto v = loadSamples(db, f);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].time, isoTime(3 * 24 + 12)) << "oldest first";
  EXPECT_EQ(v[1].value, 14);
  SampleFilter last;
  last.lastRuns = 1;
  EXPECT_EQ(hostsOf(loadSamples(db, last)), (std::vector<std::string>{"gpu001", "gpu002"}))
      << "each host's newest run, not the newest run overall";
  EXPECT_EQ(loadSamples(db, last).size(), 4u);
  SampleFilter window;
  window.since = isoTime(24);
  window.until = isoTime(48);
  EXPECT_EQ(loadSamples(db, window).size(), 6u) << "inclusive: nights 1 (both hosts) and 2 (gpu001)";
  SampleFilter day;
  day.until = isoTime(0).substr(0, 10);
  EXPECT_EQ(loadSamples(db, day).size(), 4u) << "a date alone is that whole day";
  SampleFilter label;
  label.labels = {"b"};
  EXPECT_EQ(loadSamples(db, label).size(), 4u);
  SampleFilter none;
  none.metrics = {"link_bw"};
  EXPECT_TRUE(loadSamples(db, none).empty());
  SampleFilter bad;
  bad.since = "yesterday";
  EXPECT_NE(messageOf([&] { loadSamples(db, bad); }).find("'yesterday'"), std::string::npos);
  auto patterns = [&] {
    Database d(db, Database::Mode::kExisting, 5000);
    prepareForRead(d);
    return listPatterns(d);
  }();
  ASSERT_EQ(patterns.size(), 2u);
  EXPECT_EQ(patterns[0].bytes, kMiB);
  EXPECT_EQ(patterns[0].hosts, 2u);
  EXPECT_EQ(patterns[0].samples, 10u);
}

// Layout 1 (before per-host samples) migrates forward on open, in one transaction: its sweep runs get
// the samples that ingest gives them now, derived from their stored rows.
TEST(HostHistory, MigrationFromLayout1DerivesTheSamplesOfStoredRuns) {
  TempDir dir;
  // The rows as a layout-2 ingest stores them, and its samples, are the reference.
  const std::string ref = dir.file("ref.sqlite");
  SweepSpec a = oneHost("gpu001", 0);
  a.gpuName = "NVIDIA A100-SXM4-80GB";
  SweepSpec b;
  b.startTime = isoTime(2);
  std::vector<std::string> files{writeSweep(dir.file("a.json"), a), writeSweep(dir.file("b.json"), b),
                                 writeTrain(dir.file("t.json"), {})};
  ASSERT_EQ(ingestRuns(ref, files).added, 3);
  const auto expected = describeAll(loadSamples(ref, {}));
  ASSERT_EQ(expected.size(), 4u);

  // The same rows in a layout-1 file, as the dsreport of that layout wrote them.
  const std::string old = dir.file("v1.sqlite");
  {
    Database d(old, Database::Mode::kCreate, 5000);
    createLayoutAt(d, 1);
    d.exec(fmt::format("ATTACH DATABASE '{}' AS ref", ref));
    d.exec(fmt::format(
        "INSERT INTO runs SELECT * FROM ref.runs; INSERT INTO sweep_rows SELECT {} FROM ref.sweep_rows; "
        "INSERT INTO train_rows SELECT * FROM ref.train_rows",
        columnsOf(d, "sweep_rows")));
    d.exec("DETACH DATABASE ref");
  }
  EXPECT_EQ(countRows(old, "PRAGMA user_version"), 1);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM sqlite_master WHERE name = 'samples'"), 0);

  EXPECT_EQ(describeAll(loadSamples(old, {})), expected)
      << "derived from the stored rows as ingest derives them";
  EXPECT_EQ(countRows(old, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM sweep_rows"), countRows(ref, "SELECT count(*) FROM sweep_rows"));
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  // The rebuilt runs table takes fleet runs, and its children still cascade.
  ASSERT_EQ(ingestRuns(old, {writeFleetDiag(dir.file("f.json"), {"gpu01", "gpu02", "gpu03"})}).added, 1);
  {
    Database d(old, Database::Mode::kExisting, 5000);
    prepareForWrite(d);
    EXPECT_EQ(d.queryInt("PRAGMA foreign_keys"), 1) << "foreign keys are on again after the migration";
    d.exec(fmt::format("DELETE FROM runs WHERE source_file = '{}'", files[0]));
  }
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM samples WHERE host = 'gpu001'"), 0) << "cascaded";
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM sweep_rows WHERE run_id NOT IN (SELECT run_id FROM runs)"), 0);
}

// A stored run whose metadata cannot be read back gets no samples on migration, and gets them when
// its file is ingested again; a file whose rows refer to missing runs is not migrated at all.
TEST(HostHistory, MigrationSkipsUnreadableRunsAndRefusesDamagedFilesWhole) {
  TempDir dir;
  const std::string ref = dir.file("ref.sqlite");
  std::vector<std::string> files{writeSweep(dir.file("a.json"), oneHost("gpu001", 0)),
                                 writeSweep(dir.file("b.json"), oneHost("gpu002", 1))};
  ASSERT_EQ(ingestRuns(ref, files).added, 2);
  auto makeOld = [&](const std::string& path, const std::string& damage) {
    Database d(path, Database::Mode::kCreate, 5000);
    createLayoutAt(d, 1);
    d.exec(fmt::format("ATTACH DATABASE '{}' AS ref", ref));
    d.exec(
        fmt::format("INSERT INTO runs SELECT * FROM ref.runs; INSERT INTO sweep_rows SELECT {} FROM "
                    "ref.sweep_rows",
                    columnsOf(d, "sweep_rows")));
    d.exec("DETACH DATABASE ref");
    d.exec(damage);
  };
  const std::string old = dir.file("v1.sqlite");
  makeOld(old, fmt::format("UPDATE runs SET metadata = '{{\"hosts\": 7' WHERE source_file = '{}'", files[0]));
  SampleFilter f;
  EXPECT_EQ(hostsOf(loadSamples(old, f)), (std::vector<std::string>{"gpu002"}));
  auto again = ingestRuns(old, {files[0]});
  EXPECT_EQ(again.alreadyPresent, 1);
  EXPECT_EQ(again.files[0].samples, 2u);
  EXPECT_NE(formatIngestReport(again, old).find("its 2 per-host samples were added"), std::string::npos);
  EXPECT_EQ(hostsOf(loadSamples(old, f)), (std::vector<std::string>{"gpu001", "gpu002"}));
  EXPECT_EQ(ingestRuns(old, {files[0]}).files[0].samples, 0u) << "added once";

  // Rows of a run that is gone (a damaged file): the migration stops, and the file stays layout 1.
  const std::string damaged = dir.file("damaged.sqlite");
  makeOld(damaged,
          fmt::format("PRAGMA foreign_keys = OFF; DELETE FROM runs WHERE source_file = '{}'", files[1]));
  std::string m = messageOf([&] { loadSamples(damaged, f); });
  EXPECT_NE(m.find("'" + damaged + "'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing runs"), std::string::npos) << m;
  EXPECT_EQ(countRows(damaged, "PRAGMA user_version"), 1);
  EXPECT_EQ(countRows(damaged, "SELECT count(*) FROM sqlite_master WHERE name IN ('samples', 'runs_v2')"), 0);
  EXPECT_EQ(countRows(damaged, "SELECT count(*) FROM runs"), 1);
}

TEST(HostHistory, CheckResultsGoInWithEveryHostsVerdictOnce) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  CheckReport c = makeCheck("2026-01-02T03:00:00Z", {{"gpu001", CheckState::kHealthy},
                                                     {"gpu002", CheckState::kUnhealthy},
                                                     {"gpu003", CheckState::kNoBaseline},
                                                     {"gpu004", CheckState::kNoResult},
                                                     {"gpu005", CheckState::kCannotJudge}});
  const std::string file = writeCheck(dir.file("check.json"), c);
  auto rep = ingestRuns(db, {file, writeSweep(dir.file("s.json"), oneHost("gpu001", 0))});
  ASSERT_EQ(rep.added, 2) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.files[0].kind, "check");
  EXPECT_EQ(rep.files[0].rows, 5u);
  EXPECT_NE(formatIngestReport(rep, db).find("check " + rep.files[0].runId + ", 5 host verdicts"),
            std::string::npos)
      << formatIngestReport(rep, db);
  // cannot_judge is not counted unhealthy: nothing showed it was.
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM checks WHERE k = 1 AND n = 1 AND unhealthy = 2 AND hosts = 5"),
            1);
  EXPECT_EQ(
      countRows(db,
            "SELECT count(*) FROM host_checks WHERE host = 'gpu005' AND state = 'cannot_judge' AND rule = "
            "'allreduce_1g_variance' AND summary LIKE 'CANNOT JUDGE: %' AND fired LIKE "
            "'%\"cannot_judge\":true%'"),
      1);
  EXPECT_EQ(countRows(db,
                  "SELECT count(*) FROM host_checks WHERE host = 'gpu002' AND state = 'unhealthy' AND rule = "
                  "'allreduce_1g_variance' AND measured = 12 AND expected = 24"),
            1);
  EXPECT_EQ(
      countRows(db, "SELECT count(*) FROM host_checks WHERE host = 'gpu001' AND rule = '' AND fired = '[]'"), 1);
  auto again = ingestRuns(db, {file});
  EXPECT_EQ(again.alreadyPresent, 1);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM host_checks"), 5);
  Database d(db, Database::Mode::kExisting, 5000);
  prepareForRead(d);
  EXPECT_EQ(loadHostChecks(d, {"gpu005"}).at(0).state, "cannot_judge");
  auto checks = loadHostChecks(d, {"gpu002", "gpu004"});
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].host, "gpu002");
  EXPECT_EQ(checks[0].time, "2026-01-02T03:00:00Z");
  EXPECT_EQ(checks[1].state, "no_result");
  EXPECT_EQ(checks[1].summary, "ERROR: No results reported");
}

TEST(HostHistory, DamagedCheckFilesAreRejectedByNameAndTheOthersGoIn) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  auto good = checkToJson(makeCheck("2026-01-02T03:00:00Z", {{"gpu001", CheckState::kHealthy}}));
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name), std::ios::binary) << text;
    return dir.file(name);
  };
  auto withHosts = good;
  withHosts["hosts"] = "gpu001";
  auto badState = good;
  badState["hosts"][0]["state"] = "sick";
  auto newer = good;
  newer["schema_version"] = "2.0";
  auto noTime = good;
  noTime.erase("time");
  const std::string text = good.dump();
  std::vector<std::string> files{write("hosts.json", withHosts.dump()),
                                 write("state.json", badState.dump()),
                                 write("newer.json", newer.dump()),
                                 write("notime.json", noTime.dump()),
                                 write("cut.json", text.substr(0, text.size() / 2)),
                                 write("good.json", text)};
  auto rep = ingestRuns(db, files);
  EXPECT_EQ(rep.added, 1) << formatIngestReport(rep, db);
  EXPECT_EQ(rep.rejected, 5);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rep.files[i].status, IngestStatus::kRejected) << files[i];
    EXPECT_NE(rep.files[i].reason.find(files[i]), std::string::npos) << rep.files[i].reason;
  }
  EXPECT_NE(rep.files[1].reason.find("sick"), std::string::npos) << rep.files[1].reason;
  EXPECT_NE(rep.files[2].reason.find("newer"), std::string::npos) << rep.files[2].reason;
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM host_checks"), 1);
}

TEST(HostHistory, QuarantineIsKOfTheLastNChecks) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  using S = CheckState;
  // Oldest first: a failed long ago, now well; b failed 2 of its last 3; c failed once; d reported
  // nothing twice; e has no baseline yet (not a failure); f has only 2 checks, both failed; g could
  // never be judged (not a failure either: nothing showed it was).
  const std::vector<std::vector<std::pair<std::string, S>>> nights{
      {{"a", S::kUnhealthy},
       {"b", S::kHealthy},
       {"c", S::kHealthy},
       {"d", S::kHealthy},
       {"e", S::kNoBaseline},
       {"g", S::kCannotJudge}},
      {{"a", S::kUnhealthy},
       {"b", S::kHealthy},
       {"c", S::kHealthy},
       {"d", S::kHealthy},
       {"e", S::kNoBaseline},
       {"g", S::kCannotJudge}},
      {{"a", S::kHealthy},
       {"b", S::kUnhealthy},
       {"c", S::kHealthy},
       {"d", S::kNoResult},
       {"e", S::kNoBaseline},
       {"g", S::kCannotJudge}},
      {{"a", S::kHealthy},
       {"b", S::kHealthy},
       {"c", S::kUnhealthy},
       {"d", S::kNoResult},
       {"f", S::kUnhealthy}},
      {{"a", S::kHealthy},
       {"b", S::kUnhealthy},
       {"c", S::kHealthy},
       {"d", S::kHealthy},
       {"f", S::kUnhealthy}},
  };
  std::vector<std::string> files;
  for (std::size_t i = 0; i < nights.size(); ++i)
    files.push_back(writeCheck(dir.file(fmt::format("c{}.json", i)),
                               makeCheck(isoTime(24 * static_cast<int>(i)), nights[i])));
  ASSERT_EQ(ingestRuns(db, files).added, 5);
  Database d(db, Database::Mode::kExisting, 5000);
  prepareForRead(d);
  auto names = [](const std::vector<QuarantinedHost>& q) {
    std::vector<std::string> out;
    for (const auto& h : q) out.push_back(h.host);
    return out;
  };
  auto q = quarantine(d, 2, 3);
  EXPECT_EQ(names(q), (std::vector<std::string>{"b", "d", "f"}));
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].failed, 2);
  EXPECT_EQ(q[0].checks, 3);
  EXPECT_EQ(q[0].lastFailure.time, isoTime(96)) << "its newest failure";
  EXPECT_EQ(q[0].lastFailure.rule, "allreduce_1g_variance");
  EXPECT_EQ(q[1].latest.state, "healthy") << "d is well again, but 2 of its last 3 failed";
  EXPECT_EQ(q[2].checks, 2) << "f is judged on the 2 checks it has";
  EXPECT_EQ(names(quarantine(d, 1, 1)), (std::vector<std::string>{"b", "f"}));
  EXPECT_EQ(names(quarantine(d, 3, 5)), (std::vector<std::string>{}));
  EXPECT_EQ(names(quarantine(d, 2, 5)), (std::vector<std::string>{"a", "b", "d", "f"}));
  EXPECT_THROW(quarantine(d, 3, 2), ds::ConfigError);
  EXPECT_THROW(quarantine(d, 0, 2), ds::ConfigError);
  EXPECT_TRUE(checkFailed("no_result"));
  EXPECT_FALSE(checkFailed("no_baseline"));
  EXPECT_FALSE(checkFailed("cannot_judge"));
  // Every state has a letter of its own for the fleet view, and words for people.
  std::set<char> letters;
  for (CheckState st : kCheckStates) {
    const char l = checkStateLetter(checkStateName(st));
    EXPECT_NE(l, '?') << checkStateName(st);
    letters.insert(l);
    EXPECT_STRNE(checkStateWords(l), "unknown") << l;
  }
  EXPECT_EQ(letters.size(), std::size(kCheckStates));
  EXPECT_STREQ(checkStateWords('j'), "cannot judge");
  EXPECT_EQ(checkStateLetter("sick"), '?');
}

// Layout 3 refused 'cannot_judge' (a CHECK on host_checks.state); a layout-3 file is rebuilt to 4 on
// open with its verdicts kept, and then takes the new state.
TEST(HostHistory, ALayout3FileKeepsItsVerdictsAndTakesCannotJudge) {
  TempDir dir;
  using S = CheckState;
  const std::string ref = dir.file("ref.sqlite");
  ASSERT_EQ(ingestRuns(ref, {writeCheck(dir.file("c0.json"),
                                        makeCheck(isoTime(0), {{"a", S::kHealthy}, {"b", S::kUnhealthy}}))})
                .added,
            1);
  const std::string old = dir.file("v3.sqlite");
  {
    Database d(old, Database::Mode::kCreate, 5000);
    createLayoutAt(d, 3);
    d.exec(fmt::format("ATTACH DATABASE '{}' AS ref", ref));
    d.exec(
        "INSERT INTO checks SELECT * FROM ref.checks; INSERT INTO host_checks SELECT * FROM ref.host_checks");
    d.exec("DETACH DATABASE ref");
    EXPECT_THROW(d.exec("UPDATE host_checks SET state = 'cannot_judge' WHERE host = 'a'"), ds::IoError)
        << "layout 3 refuses the state";
  }
  EXPECT_EQ(countRows(old, "PRAGMA user_version"), 3);
  const std::string check =
      writeCheck(dir.file("c1.json"), makeCheck(isoTime(24), {{"a", S::kCannotJudge}, {"b", S::kUnhealthy}}));
  ASSERT_EQ(ingestRuns(old, {check}).added, 1);
  EXPECT_EQ(countRows(old, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM host_checks"), 4);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM host_checks WHERE state = 'cannot_judge'"), 1);
  EXPECT_EQ(
      countRows(old,
            "SELECT count(*) FROM host_checks WHERE state = 'unhealthy' AND rule = 'allreduce_1g_variance'"),
      2);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM sqlite_master WHERE name = 'host_checks_by_host'"), 1);
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  {
    Database d(old, Database::Mode::kExisting, 5000);
    prepareForWrite(d);
    d.exec("DELETE FROM checks");
  }
  EXPECT_EQ(countRows(old, "SELECT count(*) FROM host_checks"), 0) << "the rebuilt table still cascades";
}

// A check file of the 1.0 writer keeps the id it was stored under when a newer dsreport ingests it
// again, and the same check written as 1.1 is the same check.
TEST(HostHistory, ACheckKeepsItsIdAcrossTheSchemaBump) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  const CheckReport c = makeCheck(isoTime(0), {{"a", CheckState::kHealthy}, {"b", CheckState::kUnhealthy}});
  nlohmann::json v10 = checkToJson(c);  // as the 1.0 writer wrote it: none of 1.1's fields
  v10["schema_version"] = "1.0";
  v10["summary"].erase("cannot_judge");
  for (auto& h : v10["hosts"])
    for (auto& f : h["findings"])
      for (const char* k : {"cannot_judge", "spread", "spread_upper", "runs_needed", "pooled_runs"})
        f.erase(k);
  writeJsonAtomic(dir.file("v10.json"), v10);
  auto first = ingestRuns(db, {dir.file("v10.json")});
  ASSERT_EQ(first.added, 1);
  // The id a 1.0 dsreport gave it: FNV-1a of its record, which that dsreport wrote as the file is.
  EXPECT_EQ(first.files[0].runId, fnv1a64Hex("check\n" + dumpJson(v10)));
  auto again = ingestRuns(db, {writeCheck(dir.file("v11.json"), c)});
  EXPECT_EQ(again.alreadyPresent, 1) << formatIngestReport(again, db);
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM checks"), 1);
}

TEST(HostHistory, ANewerLayoutIsRefusedByEveryReaderAndWriter) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  ingestRuns(db, {writeSweep(dir.file("s.json"), oneHost("gpu001", 0))});
  {
    Database d(db, Database::Mode::kExisting, 1000);
    d.exec(fmt::format("PRAGMA user_version = {}", kHistorySchemaVersion + 1));
  }
  const std::string check =
      writeCheck(dir.file("c.json"), makeCheck(isoTime(1), {{"gpu001", CheckState::kHealthy}}));
  for (const auto& m : {messageOf([&] { loadSamples(db, {}); }), messageOf([&] { queryFleet(db); }),
                        messageOf([&] { ingestRuns(db, {check}); })}) {
    EXPECT_NE(m.find("newer dsreport"), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("layout {}", kHistorySchemaVersion + 1)), std::string::npos) << m;
  }
  EXPECT_EQ(countRows(db, "SELECT count(*) FROM checks"), 0);
}

TEST(FleetView, CellsAreRelativeToTheirSkusMedianPerNightAndDriftIsWorstFirst) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  std::vector<std::string> files;
  // 6 hosts, 12 nights; hosts run at 23:40 or 00:20 (around midnight: one night is still one column).
  // gpu1-4 are H100 at 20 GB/s, gpu5-6 A100 at 10 GB/s. gpu3 loses 4 % a night; gpu2 misses night 5.
  for (int night = 0; night < 12; ++night) {
    for (int h = 1; h <= 6; ++h) {
      if (h == 2 && night == 5) continue;
      SweepSpec s = oneHost(fmt::format("gpu{}", h), 0);
      s.gpuName = h <= 4 ? "H100" : "A100";
      s.busBw = (h <= 4 ? 20.0 : 10.0) * (h == 3 ? 1 - 0.04 * night : 1.0) * (1 + 0.001 * h);
      s.startTime = fmt::format("2026-01-{:02d}T{}Z", night + 1 + (h % 2), h % 2 ? "00:20:00" : "23:40:00");
      files.push_back(writeSweep(dir.file(fmt::format("n{}h{}.json", night, h)), s));
    }
  }
  ASSERT_EQ(ingestRuns(db, files).rejected, 0);
  FleetOptions o;
  o.patterns = {"busbw allreduce nccl f32 sum 268435456 out w8"};
  FleetData d = queryFleet(db, o);
  ASSERT_EQ(d.hosts.size(), 6u);
  EXPECT_EQ(d.columnWidthMs, 24 * 3600e3);
  ASSERT_EQ(d.columns.size(), 12u) << "a night is one column, midnight or not";
  EXPECT_EQ(d.runs, 71);
  ASSERT_EQ(d.patterns.size(), 1u);
  EXPECT_EQ(d.leftOut, (std::vector<std::string>{"busbw allreduce nccl f32 sum 1048576 out w8"}));
  const FleetPattern& p = d.patterns[0];
  EXPECT_EQ(p.title, "allreduce busbw, 256 MiB, nccl f32 sum, 8 ranks");
  EXPECT_EQ(p.hosts, 6);
  ASSERT_EQ(d.skus.size(), 2u);  // sorted: A100 first
  const std::size_t cols = d.columns.size();
  auto cell = [&](int host, std::size_t col) { return p.cells[static_cast<std::size_t>(host) * cols + col]; };
  for (std::size_t c = 0; c < cols; ++c) {
    EXPECT_NEAR(cell(0, c), 100, 1) << "gpu1 is its SKU's median every night";
    EXPECT_NEAR(cell(5, c), 100, 1) << "gpu6, an A100 at half the speed, is at its own SKU's median";
    EXPECT_NEAR(p.medians[0][c], 10.0 * 1.0055, 0.01);
  }
  EXPECT_EQ(cell(1, 5), 255) << "gpu2 missed night 5";
  EXPECT_NEAR(cell(2, 11), std::round(100 * (1 - 0.44) / 1.0), 2) << "gpu3 at 56 % of the H100 median";
  ASSERT_FALSE(p.drift.empty());
  EXPECT_EQ(d.hosts[static_cast<std::size_t>(p.drift[0].host)], "gpu3") << "worst first";
  EXPECT_LT(p.drift[0].pct, -30);
  EXPECT_LT(p.drift[0].vsFleetPct, -30);
  EXPECT_NEAR(p.drift[1].pct, 0, 0.5);
  EXPECT_TRUE(p.fleetDriftKnown);
  EXPECT_EQ(d.hostSku[0], 1);  // H100
  EXPECT_EQ(d.jobSamples, 0u);

  // Since/until and the column cap.
  FleetOptions few = o;
  few.maxColumns = 5;
  FleetData wide = queryFleet(db, few);
  EXPECT_LE(wide.columns.size(), 5u);
  EXPECT_GT(wide.columnWidthMs, 24 * 3600e3);
  FleetOptions recent = o;
  recent.since = "2026-01-10T12:00:00Z";
  EXPECT_EQ(queryFleet(db, recent).columns.size(), 3u);
  FleetOptions unknown;
  unknown.patterns = {"busbw allreduce nccl f32 sum 7 out w8"};
  std::string m = messageOf([&] { queryFleet(db, unknown); });
  EXPECT_NE(m.find("has no per-host samples"), std::string::npos) << m;
  EXPECT_NE(m.find("busbw allreduce nccl f32 sum 268435456 out w8"), std::string::npos)
      << "names what there is";
  FleetOptions badK;
  badK.k = 4;
  EXPECT_THROW(queryFleet(db, badK), ds::ConfigError);
}

TEST(FleetView, QuarantineListIsOneHostlistLineWithoutNamesThatCannotStandInIt) {
  TempDir dir;
  const std::string db = dir.file("h.sqlite");
  using S = CheckState;
  std::vector<std::string> files;
  for (int i = 0; i < 2; ++i)
    files.push_back(
        writeCheck(dir.file(fmt::format("c{}.json", i)), makeCheck(isoTime(i), {{"node07", S::kUnhealthy},
                                                                                {"node08", S::kNoResult},
                                                                                {"node09", S::kHealthy},
                                                                                {"bad,name", S::kUnhealthy},
                                                                                {"login2", S::kUnhealthy}})));
  ASSERT_EQ(ingestRuns(db, files).added, 2);
  FleetData d = queryFleet(db);
  EXPECT_EQ(d.hosts.size(), 5u) << "hosts with checks and no samples are listed";
  EXPECT_TRUE(d.patterns.empty());
  ASSERT_EQ(d.quarantine.size(), 4u);
  std::vector<std::string> unlisted;
  EXPECT_EQ(quarantineExcludeFile(d, &unlisted), "login2,node[07-08]\n");
  EXPECT_EQ(unlisted, (std::vector<std::string>{"bad,name"}));
  EXPECT_EQ(d.hostChecks[static_cast<std::size_t>(std::find(d.hosts.begin(), d.hosts.end(), "node08") -
                                                  d.hosts.begin())]
                .states,
            "rr");
  FleetData none = d;
  none.quarantine.clear();
  EXPECT_EQ(quarantineExcludeFile(none), "") << "empty when no host is quarantined, as fleet mode's file";
}

TEST(FleetView, RelativeCellsAreWholePercentWithARoofAndANone) {
  EXPECT_EQ(relativeCell(10, 10), 100);
  EXPECT_EQ(relativeCell(9.94, 10), 99);
  EXPECT_EQ(relativeCell(0, 10), 0);
  EXPECT_EQ(relativeCell(1000, 10), 254);
  EXPECT_EQ(relativeCell(5, 0), 255);
  EXPECT_EQ(relativeCell(std::nan(""), 10), 255);
}
