// `dsbench coll` run for real on tiny sizes, under dsrun and under mpirun: the text table keeps
// nccl-tests' columns and footer, the JSON passes the schema reader, the journal is complete.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_journal.h"
#include "reports/sweep/sweep_schema.h"

using namespace ds::testing;

namespace {

RunOptions cleanEnv() { return cleanOptions(std::chrono::seconds(60)); }

RunOptions mpiEnv() { return mpirunOptions(std::chrono::seconds(60)); }

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

// Data rows of the table (lines that do not start with '#').
std::vector<std::vector<std::string>> tableRows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    rows.push_back(words(line));
  }
  return rows;
}

int countLines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.empty() ? 0 : 1;
  return n;
}

}  // namespace

TEST(CollUnderDsrun, EveryCollectiveTwoRanks) {
  TempDir dir;
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsbench", "coll",
                "--coll", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-J", dir.file("out.json")},
               cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  // nccl-tests' header, column names and footer.
  EXPECT_NE(
      r.out.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 4096 step: 8(factor) warmup iters: 1 iters: 3"),
      std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                 "time   algbw   busbw #wrong"),
      std::string::npos);
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK\n"), std::string::npos);
  EXPECT_NE(r.out.find("# Avg bus bandwidth    : "), std::string::npos);
  auto rows = tableRows(r.out);
  ASSERT_EQ(rows.size(), 7u * 4u) << r.out;  // 7 collectives x (8, 64, 512, 4096)
  for (const auto& w : rows) {
    ASSERT_EQ(w.size(), 14u) << r.out;
    EXPECT_EQ(w[2], "float");
    EXPECT_TRUE(w[8] == "0") << "out-of-place #wrong: " << w[8];
    EXPECT_GT(std::stod(w[5]), 0.0) << "time";
  }
  // sendrecv has no in-place form.
  EXPECT_EQ(rows.back()[9], "-");

  auto j = ds::report::readJson(dir.file("out.json"));
  auto run = ds::report::sweepFromJson(j, "out.json");
  ASSERT_EQ(run.results.size(), 28u);
  EXPECT_EQ(run.summary.status, "ok");
  EXPECT_EQ(run.summary.outOfBounds, 0);
  EXPECT_EQ(run.metadata.worldSize, 2);
  ASSERT_EQ(run.metadata.ranks.size(), 2u);
  EXPECT_NE(run.metadata.ranks[0].pid, run.metadata.ranks[1].pid);
  EXPECT_EQ(run.metadata.launcher, "dsrun/torchrun");
  EXPECT_EQ(run.metadata.versions.count("dsperf"), 1u);
  EXPECT_EQ(run.metadata.versions.count("git_sha"), 1u);
  EXPECT_EQ(run.metadata.versions.count("gloo"), 1u);
  EXPECT_EQ(run.metadata.env.count("DS_JOB_ID"), 1u);
  EXPECT_NE(run.metadata.commandLine.find("coll --coll all"), std::string::npos) << run.metadata.commandLine;
  EXPECT_FALSE(run.metadata.startTime.empty());
  EXPECT_FALSE(run.metadata.endTime.empty());
  std::set<std::string> colls;
  for (const auto& m : run.results) {
    colls.insert(m.collective);
    EXPECT_EQ(m.backend, "gloo");
    EXPECT_EQ(m.outOfPlace.wrong, 0) << m.collective << " " << m.bytes;
    EXPECT_EQ(m.outOfPlace.ranks.size(), 2u);
    EXPECT_EQ(m.outOfPlace.iters, 3);
    EXPECT_GT(m.outOfPlace.iter.p50Us, 0);
    EXPECT_LE(m.outOfPlace.iter.minUs, m.outOfPlace.iter.p50Us);
    EXPECT_LE(m.outOfPlace.iter.p99Us, m.outOfPlace.iter.maxUs);
    if (m.collective != "sendrecv") {
      EXPECT_EQ(m.inPlace.wrong, 0) << m.collective;
    }
    // busbw follows algbw by the collective's factor.
    EXPECT_NEAR(m.outOfPlace.busBw, m.outOfPlace.algBw * m.busFactor, 1e-12);
  }
  EXPECT_EQ(colls.size(), 7u);
  // Raw JSON keys of REFERENCE.md §5.
  auto first = j["results"][0]["out_of_place"];
  for (const char* k : {"time", "alg_bw", "bus_bw", "nwrong"}) EXPECT_TRUE(first.contains(k)) << k;
  for (const char* k : {"min_us", "max_us", "avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us",
                        "stdev_us", "cv_pct"}) {
    EXPECT_TRUE(first["iter"].contains(k)) << k;
  }
  // Without -I: no per-iteration times in the file (it stays small), and the args say so.
  EXPECT_FALSE(first.contains("times_us"));
  EXPECT_EQ(j["args"]["per_iter_timing"], 0);
  EXPECT_EQ(j["args"]["per_iter_skip"], 0);
  for (const auto& m : run.results) {
    EXPECT_LE(m.outOfPlace.iter.p50Us, *m.outOfPlace.iter.p90Us);
    EXPECT_LE(*m.outOfPlace.iter.p90Us, m.outOfPlace.iter.p99Us);
    EXPECT_LE(m.outOfPlace.iter.p99Us, *m.outOfPlace.iter.p999Us);
    EXPECT_LE(*m.outOfPlace.iter.p999Us, m.outOfPlace.iter.maxUs);
  }
  // The journal next to the JSON: start + 28 rows + end.
  std::string journal = dir.file("out.journal.jsonl");
  EXPECT_EQ(countLines(journal), 30);
  auto fromJournal = ds::report::readSweepJournal(journal);
  EXPECT_EQ(fromJournal.results.size(), 28u);
  EXPECT_EQ(fromJournal.summary.status, "ok");
  // Not a TTY: no progress line anywhere.
  EXPECT_EQ(r.err.find("[dsbench] gloo"), std::string::npos);
  EXPECT_EQ(r.out.find("ETA"), std::string::npos);
}

