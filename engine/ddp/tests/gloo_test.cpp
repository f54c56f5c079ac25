// DDP across ranks run as threads over gloo (one process group per thread, one HashStore): equivalence
// with a single process, no_sync, gradient_as_bucket_view, replicas, hooks, rebuild, mismatched
// models and the overlap's event order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "engine/comm/tests/matrix.h"
#include "engine/common/error.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ops.h"
#include "engine/ddp/tests/scenario.h"
#include "engine/ddp/train_loop.h"

using namespace ds::ddp;
using ds::comm::DType;
using ds::comm::ProcessGroup;
using ds::comm::ProcessGroupOptions;
using ds::comm::testing::runThreads;
namespace dt = ds::ddp::testing;

namespace {

// Several ranks share 2 cores: one BLAS thread each. A bounded op timeout: a bug fails, never hangs.
ProcessGroupOptions groupOptions() {
  ops::setBlasThreads(1);
  ProcessGroupOptions o;
  o.timeout = std::chrono::seconds(30);
  return o;
}

std::vector<TrainResult> trainOnThreads(const TrainConfig& c, int n) {
  std::vector<TrainResult> results(static_cast<std::size_t>(n));
  runThreads(
      "gloo", n, [&](ProcessGroup& pg) { results[static_cast<std::size_t>(pg.rank())] = train(c, &pg); },
      groupOptions());
  return results;
}

TrainResult reference(const TrainConfig& c) {
  ops::setBlasThreads(1);
  return train(c, nullptr);
}

void expectMatchesReference(const std::vector<TrainResult>& ranks, const TrainResult& ref, int steps) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    auto d = dt::compareParams(ranks[r].finalParams, ref.finalParams);
    EXPECT_LE(d.maxAbs, dt::kParamTolerance)
        << "rank " << r << " differs from the single process at parameter " << d.index << " (" << d.sizeA
        << " vs " << d.sizeB << " values)";
    if (r == 0)
      std::printf("max |param - single process| = %.3g (tolerance %.1g)\n", d.maxAbs, dt::kParamTolerance);
    EXPECT_EQ(ranks[r].finalChecksum, ranks[0].finalChecksum) << "rank " << r;
    EXPECT_EQ(ranks[r].replicaChecks, steps);
  }
}

// ---------------------------------------------------------------------------------------------

struct EquivCase {
  int n;
  const char* optimizer;
};

void PrintTo(const EquivCase& c, std::ostream* os) { *os << c.optimizer << " n=" << c.n; }

class Equivalence : public ::testing::TestWithParam<EquivCase> {};

TEST_P(Equivalence, NRanksWithBatchBOverNMatchOneProcessWithBatchB) {
  const auto [n, opt] = GetParam();
  TrainResult ref = reference(dt::referenceConfig(opt));
  auto ranks = trainOnThreads(dt::ddpConfig(opt, n), n);
  expectMatchesReference(ranks, ref, dt::kSteps);
  EXPECT_GT(ranks[0].buckets.size(), 2u) << "the run must use several buckets";
  // The tolerance must be far below how much training moved the parameters.
  TrainConfig untrained = dt::referenceConfig(opt);
  untrained.steps = 0;
  EXPECT_GT(dt::compareParams(reference(untrained).finalParams, ref.finalParams).maxAbs,
            50 * dt::kParamTolerance);
}

INSTANTIATE_TEST_SUITE_P(GlooThreads, Equivalence,
                         ::testing::Values(EquivCase{1, "sgd"}, EquivCase{2, "sgd"}, EquivCase{4, "sgd"},
                                           EquivCase{1, "adamw"}, EquivCase{2, "adamw"},
                                           EquivCase{4, "adamw"}),
                         [](const auto& info) {
                           return std::string(info.param.optimizer) + "_n" + std::to_string(info.param.n);
                         });

