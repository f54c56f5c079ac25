// DDP on the mpi backend under a real mpirun (one process per rank): equivalence with one process for
// N = 1, 2, 4 with SGD and AdamW, no_sync accumulation, gradient_as_bucket_view giving the very same
// weights, and a mismatched model failing at construction.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <string>

#include "engine/ddp/ops.h"
#include "engine/ddp/tests/scenario.h"
#include "engine/testing/subprocess.h"

using namespace ds::testing;
namespace dt = ds::ddp::testing;

namespace {

const std::string kMpirun = DS_MPIRUN_PATH;

#define REQUIRE_MPIRUN() \
  if (kMpirun.empty()) GTEST_SKIP() << "built without MPI or mpirun was not found"

RunResult mpirun(int np, const std::vector<std::string>& args) {
  RunOptions o = mpirunOptions();
  o.setEnv["OPENBLAS_NUM_THREADS"] = "1";
  std::vector<std::string> argv = {kMpirun, "-np", std::to_string(np), "--oversubscribe",
                                   binDir() + "/ds_ddp_worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, o);
}

std::vector<float> readParams(const std::string& path) {
  std::vector<float> v;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return v;
  float x;
  while (std::fread(&x, sizeof x, 1, f) == 1) v.push_back(x);
  std::fclose(f);
  return v;
}

int countOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

void runEquivalence(int np, const std::string& opt, int accum) {
  TempDir dir;
  auto r = mpirun(np, {"equiv", "--opt", opt, "--accum", std::to_string(accum), "--out", dir.path()});
  ASSERT_FALSE(r.timedOut) << "hung\n" << r.out << r.err;
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, "OK replicas agree after " + std::to_string(dt::kSteps) + " checks"), np) << r.out;
  ds::ddp::ops::setBlasThreads(1);
  auto ref = ds::ddp::train(dt::referenceConfig(opt), nullptr);
  for (int rank = 0; rank < np; ++rank) {
    auto got = readParams(dir.file("params." + std::to_string(rank) + ".bin"));
    auto d = dt::compareParams(got, ref.finalParams);
    if (rank == 0)
      std::printf("max |param - single process| = %.3g (tolerance %.1g)\n", d.maxAbs, dt::kParamTolerance);
    EXPECT_LE(d.maxAbs, dt::kParamTolerance) << "rank " << rank << " differs from one process at parameter "
                                             << d.index << " (" << d.sizeA << " vs " << d.sizeB << " values)";
  }
  std::printf("mpi np=%d %s accum=%d: %.1f s\n", np, opt.c_str(), accum, r.seconds);
}

struct Case {
  int np;
  const char* opt;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.opt << " np=" << c.np; }

class MpiEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(MpiEquivalence, NRanksMatchOneProcess) {
  REQUIRE_MPIRUN();
  runEquivalence(GetParam().np, GetParam().opt, 1);
}

INSTANTIATE_TEST_SUITE_P(Mpirun, MpiEquivalence,
                         ::testing::Values(Case{1, "sgd"}, Case{2, "sgd"}, Case{4, "sgd"}, Case{1, "adamw"},
                                           Case{2, "adamw"}, Case{4, "adamw"}),
                         [](const auto& info) {
                           return std::string(info.param.opt) + "_n" + std::to_string(info.param.np);
                         });

TEST(MpiNoSync, TwoMicroStepsMatchOneProcess) {
  REQUIRE_MPIRUN();
  runEquivalence(2, "sgd", 2);
  runEquivalence(2, "adamw", 2);
}

TEST(MpiGradientAsBucketView, TrainedWeightsBitForBitAsWithCopies) {
  REQUIRE_MPIRUN();
  TempDir copies, views;
  for (const auto* dir : {&copies, &views}) {
    std::vector<std::string> args = {"equiv", "--opt", "adamw", "--accum", "2", "--out", dir->path()};
    if (dir == &views) args.push_back("--view");
    auto r = mpirun(2, args);
    ASSERT_FALSE(r.timedOut) << "hung\n" << r.out << r.err;
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::string name = "params." + std::to_string(rank) + ".bin";
    auto a = readParams(copies.file(name));
    ASSERT_FALSE(a.empty()) << name;
    EXPECT_EQ(readParams(views.file(name)), a)
        << "rank " << rank << ": gradient_as_bucket_view changed the weights";
  }
}

TEST(MpiMismatchedModel, EveryRankFailsAtConstructionNamingBothRanks) {
  REQUIRE_MPIRUN();
  auto r = mpirun(2, {"mismatch"});
  ASSERT_FALSE(r.timedOut) << "a mismatched model must fail, not hang\n" << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(countOf(r.out, "CONFIG_ERROR"), 2) << r.out;
  EXPECT_NE(
      r.out.find(
          "rank 0 CONFIG_ERROR: DDP expects same model across all ranks, but Rank 0 has 6 params, while "
          "rank 1 has inconsistent 4 params."),
      std::string::npos)
      << r.out;
}

}  // namespace
