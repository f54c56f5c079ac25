// Our store and real PyTorch (label torch): a torch client on our server, torch ranks forming a gloo
// process group through our server (as through torchrun's agent store), and our client on torch's
// TCPStore server. Skipped, with the reason, where /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "engine/common/error.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tcp_store_server.h"
#include "engine/store/tests/torch/torch_test_util.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using ds::testing::cleanOptions;
using ds::testing::Process;
using ds::testing::readFile;
using ds::testing::run;
namespace tt = ds::testing::torch;

std::unique_ptr<TcpStoreServer> startServer() {
  TcpStoreServerOptions o;
  o.port = 0;
  o.jobId = "torch-test";
  return TcpStoreServer::start(o);
}

std::unique_ptr<TcpStore> client(int port, const std::string& job = "torch-test") {
  TcpStoreOptions o;
  o.port = port;
  o.timeout = 10s;
  o.jobId = job;
  return std::make_unique<TcpStore>("127.0.0.1", o);
}

TEST(TorchStoreTest, ATorchClientUsesOurServer) {
  DS_REQUIRE_TORCH();
  auto server = startServer();
  auto ours = client(server->port());
  ours->set("from_dsperf", toBytes("hi"));
  auto r = run({tt::python(), tt::script("torch_client.py"), "127.0.0.1", std::to_string(server->port())},
               cleanOptions(120s));
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("OK ", 0), 0u) << r.out;
  EXPECT_EQ(toString(ours->get("from_torch", 1s)), "hello");  // the same keys on both sides
  EXPECT_EQ(toString(ours->get("cnt", 1s)), "5");
}

TEST(TorchStoreTest, TorchRanksFormAGlooGroupThroughOurServerWithTcpAndEnvInit) {
  DS_REQUIRE_TORCH();
  for (const char* mode : {"tcp", "env"}) {
    auto server = startServer();
    auto r = run({tt::python(), tt::script("torch_pg.py"), mode, "127.0.0.1", std::to_string(server->port())},
                 cleanOptions(120s, {{"GLOO_SOCKET_IFNAME", "lo"}}));
    ASSERT_EQ(r.exitCode, 0) << mode << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
    auto ours = client(server->port(), "");
    if (r.out.find("OK 1.") != std::string::npos) {
      // torch 1.x's store-based barrier counted both ranks, under the agent store's per-attempt prefix.
      EXPECT_EQ(toString(ours->get("/worker/attempt_0/default_pg/store_based_barrier_key:1", 1s)), "2") << mode;
    } else {
      // torch 2.x has no init barrier by default and no prefix: gloo's ranks left their addresses.
      EXPECT_GE(ours->numKeys(), 2) << mode;
    }
  }
}

// Runs torch_server.py; the port it printed, or -1.
int startTorchServer(Process& p) {
  const auto deadline = std::chrono::steady_clock::now() + ds::testing::scaled(60s);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string out = readFile(p.stdoutPath());
    if (auto at = out.find("PORT "); at != std::string::npos && out.find('\n', at) != std::string::npos) {
      return std::stoi(out.substr(at + 5));
    }
    std::this_thread::sleep_for(50ms);
  }
  return -1;
}

TEST(TorchStoreTest, OurClientUsesTorchsServer) {
  DS_REQUIRE_TORCH();
  Process torchServer({tt::python(), tt::script("torch_server.py")}, cleanOptions(300s));
  const int port = startTorchServer(torchServer);
  ASSERT_GT(port, 0) << readFile(torchServer.stderrPath());
  auto c = client(port, "job-1");
  EXPECT_NE(c->dialect(), protocol::Dialect::kUnknown);
  EXPECT_EQ(toString(c->get("from_torch", 2s)), "hello");  // torch's key prefix is ours
  c->set("k", toBytes("v"));
  EXPECT_EQ(toString(c->get("k")), "v");
  EXPECT_EQ(c->add("n", 2), 2);
  EXPECT_EQ(c->add("n", -5), -3);
  EXPECT_EQ(toString(c->compareSet("cas", {}, toBytes("a"))), "a");
  EXPECT_EQ(toString(c->compareSet("cas", toBytes("zz"), toBytes("b"))), "a");
  EXPECT_EQ(toString(c->compareSet("cas", toBytes("a"), toBytes("b"))), "b");
  EXPECT_TRUE(c->check({"k", "n"}));
  EXPECT_FALSE(c->check({"k", "missing"}));
  const auto before = c->numKeys();
  c->set("tmp", {});
  EXPECT_EQ(c->numKeys(), before + 1);
  EXPECT_TRUE(c->deleteKey("tmp"));
  EXPECT_FALSE(c->deleteKey("tmp"));
  c->multiSet({"m1", "m2"}, {toBytes("1"), toBytes("2")});
  auto got = c->multiGet({"m1", "m2"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(toString(got[1]), "2");
  c->append("app", toBytes("ab"));
  c->append("app", toBytes("cd"));
  EXPECT_EQ(toString(c->get("app")), "abcd");
  // A wait that runs out is c10d's wait timeout; the client recovers on a new connection.
  try {
    c->wait({"never"}, 300ms);
    FAIL();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("wait timeout after 300ms, keys: never"), std::string::npos)
        << e.what();
  }
  // A waiter woken by another client.
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    client(port, "job-1")->set("late", toBytes("x"));
  });
  EXPECT_EQ(toString(c->get("late", 5s)), "x");
  setter.join();
  // Another job's client is refused by the job-id key even on torch's server.
  EXPECT_THROW(client(port, "job-2"), ConfigError);
}

TEST(TorchStoreTest, DsperfRanksRendezvousOnTorchsServerAsUnderTorchrunsAgent) {
  DS_REQUIRE_TORCH();
  Process torchServer({tt::python(), tt::script("torch_server.py")}, cleanOptions(300s));
  const int port = startTorchServer(torchServer);
  ASSERT_GT(port, 0) << readFile(torchServer.stderrPath());
  const std::string dsbench = ds::testing::binDir() + "/dsbench";
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Process>(std::vector<std::string>{dsbench, "world"},
                                              cleanOptions(120s, {{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                                  {"TORCHELASTIC_RESTART_COUNT", "0"},
                                                                  {"TORCHELASTIC_RUN_ID", "agent-test"},
                                                                  {"MASTER_ADDR", "127.0.0.1"},
                                                                  {"MASTER_PORT", std::to_string(port)},
                                                                  {"RANK", std::to_string(r)},
                                                                  {"LOCAL_RANK", std::to_string(r)},
                                                                  {"WORLD_SIZE", "2"},
                                                                  {"LOCAL_WORLD_SIZE", "2"},
                                                                  {"DEEPSPEED_TIMEOUT", "1"}})));
  }
  for (int r = 0; r < 2; ++r) {
    auto res = ranks[r]->wait();
    EXPECT_EQ(res.exitCode, 0) << "rank " << r << "\n" << res.out << res.err;
  }
  // The ranks' keys are under torch's per-attempt prefix, in torch's store.
  auto c = client(port, "");
  EXPECT_TRUE(c->check({"/worker/attempt_0/init/rank/0", "/worker/attempt_0/init/rank/1"}));
}

}  // namespace
}  // namespace ds::store