TEST(NoSync, AccumulatingTwoMicroStepsMatchesOneProcess) {
  for (const char* opt : {"sgd", "adamw"}) {
    for (int n : {2, 4}) {
      SCOPED_TRACE(std::string(opt) + " n=" + std::to_string(n));
      TrainResult ref = reference(dt::referenceConfig(opt));
      auto ranks = trainOnThreads(dt::ddpConfig(opt, n, 2), n);
      expectMatchesReference(ranks, ref, dt::kSteps);
    }
  }
}

TEST(GradientAsBucketView, MatchesOneProcessWithAndWithoutNoSync) {
  for (int accumulation : {1, 2}) {
    SCOPED_TRACE("accumulation " + std::to_string(accumulation));
    TrainConfig c = dt::ddpConfig("sgd", 2, accumulation);
    c.ddp.gradientAsBucketView = true;
    expectMatchesReference(trainOnThreads(c, 2), reference(dt::referenceConfig("sgd")), dt::kSteps);
  }
}

TEST(GradientAsBucketView, GradientsAreViewsIntoOneFlatBucket) {
  runThreads(
      "gloo", 2,
      [](ProcessGroup& pg) {
        Mlp model(parseModelSpec("mlp:8x3,in=4,out=2"), 1);
        DdpOptions o;
        o.gradientAsBucketView = true;
        DistributedDataParallel ddp(model, pg, o);
        const auto& buckets = ddp.reducer().buckets();
        ASSERT_EQ(buckets.size(), 1u);  // 0.4 KB of gradients: one bucket under the 1 MiB first cap
        auto& ps = model.parameters();
        for (std::size_t m = 1; m < buckets[0].params.size(); ++m) {
          const auto& prev = ps[buckets[0].params[m - 1]].grad;
          const auto& cur = ps[buckets[0].params[m]].grad;
          EXPECT_EQ(static_cast<char*>(prev.raw()) + prev.bytes(), static_cast<char*>(cur.raw()))
              << "member " << m << " is not adjacent to the previous one in the bucket";
        }
        // And the averaged gradient lands in .grad without a copy: grads are rank+1 everywhere.
        ddp.reducer().prepareForBackward(true);
        for (std::size_t i : buckets[0].params) {
          auto& g = ps[i].grad;
          for (std::size_t k = 0; k < g.numel(); ++k) g.data<float>()[k] = static_cast<float>(pg.rank() + 1);
          ddp.reducer().markGradReady(i);
        }
        ddp.reducer().finalizeBackward();
        for (auto& p : ps) EXPECT_EQ(p.grad.toVector()[0], 1.5f) << p.name;
      },
      groupOptions());
}

// With and without gradient_as_bucket_view the arithmetic is the same (x / world, then the sum), so
// gradients and trained weights must be bit for bit equal, not merely close: through the first backward
// (initial buckets), the rebuild, no_sync accumulation, zero_grad, and a gradient the user replaced
// (PyTorch copies it into its bucket view and points .grad back at the view).
std::vector<std::vector<float>> gradientsOverFourBackwards(bool view) {
  std::vector<std::vector<float>> out(2);
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        Mlp model(parseModelSpec("mlp:32x3,in=16,out=8"), 7);
        DdpOptions o;
        o.gradientAsBucketView = view;
        o.bucketCapMb = 0.002;  // several buckets, rebuilt after the first backward
        o.firstBucketBytes = 1024;
        DistributedDataParallel ddp(model, pg, o);
        auto& ps = model.parameters();
        std::vector<float> xs(4 * 16), ys(4 * 8);
        for (std::size_t k = 0; k < xs.size(); ++k)
          xs[k] = 0.01f * static_cast<float>((k * 7 + pg.rank()) % 13);
        for (std::size_t k = 0; k < ys.size(); ++k)
          ys[k] = 0.02f * static_cast<float>((k * 5 + pg.rank()) % 11);
        Tensor x = Tensor::fromVector({4, 16}, xs), y = Tensor::fromVector({4, 8}, ys);
        Tensor dOut = Tensor::zeros({4, 8});
        auto backward = [&](bool sync) {
          ops::mseLoss(ddp.forward(x), y, 1.0f, dOut);
          if (sync) {
            ddp.backward(dOut);
          } else {
            auto guard = ddp.noSync();
            ddp.backward(dOut);
          }
        };
        std::vector<float>& mine = out[static_cast<std::size_t>(pg.rank())];
        auto record = [&] {
          for (auto& p : ps) {
            auto v = p.grad.toVector();
            mine.insert(mine.end(), v.begin(), v.end());
          }
        };
        backward(true);  // the initial buckets
        record();
        EXPECT_EQ(ddp.reducer().rebuildCount(), 1);
        model.zeroGrad();
        backward(false);  // no_sync, then a synced backward on top: rebuilt buckets
        backward(true);
        record();
        model.zeroGrad();
        // The user replaces one gradient (as zero_grad(set_to_none) and a fresh tensor would).
        ps[1].grad = Tensor::zeros(ps[1].grad.shape());
        backward(true);
        record();
        for (std::size_t i = 0; i < ps.size(); ++i) {
          // With views every gradient, the replaced one included, is its bucket's view again.
          EXPECT_EQ(ddp.reducer().gradIsBucketView(i), view)
              << "parameter " << i << " (" << ps[i].name << ")";
        }
        model.zeroGrad();
        backward(true);
        record();
      },
      groupOptions());
  return out;
}

