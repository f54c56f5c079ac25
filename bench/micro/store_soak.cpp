// Soak and churn of the TcpStore server: many clients connect, do set/get/add/wait and disconnect,
// over and over, while some clients are SIGKILLed mid-request and a few send garbage. Prints figures;
// asserts only what a soak must: no well-behaved client saw an error, and the server's descriptors
// (and, within a tolerance, its memory) did not grow. scripts/soak-store.sh runs it.
//
//   build/bin/ds_store_soak [--seconds 60] [--clients 1024] [--processes 4] [--victims 16]
//                           [--garbage 8] [--rss-tolerance-mib 16]
//
// Processes (all forked before any thread starts):
//   server      a standalone TcpStoreServer on 127.0.0.1 (its RSS and fd count are what is measured)
//   clients     --processes processes with --clients/--processes threads each, one connection per
//               thread at a time: connect, 1-20 rounds of set/get/add/wait, disconnect, again
//   victims     a spawner keeping --victims short-lived children busy on the store, each SIGKILLed
//               1-50 ms after it starts (often with half a request sent)
//   garbage     --garbage threads in one process sending random bytes, bad handshakes, lying
//               lengths and half messages, each time on a new connection
//   this one    a ticker (sets tick/N every 10 ms, the keys the clients wait for), the sampler
// Exit status: 0 when the soak held, 1 when a well-behaved client saw an error or the server grew, 2
// for bad flags.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/common/cli.h"
#include "engine/common/log.h"
#include "engine/store/protocol.h"
#include "engine/store/tcp_store.h"
#include "engine/store/tcp_store_server.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ds::store::Bytes;
using ds::store::TcpStore;
using ds::store::TcpStoreOptions;
namespace protocol = ds::store::protocol;

struct Options {
  int seconds = 60;
  int clients = 1024;
  int processes = 4;
  int victims = 16;
  int garbage = 8;
  long rssToleranceMiB = 16;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "store_soak: %s\n", msg.c_str());
  std::exit(2);
}

// Latency histogram: buckets 2% wide from 1 us (merged across processes through a pipe).
struct Histogram {
  static constexpr int kBuckets = 1200;
  std::vector<std::uint64_t> counts = std::vector<std::uint64_t>(kBuckets, 0);
  static int bucketOf(double us) {
    if (us <= 1) return 0;
    return std::min(kBuckets - 1, static_cast<int>(std::log(us) / std::log(1.02)));
  }
  void add(double us) { ++counts[bucketOf(us)]; }
  void merge(const Histogram& o) {
    for (int i = 0; i < kBuckets; ++i) counts[i] += o.counts[i];
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : counts) t += c;
    return t;
  }
  double quantileUs(double q) const {
    const std::uint64_t n = total();
    if (n == 0) return 0;
    std::uint64_t want = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n))), seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= want) return std::pow(1.02, i + 1);
    }
    return std::pow(1.02, kBuckets);
  }
};

// What a client process reports to the harness, written through a pipe.
struct ClientReport {
  std::uint64_t ops = 0, connects = 0, errors = 0;
  std::string firstError;
  Histogram fast;  // set, get, add
  Histogram wait;  // wait for the next tick (includes up to 10 ms of waiting by design)

  std::string serialize() const {
    std::string out = fmt::format("{} {} {} {}\n", ops, connects, errors, firstError.size());
    out += firstError;
    out.append(reinterpret_cast<const char*>(fast.counts.data()), fast.counts.size() * sizeof(std::uint64_t));
    out.append(reinterpret_cast<const char*>(wait.counts.data()), wait.counts.size() * sizeof(std::uint64_t));
    return out;
  }
  static bool parse(const std::string& in, ClientReport& r) {
    size_t nl = in.find('\n');
    if (nl == std::string::npos) return false;
    size_t errLen = 0;
    if (std::sscanf(in.c_str(), "%lu %lu %lu %zu", &r.ops, &r.connects, &r.errors, &errLen) != 4) return false;
    const size_t hist = Histogram::kBuckets * sizeof(std::uint64_t);
    if (in.size() != nl + 1 + errLen + 2 * hist) return false;
    r.firstError = in.substr(nl + 1, errLen);
    std::memcpy(r.fast.counts.data(), in.data() + nl + 1 + errLen, hist);
    std::memcpy(r.wait.counts.data(), in.data() + nl + 1 + errLen + hist, hist);
    return true;
  }
};

