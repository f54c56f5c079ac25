// launch(): spawn, supervise and stop the workers of one node.
//
// The supervisor never spins: it blocks in poll() on a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP,
// SIGQUIT) and, with --tee, on the workers' output pipes. Timeouts exist only for the SIGTERM->SIGKILL
// grace period, the bounded wait after SIGKILL, and a 1 s re-check of the children in case a
// SIGCHLD went to another thread.
#include "engine/launch/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/unique_fd.h"
#include "engine/host/net.h"

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX name

namespace ds::launch {
namespace {

using SteadyClock = std::chrono::steady_clock;

// After SIGKILL a process normally dies at once; one stuck in the kernel (state D: a hung NFS mount or
// GPU driver) may never die. dsrun gives up on it after this long rather than hang.
constexpr auto kAfterKillWait = std::chrono::seconds(10);
// Upper bound of one poll() so that a SIGCHLD taken by another thread of the process delays reaping
// by at most this much.
constexpr int kMaxPollMs = 1000;
// A worker line longer than this without a newline is emitted in pieces, to bound dsrun's memory.
constexpr size_t kMaxPartialLine = size_t{64} * 1024;
constexpr const char* kTeePrefixFormat = "[rank{}]:";  // torchrun's --tee prefix


// Writes everything, waiting (poll) when the fd is non-blocking and full. False on a real error, e.g.
// EPIPE when dsrun's stdout reader went away.
bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, kMaxPollMs);
    } else {
      return false;
    }
  }
  return true;
}

// Blocks the supervised signals in this thread and reads them from a signalfd; restores the mask and
// the dispositions it changed on destruction. SIGCHLD is set to SIG_DFL (SIG_IGN inherited from a
// parent would make the kernel reap our workers) and SIGPIPE to SIG_IGN (a closed stdout must not kill
// dsrun while it tees). Workers get the original mask and dispositions back before exec.
class SignalGuard {
 public:
  SignalGuard() {
    sigemptyset(&set_);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set_, sig);
    if (int rc = ::pthread_sigmask(SIG_BLOCK, &set_, &origMask_); rc != 0) {
      throw IoError(fmt::format("dsrun: cannot block signals: {}", errnoText(rc)));
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGCHLD, &dfl, &origChld_);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &origPipe_);
    fd_ = UniqueFd(::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd_.valid()) {
      int err = errno;
      restore();
      throw IoError(fmt::format("dsrun: cannot create a signalfd: {}", errnoText(err)));
    }
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  ~SignalGuard() {
    // Consume what is pending, so that a late SIGCHLD or a second Ctrl-C already handled does not hit
    // the default action when the mask is restored.
    signalfd_siginfo info{};
    while (::read(fd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    }
    fd_.reset();
    restore();
  }

  int fd() const { return fd_.get(); }
  const sigset_t& origMask() const { return origMask_; }
  const struct sigaction& origChld() const { return origChld_; }
  const struct sigaction& origPipe() const { return origPipe_; }

 private:
  void restore() {
    ::sigaction(SIGCHLD, &origChld_, nullptr);
    ::sigaction(SIGPIPE, &origPipe_, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &origMask_, nullptr);
  }

  sigset_t set_{};
  sigset_t origMask_{};
  struct sigaction origChld_ {};
  struct sigaction origPipe_ {};
  UniqueFd fd_;
};

// One worker output stream under --tee: the read end of its pipe, its log file (or none) and the
// console fd. Bytes go to the log file as they come; complete lines go to the console prefixed.
struct Relay {
  UniqueFd pipe;
  UniqueFd log;
  int consoleFd = -1;
  std::string prefix;
  std::string partial;

  // Reads what is available without blocking. Returns false at end of stream (the pipe is closed
  // then and the last incomplete line flushed).
  bool pump() {
    char buf[65536];
    while (pipe.valid()) {
      ssize_t n = ::read(pipe.get(), buf, sizeof(buf));
      if (n > 0) {
        if (log.valid() && !writeAll(log.get(), buf, static_cast<size_t>(n))) {
          ds::log::warn(
              "dsrun: cannot write a worker log file ({}); later output of this stream goes only to "
              "the console",
              errnoText(errno));
          log.reset();
        }
        partial.append(buf, static_cast<size_t>(n));
        emitLines(false);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return true;
      } else {
        emitLines(true);
        pipe.reset();
        log.reset();
        return false;
      }
    }
    return false;
  }