TEST(GradientAsBucketView, GradientsAndTrainedWeightsBitForBitAsWithCopies) {
  auto copies = gradientsOverFourBackwards(false);
  auto views = gradientsOverFourBackwards(true);
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(views[r].size(), copies[r].size());
    ASSERT_FALSE(views[r].empty());
    for (std::size_t k = 0; k < views[r].size(); ++k) {
      ASSERT_EQ(views[r][k], copies[r][k])
          << "rank " << r << ", gradient value " << k << " of " << views[r].size();
    }
  }
  EXPECT_EQ(views[0], views[1]) << "the averaged gradients differ between ranks";
  for (const char* opt : {"sgd", "adamw"}) {
    SCOPED_TRACE(opt);
    TrainConfig c = dt::ddpConfig(opt, 2, 2);
    auto copied = trainOnThreads(c, 2);
    c.ddp.gradientAsBucketView = true;
    auto viewed = trainOnThreads(c, 2);
    EXPECT_EQ(viewed[0].finalParams, copied[0].finalParams);
    EXPECT_EQ(viewed[0].finalChecksum, copied[0].finalChecksum);
    EXPECT_EQ(viewed[1].finalChecksum, copied[1].finalChecksum);
  }
}

TEST(Replicas, ParametersAreBroadcastFromRankZeroAtConstruction) {
  std::mutex mu;
  std::vector<std::uint64_t> before(3), after(3);
  runThreads(
      "gloo", 3,
      [&](ProcessGroup& pg) {
        Mlp model(parseModelSpec("mlp:16x2,in=8,out=4"), 100 + static_cast<std::uint64_t>(pg.rank()));
        auto b = parameterChecksum(model.parameters());
        DistributedDataParallel ddp(model, pg);
        std::lock_guard<std::mutex> lock(mu);
        before[pg.rank()] = b;
        after[pg.rank()] = parameterChecksum(model.parameters());
      },
      groupOptions());
  EXPECT_NE(before[0], before[1]);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[0]);
  EXPECT_EQ(after[2], before[0]);
}

TEST(Loss, FallsOverAShortRun) {
  TrainConfig c = dt::ddpConfig("adamw", 2);
  c.steps = 40;
  c.optimizer.lr = 0.01f;
  auto ranks = trainOnThreads(c, 2);
  const auto& s = ranks[0].steps;
  double first = s.front().loss;
  double last = (s[s.size() - 1].loss + s[s.size() - 2].loss + s[s.size() - 3].loss) / 3;
  EXPECT_LT(last, 0.5 * first) << "loss went from " << first << " to " << last;
}

