#include "diag/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

namespace ds::diag {

std::optional<std::string> readTextFile(const std::string& path, std::size_t maxBytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string s(maxBytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(maxBytes));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

std::optional<long long> parseInteger(std::string_view s) {
  std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

std::string humanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return b == static_cast<long long>(b) ? fmt::format("{} {}", static_cast<long long>(b), units[u])
                                         : fmt::format("{:.1f} {}", b, units[u]);
}

std::string quoteValue(std::string_view v, std::size_t n) {
  std::string out = "'";
  for (size_t i = 0; i < v.size() && i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    out += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
  }
  if (v.size() > n) out += "...";
  return out + "'";
}

std::vector<Interface> listInterfaces() {
  std::vector<Interface> out = host::listInterfaces();
  std::sort(out.begin(), out.end(), [](const Interface& x, const Interface& y) { return x.name < y.name; });
  return out;
}

IfnameSpec parseIfnameSpec(std::string_view text) {
  IfnameSpec spec;
  std::string_view t = text;
  if (!t.empty() && t[0] == '^') {
    spec.exclude = true;
    t.remove_prefix(1);
  }
  if (!t.empty() && t[0] == '=') {
    spec.exact = true;
    t.remove_prefix(1);
  }
  if (!t.empty() && t[0] == '^') {
    spec.error = "'^' must come first: write '^=name' (exclude these exact names), not '=^name'";
    return spec;
  }
  if (t.empty()) {
    spec.error = "no interface name is given";
    return spec;
  }
  for (const auto& part : split(t, ',')) {
    std::string p = trim(part);
    if (p.empty()) {
      spec.error = "an empty entry (two commas, or a trailing comma)";
      return spec;
    }
    IfnameSpec::Entry e;
    auto colon = p.find(':');
    e.name = p.substr(0, colon);
    if (e.name.empty()) {
      spec.error = fmt::format("entry '{}' has no name before ':'", p);
      return spec;
    }
    if (e.name.find_first_of("^=") != std::string::npos) {
      spec.error = fmt::format("entry '{}': '^' and '=' are allowed only once, at the start of the list", p);
      return spec;
    }
    if (colon != std::string::npos) {
      auto port = parseInteger(p.substr(colon + 1));
      if (!port || *port < 0 || *port > 65535) {
        spec.error = fmt::format("entry '{}' has a port that is not a number", p);
        return spec;
      }
      e.port = static_cast<int>(*port);
    }
    spec.entries.push_back(std::move(e));
  }
  return spec;
}

bool ifnameEntryMatches(const IfnameSpec& spec, const IfnameSpec::Entry& e, const std::string& candidate) {
  return spec.exact ? candidate == e.name : candidate.rfind(e.name, 0) == 0;
}

std::vector<PortOwner> tcpPortOwners(int port, const std::string& procfs) {
  // Socket inodes bound to the port (any state: LISTEN, or TIME_WAIT has inode 0 and no owner).
  std::set<std::string> inodes;
  for (const char* f : {"/net/tcp", "/net/tcp6"}) {
    auto text = readTextFile(procfs + f, 16 << 20);
    if (!text) continue;
    std::istringstream in(*text);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      ls >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      auto colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      long p = std::strtol(local.c_str() + colon + 1, nullptr, 16);
      if (p == port && !inode.empty() && inode != "0") inodes.insert(inode);
    }
  }
  std::vector<PortOwner> owners;
  if (inodes.empty()) return owners;
  DIR* d = opendir(procfs.c_str());
  if (d == nullptr) return owners;
  while (dirent* e = readdir(d)) {
    auto pid = parseInteger(e->d_name);
    if (!pid) continue;
    std::string fdDir = procfs + "/" + e->d_name + "/fd";
    DIR* fds = opendir(fdDir.c_str());
    if (fds == nullptr) continue;
    bool found = false;
    while (dirent* f = readdir(fds)) {
      char target[256];
      ssize_t n = readlink((fdDir + "/" + f->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      std::string t(target);
      if (t.rfind("socket:[", 0) == 0 && inodes.count(t.substr(8, t.size() - 9))) {
        found = true;
        break;
      }
    }
    closedir(fds);
    if (found) {
      std::string comm = trim(readTextFile(procfs + "/" + e->d_name + "/comm").value_or("?"));
      owners.push_back({static_cast<long>(*pid), comm});
    }
  }
  closedir(d);
  std::sort(owners.begin(), owners.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return owners;
}

IsolatedResult runIsolated(const std::function<nlohmann::json()>& fn, std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {{}, fmt::format("pipe failed: {}", std::strerror(errno))};
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {{}, fmt::format("fork failed: {}", std::strerror(errno))};
  }
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      out = fn().dump();
    } catch (const std::exception& e) {
      out = nlohmann::json{{"__error", e.what()}}.dump();
    } catch (...) {
      out = nlohmann::json{{"__error", "unknown exception"}}.dump();
    }
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string data;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timedOut = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timedOut = r == 0;
      break;
    }
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timedOut) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timedOut) return {{}, fmt::format("did not finish within {} ms and was killed", timeout.count())};
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {{}, fmt::format("crashed: killed by signal {} (SIG{})", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?")};
  }
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded()) return {{}, fmt::format("exited with status {} without a result", WEXITSTATUS(status))};
  if (j.is_object() && j.contains("__error")) return {{}, j["__error"].get<std::string>()};
  return {j, ""};
}

