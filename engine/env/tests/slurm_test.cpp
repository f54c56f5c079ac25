#include "engine/env/slurm.h"

#include <gtest/gtest.h>

#include "engine/common/error.h"

using ds::env::expandNodelist;
using ds::env::expandTasksPerNode;
using V = std::vector<std::string>;

TEST(SlurmNodelist, PlainAndCommaSeparated) {
  EXPECT_EQ(expandNodelist("node1"), V{"node1"});
  EXPECT_EQ(expandNodelist("a,b,c"), (V{"a", "b", "c"}));
}

TEST(SlurmNodelist, RangesKeepZeroPadding) {
  EXPECT_EQ(expandNodelist("node[01-04,07]"), (V{"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expandNodelist("n[8-10]"), (V{"n8", "n9", "n10"}));
  EXPECT_EQ(expandNodelist("n[098-101]"), (V{"n098", "n099", "n100", "n101"}));
}

TEST(SlurmNodelist, SuffixAfterBracket) {
  EXPECT_EQ(expandNodelist("a-[1,3-5]b"), (V{"a-1b", "a-3b", "a-4b", "a-5b"}));
}

TEST(SlurmNodelist, SeveralGroups) {
  EXPECT_EQ(expandNodelist("gpu[1-2],cpu7,io[03,05]"), (V{"gpu1", "gpu2", "cpu7", "io03", "io05"}));
}

TEST(SlurmNodelist, SeveralBracketsInOneHostAreACartesianProduct) {
  EXPECT_EQ(expandNodelist("r[1-2]-n[01-02]"), (V{"r1-n01", "r1-n02", "r2-n01", "r2-n02"}));
}

TEST(SlurmNodelist, MalformedInputNamesTheVariableAndText) {
  for (const char* bad :
       {"", "node[1-", "node]1[", "node[a-b]", "node[4-1]", "node[]", "a,,b", "n[[1]]", "n[1-99999999]"}) {
    try {
      expandNodelist(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ds::ConfigError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("SLURM_JOB_NODELIST"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
    }
  }
}

TEST(SlurmTasksPerNode, Expands) {
  EXPECT_EQ(expandTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expandTasksPerNode("8"), (std::vector<int>{8}));
  EXPECT_THROW(expandTasksPerNode("2(x3"), ds::ConfigError);
  EXPECT_THROW(expandTasksPerNode("x"), ds::ConfigError);
}
