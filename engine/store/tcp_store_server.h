// The TcpStore server: one thread running an epoll loop over non-blocking sockets (no thread per
// client), so one process serves thousands of ranks. It runs inside rank 0 (TcpStore with isServer)
// or standalone (dsrun).
//
// It speaks PyTorch c10d's TCPStore protocol (protocol.h), both torch 1.x's and 2.x's dialect, chosen
// per connection by its first bytes, so torch ranks, torchrun and dsperf ranks can share it.
// A WAIT is parked until its keys are set; as in c10d the client, not the server, times it out.
// A client that sends a malformed or oversized request, a query this server does not implement, or
// another job's id (protocol::kJobIdKey), or that leaves a request half sent for stallTimeout, is
// disconnected with a warning in the log (the protocol has no error reply); the others are unaffected.
// A dsperf client from before the c10d protocol gets an error in its own framing, then is closed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/store/store.h"

namespace ds::store {

struct TcpStoreServerOptions {
  // Address to listen on; "" = every interface: [::] dual stack, or 0.0.0.0 where IPv6 is missing.
  std::string host = "";
  // 0 = an ephemeral port (read it back with port()).
  int port = 29500;
  // Preset as protocol::kJobIdKey; clients that present another job id are refused (DESIGN.md
  // "Isolation"). Empty: no job id is preset or checked.
  std::string jobId = "default";
  int backlog = 4096;
  std::size_t maxKeyBytes = std::size_t{4} * 1024;
  std::size_t maxValueBytes = std::size_t{64} * 1024 * 1024;
  // A client that has sent part of a request and then sends nothing for this long is disconnected.
  Duration stallTimeout = std::chrono::seconds(30);
  // What to do when `port` is taken; empty: stop the holder, choose another MASTER_PORT or use
  // `dsrun --standalone`.
  std::string portTakenAdvice;
};

class TcpStoreServer {
 public:
  // Binds, listens and starts the event thread. Throws IoError (in c10d's words, with what to do)
  // when the address cannot be bound, e.g. the port is taken.
  static std::unique_ptr<TcpStoreServer> start(const TcpStoreServerOptions& options);
  // Stops (see stop()).
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The bound port (the real one when options.port was 0).
  int port() const;
  // "[::]:29500" or "0.0.0.0:29500": where it listens.
  std::string address() const;
  // Connected clients whose dialect is known (they sent at least their first request).
  std::size_t numClients() const;
  // Closes the listener and every connection (waiting clients see the connection close) and joins
  // the event thread. Idempotent; thread-safe; must not be called from the event thread.
  void stop();

  // Serves an already connected stream socket as if accept() had returned it; the server owns `fd`
  // from then on. For tests and the fuzzer (engine/store/fuzz), which hand it one end of a
  // socketpair so that every byte goes through the real receive, parse and reply path. Thread-safe.
  void adoptConnection(int fd, std::string peer = "socketpair");

  class Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::store
