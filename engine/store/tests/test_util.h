// Helpers shared by the store tests.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "engine/store/store.h"
#include "engine/testing/subprocess.h"

namespace ds::store::testing {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Many clients need many sockets: take the hard limit.
inline void raiseFdLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// Raw sockets, for tests that speak the wire protocol byte by byte.
inline int rawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

inline void rawSend(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// True when the peer closes fd within `within` (data before the close is read and dropped).
inline bool closedWithin(int fd, Duration within) {
  const auto deadline = Clock::now() + within;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<Duration>(deadline - Clock::now()).count());
    if (::poll(&p, 1, std::max(left, 1)) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// A fake server on an ephemeral loopback port that runs `serve` on each of its first `connections`
// connections, one after the other, and closes it.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int)> serve, int connections = 1) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(lfd_, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, connections, serve = std::move(serve)] {
      for (int i = 0; i < connections; ++i) {
        int fd = ::accept(lfd_, nullptr, nullptr);
        if (fd < 0) return;
        serve(fd);
        ::close(fd);
      }
    });
  }
  ~FakeServer() {
    ::shutdown(lfd_, SHUT_RDWR);  // unblocks accept() if nobody came
    thread_.join();
    ::close(lfd_);
  }
  int port() const { return port_; }

 private:
  int lfd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Reads exactly n bytes (or fewer at EOF).
inline std::string rawRecv(int fd, size_t n, Duration within = std::chrono::seconds(5)) {
  std::string out;
  const auto deadline = Clock::now() + within;
  while (out.size() < n && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

using ds::testing::TempDir;
using ds::testing::unusedPort;

}  // namespace ds::store::testing
