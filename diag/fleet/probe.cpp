#include "diag/fleet/probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "engine/common/error.h"
#include "engine/host/net.h"

namespace ds::diag::fleet {
namespace {

constexpr char kMagic[4] = {'D', 'S', 'F', '1'};
constexpr std::size_t kHeader = 16;  // magic, purpose, 3 pad, rank, tag, job length (u16), 2 pad
constexpr std::size_t kMaxJob = 256;
constexpr auto kHelloBound = std::chrono::seconds(2);
constexpr char kOk = 'K', kWrongJob = 'J', kNotMember = 'R';

int msUntil(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Numeric address (IPv4 or IPv6) + port; false when the text is not an address.
bool toSockaddr(const std::string& addr, int port, sockaddr_storage& ss, socklen_t& len) {
  std::memset(&ss, 0, sizeof ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (::inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

std::string helloBytes(Purpose p, int rank, int tag, const std::string& jobId) {
  std::string job = jobId.substr(0, kMaxJob);
  std::string h(kHeader, '\0');
  std::memcpy(h.data(), kMagic, 4);
  h[4] = static_cast<char>(p);
  std::uint32_t r = htonl(static_cast<std::uint32_t>(rank)), t = htonl(static_cast<std::uint32_t>(tag));
  std::uint16_t l = htons(static_cast<std::uint16_t>(job.size()));
  std::memcpy(h.data() + 8, &r, 4);
  std::memcpy(h.data() + 12, &t, 4);
  // The job length sits in the padding after the purpose byte.
  std::memcpy(h.data() + 5, &l, 2);
  return h + job;
}

// Waits for fd to be ready for `events` until the deadline. 1 ready, 0 timed out, -1 error/hang-up.
int waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msUntil(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return -1;
    if (rc == 0) return 0;
    if (p.revents & (POLLERR | POLLNVAL)) return -1;
    return 1;
  }
}

// Sends or receives exactly len bytes before the deadline; adds what moved to *moved. "" or why not.
std::string sendAll(int fd, const char* data, std::size_t len, Clock::time_point deadline,
                    std::size_t* moved = nullptr) {
  std::size_t done = 0;
  while (done < len) {
    ssize_t n = ::send(fd, data + done, len - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      if (moved) *moved += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = waitFor(fd, POLLOUT, deadline);
      if (w == 0) return "timed out sending";
      if (w < 0) return "the connection broke while sending";
      continue;
    }
    return fmt::format("send failed: {}", std::strerror(errno));
  }
  return "";
}

std::string recvAll(int fd, char* data, std::size_t len, Clock::time_point deadline, std::size_t* moved = nullptr) {
  std::size_t done = 0;
  while (done < len) {
    ssize_t n = ::recv(fd, data + done, len - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      if (moved) *moved += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return "the peer closed the connection";
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = waitFor(fd, POLLIN, deadline);
      if (w == 0) return "timed out waiting for the peer";
      if (w < 0) return "the connection broke while receiving";
      continue;
    }
    return fmt::format("receive failed: {}", std::strerror(errno));
  }
  return "";
}

// A non-blocking socket with connect() started (fd >= 0), or -1 with err set.
int startConnect(const std::string& fromAddr, const std::string& toAddr, int port, int& err) {
  sockaddr_storage to{};
  socklen_t toLen = 0;
  if (!toSockaddr(toAddr, port, to, toLen)) {
    err = EDESTADDRREQ;  // not an address at all (connect's own EINVAL means a refused route)
    return -1;
  }
  int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  if (!fromAddr.empty()) {
    sockaddr_storage from{};
    socklen_t fromLen = 0;
    if (toSockaddr(fromAddr, 0, from, fromLen) && from.ss_family == to.ss_family &&
        ::bind(fd, reinterpret_cast<sockaddr*>(&from), fromLen) != 0) {
      err = errno;
      ::close(fd);
      return -1;
    }
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), toLen) != 0 && errno != EINPROGRESS) {
    err = errno;
    ::close(fd);
    return -1;
  }
  err = 0;
  return fd;
}

}  // namespace

int connectProbe(const std::string& fromAddr, const std::string& toAddr, int port, Purpose p, int myRank, int tag,
                 const std::string& jobId, Clock::time_point deadline, std::string& why, bool* timedOut) {
  const auto t0 = Clock::now();
  int err = 0;
  int fd = startConnect(fromAddr, toAddr, port, err);
  if (fd < 0) {
    why = connectErrorText(err, secondsSince(t0));
    return -1;
  }
  int w = waitFor(fd, POLLOUT, deadline);
  socklen_t len = sizeof err;
  if (w > 0 || w < 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (w == 0 || (w < 0 && err == 0)) err = ETIMEDOUT;
  if (err != 0) {
    if (timedOut) *timedOut = err == ETIMEDOUT;
    why = connectErrorText(err, secondsSince(t0));
    ::close(fd);
    return -1;
  }
  std::string hello = helloBytes(p, myRank, tag, jobId);
  char answer = 0;
  std::string e = sendAll(fd, hello.data(), hello.size(), deadline);
  if (e.empty()) e = recvAll(fd, &answer, 1, deadline);
  if (!e.empty() || answer != kOk) {
    if (timedOut) *timedOut = e.rfind("timed out", 0) == 0;
    why = !e.empty() ? fmt::format("connected, but the listener did not answer our hello ({})", e)
          : answer == kWrongJob ? "connected, but the listener belongs to another job (its job id differs)"
          : answer == kNotMember ? "connected, but the listener does not count this rank as a member of its job"
                                 : "connected, but the listener answered garbage";
    ::close(fd);
    return -1;
  }
  setNoDelay(fd);
  return fd;
}

std::string connectErrorText(int err, double seconds) {
  switch (err) {
    case ETIMEDOUT:
      return fmt::format("timed out after {:.1f} s", seconds);
    case ECONNREFUSED:
      return "connection refused (nothing listens on the probe port there)";
    case EHOSTUNREACH:
      return "no route to host";
    case ENETUNREACH:
      return "network unreachable";
    case EINVAL:
      // connect() on Linux: the route to it is a blackhole (or the like): nothing is even sent.
      return "the kernel refused to send (a blackhole or prohibit route to that address)";
    case EDESTADDRREQ:
      return "the address is not a numeric IP address";
    case EADDRNOTAVAIL:
      return "the source address is not available on this host";
    default:
      return std::strerror(err);
  }
}

// ---------------------------------------------------------------------------------------------------
// ProbeServer

ProbeServer::ProbeServer(const std::string& bindAddr, std::string jobId, std::function<bool(int)> isMember)
    : jobId_(std::move(jobId).substr(0, kMaxJob)), isMember_(std::move(isMember)) {
  std::string addr = bindAddr.empty() ? "0.0.0.0" : bindAddr;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!toSockaddr(addr, 0, ss, len)) throw ConfigError(fmt::format("probe listener: '{}' is not an address", addr));
  listenFd_ = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (listenFd_ < 0 || ::setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(listenFd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(listenFd_, 4096) != 0) {
    int e = errno;
    closeFd(listenFd_);
    throw IoError(fmt::format("dsdiag could not open its probe listener on {}: {}. Check the open-file limit "
                              "(ulimit -n) and that this host has that address.",
                              addr, std::strerror(e)));
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&bound), &blen);
  port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  if (::pipe2(wakeFd_, O_CLOEXEC | O_NONBLOCK) != 0) {
    closeFd(listenFd_);
    throw IoError(fmt::format("dsdiag could not create a pipe for its probe listener: {}", std::strerror(errno)));
  }
  thread_ = std::thread([this] { loop(); });
}

ProbeServer::~ProbeServer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  char c = 'x';
  [[maybe_unused]] auto n = ::write(wakeFd_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (auto& [k, fd] : ready_) ::close(fd);
  ready_.clear();
  closeFd(listenFd_);
  closeFd(wakeFd_[0]);
  closeFd(wakeFd_[1]);
}

int ProbeServer::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

int ProbeServer::take(int peer, Purpose purpose, int tag, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  auto key = std::make_tuple(peer, static_cast<int>(purpose), tag);
  cv_.wait_until(lock, deadline, [&] { return stop_ || ready_.count(key) > 0; });
  auto it = ready_.find(key);
  if (it == ready_.end()) return -1;
  int fd = it->second;
  ready_.erase(it);
  return fd;
}

void ProbeServer::loop() {
  struct Pending {
    int fd;
    std::string buf;
    Clock::time_point deadline;
  };
  std::deque<Pending> pending;
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    fds.clear();
    fds.push_back({wakeFd_[0], POLLIN, 0});
    fds.push_back({listenFd_, POLLIN, 0});
    for (const auto& p : pending) fds.push_back({p.fd, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 200);
    if (rc < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        pending.push_back({fd, {}, Clock::now() + kHelloBound});
      }
    }
    const auto now = Clock::now();
    std::deque<Pending> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto& p = pending[i];
      const short rev = i + 2 < fds.size() && fds[i + 2].fd == p.fd ? fds[i + 2].revents : 0;
      bool drop = false;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        char tmp[512];
        ssize_t n = ::recv(p.fd, tmp, sizeof tmp, 0);
        if (n > 0) p.buf.append(tmp, static_cast<std::size_t>(n));
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) drop = true;
      }
      if (!drop && p.buf.size() >= kHeader) {
        if (std::memcmp(p.buf.data(), kMagic, 4) != 0) {
          drop = true;
        } else {
          std::uint16_t jl;
          std::memcpy(&jl, p.buf.data() + 5, 2);
          std::size_t jobLen = ntohs(jl);
          if (jobLen > kMaxJob) {
            drop = true;
          } else if (p.buf.size() >= kHeader + jobLen) {
            std::uint32_t r, t;
            std::memcpy(&r, p.buf.data() + 8, 4);
            std::memcpy(&t, p.buf.data() + 12, 4);
            int rank = static_cast<int>(ntohl(r)), tag = static_cast<int>(ntohl(t));
            auto purpose = static_cast<Purpose>(static_cast<std::uint8_t>(p.buf[4]));
            std::string job = p.buf.substr(kHeader, jobLen);
            char answer = job != jobId_ ? kWrongJob : !isMember_(rank) ? kNotMember : kOk;
            [[maybe_unused]] auto w = ::send(p.fd, &answer, 1, MSG_NOSIGNAL);
            if (answer != kOk) {
              std::lock_guard lock(mu_);
              ++refused_;
              drop = true;
            } else if (purpose == Purpose::kLink || purpose == Purpose::kRing) {
              std::lock_guard lock(mu_);
              auto key = std::make_tuple(rank, static_cast<int>(purpose), tag);
              auto old = ready_.find(key);
              if (old != ready_.end()) ::close(old->second);
              ready_[key] = p.fd;
              cv_.notify_all();
              continue;  // handed over: not closed here
            } else {
              drop = true;  // a reachability probe: the answer was the test
            }
          }
        }
      }
      if (!drop && now >= p.deadline) {
        std::lock_guard lock(mu_);
        ++refused_;
        drop = true;
      }
      if (drop) {
        ::close(p.fd);
      } else {
        still.push_back(std::move(p));
      }
    }
    pending.swap(still);
    if (fds[0].revents & POLLIN) {
      char c[16];
      while (::read(wakeFd_[0], c, sizeof c) > 0) {
      }
    }
  }
  for (auto& p : pending) ::close(p.fd);
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------------
// Reachability