struct ServerSample {
  long rssKiB = -1;
  int fds = -1;
};

ServerSample sample(pid_t pid) {
  ServerSample s;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rssKiB = std::atol(line.c_str() + 6);
  }
  if (DIR* d = ::opendir(fmt::format("/proc/{}/fd", pid).c_str())) {
    s.fds = 0;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ++s.fds;
    }
    ::closedir(d);
  }
  return s;
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string readAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

int rawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{2, 0};  // garbage senders and victims never hang on a read
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// torch 2.x's handshake, as our client sends it: VALIDATE, then PING (answered with the nonce).
std::string helloFrame(std::uint32_t magic = protocol::kValidationMagic) {
  return protocol::Writer()
      .u8(static_cast<std::uint8_t>(protocol::Query::kValidate))
      .u32(magic)
      .u8(static_cast<std::uint8_t>(protocol::Query::kPing))
      .u32(0x00800001)
      .take();
}

std::uint8_t query(protocol::Query q) { return static_cast<std::uint8_t>(q); }

// ---- the server process --------------------------------------------------------------------------

[[noreturn]] void serverMain(int portPipe, int stopPipe, const std::string& job) {
  ds::log::setThreshold(ds::log::Level::kError);  // garbage and kills are expected: no warning per close
  ds::store::TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.jobId = job;
  o.stallTimeout = 2s;
  auto server = ds::store::TcpStoreServer::start(o);
  writeAll(portPipe, std::to_string(server->port()) + "\n");
  ::close(portPipe);
  readAll(stopPipe);  // until the harness closes it (or dies)
  server->stop();
  std::_Exit(0);
}

// ---- well-behaved clients ------------------------------------------------------------------------