TEST(CommHooks, Fp16AndBf16StayWithinTheirMarginOfFp32) {
  // Margins on the mean loss of the last 5 of 40 steps: fp16 keeps 11 mantissa bits (relative
  // rounding 2^-11 per gradient), bf16 8 bits (2^-8); over 40 AdamW steps this moves the loss by well
  // under 1% (fp16) and 5% (bf16) of its value. A broken hook (wrong scale, garbage) is far outside.
  auto run = [](const char* hook) {
    TrainConfig c = dt::ddpConfig("adamw", 2);
    c.steps = 40;
    c.optimizer.lr = 0.01f;
    c.ddp.commHookName = hook;
    return trainOnThreads(c, 2);
  };
  auto tail = [](const TrainResult& r) {
    double sum = 0;
    for (std::size_t i = r.steps.size() - 5; i < r.steps.size(); ++i) sum += r.steps[i].loss;
    return sum / 5;
  };
  auto fp32 = run("allreduce");
  auto fp16 = run("fp16");
  auto bf16 = run("bf16");
  const double base = tail(fp32[0]);
  EXPECT_LE(std::abs(tail(fp16[0]) - base), 0.01 * base) << "fp16 " << tail(fp16[0]) << " vs fp32 " << base;
  EXPECT_LE(std::abs(tail(bf16[0]) - base), 0.05 * base) << "bf16 " << tail(bf16[0]) << " vs fp32 " << base;
  // The hooks really compressed: the parameters differ from the fp32 run's, and replicas still agree.
  EXPECT_NE(fp16[0].finalChecksum, fp32[0].finalChecksum);
  EXPECT_NE(bf16[0].finalChecksum, fp32[0].finalChecksum);
  EXPECT_NE(fp16[0].finalChecksum, bf16[0].finalChecksum);
  EXPECT_EQ(fp16[0].finalChecksum, fp16[1].finalChecksum);
  EXPECT_EQ(bf16[0].finalChecksum, bf16[1].finalChecksum);
  EXPECT_EQ(fp16[0].logging.comm_hook, "fp16_compress");
}

TEST(Bf16Parameters, BucketsAreReducedInBf16AndTrainingStaysNearF32) {
  // dsbench train --dtype bf16: bf16 parameters and gradients, so the buckets (grouped by dtype) hold
  // bf16 and the allreduce moves half the bytes; the f32 master weights step identically on every
  // rank, and 40 AdamW steps stay within bf16's margin of the f32 run (as the bf16 hook's, above).
  auto run = [](DType dtype) {
    TrainConfig c = dt::ddpConfig("adamw", 2);
    c.steps = 40;
    c.optimizer.lr = 0.01f;
    c.dtype = dtype;
    return trainOnThreads(c, 2);
  };
  auto f32 = run(DType::kF32);
  auto bf16 = run(DType::kBF16);
  ASSERT_FALSE(bf16[0].buckets.empty());
  std::size_t bytes32 = 0, bytes16 = 0;
  for (const auto& b : bf16[0].buckets) {
    EXPECT_EQ(b.dtype, DType::kBF16);
    bytes16 += b.bytes;
  }
  for (const auto& b : f32[0].buckets) bytes32 += b.bytes;
  EXPECT_EQ(2 * bytes16, bytes32);
  EXPECT_EQ(bf16[0].finalChecksum, bf16[1].finalChecksum) << "replicas diverged";
  EXPECT_EQ(bf16[0].replicaChecks, 40);
  EXPECT_NE(bf16[0].finalChecksum, f32[0].finalChecksum);
  auto tail = [](const TrainResult& r) {
    double sum = 0;
    for (std::size_t i = r.steps.size() - 5; i < r.steps.size(); ++i) sum += r.steps[i].loss;
    return sum / 5;
  };
  const double base = tail(f32[0]);
  EXPECT_LE(std::abs(tail(bf16[0]) - base), 0.05 * base) << "bf16 " << tail(bf16[0]) << " vs f32 " << base;
  EXPECT_LT(tail(bf16[0]), 0.5 * bf16[0].steps.front().loss) << "bf16 training did not learn";
}

