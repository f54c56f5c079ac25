#include "engine/store/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <random>
#include <thread>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/progress.h"

namespace ds::store {

namespace {

using Clock = std::chrono::steady_clock;
using protocol::Dialect;
using protocol::Query;
using protocol::Writer;

constexpr Duration kFirstBackoff{10};
constexpr Duration kMaxBackoff{1000};
constexpr Duration kConnectAttempt{10000};
// A reply longer than this means client and server are out of step (our server's values are at most
// 64 MiB; torch's libuv server allows 8 MiB).
constexpr std::uint64_t kMaxReply = std::uint64_t{1} << 31;
// How many of a foreign peer's bytes an error message shows.
constexpr size_t kShownBytes = 48;

// Transport outcomes, turned into user-facing errors by the caller, who knows what was going on.
struct PeerClosed {};
struct IoTimedOut {};
struct SysError {
  int err;
};
// A WAIT that the client timed out (the server never answers one with a timeout).
struct WaitTimedOut {};

// Blocks until fd is ready for `events` or the deadline passes (throws IoTimedOut).
void pollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) throw IoTimedOut{};
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
    const int rc = ::poll(&p, 1, ms);
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) throw SysError{errno};
  }
}

void sendAll(int fd, const std::string& data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollUntil(fd, POLLOUT, deadline);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) throw PeerClosed{};
    throw SysError{errno};
  }
}

void recvExact(int fd, char* buf, size_t size, Clock::time_point deadline) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(fd, buf + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw PeerClosed{};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollUntil(fd, POLLIN, deadline);
      continue;
    }
    if (errno == ECONNRESET) throw PeerClosed{};
    throw SysError{errno};
  }
}

// Shows a foreign peer's first bytes: printable text as is, the rest as hex escapes.
std::string showBytes(const std::string& b) {
  std::string out;
  for (char ch : b.substr(0, kShownBytes)) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(ch);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

// What a peer that is not a c10d store answered to the handshake, in words: "it answered with HTTP
// (...)", or "it sent N bytes that are not a store reply (...)".
std::string describeForeignReply(const std::string& got) {
  if (got.rfind("HTTP/", 0) == 0) {
    return fmt::format("it answered torch's handshake with HTTP (\"{}\"): it is a web server or proxy",
                       showBytes(got.substr(0, got.find('\r'))));
  }
  if (got.rfind("SSH-", 0) == 0) {
    return fmt::format("it answered torch's handshake with SSH's banner (\"{}\")", showBytes(got));
  }
  return fmt::format("it answered torch's handshake (VALIDATE, PING) with {}{} bytes that are not a store reply "
                     "(\"{}\"; a c10d store echoes the 4-byte PING nonce)",
                     got.size() >= kShownBytes ? "at least " : "", got.size(), showBytes(got));
}

// Reads what else the peer sends within `wait`, for an error message.
std::string readSome(int fd, std::string got, Duration wait) {
  const auto deadline = Clock::now() + wait;
  char buf[kShownBytes];
  while (got.size() < kShownBytes) {
    try {
      pollUntil(fd, POLLIN, deadline);
    } catch (...) {
      break;
    }
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

Duration jittered(Duration d) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> f(0.5, 1.5);
  return Duration(
      std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(d.count()) * f(rng))));
}

Duration since(Clock::time_point t) { return std::chrono::duration_cast<Duration>(Clock::now() - t); }

// Connects a non-blocking socket to ai by the deadline. Throws SysError or IoTimedOut.
int connectSocket(const addrinfo* ai, Clock::time_point deadline) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) throw SysError{errno};
  try {
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) throw SysError{errno};
      pollUntil(fd, POLLOUT, deadline);
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) throw SysError{err};
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// The PING nonce. Its bits 16-23 are at least 0x80: a torch 1.x server reads the handshake as a SET
// whose key length (bytes 1-8) is then over 2^63, and refuses it at once instead of waiting for it.
std::uint32_t pingNonce() {
  thread_local std::mt19937 rng{std::random_device{}()};
  return static_cast<std::uint32_t>(rng()) | 0x00800000U;
}

std::string wireKey(const std::string& key) { return std::string(protocol::kKeyPrefix) + key; }

std::vector<std::string> wireKeys(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(wireKey(k));
  return out;
}

}  // namespace

