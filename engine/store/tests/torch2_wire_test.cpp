// The torch 2.x dialect against byte conversations recorded from a real torch 2.x (fixtures/, see
// tests/torch/record_fixtures.py), so that CI without torch 2.x still checks it:
//  - torch2_client.txt: a torch 2.x client and torch 2.x server. We replay the client's bytes to our
//    server and expect the torch server's replies, byte for byte.
//  - torch2_our_client.txt: our client and a torch 2.x server. A fake server expects our client's
//    bytes as recorded (torch accepted them) and answers with the torch server's recorded replies.
// Fixture lines: "# comment", "C<conn> <hex>" (client to server), "S<conn> <hex>" (server to client),
// in the order the wire tap saw them.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "engine/common/error.h"
#include "engine/store/protocol.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tcp_store_server.h"
#include "engine/store/tests/test_util.h"
#include "engine/testing/paths.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using testing::rawConnect;
using testing::rawRecv;
using testing::rawSend;

struct Chunk {
  bool fromClient = false;
  int conn = 0;
  std::string bytes;
};

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

std::string hex(const std::string& b) {
  std::string out;
  for (unsigned char ch : b) out += fmt::format("{:02x}", ch);
  return out;
}

// The fixture's chunks, consecutive ones of the same direction and connection merged.
std::vector<Chunk> readFixture(const std::string& name) {
  const std::string path = std::string(DS_STORE_FIXTURES) + "/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Chunk> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.find(' ');
    Chunk c{line[0] == 'C', std::stoi(line.substr(1, sp - 1)), unhex(line.substr(sp + 1))};
    if (!out.empty() && out.back().fromClient == c.fromClient && out.back().conn == c.conn) {
      out.back().bytes += c.bytes;
    } else {
      out.push_back(std::move(c));
    }
  }
  return out;
}

TEST(Torch2Wire, OurServerAnswersATorch2ClientAsTorchsServerDid) {
  const auto chunks = readFixture("torch2_client.txt");
  ASSERT_FALSE(chunks.empty());
  TcpStoreServerOptions o;
  o.port = 0;
  o.jobId = "";  // a plain c10d server: no job-id key, so GETNUMKEYS counts what torch's did
  auto server = TcpStoreServer::start(o);
  std::map<int, int> fds;
  size_t replies = 0;
  for (const auto& c : chunks) {
    auto [it, fresh] = fds.try_emplace(c.conn, -1);
    if (fresh) it->second = rawConnect(server->port());
    if (c.fromClient) {
      rawSend(it->second, c.bytes);
    } else {
      EXPECT_EQ(hex(rawRecv(it->second, c.bytes.size(), 3s)), hex(c.bytes)) << "reply " << replies;
      ++replies;
    }
  }
  EXPECT_GE(replies, 10u);
  for (auto& [conn, fd] : fds) {
    EXPECT_EQ(rawRecv(fd, 1, 100ms), "") << "connection " << conn << " got more than torch's server sent";
    ::close(fd);
  }
}

// What our client does in torch2_our_client.txt; the recording and the replay run the same calls.
void ourClientScript(TcpStore& c) {
  EXPECT_EQ(c.dialect(), protocol::Dialect::kTorch2);
  EXPECT_EQ(toString(c.get("from_torch")), "hello");
  c.set("k", toBytes("v"));
  EXPECT_EQ(c.add("n", 2), 2);
  EXPECT_EQ(toString(c.compareSet("cas", {}, toBytes("a"))), "a");
  EXPECT_EQ(toString(c.compareSet("cas", toBytes("zz"), toBytes("b"))), "a");
  EXPECT_TRUE(c.check({"k", "n"}));
  EXPECT_FALSE(c.check({"k", "missing"}));
  EXPECT_TRUE(c.deleteKey("k"));
  c.multiSet({"m1", "m2"}, {toBytes("1"), toBytes("2")});
  auto got = c.multiGet({"m1", "m2"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(toString(got[1]), "2");
  c.append("app", toBytes("ab"));
  EXPECT_EQ(toString(c.get("app")), "ab");
  try {
    c.wait({"never"}, 200ms);
    ADD_FAILURE() << "a wait for a missing key returned";
  } catch (const TimeoutError&) {
  }
  EXPECT_GT(c.numKeys(), 0);
}

std::unique_ptr<TcpStore> fixtureClient(int port) {
  TcpStoreOptions o;
  o.port = port;
  o.timeout = 5s;
  o.jobId = "fixture-job";
  return std::make_unique<TcpStore>("127.0.0.1", o);
}

// Records torch2_our_client.txt: DS_RECORD_PORT is the port of `record_fixtures.py server`'s tap.
TEST(Torch2Wire, RecordOurClient) {
  const char* port = std::getenv("DS_RECORD_PORT");
  if (!port) GTEST_SKIP() << "records a fixture only with DS_RECORD_PORT (tests/torch/record_fixtures.py)";
  ourClientScript(*fixtureClient(std::stoi(port)));
}

TEST(Torch2Wire, OurClientTalksToARecordedTorch2Server) {
  auto chunks = readFixture("torch2_our_client.txt");
  ASSERT_GE(chunks.size(), 2u);
  for (const auto& c : chunks) ASSERT_EQ(c.conn, 0) << "the recording has one connection";
  std::atomic<size_t> matched{0};
  testing::FakeServer fake([&](int fd) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (!chunks[i].fromClient) {
        rawSend(fd, chunks[i].bytes);
        continue;
      }
      const std::string got = rawRecv(fd, chunks[i].bytes.size(), 3s);
      std::string want = chunks[i].bytes;
      if (i == 0 && got.size() == want.size() && want.size() == 10) {
        // VALIDATE + PING: the nonce is random, and the recorded reply echoes the recorded one.
        want.replace(6, 4, got.substr(6, 4));
        chunks[1].bytes = got.substr(6, 4);
      }
      if (got != want) {
        ADD_FAILURE() << "request " << i << ": our client sent " << hex(got) << ", where the recording has "
                      << hex(want);
        return;
      }
      ++matched;
    }
  });
  ourClientScript(*fixtureClient(fake.port()));
  EXPECT_GE(matched.load(), 10u);
}

}  // namespace
}  // namespace ds::store
