// The sweep's records and formatters: statistics, the nccl-tests text layout, the versioned JSON and
// the journal (including one cut short by a kill).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_journal.h"
#include "reports/sweep/sweep_reporter.h"
#include "reports/sweep/sweep_schema.h"
#include "reports/sweep/sweep_text.h"

using namespace ds::report;

namespace {

SweepMeasurement sampleRow() {
  SweepMeasurement m;
  m.backend = "gloo";
  m.collective = "allreduce";
  m.dtype = "f32";
  m.op = "sum";
  m.root = -1;
  m.worldSize = 2;
  m.requestedBytes = 10;
  m.bytes = 8;
  m.count = 2;
  m.busFactor = 1;
  for (PlaceResult* p : {&m.outOfPlace, &m.inPlace}) {
    p->measured = true;
    p->iters = 3;
    p->timeUs = 18.22;
    p->algBw = 0.0;
    p->busBw = 0.0;
    p->wrong = 0;
    p->iter = computeIterStats({17, 18, 20});
    p->slowestRank = 1;
    p->spreadPct = 12.4;
    p->ranks = {{0, 17.5, computeIterStats({17, 18})}, {1, 19.7, computeIterStats({19, 20})}};
  }
  return m;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

}  // namespace

TEST(SweepStats, PercentilesAndSpread) {
  auto s = computeIterStats({5, 1, 4, 2, 3});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.minUs, 1);
  EXPECT_DOUBLE_EQ(s.maxUs, 5);
  EXPECT_DOUBLE_EQ(s.avgUs, 3);
  EXPECT_DOUBLE_EQ(s.p50Us, 3);
  EXPECT_DOUBLE_EQ(s.p95Us, 4.8);
  EXPECT_DOUBLE_EQ(s.p99Us, 4.96);
  EXPECT_NEAR(s.stdevUs, 1.5811388, 1e-6);
  EXPECT_NEAR(s.cvPct, 52.704627, 1e-5);
  EXPECT_EQ(computeIterStats({}).n, 0);
  EXPECT_DOUBLE_EQ(computeIterStats({7}).stdevUs, 0);
  // Schema 1.2's tails, by the same interpolation (scripts/tests/peers_common_test.py: the same figures).
  ASSERT_TRUE(s.p90Us && s.p999Us);
  EXPECT_DOUBLE_EQ(*s.p90Us, 4.6);
  EXPECT_DOUBLE_EQ(*s.p999Us, 4.996);
  std::vector<double> thousand;
  for (int i = 1; i <= 1000; ++i) thousand.push_back(i);
  EXPECT_NEAR(*computeIterStats(thousand).p999Us, 999.001, 1e-9) << "between the two largest";
  EXPECT_DOUBLE_EQ(*computeIterStats({7}).p999Us, 7);
}

// A file of schema 1.1 has no p90_us / p999_us: they read as unknown (not 0), and a file written
// from it leaves them out rather than inventing a 0.
TEST(SweepStats, TailsOfAnOlderFileAreUnknownAndStaySo) {
  auto j = readJson(std::string(DS_REPORTS_TEST_DATA) + "/sweep_schema_1.1.json");
  ASSERT_EQ(j["schema_version"], "1.1");
  SweepRun run = sweepFromJson(j, "old.json");
  const IterStats& it = run.results[0].outOfPlace.iter;
  EXPECT_GT(it.n, 0);
  EXPECT_GT(it.p99Us, 0);
  EXPECT_FALSE(it.p90Us.has_value());
  EXPECT_FALSE(it.p999Us.has_value());
  EXPECT_EQ(run.args.perIterTiming, 0);
  EXPECT_EQ(run.args.perIterSkip, 0);
  EXPECT_TRUE(run.results[0].outOfPlace.timesUs.empty());
  auto back = sweepToJson(run);
  EXPECT_EQ(back["schema_version"], "1.3");
  EXPECT_FALSE(back["results"][0]["out_of_place"]["iter"].contains("p90_us"));
  EXPECT_FALSE(back["results"][0]["out_of_place"]["iter"].contains("p999_us"));
  EXPECT_FALSE(back["results"][0]["out_of_place"].contains("times_us"));
  // A null is read as unknown too; a new record has them.
  j["results"][0]["out_of_place"]["iter"]["p90_us"] = nullptr;
  EXPECT_FALSE(sweepFromJson(j, "old.json").results[0].outOfPlace.iter.p90Us.has_value());
  auto fresh = sweepToJson(run);
  fresh["results"][0]["out_of_place"]["iter"] = computeIterStats({1, 2, 3});
  EXPECT_EQ(fresh["results"][0]["out_of_place"]["iter"]["p999_us"], 2.998);
}