  void emitLines(bool final) {
    std::string out;
    size_t start = 0;
    while (true) {
      size_t nl = partial.find('\n', start);
      if (nl == std::string::npos) break;
      out += prefix;
      out.append(partial, start, nl - start + 1);
      start = nl + 1;
    }
    partial.erase(0, start);
    if (!partial.empty() && (final || partial.size() > kMaxPartialLine)) {
      out += prefix;
      out += partial;
      out += '\n';
      partial.clear();
    }
    if (!out.empty() && consoleFd >= 0 && !writeAll(consoleFd, out.data(), out.size())) {
      consoleFd = -1;  // the console went away (EPIPE); keep the log files going
    }
  }
};

struct Worker {
  int localRank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  std::vector<Relay> relays;
  std::string stdoutLog;
  std::string stderrLog;
  std::string errorFile;  // TORCHELASTIC_ERROR_FILE given to the worker, when --log-dir is set
};

// Everything the child needs, prepared before fork so that the child only makes async-signal-safe
// calls.
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdinFd = -1;   // -1: inherit
  int stdoutFd = -1;  // -1: inherit
  int stderrFd = -1;  // -1: inherit
  pid_t parentPid = 0;
  int errPipe = -1;
  const SignalGuard* signals = nullptr;
};

// What the child reports through the CLOEXEC pipe when it cannot exec.
struct ChildFailure {
  int stage;  // 0 setup, 1 exec
  int err;
};

[[noreturn]] void childFail(int errPipe, int stage, int err) {
  ChildFailure f{stage, err};
  ssize_t ignored = ::write(errPipe, &f, sizeof(f));
  (void)ignored;
  ::_exit(127);
}

bool moveFd(int from, int to) {
  if (from < 0) return true;
  if (from == to) return ::fcntl(to, F_SETFD, 0) == 0;  // keep it across exec
  return ::dup2(from, to) == to;
}

[[noreturn]] void runChild(const ChildPlan& p) {
  // Own process group, so that dsrun can signal the worker together with its own children.
  ::setpgid(0, 0);
  // Die with dsrun, even when it is SIGKILLed. If dsrun already died before prctl, getppid() changed.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) childFail(p.errPipe, 0, errno);
  if (::getppid() != p.parentPid) ::_exit(127);
  ::sigaction(SIGCHLD, &p.signals->origChld(), nullptr);
  ::sigaction(SIGPIPE, &p.signals->origPipe(), nullptr);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the forked child has one thread
  ::sigprocmask(SIG_SETMASK, &p.signals->origMask(), nullptr);
  if (!moveFd(p.stdinFd, STDIN_FILENO) || !moveFd(p.stdoutFd, STDOUT_FILENO) ||
      !moveFd(p.stderrFd, STDERR_FILENO)) {
    childFail(p.errPipe, 0, errno);
  }
  ::execve(p.path, p.argv, p.envp);
  childFail(p.errPipe, 1, errno);
}

UniqueFd openLog(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    throw ConfigError(fmt::format("cannot open the worker log file '{}': {}. Choose a writable --log-dir.",
                                  path, errnoText(errno)));
  }
  return fd;
}

std::map<std::string, std::string> currentEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

class Supervisor {
 public:
  Supervisor(LaunchOptions opts, std::string programPath, std::map<std::string, std::string> parentEnv)
      : opts_(std::move(opts)),
        programPath_(std::move(programPath)),
        parentEnv_(std::move(parentEnv)),
        host_(net::hostName()) {}

  int run() {
    SignalGuard signals;
    signals_ = &signals;
    try {
      spawnAll();
    } catch (...) {
      // Stop what already runs before reporting why the rest could not start.
      beginStop();
      supervise();
      throw;
    }
    supervise();
    return finish();
  }

