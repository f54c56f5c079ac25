#include "engine/store/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/store/kv_map.h"
#include "engine/store/protocol.h"

namespace ds::store {

namespace {

using Clock = std::chrono::steady_clock;
using protocol::Dialect;
using protocol::Query;
using protocol::Writer;

// epoll data ids below kFirstConnId name the server's own descriptors.
constexpr std::uint64_t kWakeId = 0;
constexpr std::uint64_t kListenId = 1;
constexpr std::uint64_t kFirstConnId = 16;
// Timer ids: a connection's stall timer uses its id; this one re-arms accept() after EMFILE.
constexpr std::uint64_t kAcceptRetryTimer = 2;
constexpr Duration kAcceptRetryDelay{100};
constexpr size_t kReadChunk = size_t{64} * 1024;
constexpr int kMaxEvents = 256;
// The most keys one WAIT, CHECK, MULTI_GET or MULTI_SET may name (torch's libuv server allows as many).
constexpr std::uint64_t kMaxKeyCount = 128 * 1024;

std::string sockaddrText(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    std::string h(host);
    // Show IPv4 clients of a dual-stack socket as plain IPv4.
    if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos)
      return fmt::format("{}:{}", h.substr(7), port);
    return fmt::format("[{}]:{}", h, port);
  }
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  }
  return fmt::format("{}:{}", host, port);
}

std::string bindFailure(const std::string& where, int port, int err, const std::string& advice) {
  return fmt::format(
      "The server socket has failed to bind to {} (errno: {}). {}", where, errnoText(err),
      err == EADDRINUSE
          ? fmt::format("Another process holds port {} (often a stale job: find it with `ss -ltnp 'sport = :{}'`); {}",
                        port, port,
                        advice.empty() ? "stop it, choose another MASTER_PORT, or run `dsrun --standalone`, which "
                                         "picks a free port."
                                       : advice)
          : "Check that the address belongs to this host (MASTER_ADDR) and that the port is allowed.");
}

struct Conn {
  std::uint64_t id = 0;
  int fd = -1;
  std::string peer;
  std::string in;
  std::string out;
  size_t outPos = 0;
  Dialect dialect = Dialect::kUnknown;  // decided by the first bytes
  bool closing = false;                 // close once `out` is flushed
  bool wantWrite = false;
  // The parked WAIT, if any.
  bool waiting = false;
  std::vector<std::string> waitKeys;
  std::unordered_set<std::string> registered;  // keys whose waiters_ list holds this id
  bool hasStallTimer = false;
  std::multimap<Clock::time_point, std::uint64_t>::iterator stallTimer;
};

}  // namespace

class TcpStoreServer::Impl {
 public:
  explicit Impl(const TcpStoreServerOptions& o)
      : opts_(o), jobIdWireKey_(std::string(protocol::kKeyPrefix) + std::string(protocol::kJobIdKey)) {
    if (!opts_.jobId.empty()) map_.set(jobIdWireKey_, toBytes(opts_.jobId));
  }
  ~Impl() { stop(); }

  void listen();
  void run();
  void stop();
  void adopt(int fd, std::string peer);

  int port_ = 0;
  std::string address_;
  std::atomic<size_t> numClients_{0};

 private:
  // How many unparsed bytes a connection may hold: one largest SET plus slack.
  size_t maxBuffered() const { return opts_.maxValueBytes + opts_.maxKeyBytes + size_t{1024} * 1024; }

  void acceptAll();
  void addConnection(int fd, std::string peer);
  void takeAdopted();
  void onReadable(Conn& c);
  void onWritable(Conn& c);
  void process(Conn& c);
  bool identify(Conn& c);
  void refuseLegacyClient(Conn& c);
  void handle(Conn& c, protocol::Reader& r);
  std::string readKey(protocol::Reader& r) const;
  std::vector<std::string> readKeys(protocol::Reader& r) const;
  Bytes readValue(protocol::Reader& r) const;
  void startWait(Conn& c, std::vector<std::string> keys);
  bool tryFinishWait(Conn& c);
  void finishWait(Conn& c);
  void keyChanged(const std::string& key);
  void send(Conn& c, std::string bytes);
  void flush(Conn& c);
  void setWriteInterest(Conn& c, bool on);
  void updateStallTimer(Conn& c);
  void close(Conn& c, const std::string& why);
  void fireTimers();
  int nextTimeoutMs() const;
  std::string checkValue(size_t size) const;