[[noreturn]] void clientProcessMain(int reportPipe, int port, const std::string& job, int firstId, int threads,
                                    Clock::time_point end) {
  std::vector<ClientReport> reports(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ClientReport& r = reports[static_cast<size_t>(t)];
      const int id = firstId + t;
      std::mt19937 rng(static_cast<unsigned>(id) * 7919U + 1);
      auto fail = [&](const std::string& what) {
        if (r.errors++ == 0) r.firstError = fmt::format("client {}: {}", id, what);
      };
      while (Clock::now() < end) {
        try {
          TcpStoreOptions o;
          o.port = port;
          o.jobId = job;
          o.timeout = 30s;
          TcpStore store("127.0.0.1", o);
          ++r.connects;
          const int rounds = std::uniform_int_distribution<int>(1, 20)(rng);
          for (int i = 0; i < rounds && Clock::now() < end; ++i) {
            const std::string key = fmt::format("client/{}", id);
            Bytes value(std::uniform_int_distribution<size_t>(1, 256)(rng));
            for (auto& b : value) b = static_cast<std::uint8_t>(rng());
            auto t0 = Clock::now();
            store.set(key, value);
            auto t1 = Clock::now();
            Bytes got = store.get(key);
            auto t2 = Clock::now();
            if (got != value) fail(fmt::format("get('{}') returned {} bytes that differ from the {} set", key,
                                               got.size(), value.size()));
            std::int64_t before = store.add(fmt::format("counter/{}", id), 0);
            std::int64_t after = store.add(fmt::format("counter/{}", id), 1);
            auto t3 = Clock::now();
            if (after != before + 1) fail(fmt::format("add on its own counter went {} -> {}", before, after));
            // Park on the server: wait for the tick after the current one (set by the harness's ticker).
            Bytes now = store.get("tick/now");
            const long tick = std::stol(std::string(now.begin(), now.end()));
            auto t4 = Clock::now();
            store.wait({fmt::format("tick/{}", tick + 1)}, std::chrono::milliseconds(10'000));
            auto t5 = Clock::now();
            auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
            r.fast.add(us(t0, t1));
            r.fast.add(us(t1, t2));
            r.fast.add(us(t2, t3) / 2);
            r.fast.add(us(t2, t3) / 2);
            r.fast.add(us(t3, t4));
            r.wait.add(us(t4, t5));
            r.ops += 6;
          }
        } catch (const std::exception& e) {
          fail(e.what());
          std::this_thread::sleep_for(10ms);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  ClientReport total;
  for (auto& r : reports) {
    total.ops += r.ops;
    total.connects += r.connects;
    total.errors += r.errors;
    if (total.firstError.empty()) total.firstError = r.firstError;
    total.fast.merge(r.fast);
    total.wait.merge(r.wait);
  }
  writeAll(reportPipe, total.serialize());
  std::_Exit(0);
}

// ---- victims: killed mid-request -----------------------------------------------------------------

[[noreturn]] void victimMain(int port, const std::string& job, unsigned seed) {
  std::mt19937 rng(seed);
  int fd = rawConnect(port);
  if (fd < 0) std::_Exit(0);
  (void)job;
  writeAll(fd, helloFrame());
  char buf[4096];
  [[maybe_unused]] auto n = ::read(fd, buf, sizeof(buf));
  for (;;) {
    // A set, then a check (so the set is served), then half of the next request, then a pause: the
    // kill lands in one of these.
    std::string key = fmt::format("/victim/{}", rng() % 64);
    protocol::Writer set;
    set.u8(query(protocol::Query::kSet)).str(key).bytes(Bytes(rng() % 512, 7));
    set.u8(query(protocol::Query::kCheck)).strs({key});
    writeAll(fd, set.data());
    n = ::read(fd, buf, sizeof(buf));
    std::string wait =
        protocol::Writer().u8(query(protocol::Query::kWait)).strs({fmt::format("/never/{}", rng() % 8)}).take();
    writeAll(fd, wait.substr(0, 1 + rng() % (wait.size() - 1)));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 5));
  }
}

// Keeps `victims` children alive, killing each with SIGKILL 1-50 ms after it started.
[[noreturn]] void spawnerMain(int reportPipe, int port, const std::string& job, int victims, Clock::time_point end) {
  std::mt19937 rng(12345);
  struct Victim {
    pid_t pid;
    Clock::time_point killAt;
  };
  std::vector<Victim> live;
  std::uint64_t killed = 0;
  unsigned seed = 1;
  while (Clock::now() < end) {
    while (static_cast<int>(live.size()) < victims) {
      pid_t pid = ::fork();
      if (pid == 0) victimMain(port, job, seed);
      ++seed;
      if (pid > 0) live.push_back({pid, Clock::now() + std::chrono::milliseconds(1 + rng() % 50)});
    }
    std::this_thread::sleep_for(1ms);
    const auto now = Clock::now();
    for (auto it = live.begin(); it != live.end();) {
      if (now >= it->killAt) {
        ::kill(it->pid, SIGKILL);
        ::waitpid(it->pid, nullptr, 0);
        ++killed;
        it = live.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& v : live) {
    ::kill(v.pid, SIGKILL);
    ::waitpid(v.pid, nullptr, 0);
    ++killed;
  }
  writeAll(reportPipe, std::to_string(killed) + "\n");
  std::_Exit(0);
}

// ---- garbage senders -----------------------------------------------------------------------------

[[noreturn]] void garbageMain(int reportPipe, int port, const std::string& job, int threads, Clock::time_point end) {
  std::atomic<std::uint64_t> sent{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 99);
      while (Clock::now() < end) {
        int fd = rawConnect(port);
        if (fd < 0) {
          std::this_thread::sleep_for(10ms);
          continue;
        }
        std::string bytes;
        switch (rng() % 6) {
          case 0:  // random bytes
            bytes.resize(1 + rng() % 2048);
            for (auto& c : bytes) c = static_cast<char>(rng());
            break;
          case 1:  // the wrong magic (read as torch 1.x's SET with an absurd key length)
            bytes = helloFrame(0x47455420);
            break;
          case 2:  // another job's id
            bytes = helloFrame() + protocol::Writer()
                                       .u8(query(protocol::Query::kCompareSet))
                                       .str("/" + std::string(protocol::kJobIdKey))
                                       .str("")
                                       .str("someone-else")
                                       .take();
            break;
          case 3:  // a handshake, then a key that claims 2^63 bytes
            bytes = helloFrame() + std::string("\x01\xff\xff\xff\xff\xff\xff\xff\x7f", 9);
            break;
          case 4:  // a handshake, then a value whose length lies (the rest never comes)
            bytes = helloFrame() + protocol::Writer().u8(query(protocol::Query::kSet)).str("/k").u64(1000000).take() +
                    "short";
            break;
          case 5:  // a handshake, then random bytes
            bytes = helloFrame();
            {
              std::string payload(1 + rng() % 512, '\0');
              for (auto& c : payload) c = static_cast<char>(rng());
              bytes += payload;
            }
            break;
        }
        ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        char buf[4096];
        while (::read(fd, buf, sizeof(buf)) > 0) {  // until the server closes (or 2 s pass)
        }
        ::close(fd);
        ++sent;
      }
    });
  }
  for (auto& t : pool) t.join();
  writeAll(reportPipe, std::to_string(sent.load()) + "\n");
  std::_Exit(0);
}

// ---- the harness ---------------------------------------------------------------------------------

Options parseArgs(int argc, char** argv) {
  Options o;
  CLI::App app{"Soak and churn of the TcpStore server (scripts/soak-store.sh runs it); exits 1 when a "
               "well-behaved client saw an error or the server grew.",
               "ds_store_soak"};
  app.add_option("--seconds", o.seconds, "how long to soak (default 60)")->transform(ds::cli::integer(1, 86400 * 7));
  app.add_option("--clients", o.clients, "client threads, all processes together (default 1024)")
      ->transform(ds::cli::integer(1, 1000000));
  app.add_option("--processes", o.processes, "client processes (default 4)")->transform(ds::cli::integer(1, 4096));
  app.add_option("--victims", o.victims, "short-lived clients kept busy and SIGKILLed mid-request (default 16)")
      ->transform(ds::cli::integer(0, 100000));
  app.add_option("--garbage", o.garbage, "threads sending garbage to the store (default 8)")
      ->transform(ds::cli::integer(0, 100000));
  app.add_option("--rss-tolerance-mib", o.rssToleranceMiB, "how much the server's RSS may grow (default 16)")
      ->transform(ds::cli::integer(0, 1 << 20));
  try {
    ds::cli::parse(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  if (o.clients < o.processes) die("--clients must be at least --processes: each process runs at least one client.");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parseArgs(argc, argv);
  // Each client process holds clients/processes sockets; the server all of them plus the rest.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const rlim_t need = static_cast<rlim_t>(opt.clients) + opt.victims + opt.garbage + 256;
  if (rl.rlim_cur < need) {
    rl.rlim_cur = std::min(rl.rlim_max, std::max<rlim_t>(need, 65536));
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < need) {
      die(fmt::format("the open-file limit is {} (hard {}), but {} clients need about {}; raise it "
                      "(ulimit -n {}) or run fewer clients",
                      rl.rlim_cur, rl.rlim_max, opt.clients, need, need));
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  const std::string job = fmt::format("soak-{}", ::getpid());

  int portPipe[2], stopPipe[2];
  if (::pipe(portPipe) != 0 || ::pipe(stopPipe) != 0) die("pipe failed");
  pid_t server = ::fork();
  if (server == 0) {
    ::close(portPipe[0]);
    ::close(stopPipe[1]);
    serverMain(portPipe[1], stopPipe[0], job);
  }
  ::close(portPipe[1]);
  ::close(stopPipe[0]);
  const int port = std::atoi(readAll(portPipe[0]).c_str());
  ::close(portPipe[0]);
  if (port <= 0) die("the server did not start (see its message above)");
  std::this_thread::sleep_for(200ms);
  const ServerSample atStart = sample(server);

  // Everything is forked before this process starts a thread.
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(opt.seconds);
  auto forkWithPipe = [&](auto fn) {
    int p[2];
    if (::pipe(p) != 0) die("pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::close(stopPipe[1]);
      fn(p[1]);
    }
    ::close(p[1]);
    return std::pair<pid_t, int>{pid, p[0]};
  };
  // The ticker's first key must exist before the clients ask for it.
  TcpStoreOptions tickOpts;
  tickOpts.port = port;
  tickOpts.jobId = job;
  tickOpts.timeout = 30s;
  auto ticker = std::make_unique<TcpStore>("127.0.0.1", tickOpts);
  ticker->set("tick/0", Bytes{'1'});
  ticker->set("tick/now", Bytes{'0'});

  std::vector<std::pair<pid_t, int>> clientProcs;
  int nextId = 0;
  for (int p = 0; p < opt.processes; ++p) {
    const int threads = opt.clients / opt.processes + (p < opt.clients % opt.processes ? 1 : 0);
    const int first = nextId;
    nextId += threads;
    clientProcs.push_back(
        forkWithPipe([&](int w) { clientProcessMain(w, port, job, first, threads, end); }));
  }
  auto spawner = forkWithPipe([&](int w) { spawnerMain(w, port, job, opt.victims, end); });
  auto garbage = forkWithPipe([&](int w) { garbageMain(w, port, job, opt.garbage, end); });

  // Ticker and sampler.
  ServerSample peak = atStart, afterWarmup{};
  long tick = 0;
  auto nextSample = start + 1s;
  bool warm = false;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(10ms);
    ++tick;
    ticker->set(fmt::format("tick/{}", tick), Bytes{'1'});
    const std::string nowText = std::to_string(tick);
    ticker->set("tick/now", Bytes(nowText.begin(), nowText.end()));
    if (tick > 200) ticker->deleteKey(fmt::format("tick/{}", tick - 200));  // bounded key space
    if (Clock::now() >= nextSample) {
      auto s = sample(server);
      peak.rssKiB = std::max(peak.rssKiB, s.rssKiB);
      peak.fds = std::max(peak.fds, s.fds);
      if (!warm && Clock::now() >= start + std::chrono::seconds(std::min(5, opt.seconds / 4 + 1))) {
        afterWarmup = s;
        warm = true;
      }
      nextSample += 1s;
    }
  }
  // Keep ticking while the clients finish their last waits.
  ServerSample endLoad = sample(server);
  std::atomic<bool> stopTicks{false};
  std::thread tail([&] {
    long t = tick;
    while (!stopTicks) {
      std::this_thread::sleep_for(10ms);
      ++t;
      ticker->set(fmt::format("tick/{}", t), Bytes{'1'});
      const std::string nowText = std::to_string(t);
      ticker->set("tick/now", Bytes(nowText.begin(), nowText.end()));
      ticker->deleteKey(fmt::format("tick/{}", t - 200));
    }
  });

  ClientReport total;
  int badReports = 0;
  for (auto& [pid, fd] : clientProcs) {
    ClientReport r;
    std::string data = readAll(fd);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!ClientReport::parse(data, r)) {
      ++badReports;
      continue;
    }
    total.ops += r.ops;
    total.connects += r.connects;
    total.errors += r.errors;
    if (total.firstError.empty()) total.firstError = r.firstError;
    total.fast.merge(r.fast);
    total.wait.merge(r.wait);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stopTicks = true;
  tail.join();
  std::string killed = readAll(spawner.second);
  std::string garbageSent = readAll(garbage.second);
  ::waitpid(spawner.first, nullptr, 0);
  ::waitpid(garbage.first, nullptr, 0);
  ticker.reset();
  std::this_thread::sleep_for(2500ms);  // the stall timeout (2 s) closes whatever a victim left half sent
  const ServerSample atEnd = sample(server);
  ::close(stopPipe[1]);
  int serverStatus = 0;
  ::waitpid(server, &serverStatus, 0);

  const double ops = static_cast<double>(total.ops);
  std::printf("store soak: %d s, %d well-behaved clients in %d processes, %d victims at a time, %d garbage senders\n",
              opt.seconds, opt.clients, opt.processes, opt.victims, opt.garbage);
  std::printf("  operations        %.0f (%.0f ops/s); %lu connections made\n", ops, ops / elapsed,
              static_cast<unsigned long>(total.connects));
  std::printf("  latency set/get/add  p50 %.0f us  p99 %.0f us  p99.9 %.0f us\n", total.fast.quantileUs(0.5),
              total.fast.quantileUs(0.99), total.fast.quantileUs(0.999));
  std::printf("  latency wait (next 10 ms tick)  p50 %.0f us  p99 %.0f us\n", total.wait.quantileUs(0.5),
              total.wait.quantileUs(0.99));
  std::printf("  victims killed    %s", killed.empty() ? "?\n" : killed.c_str());
  std::printf("  garbage sessions  %s", garbageSent.empty() ? "?\n" : garbageSent.c_str());
  std::printf("  server RSS        start %ld KiB, after warm-up %ld KiB, peak %ld KiB, end of load %ld KiB, "
              "after clients left %ld KiB\n",
              atStart.rssKiB, afterWarmup.rssKiB, peak.rssKiB, endLoad.rssKiB, atEnd.rssKiB);
  std::printf("  server fds        start %d, peak %d, after clients left %d\n", atStart.fds, peak.fds, atEnd.fds);
  std::printf("  client errors     %lu\n", static_cast<unsigned long>(total.errors));

  bool ok = true;
  if (total.errors > 0 || badReports > 0) {
    std::printf("FAIL: well-behaved clients saw %lu error(s)%s; first: %s\n", static_cast<unsigned long>(total.errors),
                badReports ? fmt::format(" and {} client process(es) died", badReports).c_str() : "",
                total.firstError.c_str());
    ok = false;
  }
  if (atEnd.fds > atStart.fds) {
    std::printf("FAIL: the server holds %d descriptors after every client left, %d at start: it leaks connections\n",
                atEnd.fds, atStart.fds);
    ok = false;
  }
  // Memory: compared with the state after warm-up (allocator arenas and hash tables grow once to
  // their working size); growth beyond the tolerance over the run means a leak.
  if (afterWarmup.rssKiB > 0 && endLoad.rssKiB > afterWarmup.rssKiB + opt.rssToleranceMiB * 1024) {
    std::printf("FAIL: the server's RSS grew from %ld KiB after warm-up to %ld KiB at the end of the load "
                "(tolerance %ld MiB)\n",
                afterWarmup.rssKiB, endLoad.rssKiB, opt.rssToleranceMiB);
    ok = false;
  }
  if (!WIFEXITED(serverStatus) || WEXITSTATUS(serverStatus) != 0) {
    std::printf("FAIL: the server process did not exit cleanly (status %d)\n", serverStatus);
    ok = false;
  }
  std::printf("%s\n", ok ? "OK: no client error, no descriptor growth, memory within tolerance" : "soak FAILED");
  return ok ? 0 : 1;
}
