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

}  // namespace
}  // namespace ds::comm::testing