 private:
  void prepareWorkers(const std::map<std::string, std::string>& parentEnv) {
    std::string attemptDir;
    if (!opts_.logDir.empty()) {
      attemptDir = fmt::format("{}/{}/attempt_0", opts_.logDir, opts_.runId);
      ds::log::info("dsrun: worker logs go to {}/<local_rank>/{{stdout,stderr}}.log", attemptDir);
    }
    workers_.resize(static_cast<size_t>(opts_.nprocPerNode));
    envs_.resize(workers_.size());
    for (int lr = 0; lr < opts_.nprocPerNode; ++lr) {
      Worker& w = workers_[static_cast<size_t>(lr)];
      w.localRank = lr;
      w.rank = opts_.nodeRank * opts_.nprocPerNode + lr;
      auto env = buildWorkerEnv(opts_, lr, parentEnv);
      if (!attemptDir.empty()) {
        std::string dir = fmt::format("{}/{}", attemptDir, lr);
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) {
          throw ConfigError(fmt::format(
              "cannot create the log directory '{}': {}. Choose a writable --log-dir.", dir, ec.message()));
        }
        w.stdoutLog = dir + "/stdout.log";
        w.stderrLog = dir + "/stderr.log";
        // torchrun's error file: a worker that records its exception (torch's @record) writes it here.
        w.errorFile = dir + "/error.json";
        std::filesystem::remove(w.errorFile, ec);
        env["TORCHELASTIC_ERROR_FILE"] = w.errorFile;
      }
      for (auto& [k, v] : env) envs_[static_cast<size_t>(lr)].push_back(fmt::format("{}={}", k, v));
    }
  }

  void spawnAll() {
    if (parentEnv_.find("OMP_NUM_THREADS") == parentEnv_.end() && opts_.nprocPerNode > 1) {
      ds::log::warn(
          "dsrun: OMP_NUM_THREADS is not set, so it is set to 1 for each of the {} workers to avoid "
          "overloading the system. Tune it for best performance in your application (e.g. "
          "OMP_NUM_THREADS=<cores per worker> dsrun ...).",
          opts_.nprocPerNode);
    }
    prepareWorkers(parentEnv_);

    std::vector<char*> argv;
    for (auto& a : opts_.command) argv.push_back(a.data());
    argv.push_back(nullptr);
    UniqueFd devNull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devNull.valid()) throw IoError(fmt::format("dsrun: cannot open /dev/null: {}", errnoText(errno)));

    for (size_t i = 0; i < workers_.size(); ++i) {
      // A stop signal stays pending in the signalfd until supervise() reads it; starting the rest of
      // the workers first would delay the stop by the whole spawn.
      if (stopSignalPending()) return;
      Worker& w = workers_[i];
      std::vector<char*> envp;
      for (auto& kv : envs_[i]) envp.push_back(kv.data());
      envp.push_back(nullptr);

      // The child's stdout/stderr: inherited, a log file, or a pipe that dsrun tees.
      UniqueFd childOut;
      UniqueFd childErr;
      if (opts_.tee) {
        for (int stream = 0; stream < 2; ++stream) {
          int fds[2];
          if (::pipe2(fds, O_CLOEXEC) != 0) {
            throw IoError(
                fmt::format("dsrun: cannot create an output pipe for rank {}: {}. Raise the open-file "
                            "limit (ulimit -n) or start fewer workers.",
                            w.rank, errnoText(errno)));
          }
          ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
          Relay r;
          r.pipe = UniqueFd(fds[0]);
          r.consoleFd = stream == 0 ? STDOUT_FILENO : STDERR_FILENO;
          r.prefix = fmt::format(kTeePrefixFormat, w.rank);
          if (!w.stdoutLog.empty()) r.log = openLog(stream == 0 ? w.stdoutLog : w.stderrLog);
          w.relays.push_back(std::move(r));
          (stream == 0 ? childOut : childErr) = UniqueFd(fds[1]);
        }
      } else if (!w.stdoutLog.empty()) {
        childOut = openLog(w.stdoutLog);
        childErr = openLog(w.stderrLog);
      }

      int errPipe[2];
      if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        throw IoError(
            fmt::format("dsrun: cannot create a pipe to start rank {}: {}", w.rank, errnoText(errno)));
      }
      UniqueFd errRead(errPipe[0]);
      UniqueFd errWrite(errPipe[1]);
      ChildPlan plan;
      plan.path = programPath_.c_str();
      plan.argv = argv.data();
      plan.envp = envp.data();
      plan.stdinFd = devNull.get();
      plan.stdoutFd = childOut.get();
      plan.stderrFd = childErr.get();
      plan.parentPid = ::getpid();
      plan.errPipe = errWrite.get();
      plan.signals = signals_;

      pid_t pid = ::fork();
      if (pid < 0) {
        throw IoError(
            fmt::format("dsrun: cannot fork rank {}: {}. The process or memory limit is reached "
                        "(ulimit -u, free memory); start fewer workers.",
                        w.rank, errnoText(errno)));
      }
      if (pid == 0) runChild(plan);
      ::setpgid(pid, pid);  // also in the child; whichever runs first wins the race
      errWrite.reset();
      w.pid = pid;
      w.running = true;

      // EOF: exec succeeded (the CLOEXEC write end closed). Data: the child could not exec.
      ChildFailure failure{};
      ssize_t n;
      do {
        n = ::read(errRead.get(), &failure, sizeof(failure));
      } while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(sizeof(failure))) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        w.running = false;
        throwExecError(w, failure);
      }
    }
  }

  static bool stopSignalPending() {
    sigset_t pending;
    if (::sigpending(&pending) != 0) return false;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
      if (sigismember(&pending, sig) == 1) return true;
    return false;
  }

  [[noreturn]] void throwExecError(const Worker& w, const ChildFailure& f) const {
    const std::string& path = programPath_;
    if (f.stage == 1 && f.err == ENOEXEC) {
      throw ConfigError(
          fmt::format("rank {}: cannot execute '{}': it is neither a binary nor a script with a '#!' "
                      "line. Add a '#!' line, or run it through its interpreter ('dsrun [options] "
                      "bash {}').",
                      w.rank, path, path));
    }
    if (f.stage == 1 && (f.err == ENOENT || f.err == EACCES || f.err == ENOTDIR || f.err == ELOOP)) {
      throw ConfigError(
          fmt::format("rank {}: cannot execute '{}': {}. If it is a script, check that the "
                      "interpreter in its '#!' line exists; check the path and 'chmod +x {}'.",
                      w.rank, path, errnoText(f.err), path));
    }
    throw IoError(fmt::format("rank {}: cannot {} '{}': {}", w.rank,
                              f.stage == 1 ? "execute" : "set up the worker process for", path,
                              errnoText(f.err)));
  }

  size_t runningCount() const {
    return static_cast<size_t>(
        std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; }));
  }

  void signalWorker(const Worker& w, int sig) {
    // The group first (the worker and the processes it started); the pid alone when the worker moved
    // to another group.
    if (::kill(-w.pid, sig) != 0) ::kill(w.pid, sig);
  }

  void beginStop() {
    if (stopping_) return;
    stopping_ = true;
    for (const Worker& w : workers_) {
      if (w.running) signalWorker(w, SIGTERM);
    }
    killDeadline_ = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(opts_.gracePeriodS));
    if (opts_.gracePeriodS <= 0) sendKill();
  }

  void sendKill() {
    if (killSent_) return;
    killSent_ = true;
    for (const Worker& w : workers_) {
      if (w.running) signalWorker(w, SIGKILL);
    }
    giveUpDeadline_ = SteadyClock::now() + kAfterKillWait;
  }

  void reap() {
    bool newFailure = false;
    for (Worker& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      w.running = false;
      WorkerExit e;
      e.rank = w.rank;
      e.localRank = w.localRank;
      e.pid = w.pid;
      e.time = std::chrono::system_clock::now();
      e.stoppedByLauncher = stopping_;
      e.logFile = w.stderrLog;
      if (r < 0) {
        // Someone else reaped it (ECHILD); its status is lost.
        ds::log::warn("dsrun: the exit status of rank {} (pid {}) was lost ({}); counting it as a failure",
                      w.rank, w.pid, errnoText(errno));
        e.exitCode = 255;
      } else if (WIFEXITED(status)) {
        e.exitCode = WEXITSTATUS(status);
      } else {
        e.exitCode = -WTERMSIG(status);
      }
      e.killedAfterGrace = killSent_ && e.exitCode == -SIGKILL;
      std::error_code ec;
      if (!w.errorFile.empty() && std::filesystem::file_size(w.errorFile, ec) > 0 && !ec)
        e.errorFile = w.errorFile;
      if (e.exitCode != 0 && !stopping_) newFailure = true;
      exits_.push_back(std::move(e));
    }
    // All failures seen in this pass count as independent; the stop starts after the pass.
    if (newFailure) beginStop();
  }

  void handleSignals() {
    signalfd_siginfo info{};
    while (::read(signals_->fd(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // reap() runs after every wake-up
      if (receivedSignal_ == 0) receivedSignal_ = sig;
      if (!stopping_) {
        ds::log::warn(
            "dsrun: received {}; stopping the {} running workers (SIGTERM now, SIGKILL after {:g} s; "
            "send it again to kill them at once)",
            signalName(sig), runningCount(), opts_.gracePeriodS);
        beginStop();
      } else if (!killSent_) {
        ds::log::warn("dsrun: received {} again; killing the {} remaining workers now (SIGKILL)",
                      signalName(sig), runningCount());
        sendKill();
      }
    }
  }

  void supervise() {
    std::vector<pollfd> fds;
    std::vector<Relay*> relayOf;
    while (runningCount() > 0) {
      fds.clear();
      relayOf.clear();
      fds.push_back({signals_->fd(), POLLIN, 0});
      relayOf.push_back(nullptr);
      for (Worker& w : workers_) {
        for (Relay& r : w.relays) {
          if (!r.pipe.valid()) continue;
          fds.push_back({r.pipe.get(), POLLIN, 0});
          relayOf.push_back(&r);
        }
      }
      int timeoutMs = kMaxPollMs;
      auto now = SteadyClock::now();
      if (stopping_) {
        auto deadline = killSent_ ? giveUpDeadline_ : killDeadline_;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        timeoutMs = static_cast<int>(std::clamp<long long>(left, 0, kMaxPollMs));
      }
      int n = ::poll(fds.data(), fds.size(), timeoutMs);
      if (n < 0 && errno != EINTR) throw IoError(fmt::format("dsrun: poll failed: {}", errnoText(errno)));
      if (n > 0) {
        if (fds[0].revents != 0) handleSignals();
        for (size_t i = 1; i < fds.size(); ++i) {
          if (fds[i].revents != 0) relayOf[i]->pump();
        }
      }
      reap();
      now = SteadyClock::now();
      if (stopping_ && !killSent_ && now >= killDeadline_) sendKill();
      if (killSent_ && now >= giveUpDeadline_ && runningCount() > 0) {
        for (const Worker& w : workers_) {
          if (!w.running) continue;
          ds::log::error(
              "dsrun: rank {} (pid {}) did not exit {} s after SIGKILL; it is probably stuck in the "
              "kernel (state D: a hung file system or device driver). Check 'ps -o pid,stat,wchan -p "
              "{}'. dsrun gives up waiting for it.",
              w.rank, w.pid, kAfterKillWait.count(), w.pid);
        }
        break;
      }
    }
    // Output the workers wrote before they exited is still in the pipes. Take what is there without
    // waiting: a grandchild may hold a pipe open for ever.
    for (Worker& w : workers_) {
      for (Relay& r : w.relays) {
        r.pump();
        r.emitLines(true);
        r.pipe.reset();
        r.log.reset();
      }
    }
  }

  int finish() {
    std::string report = formatFailureReport(opts_.command[0], host_, exits_, opts_.gracePeriodS);
    if (!report.empty()) {
      writeAll(STDERR_FILENO, report.data(), report.size());
      for (const WorkerExit& e : exits_) {
        if (!e.stoppedByLauncher && e.exitCode != 0) return launcherExitCode(e.exitCode);
      }
    }
    if (receivedSignal_ != 0) {
      std::string summary;
      for (const WorkerExit& e : exits_) {
        if (e.stoppedByLauncher) summary += fmt::format(" rank {}: {};", e.rank, exitCodeText(e.exitCode));
      }
      ds::log::warn("dsrun: stopped after {}; workers ended with:{}", signalName(receivedSignal_),
                    summary.empty() ? " (none was running)" : summary);
      return 128 + receivedSignal_;
    }
    return 0;
  }

  LaunchOptions opts_;
  std::string programPath_;
  std::map<std::string, std::string> parentEnv_;
  std::string host_;
  const SignalGuard* signals_ = nullptr;
  std::vector<Worker> workers_;
  std::vector<std::vector<std::string>> envs_;
  std::vector<WorkerExit> exits_;
  bool stopping_ = false;
  bool killSent_ = false;
  int receivedSignal_ = 0;
  SteadyClock::time_point killDeadline_{};
  SteadyClock::time_point giveUpDeadline_{};
};

}  // namespace

int launch(const LaunchOptions& options) {
  const auto env = currentEnv();
  LaunchOptions opts = resolveLaunchOptions(options, env);
  if (options.runId.empty() && opts.nnodes > 1) {
    ds::log::info(
        "dsrun: no --rdzv-id given; using '{}' as the run id on this node (give the same --rdzv-id on "
        "every node to choose it)",
        opts.runId);
  }
  checkWorkerLimits(opts.nprocPerNode, readProcessLimits());
  auto path = env.find("PATH");
  // Without PATH, execvp searches the system default.
  std::string programPath =
      resolveProgram(opts.command[0], path != env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin");
  if (opts.standalone) {
    ds::log::info("dsrun: --standalone: MASTER_ADDR=127.0.0.1 MASTER_PORT={} (a free port)", opts.masterPort);
  }
  Supervisor supervisor(std::move(opts), std::move(programPath), env);
  return supervisor.run();
}

}  // namespace ds::launch