TEST(Buckets, RebuiltOnceAfterTheFirstIterationInReadyOrder) {
  runThreads(
      "gloo", 2,
      [](ProcessGroup& pg) {
        Mlp model(parseModelSpec("mlp:8x3,in=8,out=8"), 5);
        DdpOptions o;
        o.firstBucketBytes = 300;  // weights 256 B, biases 32 B: three parameters per bucket
        o.bucketCapMb = 300.0 / (1 << 20);
        DistributedDataParallel ddp(model, pg, o);
        auto members = [&] {
          std::vector<std::vector<std::size_t>> m;
          for (const auto& b : ddp.reducer().buckets()) m.push_back(b.params);
          return m;
        };
        // Reverse registration: bias before weight within a layer, layers straddle buckets.
        EXPECT_EQ(members(), (std::vector<std::vector<std::size_t>>{{5, 4, 3}, {2, 1, 0}}));
        Tensor x = Tensor::zeros({2, 8}), y = Tensor::zeros({2, 8}), d = Tensor::zeros({2, 8});
        ops::mseLoss(ddp.forward(x), y, 1.0f, d);
        ddp.backward(d);
        // Backward made each layer's weight ready before its bias: 4, 5, 2, 3, 0, 1.
        EXPECT_EQ(ddp.reducer().recordedReadyOrder(), (std::vector<std::size_t>{4, 5, 2, 3, 0, 1}));
        EXPECT_EQ(members(), (std::vector<std::vector<std::size_t>>{{4, 5, 2}, {3, 0, 1}}));
        EXPECT_EQ(ddp.reducer().rebuildCount(), 1);
        ops::mseLoss(ddp.forward(x), y, 1.0f, d);
        ddp.backward(d);
        EXPECT_EQ(ddp.reducer().rebuildCount(), 1) << "rebuilt only once";
      },
      groupOptions());
}

TEST(Buckets, RankZerosReadyOrderIsBroadcastForTheRebuild) {
  std::mutex mu;
  std::vector<std::vector<std::vector<std::size_t>>> rebuilt(2);
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        std::vector<Parameter> ps;
        for (int i = 0; i < 4; ++i) {
          Parameter p;
          p.name = "p" + std::to_string(i);
          p.value = Tensor::zeros({10});
          p.grad = Tensor::zeros({10});
          ps.push_back(p);
        }
        DdpOptions o;
        o.firstBucketBytes = 80;
        o.bucketCapMb = 80.0 / (1 << 20);
        Reducer reducer(ps, pg, o);
        EXPECT_EQ(reducer.buckets()[0].params, (std::vector<std::size_t>{3, 2}));
        // The ranks' gradients become ready in different orders.
        std::vector<std::size_t> order =
            pg.rank() == 0 ? std::vector<std::size_t>{1, 3, 0, 2} : std::vector<std::size_t>{2, 0, 3, 1};
        reducer.prepareForBackward(true);
        for (auto i : order) {
          for (std::size_t k = 0; k < 10; ++k)
            ps[i].grad.data<float>()[k] = static_cast<float>(pg.rank() * 2 + 1);
          reducer.markGradReady(i);
        }
        reducer.finalizeBackward();
        for (auto& p : ps) EXPECT_EQ(p.grad.toVector()[9], 2.0f) << "average of 1 and 3";
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& b : reducer.buckets()) rebuilt[pg.rank()].push_back(b.params);
      },
      groupOptions());
  const std::vector<std::vector<std::size_t>> rank0{{1, 3}, {0, 2}};
  EXPECT_EQ(rebuilt[0], rank0);
  EXPECT_EQ(rebuilt[1], rank0) << "rank 1 must use rank 0's order, not its own";
}

