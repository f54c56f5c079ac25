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
using protocol::Op;
using protocol::Reply;
using protocol::Writer;

constexpr Duration kFirstBackoff{10};
constexpr Duration kMaxBackoff{1000};
constexpr Duration kConnectAttempt{10000};
constexpr size_t kMaxHelloReply = size_t{64} * 1024;
constexpr size_t kMaxReply = size_t{1} << 31;

// Transport outcomes, turned into user-facing errors by the caller, who knows what was going on.
struct PeerClosed {};
struct IoTimedOut {};
struct SysError {
  int err;
};

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

// Reads one frame's payload. Throws ProtocolError when the announced length is 0 or over maxLen.
std::string readFrame(int fd, Clock::time_point deadline, size_t maxLen, const std::string& from) {
  char header[protocol::kFrameHeaderBytes];
  recvExact(fd, header, sizeof(header), deadline);
  const std::uint32_t len = protocol::decodeLength(header);
  if (len == 0 || len > maxLen) {
    throw ProtocolError(
        fmt::format("the process at {} is not a dsperf store server, or speaks another "
                    "version: it sent a message of {} bytes (bytes {:02x} {:02x} {:02x} {:02x}); "
                    "check MASTER_ADDR/MASTER_PORT",
                    from, len, static_cast<unsigned char>(header[0]), static_cast<unsigned char>(header[1]),
                    static_cast<unsigned char>(header[2]), static_cast<unsigned char>(header[3])));
  }
  std::string payload(len, '\0');
  recvExact(fd, payload.data(), len, deadline);
  return payload;
}

Duration jittered(Duration d) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> f(0.5, 1.5);
  return Duration(
      std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(d.count()) * f(rng))));
}

Duration since(Clock::time_point t) { return std::chrono::duration_cast<Duration>(Clock::now() - t); }

}  // namespace

TcpStore::TcpStore(std::string host, const TcpStoreOptions& options)
    : Store(options.timeout), host_(std::move(host)), options_(options), port_(options.port) {
  if (options_.isServer) {
    TcpStoreServerOptions so;
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

void TcpStore::connectLocked(Duration timeout) {
  closeLocked();
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Duration backoff = kFirstBackoff;
  std::string lastError = "no attempt was made";
  ProgressSchedule progress(start);
  std::optional<Clock::time_point> unresolvedSince;
  const std::string portText = std::to_string(port_);
  const std::string hello = Writer(static_cast<std::uint8_t>(Op::kHello))
                                .u32(protocol::kMagic)
                                .u32(protocol::kVersion)
                                .str(options_.jobId)
                                .finish();
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
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        lastError = fmt::format("socket() failed: {}", errnoText(errno));
        continue;
      }
      try {
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
          if (errno != EINPROGRESS) throw SysError{errno};
          pollUntil(fd, POLLOUT, attemptDeadline);
          int err = 0;
          socklen_t len = sizeof(err);
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) throw SysError{err};
        }
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sendAll(fd, hello, attemptDeadline);
        std::string payload = readFrame(fd, attemptDeadline, kMaxHelloReply, address());
        protocol::Reader r(payload.data(), payload.size());
        const auto type = static_cast<Reply>(r.u8());
        if (type == Reply::kJobMismatch) {
          const std::string serverJob = r.str();
          throw ConfigError(fmt::format(
              "the store at {} belongs to job '{}' but this process is job '{}' (the job id comes from "
              "DS_JOB_ID, "
              "SLURM_JOB_ID or the launcher's run id): a process from another job reached this port. If this "
              "process is a leftover of an earlier run, stop it; otherwise give concurrent jobs different "
              "MASTER_PORTs, or make sure all ranks of one job see the same job id",
              address(), serverJob, options_.jobId));
        }
        if (type == Reply::kError) {
          r.u8();
          throw ProtocolError(fmt::format("the store at {} refused this client: {}", address(), r.str()));
        }
        if (type != Reply::kHelloOk || r.u32() != protocol::kMagic) {
          throw ProtocolError(
              fmt::format("the process at {} is not a dsperf store server (it answered the "
                          "handshake with something else); check MASTER_ADDR/MASTER_PORT",
                          address()));
        }
        fd_ = fd;
        ::freeaddrinfo(res);
        return;
      } catch (const SysError& e) {
        lastError = errnoText(e.err);
      } catch (const PeerClosed&) {
        lastError = "the server closed the connection during the handshake";
      } catch (const IoTimedOut&) {
        lastError = fmt::format("the connection or handshake did not complete within {} s",
                                kConnectAttempt.count() / 1000);
      } catch (...) {
        ::close(fd);
        ::freeaddrinfo(res);
        throw;
      }
      ::close(fd);
    }
    if (res) ::freeaddrinfo(res);
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