TEST(CollUnderDsrun, RepeatKeepsEveryPassInTheJsonAndTheJournal) {
  TempDir dir;
  auto r = run({binDir() + "/dsrun",
                "--nproc-per-node",
                "2",
                "--standalone",
                binDir() + "/dsbench",
                "coll",
                "--backend",
                "shm",
                "-b",
                "1K",
                "-e",
                "64K",
                "-f",
                "4",
                "-n",
                "3",
                "--repeat",
                "3",
                "-J",
                dir.file("out.json")},
               cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# 3 passes over the sizes (--repeat)"), std::string::npos) << r.out;
  EXPECT_EQ(tableRows(r.out).size(), 4u) << "one table row per size, not per pass:\n" << r.out;
  auto run = ds::report::sweepFromJson(ds::report::readJson(dir.file("out.json")), "out.json");
  EXPECT_EQ(run.args.repeat, 3);
  ASSERT_EQ(run.results.size(), 4u);
  for (const auto& m : run.results) {
    for (const auto* p : {&m.outOfPlace, &m.inPlace}) {
      ASSERT_EQ(p->repeats.size(), 3u) << m.bytes;
      // The row is its median pass.
      std::vector<double> t;
      for (const auto& x : p->repeats) t.push_back(x.timeUs);
      std::sort(t.begin(), t.end());
      EXPECT_DOUBLE_EQ(p->timeUs, t[1]) << m.bytes;
      EXPECT_EQ(p->wrong, 0);
    }
  }
  auto journal = ds::report::readSweepJournal(dir.file("out.journal.jsonl"));
  ASSERT_EQ(journal.results.size(), 4u);
  EXPECT_EQ(journal.results[0].outOfPlace.repeats.size(), 3u);
}

// -I 1: nccl-tests' per-iteration columns and preamble line; -I 2: the tail columns; both keep every
// iteration's time (the slowest rank's) in the JSON, and -K leaves the first ones out of the
// statistics but not out of the loop time or times_us.
TEST(CollUnderDsrun, PerIterationTimingColumnsAndTimes) {
  TempDir dir;
  auto sweep = [&](const std::vector<std::string>& extra, const std::string& json) {
    std::vector<std::string> argv{binDir() + "/dsrun",
                                  "--nproc-per-node",
                                  "2",
                                  "--standalone",
                                  binDir() + "/dsbench",
                                  "coll",
                                  "--backend",
                                  "shm",
                                  "-b",
                                  "8",
                                  "-e",
                                  "4K",
                                  "-f",
                                  "8",
                                  "-n",
                                  "12",
                                  "-J",
                                  dir.file(json)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv, cleanEnv());
  };
  auto r1 = sweep({"-I", "1", "-K", "2"}, "i1.json");
  ASSERT_EQ(r1.exitCode, 0) << r1.out << r1.err;
  EXPECT_NE(r1.out.find("# Per-Iteration Report: execution time of each op (the backend's own timing of the "
                        "work); i_* uses max over ranks; summary skips first 2 iterations \n"),
            std::string::npos)
      << r1.out;
  EXPECT_NE(r1.out.find("busbw #wrong    i_min    i_max    i_p99    i_cv%     time"), std::string::npos)
      << r1.out;
  auto rows = tableRows(r1.out);
  ASSERT_EQ(rows.size(), 4u) << r1.out;
  for (const auto& w : rows) ASSERT_EQ(w.size(), 22u) << r1.out;  // 5 + 2 x (4 + 4) + straggler
  auto j = ds::report::readJson(dir.file("i1.json"));
  EXPECT_EQ(j["args"]["per_iter_timing"], 1);
  EXPECT_EQ(j["args"]["per_iter_skip"], 2);
  auto s1 = ds::report::sweepFromJson(j, "i1.json");
  for (const auto& m : s1.results) {
    for (const auto* p : {&m.outOfPlace, &m.inPlace}) {
      ASSERT_EQ(p->timesUs.size(), 12u) << "every timed iteration, the skipped ones too";
      EXPECT_EQ(p->iters, 12);
      EXPECT_EQ(p->iter.n, 10) << "12 iterations, 2 skipped";
      std::vector<double> kept(p->timesUs.begin() + 2, p->timesUs.end());
      auto want = ds::report::computeIterStats(kept);
      EXPECT_DOUBLE_EQ(p->iter.p99Us, want.p99Us);
      EXPECT_DOUBLE_EQ(p->iter.maxUs, want.maxUs);
      for (const auto& rk : p->ranks) EXPECT_EQ(rk.iter.n, 10);
    }
  }
  // The table's i_max of the first row is the JSON's, in nccl-tests' 7-wide form.
  EXPECT_EQ(rows[0][10], words(fmt::format("{:7.2f}", s1.results[0].outOfPlace.iter.maxUs))[0]);

  auto r2 = sweep({"--per_iter_timing", "2"}, "i2.json");
  ASSERT_EQ(r2.exitCode, 0) << r2.out << r2.err;
  EXPECT_NE(r2.out.find("#wrong    i_p50    i_p90    i_p99  i_p99.9    i_max     time"), std::string::npos)
      << r2.out;
  for (const auto& w : tableRows(r2.out)) ASSERT_EQ(w.size(), 24u) << r2.out;
  auto s2 = ds::report::sweepFromJson(ds::report::readJson(dir.file("i2.json")), "i2.json");
  EXPECT_EQ(s2.results[0].outOfPlace.timesUs.size(), 12u);
  EXPECT_EQ(s2.results[0].outOfPlace.iter.n, 12);

  // The environment twin, and -K alone: no i_* columns, the skip said in a comment.
  auto env = cleanEnv();
  env.setEnv["DSBENCH_PER_ITER_SKIP"] = "3";
  auto r3 = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsbench", "coll",
                 "--backend", "shm", "-b", "8", "-e", "8", "-n", "6", "-J", dir.file("k.json")},
                env);
  ASSERT_EQ(r3.exitCode, 0) << r3.out << r3.err;
  EXPECT_EQ(r3.out.find("i_min"), std::string::npos);
  EXPECT_NE(r3.out.find("leave out the first 3 timed iteration(s) of each size (-K)"), std::string::npos)
      << r3.out;
  auto s3 = ds::report::sweepFromJson(ds::report::readJson(dir.file("k.json")), "k.json");
  EXPECT_EQ(s3.args.perIterSkip, 3);
  EXPECT_EQ(s3.results[0].outOfPlace.iter.n, 3);
  EXPECT_TRUE(s3.results[0].outOfPlace.timesUs.empty());
}