std::optional<Route> routeTo(const std::string& addr, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), "9", &hints, &res) != 0 || res == nullptr) {
    why = fmt::format("'{}' is not a numeric address", addr);
    return std::nullopt;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    why = fmt::format("no route to {} ({})", addr, std::strerror(errno));
    close(fd);
    return std::nullopt;
  }
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  close(fd);
  char buf[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, buf, sizeof buf);
  }
  Route r{"", buf};
  for (const auto& i : listInterfaces()) {
    if (std::find(i.addresses.begin(), i.addresses.end(), r.localAddress) != i.addresses.end()) {
      r.iface = i.name;
      break;
    }
  }
  return r;
}

int tryConnect(const std::string& addr, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr)
    return EHOSTUNREACH;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc = connect(fd, res->ai_addr, res->ai_addrlen);
  int err = 0;
  if (rc != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int pr = poll(&p, 1, static_cast<int>(timeout.count()));
      if (pr == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
  }
  close(fd);
  return err;
}

Resolution resolveHost(const std::string& host, std::chrono::milliseconds timeout) {
  // The lookup runs on a detached thread so that a hung resolver cannot hold dsdiag; the shared
  // state outlives us if it never returns.
  auto promise = std::make_shared<std::promise<Resolution>>();
  auto future = promise->get_future();
  std::thread([promise, host] {
    Resolution r;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      r.error = gai_strerror(rc);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {};
        if (a->ai_family == AF_INET) {
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
        } else if (a->ai_family == AF_INET6) {
          inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof buf);
        } else {
          continue;
        }
        if (std::find(r.addresses.begin(), r.addresses.end(), buf) == r.addresses.end()) r.addresses.emplace_back(buf);
      }
      freeaddrinfo(res);
    }
    promise->set_value(std::move(r));
  }).detach();
  if (future.wait_for(timeout) != std::future_status::ready) {
    return {{}, fmt::format("the lookup timed out after {} ms (a slow or unreachable DNS server)", timeout.count())};
  }
  return future.get();
}

bool isLoopbackAddress(const std::string& a) {
  return a.rfind("127.", 0) == 0 || a == "::1" || a == "::ffff:127.0.0.1";
}

bool isLocalAddress(const std::string& a) {
  if (isLoopbackAddress(a)) return true;
  for (const auto& i : listInterfaces()) {
    if (std::find(i.addresses.begin(), i.addresses.end(), a) != i.addresses.end()) return true;
  }
  return false;
}

bool onPath(std::string_view pathEnv, const std::string& name) { return !findOnPath(pathEnv, name).empty(); }

std::string findOnPath(std::string_view pathEnv, const std::string& name) {
  for (const auto& dir : split(pathEnv, ':')) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (!dir.empty() && ::access(path.c_str(), X_OK) == 0 && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      return path;
  }
  return "";
}

ProgramResult runProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ProgramResult res;
  if (argv.empty()) {
    res.error = "no program given";
    return res;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    res.error = fmt::format("cannot start {}: pipe failed: {}", argv[0], std::strerror(errno));
    return res;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    res.error = fmt::format("cannot start {}: {}", argv[0], std::strerror(rc));
    return res;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  constexpr std::size_t kKeep = 64 << 10;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      res.timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      res.timedOut = true;
      break;
    }
    if (r < 0) break;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (res.output.size() < kKeep) res.output.append(buf, std::min(static_cast<std::size_t>(n), kKeep - res.output.size()));
  }
  close(fds[0]);
  int status = 0;
  // Output closed: the program may still run (it closed its stdout); it gets what is left of the time.
  while (!res.timedOut) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      res.timedOut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (res.timedOut) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) res.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) res.exitCode = -WTERMSIG(status);
  return res;
}

}  // namespace ds::diag
