#include "engine/ddp/ddp.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "engine/common/error.h"
#include "engine/ddp/ops.h"

namespace ds::ddp {

namespace {

// Per parameter: dtype, device type, rank of the shape and up to 4 dims (-1 padded).
constexpr std::size_t kMaxDims = 4;
constexpr std::size_t kDescWidth = 3 + kMaxDims;

std::string describeDesc(const std::int64_t* d) {
  std::vector<std::int64_t> shape(d + 3, d + 3 + d[2]);
  return fmt::format("{} {}", Tensor::shapeString(shape), comm::dtypeName(static_cast<DType>(d[0])));
}

}  // namespace

const char* eventName(ReducerEventType t) {
  switch (t) {
    case ReducerEventType::kBackwardStart:
      return "backward_start";
    case ReducerEventType::kGradReady:
      return "grad_ready";
    case ReducerEventType::kBucketLaunched:
      return "bucket_launched";
    case ReducerEventType::kBackwardComputeEnd:
      return "backward_compute_end";
    default:
      return "bucket_reduced";
  }
}

namespace {

// exchangeHost for `n`/`nOut` elements of 8 bytes (int64, f64) at `in`/`out` (the same pointer: in place).
void exchangeHost8(comm::ProcessGroup& pg, comm::DType dtype, void* in, std::size_t n, void* out,
                   std::size_t nOut, const HostCollective& op) {
  const comm::Device device = pg.options().device;
  if (device.type == comm::DeviceType::kCpu) {
    op(comm::Buffer{in, n, dtype, comm::Device{}}, comm::Buffer{out, nOut, dtype, comm::Device{}})->wait();
    return;
  }
  // Tensors hold f32/f16/bf16 only: the 8-byte values ride as raw bytes in an f32 tensor of twice the
  // elements; broadcast and allgather copy bits and never reduce them.
  Tensor h = Tensor::zeros({static_cast<std::int64_t>(2 * n)});
  if (n > 0) std::memcpy(h.raw(), in, n * 8);
  Tensor din = h.to(device);
  Tensor dout = in == out ? din : Tensor::zeros({static_cast<std::int64_t>(2 * nOut)}, DType::kF32, device);
  op(comm::Buffer{din.raw(), n, dtype, device}, comm::Buffer{dout.raw(), nOut, dtype, device})->wait();
  ops::synchronize(device);
  Tensor back = dout.to(comm::Device{});
  if (nOut > 0) std::memcpy(out, back.raw(), nOut * 8);
}

}  // namespace

void exchangeHost(comm::ProcessGroup& pg, std::vector<std::int64_t>& in, std::vector<std::int64_t>& out,
                  const HostCollective& op) {
  exchangeHost8(pg, comm::DType::kI64, in.data(), in.size(), out.data(), out.size(), op);
}

void exchangeHost(comm::ProcessGroup& pg, std::vector<double>& in, std::vector<double>& out,
                  const HostCollective& op) {
  exchangeHost8(pg, comm::DType::kF64, in.data(), in.size(), out.data(), out.size(), op);
}

bool isSampledIteration(long n) { return n >= 1 && (n <= 10 || n % 100 == 0); }

// ------------------------------------------------------------------------------------------------
// Reducer

int cpusPerRank(int rankCpus, int hostCpus, int localRanks) {
  if (rankCpus < hostCpus) return std::max(1, rankCpus);
  return std::max(1, hostCpus / std::max(1, localRanks));
}

OverlapChoice chooseOverlap(const OverlapPlacement& p) {
  if (!p.cpu) return {true, "on: the allreduce runs on the GPU's own stream"};
  const bool bound = p.rankCpus < p.hostCpus;
  const int perRank = cpusPerRank(p.rankCpus, p.hostCpus, p.localRanks);
  const std::string cpus = bound
                               ? fmt::format("{} CPU{} (its affinity mask)", perRank, perRank == 1 ? "" : "s")
                               : fmt::format("{} CPU{} ({} for {} ranks on this host)", perRank,
                                             perRank == 1 ? "" : "s", p.hostCpus, p.localRanks);
  if (perRank > p.computeThreads) {
    return {true, fmt::format("on: each rank has {} and backward computes on {}, so the allreduce gets a "
                              "core of its own",
                              cpus, p.computeThreads)};
  }
  if (p.multiHost) {
    return {true, fmt::format("on: each rank has {}, all computing, but the ranks span hosts and the "
                              "allreduce mostly waits on the network",
                              cpus)};
  }
  if (!bound && p.localRanks <= p.hostCpus) {
    return {true,
            fmt::format("on: each rank has {}, all computing, but no rank is bound to its cores: the "
                        "allreduce's threads run on whichever CPU a rank leaves idle while it waits for "
                        "its peer",
                        cpus)};
  }
  return {false, fmt::format("off: each rank has {}, all computing backward ({} thread{}); an allreduce "
                             "beside it would take them and slow the step, so the buckets go after backward",
                             cpus, p.computeThreads, p.computeThreads == 1 ? "" : "s")};
}

Reducer::~Reducer() {
  if (pg_.waitIdle(comm::ProcessGroup::kAbandonedOpGrace)) return;
  // Deliberately never freed: an op still running on the group's worker writes into these buffers.
  static_cast<void>(new std::vector<Bucket>(std::move(buckets_)));
}

Reducer::Reducer(std::vector<Parameter>& params, comm::ProcessGroup& pg, const DdpOptions& options)
    : params_(params),
      pg_(pg),
      options_(options),
      clock_(params.empty() ? Device{} : params.front().value.device(), kPoints) {
  hook_ = options.commHook ? options.commHook : makeCommHook(options.commHookName);
  if (options.overlap) {
    // A cap below 1 MiB also caps the first bucket, so that a small bucket_cap_mb really gives small
    // buckets (PyTorch keeps the first at 1 MiB regardless).
    limits_.bucketCapBytes = bucketCapBytes(options.bucketCapMb);
    limits_.firstBucketBytes = std::min(options.firstBucketBytes, limits_.bucketCapBytes);
  } else {
    limits_.firstBucketBytes = kUnlimitedBucketBytes;
    limits_.bucketCapBytes = kUnlimitedBucketBytes;
  }
  recordOrder_ = options.rebuildBuckets && options.overlap;
  std::vector<BucketParam> bp;
  for (auto& p : params_) {
    if (p.value.dtype() != p.grad.dtype() || p.value.numel() != p.grad.numel()) {
      throw ConfigError(fmt::format("parameter {}: gradient {} {} does not match the value {} {}", p.name,
                                    comm::dtypeName(p.grad.dtype()), p.grad.shapeString(),
                                    comm::dtypeName(p.value.dtype()), p.value.shapeString()));
    }
    bp.push_back({p.value.numel(), p.value.dtype(), p.value.device()});
  }
  build(assignBuckets(bp, limits_));
  ready_.assign(params_.size(), false);
}

void Reducer::build(const std::vector<BucketSpec>& specs) {
  DS_CHECK(!inBackward_, "buckets rebuilt during a backward");
  std::vector<Bucket> fresh;
  locator_.assign(params_.size(), {0, 0});
  for (std::size_t b = 0; b < specs.size(); ++b) {
    Bucket bucket;
    bucket.spec = specs[b];
    bucket.buffer =
        Tensor::zeros({static_cast<std::int64_t>(specs[b].numel)}, specs[b].dtype, specs[b].device);
    std::size_t offset = 0;
    for (std::size_t m = 0; m < specs[b].params.size(); ++m) {
      std::size_t i = specs[b].params[m];
      bucket.offsets.push_back(offset);
      locator_[i] = {b, m};
      if (options_.gradientAsBucketView) {
        Parameter& p = params_[i];
        Tensor view = bucket.buffer.view(offset, p.grad.numel(), p.grad.shape());
        ops::copy(p.grad, view);  // keep what the gradient held (rebuild happens before the optimizer)
        p.grad = view;
      }
      offset += params_[i].value.numel();
    }
    bucket.grad.index = b;
    bucket.grad.buffer = bucket.buffer;
    fresh.push_back(std::move(bucket));
  }
  buckets_ = std::move(fresh);
  specs_ = specs;
}

std::vector<std::size_t> Reducer::bucketSizes() const {
  std::vector<std::size_t> out;
  for (const auto& s : specs_) out.push_back(s.bytes);
  return out;
}

bool Reducer::gradIsBucketView(std::size_t i) const {
  auto [b, m] = locator_.at(i);
  const Bucket& bucket = buckets_[b];
  const Tensor& g = params_[i].grad;
  return g.sameMemory(bucket.buffer.view(bucket.offsets[m], g.numel(), g.shape()));
}

const IterationStats& Reducer::lastIteration() const {
  resolveStats();
  return last_;
}

void Reducer::resolveStats() const {
  if (!statsPending_) return;
  statsPending_ = false;
  last_.backwardComputeNs = clock_.ns(kStart, kComputeEnd);
  if (!clock_.marked(kCommEnd)) return;  // no_sync, or a backward that failed
  last_.backwardCommNs = launchedAny_ ? clock_.ns(kFirstLaunch, kCommEnd) : 0;
  last_.overlapNs = launchedAny_ ? std::max<std::int64_t>(0, clock_.ns(kFirstLaunch, kComputeEnd)) : 0;
  last_.exposedCommNs = clock_.ns(kComputeEnd, kCommEnd);
  last_.finalizeNs = clock_.ns(kCommEnd, kFinalizeEnd);
}

void Reducer::prepareForBackward(bool sync) {
  DS_CHECK(!inBackward_, "prepareForBackward twice without finalizeBackward");
  resolveStats();  // the previous backward's, before its points are reused
  inBackward_ = true;
  sync_ = sync;
  std::fill(ready_.begin(), ready_.end(), false);
  readyCount_ = 0;
  nextLaunch_ = 0;
  launchedAny_ = false;
  for (auto& b : buckets_) {
    b.pending = b.spec.params.size();
    b.launched = false;
    b.work.reset();
  }
  events_.clear();
  events_.push_back({ReducerEventType::kBackwardStart, 0});
  last_ = IterationStats{};
  last_.synced = sync;
  last_.buckets = static_cast<int>(buckets_.size());
  clock_.clear();
  clock_.mark(kStart);
  statsPending_ = true;
}

void Reducer::markGradReady(std::size_t i) {
  DS_CHECK(inBackward_, "markGradReady({}) outside a backward", i);
  if (i >= params_.size()) {
    throw ConfigError(
        fmt::format("markGradReady: parameter index {} out of range ({} parameters)", i, params_.size()));
  }
  if (ready_[i]) {
    throw ConfigError(
        fmt::format("Expected to mark a variable ready only once: parameter {} ({}) was marked ready twice "
                    "in one backward. "
                    "Each parameter must get exactly one gradient per backward.",
                    i, params_[i].name));
  }
  ready_[i] = true;
  ++readyCount_;
  events_.push_back({ReducerEventType::kGradReady, i});
  if (!sync_) return;  // no_sync: the gradient stays in .grad and accumulates
  if (recordOrder_ && rebuilds_ == 0) readyOrder_.push_back(i);

  auto [b, m] = locator_[i];
  Bucket& bucket = buckets_[b];
  Parameter& p = params_[i];
  const float inv = 1.0f / static_cast<float>(pg_.size());
  Tensor slot = bucket.buffer.view(bucket.offsets[m], p.grad.numel(), p.grad.shape());
  if (p.grad.sameMemory(slot)) {
    if (pg_.size() > 1) ops::scale(slot, inv);
  } else {
    ops::scaleCopy(p.grad, inv, slot);
    // A gradient the caller replaced (a fresh tensor after zero_grad(set_to_none=True)) becomes a
    // bucket view again, as PyTorch's reducer does (grad = bucket_view).
    if (options_.gradientAsBucketView) p.grad = slot;
  }
  DS_CHECK(bucket.pending > 0, "bucket {} completed twice", b);
  --bucket.pending;
  if (!options_.overlap) return;  // the baseline launches everything after backward
  while (nextLaunch_ < buckets_.size() && buckets_[nextLaunch_].pending == 0) launch(nextLaunch_++);
}

void Reducer::launch(std::size_t b) {
  Bucket& bucket = buckets_[b];
  if (!launchedAny_) {
    clock_.mark(kFirstLaunch);
    launchedAny_ = true;
  }
  // GPU gradients are written by kernels on the default stream; the collective must see them. nccl
  // orders itself after them on the device (no drain); a backend that reads the bucket from the host
  // needs the device drained first.
  if (!pg_.ordersAfterDeviceWork()) ops::synchronize(bucket.buffer.device());
  bucket.work = hook_->launch(pg_, bucket.grad);
  bucket.launched = true;
  events_.push_back({ReducerEventType::kBucketLaunched, b});
}

void Reducer::finalizeBackward() {
  DS_CHECK(inBackward_, "finalizeBackward without prepareForBackward");
  clock_.mark(kComputeEnd);
  events_.push_back({ReducerEventType::kBackwardComputeEnd, 0});
  inBackward_ = false;
  if (readyCount_ != params_.size()) {
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!ready_[i]) missing.push_back(fmt::format("{} ({})", i, params_[i].name));
    }
    throw ConfigError(fmt::format(
        "DDP expected every parameter to receive a gradient in this backward, but {} did not: {}. Every rank "
        "would wait for buckets that never complete; make each parameter take part in the loss.",
        missing.size(), fmt::join(missing, ", ")));
  }
  if (!sync_) return;
  last_.bucketsLaunchedDuringBackward = static_cast<int>(nextLaunch_);
  while (nextLaunch_ < buckets_.size()) launch(nextLaunch_++);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].work->wait();
    events_.push_back({ReducerEventType::kBucketReduced, b});
    last_.commBusyNs +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(buckets_[b].work->duration()).count();
  }
  clock_.mark(kCommEnd);
  for (auto& bucket : buckets_) {
    hook_->finish(bucket.grad);
    for (std::size_t m = 0; m < bucket.spec.params.size(); ++m) {
      Parameter& p = params_[bucket.spec.params[m]];
      Tensor slot = bucket.buffer.view(bucket.offsets[m], p.grad.numel(), p.grad.shape());
      if (!p.grad.sameMemory(slot)) ops::copy(slot, p.grad);
    }
  }
  // The copies back are queued on the device's default stream, where the optimizer follows them: no
  // drain here (the finalize time is the device's, on a GPU).
  clock_.mark(kFinalizeEnd);
  if (recordOrder_ && rebuilds_ == 0) rebuild();
}