TEST(SweepText, RowMatchesNcclTestsLayout) {
  // nccl-tests: "%12li  %12li  %8s  %6s  %6i" then per place "  %7s  %6.2f  %6.2f  %5s".
  std::string row = formatRow(sampleRow());
  const std::string nccl =
      "           8             2     float     sum      -1    18.22    0.00    0.00      0    18.22    0.00 "
      "   0.00      0";
  EXPECT_EQ(row.substr(0, nccl.size()), nccl) << row;
  auto w = words(row);
  ASSERT_EQ(w.size(), 14u);  // 13 nccl-tests columns + the straggler
  EXPECT_EQ(w[13], "r1+12%");
  EXPECT_EQ(formatTimeUs(12345.6), "  12346");
  EXPECT_EQ(formatTimeUs(123.45), "  123.5");
  EXPECT_EQ(formatTimeUs(1.234), "   1.23");
  SweepMeasurement unchecked = sampleRow();
  unchecked.outOfPlace.wrong = -1;
  EXPECT_EQ(words(formatRow(unchecked))[8], "N/A");
  SweepMeasurement noInPlace = sampleRow();
  noInPlace.inPlace = {};
  EXPECT_EQ(words(formatRow(noInPlace))[9], "-");
}

// Without -I the table is byte for byte what dsbench printed before -I existed (the file is the output
// of that code for these records): nccl-tests parsers and our own tests read it.
TEST(SweepText, WithoutPerIterTimingTheTableIsUnchanged) {
  SweepArgs a;
  a.minBytes = 8;
  a.maxBytes = 1024;
  a.stepFactor = 2;
  a.iters = 20;
  a.warmupIters = 1;
  a.check = 1;
  a.collectives = {"allreduce"};
  a.backends = {"gloo"};
  SweepMetadata m;
  m.worldSize = 2;
  m.hosts = {"h"};
  std::string out = formatSweepPreamble(a, m);
  a.blocking = true;
  a.repeat = 3;
  a.minTimeS = 0.5;
  a.average = 3;
  out += formatSweepPreamble(a, m);
  out += formatTableHeader("gloo", "allreduce", "2(n-1)/n = 1");
  SweepMeasurement r = sampleRow();
  r.outOfPlace.algBw = r.inPlace.algBw = r.outOfPlace.busBw = r.inPlace.busBw = 0.00044;
  out += formatRow(r);
  r.outOfPlace.wrong = -1;
  r.inPlace = {};
  r.outOfPlace.timeUs = 123456.7;
  r.outOfPlace.algBw = 1234.5;
  out += formatRow(r);
  EXPECT_EQ(out, ds::testing::readFile(std::string(DS_REPORTS_TEST_DATA) + "/sweep_text_without_I.txt"));
  EXPECT_EQ(formatRow(r, 0), formatRow(r));
}

// -I 1: nccl-tests' i_min i_max i_p99 i_cv% after each #wrong, with its header lines and units; -I 2:
// the tails. Each value in nccl-tests' 7-wide form; unknown or missing figures are "-".
TEST(SweepText, PerIterationColumns) {
  SweepMeasurement r = sampleRow();
  r.outOfPlace.iter = computeIterStats({10, 11, 12, 13, 100});
  std::string h1 = formatTableHeader("gloo", "allreduce", "1", 1);
  EXPECT_NE(h1.find("out-of-place (+ per-iteration)"), std::string::npos) << h1;
  EXPECT_NE(h1.find("in-place (+ per-iteration)"), std::string::npos) << h1;
  EXPECT_NE(h1.find("#wrong    i_min    i_max    i_p99    i_cv%     time"), std::string::npos) << h1;
  EXPECT_NE(h1.find("(us)     (us)     (us)      (%)     (us)"), std::string::npos) << h1;
  auto w = words(formatRow(r, 1));
  ASSERT_EQ(w.size(), 22u);  // 5 + 2 x (4 + 4) + straggler
  EXPECT_EQ(w[8], "0");
  EXPECT_EQ(w[9], "10.00");                                              // i_min
  EXPECT_EQ(w[10], "100.00");                                            // i_max
  EXPECT_EQ(w[11], words(formatIterValue(r.outOfPlace.iter.p99Us))[0]);  // i_p99
  EXPECT_EQ(w[12], words(formatIterValue(r.outOfPlace.iter.cvPct))[0]);
  EXPECT_EQ(w[21], "r1+12%");
  // The header's columns line up with the row's: each name ends where its value ends.
  const std::string row = formatRow(r, 1);
  const std::string names = h1.substr(h1.find("#       size"));
  EXPECT_EQ(names.find("i_cv%") + 5, row.find(w[12]) + w[12].size()) << names << row;

  std::string h2 = formatTableHeader("gloo", "allreduce", "1", 2);
  EXPECT_NE(h2.find("#wrong    i_p50    i_p90    i_p99  i_p99.9    i_max     time"), std::string::npos) << h2;
  auto w2 = words(formatRow(r, 2));
  ASSERT_EQ(w2.size(), 24u);    // 5 + 2 x (4 + 5) + straggler
  EXPECT_EQ(w2[9], "12.00");    // p50
  EXPECT_EQ(w2[13], "100.00");  // max
  // Unknown tails (an older file) and an unmeasured place print "-".
  r.outOfPlace.iter.p90Us = r.outOfPlace.iter.p999Us = std::nullopt;
  r.inPlace = {};
  w2 = words(formatRow(r, 2));
  ASSERT_EQ(w2.size(), 24u);
  EXPECT_EQ(w2[10], "-");
  EXPECT_EQ(w2[12], "-");
  for (int k = 14; k < 23; ++k) EXPECT_EQ(w2[k], "-") << k;
  // nccl-tests' getFloatStr, width 7.
  EXPECT_EQ(formatIterValue(1.234), "   1.23");
  EXPECT_EQ(formatIterValue(12345.6), "12345.6");
  EXPECT_EQ(formatIterValue(123456.7), " 123457");
  EXPECT_EQ(formatIterValue(12345678.0), "1.2e+07");
}

