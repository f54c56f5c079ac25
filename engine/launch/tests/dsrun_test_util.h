// Helpers for the tests that run the real dsrun binary: start it with redirected output, wait with a
// bound, and check that worker pids are gone.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/testing/subprocess.h"

namespace ds::launch::testing {

namespace fs = std::filesystem;

using ds::testing::binDir;
using ds::testing::readFile;
using ds::testing::RunResult;
using ds::testing::TempDir;

inline std::string dsrunPath() { return binDir() + "/dsrun"; }
inline std::string workerPath() { return binDir() + "/ds_test_worker"; }

// One dsrun process with stdout/stderr going to files (engine/testing's Process, with the
// environment dsrun's tests want).
class DsrunProcess {
 public:
  // env: variables to set. OMP_NUM_THREADS, DS_JOB_ID and every DSRUN_* variable are removed unless
  // given, so that the tests see dsrun's defaults.
  DsrunProcess(const std::vector<std::string>& args, std::map<std::string, std::string> env = {},
               std::vector<std::string> unset = {"OMP_NUM_THREADS", "DS_JOB_ID"})
      : process_(argvFor(args), optionsFor(std::move(env), std::move(unset))) {}

  pid_t pid() const { return process_.pid(); }

  // Waits up to timeoutS; on timeout the test fails and dsrun is killed.
  RunResult wait(double timeoutS = 20) {
    RunResult r = process_.wait(std::chrono::milliseconds(static_cast<long>(timeoutS * 1000)));
    if (r.timedOut) ADD_FAILURE() << "dsrun did not exit within " << timeoutS << " s";
    return r;
  }

 private:
  static std::vector<std::string> argvFor(const std::vector<std::string>& args) {
    std::vector<std::string> argv{dsrunPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  static ds::testing::RunOptions optionsFor(std::map<std::string, std::string> env, std::vector<std::string> unset) {
    ds::testing::RunOptions o;
    o.setEnv = std::move(env);
    o.unsetEnv = std::move(unset);
    for (auto& v : ds::testing::variablesWithPrefix("DSRUN_")) o.unsetEnv.push_back(v);
    o.timeout = std::chrono::minutes(5);
    return o;
  }
  ds::testing::Process process_;
};

inline RunResult runDsrun(const std::vector<std::string>& args, std::map<std::string, std::string> env = {},
                          double timeoutS = 20) {
  DsrunProcess p(args, std::move(env));
  return p.wait(timeoutS);
}

template <typename Pred>
bool waitUntil(Pred pred, double timeoutS) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutS);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// True while the process exists and is not a zombie.
inline bool pidAlive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  return stat[paren + 2] != 'Z';
}

// The pids the workers wrote with --pid-dir, by rank (0 when missing).
inline std::vector<pid_t> readPids(const std::string& dir, int n) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::string text = readFile(dir + "/pid." + std::to_string(r));
    pids.push_back(text.empty() ? 0 : static_cast<pid_t>(std::stol(text)));
  }
  return pids;
}

// Files in dir, not counting the workers' half-written "*.tmp" files (they write a temp file and
// rename it, so a counted file is complete).
inline int countFiles(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".tmp") ++n;
  }
  return n;
}

// NAME=value lines of a --dump-env file.
inline std::map<std::string, std::string> readEnvDump(const std::string& path) {
  std::map<std::string, std::string> env;
  std::istringstream in(readFile(path));
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

}  // namespace ds::launch::testing
