// The TCP rendezvous store client (c10d TCPStore), optionally hosting the server (rank 0).
//
// Wire: PyTorch's TCPStore protocol (protocol.h), so it talks to our server, to a torch 1.x or 2.x
// TCPStore server and to torchrun's agent store. On connect it sends torch 2.x's VALIDATE and PING;
// a server that closes the connection on that gets torch 1.x's dialect (no handshake) instead. Keys
// carry torch's "/" prefix on the wire, so a torch rank reading key "x" sees what we set as "x".
// After the handshake the client checks the job id (protocol::kJobIdKey) with compare_set.
//
// Blocking and threads: one connection per TcpStore, guarded by a mutex, so calls from several
// threads are safe but run one at a time (a long wait() delays the other threads' calls). Use one
// TcpStore per thread for concurrent waits.
//
// Bounded waits: the client times every wait itself (c10d servers never do) and bounds every other
// reply by the timeout plus kReplyGrace, so a dead or stopped server gives an IoError/TimeoutError
// rather than a hang. After such a failure the connection is dropped and the next call reconnects
// (within the store's timeout).
#pragma once

#include <memory>
#include <mutex>

#include "engine/store/protocol.h"
#include "engine/store/store.h"
#include "engine/store/tcp_store_server.h"

namespace ds::store {

struct TcpStoreOptions {
  int port = 29500;
  // Start a TcpStoreServer in this object (rank 0), listening on all interfaces. With port 0 it
  // takes a free port; read it back with port().
  bool isServer = false;
  // Where the hosted server listens: "" every interface, or one address (127.0.0.1 when every rank
  // runs on this host, so that nothing outside can reach the job's store).
  std::string serverHost;
  // Must equal the job id already in the store; a mismatch is refused (ConfigError) on both sides.
  // Empty: no check (a plain c10d client).
  std::string jobId = "default";
  // The default timeout of every operation, and the connect timeout.
  Duration timeout = kDefaultTimeout;
  // How long the host name may keep failing to resolve before the connect gives up (a typo in
  // MASTER_ADDR fails in seconds, not after the whole timeout). At most `timeout`.
  Duration resolveTimeout = std::chrono::seconds(30);
  // What to do when the server's port is taken (replaces the default advice, e.g. under srun).
  std::string portTakenAdvice;
};

class TcpStore : public Store {
 public:
  // How much longer than an operation's timeout the client waits for the server's reply.
  static constexpr Duration kReplyGrace{2000};

  // Connects (and with isServer, first starts the server). Blocks up to options.timeout, logging a
  // progress line at 10 s, 30 s, 60 s and then every minute while the server cannot be reached.
  // Throws IoError when the server cannot bind, TimeoutError when the connect times out (c10d's
  // text), ConfigError on a job-id mismatch or when the host does not resolve within
  // options.resolveTimeout, ProtocolError when the peer is not a c10d store (an HTTP server, a dsperf
  // from before the c10d protocol, ...): within options.timeout, never later.
  explicit TcpStore(std::string host, const TcpStoreOptions& options = {});
  ~TcpStore() override;

  const std::string& host() const { return host_; }
  // The server's port: the real one when isServer with port 0.
  int port() const { return port_; }
  // The hosted server, or nullptr.
  TcpStoreServer* server() { return server_.get(); }
  // The dialect the server answered in (kTorch2 for our server).
  protocol::Dialect dialect() const { return dialect_; }
  std::string describe() const override;

 protected:
  void setImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  Bytes getImpl(const std::string& key, Duration timeout) override;
  std::int64_t addImpl(const std::string& key, std::int64_t delta, Duration timeout) override;
  Bytes compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                       Duration timeout) override;
  bool checkImpl(const std::vector<std::string>& keys, Duration timeout) override;
  bool deleteKeyImpl(const std::string& key, Duration timeout) override;
  std::int64_t numKeysImpl(Duration timeout) override;
  void waitImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void appendImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  std::vector<Bytes> multiGetImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                    Duration timeout) override;

 private:
  class Session;
  // Runs `body` on the connection (connecting first if needed) under the lock. Transport failures
  // drop the connection and become IoError/TimeoutError naming `what`; a wait that runs out becomes
  // c10d's wait-timeout TimeoutError naming `keys`.
  template <typename F>
  auto exchange(const char* what, Duration timeout, const std::vector<std::string>& keys, F&& body);
  void connectLocked(Duration timeout);
  // Connects one socket and settles the dialect; returns the fd. Throws the transport outcomes
  // (retried by connectLocked) or ProtocolError.
  int handshake(int fd, std::chrono::steady_clock::time_point deadline);
  void checkJobIdLocked(Duration timeout);
  // After a wait ran out: the keys still missing (protocol permitting); keeps or drops the connection.
  std::vector<std::string> cancelWaitLocked(const std::vector<std::string>& keys);
  void closeLocked();
  std::string address() const;
  std::uint8_t queryByte(protocol::Query q) const;

  std::string host_;
  TcpStoreOptions options_;
  int port_;
  std::unique_ptr<TcpStoreServer> server_;
  std::mutex mu_;
  int fd_ = -1;
  protocol::Dialect dialect_ = protocol::Dialect::kUnknown;
  bool jobChecked_ = false;
};

}  // namespace ds::store
