// ds_peers_report on fixture rounds (dsperf.sweep files written by the real writer): every target is
// judged under mean, p50 and p99 (issue 29), each with the median round by that statistic; a target
// whose mean passes and whose p99 misses is said to miss, naming the statistics that pass; rows
// without per-iteration figures keep their time; bad flags are sentences.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_schema.h"

using namespace ds::testing;
using namespace ds::report;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct Fig {
  double mean, p50, p99;
  bool perIter = true;  // false: no per-iteration figures (as membw-limit's bound)
};

SweepMeasurement row(const std::string& backend, std::size_t bytes, const Fig& f) {
  SweepMeasurement m;
  m.backend = backend;
  m.collective = "allreduce";
  m.dtype = "f32";
  m.op = "sum";
  m.worldSize = 2;
  m.requestedBytes = m.bytes = bytes;
  m.count = bytes / 4;
  m.busFactor = 1;
  PlaceResult& p = m.inPlace;
  p.measured = true;
  p.iters = 20;
  p.timeUs = f.mean;
  p.algBw = static_cast<double>(bytes) / 1e3 / f.mean;
  p.busBw = p.algBw;
  p.wrong = 0;
  if (f.perIter) {
    p.iter.n = 20;
    p.iter.p50Us = f.p50;
    p.iter.p99Us = f.p99;
    p.iter.minUs = f.p50 * 0.9;
    p.iter.maxUs = f.p99 * 1.1;
    p.iter.avgUs = f.mean;
  }
  return m;
}

std::string write(TempDir& dir, const std::string& name, const std::vector<SweepMeasurement>& rows) {
  SweepRun run;
  run.args.collectives = {"allreduce"};
  run.args.backends = {rows.front().backend};
  run.metadata.worldSize = 2;
  run.metadata.commandLine = "fixture";
  run.results = rows;
  run.summary = summarize(rows);
  const std::string path = dir.file(name);
  writeJsonAtomic(path, sweepToJson(run));
  return path;
}

// The line of `out` that holds `needle` (the first), or "".
std::string lineWith(const std::string& out, const std::string& needle, std::size_t from = 0) {
  auto at = out.find(needle, from);
  if (at == std::string::npos) return "";
  auto b = out.rfind('\n', at);
  auto e = out.find('\n', at);
  return out.substr(b == std::string::npos ? 0 : b + 1,
                    e == std::string::npos ? std::string::npos : e - b - 1);
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

struct Fixture {
  TempDir dir{"ds_peers_report"};
  std::vector<std::string> args;
  Fixture() {
    // unbound: shm at 8 B as fast as raw MPI on the mean and the median, but its p99 is 4x raw MPI's.
    // raw MPI's three rounds: the median by mean (1.0) is not the median by p99 (1.2).
    args = {
        "--placement", "unbound",
        write(dir, "u-shm.json",
              {row("shm", 8, {1.0, 0.9, 5.0}), row("shm", 32 * kMiB, {10000, 9000, 12000})}),
        write(dir, "u-raw1.json",
              {row("mpi-raw", 8, {1.0, 1.0, 2.0}), row("mpi-raw", 32 * kMiB, {30000, 30000, 30000})}),
        write(dir, "u-raw2.json",
              {row("mpi-raw", 8, {0.8, 0.8, 1.2}), row("mpi-raw", 32 * kMiB, {30000, 30000, 30000})}),
        write(dir, "u-raw3.json",
              {row("mpi-raw", 8, {1.2, 1.1, 1.0}), row("mpi-raw", 32 * kMiB, {30000, 30000, 30000})}),
        write(dir, "u-mpi.json",
              {row("mpi", 8, {1.5, 1.2, 3.0}), row("mpi", 32 * kMiB, {30600, 30000, 30000})}),
        // our gloo beats torch's on the mean and the median, not at p99
        write(dir, "u-gloo.json",
              {row("gloo", 8, {90, 95, 300}), row("gloo", 32 * kMiB, {40000, 39000, 80000})}),
        write(dir, "u-torch.json",
              {row("torch-gloo", 8, {100, 100, 150}), row("torch-gloo", 32 * kMiB, {41000, 40000, 42000})}),
        // the bound has no per-iteration figures: its time stands under every statistic
        write(dir, "u-limit.json", {row("membw-limit", 32 * kMiB, {8000, 0, 0, false})}), "--placement",
        "hog", write(dir, "h-shm.json", {row("shm", 8, {30, 20, 90})}),
        write(dir, "h-raw.json", {row("mpi-raw", 8, {1.0, 1.0, 1.5})})};
  }
  RunResult report(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{binDir() + "/ds_peers_report"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, cleanOptions(std::chrono::seconds(30)));
  }
};

}  // namespace

