// ds_test_worker: a tiny program that dsrun's tests launch. Options (unknown arguments are ignored, so
// tests can check that dsrun passes flags after the program name through):
//   --pid-dir D          write D/pid.<RANK> (atomically) at start
//   --dump-env D         write D/env.<RANK>: one NAME=value line per launcher variable (<unset> if absent)
//   --args-file D        write D/args.<RANK>: one argument per line
//   --print N            print N lines to stdout and N to stderr, then an unterminated line to stdout
//   --ignore-sigterm     ignore SIGTERM (to test dsrun's SIGKILL after the grace period)
//   --wait-peers N       (with --pid-dir) wait up to 10 s until N pid files exist
//   --fail-rank R        on rank R: exit with --exit-code K (default 1) or raise --signal S
//   --sleep S            sleep S seconds before exiting 0
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string envOr(const char* name, const char* dflt) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): single-threaded
  return v != nullptr ? v : dflt;
}

void writeFileAtomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
  }
  std::filesystem::rename(tmp, path);
}

int countPidFiles(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind("pid.", 0) == 0 && name.find(".tmp") == std::string::npos) ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string pidDir, envDir, argsDir;
  int printLines = 0, waitPeers = 0, failRank = -1, exitCode = 1, sig = 0;
  double sleepS = 0;
  bool ignoreTerm = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--pid-dir")
      pidDir = next();
    else if (a == "--dump-env")
      envDir = next();
    else if (a == "--args-file")
      argsDir = next();
    else if (a == "--print")
      printLines = std::stoi(next());
    else if (a == "--ignore-sigterm")
      ignoreTerm = true;
    else if (a == "--wait-peers")
      waitPeers = std::stoi(next());
    else if (a == "--fail-rank")
      failRank = std::stoi(next());
    else if (a == "--exit-code")
      exitCode = std::stoi(next());
    else if (a == "--signal")
      sig = std::stoi(next());
    else if (a == "--sleep")
      sleepS = std::stod(next());
  }
  const std::string rankText = envOr("RANK", "-1");
  const int rank = std::stoi(rankText);
  if (ignoreTerm) ::signal(SIGTERM, SIG_IGN);
  if (!pidDir.empty()) writeFileAtomic(pidDir + "/pid." + rankText, std::to_string(::getpid()) + "\n");
  if (!envDir.empty()) {
    std::string text;
    for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                             "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
                             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                             "DS_JOB_ID", "OMP_NUM_THREADS", "TORCHELASTIC_ERROR_FILE", "DS_TEST_EXTRA"}) {
      text += std::string(name) + "=" + envOr(name, "<unset>") + "\n";
    }
    writeFileAtomic(envDir + "/env." + rankText, text);
  }
  if (!argsDir.empty()) {
    std::string text;
    for (int i = 1; i < argc; ++i) text += std::string(argv[i]) + "\n";
    writeFileAtomic(argsDir + "/args." + rankText, text);
  }
  for (int i = 0; i < printLines; ++i) {
    std::printf("out line %d of rank %d\n", i, rank);
    std::fprintf(stderr, "err line %d of rank %d\n", i, rank);
  }
  if (printLines > 0) std::printf("tail of rank %d", rank);
  std::fflush(stdout);
  if (waitPeers > 0 && !pidDir.empty()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (countPidFiles(pidDir) < waitPeers && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (rank == failRank) {
    if (sig != 0) {
      ::signal(sig, SIG_DFL);
      ::raise(sig);
    }
    return exitCode;
  }
  if (sleepS > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleepS));
  return 0;
}
