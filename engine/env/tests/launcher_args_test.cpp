// The launcher argument contract: --local_rank / --local-rank, =N or N, anywhere, checked against
// LOCAL_RANK.
#include "engine/env/launcher_args.h"

#include <gtest/gtest.h>

#include "engine/common/error.h"

namespace ds::env {
namespace {

using Args = std::vector<std::string>;

TEST(LocalRankArg, AllFourFormsAnywhereAreTakenOut) {
  const MapEnv env{{"LOCAL_RANK", "3"}};
  for (const Args& in :
       {Args{"--local_rank=3", "world"}, Args{"world", "--local_rank", "3"},
        Args{"--local-rank=3", "world", "--json", "x"}, Args{"world", "--json", "x", "--local-rank", "3"}}) {
    Args args = in;
    auto got = takeLocalRankArg(args, env);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, 3);
    for (const auto& a : args) EXPECT_EQ(a.find("local"), std::string::npos) << a;
    EXPECT_EQ(args.front() == "world" || args.back() == "world", true);
  }
  Args none{"world", "--json", "x"};
  EXPECT_FALSE(takeLocalRankArg(none, env).has_value());
  EXPECT_EQ(none.size(), 3u);
}

TEST(LocalRankArg, SeparateValueKeepsTheGivenText) {
  Args args{"--local-rank", "0", "coll"};
  auto got = takeLocalRankArg(args, MapEnv{});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->given, "--local-rank 0");
  EXPECT_EQ(args, Args{"coll"});
}

TEST(LocalRankArg, MismatchWithLocalRankIsAClearError) {
  Args args{"--local_rank=1", "world"};
  try {
    takeLocalRankArg(args, MapEnv{{"LOCAL_RANK", "0"}});
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--local_rank=1 says this is local rank 1 but LOCAL_RANK=0"), std::string::npos)
        << msg;
  }
}

TEST(LocalRankArg, BadValuesAreClearErrors) {
  for (const Args& in : {Args{"--local_rank"}, Args{"--local_rank=x"}, Args{"--local-rank", "-1"},
                         Args{"--local_rank=0", "--local-rank=1"}}) {
    Args args = in;
    EXPECT_THROW(takeLocalRankArg(args, MapEnv{}), ConfigError) << in.front();
  }
  Args same{"--local_rank=2", "--local-rank", "2"};  // both spellings, one value: fine
  EXPECT_EQ(takeLocalRankArg(same, MapEnv{{"LOCAL_RANK", "2"}})->value, 2);
}

}  // namespace
}  // namespace ds::env
