// The mpi backend under a real mpirun: the correctness matrix at world sizes 1-4 (with and without
// chunking), a world that does not match the group, and a rank that skips an op.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "engine/testing/subprocess.h"

using namespace ds::testing;

namespace {

const std::string kMpirun = DS_MPIRUN_PATH;

RunOptions mpiEnv(std::chrono::seconds timeout) { return mpirunOptions(timeout); }

RunResult mpirun(int np, const std::vector<std::string>& args, const RunOptions& o) {
  std::vector<std::string> argv = {kMpirun, "-np", std::to_string(np), "--oversubscribe",
                                   binDir() + "/ds_mpi_matrix_worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, o);
}

int countOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

#define REQUIRE_MPIRUN() \
  if (kMpirun.empty()) GTEST_SKIP() << "built without MPI or mpirun was not found"

struct MatrixCase {
  int np;
  const char* chunk;  // DS_MPI_MAX_CHUNK, "" for MPI's own limit
  const char* large;  // the large count of the matrix
  // DS_PG_INLINE_MAX_BYTES, "" for the default (every op of the matrix then starts on the caller's
  // thread); "0" runs every op on the worker, "1K" mixes the two paths op by op.
  const char* inlineLimit = "";
};

// Keeps ctest's names readable (gtest would print the struct's bytes).
void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << "np=" << c.np << " chunk=" << (*c.chunk ? c.chunk : "INT_MAX") << " large=" << c.large
      << " inline=" << (*c.inlineLimit ? c.inlineLimit : "default");
}

class MpiMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(MpiMatrix, EveryCollectiveTypeOpAndCountMatchesTheReference) {
  REQUIRE_MPIRUN();
  const auto& c = GetParam();
  TempDir dir;
  RunOptions o = mpiEnv(std::chrono::seconds(100));
  if (*c.chunk != '\0') o.setEnv["DS_MPI_MAX_CHUNK"] = c.chunk;
  if (*c.inlineLimit != '\0') o.setEnv["DS_PG_INLINE_MAX_BYTES"] = c.inlineLimit;
  auto r = mpirun(c.np, {"matrix", "--store", dir.file("store"), "--large", c.large}, o);
  ASSERT_FALSE(r.timedOut) << "the matrix hung\n" << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, " 0 mismatches"), c.np) << r.out << r.err;
  std::printf("np=%d chunk=%s: %.1f s\n%s", c.np, *c.chunk ? c.chunk : "INT_MAX", r.seconds, r.out.c_str());
}

// Chunking (a limit of 1000 elements against a large count of 4099: five pieces, the last of one
// element) is checked at 2 and 4 ranks; np4_big moves ~1 MiB per op in 16 Ki-element pieces; np2_big
// takes the two-rank exchange (small counts) and the blocking calls (above 64 KiB) at the defaults.
INSTANTIATE_TEST_SUITE_P(WorldSizes, MpiMatrix,
                         ::testing::Values(MatrixCase{1, "", "4099"}, MatrixCase{2, "", "4099"},
                                           MatrixCase{2, "1000", "4099"}, MatrixCase{3, "", "4099"},
                                           MatrixCase{4, "1000", "4099"}, MatrixCase{4, "16384", "70001"},
                                           MatrixCase{2, "", "4099", "0"}, MatrixCase{3, "", "70001", "1K"},
                                           MatrixCase{2, "", "70001"}),
                         [](const auto& info) {
                           std::string limit = info.param.inlineLimit;
                           return "np" + std::to_string(info.param.np) +
                                  (*info.param.chunk ? "_chunked" : "") +
                                  (std::string(info.param.large) == "4099" ? "" : "_big") +
                                  (limit.empty()  ? ""
                                   : limit == "0" ? "_worker_only"
                                                  : "_inline_" + limit);
                         });

// send/recv posted when issued (issue 41): the patterns where every rank sends first complete, with
// messages above Open MPI's eager size (1.2 MB) as well as below it (16 KiB).
class MpiP2p : public ::testing::TestWithParam<int> {};

TEST_P(MpiP2p, PatternsCompleteWhateverRankSendsFirst) {
  REQUIRE_MPIRUN();
  TempDir dir;
  auto r = mpirun(GetParam(), {"p2p", "--store", dir.file("store")}, mpiEnv(std::chrono::seconds(100)));
  ASSERT_FALSE(r.timedOut) << "the p2p patterns hung\n" << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, "p2p 0 failures"), GetParam()) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MpiP2p, ::testing::Values(2, 4),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(MpiP2pFault, ARecvOfTheWrongSizeNamesBothRanks) {
  REQUIRE_MPIRUN();
  TempDir dir;
  auto r = mpirun(2, {"p2p-mismatch", "--store", dir.file("store")}, mpiEnv(std::chrono::seconds(60)));
  ASSERT_FALSE(r.timedOut) << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, "p2p 0 failures"), 2) << r.out << r.err;
}

