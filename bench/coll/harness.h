// The sweep harness (nccl-tests' TimeTest/BenchTime): one owner of warm-up, timing, data check and
// combining across ranks, for any CollSpec. Measuring only: it returns records and never prints.
//
// Collective: every rank of the group calls the same functions with the same arguments in the same
// order. Blocking. Every wait (an op, a barrier, a store exchange) is bounded by waitTimeout when
// given (-T), else by the group's / store's own timeout; running out throws TimeoutError.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/coll/collective.h"
#include "engine/comm/memory.h"
#include "engine/store/store.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::bench::coll {

struct HarnessOptions {
  int iters = 20;
  int warmupIters = 1;
  int check = 1;
  // > 0: per size, iterations grow until the timed loop should last at least this long (from a
  // pilot rounds, the slowest rank's), never fewer than `iters` nor more than maxAdaptiveIters.
  double minTimeS = 0;
  int maxAdaptiveIters = 100000;
  // Wait for each op and barrier the group before the next; per-iteration times are then wall
  // times from issue to completion. Otherwise (nccl-tests' default) all iterations are issued, then
  // waited, and per-iteration times are the ops' execution times (Work::duration()).
  bool blocking = false;
  int average = 1;  // -a: 0 rank 0, 1 average, 2 min, 3 max
  // -K: the first perIterSkip timed iterations are left out of every per-iteration statistic (the
  // place's and each rank's), not out of the loop time. Must be below iters (resolveOptions checks).
  int perIterSkip = 0;
  // -I 1|2: keep every iteration's time (the maximum over ranks) in PlaceResult::timesUs.
  bool keepTimes = false;
  comm::Timeout waitTimeout;
  // Keys of the harness's exchanges in the store (under the job's store; unique per group).
  std::string storePrefix = "ds/coll";
};

// -a: combines per-rank times. Pure.
double combineTimes(const std::vector<double>& perRank, int average);

class Harness {
 public:
  Harness(comm::ProcessGroup& pg, store::Store& store, comm::Memory& memory, HarnessOptions options);
  // Frees the buffers once the group is idle. While an exception unwinds (a failed or timed-out
  // wait), an abandoned op or queued iterations may still use them: they are then kept (leaked)
  // rather than freed under the backend.
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Allocates the buffers for `spec` on `dtype` up to maxBytes (as nccl-tests: once per table).
  void prepare(const CollSpec& spec, comm::DType dtype, std::size_t maxBytes);
  // nccl-tests' warm-up: warmupIters ops at the largest size, then at the smallest.
  void warmup(comm::ReduceOp op, int root, std::size_t minBytes, std::size_t maxBytes);
  // One row: out-of-place, then in-place (when the spec has it). The result is complete on rank 0
  // (every rank's times, wrong elements summed); other ranks get a record with their own times.
  report::SweepMeasurement measure(std::size_t requestedBytes, comm::ReduceOp op, int root);

 private:
  struct Timing {
    double loopUs = 0;
    long long wrong = 0;
    std::vector<double> itersUs;
  };
  Launch launch(const CollCounts& c, bool inPlace, comm::ReduceOp op, int root);
  void fillInputs(const CollCounts& c, bool inPlace, const CheckArgs& a);
  long long checkOnce(const CollCounts& c, bool inPlace, const CheckArgs& a);
  Timing timePlace(const CollCounts& c, bool inPlace, comm::ReduceOp op, int root);
  report::PlaceResult combine(const std::vector<Timing>& all, double sBytes, double factor) const;
  void barrier();
  std::vector<store::Bytes> allGather(const store::Bytes& mine);
  std::vector<store::Bytes> gatherToRoot(const store::Bytes& mine);
  // multiGet of base/<rank> for `ranks`; a timeout names the ranks that did not write theirs.
  std::vector<store::Bytes> gatherKeys(const std::string& base, const std::vector<int>& ranks);
  std::string nextKey();

  comm::ProcessGroup& pg_;
  store::Store& store_;
  comm::Memory& mem_;
  HarnessOptions o_;
  const CollSpec* spec_ = nullptr;
  comm::DType dtype_ = comm::DType::kF32;
  std::size_t elt_ = 4;
  comm::DeviceBuffer send_, recv_;
  std::vector<unsigned char> staging_;  // host copy for fills and checks when buffers are on a device
  std::uint64_t seq_ = 0;
  int rep_ = 0;
};

}  // namespace ds::bench::coll