  TcpStoreServerOptions opts_;
  std::string jobIdWireKey_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  int epollFd_ = -1;
  std::thread thread_;
  std::mutex stopMu_;
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};
  std::uint64_t nextId_ = kFirstConnId;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters_;
  std::multimap<Clock::time_point, std::uint64_t> timers_;
  std::multimap<Clock::time_point, std::uint64_t>::iterator acceptTimer_;
  bool acceptPaused_ = false;
  detail::KvMap map_;
  std::mutex adoptMu_;
  std::vector<std::pair<int, std::string>> adopted_;  // handed over by adopt(), taken by the event thread
  bool adoptClosed_ = false;                          // guarded by adoptMu_
};

void TcpStoreServer::Impl::listen() {
  std::vector<std::pair<sockaddr_storage, socklen_t>> candidates;
  std::vector<std::string> shown;
  if (opts_.host.empty()) {
    sockaddr_storage ss{};
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_any;
    a6->sin6_port = htons(static_cast<uint16_t>(opts_.port));
    candidates.emplace_back(ss, sizeof(sockaddr_in6));
    shown.push_back(fmt::format("[::]:{}", opts_.port));
    sockaddr_storage ss4{};
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss4);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    a4->sin_port = htons(static_cast<uint16_t>(opts_.port));
    candidates.emplace_back(ss4, sizeof(sockaddr_in));
    shown.push_back(fmt::format("0.0.0.0:{}", opts_.port));
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string portText = std::to_string(opts_.port);
    if (int rc = ::getaddrinfo(opts_.host.c_str(), portText.c_str(), &hints, &res); rc != 0) {
      throw IoError(
          fmt::format("The store server cannot listen on '{}': {}; set the host to an address of this "
                      "machine, or leave it empty for all interfaces",
                      opts_.host, ::gai_strerror(rc)));
    }
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      sockaddr_storage ss{};
      std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
      candidates.emplace_back(ss, ai->ai_addrlen);
      shown.push_back(sockaddrText(ss));
    }
    ::freeaddrinfo(res);
  }

  int lastErr = 0;
  std::string lastShown;
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto& [ss, len] = candidates[i];
    int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      lastErr = errno;
      lastShown = shown[i];
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6) {
      int zero = 0;  // dual stack: IPv4 clients too
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, opts_.backlog) != 0) {
      lastErr = errno;
      lastShown = shown[i];
      ::close(fd);
      // A taken port is taken for every address family: say so rather than try the next one.
      if (lastErr == EADDRINUSE || lastErr == EACCES) break;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
    port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    listenFd_ = fd;
    address_ = sockaddrText(bound);
    if (opts_.host.empty())
      address_ = (bound.ss_family == AF_INET6 ? "[::]:" : "0.0.0.0:") + std::to_string(port_);
    break;
  }
  if (listenFd_ < 0) throw IoError(bindFailure(lastShown, opts_.port, lastErr, opts_.portTakenAdvice));

  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epollFd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (wakeFd_ < 0 || epollFd_ < 0) {
    throw IoError(
        fmt::format("The store server could not create its event loop (errno: {})", errnoText(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &ev);
  ev.data.u64 = kListenId;
  ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, listenFd_, &ev);
  thread_ = std::thread([this] { run(); });
}

void TcpStoreServer::Impl::stop() {
  std::lock_guard lock(stopMu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof(one));
    thread_.join();
  }
  for (auto& [id, c] : conns_) ::close(c->fd);
  conns_.clear();
  {
    std::lock_guard adoptLock(adoptMu_);
    adoptClosed_ = true;
    for (auto& [fd, peer] : adopted_) ::close(fd);
    adopted_.clear();
  }
  numClients_ = 0;
  for (int* fd : {&listenFd_, &wakeFd_, &epollFd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

int TcpStoreServer::Impl::nextTimeoutMs() const {
  if (timers_.empty()) return -1;
  auto left = timers_.begin()->first - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up: waking a little late is fine, waking early would loop without work.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

void TcpStoreServer::Impl::run() {
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    int n = ::epoll_wait(epollFd_, events, kMaxEvents, nextTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("store server {}: epoll_wait failed ({}); the server stops", address_, errnoText(errno));
      break;
    }
    for (int i = 0; i < n && !stopping_; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        takeAdopted();
        continue;
      }
      if (id == kListenId) {
        acceptAll();
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;  // closed by an earlier event in this batch
      Conn& c = *it->second;
      if (events[i].events & EPOLLOUT) onWritable(c);
      if (!conns_.count(id)) continue;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) onReadable(c);
    }
    fireTimers();
  }
}

void TcpStoreServer::Impl::acceptAll() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listenFd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Pending connections would make the level-triggered listener fire forever: stop watching it
        // for a moment instead of spinning.
        log::warn(
            "store server {}: cannot accept more clients ({}); raise the open-file limit (ulimit -n) "
            "for this process; retrying in {} ms",
            address_, errnoText(errno), kAcceptRetryDelay.count());
        ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, listenFd_, nullptr);
        acceptPaused_ = true;
        acceptTimer_ = timers_.emplace(Clock::now() + kAcceptRetryDelay, kAcceptRetryTimer);
        return;
      }
      log::warn("store server {}: accept failed: {}", address_, errnoText(errno));
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    addConnection(fd, sockaddrText(ss));
  }
}

