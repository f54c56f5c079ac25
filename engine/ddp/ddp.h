// DistributedDataParallel with PyTorch's mechanism (REFERENCE.md §4): gradient buckets whose
// allreduce is launched from inside backward, as soon as every gradient of the bucket is ready, in
// bucket order, while backward computes the earlier layers.
//
//   Mlp model(spec, seed);
//   DistributedDataParallel ddp(model, pg, {.bucketCapMb = 25});   // collective: verify + broadcast
//   loss = mse(ddp.forward(x), y, dOut);
//   ddp.backward(dOut);            // returns when every bucket is reduced and averaged
//   ddp.optimizerStep(*opt);       // timed, closes the step's statistics
//
// Threading: one training thread per rank calls everything here; collectives run on the process
// group's worker thread (that is where the overlap comes from). Every call that communicates is
// collective: all ranks must make it in the same order. Network errors and timeouts surface as the
// process group's exceptions (TimeoutError, BackendError) from backward().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/ddp/bucket.h"
#include "engine/ddp/comm_hook.h"
#include "engine/ddp/mlp.h"
#include "engine/ddp/ops.h"
#include "engine/ddp/optimizer.h"

namespace ds::ddp {

struct DdpOptions {
  double bucketCapMb = kDefaultBucketCapMb;
  // The first bucket's limit; a smaller bucket cap lowers it to the cap.
  std::size_t firstBucketBytes = kDefaultFirstBucketBytes;
  // Parameter gradients become views into the buckets (no copy in, no copy out).
  bool gradientAsBucketView = false;
  // false: one bucket per dtype, launched only after backward finished (the "no overlap" baseline).
  bool overlap = true;
  // Rebuild the buckets once, after the first synchronised backward, in the order gradients became
  // ready there (rank 0's order, broadcast).
  bool rebuildBuckets = true;
  // allreduce, fp16 or bf16 (makeCommHook); ignored when commHook is set.
  std::string commHookName = "allreduce";
  std::shared_ptr<CommHook> commHook;
};

// Where a rank runs, as far as the choice of overlap cares (chooseOverlap).
struct OverlapPlacement {
  bool cpu = true;         // host-memory collectives (false: GPU streams, which overlap by themselves)
  int rankCpus = 1;        // CPUs in the rank's affinity mask
  int hostCpus = 1;        // CPUs of the host
  int localRanks = 1;      // ranks on this host
  int computeThreads = 1;  // threads backward computes on (BLAS)
  bool multiHost = false;  // the group spans hosts: the allreduce mostly waits on the network
};

// Whether to overlap the gradients' allreduce with backward, and why (one sentence).
struct OverlapChoice {
  bool overlap = true;
  std::string reason;
};

// On CPU the collectives need CPU of their own (shm copies and reduces, gloo's TCP copies in the
// kernel). Ranks bound to cores that all compute backward: an allreduce beside it takes them and slows
// the step (2 ranks, mpirun's default binding, 25m preset, gloo: step 1.10x with overlap, shm 1.01x),
// so overlap is off. Unbound ranks no more than the host's CPUs: the scheduler runs the comm threads
// wherever a rank waits for its peer, and overlap gains (2 ranks on 2 cores unbound: gloo 0.92x, shm
// 0.97x, mpi 0.77x). On also where the rank has a CPU beyond its compute threads, where the comm waits
// on a network (several hosts) or on a GPU. A rank's CPUs: its affinity mask when that is narrower than
// the host (bound: mpirun, srun, taskset), else the host's CPUs shared among its ranks.
OverlapChoice chooseOverlap(const OverlapPlacement& p);
// The CPUs one rank can count on, as chooseOverlap reads them (at least 1).
int cpusPerRank(int rankCpus, int hostCpus, int localRanks);

// One backward, as the reducer saw it. Times are nanoseconds: the host's clock on the host; on a GPU
// the device's, from CUDA events on the default stream (ops::DeviceClock), so that timing a phase
// never drains the device, and read once the device got there.
struct IterationStats {
  bool synced = true;  // false inside no_sync: no communication
  std::int64_t forwardNs = 0;
  // Backward start to the last gradient ready (includes copying into buckets and launching).
  std::int64_t backwardComputeNs = 0;
  // First bucket launched to every bucket reduced (PyTorch's backward_comm_time).
  std::int64_t backwardCommNs = 0;
  // First launch to the end of backward compute, when positive (PyTorch's
  // backward_compute_comm_overlap_time).
  std::int64_t overlapNs = 0;
  // End of backward compute to every bucket reduced: the comm the step waited for.
  std::int64_t exposedCommNs = 0;
  // Sum of the collectives' own durations (time the comm thread was busy).
  std::int64_t commBusyNs = 0;
  // Hook finish and copy back to .grad after the waits.
  std::int64_t finalizeNs = 0;
  std::int64_t optimizerNs = 0;
  int bucketsLaunchedDuringBackward = 0;
  int buckets = 0;
};

// PyTorch's DDP logging data, averaged over the sampled iterations (the first 10, then every 100th).
struct DdpLoggingData {
  std::int64_t avg_forward_compute_time = 0;
  std::int64_t avg_backward_compute_time = 0;
  std::int64_t avg_backward_comm_time = 0;
  std::int64_t avg_backward_compute_comm_overlap_time = 0;
  std::int64_t avg_exposed_comm_time = 0;  // ours: not in PyTorch
  std::int64_t avg_optimizer_time = 0;     // ours
  std::vector<std::size_t> bucket_sizes;   // bytes, in bucket order
  int sampled_iterations = 0;
  int world_size = 1;
  std::string backend;
  std::string comm_hook;
  bool gradient_as_bucket_view = false;
  std::size_t bucket_cap_bytes = 0;
};

// What the reducer did during one backward, in order: for tests that assert on order, not timing.
enum class ReducerEventType {
  kBackwardStart,
  kGradReady,
  kBucketLaunched,
  kBackwardComputeEnd,
  kBucketReduced
};
struct ReducerEvent {
  ReducerEventType type;
  std::size_t index;  // parameter (kGradReady) or bucket (kBucketLaunched, kBucketReduced); else 0
};
const char* eventName(ReducerEventType t);

// The bucket machinery on its own: given the parameters and a process group, it is driven by
// prepareForBackward(), markGradReady(i) per parameter and finalizeBackward(). DistributedDataParallel
// drives it from the model's backward; tests may drive it by hand.
class Reducer {
 public:
  // Builds the initial buckets (no communication). params must outlive the reducer.
  Reducer(std::vector<Parameter>& params, comm::ProcessGroup& pg, const DdpOptions& options);
  // Frees the bucket buffers once the group is idle: after a failed backward (a timed-out bucket,
  // a peer lost) later buckets may still be reduced in place by the worker, and their buffers are
  // then kept (leaked) rather than freed under it. The group must outlive the reducer.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Starts a backward. sync=false: gradients only accumulate locally (no_sync).
  void prepareForBackward(bool sync);
  // Parameter i's gradient is final for this backward: copy it into its bucket divided by the world
  // size (or divide it in place when it is a bucket view), and launch every bucket that is now
  // complete, in bucket order. Throws ConfigError when i is marked twice in one backward.
  void markGradReady(std::size_t i);
  // Ends the backward: launches what is left, waits for every bucket, writes the averages to .grad.
  // Throws ConfigError naming the parameters that never got a gradient. Collective.
  void finalizeBackward();