TEST(SweepText, PerIterationPreambleLines) {
  SweepArgs a;
  a.iters = 20;
  a.perIterTiming = 1;
  a.perIterSkip = 3;
  std::string p = formatSweepPreamble(a, {});
  EXPECT_NE(
      p.find("# Per-Iteration Report: execution time of each op (the backend's own timing of the work); i_* "
             "uses max over ranks; summary skips first 3 iterations \n#\n# Using devices"),
      std::string::npos)
      << p;
  a.blocking = true;
  a.perIterSkip = 0;
  p = formatSweepPreamble(a, {});
  EXPECT_NE(
      p.find("# Per-Iteration Report: wall time of each op, from issue to completion (-z); i_* uses max over "
             "ranks \n"),
      std::string::npos)
      << p;
  // -K without -I: no nccl-tests line, but the skip is said.
  a.perIterTiming = 0;
  a.perIterSkip = 2;
  p = formatSweepPreamble(a, {});
  EXPECT_EQ(p.find("Per-Iteration Report"), std::string::npos);
  EXPECT_NE(p.find("leave out the first 2 timed iteration(s) of each size (-K)"), std::string::npos) << p;
}

TEST(SweepText, HeaderAndFooterLines) {
  std::string h = formatTableHeader("gloo", "allreduce", "2(n-1)/n = 1");
  EXPECT_NE(
      h.find(
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
          "algbw   busbw #wrong"),
      std::string::npos)
      << h;
  EXPECT_NE(
      h.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
             "(GB/s)  (GB/s)"),
      std::string::npos)
      << h;
  SweepSummary s = summarize({sampleRow()});
  s.avgBusBw = 1.5;
  EXPECT_EQ(formatFooter(s), "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  s.outOfBounds = 3;
  EXPECT_NE(formatFooter(s).find("# Out of bounds values : 3 FAILED"), std::string::npos);
  EXPECT_EQ(formatRoundingNote({sampleRow()}),
            "# Rounded as nccl-tests does (requested -> used bytes): 10->8\n");
  SweepArgs a;
  a.minBytes = 8;
  a.maxBytes = 1024;
  a.stepFactor = 2;
  a.iters = 20;
  a.warmupIters = 1;
  a.check = 1;
  const std::string first =
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
      "validation: 1 graph: 0\n";
  EXPECT_EQ(formatSweepPreamble(a, {}).substr(0, first.size()), first);
}

TEST(SweepSummary, WrongDataAndMinBandwidth) {
  auto row = sampleRow();
  row.outOfPlace.busBw = 2;
  row.inPlace.busBw = 4;
  auto s = summarize({row}, 5.0);
  EXPECT_DOUBLE_EQ(s.avgBusBw, 3);
  EXPECT_TRUE(s.bwBelowMin);  // 3 < 0.9 x 5
  EXPECT_EQ(s.status, "bandwidth_below_min");
  row.inPlace.wrong = 4;
  EXPECT_EQ(summarize({row}).outOfBounds, 4);
  EXPECT_EQ(summarize({row}).status, "wrong_data");
}

