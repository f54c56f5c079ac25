// Option checks, program lookup and the worker environment: the pure parts of dsrun.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <random>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/launch/launcher.h"

namespace ds::launch {
namespace {

std::string randomRunId() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> dist(0, 15);
  std::string id;
  for (int i = 0; i < 12; ++i) id += "0123456789abcdef"[dist(rd)];
  return id;
}

// Binds port 0 on the loopback and returns the port the kernel chose. The port is released again,
// so in principle another process can take it before rank 0 binds it (torchrun has the same race).
int pickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw IoError(
        fmt::format("--standalone: cannot create a socket to find a free port: {}", errnoText(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw IoError(
        fmt::format("--standalone: cannot bind a free port on 127.0.0.1: {}. Give --master-port "
                    "explicitly instead of --standalone.",
                    errnoText(err)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

enum class FileState { kMissing, kDirectory, kNotExecutable, kOk };

FileState inspect(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileState::kMissing;
  if (S_ISDIR(st.st_mode)) return FileState::kDirectory;
  if (::access(path.c_str(), X_OK) != 0) return FileState::kNotExecutable;
  return FileState::kOk;
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string scriptHint(const std::string& path) {
  if (!path.empty() && path.find_first_not_of("0123456789") == std::string::npos) {
    return fmt::format(
        " '{}' looks like a flag value: dsrun's --tee and --standalone take none (torchrun's "
        "'--tee 3' is plain '--tee' here), so the value was taken as the program.",
        path);
  }
  if (endsWith(path, ".py")) {
    return fmt::format(
        " dsrun runs the program directly (like torchrun --no-python); for a Python script "
        "write 'dsrun [options] python3 {}'.",
        path);
  }
  if (endsWith(path, ".sh")) {
    return fmt::format(" Or run it through the shell: 'dsrun [options] bash {}'.", path);
  }
  return "";
}

}  // namespace

void validateLaunchOptions(const LaunchOptions& opts) {
  if (opts.nprocPerNode < 1) {
    throw ConfigError(
        fmt::format("--nproc-per-node {} is invalid: it must be an integer >= 1 (the number of "
                    "worker processes to start on this node).",
                    opts.nprocPerNode));
  }
  if (opts.nnodes < 1) {
    throw ConfigError(fmt::format("--nnodes {} is invalid: it must be an integer >= 1.", opts.nnodes));
  }
  if (opts.nodeRank < 0 || opts.nodeRank >= opts.nnodes) {
    throw ConfigError(
        fmt::format("--node-rank {} is out of range for --nnodes {}: valid node ranks are 0..{}.",
                    opts.nodeRank, opts.nnodes, opts.nnodes - 1));
  }
  if (opts.masterPort < 1 || opts.masterPort > 65535) {
    throw ConfigError(fmt::format("--master-port {} is invalid: valid ports are 1..65535 (default 29500).",
                                  opts.masterPort));
  }
  if (!opts.standalone && opts.masterAddr.empty()) {
    throw ConfigError(
        "--master-addr is empty: give the host name or IP address of node 0 (default 127.0.0.1).");
  }
  if (opts.standalone && opts.nnodes != 1) {
    throw ConfigError(
        fmt::format("--standalone runs a single node, but --nnodes is {}: drop --standalone and "
                    "give --master-addr/--master-port, or use --nnodes 1.",
                    opts.nnodes));
  }
  if (!std::isfinite(opts.gracePeriodS) || opts.gracePeriodS < 0 || opts.gracePeriodS > 3600) {
    throw ConfigError(fmt::format(
        "--grace-period {} is invalid: valid values are 0..3600 seconds (default 5).", opts.gracePeriodS));
  }
  if (opts.maxRestarts != 0) {
    throw ConfigError(
        fmt::format("--max-restarts {} is not supported: dsrun does not restart workers, so the "
                    "only valid value is 0. Restart the job from your scheduler instead.",
                    opts.maxRestarts));
  }
  if (opts.runId == "." || opts.runId == ".." || opts.runId.find('/') != std::string::npos) {
    throw ConfigError(
        fmt::format("--rdzv-id '{}' is invalid: it becomes a directory name under --log-dir, so it "
                    "must not be '.' or '..' or contain '/'.",
                    opts.runId));
  }
  if (opts.command.empty() || opts.command[0].empty()) {
    throw ConfigError(
        "no program given. Usage: dsrun [options] program [args...], e.g. "
        "'dsrun --nproc-per-node 4 ./train --epochs 1'.");
  }
}

LaunchOptions resolveLaunchOptions(LaunchOptions opts, const std::map<std::string, std::string>& env) {
  validateLaunchOptions(opts);
  if (opts.runId.empty() && opts.nnodes == 1) {
    opts.runId = randomRunId();
  } else if (opts.runId.empty()) {
    auto slurm = env.find("SLURM_JOB_ID");
    opts.runId = slurm != env.end() && !slurm->second.empty()
                     ? slurm->second
                     : fmt::format("{}_{}", opts.masterAddr, opts.masterPort);
    // A master address is a host name or an IP address; keep the id a single path component anyway.
    std::replace(opts.runId.begin(), opts.runId.end(), '/', '_');
  }
  if (opts.standalone) {
    opts.masterAddr = "127.0.0.1";
    opts.masterPort = pickFreePort();
  }
  return opts;
}

ProcessLimits readProcessLimits() {
  ProcessLimits l;
  struct rlimit rl {};
  // RLIMIT_NPROC does not bind root (CAP_SYS_RESOURCE), so it is not a limit there.
  if (::geteuid() != 0 && ::getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    l.userProcessLimit = static_cast<long long>(rl.rlim_cur);
  std::ifstream pidMax("/proc/sys/kernel/pid_max");
  if (!(pidMax >> l.pidMax)) l.pidMax = -1;
  if (l.userProcessLimit >= 0) {
    // The user's processes now: /proc/<pid> directories owned by this uid.
    const uid_t uid = ::getuid();
    if (DIR* d = ::opendir("/proc")) {
      while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        struct stat st {};
        if (::stat(fmt::format("/proc/{}", e->d_name).c_str(), &st) == 0 && st.st_uid == uid)
          ++l.userProcesses;
      }
      ::closedir(d);
    }
  }
  return l;
}

void checkWorkerLimits(int workers, const ProcessLimits& limits) {
  if (workers > kMaxWorkersPerNode) {
    throw ConfigError(fmt::format(
        "--nproc-per-node {} is more than dsrun starts on one node ({}): a node has at most a few "
        "hundred cores or 16 GPUs. Check the value; for more ranks use more nodes (--nnodes).",
        workers, kMaxWorkersPerNode));
  }
  if (limits.userProcessLimit >= 0 && workers > limits.userProcessLimit - limits.userProcesses) {
    throw ConfigError(fmt::format(
        "--nproc-per-node {} is more than this user may still start: ulimit -u is {} and {} processes "
        "already "
        "run, so at most {} more (each worker's threads count too). Start fewer workers or raise ulimit -u.",
        workers, limits.userProcessLimit, limits.userProcesses,
        std::max(0LL, limits.userProcessLimit - limits.userProcesses)));
  }
  if (limits.pidMax > 0 && workers > limits.pidMax / 2) {
    throw ConfigError(fmt::format(
        "--nproc-per-node {} would take more than half of this machine's process ids (pid_max {}). Start "
        "fewer workers.",
        workers, limits.pidMax));
  }
}

std::string resolveProgram(const std::string& program, const std::string& pathEnv) {
  if (program.find('/') != std::string::npos) {
    switch (inspect(program)) {
      case FileState::kOk:
        return program;
      case FileState::kMissing:
        throw ConfigError(
            fmt::format("program '{}' does not exist. Check the path (relative paths are taken from "
                        "the current directory).",
                        program));
      case FileState::kDirectory:
        throw ConfigError(
            fmt::format("program '{}' is a directory, not a program. Give the path of the "
                        "executable inside it.",
                        program));
      case FileState::kNotExecutable:
        throw ConfigError(
            fmt::format("program '{}' is not executable (no execute permission for this user). "
                        "Run 'chmod +x {}'.{}",
                        program, program, scriptHint(program)));
    }
  }
  // execvp's search: each PATH entry in order; an empty entry is the current directory. A match that
  // is not executable is remembered, as execvp reports EACCES rather than ENOENT for it.
  std::string notExecutable;
  size_t start = 0;
  while (true) {
    size_t end = pathEnv.find(':', start);
    std::string dir = pathEnv.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = dir.empty() ? program : fmt::format("{}/{}", dir, program);
    FileState st = inspect(candidate);
    if (st == FileState::kOk) return dir.empty() ? "./" + program : candidate;
    if (st == FileState::kNotExecutable && notExecutable.empty()) notExecutable = candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!notExecutable.empty()) {
    throw ConfigError(
        fmt::format("program '{}' was found on PATH as '{}', but it is not executable. Run "
                    "'chmod +x {}'.{}",
                    program, notExecutable, notExecutable, scriptHint(program)));
  }
  std::string hint =
      inspect(program) == FileState::kMissing
          ? scriptHint(program)
          : fmt::format(" There is a '{}' in the current directory: did you mean './{}'?", program, program);
  throw ConfigError(
      fmt::format("program '{}' was not found on PATH ({}). Give a path (e.g. './{}') or put its "
                  "directory on PATH.{}",
                  program, pathEnv.empty() ? "PATH is empty" : "PATH=" + pathEnv, program, hint));
}

std::map<std::string, std::string> buildWorkerEnv(const LaunchOptions& opts, int localRank,
                                                  const std::map<std::string, std::string>& parent) {
  DS_CHECK(!opts.runId.empty(), "buildWorkerEnv needs resolved options (runId)");
  DS_CHECK(localRank >= 0 && localRank < opts.nprocPerNode, "local rank {} of {}", localRank,
           opts.nprocPerNode);
  std::map<std::string, std::string> env = parent;
  const int rank = opts.nodeRank * opts.nprocPerNode + localRank;
  const int worldSize = opts.nnodes * opts.nprocPerNode;
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(localRank);
  env["WORLD_SIZE"] = std::to_string(worldSize);
  env["LOCAL_WORLD_SIZE"] = std::to_string(opts.nprocPerNode);
  env["GROUP_RANK"] = std::to_string(opts.nodeRank);
  // One role ("default") spans all workers, so the role rank and size equal the global ones.
  env["ROLE_NAME"] = "default";
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(worldSize);
  env["MASTER_ADDR"] = opts.masterAddr;
  env["MASTER_PORT"] = std::to_string(opts.masterPort);
  env["TORCHELASTIC_RUN_ID"] = opts.runId;
  env["TORCHELASTIC_RESTART_COUNT"] = "0";
  env["TORCHELASTIC_MAX_RESTARTS"] = "0";
  // The store handshake compares DS_JOB_ID, so a job id the scheduler already set wins: all nodes of a
  // multi-node job then agree even when each node's dsrun drew its own random run id.
  if (parent.find("DS_JOB_ID") == parent.end()) env["DS_JOB_ID"] = opts.runId;
  if (parent.find("OMP_NUM_THREADS") == parent.end() && opts.nprocPerNode > 1) env["OMP_NUM_THREADS"] = "1";
  return env;
}

}  // namespace ds::launch
