// TcpStore under faults: no server, a server that stops, another job's client, garbage on the wire,
// a taken port, a server that never answers, peers that are not c10d stores (HTTP, silent, an older
// dsperf).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "engine/common/error.h"
#include "engine/store/protocol.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tcp_store_server.h"
#include "engine/store/tests/test_util.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::closedWithin;
using testing::FakeServer;
using testing::rawConnect;
using testing::rawRecv;
using testing::rawSend;
using testing::secondsSince;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::unique_ptr<TcpStoreServer> startServer(const std::string& job = "default", Duration stall = 30s,
                                            size_t maxValue = 64 * 1024 * 1024) {
  TcpStoreServerOptions o;
  o.port = 0;
  o.jobId = job;
  o.stallTimeout = stall;
  o.maxValueBytes = maxValue;
  return TcpStoreServer::start(o);
}

std::unique_ptr<TcpStore> client(int port, Duration timeout = 5s, const std::string& job = "default") {
  TcpStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  o.jobId = job;
  return std::make_unique<TcpStore>("127.0.0.1", o);
}

// The ProtocolError a client meets at port (a test failure, and "", when it connects instead).
std::string protocolErrorOf(int port, Duration timeout) {
  try {
    client(port, timeout);
  } catch (const ProtocolError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the client connected to port " << port;
  return "";
}

// torch 2.x's VALIDATE, the first bytes of a 2.x client.
std::string validate(std::uint32_t magic = protocol::kValidationMagic) {
  return protocol::Writer().u8(static_cast<std::uint8_t>(protocol::Query::kValidate)).u32(magic).take();
}

void expectServerStillServes(int port) {
  auto c = client(port);
  c->set("alive", toBytes("yes"));
  EXPECT_EQ(toString(c->get("alive")), "yes");
}

TEST(TcpStoreFaultTest, ConnectToAPortNobodyListensOnTimesOutWithC10dText) {
  const int port = testing::unusedPort();
  const auto start = Clock::now();
  try {
    client(port, 700ms);
    FAIL() << "connected to nothing";
  } catch (const TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(
        contains(msg, fmt::format("The client socket has timed out after 700ms while trying to connect to "
                                  "(127.0.0.1, {}).",
                                  port)))
        << msg;
    EXPECT_TRUE(contains(msg, "MASTER_ADDR/MASTER_PORT")) << msg;
    EXPECT_TRUE(contains(msg, "Connection refused")) << msg;
  }
  EXPECT_GE(secondsSince(start), 0.65);
  EXPECT_LT(secondsSince(start), 0.7 + 0.5);
}

TEST(TcpStoreFaultTest, ConnectRetriesUntilTheServerComesUp) {
  const int port = testing::unusedPort();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(400ms);
    TcpStoreServerOptions o;
    o.port = port;
    server = TcpStoreServer::start(o);
  });
  auto c = client(port, 5s);
  c->set("k", toBytes("v"));
  starter.join();
  EXPECT_EQ(toString(c->get("k")), "v");
}

TEST(TcpStoreFaultTest, AnotherJobsClientIsRefusedOnBothSides) {
  auto server = startServer("job-A");
  const auto start = Clock::now();
  try {
    client(server->port(), 5s, "job-B");
    FAIL() << "a job-B client joined job A";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "belongs to job 'job-A' but this process is job 'job-B'")) << msg;
    EXPECT_TRUE(contains(msg, fmt::format("127.0.0.1:{}", server->port()))) << msg;
  }
  EXPECT_LT(secondsSince(start), 2.0);  // refused at once, not retried
  // The server closed the refused connection too (it logs why).
  const auto until = Clock::now() + 2s;
  while (server->numClients() != 0 && Clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server->numClients(), 0u);
  auto good = client(server->port(), 5s, "job-A");
  good->set("k", toBytes("v"));
  EXPECT_EQ(server->numClients(), 1u);
}