TEST(MismatchedModels, ParameterCountFailsAtConstructionWithBothRanksNamed) {
  std::mutex mu;
  std::vector<std::string> errors(2);
  auto start = std::chrono::steady_clock::now();
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        Mlp model(parseModelSpec(pg.rank() == 0 ? "mlp:8x3,in=4,out=2" : "mlp:8x2,in=4,out=2"), 1);
        try {
          DistributedDataParallel ddp(model, pg);
        } catch (const ds::ConfigError& e) {
          std::lock_guard<std::mutex> lock(mu);
          errors[pg.rank()] = e.what();
        }
      },
      groupOptions());
  EXPECT_NE(
      errors[0].find("DDP expects same model across all ranks, but Rank 0 has 6 params, while rank 1 has "
                     "inconsistent 4 params."),
      std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("but Rank 1 has 4 params, while rank 0 has inconsistent 6 params."),
            std::string::npos)
      << errors[1];
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "must fail, not wait";
}

TEST(MismatchedModels, ShapeFailsAtConstructionNamingTheParameter) {
  std::mutex mu;
  std::vector<std::string> errors(2);
  runThreads(
      "gloo", 2,
      [&](ProcessGroup& pg) {
        Mlp model(parseModelSpec(pg.rank() == 0 ? "mlp:8x3,in=4,out=2" : "mlp:9x3,in=4,out=2"), 1);
        try {
          DistributedDataParallel ddp(model, pg);
        } catch (const ds::ConfigError& e) {
          std::lock_guard<std::mutex> lock(mu);
          errors[pg.rank()] = e.what();
        }
      },
      groupOptions());
  EXPECT_NE(
      errors[0].find("DDP expects same model across all ranks, but Rank 0 has params[0] (layers.0.weight) of "
                     "[8, 4] f32, while rank 1 has inconsistent [9, 4] f32."),
      std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("Rank 1 has params[0] (layers.0.weight) of [9, 4] f32, while rank 0"),
            std::string::npos)
      << errors[1];
}

// Positions of events in the last backward's log.
struct EventLog {
  std::vector<ReducerEvent> e;
  std::ptrdiff_t first(ReducerEventType t) const {
    auto it = std::find_if(e.begin(), e.end(), [&](const ReducerEvent& x) { return x.type == t; });
    return it == e.end() ? -1 : it - e.begin();
  }
  std::ptrdiff_t last(ReducerEventType t) const {
    for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(e.size()) - 1; i >= 0; --i)
      if (e[static_cast<std::size_t>(i)].type == t) return i;
    return -1;
  }
  std::ptrdiff_t find(ReducerEventType t, std::size_t index) const {
    for (std::size_t i = 0; i < e.size(); ++i)
      if (e[i].type == t && e[i].index == index) return static_cast<std::ptrdiff_t>(i);
    return -1;
  }
};

EventLog oneStep(ProcessGroup& pg, bool overlap) {
  Mlp model(parseModelSpec("mlp:32x4,in=16,out=8"), 5);
  DdpOptions o;
  o.overlap = overlap;
  o.firstBucketBytes = 2048;
  o.bucketCapMb = 4096.0 / (1 << 20);
  DistributedDataParallel ddp(model, pg, o);
  Tensor x = Tensor::zeros({4, 16}), y = Tensor::zeros({4, 8}), d = Tensor::zeros({4, 8});
  ops::mseLoss(ddp.forward(x), y, 1.0f, d);
  ddp.backward(d);
  EventLog log{ddp.reducer().lastEvents()};
  // Check the bucket/launch contract on every rank.
  const auto& buckets = ddp.reducer().buckets();
  std::ptrdiff_t previousLaunch = -1;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    auto launched = log.find(ReducerEventType::kBucketLaunched, b);
    EXPECT_GT(launched, previousLaunch) << "bucket " << b << " launched out of order";
    previousLaunch = launched;
    for (auto i : buckets[b].params) {
      EXPECT_LT(log.find(ReducerEventType::kGradReady, i), launched)
          << "bucket " << b << " launched before param " << i;
    }
    EXPECT_GT(log.find(ReducerEventType::kBucketReduced, b),
              log.first(ReducerEventType::kBackwardComputeEnd));
  }
  return log;
}

