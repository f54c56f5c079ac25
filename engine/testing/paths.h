// Where a test finds the files of the source tree (fixtures, scripts, schemas) and of its build
// folder, found at run time so that no absolute path sits in a test's compile line: a second clone's
// compiler cache then hits on every test file (docs/dev/testing.md, "A second fresh clone").
//
// The test targets' data macros expand to these calls, e.g. DS_REPORTS_TEST_DATA is
// ds::testing::sourcePath("reports/tests/data") (reports/CMakeLists.txt); a file that uses such a
// macro includes this header. Every test binary is in <build>/tests (cmake/Testing.cmake), and the
// build folder's CMakeCache.txt names the source tree (CMAKE_HOME_DIRECTORY).
// DS_TEST_SOURCE_ROOT / DS_TEST_BUILD_ROOT in the environment override either.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ds::testing {

namespace paths_detail {

inline std::filesystem::path thisExecutable() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw std::runtime_error("test paths: cannot read /proc/self/exe to find the build folder (" + ec.message() +
                             "); set DS_TEST_BUILD_ROOT to it");
  }
  return exe;
}

}  // namespace paths_detail

// The build folder this test binary was built in: the folder above <build>/tests.
inline const std::string& buildRoot() {
  static const std::string root = [] {
    if (const char* env = std::getenv("DS_TEST_BUILD_ROOT"); env && *env) return std::string(env);
    return paths_detail::thisExecutable().parent_path().parent_path().string();
  }();
  return root;
}

// The source tree the build folder was configured from.
inline const std::string& sourceRoot() {
  static const std::string root = [] {
    if (const char* env = std::getenv("DS_TEST_SOURCE_ROOT"); env && *env) return std::string(env);
    const std::string cache = buildRoot() + "/CMakeCache.txt";
    std::ifstream in(cache);
    constexpr std::string_view kKey = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    for (std::string line; std::getline(in, line);) {
      if (line.compare(0, kKey.size(), kKey) == 0) return line.substr(kKey.size());
    }
    throw std::runtime_error("test paths: " + cache + " does not name the source tree (CMAKE_HOME_DIRECTORY); " +
                             "run the test from its build folder's tests/ directory, or set DS_TEST_SOURCE_ROOT");
  }();
  return root;
}

// <source>/<relative>; the source tree itself for "".
inline std::string sourcePath(std::string_view relative) {
  return relative.empty() ? sourceRoot() : sourceRoot() + "/" + std::string(relative);
}

// <build>/<relative>; the build folder itself for "".
inline std::string buildPath(std::string_view relative) {
  return relative.empty() ? buildRoot() : buildRoot() + "/" + std::string(relative);
}

}  // namespace ds::testing