TEST(TcpStoreFaultTest, ClientsWaitingWhenTheServerStopsFailPromptly) {
  auto server = startServer();
  const int port = server->port();
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(client(port, 10s));
  std::vector<std::string> errors(4);
  std::vector<double> took(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const auto start = Clock::now();
      try {
        if (i % 2) {
          clients[i]->wait({"never"});
        } else {
          clients[i]->get("never");
        }
      } catch (const IoError& e) {
        errors[i] = e.what();
      }
      took[i] = secondsSince(start);
    });
  }
  std::this_thread::sleep_for(300ms);
  server->stop();
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(
        contains(errors[i], fmt::format("the store server at 127.0.0.1:{} closed the connection", port)))
        << errors[i];
    EXPECT_LT(took[i], 2.0);
  }
  // The next call reconnects, finds no server, and gives up within the store's timeout.
  clients[0]->setTimeout(400ms);
  const auto start = Clock::now();
  EXPECT_THROW(clients[0]->set("x", {}), TimeoutError);
  EXPECT_LT(secondsSince(start), 1.5);
}

TEST(TcpStoreFaultTest, OperationAfterTheServerStoppedIsAnIoError) {
  auto server = startServer();
  auto c = client(server->port(), 1s);
  c->set("a", {});
  server->stop();
  EXPECT_THROW(c->get("a"), IoError);
}

TEST(TcpStoreFaultTest, ServerThatNeverAnswersIsBoundedByTimeoutPlusGrace) {
  // A fake server: answers torch 2.x's handshake (VALIDATE, PING), then reads requests and never
  // replies (a frozen process).
  FakeServer fake([](int fd) {
    const std::string hello = rawRecv(fd, 10);
    if (hello.size() == 10) ::send(fd, hello.data() + 6, 4, MSG_NOSIGNAL);  // the nonce back
    closedWithin(fd, 10s);                                                  // until the client gives up
  });
  auto c = client(fake.port(), 2s, "");  // no job-id check: the fake would not answer it
  EXPECT_EQ(c->dialect(), protocol::Dialect::kTorch2);
  const auto start = Clock::now();
  try {
    c->numKeys(300ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(contains(e.what(), "did not answer numKeys")) << e.what();
  }
  const double took = secondsSince(start);
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 0.3 + TcpStore::kReplyGrace.count() / 1000.0 + 0.5);
  c.reset();
}

