#include "engine/testing/subprocess.h"

#include "engine/testing/paths.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;  // NOLINT

namespace ds::testing {

double timeScale() {
  static const double kScale = [] {
    if (const char* s = std::getenv("DS_TEST_TIME_SCALE")) {  // NOLINT(concurrency-mt-unsafe)
      char* end = nullptr;
      double v = std::strtod(s, &end);
      if (end != s && *end == '\0' && v >= 1) return v;
      std::fprintf(stderr, "DS_TEST_TIME_SCALE='%s' is not a number >= 1; using 1\n", s);
      return 1.0;
    }
#if defined(DS_SANITIZE_THREAD)
    return 8.0;
#elif defined(DS_SANITIZE_ADDRESS)
    return 3.0;
#else
    return 1.0;
#endif
  }();
  return kScale;
}

std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  return std::chrono::milliseconds(
      static_cast<std::chrono::milliseconds::rep>(static_cast<double>(d.count()) * timeScale()));
}

std::string binDir() {
  const char* d = std::getenv("DS_BIN_DIR");  // NOLINT(concurrency-mt-unsafe)
  return d != nullptr && *d != '\0' ? d : buildPath("bin");
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

// Whether `port` can be bound on `addr` right now (closed again at once).
bool canBind(int port, in_addr_t addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(addr);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// The ports to pick from: DS_TEST_PORTS=LO-HI, else below the kernel's ephemeral range.
std::pair<int, int> testPortRange() {
  if (const char* v = std::getenv("DS_TEST_PORTS"); v != nullptr && *v != '\0') {
    int lo = 0, hi = 0;
    if (std::sscanf(v, "%d-%d", &lo, &hi) == 2 && lo >= 1024 && hi <= 65535 && lo < hi) return {lo, hi};
    throw std::runtime_error(std::string("DS_TEST_PORTS='") + v + "' is not a range LO-HI within 1024-65535");
  }
  int ephemeralLow = 32768;
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  if (f >> lo >> hi && lo > 1024) ephemeralLow = lo;
  // 20000 ports below it (at least from 1024): far more than the tests of one machine hold at once.
  return {std::max(1024, ephemeralLow - 20000), ephemeralLow - 1};
}

}  // namespace

int unusedPort() {
  const auto [lo, hi] = testPortRange();
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dsperf-test-ports";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const int span = hi - lo + 1;
  // Start at a place of this process's own, so that parallel tests rarely try the same ports.
  const int start = static_cast<int>((static_cast<unsigned>(::getpid()) * 2654435761u) % static_cast<unsigned>(span));
  for (int i = 0; i < span; ++i) {
    const int port = lo + (start + i) % span;
    if (port >= 29400 && port <= 29600) continue;  // torchrun's and MASTER_PORT's defaults: a test may use them
    const std::string lock = dir + "/" + std::to_string(port);
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      continue;
    }
    if (canBind(port, INADDR_LOOPBACK) && canBind(port, INADDR_ANY)) return port;  // fd stays open: the lock
    ::close(fd);
  }
  throw std::runtime_error("no free TCP port in " + std::to_string(lo) + "-" + std::to_string(hi) +
                           " for a test (every one is bound or locked under " + dir + ")");
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

std::string TempDir::sub(const std::string& name) const {
  std::filesystem::create_directories(path_ + "/" + name);
  return path_ + "/" + name;
}

std::vector<std::string> variablesWithPrefix(const std::string& prefix) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    if (kv.rfind(prefix, 0) == 0) out.push_back(kv.substr(0, kv.find('=')));
  }
  return out;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

const std::vector<std::string>& launcherVariables() {
  static const std::vector<std::string> kVars{"RANK",
                                              "WORLD_SIZE",
                                              "LOCAL_RANK",
                                              "LOCAL_WORLD_SIZE",
                                              "LOCAL_SIZE",
                                              "GROUP_RANK",
                                              "NODE_RANK",
                                              "CROSS_RANK",
                                              "MASTER_ADDR",
                                              "MASTER_PORT",
                                              "TORCHELASTIC_RUN_ID",
                                              "TORCHELASTIC_USE_AGENT_STORE",
                                              "DS_JOB_ID",
                                              "OMPI_COMM_WORLD_RANK",
                                              "OMPI_COMM_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_LOCAL_RANK",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE",
                                              "PMI_RANK",
                                              "PMI_SIZE",
                                              "PMIX_RANK",
                                              "MV2_COMM_WORLD_RANK",
                                              "SLURM_PROCID",
                                              "SLURM_NTASKS",
                                              "SLURM_LOCALID",
                                              "SLURM_NODEID",
                                              "SLURM_JOB_NODELIST",
                                              "SLURM_JOB_ID",
                                              "DS_ACCELERATOR",
                                              "DEEPSPEED_TIMEOUT"};
  return kVars;
}

RunOptions cleanOptions(std::chrono::milliseconds timeout, std::map<std::string, std::string> set) {
  RunOptions o;
  o.unsetEnv = launcherVariables();
  o.setEnv = std::move(set);
  o.timeout = timeout;
  return o;
}

RunOptions mpirunOptions(std::chrono::milliseconds timeout) {
  RunOptions o = cleanOptions(timeout, {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                        {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                                        {"MASTER_PORT", std::to_string(unusedPort())}});
#if defined(DS_SANITIZE_ADDRESS)
  // Open MPI leaks its own allocations at MPI_Finalize, and its libraries have no frame pointers, so
  // ASan's fast unwinder records only an allocation's first frame (often libc's, or a dlclose()d MCA
  // plugin) and scripts/sanitizers/lsan.supp cannot match them by library. The slow unwinder
  // (fast_unwind_on_malloc=0) makes them match, but made a 2-rank MPI_Init/allreduce/MPI_Finalize 5x
  // slower (7.7 s instead of 1.4 s) and the mpi backend's matrix test overrun its ctest timeout. So
  // MPI ranks run without leak detection; ASan's memory checks and UBSan stay on, and every other
  // test (store, gloo, DDP over gloo, dsrun, dsdiag) keeps leak detection.
  const char* inherited = std::getenv("ASAN_OPTIONS");  // NOLINT(concurrency-mt-unsafe)
  o.setEnv["ASAN_OPTIONS"] = std::string(inherited != nullptr ? inherited : "") + ":detect_leaks=0";
#endif
  return o;
}

Process::Process(const std::vector<std::string>& argv, const RunOptions& options)
    : dir_("ds_proc"), options_(options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool drop = options_.setEnv.count(key) > 0;
    for (const auto& u : options_.unsetEnv) drop = drop || key == u;
    if (!drop) env.push_back(kv);
  }
  for (const auto& [k, v] : options_.setEnv) env.push_back(k + "=" + v);
  std::vector<char*> cargv;
  std::vector<char*> cenv;
  std::vector<std::string> args = argv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::string out = dir_.file("stdout");
  std::string err = dir_.file("stderr");
  start_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    ::dprintf(2, "cannot exec %s\n", cargv[0]);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
}

Process::~Process() {
  if (pid_ > 0 && !done_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

RunResult Process::wait() { return wait(options_.timeout); }

RunResult Process::wait(std::chrono::milliseconds bound) {
  RunResult r;
  auto deadline = start_ + scaled(bound);
  int status = 0;
  // Polls with a sleep: the process is a child of ours, and waitpid has no timeout.
  while (true) {
    pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      r.timedOut = true;
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  done_ = true;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  r.out = readFile(dir_.file("stdout"));
  r.err = readFile(dir_.file("stderr"));
  return r;
}

}  // namespace ds::testing
