// TcpStore over loopback: set/get/add latency, and a storeBarrier of N clients (N connections, one
// thread each; only the barrier is timed, the clients connect in setup).
//
//   build/bin/ds_store_bench [--benchmark_filter=TcpStore/barrier]
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/store/barrier.h"
#include "engine/store/tcp_store.h"

namespace {

using namespace std::chrono_literals;
using ds::store::Bytes;
using ds::store::TcpStore;
using ds::store::TcpStoreOptions;

void raiseFdLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

std::unique_ptr<TcpStore> makeMaster() {
  TcpStoreOptions o;
  o.port = 0;
  o.isServer = true;
  o.timeout = 60s;
  return std::make_unique<TcpStore>("127.0.0.1", o);
}

std::unique_ptr<TcpStore> makeClient(int port) {
  TcpStoreOptions o;
  o.port = port;
  o.timeout = 60s;
  return std::make_unique<TcpStore>("127.0.0.1", o);
}

void tcpStoreSet(benchmark::State& state) {
  auto master = makeMaster();
  auto client = makeClient(master->port());
  const Bytes value(static_cast<size_t>(state.range(0)), 7);
  for (auto _ : state) client->set("bench/set", value);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(tcpStoreSet)->Name("TcpStore/set")->Arg(8)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void tcpStoreGet(benchmark::State& state) {
  auto master = makeMaster();
  auto client = makeClient(master->port());
  client->set("bench/get", Bytes(static_cast<size_t>(state.range(0)), 7));
  for (auto _ : state) benchmark::DoNotOptimize(client->get("bench/get"));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(tcpStoreGet)->Name("TcpStore/get")->Arg(8)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void tcpStoreAdd(benchmark::State& state) {
  auto master = makeMaster();
  auto client = makeClient(master->port());
  for (auto _ : state) benchmark::DoNotOptimize(client->add("bench/add", 1));
}
BENCHMARK(tcpStoreAdd)->Name("TcpStore/add")->Unit(benchmark::kMicrosecond);

// N clients, each with its own connection and thread, parked between rounds.
class BarrierCrew {
 public:
  explicit BarrierCrew(int n) : n_(n) {
    raiseFdLimit();
    master_ = makeMaster();
    for (int r = 0; r < n; ++r) clients_.push_back(makeClient(master_->port()));
    for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { work(r); });
  }

  ~BarrierCrew() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    go_.notify_all();
    for (auto& t : threads_) t.join();
    clients_.clear();
  }

  // One barrier over all N clients; returns when every client has passed it.
  void round() {
    std::unique_lock lock(mu_);
    ++round_;
    running_ = n_;
    go_.notify_all();
    done_.wait(lock, [&] { return running_ == 0; });
    if (!error_.empty()) throw std::runtime_error(error_);
  }

 private:
  void work(int rank) {
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t round;
      {
        std::unique_lock lock(mu_);
        go_.wait(lock, [&] { return quit_ || round_ != seen; });
        if (quit_) return;
        round = seen = round_;
      }
      try {
        ds::store::storeBarrier(*clients_[rank], "bench/" + std::to_string(round), rank, n_, 30s);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu_);
        error_ = e.what();
      }
      std::lock_guard lock(mu_);
      if (--running_ == 0) done_.notify_one();
    }
  }

  int n_;
  std::unique_ptr<TcpStore> master_;
  std::vector<std::unique_ptr<TcpStore>> clients_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable go_;
  std::condition_variable done_;
  std::uint64_t round_ = 0;
  int running_ = 0;
  bool quit_ = false;
  std::string error_;
};

void tcpStoreBarrier(benchmark::State& state) {
  BarrierCrew crew(static_cast<int>(state.range(0)));
  crew.round();  // warm-up: every thread has run once
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    crew.round();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.counters["clients"] = static_cast<double>(state.range(0));
}
BENCHMARK(tcpStoreBarrier)
    ->Name("TcpStore/barrier")
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
