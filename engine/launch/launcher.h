// dsrun's library part: a torchrun-style launcher for one node. launch() starts nprocPerNode copies
// of a program with torchrun's worker environment, supervises them, stops all of them when one fails
// or when dsrun is interrupted, and prints torchrun's failure table.
//
// Exit codes of dsrun (README text):
//   0        every worker exited 0.
//   N        the root-cause worker (the first observed failure) exited with code N.
//   128+S    the root-cause worker was killed by signal S (e.g. 137 = SIGKILL, often the OOM killer;
//            139 = SIGSEGV), the shell's convention.
//   2        dsrun's own usage or configuration error (bad flag value, program not found or not
//            executable, log directory not writable); nothing was started.
//   3        dsrun itself failed while running (fork, pipe or file limits); it stopped what it had
//            started.
//   130/143  dsrun received SIGINT (Ctrl-C) / SIGTERM and stopped every worker (129 SIGHUP, 131
//            SIGQUIT likewise).
// A worker may itself exit 2 or 3; the message on stderr tells which case it was.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ds::launch {

inline constexpr int kExitUsage = 2;           // dsrun's own usage / configuration error
inline constexpr int kExitLauncherFailed = 3;  // dsrun itself could not run (fork, pipes, ...)
// The most workers one dsrun starts (README). A node has at most a few hundred cores or 16 GPUs; a
// larger count is a typo (100000 for 1000) that would fill the process table.
inline constexpr int kMaxWorkersPerNode = 1024;

// The options of one dsrun invocation; torchrun's names and defaults.
struct LaunchOptions {
  int nprocPerNode = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  // Single node: masterAddr becomes 127.0.0.1 and masterPort a free port (bound to port 0 and
  // released, so another process could still take it before rank 0 binds it).
  bool standalone = false;
  // --rdzv-id / --run-id; empty: a default (see resolveLaunchOptions). Becomes TORCHELASTIC_RUN_ID, DS_JOB_ID
  // (unless the parent environment sets DS_JOB_ID) and a directory name under logDir.
  std::string runId;
  // Empty: no log files. Else each worker writes <logDir>/<runId>/attempt_0/<local_rank>/
  // {stdout,stderr}.log (truncated when they already exist).
  std::string logDir;
  // Copy every output line of every worker to dsrun's stdout/stderr prefixed "[rank<N>]:" (torchrun's
  // prefix), besides the log files when logDir is set.
  bool tee = false;
  // Seconds between SIGTERM and SIGKILL when dsrun stops workers.
  double gracePeriodS = 5.0;
  // Accepted for torchrun compatibility; dsrun does not restart workers, so only 0 is valid.
  int maxRestarts = 0;
  // The program and its arguments. The program is looked up on PATH like execvp when it has no '/'.
  std::vector<std::string> command;
};

// Checks every option and throws ds::ConfigError naming the flag, the value and the valid range.
void validateLaunchOptions(const LaunchOptions& opts);

// validateLaunchOptions + fills the defaults that need the machine: the runId, and for --standalone
// the loopback address and a free port. A missing runId is random on one node; with nnodes > 1 every
// node's dsrun must agree without talking, so it is SLURM_JOB_ID from `env` when set, else
// "<masterAddr>_<masterPort>" (the rendezvous endpoint, which identifies the job on the cluster).
// Throws ConfigError, or IoError when no port can be bound.
LaunchOptions resolveLaunchOptions(LaunchOptions opts, const std::map<std::string, std::string>& env = {});

// What the machine allows in processes, read before forking (readProcessLimits) so that a large
// --nproc-per-node is refused instead of forking until fork fails.
struct ProcessLimits {
  long long userProcessLimit = -1;  // ulimit -u (RLIMIT_NPROC, soft); -1 = unlimited or not enforced (root)
  long long userProcesses = 0;      // processes this user runs now
  long long pidMax = -1;            // /proc/sys/kernel/pid_max; -1 = unknown
};
ProcessLimits readProcessLimits();

// Throws ConfigError when `workers` more processes would pass the limits: ulimit -u less what the
// user already runs, pid_max (half of it: the rest of the machine needs pids too) or
// kMaxWorkersPerNode. The message says how many were asked for and how many are possible.
void checkWorkerLimits(int workers, const ProcessLimits& limits);

// Finds the file execvp would run for `program`, given PATH (empty entries mean the current
// directory, as in execvp). Throws ds::ConfigError naming the path and the fix when it does not
// exist, is a directory or is not executable.
std::string resolveProgram(const std::string& program, const std::string& pathEnv);

// The complete environment of worker `localRank`: `parent` plus torchrun's variables (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT,
// TORCHELASTIC_MAX_RESTARTS), DS_JOB_ID (kept when `parent` has it) and OMP_NUM_THREADS=1 when
// `parent` lacks it and nprocPerNode > 1. `opts` must be resolved (runId set).
std::map<std::string, std::string> buildWorkerEnv(const LaunchOptions& opts, int localRank,
                                                  const std::map<std::string, std::string>& parent);

// How one worker ended, as the failure table shows it.
struct WorkerExit {
  int rank = 0;
  int localRank = 0;
  pid_t pid = 0;
  // >= 0: the exit status; < 0: killed by signal -exitCode (torchrun's convention).
  int exitCode = 0;
  std::chrono::system_clock::time_point time;
  // The worker ended after dsrun had started stopping the workers (SIGTERM / SIGKILL from dsrun).
  bool stoppedByLauncher = false;
  bool killedAfterGrace = false;  // dsrun had to send SIGKILL to it
  std::string errorFile;          // TORCHELASTIC_ERROR_FILE when the worker wrote it; else empty
  std::string logFile;            // its stderr log when --log-dir is set; else empty
};

// "3", or "-9 (SIGKILL)" for a signal death.
std::string exitCodeText(int exitCode);

// "SIGTERM" for 15 (glibc's abbreviation), "signal N" for a number it does not know.
std::string signalName(int sig);

// dsrun's exit code for a root cause: its exit status, or 128+signal.
int launcherExitCode(int exitCode);

// torchrun's failure table: a header naming the program, the root cause block first (the first
// failed exit in `exits`, which are in the order dsrun observed them, that dsrun did not cause),
// then other independent failures, then the workers dsrun stopped. Returns "" when nothing failed.
std::string formatFailureReport(const std::string& program, const std::string& host,
                                const std::vector<WorkerExit>& exits, double gracePeriodS);

// Starts the workers, supervises them until all have exited and returns dsrun's exit code (see the
// table at the top). Each worker runs in its own process group (dsrun signals the group, so the
// processes a worker started are stopped too), dies with dsrun (PR_SET_PDEATHSIG), and reads stdin
// from /dev/null: a background process group reading the terminal would stop, not fail. Blocks; the calling
// thread forks the workers, so it must live until launch returns (PR_SET_PDEATHSIG follows the thread). While
// it runs, SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked in the calling thread and read through a
// signalfd; other threads of the process should block them too. Throws ConfigError before anything starts
// when the options or the program are wrong, IoError when it cannot fork, create pipes or open log files
// (after stopping what it started).
int launch(const LaunchOptions& opts);

}  // namespace ds::launch
