// The test-support paths (engine/testing/paths.h, binDir()): found from the test binary's own place
// when the environment says nothing, as when a developer runs a test binary by hand.
#include "engine/testing/paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/testing/subprocess.h"

namespace fs = std::filesystem;

TEST(TestPaths, BuildAndSourceTreesAreFoundFromTheBinary) {
  // The binary is <build>/tests/<name>; the build folder has the CMakeCache.txt that names the source.
  EXPECT_TRUE(fs::exists(ds::testing::buildPath("CMakeCache.txt"))) << ds::testing::buildRoot();
  EXPECT_TRUE(fs::exists(ds::testing::buildPath("tests"))) << ds::testing::buildRoot();
  EXPECT_TRUE(fs::exists(ds::testing::sourcePath("engine/testing/paths.h"))) << ds::testing::sourceRoot();
  EXPECT_EQ(ds::testing::sourcePath(""), ds::testing::sourceRoot());
  EXPECT_EQ(ds::testing::buildPath(""), ds::testing::buildRoot());
}

TEST(TestPaths, BinDirFollowsTheEnvironmentElseTheBuildFolder) {
  const char* was = std::getenv("DS_BIN_DIR");  // NOLINT(concurrency-mt-unsafe)
  const std::string saved = was != nullptr ? was : "";
  ::setenv("DS_BIN_DIR", "/somewhere/bin", 1);
  EXPECT_EQ(ds::testing::binDir(), "/somewhere/bin");
  ::setenv("DS_BIN_DIR", "", 1);
  EXPECT_EQ(ds::testing::binDir(), ds::testing::buildPath("bin"));
  ::unsetenv("DS_BIN_DIR");
  EXPECT_EQ(ds::testing::binDir(), ds::testing::buildPath("bin"));
  EXPECT_EQ(fs::path(ds::testing::binDir()).parent_path(), fs::path(ds::testing::buildRoot()));
  if (was != nullptr) ::setenv("DS_BIN_DIR", saved.c_str(), 1);
}