void Reducer::rebuild() {
  // Rank 0's order wins, so that every rank builds the same buckets even if their backward orders
  // differed.
  std::vector<std::int64_t> order(params_.size());
  DS_CHECK(readyOrder_.size() == params_.size(), "ready order of {} of {} parameters", readyOrder_.size(),
           params_.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<std::int64_t>(readyOrder_[k]);
  exchangeHost(pg_, order, order,
               [&](const comm::Buffer& in, const comm::Buffer&) { return pg_.broadcast(in, 0); });
  std::vector<std::size_t> rank0Order;
  for (auto v : order) rank0Order.push_back(static_cast<std::size_t>(v));
  std::vector<BucketParam> bp;
  for (auto& p : params_) bp.push_back({p.value.numel(), p.value.dtype(), p.value.device()});
  build(assignBuckets(bp, limits_, rank0Order));
  ++rebuilds_;
}

// ------------------------------------------------------------------------------------------------
// DistributedDataParallel

DistributedDataParallel::DistributedDataParallel(Mlp& model, comm::ProcessGroup& pg, DdpOptions options)
    : model_(model), pg_(pg), options_(std::move(options)), clock_(model.device(), kPoints) {
  // Every rank checks the same thing, so all refuse together (nothing collective runs before).
  for (const auto& p : model_.parameters()) {
    if (p.value.device().type != pg_.options().device.type) {
      throw ConfigError(fmt::format(
          "DDP: parameter {} is on {}, but the process group (backend {}) works on {}: its backend moves "
          "{} memory only. Use backend nccl for a model on the GPU (or a CUDA-aware MPI), or train on the "
          "host (DS_ACCELERATOR=cpu).",
          p.name, comm::deviceName(p.value.device()), pg_.backendName(), comm::deviceName(pg_.options().device),
          pg_.options().device.type == comm::DeviceType::kCpu ? "host" : "device"));
    }
  }
  verifyModelAcrossRanks();
  broadcastParameters();
  reducer_ = std::make_unique<Reducer>(model_.parameters(), pg_, options_);
}

void DistributedDataParallel::verifyModelAcrossRanks() {
  auto& params = model_.parameters();
  const int size = pg_.size();
  const int rank = pg_.rank();
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(params.size())};
  std::vector<std::int64_t> counts(static_cast<std::size_t>(size));
  auto allgather = [&](const comm::Buffer& in, const comm::Buffer& out) { return pg_.allgather(in, out); };
  exchangeHost(pg_, mine, counts, allgather);
  for (int r = 0; r < size; ++r) {
    if (counts[r] != mine[0]) {
      throw ConfigError(
          fmt::format("DDP expects same model across all ranks, but Rank {} has {} params, while rank {} has "
                      "inconsistent {} "
                      "params. Build the same model (same spec) on every rank before wrapping it in DDP.",
                      rank, mine[0], r, counts[r]));
    }
  }
  std::vector<std::int64_t> desc(params.size() * kDescWidth, -1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = params[i].value;
    DS_CHECK(v.shape().size() <= kMaxDims, "parameter {} has more than {} dimensions", params[i].name,
             kMaxDims);
    std::int64_t* d = desc.data() + i * kDescWidth;
    d[0] = static_cast<std::int64_t>(v.dtype());
    d[1] = static_cast<std::int64_t>(v.device().type);
    d[2] = static_cast<std::int64_t>(v.shape().size());
    for (std::size_t k = 0; k < v.shape().size(); ++k) d[3 + k] = v.shape()[k];
  }
  std::vector<std::int64_t> all(desc.size() * static_cast<std::size_t>(size));
  if (!desc.empty()) exchangeHost(pg_, desc, all, allgather);
  for (int r = 0; r < size; ++r) {
    const std::int64_t* theirs = all.data() + static_cast<std::size_t>(r) * desc.size();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::int64_t* a = desc.data() + i * kDescWidth;
      const std::int64_t* b = theirs + i * kDescWidth;
      if (!std::equal(a, a + kDescWidth, b)) {
        throw ConfigError(fmt::format(
            "DDP expects same model across all ranks, but Rank {} has params[{}] ({}) of {}, while rank {} "
            "has "
            "inconsistent {}. Build the same model (same spec) on every rank before wrapping it in DDP.",
            rank, i, params[i].name, describeDesc(a), r, describeDesc(b)));
      }
    }
  }
}

