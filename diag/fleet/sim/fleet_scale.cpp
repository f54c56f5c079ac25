// ds_fleet_scale: rank 0's world-mode time at 1k-16k ranks (issue 26, item 6). In one process: the
// real store server and the real rank 0 (diag/fleet's FleetRun: join, heartbeat watch, gathers,
// confirmation, bisection, the cross-rank checks and judge()), against thousands of lightweight
// simulated ranks, each with its own store connection. The simulated ranks publish what real ones
// would (their record, heartbeats, a real local report, reachability, the pairs of the plan they
// lead, bisection results); a small responder answers rank 0's own probes, link pairs and ring.
//
//   ds_fleet_scale [--ranks 1000,4000,16000] [--threads 8]
// Prints one row per size: the time of each of rank 0's phases and the total.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "diag/check.h"
#include "diag/fleet/fleet_defaults.h"
#include "diag/fleet/fleet_mode.h"
#include "diag/fleet/plan.h"
#include "diag/registry.h"
#include "diag/world/cross_checks.h"
#include "engine/env/env_source.h"
#include "engine/store/tcp_store.h"

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using ds::store::toBytes;
using ds::store::toString;
namespace fleet = ds::diag::fleet;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Answers rank 0's probes as the simulated ranks would: every hello gets 'K'; a link connection is
// then served (ping echo, bulk echo) and a ring connection drained, on a thread each.
class Responder {
 public:
  Responder() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 4096);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~Responder() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  static bool readAll(int fd, char* p, size_t n) {
    while (n > 0) {
      ssize_t k = ::recv(fd, p, n, 0);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  static bool writeAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  static void serve(int fd) {
    char h[16];
    if (!readAll(fd, h, 16)) return void(::close(fd));
    std::uint16_t jl;
    std::memcpy(&jl, h + 5, 2);
    std::string job(ntohs(jl), '\0');
    if (!readAll(fd, job.data(), job.size())) return void(::close(fd));
    char k = 'K';
    writeAll(fd, &k, 1);
    const int purpose = h[4];
    std::vector<char> buf(256 * 1024);
    if (purpose == 2) {  // link: the echo protocol of diag/fleet/probe.cpp
      for (;;) {
        char op;
        if (!readAll(fd, &op, 1) || op == 'Q') break;
        if (op == 'P') {
          char m[9] = {'P'};
          if (!readAll(fd, m + 1, 8) || !writeAll(fd, m, 9)) break;
        } else if (op == 'B') {
          std::uint64_t len;
          if (!readAll(fd, reinterpret_cast<char*>(&len), 8)) break;
          for (std::uint64_t left = len; left > 0;) {
            size_t n = std::min<std::uint64_t>(left, buf.size());
            if (!readAll(fd, buf.data(), n)) return void(::close(fd));
            left -= n;
          }
          char head[9] = {'B'};
          std::memcpy(head + 1, &len, 8);
          if (!writeAll(fd, head, 9)) break;
          for (std::uint64_t left = len; left > 0;) {
            size_t n = std::min<std::uint64_t>(left, buf.size());
            if (!writeAll(fd, buf.data(), n)) return void(::close(fd));
            left -= n;
          }
        } else {
          break;
        }
      }
    } else if (purpose == 3) {  // ring: drain rank 0's tokens
      while (::recv(fd, buf.data(), buf.size(), 0) > 0) {
      }
    }
    ::close(fd);
  }
  void loop() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::thread([c] { serve(c); }).detach();
    }
  }
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Row {
  int ranks = 0;
  std::map<std::string, double> phase;
  double total = 0;
  int suspects = 0, hosts = 0;
};

