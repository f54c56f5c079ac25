// The launcher argument contract on the real binaries: dsbench (every subcommand) and dsdiag accept
// --local_rank / --local-rank, =N or N, before or after the subcommand, check it against LOCAL_RANK
// and record it per rank.
#include <gtest/gtest.h>

#include "engine/testing/subprocess.h"
#include "reports/json_io.h"

using namespace ds::testing;

namespace {

RunOptions single(const std::string& localRank) {
  return cleanOptions(std::chrono::seconds(60), {{"RANK", "0"},
                                                 {"WORLD_SIZE", "1"},
                                                 {"LOCAL_RANK", localRank},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(unusedPort())}});
}

}  // namespace

TEST(LocalRankArgCli, EveryFormAndPlaceIsAcceptedAndRecorded) {
  const std::string dsbench = binDir() + "/dsbench";
  for (const std::vector<std::string>& form : {std::vector<std::string>{"--local_rank=0", "world"},
                                               {"--local-rank", "0", "world"},
                                               {"world", "--local-rank=0"},
                                               {"world", "--local_rank", "0"}}) {
    TempDir d;
    std::vector<std::string> argv{dsbench};
    argv.insert(argv.end(), form.begin(), form.end());
    argv.insert(argv.end(), {"--quiet", "--json", d.file("w.json")});
    auto r = run(argv, single("0"));
    ASSERT_EQ(r.exitCode, 0) << form[0] << " " << form[1] << "\n" << r.out << r.err;
    auto j = ds::report::readJson(d.file("w.json"));
    EXPECT_EQ(j["ranks"][0].value("local_rank_arg", -1), 0) << j.dump();
  }
}

TEST(LocalRankArgCli, EachRankRecordsItsOwnValueUnderDsrun) {
  TempDir d;
  const std::string cmd =
      "exec " + binDir() + "/dsbench --local-rank \"$LOCAL_RANK\" world --quiet --json " + d.file("w.json");
  auto r = run({binDir() + "/dsrun", "--nproc-per-node", "2", "--standalone", "/bin/sh", "-c", cmd},
               cleanOptions(std::chrono::seconds(90)));
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  auto j = ds::report::readJson(d.file("w.json"));
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& rank : j["ranks"])
    EXPECT_EQ(rank.value("local_rank_arg", -1), rank["local_rank"].get<int>());
}

TEST(LocalRankArgCli, AMismatchWithLocalRankIsAUsageError) {
  auto b = run({binDir() + "/dsbench", "coll", "--local_rank=1"}, single("0"));
  EXPECT_EQ(b.exitCode, 5) << b.out << b.err;  // kExitConfig
  EXPECT_NE(b.err.find("--local_rank=1 says this is local rank 1 but LOCAL_RANK=0"), std::string::npos)
      << b.err;
  auto d = run({binDir() + "/dsdiag", "--local-rank", "2", "--only", "env.world_info"}, single("0"));
  EXPECT_EQ(d.exitCode, 3) << d.out << d.err;
  EXPECT_NE(d.err.find("--local-rank 2 says this is local rank 2 but LOCAL_RANK=0"), std::string::npos)
      << d.err;
  auto bad = run({binDir() + "/dsbench", "--local_rank=abc", "world"}, single("0"));
  EXPECT_EQ(bad.exitCode, 5) << bad.err;
  EXPECT_NE(bad.err.find("--local_rank='abc' is not an integer"), std::string::npos) << bad.err;
}