  const std::vector<BucketSpec>& buckets() const { return specs_; }
  // Whether parameter i's .grad is the view into its bucket (gradient_as_bucket_view keeps it so).
  bool gradIsBucketView(std::size_t i) const;
  std::vector<std::size_t> bucketSizes() const;
  // The last backward's statistics. On a GPU reading them waits until the device finished that
  // backward's finalize (read after the step's synchronize, it costs nothing).
  const IterationStats& lastIteration() const;
  const std::vector<ReducerEvent>& lastEvents() const { return events_; }
  // The order gradients became ready in the first synchronised backward (this rank's).
  const std::vector<std::size_t>& recordedReadyOrder() const { return readyOrder_; }
  int rebuildCount() const { return rebuilds_; }
  const CommHook& commHook() const { return *hook_; }

 private:
  // The points of one backward on clock_.
  enum Point : std::size_t { kStart, kFirstLaunch, kComputeEnd, kCommEnd, kFinalizeEnd, kPoints };
  struct Bucket {
    BucketSpec spec;
    Tensor buffer;
    std::vector<std::size_t> offsets;  // element offset of each member
    std::size_t pending = 0;
    bool launched = false;
    std::shared_ptr<comm::Work> work;
    GradBucket grad;
  };
  void build(const std::vector<BucketSpec>& specs);
  void launch(std::size_t b);
  void rebuild();
  // Fills last_'s times from clock_ once (statsPending_).
  void resolveStats() const;