TEST(PeersReport, MeanPassesP99MissesAndTheTargetMisses) {
  Fixture f;
  auto r = f.report({"--summary", f.dir.file("summary.txt")});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  // The shm 8 B target (issue 29): mean <= 1.5 and p99 <= 2 required, p50 judged for information.
  std::string shm = lineWith(r.out, "shm / raw MPI_Allreduce time at 8 B (<= 1.5; p99 <= 2.0)");
  ASSERT_FALSE(shm.empty()) << r.out;
  EXPECT_NE(shm.find("| 1.00x PASS*"), std::string::npos) << shm;
  EXPECT_NE(shm.find("| 0.90x PASS "), std::string::npos) << shm;
  // 5.0 against the median round by p99 (1.2), not the median round by mean (whose p99 is 2.0).
  EXPECT_NE(shm.find("| 4.17x MISS*"), std::string::npos) << shm;
  EXPECT_NE(shm.find("| MISS (passes: mean, p50)"), std::string::npos) << shm;
  // gloo against torch: the mean is required and passes; p99 misses for information only.
  std::string gloo = lineWith(r.out, "gloo / torch gloo time, every size (<= 1.0)");
  ASSERT_FALSE(gloo.empty()) << r.out;
  EXPECT_NE(gloo.find("| 0.98x PASS*"), std::string::npos) << gloo;  // worst size: 32 MiB, 40000 / 41000
  EXPECT_NE(gloo.find("| 2.00x MISS "), std::string::npos) << gloo;
  EXPECT_NE(gloo.find("| PASS (passes: mean, p50)"), std::string::npos) << gloo;
  // The engine's mpi: +0.50 us at 8 B on the mean (1.5 - 1.0), +2.0% at >= 1 MiB.
  EXPECT_NE(lineWith(r.out, "engine mpi overhead over raw MPI at 8 B").find("| +0.50us PASS*"),
            std::string::npos)
      << r.out;
  EXPECT_NE(lineWith(r.out, "engine mpi overhead over raw MPI, >= 1M").find("| +2.0% PASS*"),
            std::string::npos)
      << r.out;
  // The limit has no per-iteration figures: under p99 shm's 12000 us is judged against its 8000 us.
  std::string lim = lineWith(r.out, "shm busbw / zero-copy limit, >= 32M (>= 0.75)");
  EXPECT_NE(lim.find("| 0.80 PASS*"), std::string::npos) << lim;
  EXPECT_NE(lim.find("| 0.67 MISS "), std::string::npos) << lim;
  // Beside the hog, shm at 8 B is reported, not a target.
  auto hog = r.out.find("######## placement: hog");
  ASSERT_NE(hog, std::string::npos);
  std::string hogShm = lineWith(r.out, "shm / raw MPI_Allreduce time at 8 B", hog);
  EXPECT_NE(hogShm.find("| 30.00x"), std::string::npos) << hogShm;
  EXPECT_NE(hogShm.find("info (not a target under this placement)"), std::string::npos) << hogShm;
  // The matrix: a row per statistic and a verdict row, per placement.
  auto matrix = r.out.find("######## placement matrix");
  ASSERT_NE(matrix, std::string::npos) << r.out;
  std::string m = r.out.substr(matrix);
  auto first = m.find("shm / raw MPI_Allreduce time at 8 B");
  ASSERT_NE(first, std::string::npos);
  std::istringstream lines(m.substr(m.rfind('\n', first) + 1));
  std::string l0, l1, l2, l3;
  std::getline(lines, l0);
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  EXPECT_NE(l0.find(" mean  | 1.00x PASS*"), std::string::npos) << l0;
  EXPECT_NE(l1.find(" p50   | 0.90x PASS"), std::string::npos) << l1;
  EXPECT_NE(l2.find(" p99   | 4.17x MISS*"), std::string::npos) << l2;
  EXPECT_NE(l3.find(" =>    | MISS (mean, p50)"), std::string::npos) << l3;
  EXPECT_NE(l3.find("| info"), std::string::npos) << l3;
  EXPECT_EQ(m.find("n/a (none)"), std::string::npos) << "a target without figures is n/a, not 'passes none'";
  // The summary: targets x placements, the verdicts per statistic.
  std::string summary = readFile(f.dir.file("summary.txt"));
  std::string s8 = lineWith(summary, "shm / raw MPI_Allreduce time at 8 B");
  EXPECT_NE(s8.find("[mean*, p99*]"), std::string::npos) << summary;
  EXPECT_NE(s8.find("| PPM MISS"), std::string::npos) << summary;
  EXPECT_NE(s8.find("| info"), std::string::npos) << summary;
  EXPECT_NE(lineWith(summary, "gloo / torch gloo").find("| PPM PASS"), std::string::npos) << summary;
}

