#include "engine/ddp/train_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/common/error.h"
#include "engine/ddp/ops.h"

namespace ds::ddp {

namespace {

using Clock = std::chrono::steady_clock;

void addInto(IterationStats& sum, const IterationStats& it) {
  sum.forwardNs += it.forwardNs;
  sum.backwardComputeNs += it.backwardComputeNs;
  sum.backwardCommNs += it.backwardCommNs;
  sum.overlapNs += it.overlapNs;
  sum.exposedCommNs += it.exposedCommNs;
  sum.commBusyNs += it.commBusyNs;
  sum.finalizeNs += it.finalizeNs;
  sum.optimizerNs += it.optimizerNs;
  sum.bucketsLaunchedDuringBackward += it.bucketsLaunchedDuringBackward;
  sum.buckets = std::max(sum.buckets, it.buckets);
}

void checkReplicas(comm::ProcessGroup& pg, std::uint64_t checksum, int step) {
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(checksum)};
  std::vector<std::int64_t> all(static_cast<std::size_t>(pg.size()));
  exchangeHost(pg, mine, all,
               [&](const comm::Buffer& in, const comm::Buffer& out) { return pg.allgather(in, out); });
  for (int r = 0; r < pg.size(); ++r) {
    if (all[r] != mine[0]) {
      throw InternalError(fmt::format(
          "DDP replicas diverged after step {}: rank {} has parameter checksum {:016x}, rank {} has {:016x}. "
          "The "
          "gradient averaging or the optimizer is not deterministic across ranks.",
          step, pg.rank(), static_cast<std::uint64_t>(mine[0]), r, static_cast<std::uint64_t>(all[r])));
    }
  }
}

}  // namespace

std::uint64_t parameterChecksum(const std::vector<Parameter>& params) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& p : params) {
    Tensor host = p.value.isCuda() ? p.value.to(Device{}) : p.value;
    const auto* bytes = static_cast<const unsigned char*>(host.raw());
    for (std::size_t i = 0; i < host.bytes(); ++i) {
      h ^= bytes[i];
      h *= 1099511628211ull;
    }
  }
  return h;
}