  std::vector<Parameter>& params_;
  comm::ProcessGroup& pg_;
  DdpOptions options_;
  std::shared_ptr<CommHook> hook_;
  BucketSizeLimits limits_;
  std::vector<BucketSpec> specs_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<std::size_t, std::size_t>> locator_;  // param -> (bucket, member)
  std::vector<bool> ready_;
  std::vector<std::size_t> readyOrder_;
  bool recordOrder_ = true;
  int rebuilds_ = 0;
  bool sync_ = true;
  bool inBackward_ = false;
  std::size_t nextLaunch_ = 0;
  std::size_t readyCount_ = 0;
  bool launchedAny_ = false;
  ops::DeviceClock clock_;
  mutable bool statsPending_ = false;
  mutable IterationStats last_;
  std::vector<ReducerEvent> events_;
};

class DistributedDataParallel {
 public:
  // Collective. Verifies that every rank has the same parameter count, shapes and dtypes (ConfigError
  // naming this rank and the first rank that differs, on every rank, never a hang), broadcasts the
  // parameters from rank 0, and builds the buckets.
  DistributedDataParallel(Mlp& model, comm::ProcessGroup& pg, DdpOptions options = {});

  // The model's forward, timed.
  const Tensor& forward(const Tensor& x);
  // The model's backward with every parameter's ready hook wired to the reducer; returns after the
  // buckets are reduced (unless inside no_sync). Collective unless inside no_sync.
  void backward(const Tensor& dOut);
  // The optimizer step, timed and recorded with the last iteration. Not collective.
  void optimizerStep(Optimizer& optimizer);

  // no_sync(): while the guard lives, backward only accumulates gradients locally.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(&ddp), previous_(ddp.requireSync_) {
      ddp.requireSync_ = false;
    }
    ~NoSyncGuard() {
      if (ddp_ != nullptr) ddp_->requireSync_ = previous_;
    }
    NoSyncGuard(NoSyncGuard&& o) noexcept : ddp_(o.ddp_), previous_(o.previous_) { o.ddp_ = nullptr; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard noSync() { return NoSyncGuard(*this); }

  Mlp& module() { return model_; }
  Reducer& reducer() { return *reducer_; }
  const DdpOptions& options() const { return options_; }
  // Every backward so far (no_sync ones too), with its forward's time and its optimizer time when a
  // step followed it. On a GPU reading them waits until the device got through the last of them.
  const std::vector<IterationStats>& iterations() const;
  DdpLoggingData loggingData() const;

 private:
  void verifyModelAcrossRanks();
  void broadcastParameters();
  // Moves the times on clock_ (and the reducer's) into iterations_.back(), once.
  void resolvePending() const;
  enum Point : std::size_t { kForwardStart, kForwardEnd, kOptimizerStart, kOptimizerEnd, kPoints };

  Mlp& model_;
  comm::ProcessGroup& pg_;
  DdpOptions options_;
  std::unique_ptr<Reducer> reducer_;
  bool requireSync_ = true;
  ops::DeviceClock clock_;
  mutable bool iterationPending_ = false;  // iterations_.back() waits for its times
  mutable bool optimizerPending_ = false;  // an optimizer step's times wait to join iterations_.back()
  mutable std::vector<IterationStats> iterations_;
};

// Whether PyTorch's DDP logger samples synced iteration `n` (1-based): the first 10, then every 100th.
bool isSampledIteration(long n);

// Runs `op` (a broadcast or allgather, waited for) on host vectors: DDP's model checks, the
// replicas' checksums, dsbench train's per-step figures. An nccl group moves device memory only, so on
// a GPU group the values travel through a staging copy on the group's device, as PyTorch's DDP puts
// its shape check on the module's device. `in` and `out` may be the same vector (in place). The values
// are moved, never reduced. Blocks; throws what the collective throws.
using HostCollective = std::function<std::shared_ptr<comm::Work>(const comm::Buffer&, const comm::Buffer&)>;
void exchangeHost(comm::ProcessGroup& pg, std::vector<std::int64_t>& in, std::vector<std::int64_t>& out,
                  const HostCollective& op);
void exchangeHost(comm::ProcessGroup& pg, std::vector<double>& in, std::vector<double>& out,
                  const HostCollective& op);

}  // namespace ds::ddp