TEST(CollUnderMpirun, TwoBackendsOneRunWithRounding) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TempDir dir;
  auto r = run({mpirun,
                "-np",
                "3",
                "--oversubscribe",
                binDir() + "/dsbench",
                "coll",
                "--backend",
                "mpi,gloo",
                "--coll",
                "allgather,reduce_scatter,broadcast",
                "-b",
                "16",
                "-e",
                "1K",
                "-f",
                "4",
                "-d",
                "float,half",
                "-o",
                "sum,max",
                "-n",
                "2",
                "-r",
                "2",
                "-a",
                "3",
                "-J",
                dir.file("out.json")},
               mpiEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  // 16 B of float over 3 ranks: 4 elements -> 3 (one per rank) = 12 B.
  EXPECT_NE(r.out.find("# Rounded as nccl-tests does (requested -> used bytes): 16->12"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# Collective allgather on backend mpi"), std::string::npos);
  EXPECT_NE(r.out.find("# Collective allgather on backend gloo"), std::string::npos);
  auto run = ds::report::sweepFromJson(ds::report::readJson(dir.file("out.json")), "out.json");
  EXPECT_EQ(run.metadata.launcher, "mpirun (Open MPI)");
  EXPECT_EQ(run.metadata.versions.count("open_mpi"), 1u);
  EXPECT_EQ(run.args.backends, (std::vector<std::string>{"mpi", "gloo"}));
  // sizes 16, 64, 256, 1024; allgather/broadcast: 2 dtypes; reduce_scatter: 2 dtypes x 2 ops.
  std::size_t perBackend = 4 * (2 + 2 * 2 + 2);
  EXPECT_EQ(run.results.size(), 2 * perBackend) << r.out;
  std::set<std::string> backends;
  for (const auto& m : run.results) {
    backends.insert(m.backend);
    EXPECT_EQ(m.outOfPlace.wrong, 0) << m.backend << " " << m.collective << " " << m.dtype << " " << m.op;
    EXPECT_EQ(m.inPlace.wrong, 0) << m.backend << " " << m.collective << " " << m.dtype << " " << m.op;
    if (m.collective == "broadcast") {
      EXPECT_EQ(m.root, 2);
    }
    if (m.collective == "allgather" && m.requestedBytes == 16 && m.dtype == "f32") {
      EXPECT_EQ(m.bytes, 12u);
    }
    // -a 3: the time column is the slowest rank's.
    double mx = 0;
    for (const auto& t : m.outOfPlace.ranks) mx = std::max(mx, t.timeUs);
    EXPECT_DOUBLE_EQ(m.outOfPlace.timeUs, mx);
  }
  EXPECT_EQ(backends, (std::set<std::string>{"mpi", "gloo"}));
}

TEST(CollUnderMpirun, MinTimeGrowsIterations) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TempDir dir;
  auto r =
      run({mpirun, "-np", "2", "--oversubscribe", binDir() + "/dsbench", "coll", "--backend", "mpi", "-b",
           "8", "-e", "8", "-n", "5", "--min-time", "0.5", "--blocking", "-J", dir.file("out.json")},
          mpiEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# Blocking Enabled"), std::string::npos);
  auto run = ds::report::sweepFromJson(ds::report::readJson(dir.file("out.json")), "out.json");
  ASSERT_EQ(run.results.size(), 1u);
  // An 8-byte MPI allreduce takes microseconds (milliseconds at load 10, where a --min-time of 50 ms
  // once fitted in the 5 iterations of -n): half a second needs more than 5 unless an op takes
  // 100 ms. How many more depends on the machine's speed, so only the growth is asserted.
  EXPECT_GT(run.results[0].outOfPlace.iters, 5);
  EXPECT_TRUE(run.args.blocking);
}

// Every run records its host's hardware (engine/host, from the roots DSBENCH_SYSFS and DSBENCH_PROCFS
// name: here a fake 2x100G Ethernet node) and, on one host with a CPU backend, its memory copy rate;
// the table is followed by the bound lines and each JSON row carries its bound.
TEST(CollUnderDsrun, RecordsTheHardwareAndEachRowsBound) {
  TempDir dir;
  const std::string sys = dir.sub("sys"), proc = dir.sub("proc");
  std::filesystem::create_directories(sys + "/devices/pci0000:40");
  std::filesystem::create_directories(sys + "/class/net");
  for (int i = 0; i < 2; ++i) {
    const std::string dev = fmt::format("{}/devices/pci0000:40/0000:41:00.{}", sys, i);
    std::filesystem::create_directories(dev);
    std::ofstream(dev + "/vendor") << "0x8086\n";
    std::ofstream(dev + "/device") << "0x1592\n";
    const std::string net = fmt::format("{}/class/net/ens1f{}", sys, i);
    std::filesystem::create_directories(net);
    std::ofstream(net + "/speed") << "100000\n";
    std::ofstream(net + "/operstate") << "up\n";
    std::ofstream(net + "/type") << "1\n";
    std::filesystem::create_symlink(fmt::format("../../../devices/pci0000:40/0000:41:00.{}", i),
                                    net + "/device");
  }
  std::ofstream(proc + "/cpuinfo") << "model name\t: AMD EPYC 7763 64-Core Processor\n";
  auto env = cleanOptions(
      std::chrono::seconds(60),
      {{"DSBENCH_SYSFS", sys}, {"DSBENCH_PROCFS", proc}, {"DSBENCH_LIBNVML", "/nonexistent/nvml.so"}});
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsbench", "coll",
                "--backend", "shm", "-b", "1M", "-e", "1M", "-n", "2", "-J", dir.file("out.json")},
               env);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# hardware of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2x100G ethernet; AMD EPYC 7763 64-Core Processor; memory copy "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# bound: busbw "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of zero-copy limit of a "), std::string::npos) << r.out;
  auto j = ds::report::readJson(dir.file("out.json"));
  auto sweep = ds::report::sweepFromJson(j, "out.json");
  ASSERT_EQ(sweep.metadata.hardware.size(), 1u);
  const auto& hw = sweep.metadata.hardware[0];
  EXPECT_EQ(hw.host, sweep.metadata.hosts.at(0));
  EXPECT_EQ(hw.cpuModel, "AMD EPYC 7763 64-Core Processor");
  ASSERT_EQ(hw.nics.size(), 2u);
  EXPECT_DOUBLE_EQ(hw.nics[0].gbps, 100);
  EXPECT_EQ(hw.nics[0].model, "8086:1592");
  EXPECT_GT(hw.memBwGBps, 0);
  ASSERT_EQ(j["results"].size(), 1u);
  const auto& bound = j["results"][0]["bound"];
  EXPECT_EQ(bound["kind"], "memory") << bound.dump();
  EXPECT_NEAR(bound["gbps"].get<double>(), hw.memBwGBps / 2, 1e-9);  // 2(n-1)/n² x B, n = 2
  EXPECT_GT(bound["fraction"].get<double>(), 0);

  // Without the memory probe the bound is unknown, and says why.
  env.setEnv["DSBENCH_MEMBW_PROBE"] = "0";
  r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", binDir() + "/dsbench", "coll",
           "--backend", "shm", "-b", "1M", "-e", "1M", "-n", "2", "-J", dir.file("off.json")},
          env);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# bound: unknown: the memory bandwidth of "), std::string::npos) << r.out;
  auto off = ds::report::readJson(dir.file("off.json"));
  EXPECT_EQ(off["results"][0]["bound"]["name"], "unknown");
}