Row runOnce(int n, int threads, int connsPerThread, const std::string& localReport) {
  Row row;
  row.ranks = n;
  const int port = freePort();
  const std::string job = fmt::format("scale{}", n);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("DS_JOB_ID", job.c_str(), 1);
  Responder responder;

  fleet::FleetOptions fo;
  fo.timeout = std::chrono::seconds(120);
  // Twice dsdiag's default (10 s, as this benchmark has always run it): rank 0 shares the cores with
  // the simulated ranks.
  fo.pairTimeout = 2 * fleet::kDefaultPairTimeout;
  fo.largeBytes = 64 * 1024;
  fleet::FleetRun rank0(fo);

  // The simulated ranks, on their own threads, each rank with its own connection to the store.
  std::atomic<bool> stop{false};
  std::vector<std::thread> sims;
  std::atomic<int> simErrors{0};
  std::string firstError;
  std::mutex errMu;
  auto simulate = [&](int first, int step) {
    try {
      ds::store::TcpStoreOptions so;
      so.port = port;
      so.jobId = job;
      so.timeout = std::chrono::seconds(300);
      // One connection per simulated rank where the open-file limit allows (each costs two fds in
      // this process: the client's and the server's); beyond it, ranks share connections.
      std::vector<std::unique_ptr<ds::store::TcpStore>> pool;
      std::vector<ds::store::TcpStore*> conns;
      std::vector<int> mine;
      for (int r = first; r < n; r += step) mine.push_back(r);
      const size_t poolSize = std::max<size_t>(1, std::min(mine.size(), static_cast<size_t>(connsPerThread)));
      for (size_t i = 0; i < poolSize; ++i) {
        // Rank 0's server must be up first; the store client retries its connect within the timeout.
        pool.push_back(std::make_unique<ds::store::TcpStore>("127.0.0.1", so));
      }
      for (size_t i = 0; i < mine.size(); ++i) conns.push_back(pool[i % poolSize].get());
      // Heartbeats on a connection of their own: a blocking get on a shared one must not stop them.
      auto hbConn = std::make_unique<ds::store::TcpStore>("127.0.0.1", so);
      for (size_t i = 0; i < mine.size(); ++i) {
        const int r = mine[i];
        auto& s = *conns[i];
        ds::report::FleetRank me;
        me.rank = r;
        me.host = fmt::format("sim{:05d}", r);
        me.localRank = 0;
        me.probePort = responder.port();
        me.ifaces = {{"lo", "127.0.0.1", 8, 65536}};
        me.joined = true;
        s.set(fmt::format("fleet/hb/{}", r), toBytes("1 join"));
        s.set(fmt::format("fleet/rank/{}", r), toBytes(Json(me).dump()));
        s.add("fleet/joined", 1);
      }
      auto& s = *conns.front();
      // Heartbeats: every rank's key, once a second, in batches.
      std::thread hb([&] {
        long beat = 2;
        while (!stop) {
          std::vector<std::string> keys;
          std::vector<ds::store::Bytes> values;
          for (int r : mine) {
            keys.push_back(fmt::format("fleet/hb/{}", r));
            values.push_back(toBytes(fmt::format("{} links", beat)));
          }
          try {
            hbConn->multiSet(keys, values);
          } catch (const std::exception&) {
          }
          ++beat;
          for (int i = 0; i < 20 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
      auto roles = Json::parse(toString(s.get("fleet/roles")));
      const int rank0Port =
          Json::parse(toString(s.get("fleet/rank/0"))).get<ds::report::FleetRank>().probePort;
      const auto seed = std::stoull(roles.at("seed").get<std::string>());
      for (size_t i = 0; i < mine.size(); ++i) {
        conns[i]->set(fmt::format("fleet/local/{}", mine[i]), toBytes(localReport));
        conns[i]->add("fleet/local/count", 1);
        ds::report::ReachSummary rs;
        rs.rank = mine[i];
        rs.probes = rs.ok = 64;
        conns[i]->set(fmt::format("fleet/reach/{}", mine[i]), toBytes(Json(rs).dump()));
        conns[i]->add("fleet/reach/count", 1);
      }
      auto units = Json::parse(toString(s.get("fleet/go/links"))).at("units").get<std::vector<int>>();
      auto rounds =
          fleet::planLinkRounds(units, fleet::defaultRandomMatchings(static_cast<int>(units.size())), seed);
      std::map<int, std::vector<ds::report::PairResult>> led;
      std::mt19937 rng(static_cast<unsigned>(first));
      std::lognormal_distribution<double> bw(std::log(2.0), 0.1);
      for (size_t k = 0; k < rounds.size(); ++k) {
        for (auto [a, b] : rounds[k]) {
          if (a == 0 || (a - first) % step != 0) continue;
          ds::report::PairResult p;
          p.a = a;
          p.b = b;
          p.round = static_cast<int>(k);
          p.latencyUs = 20;
          p.bandwidthGBps = bw(rng);
          led[a].push_back(p);
        }
      }
      for (size_t i = 0; i < mine.size(); ++i) {
        conns[i]->set(fmt::format("fleet/links/{}", mine[i]),
                      toBytes(Json{{"pairs", led[mine[i]]}, {"messages", 20 * led[mine[i]].size()}}.dump()));
        conns[i]->add("fleet/links/count", 1);
      }
      s.get("fleet/go/confirm");
      for (size_t i = 0; i < mine.size(); ++i) {
        conns[i]->set(fmt::format("fleet/confirm/{}", mine[i]), toBytes("[]"));
        conns[i]->add("fleet/confirm/count", 1);
      }
      for (int stepNo = 0;; ++stepNo) {
        auto groups = Json::parse(toString(s.get(fmt::format("fleet/bisect/{}", stepNo))))
                          .at("groups")
                          .get<std::vector<std::vector<int>>>();
        if (groups.empty()) break;
        for (const auto& g : groups) {
          for (size_t i = 0; i < mine.size(); ++i) {
            if (!std::binary_search(g.begin(), g.end(), mine[i])) continue;
            // The ring's last rank feeds rank 0 its tokens, as its previous neighbour would.
            if (g.front() == 0 && mine[i] == g.back()) {
              std::string why;
              int fd = fleet::connectProbe("", "127.0.0.1", rank0Port, fleet::Purpose::kRing, mine[i],
                                           2000 + stepNo, job, Clock::now() + std::chrono::seconds(10), why);
              std::vector<char> token(2 * 32 * 1024, 't');
              if (fd >= 0) {
                for (size_t off = 0; off < token.size();) {
                  ssize_t k = ::send(fd, token.data() + off, token.size() - off, MSG_NOSIGNAL);
                  if (k <= 0) break;
                  off += static_cast<size_t>(k);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                ::close(fd);
              }
            }
            conns[i]->set(fmt::format("fleet/bisect{}/{}", stepNo, mine[i]), toBytes(""));
            conns[i]->add(fmt::format("fleet/bisect{}/count", stepNo), 1);
          }
        }
      }
      s.get("fleet/exit");
      stop = true;
      hb.join();
    } catch (const std::exception& e) {
      std::lock_guard lock(errMu);
      if (firstError.empty()) firstError = e.what();
      ++simErrors;
    }
  };
  const auto t0 = Clock::now();
  auto t = Clock::now();
  auto lap = [&](const std::string& name) {
    row.phase[name] = since(t);
    t = Clock::now();
  };
  std::thread joiner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0's server first
    for (int i = 0; i < threads; ++i) sims.emplace_back(simulate, 1 + i, threads);
  });
  rank0.join();
  lap("join");
  rank0.enterStage("local_checks");
  rank0.post("local", localReport);
  rank0.runNetworkStages();
  for (const auto& [k, v] : rank0.report().stats.stageSeconds) row.phase[k] = v;
  t = Clock::now();
  std::vector<int> others;
  for (int r : rank0.members()) {
    if (r != 0) others.push_back(r);
  }
  auto got = rank0.gather("local", others, Clock::now() + std::chrono::seconds(120));
  std::vector<ds::diag::RankReport> reports;
  for (const auto& [r, v] : got) {
    auto j = Json::parse(v);
    reports.push_back({r, j.value("host", ""), j.value("tool_version", ""),
                       j.at("records").get<std::vector<ds::report::DiagRecord>>(), j.value("transport", ""),
                       j.value("transport_why", "")});
  }
  lap("gather local");
  auto cross = ds::diag::crossRankChecks(reports, n);
  lap("cross checks");
  rank0.judgeFinal({});
  lap("judge");
  rank0.publishExit(0);
  row.total = since(t0);
  joiner.join();
  for (auto& th : sims) th.join();
  rank0.leave();
  for (const auto& h : rank0.report().judgement.hosts) {
    ++row.hosts;
    if (h.state != ds::report::HostState::kHealthy) ++row.suspects;
  }
  if (simErrors > 0)
    std::fprintf(stderr, "ds_fleet_scale: %d simulated thread(s) failed: %s\n", simErrors.load(),
                 firstError.c_str());
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds_fleet_scale: rank 0's world-mode time against thousands of simulated ranks (one process)"};
  std::vector<int> sizes{1000, 4000, 16000};
  int threads = 8;
  app.add_option("--ranks", sizes, "Job sizes to run")->delimiter(',');
  app.add_option("--threads", threads, "Threads driving the simulated ranks")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const rlim_t need = static_cast<rlim_t>(*std::max_element(sizes.begin(), sizes.end())) * 2 + 1024;
  if (rl.rlim_cur < need) {
    rl.rlim_cur = std::min(need, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < need) {
    std::printf(
        "(the open-file limit, %llu, is below the %llu that one connection per rank needs at the largest "
        "size: simulated ranks share connections there)\n",
        static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(need));
  }
  // A real local report, as every rank sends one.
  ds::env::ProcessEnv penv;
  ds::diag::Context ctx(penv, ds::diag::DiagOptions{});
  ctx.probeAll();
  auto local = ds::diag::runLocalChecks(ctx, ds::diag::Selection{}, 1, "sim");
  std::string localReport = Json{{"host", "sim"}, {"tool_version", "bench"}, {"records", local}}.dump();
  std::printf(
      "rank 0's world-mode time against simulated ranks (one rank per host, local report %zu bytes)\n",
      localReport.size());
  std::printf("%8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "ranks", "join", "reach", "links", "confirm",
              "bisect", "local", "cross", "judge", "total", "suspects");
  for (int n : sizes) {
    const long budget = static_cast<long>(rl.rlim_cur) - 1024;
    const int connsPerThread = static_cast<int>(std::max<long>(1, std::min<long>(n, budget / 2) / threads));
    auto r = runOnce(n, threads, connsPerThread, localReport);
    auto ph = [&](const char* k) { return r.phase.count(k) ? r.phase[k] : 0.0; };
    std::printf("%8d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8d\n", n, ph("join"),
                ph("reachability"), ph("links"), ph("confirm"), ph("bisect"), ph("gather local"),
                ph("cross checks"), ph("judge"), r.total, r.suspects);
    std::fflush(stdout);
  }
  return 0;
}
