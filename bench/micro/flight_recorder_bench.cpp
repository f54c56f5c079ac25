// The flight recorder's cost per op (engine/comm/flight_recorder.h): the two events of an op that
// completes on the caller's thread (record at issue, finished at completion), on one thread and on two
// threads recording at once (groups driven from different threads); a whole op of a process group
// whose backend does nothing (InlineAllreduce: the group's own per-op path, recorder included: run it
// with TORCH_FR_BUFFER_SIZE=0 to see it without); and a dump of a full ring (not on any op's path).
//
//   build/bin/ds_flight_recorder_bench [--benchmark_filter=RecordFinished]
//   TORCH_FR_BUFFER_SIZE=0 build/bin/ds_flight_recorder_bench --benchmark_filter=InlineAllreduce
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "engine/comm/flight_recorder.h"
#include "engine/comm/process_group.h"
#include "engine/store/hash_store.h"

namespace {

using ds::comm::FlightGroup;
using ds::comm::FlightOp;
using ds::comm::FlightRecorder;
using ds::comm::FlightRecorderConfig;

FlightRecorder& recorder() {
  static FlightRecorder* fr = [] {
    FlightRecorderConfig c;
    c.entries = 2000;
    c.dumpPrefix = "/nonexistent/unused_";
    auto* r = new FlightRecorder(c);
    FlightGroup g;
    g.name = "default";
    g.desc = "default_pg";
    g.backend = "shm";
    g.ranks = {0, 1};
    r->registerGroup(g);
    return r;
  }();
  return *fr;
}

FlightOp allreduce(std::uint64_t seq) {
  FlightOp op;
  op.type = ds::comm::OpType::kAllreduce;
  op.inCount = op.outCount = 2;
  op.collectiveSeq = seq;
  op.opId = seq;
  op.timeout = std::chrono::minutes(10);
  op.started = true;
  return op;
}

// The fast path's two events per op, with the times the process group read anyway.
void RecordFinished(benchmark::State& state) {
  auto& fr = recorder();
  std::uint64_t seq = 0;
  const auto at = ds::comm::Work::Clock::now();
  for (auto _ : state) {
    const auto h = fr.record(0, allreduce(++seq), at);
    fr.finished(h, true, at);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(RecordFinished)->Threads(1)->Threads(2)->UseRealTime();

// The same with 2 KiB of other memory written between two ops (the op's own data, other threads),
// walking through 8 MiB: by the time the ring comes round to a slot again (2048 ops, 4 MiB later),
// its lines have left the core's caches, as in a real job. ColdBaseline is the walk alone.
struct OtherMemory {
  std::vector<std::uint64_t> v = std::vector<std::uint64_t>(8 * 1024 * 1024 / sizeof(std::uint64_t), 1);
  std::size_t at = 0;
};
OtherMemory& otherMemory() {
  static OtherMemory m;
  return m;
}
std::uint64_t touch(OtherMemory& m) {
  std::uint64_t sum = 0;
  for (int line = 0; line < 32; ++line) {  // one write per cache line
    sum += ++m.v[m.at];
    m.at = (m.at + 8) % m.v.size();
  }
  return sum;
}
void RecordFinishedCold(benchmark::State& state) {
  auto& fr = recorder();
  auto& other = otherMemory();
  std::uint64_t seq = 0;
  const auto at = ds::comm::Work::Clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(touch(other));
    const auto h = fr.record(0, allreduce(++seq), at);
    fr.finished(h, true, at);
  }
}
BENCHMARK(RecordFinishedCold);
void ColdBaseline(benchmark::State& state) {
  auto& other = otherMemory();
  for (auto _ : state) benchmark::DoNotOptimize(touch(other));
}
BENCHMARK(ColdBaseline);

// The same with the recorder off (TORCH_FR_BUFFER_SIZE=0): the calls return at once.
void RecordFinishedOff(benchmark::State& state) {
  FlightRecorderConfig c;
  c.entries = 0;
  FlightRecorder fr(c);
  std::uint64_t seq = 0;
  const auto at = ds::comm::Work::Clock::now();
  for (auto _ : state) {
    const auto h = fr.record(-1, allreduce(++seq), at);
    fr.finished(h, true, at);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(RecordFinishedOff);

// A dump of a full ring of 2000 entries in pickle form (on a timeout, a signal or a request).
void DumpPickle(benchmark::State& state) {
  auto& fr = recorder();
  const auto at = ds::comm::Work::Clock::now();
  for (std::uint64_t i = 0; i < 2000; ++i) fr.finished(fr.record(0, allreduce(i), at), true, at);
  for (auto _ : state) benchmark::DoNotOptimize(fr.dumpPickle());
}
BENCHMARK(DumpPickle)->Unit(benchmark::kMillisecond);

// A group of one rank whose ops complete at once on the caller's thread (the fast path of an 8-byte
// shm allreduce, less the shared memory).
class InstantGroup final : public ds::comm::ProcessGroup {
 public:
  explicit InstantGroup(ds::comm::ProcessGroupOptions o) : ProcessGroup(std::move(o)) {}
  ~InstantGroup() override { shutdown(); }
  std::string backendName() const override { return "instant"; }

 protected:
  bool inlineEligible(const ds::comm::OpDesc&) const override { return true; }
  std::function<void()> startInline(const ds::comm::OpDesc&, const ds::comm::Buffer&, const ds::comm::Buffer&,
                                    std::chrono::steady_clock::time_point) override {
    return nullptr;
  }
  void doAllreduce(const ds::comm::OpDesc&, const ds::comm::Buffer&, const ds::comm::Buffer&) override {}
};

void InlineAllreduce(benchmark::State& state) {
  ds::comm::ProcessGroupOptions o;
  o.store = std::make_shared<ds::store::HashStore>();
  o.heartbeatInterval = std::chrono::milliseconds(0);
  o.groupName = "bench";
  InstantGroup pg(o);
  float x[2] = {1, 2};
  ds::comm::Buffer b{x, 2, ds::comm::DType::kF32, {}};
  for (auto _ : state) pg.allreduce(b)->wait();
  state.SetLabel(ds::comm::FlightRecorder::instance().enabled() ? "recorder on" : "recorder off");
}
BENCHMARK(InlineAllreduce);

}  // namespace

BENCHMARK_MAIN();