TEST(SweepJson, RoundTripsAndChecksSchema) {
  SweepRun run;
  run.args.collectives = {"allreduce"};
  run.args.backends = {"gloo"};
  run.metadata.hosts = {"h1"};
  run.metadata.versions = {{"gloo", "0.5.0"}};
  run.results = {sampleRow()};
  run.notes = {"skipped: x"};
  run.summary = summarize(run.results);
  auto j = sweepToJson(run);
  EXPECT_EQ(j["schema"], "dsperf.sweep");
  EXPECT_EQ(j["schema_version"], "1.3");
  EXPECT_EQ(j["results"][0]["out_of_place"]["nwrong"], 0);
  EXPECT_EQ(j["results"][0]["in_place"]["iter"]["p50_us"], 18.0);
  auto back = sweepFromJson(j, "x.json");
  EXPECT_EQ(back.results.size(), 1u);
  EXPECT_EQ(back.results[0].outOfPlace.ranks[1].timeUs, 19.7);
  EXPECT_EQ(back.notes[0], "skipped: x");
  j["schema_version"] = 99;
  EXPECT_THROW(sweepFromJson(j, "x.json"), ds::ConfigError);
  EXPECT_THROW(sweepFromJson(nlohmann::json{{"schema", "dsperf.world"}}, "x.json"), ds::ConfigError);
}

TEST(SweepJournal, KilledRunLeavesAReadableJournal) {
  ds::testing::TempDir dir;
  std::string path = journalPathFor(dir.file("r.json"));
  EXPECT_EQ(path, dir.file("r.journal.jsonl"));
  {
    SweepJournal j(path, SweepArgs{}, SweepMetadata{});
    j.append(sampleRow());
    j.append(sampleRow());
  }
  // A kill mid-write leaves a cut line.
  std::ofstream(path, std::ios::app) << R"({"type": "measurement", "result": {"backe)";
  auto run = readSweepJournal(path);
  EXPECT_EQ(run.results.size(), 2u);
  EXPECT_EQ(run.summary.status, "incomplete");
  // A finished run appended to the same file: the reader takes the last run.
  {
    std::ofstream(path, std::ios::app) << "\n";
    SweepJournal j(path, SweepArgs{}, SweepMetadata{});
    j.append(sampleRow());
    j.note("skipped: y");
    j.end(summarize({sampleRow()}), "2026-01-01T00:00:00.000Z");
  }
  run = readSweepJournal(path);
  EXPECT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.summary.status, "ok");
  EXPECT_EQ(run.notes, std::vector<std::string>{"skipped: y"});
  std::ofstream(dir.file("empty.jsonl")) << "not json\n";
  EXPECT_THROW(readSweepJournal(dir.file("empty.jsonl")), ds::ConfigError);
}

TEST(SweepJson, ARunCutOffInALaterTableLeavesAJsonOfTheFinishedTables) {
  // issue 42: --backend gloo,shm,mpi -J sweep.json whose mpi start ended the process left no JSON.
  ds::testing::TempDir dir;
  const std::string path = dir.file("sweep.json");
  SweepRun run;
  run.args.backends = {"gloo", "mpi"};
  run.metadata.hosts = {"h1"};
  JsonReporter json(path);
  json.start(run);
  SweepTable gloo{"gloo", "allreduce", "2(n-1)/n = 1"};
  json.tableStart(gloo);
  SweepMeasurement big = sampleRow(), small = sampleRow();
  big.bytes = 1024;
  json.measurement(big);  // --repeat measures in a rotated order; the table ends in size order
  json.measurement(small);
  json.note("skipped: z");
  json.tableEnd(gloo, {small, big});
  json.tableStart(SweepTable{"mpi", "allreduce", ""});
  json.measurement(sampleRow());  // a row of the table that never ended
  // ... and here the process ends: what the file holds is the gloo table, marked incomplete.
  auto cut = sweepFromJson(readJson(path), path);
  ASSERT_EQ(cut.results.size(), 2u);
  EXPECT_EQ(cut.results[0].bytes, 8u);
  EXPECT_EQ(cut.results[1].bytes, 1024u);
  EXPECT_EQ(cut.notes, std::vector<std::string>{"skipped: z"});
  EXPECT_EQ(cut.summary.status, "incomplete");
  EXPECT_NE(cut.summary.error.find("stopped after the gloo allreduce table"), std::string::npos)
      << cut.summary.error;
  // A run that ends replaces the checkpoint with its own summary.
  run.results = {small, big, sampleRow()};
  run.summary = summarize(run.results);
  json.finish(run);
  auto done = sweepFromJson(readJson(path), path);
  EXPECT_EQ(done.results.size(), 3u);
  EXPECT_EQ(done.summary.status, "ok");
}

TEST(SweepProgress, Line) {
  SweepProgress p{{"gloo", "allreduce", ""}, "f32", "sum", 1536, 3, 12, 6.0};
  EXPECT_EQ(formatProgress(p), "gloo allreduce f32 sum 1.5 KiB  [4/12]  ETA 18 s");
  EXPECT_EQ(humanBytes(268435456), "256 MiB");
}
