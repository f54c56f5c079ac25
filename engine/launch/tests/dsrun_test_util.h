// Helpers for the tests that run the real dsrun binary: start it with redirected output, wait with a
// bound, and check that worker pids are gone.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
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

extern char** environ;  // NOLINT

namespace ds::launch::testing {

namespace fs = std::filesystem;

inline std::string binDir() {
  const char* d = std::getenv("DS_BIN_DIR");  // NOLINT(concurrency-mt-unsafe)
  return d != nullptr ? d : "bin";
}
inline std::string dsrunPath() { return binDir() + "/dsrun"; }
inline std::string workerPath() { return binDir() + "/ds_test_worker"; }

inline std::string readFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dsrun_test_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const {
    fs::create_directories(path_ + "/" + name);
    return path_ + "/" + name;
  }

 private:
  std::string path_;
};

struct RunResult {
  int exitCode = -1000;  // exit status, or -signal
  std::string out;
  std::string err;
  double seconds = 0;
};

// One dsrun process with stdout/stderr going to files.
class DsrunProcess {
 public:
  // env: variables to set ("" value with unset=true removes them). OMP_NUM_THREADS and DS_JOB_ID are
  // removed unless given, so that the tests see dsrun's defaults.
  DsrunProcess(const std::vector<std::string>& args, std::map<std::string, std::string> env = {},
               std::vector<std::string> unset = {"OMP_NUM_THREADS", "DS_JOB_ID"})
      : dir_() {
    outPath_ = dir_.path() + "/out";
    errPath_ = dir_.path() + "/err";
    std::vector<std::string> envStrings;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      std::string key = kv.substr(0, kv.find('='));
      bool drop = env.count(key) > 0 || key.rfind("DSRUN_", 0) == 0;
      for (const auto& u : unset) drop = drop || key == u;
      if (!drop) envStrings.push_back(kv);
    }
    for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
    std::vector<std::string> argStrings = {dsrunPath()};
    argStrings.insert(argStrings.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argStrings) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envStrings) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, errPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    start_ = std::chrono::steady_clock::now();
    int rc = posix_spawn(&pid_, argStrings[0].c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << argStrings[0] << ": " << rc;
      pid_ = -1;
    }
  }
  ~DsrunProcess() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  DsrunProcess(const DsrunProcess&) = delete;
  DsrunProcess& operator=(const DsrunProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits up to timeoutS; on timeout the test fails and dsrun is killed.
  RunResult wait(double timeoutS = 20) {
    RunResult r;
    if (pid_ <= 0) return r;
    auto deadline = start_ + std::chrono::duration<double>(timeoutS);
    int status = 0;
    while (true) {
      pid_t w = ::waitpid(pid_, &status, WNOHANG);
      if (w == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "dsrun did not exit within " << timeoutS << " s";
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    done_ = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r.out = readFile(outPath_);
    r.err = readFile(errPath_);
    return r;
  }

 private:
  TempDir dir_;
  std::string outPath_;
  std::string errPath_;
  pid_t pid_ = -1;
  bool done_ = false;
  std::chrono::steady_clock::time_point start_;
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