TcpStore::Response TcpStore::call(Op op, const std::string& frame, Duration timeout,
                                  const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  const auto start = Clock::now();
  if (fd_ < 0) connectLocked(this->timeout());
  const auto deadline = Clock::now() + timeout + kReplyGrace;
  std::string payload;
  try {
    sendAll(fd_, frame, deadline);
    payload = readFrame(fd_, deadline, kMaxReply, address());
  } catch (const PeerClosed&) {
    closeLocked();
    throw IoError(
        fmt::format("the store server at {} closed the connection during {} (did the process hosting "
                    "it, rank 0 or dsrun, exit or stop the store?); the next call reconnects",
                    address(), protocol::opName(op)));
  } catch (const IoTimedOut&) {
    closeLocked();
    throw TimeoutError(fmt::format(
        "the store server at {} did not answer {} within {} ms (the {} ms timeout + "
        "{} ms grace); it may be stopped, overloaded or unreachable. The connection "
        "was dropped; the next call reconnects",
        address(), protocol::opName(op), since(start).count(), timeout.count(), kReplyGrace.count()));
  } catch (const SysError& e) {
    closeLocked();
    throw IoError(fmt::format("talking to the store server at {} failed during {} (errno: {})", address(),
                              protocol::opName(op), errnoText(e.err)));
  } catch (...) {
    closeLocked();
    throw;
  }
  Response resp{static_cast<Reply>(payload[0]), payload.substr(1)};
  if (resp.type == Reply::kTimeout) {
    protocol::Reader r(resp.payload.data(), resp.payload.size());
    auto missing = r.strs();
    throw TimeoutError(waitTimeoutMessage(*this, missing.empty() ? keys : missing, timeout, since(start)));
  }
  if (resp.type == Reply::kError) {
    protocol::Reader r(resp.payload.data(), resp.payload.size());
    const auto kind = static_cast<protocol::ErrorKind>(r.u8());
    const std::string msg = fmt::format("{} ({}, {})", r.str(), describe(), protocol::opName(op));
    if (kind == protocol::ErrorKind::kLimit) throw ConfigError(msg);
    if (kind == protocol::ErrorKind::kProtocol) closeLocked();  // the server closes it too
    throw ProtocolError(msg);
  }
  return resp;
}

namespace {

Writer request(Op op) { return Writer(static_cast<std::uint8_t>(op)); }

// Throws ProtocolError if the reply is not of the expected type: client and server are out of step.
protocol::Reader expect(const std::string& payload, Reply got, Reply want, const std::string& where) {
  if (got != want) {
    throw ProtocolError(fmt::format("unexpected reply {} (wanted {}) from {}", static_cast<int>(got),
                                    static_cast<int>(want), where));
  }
  return protocol::Reader(payload.data(), payload.size());
}

}  // namespace

void TcpStore::setImpl(const std::string& key, const Bytes& value, Duration timeout) {
  auto r = call(Op::kSet, request(Op::kSet).str(key).bytes(value).finish(), timeout, {key});
  expect(r.payload, r.type, Reply::kOk, describe());
}

Bytes TcpStore::getImpl(const std::string& key, Duration timeout) {
  auto r = call(Op::kGet, request(Op::kGet).str(key).i64(timeout.count()).finish(), timeout, {key});
  return expect(r.payload, r.type, Reply::kValue, describe()).bytes();
}

std::int64_t TcpStore::addImpl(const std::string& key, std::int64_t delta, Duration timeout) {
  auto r = call(Op::kAdd, request(Op::kAdd).str(key).i64(delta).finish(), timeout, {key});
  return expect(r.payload, r.type, Reply::kInt, describe()).i64();
}

Bytes TcpStore::compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                               Duration timeout) {
  auto r = call(Op::kCompareSet, request(Op::kCompareSet).str(key).bytes(expected).bytes(desired).finish(),
                timeout, {key});
  return expect(r.payload, r.type, Reply::kValue, describe()).bytes();
}

bool TcpStore::checkImpl(const std::vector<std::string>& keys, Duration timeout) {
  auto r = call(Op::kCheck, request(Op::kCheck).strs(keys).finish(), timeout, keys);
  return expect(r.payload, r.type, Reply::kBool, describe()).u8() != 0;
}

bool TcpStore::deleteKeyImpl(const std::string& key, Duration timeout) {
  auto r = call(Op::kDelete, request(Op::kDelete).str(key).finish(), timeout, {key});
  return expect(r.payload, r.type, Reply::kBool, describe()).u8() != 0;
}

std::int64_t TcpStore::numKeysImpl(Duration timeout) {
  auto r = call(Op::kNumKeys, request(Op::kNumKeys).finish(), timeout, {});
  return expect(r.payload, r.type, Reply::kInt, describe()).i64();
}

void TcpStore::waitImpl(const std::vector<std::string>& keys, Duration timeout) {
  auto r = call(Op::kWait, request(Op::kWait).strs(keys).i64(timeout.count()).finish(), timeout, keys);
  expect(r.payload, r.type, Reply::kOk, describe());
}

void TcpStore::appendImpl(const std::string& key, const Bytes& value, Duration timeout) {
  auto r = call(Op::kAppend, request(Op::kAppend).str(key).bytes(value).finish(), timeout, {key});
  expect(r.payload, r.type, Reply::kOk, describe());
}

std::vector<Bytes> TcpStore::multiGetImpl(const std::vector<std::string>& keys, Duration timeout) {
  auto r =
      call(Op::kMultiGet, request(Op::kMultiGet).strs(keys).i64(timeout.count()).finish(), timeout, keys);
  return expect(r.payload, r.type, Reply::kValues, describe()).bytesList();
}

void TcpStore::multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                            Duration timeout) {
  if (keys.size() != values.size()) return Store::multiSetImpl(keys, values, timeout);  // throws
  auto r = call(Op::kMultiSet, request(Op::kMultiSet).strs(keys).bytesList(values).finish(), timeout, keys);
  expect(r.payload, r.type, Reply::kOk, describe());
}

}  // namespace ds::store