TEST(TcpStoreFaultTest, AWaitThatRunsOutNamesTheKeysAndTheConnectionRecovers) {
  auto server = startServer();
  auto c = client(server->port());
  try {
    c->wait({"never", "set"}, 200ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(contains(e.what(), "wait timeout after 200ms, keys: never, set")) << e.what();
  }
  c->set("k", toBytes("v"));  // a new connection: the old one still had the wait parked
  EXPECT_EQ(toString(c->get("k")), "v");
}

TEST(TcpStoreFaultTest, ATorch1ClientMayGoOnAfterItsWaitTimedOut) {
  // torch 1.x has no CANCEL_WAIT: after its own timeout it sends the next request on the same
  // connection. The server drops the abandoned wait and answers.
  auto server = startServer();
  int fd = rawConnect(server->port());
  rawSend(fd, protocol::Writer().u8(5).strs({"/never"}).take());  // 1.x WAIT
  EXPECT_EQ(rawRecv(fd, 1, 300ms), "");                           // parked
  rawSend(fd, protocol::Writer().u8(6).take());                   // 1.x GETNUMKEYS
  EXPECT_EQ(rawRecv(fd, 8, 2s).size(), 8u);
  auto c = client(server->port());
  c->set("never", {});  // the old wait must not answer now: the next reply is the one asked for
  rawSend(fd, protocol::Writer().u8(6).take());
  const std::string reply = rawRecv(fd, 9, 500ms);
  EXPECT_EQ(reply.size(), 8u);
  ::close(fd);
}

TEST(TcpStoreFaultTest, GarbageBytesCloseThatClientOnly) {
  auto server = startServer();
  auto bystander = client(server->port());
  bystander->set("before", {});
  int fd = rawConnect(server->port());
  rawSend(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // 'G' is no torch 1.x query type
  EXPECT_TRUE(closedWithin(fd, 2s));
  ::close(fd);
  EXPECT_TRUE(bystander->check({"before"}));
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, EnormousKeyLengthClosesThatClientOnly) {
  auto server = startServer();
  int fd = rawConnect(server->port());
  rawSend(fd, validate());
  rawSend(fd, std::string("\x01\xff\xff\xff\xff\xff\xff\xff\x7f", 9));  // SET, key of 2^63 bytes
  EXPECT_TRUE(closedWithin(fd, 2s));
  ::close(fd);
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, UnknownQueryTypeClosesThatClientOnly) {
  auto server = startServer();
  int fd = rawConnect(server->port());
  rawSend(fd, validate());
  rawSend(fd, std::string("\xc8", 1));  // query type 200
  EXPECT_TRUE(closedWithin(fd, 2s));
  ::close(fd);
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, WrongMagicIsReadAsATorch1SetAndRefused) {
  auto server = startServer();
  int fd = rawConnect(server->port());
  // Byte 0 without the magic is torch 1.x's SET; its key length (0x12345678) is over the limit.
  rawSend(fd, validate(0x12345678) + std::string(4, '\0'));
  EXPECT_TRUE(closedWithin(fd, 2s));
  ::close(fd);
  EXPECT_EQ(server->numClients(), 0u);
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, ClientTalkingToAnHttpServerGetsAProtocolErrorShowingItsReply) {
  FakeServer fake([](int fd) {
    rawRecv(fd, 10, 1s);
    std::string http = "HTTP/1.1 400 Bad Request\r\n\r\n";
    ::send(fd, http.data(), http.size(), MSG_NOSIGNAL);
    closedWithin(fd, 5s);
  });
  const auto start = Clock::now();
  const std::string what = protocolErrorOf(fake.port(), 3s);
  EXPECT_TRUE(contains(what, "is not a PyTorch c10d TCPStore server")) << what;
  EXPECT_TRUE(contains(what, "answered torch's handshake with HTTP (\"HTTP/1.1 400 Bad Request\")"))
      << what;
  EXPECT_LT(secondsSince(start), 2.0);  // at once, not at the timeout
}

TEST(TcpStoreFaultTest, APeerAnsweringOtherBytesGetsAProtocolErrorCountingThem) {
  FakeServer fake([](int fd) {
    rawRecv(fd, 10, 1s);
    rawSend(fd, std::string("\x07\x00\x00\x00\x00\x01", 6));  // not the PING nonce
    closedWithin(fd, 5s);
  });
  const auto start = Clock::now();
  const std::string what = protocolErrorOf(fake.port(), 3s);
  EXPECT_TRUE(contains(what, "with 6 bytes that are not a store reply (\"\\x07\\x00\\x00\\x00\\x00\\x01\";"))
      << what;
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(TcpStoreFaultTest, ASilentPeerGivesAProtocolErrorWithinTheConnectTimeout) {
  // An older dsperf server (it waits for a 13 MB frame), a hung process or a service that waits for
  // more input all look like this.
  FakeServer fake([](int fd) { closedWithin(fd, 10s); });
  const auto start = Clock::now();
  const std::string what = protocolErrorOf(fake.port(), 1s);
  EXPECT_TRUE(contains(what, "did not answer torch's handshake (VALIDATE, PING) within"))
      << what;
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(TcpStoreFaultTest, APeerThatClosesEveryConnectionIsNotAStore) {
  std::atomic<int> accepted{0};
  {
    FakeServer closer(
        [&](int fd) {
          ++accepted;
          rawRecv(fd, 1, 1s);
        },
        2);
    const std::string what = protocolErrorOf(closer.port(), 3s);
    EXPECT_TRUE(
        contains(what, "closed the connection on torch 2.x's handshake and on torch 1.x's GETNUMKEYS"))
        << what;
  }
  EXPECT_EQ(accepted.load(), 2);
}

TEST(TcpStoreFaultTest, AnOlderDsperfClientGetsAnErrorInItsOwnFraming) {
  auto server = startServer();
  int fd = rawConnect(server->port());
  // The hello of dsperf's own protocol: u32 BE length, 0x01, "DSST", version, job id.
  rawSend(fd, std::string("\x00\x00\x00\x14\x01"
                          "DSST"
                          "\x00\x00\x00\x01"
                          "\x00\x00\x00\x07"
                          "default",
                          24));
  const std::string reply = rawRecv(fd, 4096, 2s);
  ASSERT_GE(reply.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(reply[4]), 108);  // its kError reply type
  EXPECT_TRUE(contains(reply, "this dsperf client is older")) << reply;
  EXPECT_TRUE(closedWithin(fd, 2s));
  ::close(fd);
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, HalfSentMessageIsDroppedAfterTheStallTimeout) {
  auto server = startServer("default", 300ms);
  int silent = rawConnect(server->port());  // never sends: torch clients may open a connection early
  int fd = rawConnect(server->port());
  rawSend(fd, validate());
  rawSend(fd, std::string("\x01\x64\x00\x00\x00\x00\x00\x00\x00"
                          "ab",
                          11));  // SET, 100-byte key, 2 sent
  const auto start = Clock::now();
  EXPECT_TRUE(closedWithin(fd, 3s));
  EXPECT_GE(secondsSince(start), 0.25);
  ::close(fd);
  EXPECT_FALSE(closedWithin(silent, 200ms));
  ::close(silent);
  expectServerStillServes(server->port());
}

TEST(TcpStoreFaultTest, ValueOverTheLimitClosesTheConnectionAndTheNextCallReconnects) {
  auto server = startServer("default", 30s, 1024);
  auto c = client(server->port());
  c->set("big", Bytes(4096));  // SET has no reply: the refusal shows on the next call
  try {
    c->check({"big"});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_TRUE(contains(e.what(), "closed the connection during check")) << e.what();
  }
  c->set("small", Bytes(100));
  EXPECT_EQ(c->get("small").size(), 100u);
  EXPECT_FALSE(c->check({"big"}));
  c->set(std::string(5000, 'k'), {});  // a key over the 4 KiB limit
  EXPECT_THROW(c->numKeys(), IoError);
  EXPECT_TRUE(c->check({"small"}));
}

TEST(TcpStoreFaultTest, PortInUseGivesTheC10dBindMessage) {
  auto first = startServer();
  TcpStoreServerOptions o;
  o.port = first->port();
  try {
    TcpStoreServer::start(o);
    FAIL() << "bound a taken port";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(
        contains(msg, fmt::format("The server socket has failed to bind to [::]:{} (errno: 98 - Address "
                                  "already in use).",
                                  first->port())))
        << msg;
    EXPECT_TRUE(contains(msg, fmt::format("ss -ltnp 'sport = :{}'", first->port()))) << msg;
  }
  TcpStoreOptions so;
  so.port = first->port();
  so.isServer = true;
  so.timeout = 1s;
  EXPECT_THROW(TcpStore("127.0.0.1", so), IoError);
}

TEST(TcpStoreFaultTest, StopIsIdempotentAndCountsClients) {
  auto server = startServer();
  {
    auto a = client(server->port());
    auto b = client(server->port());
    EXPECT_EQ(server->numClients(), 2u);
  }
  server->stop();
  server->stop();
  EXPECT_EQ(server->numClients(), 0u);
}

}  // namespace
}  // namespace ds::store

namespace ds::store {
namespace {

// A typo in MASTER_ADDR fails after the resolve timeout (30 s by default), not after the whole
// store timeout, and names the host and the resolver's error.
TEST(TcpStoreFaultTest, AnUnresolvableHostFailsAfterTheResolveTimeout) {
  TcpStoreOptions o;
  o.port = testing::unusedPort();
  o.timeout = std::chrono::minutes(10);
  o.resolveTimeout = 300ms;
  try {
    TcpStore s("no-such-host.invalid", o);
    FAIL() << "connected to a host that does not exist";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "cannot resolve the store's host name 'no-such-host.invalid'")) << msg;
    EXPECT_TRUE(contains(msg, "MASTER_ADDR")) << msg;
  }
}

}  // namespace
}  // namespace ds::store
