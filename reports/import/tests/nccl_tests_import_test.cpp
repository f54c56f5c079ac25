// nccl-tests import on sample outputs written from the documented format (tests/data): golden output
// of the modern text layout, the older layouts, the -J JSON, and the errors for cut or foreign text.
#include "reports/import/nccl_tests_import.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/compare/compare.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"

using namespace ds::report;

namespace {

std::string data(const std::string& name) { return std::string(DS_IMPORT_DATA_DIR) + "/" + name; }

std::string text(const std::string& name) {
  std::ifstream in(data(name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

TEST(NcclTestsImport, ModernTextMatchesTheGoldenSweep) {
  SweepRun run = importNcclTestsText(text("all_reduce_2.13.txt"), "all_reduce_2.13.txt", {});
  nlohmann::json got = sweepToJson(run);
  if (std::getenv("DS_UPDATE_GOLDEN")) writeJsonAtomic(data("all_reduce_2.13.expected.json"), got);
  nlohmann::json want = readJson(data("all_reduce_2.13.expected.json"));
  EXPECT_EQ(got, want) << nlohmann::json::diff(want, got).dump(1);
  // The figures a reader relies on, spelled out.
  ASSERT_EQ(run.results.size(), 4u);
  const auto& big = run.results[3];
  EXPECT_EQ(big.collective, "allreduce");
  EXPECT_EQ(big.backend, "nccl");
  EXPECT_EQ(big.dtype, "f32");
  EXPECT_EQ(big.op, "sum");
  EXPECT_EQ(big.root, -1);
  EXPECT_EQ(big.bytes, 33554432u);
  EXPECT_EQ(big.count, 8388608u);
  EXPECT_DOUBLE_EQ(big.outOfPlace.timeUs, 260.0);
  EXPECT_DOUBLE_EQ(big.outOfPlace.busBw, 193.58);
  EXPECT_DOUBLE_EQ(big.inPlace.algBw, 127.78);
  EXPECT_EQ(big.outOfPlace.wrong, 0);
  EXPECT_NEAR(big.busFactor, 1.5, 0.01);
  EXPECT_EQ(big.worldSize, 4);
  EXPECT_EQ(run.metadata.hosts, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(run.metadata.ranks[3].localRank, 1);
  EXPECT_EQ(run.metadata.ranks[3].nodeRank, 1);
  EXPECT_EQ(run.metadata.ranks[2].device, "cuda:0 NVIDIA H100 80GB HBM3");
  EXPECT_EQ(run.metadata.versions.at("nccl_tests"), "2.13.9");
  EXPECT_EQ(run.metadata.versions.at("nccl"), "2.19.3");
  EXPECT_EQ(run.args.iters, 20);
  EXPECT_EQ(run.args.stepFactor, 32);
  EXPECT_EQ(run.metadata.source, "nccl-tests 2.13.9 (imported from all_reduce_2.13.txt)");
}

TEST(NcclTestsImport, OlderLayoutWithErrorColumnNeedsTheCollective) {
  auto t = text("all_reduce_old_error_column.txt");
  EXPECT_NE(messageOf([&] {
              importNcclTestsText(t, "old.txt", {});
            }).find("old.txt does not say which collective it measured"),
            std::string::npos);
  NcclImportOptions o;
  o.collective = "all_reduce_perf";
  o.label = "v100-box";
  SweepRun run = importNcclTestsText(t, "old.txt", o);
  ASSERT_EQ(run.results.size(), 2u);
  EXPECT_EQ(run.results[0].collective, "allreduce");
  EXPECT_EQ(run.results[0].root, -1);
  EXPECT_EQ(run.results[1].outOfPlace.wrong, 0);
  EXPECT_DOUBLE_EQ(run.results[1].outOfPlace.timeUs, 40.0);
  EXPECT_EQ(run.metadata.worldSize, 2);
  EXPECT_EQ(run.metadata.hosts, std::vector<std::string>{"gpu-01"});
  EXPECT_EQ(run.metadata.label, "v100-box");
  EXPECT_EQ(run.args.iters, 50);
}

TEST(NcclTestsImport, TypeOnlyLayoutWithTimestampsAndUncheckedRows) {
  SweepRun run = importNcclTestsText(text("all_gather_timestamps.txt"), "ag.txt", {});
  ASSERT_EQ(run.results.size(), 3u);
  EXPECT_EQ(run.results[0].collective, "allgather");
  EXPECT_EQ(run.results[0].dtype, "f16");
  EXPECT_EQ(run.results[0].op, "none");
  EXPECT_EQ(run.results[2].inPlace.wrong, -1);  // N/A: not checked
  EXPECT_DOUBLE_EQ(run.results[2].inPlace.timeUs, 24.24);
  EXPECT_EQ(run.summary.outOfBounds, 0);
}

TEST(NcclTestsImport, JsonFormat3WithPerIterationStatistics) {
  SweepRun run = importNcclTestsFile(data("all_reduce_j3.json"), {});
  ASSERT_EQ(run.results.size(), 3u);
  EXPECT_EQ(run.results[0].collective, "allreduce");
  EXPECT_EQ(run.results[1].root, -1);
  EXPECT_EQ(run.results[1].outOfPlace.iters, 40);
  EXPECT_DOUBLE_EQ(run.results[1].outOfPlace.iter.stdevUs, 0.9);
  EXPECT_EQ(run.results[1].outOfPlace.iter.n, 40);
  EXPECT_EQ(run.metadata.hosts, std::vector<std::string>{"node-c"});
  EXPECT_EQ(run.metadata.versions.at("nccl"), "2.23.4");
  EXPECT_NE(run.metadata.commandLine.find("all_reduce_perf -b 8"), std::string::npos);
  // An imported run compares with itself: one sample a side, every change within the threshold.
  RunFile a = loadRunFile(data("all_reduce_j3.json"));
  EXPECT_EQ(a.origin, "nccl-tests json");
  auto r = compareRuns(a, a, {});
  ASSERT_EQ(r.items.size(), 6u);
  EXPECT_FALSE(r.items[0].noiseKnown);  // one pass a side: no spread of repeats to show
  EXPECT_EQ(r.exitCode(), 0);
}

// nccl-tests 2.19 with -I 1 -K 2: its JSON's "<place>_per_iter" objects give the statistics as it
// printed them (p99 by nearest rank), every iteration's time, and, from those times without the
// skipped ones, the p90 and p99.9 it does not compute. Its text table's i_* columns are read past.
TEST(NcclTestsImport, PerIterationReportOfNcclTests219) {
  SweepRun run = importNcclTestsFile(data("all_reduce_2.19_per_iter.json"), {});
  ASSERT_EQ(run.results.size(), 2u);
  const PlaceResult& p = run.results[0].outOfPlace;
  EXPECT_DOUBLE_EQ(p.iter.p99Us, 55.0) << "nccl-tests' own figure";
  EXPECT_DOUBLE_EQ(p.iter.minUs, 10.2);
  ASSERT_EQ(p.timesUs.size(), 10u) << "every iteration, the skipped ones too";
  EXPECT_DOUBLE_EQ(p.timesUs[0], 30.1);
  EXPECT_EQ(p.iter.n, 8) << "10 iterations, 2 skipped";
  std::vector<double> kept(p.timesUs.begin() + 2, p.timesUs.end());
  IterStats mine = computeIterStats(kept);
  ASSERT_TRUE(p.iter.p90Us && p.iter.p999Us);
  EXPECT_DOUBLE_EQ(*p.iter.p90Us, *mine.p90Us);
  EXPECT_DOUBLE_EQ(*p.iter.p999Us, *mine.p999Us);
  EXPECT_GT(*p.iter.p999Us, 50.0) << "the 55 us outlier is the tail";
  // Written back as our JSON, the times stay.
  auto j = sweepToJson(run);
  EXPECT_EQ(j["results"][0]["out_of_place"]["times_us"].size(), 10u);
  EXPECT_TRUE(j["results"][0]["out_of_place"]["iter"].contains("p999_us"));

  // The older format-3 file has no times: p90 and p99.9 are unknown, not 0.
  SweepRun j3 = importNcclTestsFile(data("all_reduce_j3.json"), {});
  EXPECT_FALSE(j3.results[0].outOfPlace.iter.p90Us.has_value());
  EXPECT_FALSE(j3.results[0].outOfPlace.iter.p999Us.has_value());
  EXPECT_TRUE(j3.results[0].outOfPlace.timesUs.empty());
  EXPECT_FALSE(sweepToJson(j3)["results"][0]["out_of_place"]["iter"].contains("p90_us"));

  SweepRun t = importNcclTestsFile(data("all_reduce_2.19_per_iter.txt"), {});
  ASSERT_EQ(t.results.size(), 2u);
  EXPECT_DOUBLE_EQ(t.results[1].inPlace.timeUs, 27.27);
  EXPECT_DOUBLE_EQ(t.results[1].inPlace.busBw, 38.45);
  EXPECT_EQ(t.results[1].inPlace.wrong, 0);
  EXPECT_EQ(t.results[1].outOfPlace.iter.n, 0) << "the i_* columns are not whole statistics";
  bool noted = false;
  for (const auto& n : t.notes) noted = noted || n.find("i_min i_max i_p99 i_cv%") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(NcclTestsImport, TruncatedAndForeignTextNameTheLine) {
  EXPECT_EQ(
      messageOf([] { importNcclTestsFile(data("truncated.txt"), {}); }),
      data("truncated.txt") +
          " line 19: expected a result row of 13 columns (size count type redop root | time algbw busbw "
          "#wrong | time algbw busbw #wrong) as the header at line 14 announces, found 2: '1048576        "
          "262144'. The output is truncated or altered; import the complete nccl-tests output.");
  EXPECT_NE(messageOf([] {
              importNcclTestsFile(data("no_footer.txt"), {});
            }).find("ends at line 18 inside the table that starts at line 14, without nccl-tests' footer"),
            std::string::npos);
  EXPECT_NE(messageOf([] {
              importNcclTestsFile(data("foreign.txt"), {});
            }).find("foreign.txt line 1: 'Starting job 4242 on node-a' is not nccl-tests output"),
            std::string::npos);
  auto altered = text("all_reduce_2.13.txt");
  altered.replace(altered.find("   260.00"), 9, "   2x0.00");
  EXPECT_NE(messageOf([&] {
              importNcclTestsText(altered, "x.txt", {});
            }).find("x.txt line 20: the out-of-place columns of"),
            std::string::npos);
  EXPECT_THROW(importNcclTestsText("", "empty.txt", {}), ds::ConfigError);
  EXPECT_NE(messageOf([] {
              importNcclTestsJson(nlohmann::json{{"version", 4}, {"results", nlohmann::json::array()}},
                                  "v4.json", {});
            }).find("format version is 4"),
            std::string::npos);
  ds::testing::TempDir dir;
  {
    std::ofstream out(dir.file("cut.json"));
    out << text("all_reduce_j3.json").substr(0, 300);
  }
  EXPECT_NE(messageOf([&] { importNcclTestsFile(dir.file("cut.json"), {}); }).find("it ends early"),
            std::string::npos);
  // Valid syntax nlohmann::json still refuses (a number beyond a double, found by run_file_fuzz): a
  // ConfigError naming the file, not a bare library exception.
  {
    std::ofstream out(dir.file("huge.json"));
    out << R"({"version": 3, "results": [{"time": 2e88888885}]})";
  }
  const std::string huge = messageOf([&] { importNcclTestsFile(dir.file("huge.json"), {}); });
  EXPECT_NE(huge.find("huge.json cannot be read as JSON: at line 1 column "), std::string::npos) << huge;
  EXPECT_NE(huge.find(", inside /results/0/time, a number is too large for a double"),
            std::string::npos)
      << huge;
  EXPECT_NE(huge.find("rerun nccl-tests"), std::string::npos) << huge;
  const std::string viaLoader = messageOf([&] { loadRunFile(dir.file("huge.json")); });
  EXPECT_NE(viaLoader.find("huge.json cannot be read as JSON"), std::string::npos) << viaLoader;
}

TEST(NcclTestsImport, CollectiveNames) {
  EXPECT_EQ(collectiveFromNcclTests(" ./build/all_reduce_perf"), "allreduce");
  EXPECT_EQ(collectiveFromNcclTests("all_gather_perf"), "allgather");
  EXPECT_EQ(collectiveFromNcclTests("reduce_scatter_perf"), "reduce_scatter");
  EXPECT_EQ(collectiveFromNcclTests("alltoall_perf"), "alltoall");
  EXPECT_EQ(collectiveFromNcclTests("sendrecv"), "sendrecv");
  EXPECT_TRUE(looksLikeNcclTests(text("all_reduce_2.13.txt")));
  EXPECT_FALSE(looksLikeNcclTests(text("foreign.txt")));
}

TEST(NcclTestsImport, TheImportedJsonIsARunFileForEveryOtherSubcommand) {
  ds::testing::TempDir dir;
  writeJsonAtomic(dir.file("run.json"), sweepToJson(importNcclTestsFile(data("all_reduce_2.13.txt"), {})));
  RunFile f = loadRunFile(dir.file("run.json"));
  EXPECT_EQ(f.kind, RunKind::kSweep);
  EXPECT_EQ(f.sweep->results.size(), 4u);
  RunFile direct = loadRunFile(data("all_reduce_2.13.txt"));
  EXPECT_EQ(direct.origin, "nccl-tests text");
  EXPECT_EQ(direct.runId, f.runId);
}

namespace {

RunFile importedRunFile(ds::testing::TempDir& dir, const std::string& name) {
  NcclImportOptions o;
  o.collective = "all_reduce_perf";  // the older layouts do not name it
  writeJsonAtomic(dir.file(name + ".json"), sweepToJson(importNcclTestsFile(data(name), o)));
  return loadRunFile(dir.file(name + ".json"));
}

}  // namespace

// The same system's all_reduce in the three text layouts nccl-tests has printed (modern with redop and
// root, no redop/root column, redop with the older max-error column) imports to rows that match one
// another: same op, root and checked status, so compare finds every row in every pair.
TEST(NcclTestsImport, ThreeLayoutsOfOneSystemCompareRowByRow) {
  ds::testing::TempDir dir;
  std::vector<std::string> files{"all_reduce_2.13.txt", "all_reduce_no_redop.txt", "all_reduce_error_column.txt"};
  std::vector<RunFile> runs;
  for (const auto& f : files) runs.push_back(importedRunFile(dir, f));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(files[i]);
    ASSERT_EQ(runs[i].sweep->results.size(), 4u);
    for (const auto& m : runs[i].sweep->results) {
      EXPECT_EQ(m.op, "sum");
      EXPECT_EQ(m.root, -1);
      EXPECT_EQ(m.outOfPlace.wrong, 0);
      EXPECT_EQ(m.inPlace.wrong, 0);
    }
    EXPECT_EQ(runs[i].sweep->summary.status, "ok");
  }
  for (std::size_t a = 0; a < runs.size(); ++a) {
    for (std::size_t b = 0; b < runs.size(); ++b) {
      if (a == b) continue;
      SCOPED_TRACE(files[a] + " vs " + files[b]);
      CompareResult r = compareRuns(runs[a], runs[b]);
      EXPECT_TRUE(r.comparable);
      EXPECT_EQ(r.items.size(), 8u);  // 4 sizes x out-of-place, in-place
      EXPECT_TRUE(r.notCompared.empty()) << r.notCompared.front().what << ": " << r.notCompared.front().reason;
    }
  }
  // The layout without a redop column says where its op came from.
  bool noted = false;
  for (const auto& n : runs[1].sweep->notes) noted = noted || n.find("no redop column") != std::string::npos;
  EXPECT_TRUE(noted);
}

// The older "error" column is a maximum deviation (a float), not a count of wrong elements: 1e-07 with
// a footer of "0 OK" is a clean row; a footer that counts failures marks the run without inventing
// which rows failed.
TEST(NcclTestsImport, ErrorColumnIsAMaximumErrorSettledByTheFooter) {
  NcclImportOptions o;
  o.collective = "all_reduce_perf";
  SweepRun ok = importNcclTestsText(text("all_reduce_error_column.txt"), "ok.txt", o);
  EXPECT_EQ(ok.results[1].outOfPlace.wrong, 0);  // error 1e-07
  EXPECT_EQ(ok.summary.status, "ok");
  EXPECT_EQ(ok.summary.outOfBounds, 0);

  SweepRun bad = importNcclTestsText(text("all_reduce_error_column_failed.txt"), "bad.txt", o);
  ASSERT_EQ(bad.results.size(), 2u);
  EXPECT_EQ(bad.results[0].outOfPlace.wrong, -1);
  EXPECT_EQ(bad.results[1].inPlace.wrong, -1);
  EXPECT_EQ(bad.summary.status, "wrong_data");
  EXPECT_EQ(bad.summary.outOfBounds, 2);
  bool noted = false;
  for (const auto& n : bad.notes) noted = noted || n.find("reported 2 out-of-bounds value(s)") != std::string::npos;
  EXPECT_TRUE(noted);
}

// Without a root column, rooted collectives ran with nccl-tests' default root 0; others have none (-1).
TEST(NcclTestsImport, MissingRootAndRedopColumnsTakeNcclTestsDefaults) {
  std::string t =
      "#       size         count    type     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
      "        1024           256   float    10.00    0.10    0.10       0    10.00    0.10    0.10       0\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 0.1\n";
  for (auto [name, op, root] : {std::tuple{"broadcast_perf", "none", 0}, std::tuple{"reduce_perf", "sum", 0},
                                std::tuple{"all_gather_perf", "none", -1}, std::tuple{"alltoall_perf", "none", -1},
                                std::tuple{"reduce_scatter_perf", "sum", -1}}) {
    SCOPED_TRACE(name);
    NcclImportOptions o;
    o.collective = name;
    SweepRun run = importNcclTestsText(t, "t.txt", o);
    ASSERT_EQ(run.results.size(), 1u);
    EXPECT_EQ(run.results[0].op, op);
    EXPECT_EQ(run.results[0].root, root);
  }
}