// One request/reply exchange on a connection, every read bounded by a deadline.
class TcpStore::Session {
 public:
  Session(int fd, Clock::time_point replyDeadline, Clock::time_point waitDeadline)
      : fd_(fd), replyDeadline_(replyDeadline), waitDeadline_(waitDeadline) {}

  void send(const Writer& w) { sendAll(fd_, w.data(), replyDeadline_); }
  std::uint8_t u8() {
    char b = 0;
    recvExact(fd_, &b, 1, replyDeadline_);
    return static_cast<std::uint8_t>(b);
  }
  std::int64_t i64() {
    char b[8];
    recvExact(fd_, b, sizeof(b), replyDeadline_);
    return static_cast<std::int64_t>(protocol::loadU64(b));
  }
  Bytes bytes() {
    const auto n = static_cast<std::uint64_t>(i64());
    if (n > kMaxReply) {
      throw ProtocolError(
          fmt::format("the store server sent a value of {} bytes: client and server are out of "
                      "step, or the peer is not a c10d TCPStore",
                      n));
    }
    Bytes out(static_cast<size_t>(n));
    recvExact(fd_, reinterpret_cast<char*>(out.data()), out.size(), replyDeadline_);
    return out;
  }
  // The answer to WAIT, by the wait's own deadline (throws WaitTimedOut).
  void waitReply() {
    char b = 0;
    try {
      recvExact(fd_, &b, 1, waitDeadline_);
    } catch (const IoTimedOut&) {
      throw WaitTimedOut{};
    }
    if (b != static_cast<char>(protocol::kStopWaiting)) {
      throw ProtocolError(
          fmt::format("the store server answered WAIT with {} instead of STOP_WAITING", int(b)));
    }
  }

 private:
  int fd_;
  Clock::time_point replyDeadline_;
  Clock::time_point waitDeadline_;
};

TcpStore::TcpStore(std::string host, const TcpStoreOptions& options)
    : Store(options.timeout), host_(std::move(host)), options_(options), port_(options.port) {
  if (options_.isServer) {
    TcpStoreServerOptions so;
    so.host = options_.serverHost;
    so.port = options_.port;
    so.jobId = options_.jobId;
    so.portTakenAdvice = options_.portTakenAdvice;
    server_ = TcpStoreServer::start(so);
    port_ = server_->port();
  }
  std::lock_guard lock(mu_);
  connectLocked(options_.timeout);
}

TcpStore::~TcpStore() {
  std::lock_guard lock(mu_);
  closeLocked();
}

std::string TcpStore::address() const {
  return host_.find(':') != std::string::npos ? fmt::format("[{}]:{}", host_, port_)
                                              : fmt::format("{}:{}", host_, port_);
}

std::string TcpStore::describe() const { return "TCPStore at " + address(); }

void TcpStore::closeLocked() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::uint8_t TcpStore::queryByte(Query q) const {
  auto b = protocol::encode(dialect_, q);
  DS_CHECK(b.has_value(), "query {} has no byte in {}", protocol::queryName(q),
           protocol::dialectName(dialect_));
  return *b;
}

