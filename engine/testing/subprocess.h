// Test support: run a real binary (dsrun, dsbench, mpirun) with a changed environment, its output
// captured to files, and a bound on how long it may take. Used by the CLI, multi-process and fault
// tests; not part of libdsengine.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ds::testing {

// How much slower than a plain build this build runs: DS_TEST_TIME_SCALE when set (a number >= 1),
// else 3 under AddressSanitizer and 8 under ThreadSanitizer (cmake -DDS_SANITIZE=...), else 1.
// Process multiplies its bound by it, so that a sanitized child is not killed as hung; it never
// changes what a test asserts, nor the timeouts a test hands to the program under test.
double timeScale();
// `d` times timeScale(), for the bounds a test puts on its own waiting (a line to appear, ...).
std::chrono::milliseconds scaled(std::chrono::milliseconds d);

// <build>/bin: DS_BIN_DIR (which ctest sets), else the build folder this test binary was built in
// (engine/testing/paths.h); for finding dsrun, dsbench and test workers.
std::string binDir();
std::string readFile(const std::string& path);
// A TCP port for a test's rendezvous that nothing else will take before the child binds it. Picking
// an ephemeral port (bind 0, read back, close) raced: another test's outgoing connection may be given
// the same port by the kernel between the pick and the child's bind (errno 98 in a fresh-clone run).
// So the port comes from below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range),
// which the kernel never hands out by itself, it is free when picked (bound and closed on 127.0.0.1
// and 0.0.0.0), and the tests of this machine share a lock file per port under
// $TMPDIR/dsperf-test-ports: this process holds the lock until it exits, so no other test process
// picks the same port meanwhile. DS_TEST_PORTS=LO-HI sets the range.
int unusedPort();

// A fresh directory under TMPDIR, removed with its contents by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ds_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // A sub-folder, created.
  std::string sub(const std::string& name) const;

 private:
  std::string path_;
};

struct RunResult {
  int exitCode = -1;      // the exit status, or -signal when killed by a signal
  bool timedOut = false;  // true when the bound ran out and the process group was killed
  std::string out;
  std::string err;
  double seconds = 0;
};

struct RunOptions {
  std::map<std::string, std::string> setEnv;
  // Variables removed from the inherited environment (launcher variables of an outer job, ...).
  std::vector<std::string> unsetEnv;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// The names of the variables in this process's environment that start with `prefix`.
std::vector<std::string> variablesWithPrefix(const std::string& prefix);

// Launcher variables a test process must not pass on (an outer mpirun/srun/dsrun of the CI itself).
const std::vector<std::string>& launcherVariables();

// Options for a test's child: the launcher variables of an outer job removed, `set` added, bounded
// by `timeout`.
RunOptions cleanOptions(std::chrono::milliseconds timeout = std::chrono::seconds(60),
                        std::map<std::string, std::string> set = {});

// Options for starting `mpirun` in a test: the launcher variables of an outer job removed, Open MPI's
// run-as-root variables set (REFERENCE.md §8; tests run as root), and a MASTER_PORT of its own, so
// that tests running in parallel do not meet on the default 29500.
RunOptions mpirunOptions(std::chrono::milliseconds timeout = std::chrono::seconds(90));

// A child started in its own process group, so that a bound kills everything it started.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const RunOptions& options = {});
  ~Process();  // kills the group if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  pid_t pid() const { return pid_; }
  // Where its output goes while it runs (to watch for a line before wait()).
  std::string stdoutPath() const { return dir_.file("stdout"); }
  std::string stderrPath() const { return dir_.file("stderr"); }
  // Waits up to the options' timeout (or `bound`), times timeScale(), from the start; on expiry kills
  // the process group and sets timedOut.
  RunResult wait();
  RunResult wait(std::chrono::milliseconds bound);

 private:
  TempDir dir_;
  RunOptions options_;
  pid_t pid_ = -1;
  bool done_ = false;
  std::chrono::steady_clock::time_point start_;
};

inline RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {}) {
  return Process(argv, options).wait();
}

}  // namespace ds::testing