void TcpStoreServer::Impl::addConnection(int fd, std::string peer) {
  auto c = std::make_unique<Conn>();
  c->id = nextId_++;
  c->fd = fd;
  c->peer = std::move(peer);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = c->id;
  if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return;
  }
  conns_.emplace(c->id, std::move(c));
}

void TcpStoreServer::Impl::adopt(int fd, std::string peer) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  std::lock_guard lock(adoptMu_);
  if (adoptClosed_) {  // stopped: nobody would serve it
    ::close(fd);
    return;
  }
  adopted_.emplace_back(fd, std::move(peer));
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof(one));  // under the lock: stop() closes wakeFd_
}

void TcpStoreServer::Impl::takeAdopted() {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(wakeFd_, &count, sizeof(count));
  std::vector<std::pair<int, std::string>> fds;
  {
    std::lock_guard lock(adoptMu_);
    fds.swap(adopted_);
  }
  for (auto& [fd, peer] : fds) addConnection(fd, std::move(peer));
}
void TcpStoreServer::Impl::onReadable(Conn& c) {
  char buf[kReadChunk];
  const std::uint64_t id = c.id;
  bool progressed = false;
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      progressed = true;
      // A well-behaved client sends one request and waits for its reply; more than one full message
      // of backlog means it does not follow the protocol.
      if (c.in.size() > maxBuffered()) {
        close(c, "it sent far more than one message without reading the replies");
        return;
      }
      if (static_cast<size_t>(n) < sizeof(buf)) break;
      continue;
    }
    if (n == 0) {
      close(c, c.in.empty() ? "" : "it disconnected in the middle of a message");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    close(c, fmt::format("recv failed: {}", errnoText(errno)));
    return;
  }
  if (progressed) process(c);
  if (conns_.count(id)) updateStallTimer(c);
}

// Decides the connection's dialect from its first bytes (protocol.h). Returns false while too few
// bytes have arrived to tell, or when it closed the connection.
bool TcpStoreServer::Impl::identify(Conn& c) {
  const std::string& in = c.in;
  if (in.empty()) return false;
  if (in[0] != 0) {
    c.dialect = Dialect::kTorch1;
  } else {
    if (in.size() < 5) return false;
    if (protocol::loadU32(in.data() + 1) == protocol::kValidationMagic) {
      c.dialect = Dialect::kTorch2;
    } else {
      // Byte 0 without the magic: a torch 1.x SET, whose 8-byte key length follows; or the hello of a
      // dsperf from before the c10d protocol: u32 big-endian length, 0x01, "DSST".
      if (in.size() < 9) return false;
      if (in[4] == 1 && in.compare(5, 4, "DSST") == 0) {
        refuseLegacyClient(c);
        return false;
      }
      c.dialect = Dialect::kTorch1;
    }
  }
  ++numClients_;
  return true;
}