// --coll all on one rank (a single GPU node's sweep, run-gpu-checks' step d) runs every collective but
// sendrecv, and says why sendrecv is missing; naming sendrecv there stays an error.
TEST(CollOneRank, AllLeavesOutSendrecvWithANoteAndNamingItFails) {
  TempDir dir;
  const std::string json = dir.file("all.json");
  auto r = run({binDir() + "/dsbench", "coll", "--backend", "gloo", "--coll", "all", "-b", "8", "-e", "64",
                "-n", "2", "-w", "1", "-J", json},
               cleanEnv());
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# --coll all: sendrecv left out, it needs at least 2 ranks"), std::string::npos)
      << r.out;
  auto doc = ds::report::sweepFromJson(ds::report::readJson(json), json);
  std::set<std::string> ran;
  for (const auto& m : doc.results) ran.insert(m.collective);
  EXPECT_EQ(ran.size(), 6u) << r.out;
  EXPECT_EQ(ran.count("sendrecv"), 0u);
  bool noted = false;
  for (const auto& n : doc.notes) noted = noted || n.find("sendrecv left out") != std::string::npos;
  EXPECT_TRUE(noted) << "the JSON keeps the note too";
  r = run({binDir() + "/dsbench", "coll", "--backend", "gloo", "--coll", "sendrecv", "-b", "8", "-e", "64"},
          cleanEnv());
  EXPECT_EQ(r.exitCode, 5) << r.out << r.err;
  EXPECT_NE(r.err.find("--coll sendrecv needs at least 2 ranks"), std::string::npos) << r.err;
}
