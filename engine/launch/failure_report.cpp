// torchrun's failure table, with the root cause first and the workers dsrun stopped listed apart.
#include <fmt/format.h>
#include <signal.h>
#include <string.h>

#include <ctime>

#include "engine/launch/launcher.h"

namespace ds::launch {

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

namespace {

std::string formatTime(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &tm);
  return buf;
}

bool failed(const WorkerExit& e) { return e.exitCode != 0; }

// What a tired engineer should do next, for the usual causes of a root-cause exit.
std::string hintFor(const WorkerExit& e) {
  std::string where = e.logFile.empty()
                          ? "its output above (rerun with --tee or --log-dir to keep each rank's output)"
                          : fmt::format("{}", e.logFile);
  switch (-e.exitCode) {
    case SIGKILL:
      return fmt::format(
          "killed by SIGKILL from outside dsrun; the kernel's OOM killer is the usual cause "
          "(check 'dmesg | grep -i oom'). See {}.",
          where);
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
      return fmt::format(
          "the program crashed; see {}, and run it under gdb or enable core dumps "
          "('ulimit -c unlimited').",
          where);
    case SIGABRT:
      return fmt::format("the program aborted (a failed assert or an uncaught C++ exception); see {}.",
                         where);
    default:
      return fmt::format("see {}.", where);
  }
}

void appendBlock(std::string& out, int index, const WorkerExit& e, const std::string& host, bool withHint) {
  out += fmt::format("[{}]:\n", index);
  out += fmt::format("  time      : {}\n", formatTime(e.time));
  out += fmt::format("  host      : {}\n", host);
  out += fmt::format("  rank      : {} (local_rank: {})\n", e.rank, e.localRank);
  out += fmt::format("  exitcode  : {} (pid: {})\n", exitCodeText(e.exitCode), e.pid);
  out += fmt::format("  error_file: {}\n", e.errorFile.empty() ? "<N/A>" : e.errorFile);
  out += fmt::format("  log_file  : {}\n", e.logFile.empty() ? "<N/A>" : e.logFile);
  if (withHint) out += fmt::format("  hint      : {}\n", hintFor(e));
}

}  // namespace

std::string exitCodeText(int exitCode) {
  if (exitCode >= 0) return std::to_string(exitCode);
  return fmt::format("{} ({})", exitCode, signalName(-exitCode));
}

int launcherExitCode(int exitCode) { return exitCode >= 0 ? exitCode : 128 + (-exitCode); }

std::string formatFailureReport(const std::string& program, const std::string& host,
                                const std::vector<WorkerExit>& exits, double gracePeriodS) {
  const WorkerExit* root = nullptr;
  std::vector<const WorkerExit*> others;
  std::vector<const WorkerExit*> stopped;
  for (const WorkerExit& e : exits) {
    if (e.stoppedByLauncher) {
      stopped.push_back(&e);
    } else if (failed(e)) {
      if (root == nullptr) {
        root = &e;
      } else {
        others.push_back(&e);
      }
    }
  }
  if (root == nullptr) return "";

  const std::string rule(60, '-');
  const std::string frame(60, '=');
  std::string out = frame + "\n";
  out += fmt::format("{} FAILED\n", program);
  out += rule + "\n";
  out += "Root Cause (first observed failure):\n";
  appendBlock(out, 0, *root, host, true);
  if (!others.empty()) {
    out += rule + "\n";
    out += "Other Failures (before dsrun stopped the workers):\n";
    int i = 1;
    for (const WorkerExit* e : others) appendBlock(out, i++, *e, host, false);
  }
  if (!stopped.empty()) {
    out += rule + "\n";
    out += fmt::format("Terminated by dsrun after rank {} failed (SIGTERM, then SIGKILL after {:g} s):\n",
                       root->rank, gracePeriodS);
    for (const WorkerExit* e : stopped) {
      out += fmt::format("  rank {} (local_rank: {}, pid: {}): exitcode {}{}\n", e->rank, e->localRank,
                         e->pid, exitCodeText(e->exitCode),
                         e->killedAfterGrace ? ", did not stop within the grace period" : "");
    }
  }
  out += frame + "\n";
  return out;
}

}  // namespace ds::launch