void DistributedDataParallel::broadcastParameters() {
  std::vector<std::shared_ptr<comm::Work>> works;
  for (auto& p : model_.parameters()) {
    if (!pg_.ordersAfterDeviceWork()) ops::synchronize(p.value.device());
    works.push_back(pg_.broadcast(p.value.buffer(), 0));
  }
  for (auto& w : works) w->wait();
}

// The phases are timed on clock_ (CUDA events on a GPU) and their times collected when asked for or
// when the next forward reuses the points: no phase drains the device to be timed. (A forward that
// collects the previous step's optimizer time waits, on a GPU, until that step is done; dsbench's
// loop has synchronised by then, as a loop that reads its loss has.)
const Tensor& DistributedDataParallel::forward(const Tensor& x) {
  resolvePending();
  clock_.clear();
  clock_.mark(kForwardStart);
  const Tensor& out = model_.forward(x);
  clock_.mark(kForwardEnd);
  return out;
}

void DistributedDataParallel::backward(const Tensor& dOut) {
  resolvePending();  // an earlier backward's times, before this one's replace the reducer's
  reducer_->prepareForBackward(requireSync_);
  model_.backward(dOut, [this](std::size_t i) { reducer_->markGradReady(i); });
  reducer_->finalizeBackward();
  iterations_.push_back(IterationStats{});
  iterationPending_ = true;
}