// An older dsperf speaks its own framed protocol. Answer in its words (a kError frame: u32
// big-endian length, type 108, kind 1, u32 big-endian text length, text) so that it fails at once
// with a sentence instead of retrying until its timeout, then close.
void TcpStoreServer::Impl::refuseLegacyClient(Conn& c) {
  const std::string text = fmt::format(
      "the store server at {} speaks PyTorch's c10d TCPStore protocol, and this dsperf client is older "
      "and speaks its own: run the same dsperf build on every node",
      address_);
  std::string frame;
  auto be32 = [&frame](std::uint32_t v) {
    for (int i = 3; i >= 0; --i) frame.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  be32(static_cast<std::uint32_t>(2 + 4 + text.size()));
  frame.push_back(static_cast<char>(108));
  frame.push_back(static_cast<char>(1));
  be32(static_cast<std::uint32_t>(text.size()));
  frame += text;
  log::warn(
      "store server {}: refused {}: it is a dsperf client from before the c10d protocol; run the same "
      "dsperf build on every node",
      address_, c.peer);
  c.in.clear();
  c.closing = true;
  send(c, std::move(frame));
}

void TcpStoreServer::Impl::process(Conn& c) {
  const std::uint64_t id = c.id;
  size_t pos = 0;
  while (!c.closing) {
    if (c.dialect == Dialect::kUnknown && !identify(c)) return;
    if (pos >= c.in.size()) break;
    protocol::Reader r(c.in.data() + pos, c.in.size() - pos);
    try {
      handle(c, r);
    } catch (const protocol::NeedMore&) {
      break;
    } catch (const ProtocolError& e) {
      close(c, e.what());
      return;
    }
    if (!conns_.count(id)) return;
    pos += r.consumed();
  }
  c.in.erase(0, pos);
}

std::string TcpStoreServer::Impl::readKey(protocol::Reader& r) const {
  return r.str(opts_.maxKeyBytes, "a key");
}

std::vector<std::string> TcpStoreServer::Impl::readKeys(protocol::Reader& r) const {
  const std::uint64_t n = r.count(kMaxKeyCount, "a key count");
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; i < n; ++i) keys.push_back(readKey(r));
  return keys;
}

Bytes TcpStoreServer::Impl::readValue(protocol::Reader& r) const {
  return r.bytes(opts_.maxValueBytes, "a value");
}

