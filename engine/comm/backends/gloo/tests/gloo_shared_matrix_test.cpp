// The correctness matrix every backend shares (engine/comm/tests/matrix.h), on gloo at world sizes
// 1-4, including its large-count cases and point-to-point.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/comm/tests/matrix.h"

namespace ds::comm::testing {
namespace {

class GlooSharedMatrix : public ::testing::TestWithParam<int> {};

TEST_P(GlooSharedMatrix, AllCasesPass) {
  const int n = GetParam();
  auto cases = matrixCases(n);
  ASSERT_FALSE(cases.empty());
  ProcessGroupOptions base;
  base.timeout = std::chrono::seconds(20);
  base.heartbeatInterval = Duration(0);
  runThreads(
      "gloo", n,
      [&](ProcessGroup& pg) {
        auto failures = runCases(pg, cases);
        for (const auto& f : failures) ADD_FAILURE() << "rank " << pg.rank() << ": " << f;
      },
      base);
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooSharedMatrix, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return fmt::format("n{}", i.param); });

// Point-to-point that completes in any order (issue 41): every rank sends first, 2-8 ranks, a 16 KiB
// message and one of 1.2 MB.
class GlooP2pPatterns : public ::testing::TestWithParam<int> {};

TEST_P(GlooP2pPatterns, CompleteWhateverRankSendsFirst) {
  ProcessGroupOptions base;
  base.timeout = std::chrono::seconds(30);
  base.heartbeatInterval = Duration(0);
  runThreads(
      "gloo", GetParam(),
      [&](ProcessGroup& pg) {
        for (std::size_t count : {std::size_t{4096}, std::size_t{300000}}) {
          for (const auto& f : runP2pPatterns(pg, count)) ADD_FAILURE() << f;
        }
      },
      base);
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooP2pPatterns, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return fmt::format("n{}", i.param); });

class GlooP2pFault : public ::testing::TestWithParam<const char*> {};

TEST_P(GlooP2pFault, TheReceiverNamesThePeer) {
  ProcessGroupOptions base;
  base.timeout = std::chrono::seconds(2);
  base.heartbeatInterval = std::chrono::milliseconds(200);
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        for (const auto& f : runP2pFault(pg, GetParam())) ADD_FAILURE() << f;
      },
      base);
}

INSTANTIATE_TEST_SUITE_P(Faults, GlooP2pFault, ::testing::Values("mismatch", "silent"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace ds::comm::testing