TrainResult train(const TrainConfig& c, comm::ProcessGroup* pg) {
  const int rank = pg != nullptr ? pg->rank() : 0;
  const int world = pg != nullptr ? pg->size() : 1;
  if (c.batch <= 0 || c.steps < 0 || c.accumulation <= 0) {
    throw ConfigError(fmt::format("train: batch ({}), steps ({}) and accumulation ({}) must be positive",
                                  c.batch, c.steps, c.accumulation));
  }
  DatasetOptions dopt;
  dopt.samples = c.samples;
  dopt.inDim = c.model.in();
  dopt.outDim = c.model.out();
  dopt.teacherHidden = c.teacherHidden;
  dopt.seed = c.dataSeed;
  TeacherStudentDataset data(dopt);
  SamplerOptions sopt;
  sopt.numReplicas = world;
  sopt.rank = rank;
  sopt.shuffle = c.shuffle;
  sopt.seed = c.samplerSeed;
  DistributedSampler sampler(data.size(), sopt);
  const std::size_t batchesPerEpoch = sampler.numSamples() / static_cast<std::size_t>(c.batch);
  if (batchesPerEpoch == 0) {
    throw ConfigError(
        fmt::format("train: a per-rank batch of {} is larger than each rank's shard of {} samples ({} "
                    "samples over {} ranks); "
                    "use more samples or a smaller batch",
                    c.batch, sampler.numSamples(), data.size(), world));
  }

  Mlp model(c.model, c.modelSeed + static_cast<std::uint64_t>(rank) * c.seedStridePerRank, c.device,
            c.dtype);
  std::unique_ptr<DistributedDataParallel> ddp;
  if (pg != nullptr) ddp = std::make_unique<DistributedDataParallel>(model, *pg, c.ddp);
  auto optimizer = makeOptimizer(c.optimizer);

  TrainResult result;
  result.paramCount = c.model.paramCount();
  std::vector<std::size_t> epochIndices = sampler.indices();
  std::size_t cursor = 0;
  std::uint64_t epoch = 0;
  auto nextBatch = [&] {
    if (cursor + static_cast<std::size_t>(c.batch) > epochIndices.size()) {
      sampler.setEpoch(++epoch);
      epochIndices = sampler.indices();
      cursor = 0;
    }
    std::vector<std::size_t> idx(epochIndices.begin() + static_cast<std::ptrdiff_t>(cursor),
                                 epochIndices.begin() + static_cast<std::ptrdiff_t>(cursor + c.batch));
    cursor += static_cast<std::size_t>(c.batch);
    return idx;
  };
  // The dataset is f32; a bf16 model gets its batches rounded to bf16 (as x.to(torch.bfloat16)), into
  // tensors kept across steps (no allocation per step beyond the f32 batch's own).
  Tensor x32, y32;
  auto load = [&](const std::vector<std::size_t>& idx, Tensor& bx, Tensor& by) {
    if (c.dtype == DType::kF32) {
      data.batch(idx, bx, by, c.device);
      return;
    }
    data.batch(idx, x32, y32, c.device);
    if (!bx.defined() || bx.shape() != x32.shape()) bx = Tensor::zeros(x32.shape(), c.dtype, c.device);
    if (!by.defined() || by.shape() != y32.shape()) by = Tensor::zeros(y32.shape(), c.dtype, c.device);
    ops::scaleCopy(x32, 1.0f, bx);
    ops::scaleCopy(y32, 1.0f, by);
  };
  Tensor dOut = Tensor::zeros({c.batch, c.model.out()}, c.dtype, c.device);
  // The fixed evaluation batch: the model's own forward (DDP's would expect a backward), its loss
  // gradient written to a scratch tensor and dropped.
  const int evalN = std::min<int>(std::max(0, c.evalSamples), static_cast<int>(data.size()));
  auto evalLoss = [&] {
    std::vector<std::size_t> idx(static_cast<std::size_t>(evalN));
    for (int i = 0; i < evalN; ++i) idx[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i);
    Tensor ex, ey;
    load(idx, ex, ey);
    Tensor scratch = Tensor::zeros({evalN, c.model.out()}, c.dtype, c.device);
    return ops::mseLoss(model.forward(ex), ey, 1.0f, scratch);
  };
  const float gradScale = 1.0f / static_cast<float>(c.accumulation);
  if (evalN > 0) result.evalLossStart = evalLoss();
  model.zeroGrad();
  // The step's micro-batches, loaded before the device timer starts (kept across steps).
  std::vector<Tensor> xs(static_cast<std::size_t>(c.accumulation)), ys(xs.size());
  // The step's device time (CUDA events; none on the host).
  ops::DeviceClock stepClock(c.device, 2);
  // The step's loss, summed on the device and read once the step is done (no read-back per micro-step).
  ops::LossSum stepLoss(c.device);
  for (int step = 0; step < c.steps; ++step) {
    const auto t0 = Clock::now();
    StepRecord rec;
    const std::size_t before = ddp ? ddp->iterations().size() : 0;
    for (std::size_t micro = 0; micro < xs.size(); ++micro) load(nextBatch(), xs[micro], ys[micro]);
    stepLoss.reset();
    stepClock.mark(0);
    for (int micro = 0; micro < c.accumulation; ++micro) {
      const Tensor& x = xs[static_cast<std::size_t>(micro)];
      const Tensor& y = ys[static_cast<std::size_t>(micro)];
      if (ddp) {
        const Tensor& out = ddp->forward(x);
        ops::mseLossInto(out, y, gradScale, dOut, stepLoss, 1.0 / c.accumulation);
        if (micro + 1 < c.accumulation) {
          auto guard = ddp->noSync();
          ddp->backward(dOut);
        } else {
          ddp->backward(dOut);
        }
      } else {
        const Tensor& out = model.forward(x);
        ops::mseLossInto(out, y, gradScale, dOut, stepLoss, 1.0 / c.accumulation);
        model.backward(dOut);
      }
    }
    if (ddp) {
      ddp->optimizerStep(*optimizer);
    } else {
      optimizer->step(model.parameters());
    }
    model.zeroGrad();
    stepClock.mark(1);
    ops::synchronize(c.device);
    rec.stepNs = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    rec.deviceStepNs = stepClock.onDevice() ? stepClock.ns(0, 1) : 0;
    rec.loss = stepLoss.value();
    if (ddp) {
      for (std::size_t k = before; k < ddp->iterations().size(); ++k) addInto(rec.ddp, ddp->iterations()[k]);
    }
    if (c.checkReplicas && pg != nullptr) {
      checkReplicas(*pg, parameterChecksum(model.parameters()), step);
      ++result.replicaChecks;
    }
    result.steps.push_back(rec);
  }
  if (evalN > 0) result.evalLossEnd = evalLoss();
  for (const auto& p : model.parameters()) {
    auto v = p.value.toVector();
    result.finalParams.insert(result.finalParams.end(), v.begin(), v.end());
  }
  result.finalChecksum = parameterChecksum(model.parameters());
  if (ddp) {
    result.buckets = ddp->reducer().buckets();
    result.logging = ddp->loggingData();
  }
  return result;
}

}  // namespace ds::ddp