TEST(Overlap, AllreduceStartsBeforeBackwardFinishesWhenThereAreSeveralBuckets) {
  runThreads(
      "gloo", 2,
      [](ProcessGroup& pg) {
        EventLog log = oneStep(pg, true);
        auto firstLaunch = log.first(ReducerEventType::kBucketLaunched);
        ASSERT_GE(firstLaunch, 0);
        EXPECT_LT(firstLaunch, log.last(ReducerEventType::kGradReady))
            << "the first bucket must be launched while gradients are still being computed";
        EXPECT_LT(firstLaunch, log.first(ReducerEventType::kBackwardComputeEnd));
      },
      groupOptions());
}

TEST(Overlap, TheNoOverlapBaselineLaunchesOneBucketAfterBackward) {
  runThreads(
      "gloo", 2,
      [](ProcessGroup& pg) {
        EventLog log = oneStep(pg, false);
        EXPECT_GT(log.first(ReducerEventType::kBucketLaunched),
                  log.first(ReducerEventType::kBackwardComputeEnd));
        EXPECT_EQ(log.last(ReducerEventType::kBucketLaunched), log.first(ReducerEventType::kBucketLaunched))
            << "one bucket";
      },
      groupOptions());
}

TEST(NoSyncGuard, NothingIsCommunicatedAndGradientsStayLocal) {
  runThreads(
      "gloo", 2,
      [](ProcessGroup& pg) {
        Mlp model(parseModelSpec("mlp:8x2,in=4,out=2"), 1);
        DistributedDataParallel ddp(model, pg);
        // Different data per rank: synced gradients would agree, local ones do not.
        float v = static_cast<float>(pg.rank() + 1);
        Tensor x = Tensor::fromVector({1, 4}, {v, v, v, v}), y = Tensor::zeros({1, 2}),
               d = Tensor::zeros({1, 2});
        {
          auto guard = ddp.noSync();
          ops::mseLoss(ddp.forward(x), y, 1.0f, d);
          ddp.backward(d);
        }
        EventLog log{ddp.reducer().lastEvents()};
        EXPECT_EQ(log.first(ReducerEventType::kBucketLaunched), -1);
        EXPECT_FALSE(ddp.iterations().back().synced);
        Mlp local(parseModelSpec("mlp:8x2,in=4,out=2"), 1);
        // Rank 0's weights (broadcast), this rank's data: the same gradient as a local backward.
        for (std::size_t i = 0; i < local.parameters().size(); ++i)
          ops::copy(model.parameters()[i].value, local.parameters()[i].value);
        ops::mseLoss(local.forward(x), y, 1.0f, d);
        local.backward(d);
        EXPECT_EQ(model.parameters()[0].grad.toVector(), local.parameters()[0].grad.toVector());
      },
      groupOptions());
}

TEST(Statistics, LoggingDataUsesPyTorchsFieldsAndSampling) {
  TrainConfig c = dt::ddpConfig("sgd", 2);
  c.steps = 12;
  auto ranks = trainOnThreads(c, 2);
  const auto& d = ranks[0].logging;
  EXPECT_EQ(d.sampled_iterations, 10);
  EXPECT_GT(d.avg_forward_compute_time, 0);
  EXPECT_GT(d.avg_backward_compute_time, 0);
  EXPECT_GT(d.avg_backward_comm_time, 0);
  EXPECT_GT(d.avg_optimizer_time, 0);
  EXPECT_GE(d.avg_backward_compute_comm_overlap_time, 0);
  EXPECT_EQ(d.backend, "gloo");
  EXPECT_EQ(d.world_size, 2);
  std::size_t total = 0;
  for (auto b : d.bucket_sizes) total += b;
  EXPECT_EQ(total, c.model.paramCount() * 4);
  for (const auto& s : ranks[0].steps) {
    EXPECT_GE(s.ddp.buckets, 3);
    EXPECT_EQ(s.ddp.bucketsLaunchedDuringBackward, s.ddp.buckets) << "every bucket launched inside backward";
    EXPECT_GT(s.ddp.commBusyNs, 0);
  }
}

}  // namespace