// Settles the dialect on a connected socket (protocol.h): torch 2.x's VALIDATE + PING first; a peer
// that closes the connection on that is asked torch 1.x's GETNUMKEYS on a new one. Returns the fd
// to keep. Throws ProtocolError when the peer is not a c10d store.
int TcpStore::handshake(int fd, Clock::time_point deadline) {
  const std::string who = address();
  const auto budget = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  auto notAStore = [&](const std::string& what) {
    return ProtocolError(
        fmt::format("the process at {} is not a PyTorch c10d TCPStore server: {}. Check that "
                    "MASTER_ADDR/MASTER_PORT (or the "
                    "tcp:// address) name the store of this job; every dsperf rank of a job must run the "
                    "same dsperf build. If it should be rank 0's store, rank 0 may have failed to start it "
                    "(another process holding the port, say): see rank 0's output",
                    who, what));
  };
  if (dialect_ == Dialect::kTorch1) return fd;  // a known torch 1.x peer: it has no handshake
  {
    const std::uint32_t nonce = pingNonce();
    Writer w;
    w.u8(static_cast<std::uint8_t>(Query::kValidate)).u32(protocol::kValidationMagic);
    w.u8(static_cast<std::uint8_t>(Query::kPing)).u32(nonce);
    char reply[4];
    try {
      sendAll(fd, w.data(), deadline);
      recvExact(fd, reply, sizeof(reply), deadline);
    } catch (const IoTimedOut&) {
      ::close(fd);
      throw notAStore(fmt::format(
          "it accepted the connection but did not answer torch's handshake (VALIDATE, PING) within {} ms. It "
          "may be a dsperf store from before the c10d protocol, another service, or a hung server",
          budget.count()));
    } catch (const PeerClosed&) {
      ::close(fd);
      if (dialect_ == Dialect::kTorch2) throw;  // it spoke 2.x before: it is going away
      fd = -1;
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (fd >= 0) {
      if (protocol::loadU32(reply) == nonce) {
        dialect_ = Dialect::kTorch2;
        return fd;
      }
      const std::string got = readSome(fd, std::string(reply, sizeof(reply)), Duration(200));
      ::close(fd);
      throw notAStore(describeForeignReply(got));
    }
  }
  return -1;  // it closed the connection: the caller tries torch 1.x on a new one
}

void TcpStore::connectLocked(Duration timeout) {
  closeLocked();
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Duration backoff = kFirstBackoff;
  std::string lastError = "no attempt was made";
  ProgressSchedule progress(start);
  std::optional<Clock::time_point> unresolvedSince;
  const std::string portText = std::to_string(port_);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(host_.c_str(), portText.c_str(), &hints, &res); rc != 0) {
      lastError = fmt::format("cannot resolve '{}': {}", host_, ::gai_strerror(rc));
      // DNS may come up (a node registering late): retry, but only for resolveTimeout.
      if (!unresolvedSince) unresolvedSince = Clock::now();
      if (Clock::now() - *unresolvedSince >= std::min(options_.resolveTimeout, timeout)) {
        throw ConfigError(fmt::format(
            "cannot resolve the store's host name '{}': {} (tried for {:.0f} s). Check MASTER_ADDR (or the "
            "tcp:// address): it must be a host name that every node can resolve, or an IP address of rank 0's "
            "node.",
            host_, ::gai_strerror(rc), std::chrono::duration<double>(Clock::now() - start).count()));
      }
    } else {
      unresolvedSince.reset();
    }
    for (addrinfo* ai = res; ai && Clock::now() < deadline; ai = ai->ai_next) {
      // Bounded per attempt: a firewall that drops the SYN, or a foreign process on the port that
      // accepts and never answers, would otherwise hold this attempt (and the progress lines) for
      // the whole timeout.
      const auto attemptDeadline = std::min(deadline, Clock::now() + kConnectAttempt);
      try {
        int fd = handshake(connectSocket(ai, attemptDeadline), attemptDeadline);
        if (fd < 0) {
          // torch 1.x: it closed the connection on torch 2.x's handshake (or spoke 1.x before). It has no
          // handshake; a first GETNUMKEYS proves it speaks c10d.
          fd = connectSocket(ai, attemptDeadline);
          try {
            Writer w;
            w.u8(*protocol::encode(Dialect::kTorch1, Query::kGetNumKeys));
            sendAll(fd, w.data(), attemptDeadline);
            char reply[8];
            recvExact(fd, reply, sizeof(reply), attemptDeadline);
          } catch (const PeerClosed&) {
            ::close(fd);
            throw ProtocolError(
                fmt::format("the process at {} is not a PyTorch c10d TCPStore server: it closed the "
                            "connection on torch 2.x's "
                            "handshake and on torch 1.x's GETNUMKEYS. Check that MASTER_ADDR/MASTER_PORT "
                            "name the store of "
                            "this job",
                            address()));
          } catch (...) {
            ::close(fd);
            throw;
          }
          dialect_ = Dialect::kTorch1;
        }
        fd_ = fd;
        break;
      } catch (const SysError& e) {
        lastError = errnoText(e.err);
      } catch (const PeerClosed&) {
        lastError = "the server closed the connection during the handshake";
      } catch (const IoTimedOut&) {
        lastError = fmt::format("the connection or handshake did not complete within {} s",
                                kConnectAttempt.count() / 1000);
      } catch (...) {
        if (res) ::freeaddrinfo(res);
        throw;
      }
    }
    if (res) ::freeaddrinfo(res);
    if (fd_ >= 0) {
      if (!jobChecked_) checkJobIdLocked(timeout);
      return;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    if (progress.due()) {
      progress.advance();
      log::warn(
          "still cannot reach the store at {} after {:.0f} s ({}); retrying for {:.0f} s more. Rank 0 (or dsrun, "
          "which hosts the store) may have failed to start it, or not have started yet: see rank 0's output.",
          address(), progress.elapsedSeconds(), lastError, std::chrono::duration<double>(left).count());
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(jittered(backoff), left));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  throw TimeoutError(fmt::format(
      "The client socket has timed out after {}ms while trying to connect to ({}, {}). Last error: {}. "
      "Check that the store server is up (rank 0, or dsrun, must be running and not have exited), that "
      "MASTER_ADDR/MASTER_PORT (or the tcp:// address) name that host and port, and that no firewall blocks "
      "the port.",
      timeout.count(), host_, port_, lastError));
}

// DESIGN.md "Isolation": the first client records the job id; a client of another job reads that id
// back, and our server closes its connection.
void TcpStore::checkJobIdLocked(Duration timeout) {
  jobChecked_ = true;
  if (options_.jobId.empty()) return;
  const Bytes mine = toBytes(options_.jobId);
  Bytes theirs;
  try {
    Session s(fd_, Clock::now() + timeout + kReplyGrace, Clock::now() + timeout);
    Writer w;
    w.u8(queryByte(Query::kCompareSet)).str(wireKey(std::string(protocol::kJobIdKey))).bytes({}).bytes(mine);
    s.send(w);
    theirs = s.bytes();
  } catch (const ProtocolError&) {
    closeLocked();
    throw;
  } catch (...) {
    closeLocked();
    jobChecked_ = false;  // the next connect tries again
    throw IoError(fmt::format(
        "the store server at {} closed the connection while this client checked the job id", address()));
  }
  if (theirs != mine) {
    closeLocked();
    throw ConfigError(fmt::format(
        "the store at {} belongs to job '{}' but this process is job '{}' (the job id comes from DS_JOB_ID, "
        "SLURM_JOB_ID or the launcher's run id): a process from another job reached this port. If this "
        "process "
        "is a leftover of an earlier run, stop it; otherwise give concurrent jobs different MASTER_PORTs, or "
        "make "
        "sure all ranks of one job see the same job id",
        address(), toString(theirs), options_.jobId));
  }
}

// After a WAIT ran out: torch 2.x's CANCEL_WAIT keeps the connection in step, and a CHECK per key
// finds the ones still missing. torch 1.x has no CANCEL_WAIT: the connection is dropped (the server
// still holds the wait) and every key is named.
std::vector<std::string> TcpStore::cancelWaitLocked(const std::vector<std::string>& keys) {
  if (dialect_ != Dialect::kTorch2) {
    closeLocked();
    return keys;
  }
  try {
    Session s(fd_, Clock::now() + kReplyGrace, Clock::now() + kReplyGrace);
    s.send(Writer().u8(queryByte(Query::kCancelWait)));
    std::uint8_t r = s.u8();
    if (r == protocol::kStopWaiting) r = s.u8();  // the keys came just before the cancel
    if (r != protocol::kWaitCanceled) throw ProtocolError("no WAIT_CANCELED after CANCEL_WAIT");
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      Writer w;
      s.send(w.u8(queryByte(Query::kCheck)).strs({wireKey(k)}));
      if (s.u8() != protocol::kCheckReady) missing.push_back(k);
    }
    return missing.empty() ? keys : missing;
  } catch (...) {
    closeLocked();
    return keys;
  }
}