// Parses one request from r and answers it. Throws NeedMore when the request is incomplete (the store
// is not touched before every field is read; only a parked wait the client gave up on is dropped) and
// ProtocolError when the client must be disconnected; the message says why, for the server's log.
void TcpStoreServer::Impl::handle(Conn& c, protocol::Reader& r) {
  const std::uint8_t byte = r.u8();
  const auto q = protocol::decode(c.dialect, byte);
  if (!q) {
    throw ProtocolError(
        fmt::format("it sent query type {}, which {} does not have (a newer torch, or not a "
                    "c10d client)",
                    byte, protocol::dialectName(c.dialect)));
  }
  // A request while a WAIT is parked means the client gave up on it: torch 1.x (and 2.x before
  // CANCEL_WAIT) time a wait out locally and go on with the next request on the same connection.
  if (c.waiting && *q != Query::kCancelWait) finishWait(c);
  Writer w;
  switch (*q) {
    case Query::kValidate: {
      if (r.u32() != protocol::kValidationMagic) throw ProtocolError("it sent VALIDATE with the wrong magic");
      return;
    }
    case Query::kPing: {
      const std::uint32_t nonce = r.u32();
      return send(c, w.u32(nonce).take());
    }
    case Query::kSet:
    case Query::kAppend: {
      std::string key = readKey(r);
      Bytes value = readValue(r);
      if (*q == Query::kAppend) {
        const Bytes* old = map_.find(key);
        if (auto e = checkValue((old ? old->size() : 0) + value.size()); !e.empty()) throw ProtocolError(e);
        map_.append(key, value);
      } else {
        map_.set(key, std::move(value));
      }
      return keyChanged(key);
    }
    case Query::kGet: {
      std::string key = readKey(r);
      const Bytes* v = map_.find(key);
      if (!v)
        throw ProtocolError(
            fmt::format("it sent GET for '{}', which is not set (c10d clients WAIT first)", key));
      return send(c, w.bytes(*v).take());
    }
    case Query::kMultiGet: {
      auto keys = readKeys(r);
      for (const auto& k : keys) {
        const Bytes* v = map_.find(k);
        if (!v) throw ProtocolError(fmt::format("it sent MULTI_GET for '{}', which is not set", k));
        w.bytes(*v);
      }
      return send(c, w.take());
    }
    case Query::kWait: {
      auto keys = readKeys(r);
      return startWait(c, std::move(keys));
    }
    case Query::kCancelWait: {
      if (c.waiting) finishWait(c);
      return send(c, w.u8(protocol::kWaitCanceled).take());
    }
    case Query::kAdd: {
      std::string key = readKey(r);
      const std::int64_t delta = r.i64();
      std::int64_t v = 0;
      try {
        v = map_.add(key, delta);
      } catch (const Error& e) {
        throw ProtocolError(fmt::format("ADD failed: {}", e.what()));
      }
      send(c, w.i64(v).take());
      return keyChanged(key);
    }
    case Query::kCompareSet: {
      std::string key = readKey(r);
      Bytes expected = readValue(r);
      Bytes desired = readValue(r);
      const bool had = map_.contains(key);
      Bytes v = map_.compareSet(key, expected, desired);
      const bool otherJob = key == jobIdWireKey_ && v != desired;
      send(c, w.bytes(v).take());
      if (otherJob) {
        log::warn(
            "store server {} (job '{}'): refused a client from {} that belongs to job '{}': a process from "
            "another job (often a stray rank of an earlier run) reached this port; stop it, or give jobs "
            "different MASTER_PORTs",
            address_, opts_.jobId, c.peer, toString(desired));
        c.closing = true;
        flush(c);
        return;
      }
      if (!had && map_.contains(key)) keyChanged(key);
      return;
    }
    case Query::kCheck: {
      auto keys = readKeys(r);
      return send(c,
                  w.u8(map_.missing(keys).empty() ? protocol::kCheckReady : protocol::kCheckNotReady).take());
    }
    case Query::kDeleteKey: {
      std::string key = readKey(r);
      return send(c, w.i64(map_.erase(key) ? 1 : 0).take());
    }
    case Query::kGetNumKeys:
      return send(c, w.i64(static_cast<std::int64_t>(map_.size())).take());
    case Query::kMultiSet: {
      const std::uint64_t n = r.count(kMaxKeyCount, "a key count");
      std::vector<std::pair<std::string, Bytes>> kvs;
      for (std::uint64_t i = 0; i < n; ++i) {
        std::string k = readKey(r);
        kvs.emplace_back(std::move(k), readValue(r));
      }
      for (auto& [k, v] : kvs) map_.set(k, std::move(v));
      for (const auto& kv : kvs) keyChanged(kv.first);
      return;
    }
    case Query::kQueuePush:
    case Query::kQueuePop:
    case Query::kQueueLen:
    case Query::kListKeys:
    case Query::kBarrier:
    case Query::kWatchKey:
      break;
  }
  throw ProtocolError(fmt::format("it sent {} ({} query type {}), which this store does not implement",
                                  protocol::queryName(*q), protocol::dialectName(c.dialect), byte));
}

std::string TcpStoreServer::Impl::checkValue(size_t size) const {
  if (size <= opts_.maxValueBytes) return {};
  return fmt::format(
      "a value of {} bytes exceeds this store's limit of {} bytes; keep large data out of the "
      "rendezvous store",
      size, opts_.maxValueBytes);
}

// Parks a WAIT until every key is set. c10d servers never time a wait out: the client does, and then
// sends CANCEL_WAIT or closes the connection.
void TcpStoreServer::Impl::startWait(Conn& c, std::vector<std::string> keys) {
  c.waitKeys = std::move(keys);
  c.waiting = true;
  if (tryFinishWait(c)) return;
  for (const auto& k : c.waitKeys) {
    if (!map_.contains(k) && c.registered.insert(k).second) waiters_[k].push_back(c.id);
  }
}

// Answers the parked wait if every key is present. Returns whether it did.
bool TcpStoreServer::Impl::tryFinishWait(Conn& c) {
  for (const auto& k : c.waitKeys) {
    if (!map_.contains(k)) return false;
  }
  finishWait(c);
  send(c, Writer().u8(protocol::kStopWaiting).take());
  return true;
}

void TcpStoreServer::Impl::finishWait(Conn& c) {
  for (const auto& k : c.registered) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  c.registered.clear();
  c.waiting = false;
  c.waitKeys.clear();
}