void DistributedDataParallel::optimizerStep(Optimizer& optimizer) {
  clock_.mark(kOptimizerStart);
  optimizer.step(model_.parameters());
  clock_.mark(kOptimizerEnd);
  optimizerPending_ = true;
}

void DistributedDataParallel::resolvePending() const {
  if (iterationPending_) {
    iterationPending_ = false;
    IterationStats s = reducer_->lastIteration();
    s.forwardNs = clock_.ns(kForwardStart, kForwardEnd);
    s.optimizerNs = iterations_.back().optimizerNs;
    iterations_.back() = s;
  }
  if (optimizerPending_) {
    optimizerPending_ = false;
    if (!iterations_.empty()) iterations_.back().optimizerNs += clock_.ns(kOptimizerStart, kOptimizerEnd);
  }
}

const std::vector<IterationStats>& DistributedDataParallel::iterations() const {
  resolvePending();
  return iterations_;
}

DdpLoggingData DistributedDataParallel::loggingData() const {
  resolvePending();
  DdpLoggingData d;
  d.bucket_sizes = reducer_->bucketSizes();
  d.world_size = pg_.size();
  d.backend = pg_.backendName();
  d.comm_hook = reducer_->commHook().name();
  d.gradient_as_bucket_view = options_.gradientAsBucketView;
  d.bucket_cap_bytes = options_.overlap ? bucketCapBytes(options_.bucketCapMb) : kUnlimitedBucketBytes;
  long n = 0;
  std::int64_t f = 0, bc = 0, cm = 0, ov = 0, ex = 0, op = 0;
  for (const auto& it : iterations_) {
    if (!it.synced) continue;
    ++n;
    if (!isSampledIteration(n)) continue;
    ++d.sampled_iterations;
    f += it.forwardNs;
    bc += it.backwardComputeNs;
    cm += it.backwardCommNs;
    ov += it.overlapNs;
    ex += it.exposedCommNs;
    op += it.optimizerNs;
  }
  if (d.sampled_iterations > 0) {
    const auto k = d.sampled_iterations;
    d.avg_forward_compute_time = f / k;
    d.avg_backward_compute_time = bc / k;
    d.avg_backward_comm_time = cm / k;
    d.avg_backward_compute_comm_overlap_time = ov / k;
    d.avg_exposed_comm_time = ex / k;
    d.avg_optimizer_time = op / k;
  }
  return d;
}

}  // namespace ds::ddp