template <typename F>
auto TcpStore::exchange(const char* what, Duration timeout, const std::vector<std::string>& keys, F&& body) {
  std::lock_guard lock(mu_);
  const auto start = Clock::now();
  if (fd_ < 0) connectLocked(this->timeout());
  const auto now = Clock::now();
  Session s(fd_, now + timeout + kReplyGrace, now + timeout);
  try {
    return body(s);
  } catch (const WaitTimedOut&) {
    const auto missing = cancelWaitLocked(keys);
    throw TimeoutError(waitTimeoutMessage(*this, missing, timeout, since(start)));
  } catch (const PeerClosed&) {
    closeLocked();
    throw IoError(fmt::format(
        "the store server at {} closed the connection during {} (did the process hosting it, rank 0, "
        "dsrun or torchrun's agent, exit or stop the store? Its log says why it refused a request, e.g. "
        "a key or value over its limits); the next call reconnects",
        address(), what));
  } catch (const IoTimedOut&) {
    closeLocked();
    throw TimeoutError(
        fmt::format("the store server at {} did not answer {} within {} ms (the {} ms timeout + "
                    "{} ms grace); it may be stopped, overloaded or unreachable. The connection "
                    "was dropped; the next call reconnects",
                    address(), what, since(start).count(), timeout.count(), kReplyGrace.count()));
  } catch (const SysError& e) {
    closeLocked();
    throw IoError(fmt::format("talking to the store server at {} failed during {} (errno: {})", address(),
                              what, errnoText(e.err)));
  } catch (...) {
    closeLocked();
    throw;
  }
}