void TcpStoreServer::Impl::keyChanged(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<std::uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (std::uint64_t id : ids) {
    auto cit = conns_.find(id);
    if (cit == conns_.end()) continue;
    Conn& c = *cit->second;
    c.registered.erase(key);
    if (!c.waiting) continue;
    if (tryFinishWait(c)) {
      if (conns_.count(id)) process(c);  // a request that arrived while it waited
      continue;
    }
    // Still missing something; watch keys that were deleted after they fired once.
    for (const auto& k : c.waitKeys) {
      if (!map_.contains(k) && c.registered.insert(k).second) waiters_[k].push_back(c.id);
    }
  }
}

void TcpStoreServer::Impl::send(Conn& c, std::string bytes) {
  if (c.out.size() == c.outPos) {
    c.out = std::move(bytes);
    c.outPos = 0;
  } else {
    c.out.append(bytes);
  }
  flush(c);
}

void TcpStoreServer::Impl::flush(Conn& c) {
  while (c.outPos < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.outPos, c.out.size() - c.outPos, MSG_NOSIGNAL);
    if (n > 0) {
      c.outPos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      setWriteInterest(c, true);
      return;
    }
    close(c, c.closing ? "" : fmt::format("send failed: {}", errnoText(errno)));
    return;
  }
  c.out.clear();
  c.outPos = 0;
  setWriteInterest(c, false);
  if (c.closing) close(c, "");
}

void TcpStoreServer::Impl::onWritable(Conn& c) { flush(c); }

void TcpStoreServer::Impl::setWriteInterest(Conn& c, bool on) {
  if (c.wantWrite == on) return;
  c.wantWrite = on;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? static_cast<std::uint32_t>(EPOLLOUT) : 0U);
  ev.data.u64 = c.id;
  ::epoll_ctl(epollFd_, EPOLL_CTL_MOD, c.fd, &ev);
}

// A stall timer runs while a message is incomplete; every received byte restarts it. A connection
// that has sent nothing is left alone: torch clients may open one and use it much later.
void TcpStoreServer::Impl::updateStallTimer(Conn& c) {
  if (c.hasStallTimer) {
    timers_.erase(c.stallTimer);
    c.hasStallTimer = false;
  }
  if (!c.in.empty() && !c.waiting) {
    c.stallTimer = timers_.emplace(Clock::now() + opts_.stallTimeout, c.id);
    c.hasStallTimer = true;
  }
}

void TcpStoreServer::Impl::close(Conn& c, const std::string& why) {
  if (!why.empty()) log::warn("store server {}: closed the connection of {}: {}", address_, c.peer, why);
  finishWait(c);
  if (c.hasStallTimer) timers_.erase(c.stallTimer);
  if (c.dialect != Dialect::kUnknown) --numClients_;
  ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  conns_.erase(c.id);  // destroys c
}

void TcpStoreServer::Impl::fireTimers() {
  const auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto it = timers_.begin();
    const std::uint64_t id = it->second;
    if (id == kAcceptRetryTimer) {
      timers_.erase(it);
      acceptPaused_ = false;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, listenFd_, &ev);
      continue;
    }
    auto cit = conns_.find(id);
    timers_.erase(it);
    if (cit == conns_.end()) continue;  // cannot happen: close() removes its timer
    Conn& c = *cit->second;
    c.hasStallTimer = false;
    close(c, fmt::format("it left a message unfinished for {} ms", opts_.stallTimeout.count()));
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    throw ConfigError(fmt::format("store server port {} is out of range; use 1-65535, or 0 for any free port",
                                  options.port));
  }
  auto impl = std::make_unique<Impl>(options);
  impl->listen();
  log::debug("store server listening on {} (job '{}')", impl->address_, options.jobId);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::~TcpStoreServer() { stop(); }
int TcpStoreServer::port() const { return impl_->port_; }
std::string TcpStoreServer::address() const { return impl_->address_; }
size_t TcpStoreServer::numClients() const { return impl_->numClients_.load(); }
void TcpStoreServer::stop() { impl_->stop(); }
void TcpStoreServer::adoptConnection(int fd, std::string peer) { impl_->adopt(fd, std::move(peer)); }

}  // namespace ds::store