report::ReachSummary probeAll(const std::vector<ReachTarget>& targets, const ReachOptions& o, long long& messages) {
  report::ReachSummary out;
  out.rank = o.myRank;
  struct Live {
    std::size_t target;
    int fd;
    Clock::time_point start, deadline;
    std::string hello;
    std::size_t sent = 0;
    bool connected = false;
  };
  auto runPass = [&](const std::vector<std::size_t>& which, std::size_t window) {
    std::vector<std::pair<std::size_t, report::ReachFailure>> failed;
    std::vector<Live> live;
    std::size_t next = 0;
    auto fail = [&](const Live& l, const std::string& error, bool timedOut) {
      const auto& t = targets[l.target];
      report::ReachFailure f;
      f.from = o.myRank;
      f.to = t.peer;
      f.fromIface = t.fromIface;
      f.toIface = t.toIface;
      f.toAddr = t.toAddr;
      f.error = error;
      f.timedOut = timedOut;
      f.ms = secondsSince(l.start) * 1000;
      failed.emplace_back(l.target, f);
    };
    while (next < which.size() || !live.empty()) {
      while (next < which.size() && live.size() < window) {
        const auto& t = targets[which[next]];
        Live l{which[next], -1, Clock::now(), Clock::now() + o.connectTimeout, helloBytes(Purpose::kReach, o.myRank, 0, o.jobId)};
        ++next;
        ++messages;
        int err = 0;
        l.fd = startConnect(t.fromAddr, t.toAddr, t.port, err);
        if (l.fd < 0) {
          fail(l, connectErrorText(err, 0), false);
          continue;
        }
        live.push_back(std::move(l));
      }
      std::vector<pollfd> fds;
      for (const auto& l : live) fds.push_back({l.fd, static_cast<short>(l.connected ? POLLIN : POLLOUT), 0});
      auto soonest = Clock::now() + std::chrono::milliseconds(200);
      for (const auto& l : live) soonest = std::min(soonest, l.deadline);
      ::poll(fds.data(), fds.size(), msUntil(soonest) + 1);
      std::vector<Live> keep;
      for (std::size_t i = 0; i < live.size(); ++i) {
        auto& l = live[i];
        const short rev = fds[i].revents;
        bool done = false;
        if (!l.connected && rev) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(l.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            fail(l, connectErrorText(err, secondsSince(l.start)), err == ETIMEDOUT);
            done = true;
          } else {
            l.connected = true;
            ssize_t n = ::send(l.fd, l.hello.data(), l.hello.size(), MSG_NOSIGNAL);
            if (n != static_cast<ssize_t>(l.hello.size())) {
              fail(l, "connected, but sending the hello failed", false);
              done = true;
            }
          }
        } else if (l.connected && (rev & (POLLIN | POLLHUP | POLLERR))) {
          char a = 0;
          ssize_t n = ::recv(l.fd, &a, 1, 0);
          if (n == 1 && a == kOk) {
            ++out.ok;
          } else {
            fail(l,
                 n == 1 && a == kWrongJob    ? "connected, but the listener belongs to another job (its job id differs)"
                 : n == 1 && a == kNotMember ? "connected, but the listener does not count this rank as a member"
                                             : "connected, but the listener closed the connection without answering",
                 false);
          }
          done = true;
        }
        if (!done && Clock::now() >= l.deadline) {
          fail(l,
               l.connected ? fmt::format("connected, but no answer to our hello within {:.1f} s", secondsSince(l.start))
                           : connectErrorText(ETIMEDOUT, secondsSince(l.start)),
               true);
          done = true;
        }
        if (done) {
          ::close(l.fd);
        } else {
          keep.push_back(std::move(l));
        }
      }
      live.swap(keep);
    }
    return failed;
  };
  std::vector<std::size_t> all(targets.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  out.probes = static_cast<int>(targets.size());
  auto failed = runPass(all, static_cast<std::size_t>(std::max(1, o.window)));
  if (o.retry && !failed.empty()) {
    // Once more, a few at a time: a probe lost to a burst (a full accept queue, a dropped SYN) is
    // not a missing route. What fails twice counts.
    std::vector<std::size_t> again;
    for (const auto& [t, f] : failed) again.push_back(t);
    auto second = runPass(again, 8);
    std::vector<std::size_t> stillBad;
    for (const auto& [t, f] : second) stillBad.push_back(t);
    // (the retried probes that answered were counted in out.ok by runPass)
    for (auto& [t, f] : failed) {
      if (std::find(stillBad.begin(), stillBad.end(), t) != stillBad.end()) out.failures.push_back(f);
    }
  } else {
    for (auto& [t, f] : failed) out.failures.push_back(f);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Link pairs

namespace {

constexpr std::size_t kChunk = 256 * 1024;

struct BulkHeader {
  char op;
  std::uint64_t len;
};

std::string sendBulk(int fd, std::size_t len, std::vector<char>& buf, Clock::time_point deadline, std::size_t& moved) {
  char head[9] = {'B'};
  std::uint64_t l = len;
  std::memcpy(head + 1, &l, 8);
  if (auto e = sendAll(fd, head, sizeof head, deadline); !e.empty()) return e;
  std::size_t left = len;
  while (left > 0) {
    std::size_t n = std::min(left, buf.size());
    if (auto e = sendAll(fd, buf.data(), n, deadline, &moved); !e.empty()) return e;
    left -= n;
  }
  return "";
}

std::string recvBulk(int fd, std::size_t expect, std::vector<char>& buf, Clock::time_point deadline,
                     std::size_t& moved, bool headerRead = false) {
  if (!headerRead) {
    char head[9];
    if (auto e = recvAll(fd, head, sizeof head, deadline); !e.empty()) return e;
    std::uint64_t l;
    std::memcpy(&l, head + 1, 8);
    if (head[0] != 'B' || l != expect) return "the peer sent an unexpected reply";
  }
  std::size_t left = expect;
  while (left > 0) {
    std::size_t n = std::min(left, buf.size());
    if (auto e = recvAll(fd, buf.data(), n, deadline, &moved); !e.empty()) return e;
    left -= n;
  }
  return "";
}

}  // namespace

// How often a rank waiting for its pair's peer asks whether that peer died.
constexpr std::chrono::milliseconds kPeerPoll{500};

report::PairResult measurePair(int peer, const std::string& addr, int port, int tag, const LinkOptions& o,
                               Clock::time_point arriveBy, std::chrono::milliseconds measureFor,
                               long long& messages, const PeerGone& peerGone, double* busySeconds) {
  Clock::time_point deadline = arriveBy;
  Clock::time_point arrived{};
  report::PairResult r;
  r.a = std::min(o.myRank, peer);
  r.b = std::max(o.myRank, peer);
  r.round = tag;
  std::string why;
  bool timedOut = false;
  ++messages;
  int fd = connectProbe("", addr, port, Purpose::kLink, o.myRank, tag, o.jobId,
                          std::min(arriveBy, Clock::now() + o.connectTimeout), why, &timedOut);
  if (fd < 0) {
    r.outcome = timedOut ? report::PairOutcome::kTimeout : report::PairOutcome::kFailed;
    r.error = fmt::format("cannot open the link test connection to {}:{}: {}", addr, port, why);
    return r;
  }
  // `askPeer`: after a whole exchange only. A short test ends at once (its peer may not even have
  // reached this round: waiting for its answer would bring back the waits short tests cut out).
  auto finish = [&](const std::string& e, bool askPeer = false) {
    // The kernel's count of bytes sent again on this connection: a lossy path shows here even when
    // the pair passed (TCP hid the loss in retransmissions and timeouts).
    const net::TcpSendCounters mine = net::tcpSendCounters(fd);
    if (mine.known) {
      r.sentBytes = mine.sentBytes;
      r.retransBytes = mine.retransBytes;
    }
    if (!e.empty()) {
      r.outcome = e.find("timed out") != std::string::npos ? report::PairOutcome::kTimeout : report::PairOutcome::kFailed;
      r.error = e;
    } else {
      // The peer's counters (the other direction), when it answers in time; then the end. Its own
      // time, a little past the pair's: the pairs that end near their deadline are the lossy ones,
      // and the peer keeps serving until a second after it.
      const auto askBy = deadline + std::chrono::milliseconds(500);
      char t = 'T';
      char reply[17];
      if (askPeer && mine.known && sendAll(fd, &t, 1, askBy).empty() && recvAll(fd, reply, sizeof reply, askBy).empty() &&
          reply[0] == 'T') {
        std::uint64_t sent = 0, again = 0;
        std::memcpy(&sent, reply + 1, 8);
        std::memcpy(&again, reply + 9, 8);
        if (again <= sent) {
          r.sentBytes += sent;
          r.retransBytes += again;
        }
      }
      char q = 'Q';
      sendAll(fd, &q, 1, deadline);
    }
    ::close(fd);
    if (busySeconds != nullptr) *busySeconds = arrived == Clock::time_point{} ? 0.0 : secondsSince(arrived);
    return r;
  };
  // A short test: the pair ends here, its peer told so by the 'Q' (its other pairs are measured as usual).
  auto endShort = [&](int badRank) {
    finish("");
    r.outcome = report::PairOutcome::kSkipped;
    r.error = fmt::format("skipped: rank {}'s link tests in this stage had already gone bad with at least {} peers "
                          "(failed, or slower than {} s), so its remaining pairs were left out to keep the stage short; the "
                          "confirmation stage re-tests it with healthy peers",
                          badRank, kShortTestAfterBadPeers,
                          std::chrono::duration<double>(kBadPairTime).count());
    return r;
  };
  if (o.shortTest) return endShort(o.myRank);
  // Small ping-pongs: the first is a warm-up.
  std::vector<double> rtts;
  for (int i = 0; i < 8; ++i) {
    char msg[9] = {'P'};
    auto t0 = Clock::now();
    std::string e = sendAll(fd, msg, sizeof msg, deadline);
    // The first answer comes when the peer arrives: wait for it in slices, asking whether it died.
    while (i == 0 && e.empty() && peerGone && waitFor(fd, POLLIN, std::min(deadline, Clock::now() + kPeerPoll)) == 0 &&
           Clock::now() < deadline) {
      if (peerGone()) {
        ::close(fd);
        r.outcome = report::PairOutcome::kSkipped;
        r.error = fmt::format("skipped: rank {} stopped responding (no heartbeat) while this rank waited for it", peer);
        return r;
      }
    }
    if (e.empty()) e = recvAll(fd, msg, sizeof msg, deadline);
    messages += 2;
    if (!e.empty()) {
      return finish(i == 0 ? fmt::format("rank {} never answered the first message (it did not reach this round "
                                         "in time): {}",
                                         peer, e)
                           : fmt::format("small message {} of 8: {}", i + 1, e));
    }
    if (i == 0) {
      arrived = Clock::now();
      deadline = arrived + measureFor;  // the peer is here: the measurement's own deadline
      if (msg[1] == 'S') return endShort(peer);  // the peer's short-test mark
    }
    if (i > 0) rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(rtts.begin(), rtts.end());
  r.latencyUs = rtts[rtts.size() / 2] / 2;
  // The large message both ways: warm-up, then best of two (the warm-up alone when it was slow).
  std::vector<char> buf(std::min(kChunk, std::max<std::size_t>(o.largeBytes, 1)), 'x');
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    std::size_t moved = 0;
    auto t0 = Clock::now();
    std::string e = sendBulk(fd, o.largeBytes, buf, deadline, moved);
    if (e.empty()) e = recvBulk(fd, o.largeBytes, buf, deadline, moved);
    messages += 2;
    double s = secondsSince(t0);
    if (!e.empty()) {
      // A crawling link: what moved before the deadline still says how fast it is.
      if (best == 0 && s > 0) r.bandwidthGBps = static_cast<double>(moved) / s / 1e9;
      return finish(fmt::format("large message ({} bytes each way), exchange {} of 3: {} after {:.1f} s, {:.1f} MB "
                                "moved",
                                o.largeBytes, i + 1, e, s, static_cast<double>(moved) / 1e6));
    }
    double gbps = 2.0 * static_cast<double>(o.largeBytes) / s / 1e9;
    best = std::max(best, gbps);
    r.bandwidthGBps = best;
    if (i == 0 && s > 1.0) break;  // slow enough that the warm-up is the measurement
  }
  return finish("", true);
}

ServedPair servePair(ProbeServer& server, int peer, int tag, Clock::time_point arriveBy,
                     std::chrono::milliseconds measureFor, const PeerGone& peerGone, bool shortTest) {
  ServedPair out;
  int fd = -1;
  for (;;) {
    const auto sliceEnd = peerGone ? std::min(arriveBy, Clock::now() + kPeerPoll) : arriveBy;
    fd = server.take(peer, Purpose::kLink, tag, sliceEnd);
    // Taken, out of time, nobody to ask, or the server stopped (take returned before its slice ended).
    if (fd >= 0 || Clock::now() >= arriveBy || !peerGone || Clock::now() < sliceEnd) break;
    if (peerGone()) {
      out.peerGone = true;
      out.error = fmt::format("rank {} stopped responding (no heartbeat) before its link test (round {})", peer, tag);
      return out;
    }
  }
  if (fd < 0) {
    out.error = fmt::format("rank {} did not open its link test connection (round {}) in time", peer, tag);
    return out;
  }
  const auto taken = Clock::now();
  // The peer's first ping may already wait; a little slack over its own deadline.
  const auto deadline = taken + measureFor + std::chrono::seconds(1);
  setNoDelay(fd);
  std::vector<char> buf(kChunk, 'y');
  std::string e;
  bool first = true;
  for (;;) {
    char op = 0;
    e = recvAll(fd, &op, 1, deadline);
    if (!e.empty()) break;
    if (op == 'Q') break;
    if (op == 'P') {
      char msg[9] = {'P'};
      e = recvAll(fd, msg + 1, 8, deadline);
      if (first && shortTest) msg[1] = 'S';  // the short-test mark: the lower rank ends the pair
      first = false;
      if (e.empty()) e = sendAll(fd, msg, sizeof msg, deadline);
    } else if (op == 'T') {
      // The lower rank asks for this end's TCP counters: 'T', bytes sent, bytes sent again (0, 0: unknown).
      const net::TcpSendCounters c = net::tcpSendCounters(fd);
      char reply[17] = {'T'};
      const std::uint64_t sent = c.known ? c.sentBytes : 0, again = c.known ? c.retransBytes : 0;
      std::memcpy(reply + 1, &sent, 8);
      std::memcpy(reply + 9, &again, 8);
      e = sendAll(fd, reply, sizeof reply, deadline);
    } else if (op == 'B') {
      std::uint64_t len = 0;
      e = recvAll(fd, reinterpret_cast<char*>(&len), 8, deadline);
      std::size_t moved = 0;
      if (e.empty() && len > (std::uint64_t{1} << 34)) e = "the peer announced an absurd message size";
      if (e.empty()) e = recvBulk(fd, len, buf, deadline, moved, true);
      if (e.empty()) e = sendBulk(fd, len, buf, deadline, moved);
    } else {
      e = "the peer sent an unknown request";
    }
    if (!e.empty()) break;
  }
  ::close(fd);
  out.error = e;
  out.busySeconds = secondsSince(taken);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Ring (bisection)

std::string ringCollective(ProbeServer& server, const std::vector<int>& ranks, int tag,
                           const std::function<std::pair<std::string, int>(int)>& addrOf, const std::string& jobId,
                           int myRank, Clock::time_point deadline, long long& messages) {
  const auto k = ranks.size();
  if (k < 2) return "";
  auto it = std::find(ranks.begin(), ranks.end(), myRank);
  if (it == ranks.end()) return "";
  const std::size_t i = static_cast<std::size_t>(it - ranks.begin());
  const int next = ranks[(i + 1) % k], prev = ranks[(i + k - 1) % k];
  auto [addr, port] = addrOf(next);
  std::string why;
  ++messages;
  int out = connectProbe("", addr, port, Purpose::kRing, myRank, tag, jobId, deadline, why);
  if (out < 0) return fmt::format("rank {} cannot connect to the next rank {} of the ring: {}", myRank, next, why);
  int in = server.take(prev, Purpose::kRing, tag, deadline);
  std::string e;
  if (in < 0) e = fmt::format("rank {} never connected to rank {} (the previous in the ring)", prev, myRank);
  // 32 KiB tokens: larger than any MTU, so a path that passes small packets and drops large ones
  // (an MTU black hole) hangs here too.
  std::vector<char> token(32 * 1024, 't');
  for (int lap = 0; e.empty() && lap < 2; ++lap) {
    e = sendAll(out, token.data(), token.size(), deadline);
    messages += 1;
    if (!e.empty()) {
      e = fmt::format("rank {} could not send to rank {}: {}", myRank, next, e);
      break;
    }
    e = recvAll(in, token.data(), token.size(), deadline);
    if (!e.empty()) e = fmt::format("rank {} received nothing from rank {}: {}", myRank, prev, e);
  }
  ::close(out);
  if (in >= 0) ::close(in);
  return e;
}

}  // namespace ds::diag::fleet