TEST(MpiWorld, SizeMismatchIsAConfigErrorSayingToUseMpirun) {
  REQUIRE_MPIRUN();
  TempDir dir;
  auto r = mpirun(2, {"mismatch", "--store", dir.file("store")}, mpiEnv(std::chrono::seconds(60)));
  ASSERT_FALSE(r.timedOut) << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, "CONFIG_ERROR"), 2) << r.out << r.err;
  EXPECT_NE(r.out.find("MPI says this process is rank 1 of 2 while dsperf was given rank 1 of 3"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Start the job with mpirun"), std::string::npos) << r.out;
}

// Rank 2 of 3 skips op #2, an allreduce of `count` floats; the others must time out, naming it.
void expectSkippedOpTimesOut(const std::string& count) {
  TempDir dir;
  auto r = mpirun(3, {"timeout", "--store", dir.file("store"), "--ms", "1500", "--count", count},
                  mpiEnv(std::chrono::seconds(60)));
  ASSERT_FALSE(r.timedOut) << "the job hung after the timeout\n" << r.out << r.err;
  // The skipping rank sleeps 120 s; the job ends long before because exit aborts it.
  EXPECT_LT(r.seconds, 30.0) << r.out << r.err;
  EXPECT_NE(r.exitCode, 0) << "MPI_Abort at exit must make mpirun fail";
  // The first survivor to exit calls MPI_Abort, and mpirun may kill the other before it prints, so
  // at least one survivor's report must be there, and every report that is there must be right.
  int reports = 0;
  for (int rank : {0, 1}) {
    std::string head = "rank " + std::to_string(rank) + " TIMEOUT after ";
    auto p = r.out.find(head);
    if (p == std::string::npos) continue;
    ++reports;
    long ms = std::stol(r.out.substr(p + head.size()));
    EXPECT_GE(ms, 1400) << r.out;
    EXPECT_LT(ms, 1500 + 5000) << "the timeout must come within the bound (plus diagnosis)\n" << r.out;
    EXPECT_NE(r.out.find("rank " + std::to_string(rank) + " LATER_OP_REFUSED"), std::string::npos) << r.out;
  }
  EXPECT_GE(reports, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("allreduce(f32, count=" + count + ", op=sum) #2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Ranks that never arrived: 2 (has not reached op #2"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("calling MPI_Abort instead of MPI_Finalize"), std::string::npos) << r.err;
}

TEST(MpiTimeout, SkippedOpTimesOutOnTheOthersAndTheJobEnds) {
  REQUIRE_MPIRUN();
  expectSkippedOpTimesOut("1");  // the fast path: nonblocking, timed out by the wait loop
}

TEST(MpiTimeout, SkippedBlockingOpTimesOutOnTheOthersAndTheJobEnds) {
  REQUIRE_MPIRUN();
  // 2 MiB: above the fast path's limit, so a blocking MPI_Allreduce on the worker, which cannot time
  // out itself; Work::wait does, and the call left in flight makes exit abort the job.
  expectSkippedOpTimesOut("524288");
}

TEST(MpiTimeout, BlockingOpNobodyWaitsForIsReportedByTheWatchdog) {
  REQUIRE_MPIRUN();
  // A blocking MPI_Allreduce (2 MiB) that rank 2 skips, only polled with isCompleted(): without a
  // wait() the group's watchdog must fail it at its deadline, naming rank 2, log that, and fail the
  // op queued behind it at once.
  TempDir dir;
  auto r =
      mpirun(3, {"timeout", "--store", dir.file("store"), "--ms", "1500", "--count", "524288", "--poll", "1"},
             mpiEnv(std::chrono::seconds(60)));
  ASSERT_FALSE(r.timedOut) << "the job hung after the timeout\n" << r.out << r.err;
  EXPECT_LT(r.seconds, 30.0) << r.out << r.err;
  EXPECT_NE(r.exitCode, 0) << "MPI_Abort at exit must make mpirun fail";
  EXPECT_EQ(r.out.find("(no watchdog)"), std::string::npos) << r.out;
  int reports = 0;
  for (int rank : {0, 1}) {
    std::string head = "rank " + std::to_string(rank) + " WATCHDOG after ";
    auto p = r.out.find(head);
    if (p == std::string::npos) continue;
    ++reports;
    long ms = std::stol(r.out.substr(p + head.size()));
    EXPECT_GE(ms, 1400) << r.out;
    EXPECT_LT(ms, 1500 + 5000) << "the watchdog must fire within the bound (plus diagnosis)\n" << r.out;
    EXPECT_NE(r.out.find("rank " + std::to_string(rank) + " QUEUED_OP_FAILED"), std::string::npos) << r.out;
  }
  EXPECT_GE(reports, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("allreduce(f32, count=524288, op=sum) #2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Ranks that never arrived: 2 (has not reached op #2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is unusable"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("reported by the process group's watchdog"), std::string::npos) << r.err;
}

TEST(MpiTimeout, BlockingOpHungOnTheCallersThreadIsReportedByTheWatchdogWhichEndsTheJob) {
  REQUIRE_MPIRUN();
  // One CPU per rank (as under mpirun's default binding; --cpus 1 pretends it, whatever the binding
  // here): the blocking MPI_Allreduce (2 MiB) runs on the caller's thread, which cannot be given
  // back while rank 2 skips the op. The watchdog must log the usual diagnosis at the deadline and
  // abort the job; the caller never returns.
  TempDir dir;
  auto r =
      mpirun(3, {"timeout", "--store", dir.file("store"), "--ms", "1500", "--count", "524288", "--cpus", "1"},
             mpiEnv(std::chrono::seconds(60)));
  ASSERT_FALSE(r.timedOut) << "the job hung after the timeout\n" << r.out << r.err;
  EXPECT_GE(r.seconds, 1.5) << r.out << r.err;
  EXPECT_LT(r.seconds, 30.0) << "rank 2 sleeps 120 s: the abort must end the job\n" << r.out << r.err;
  EXPECT_NE(r.exitCode, 0) << "MPI_Abort must make mpirun fail";
  EXPECT_NE(r.out.find("CALLER_RUNS op #2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("returned after"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mpi allreduce(f32, count=524288, op=sum) #2 (2097152 bytes) timed out on rank "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Ranks that never arrived: 2 (has not reached op #2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reported by the process group's watchdog: the op runs on the caller's thread"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("while its caller's thread was blocked inside it, which MPI cannot interrupt; "
                       "calling MPI_Abort"),
            std::string::npos)
      << r.err;
}

}  // namespace