TEST(PeersReport, MarkdownHoldsTheMatrixAndEveryStatisticsTimes) {
  Fixture f;
  auto r = f.report({"--markdown", f.dir.file("tables.md"), "--note", "source abc123, the fixture"});
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  std::string md = readFile(f.dir.file("tables.md"));
  EXPECT_NE(md.find("- source abc123, the fixture\n"), std::string::npos) << md;
  // The matrix: a column per placement, a row per statistic, then the verdict with what passes.
  EXPECT_NE(md.find("| target | statistic | unbound | hog |\n|---|---|---|---|\n"), std::string::npos) << md;
  EXPECT_NE(
      md.find("| shm / raw MPI_Allreduce time at 8 B (<= 1.5; p99 <= 2.0) | mean | 1.00x PASS* | 30.00x |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("|  | p99 | 4.17x MISS* | 60.00x |"), std::string::npos) << md;
  EXPECT_NE(md.find("|  | **verdict** | **MISS** (mean, p50) | info |"), std::string::npos) << md;
  // The times: mean / p50 / p99 of each peer, per placement; a peer that did not run is left out of
  // that placement's table, a size it lacks reads "-".
  auto unbound = md.find("**unbound, 2 ranks**");
  ASSERT_NE(unbound, std::string::npos) << md;
  EXPECT_NE(
      lineWith(md, "| size |", unbound).find("| size | shm | gloo | torch's gloo | engine mpi | raw MPI |"),
      std::string::npos)
      << md;
  EXPECT_NE(lineWith(md, "| 8 B |", unbound)
                .find("| 8 B | 1.00 / 0.90 / 5.00 | 90.0 / 95.0 / 300 | 100 / 100 / 150 |"),
            std::string::npos)
      << md;
  EXPECT_NE(lineWith(md, "| 32 MiB |", unbound).find("| 10000 / 9000 / 12000 |"), std::string::npos) << md;
  auto hog = md.find("**hog, 2 ranks**");
  ASSERT_NE(hog, std::string::npos) << md;
  EXPECT_EQ(lineWith(md, "| 8 B |", hog), "| 8 B | 30.0 / 20.0 / 90.0 | 1.00 / 1.00 / 1.50 |") << md;
}

TEST(PeersReport, StatPicksTheTablesAndTheRowsWritten) {
  Fixture f;
  auto mean = f.report({"-o", f.dir.file("mean.json")});
  auto p99 = f.report({"--stat", "p99", "-o", f.dir.file("p99.json")});
  ASSERT_EQ(mean.exitCode, 0) << mean.err;
  ASSERT_EQ(p99.exitCode, 0) << p99.err;
  EXPECT_NE(mean.out.find("tables by loop time per op (nccl-tests' time, the mean) (--stat mean)"),
            std::string::npos)
      << mean.out;
  EXPECT_NE(p99.out.find("tables by p99 of the per-iteration times"), std::string::npos) << p99.out;
  // The time table's raw column at 8 B: the median round by each statistic, shown by it.
  auto rawUs = [](const std::string& out) {
    auto at = out.find("  shm us ");
    auto w = words(lineWith(out, "       8 |", at));
    return w.size() > 5 ? w[5] : std::string("?");
  };
  EXPECT_EQ(rawUs(mean.out), "1.00");
  EXPECT_EQ(rawUs(p99.out), "1.20");
  // The targets are the same in both: all three statistics every time.
  EXPECT_EQ(lineWith(mean.out, "time at 8 B (<= 1.5"), lineWith(p99.out, "time at 8 B (<= 1.5"));
  // The rows written: each group's median round by the chosen statistic.
  auto rawRow = [](const std::string& path) {
    auto run = sweepFromJson(readJson(path), path);
    for (const auto& m : run.results)
      if (m.backend == "mpi-raw" && m.bytes == 8 && m.placement == "unbound") return m.inPlace.timeUs;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(rawRow(f.dir.file("mean.json")), 1.0);
  EXPECT_DOUBLE_EQ(rawRow(f.dir.file("p99.json")), 0.8);  // the round whose p99 is the median, 1.2
}

TEST(PeersReport, BadFlagsAreSentences) {
  Fixture f;
  auto r = f.report({"--stat", "p95"});
  EXPECT_EQ(r.exitCode, 5) << r.out << r.err;
  EXPECT_NE(
      r.err.find("--stat: 'p95' is not one of mean, p50, p99."),
      std::string::npos)
      << r.err;
  r = f.report({"--summary"});  // the flag after it is not a file name
  EXPECT_EQ(r.exitCode, 5) << r.err;
  EXPECT_NE(r.err.find("--summary: '--placement' is the next flag, not a file name"), std::string::npos) << r.err;
  r = run({binDir() + "/ds_peers_report", "-o"}, cleanOptions(std::chrono::seconds(10)));
  EXPECT_EQ(r.exitCode, 5) << r.err;
  EXPECT_NE(r.err.find("-o: 1 required"), std::string::npos) << r.err;
  auto help = run({binDir() + "/ds_peers_report", "--help"}, cleanOptions(std::chrono::seconds(10)));
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("--stat TEXT:{mean, p50, p99}"), std::string::npos) << help.out;
}
