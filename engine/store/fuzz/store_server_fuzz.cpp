// Fuzz target: the TcpStore server's wire protocol, as the server sees it.
//
// Each input runs a fresh in-process TcpStoreServer and talks to it over two socketpairs handed in
// with adoptConnection(), so every byte goes through the real epoll loop, dialect detection (torch
// 1.x / 2.x / an older dsperf), parser, handlers, parked waits and replies. The input is a script of records,
// each starting with one control byte:
//   bit 0     the connection (0 or 1)
//   bits 1-2  0: send bytes: u16 little-endian length, then that many bytes (fewer at the end)
//             1: pause: read that connection's replies for up to 5 ms (lets timers and waits fire)
//             2: shut down the connection's sending side (the server sees EOF)
//             3: send torch 2.x's VALIDATE (so the fuzzer gets past it cheaply)
// Afterwards both connections are shut down and their replies drained. Oracles: no crash, leak or
// UB (sanitizers); the server closes every connection once it sees EOF (no hang). c10d replies have
// no framing, so there is no reply-stream oracle beyond that.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/common/log.h"
#include "engine/store/protocol.h"
#include "engine/store/tcp_store_server.h"

namespace {

using namespace ds::store;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "store_server_fuzz: %s\n", what);
  std::abort();
}

struct Client {
  int fd = -1;
  bool shut = false;
  bool eof = false;
  std::string in;  // replies received

  // Reads what is there, waiting up to `ms` for the first byte.
  void drain(int ms) {
    while (!eof) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, ms);
      if (r <= 0) return;
      char buf[65536];
      ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        in.append(buf, static_cast<size_t>(n));
        ms = 0;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) eof = true;  // ECONNRESET counts as closed
      return;
    }
  }

  void write(const char* p, size_t n) {
    while (n > 0 && !shut) {
      ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        p += w;
        n -= static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EAGAIN) {
        drain(1);  // the server may be blocked on sending us replies
        continue;
      }
      return;  // the server closed the connection
    }
  }
};

std::string hello() {
  return protocol::Writer()
      .u8(static_cast<std::uint8_t>(protocol::Query::kValidate))
      .u32(protocol::kValidationMagic)
      .take();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  ds::log::setThreshold(ds::log::Level::kError);  // closed-connection warnings would flood stderr
  TcpStoreServerOptions opts;
  opts.host = "127.0.0.1";
  opts.port = 0;
  opts.jobId = "fuzz";
  // Small limits, so that the fuzzer reaches the limit paths with short inputs.
  opts.maxKeyBytes = 64;
  opts.maxValueBytes = 256;
  opts.stallTimeout = std::chrono::milliseconds(200);
  auto server = TcpStoreServer::start(opts);

  Client clients[2];
  for (auto& c : clients) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) fail("socketpair failed");
    c.fd = sv[0];
    server->adoptConnection(sv[1]);
  }

  const std::string helloFrame = hello();
  size_t i = 0;
  while (i < size) {
    const std::uint8_t ctl = data[i++];
    Client& c = clients[ctl & 1];
    switch ((ctl >> 1) & 3) {
      case 0: {
        size_t len = 0;
        if (i < size) len = data[i++];
        if (i < size) len |= size_t{data[i++]} << 8;
        len = std::min(len, size - i);
        c.write(reinterpret_cast<const char*>(data + i), len);
        i += len;
        break;
      }
      case 1:
        c.drain(5);
        break;
      case 2:
        if (!c.shut) ::shutdown(c.fd, SHUT_WR);
        c.shut = true;
        break;
      case 3:
        c.write(helloFrame.data(), helloFrame.size());
        break;
    }
  }

  // EOF on both; the server must close both connections promptly.
  for (auto& c : clients) {
    if (!c.shut) ::shutdown(c.fd, SHUT_WR);
    c.shut = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& c : clients) {
    while (!c.eof) {
      if (std::chrono::steady_clock::now() > deadline)
        fail("the server did not close a connection after EOF");
      c.drain(100);
    }
    ::close(c.fd);
  }
  server->stop();
  return 0;
}