void TcpStore::setImpl(const std::string& key, const Bytes& value, Duration timeout) {
  exchange("set", timeout, {key}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kSet)).str(wireKey(key)).bytes(value));
  });
}

Bytes TcpStore::getImpl(const std::string& key, Duration timeout) {
  return exchange("get", timeout, {key}, [&](Session& s) {
    // As torch's client: WAIT for the key, then GET it (a c10d server refuses GET of a missing key).
    Writer wait;
    s.send(wait.u8(queryByte(Query::kWait)).strs({wireKey(key)}));
    s.waitReply();
    Writer get;
    s.send(get.u8(queryByte(Query::kGet)).str(wireKey(key)));
    return s.bytes();
  });
}

std::int64_t TcpStore::addImpl(const std::string& key, std::int64_t delta, Duration timeout) {
  return exchange("add", timeout, {key}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kAdd)).str(wireKey(key)).i64(delta));
    return s.i64();
  });
}

Bytes TcpStore::compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                               Duration timeout) {
  return exchange("compareSet", timeout, {key}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kCompareSet)).str(wireKey(key)).bytes(expected).bytes(desired));
    return s.bytes();
  });
}

bool TcpStore::checkImpl(const std::vector<std::string>& keys, Duration timeout) {
  return exchange("check", timeout, keys, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kCheck)).strs(wireKeys(keys)));
    const std::uint8_t r = s.u8();
    if (r != protocol::kCheckReady && r != protocol::kCheckNotReady) {
      throw ProtocolError(fmt::format("the store server at {} answered CHECK with {}", address(), r));
    }
    return r == protocol::kCheckReady;
  });
}

bool TcpStore::deleteKeyImpl(const std::string& key, Duration timeout) {
  return exchange("deleteKey", timeout, {key}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kDeleteKey)).str(wireKey(key)));
    return s.i64() == 1;
  });
}

std::int64_t TcpStore::numKeysImpl(Duration timeout) {
  return exchange("numKeys", timeout, {}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kGetNumKeys)));
    return s.i64();
  });
}

void TcpStore::waitImpl(const std::vector<std::string>& keys, Duration timeout) {
  exchange("wait", timeout, keys, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kWait)).strs(wireKeys(keys)));
    s.waitReply();
  });
}

void TcpStore::appendImpl(const std::string& key, const Bytes& value, Duration timeout) {
  if (dialect_ == Dialect::kTorch1) {
    // torch 1.x has no APPEND: compare_set until no other client got in between.
    for (;;) {
      const Bytes cur = check({key}, timeout) ? get(key, timeout) : Bytes{};
      Bytes next = cur;
      next.insert(next.end(), value.begin(), value.end());
      if (compareSet(key, cur, next, timeout) == next) return;
    }
  }
  exchange("append", timeout, {key}, [&](Session& s) {
    Writer w;
    s.send(w.u8(queryByte(Query::kAppend)).str(wireKey(key)).bytes(value));
  });
}

std::vector<Bytes> TcpStore::multiGetImpl(const std::vector<std::string>& keys, Duration timeout) {
  if (dialect_ == Dialect::kTorch1) return Store::multiGetImpl(keys, timeout);
  return exchange("multiGet", timeout, keys, [&](Session& s) {
    Writer wait;
    s.send(wait.u8(queryByte(Query::kWait)).strs(wireKeys(keys)));
    s.waitReply();
    Writer get;
    s.send(get.u8(queryByte(Query::kMultiGet)).strs(wireKeys(keys)));
    std::vector<Bytes> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) out.push_back(s.bytes());
    return out;
  });
}

void TcpStore::multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                            Duration timeout) {
  if (keys.size() != values.size() || dialect_ == Dialect::kTorch1) {
    return Store::multiSetImpl(keys, values, timeout);  // throws on a size mismatch
  }
  exchange("multiSet", timeout, keys, [&](Session& s) {
    Writer w;
    w.u8(queryByte(Query::kMultiSet)).u64(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) w.str(wireKey(keys[i])).bytes(values[i]);
    s.send(w);
  });
}

}  // namespace ds::store
