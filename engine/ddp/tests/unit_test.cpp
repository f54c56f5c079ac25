// Single-process tests of the DDP engine's pieces: tensor, maths, MLP gradients (against finite
// differences), spec parsing, DistributedSampler, optimizers and the pure bucket assignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine/common/error.h"
#include "engine/ddp/bucket.h"
#include "engine/ddp/comm_hook.h"
#include "engine/ddp/data.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/mlp.h"
#include "engine/ddp/ops.h"
#include "engine/ddp/optimizer.h"
#include "engine/ddp/train_loop.h"

using namespace ds::ddp;
using ds::comm::DType;

namespace {

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// ---------------------------------------------------------------------------------------------
// Tensor and maths

TEST(Tensor, ViewsShareStorageAndCloneDoesNot) {
  Tensor t = Tensor::fromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = t.view(3, 3, {3});
  v.data<float>()[0] = 40;
  EXPECT_EQ(t.toVector()[3], 40);
  Tensor c = t.clone();
  c.data<float>()[0] = -1;
  EXPECT_EQ(t.toVector()[0], 1);
  EXPECT_TRUE(t.view(3, 3, {3}).sameMemory(v));
  EXPECT_FALSE(t.sameMemory(v));
  EXPECT_EQ(t.shapeString(), "[2, 3]");
}

TEST(Tensor, HalfStorageRoundsToNearestEven) {
  Tensor t = Tensor::fromVector({4}, {1.0f, 0.1f, -2.5f, 65504.0f});
  auto h = t.toDType(DType::kF16).toVector();
  auto b = t.toDType(DType::kBF16).toVector();
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_NEAR(h[1], 0.1f, 1e-4);
  EXPECT_NE(h[1], 0.1f);  // really stored in 16 bits
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_EQ(b[2], -2.5f);
  EXPECT_NEAR(b[1], 0.1f, 1e-3);
}

TEST(Tensor, RejectsWhatItCannotHold) {
  EXPECT_NE(errorOf([] { Tensor::zeros({2}, DType::kI32); }).find("f32, f16 or bf16"), std::string::npos);
  EXPECT_NE(errorOf([] {
              Tensor::fromVector({2, 2}, {1, 2, 3});
            }).find("3 values for shape [2, 2]"),
            std::string::npos);
#if !DS_WITH_CUDA
  EXPECT_NE(errorOf([] {
              Tensor::zeros({2}, DType::kF32, ds::comm::Device{ds::comm::DeviceType::kCuda, 0});
            }).find("built without CUDA"),
            std::string::npos);
#endif
}

TEST(Ops, GemmMatchesANaiveProductForEveryTransposition) {
  const int m = 5, n = 4, k = 3;
  std::vector<float> a(m * k), b(k * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  std::vector<float> want(m * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) want[i * n + j] += a[i * k + p] * b[p * n + j];
  auto transpose = [](const std::vector<float>& x, int rows, int cols) {
    std::vector<float> t(x.size());
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
    return t;
  };
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor A = ta ? Tensor::fromVector({k, m}, transpose(a, m, k)) : Tensor::fromVector({m, k}, a);
      Tensor B = tb ? Tensor::fromVector({n, k}, transpose(b, k, n)) : Tensor::fromVector({k, n}, b);
      Tensor C = Tensor::fromVector({m, n}, std::vector<float>(m * n, 1.0f));
      ops::gemm(ta, tb, 2.0f, A, B, 0.5f, C);
      auto got = C.toVector();
      for (int i = 0; i < m * n; ++i)
        EXPECT_FLOAT_EQ(got[i], 2.0f * want[i] + 0.5f) << ta << tb << " at " << i;
    }
  }
}

// On the host the clock is the steady clock at each mark; a span with an unmarked point reads 0, and
// clear() unmarks every point (the device's version, CUDA events, runs in the GPU checks).
TEST(Ops, DeviceClockOnTheHostTimesSpansBetweenMarks) {
  ds::ddp::ops::DeviceClock clock(ds::ddp::Device{}, 3);
  EXPECT_FALSE(clock.onDevice());
  EXPECT_EQ(clock.ns(0, 1), 0);
  clock.mark(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.mark(1);
  EXPECT_GE(clock.ns(0, 1), 15'000'000);
  EXPECT_LE(clock.ns(1, 0), -15'000'000) << "a span that ends before it starts is negative";
  EXPECT_EQ(clock.ns(0, 2), 0) << "point 2 was never marked";
  clock.clear();
  EXPECT_FALSE(clock.marked(0));
  EXPECT_EQ(clock.ns(0, 1), 0);
  EXPECT_THROW(clock.mark(3), std::out_of_range);
}

TEST(Ops, MseLossAndGradient) {
  Tensor p = Tensor::fromVector({2, 2}, {1, 2, 3, 4});
  Tensor t = Tensor::fromVector({2, 2}, {0, 2, 3, 2});
  Tensor d = Tensor::zeros({2, 2});
  EXPECT_DOUBLE_EQ(ops::mseLoss(p, t, 0.5f, d), (1.0 + 4.0) / 4.0);
  auto g = d.toVector();
  EXPECT_FLOAT_EQ(g[0], 0.5f * 2.0f * 1.0f / 4.0f);
  EXPECT_FLOAT_EQ(g[3], 0.5f * 2.0f * 2.0f / 4.0f);
  EXPECT_FLOAT_EQ(g[1], 0.0f);
}

// A step's micro-batch losses summed where they are computed, read once; the gradient is mseLoss's.
TEST(Ops, MseLossIntoSumsWeightedLossesUntilReset) {
  Tensor p = Tensor::fromVector({2, 2}, {1, 2, 3, 4});
  Tensor t = Tensor::fromVector({2, 2}, {0, 2, 3, 2});
  Tensor d = Tensor::zeros({2, 2});
  ops::LossSum sum(Device{});
  ops::mseLossInto(p, t, 0.5f, d, sum, 0.5);
  EXPECT_FLOAT_EQ(d.toVector()[3], 0.5f * 2.0f * 2.0f / 4.0f);
  ops::mseLossInto(t, t, 1.0f, d, sum, 0.5);
  EXPECT_DOUBLE_EQ(sum.value(), 0.5 * (1.0 + 4.0) / 4.0);
  EXPECT_DOUBLE_EQ(sum.value(), 0.5 * (1.0 + 4.0) / 4.0) << "reading does not consume";
  sum.reset();
  EXPECT_EQ(sum.value(), 0.0);
}

// ---------------------------------------------------------------------------------------------
// MLP

double lossOf(Mlp& m, const Tensor& x, const Tensor& y) {
  Tensor d = Tensor::zeros({x.dim(0), m.spec().out()});
  return ops::mseLoss(m.forward(x), y, 1.0f, d);
}

class MlpGradient : public ::testing::TestWithParam<const char*> {};

TEST_P(MlpGradient, BackwardMatchesFiniteDifferences) {
  Mlp model(parseModelSpec(GetParam()), 7);
  const int in = model.spec().in(), out = model.spec().out();
  std::vector<float> xs(3 * in), ys(3 * out);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 1.3f);
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = std::cos(static_cast<float>(i) * 0.7f);
  Tensor x = Tensor::fromVector({3, in}, xs), y = Tensor::fromVector({3, out}, ys);
  Tensor d = Tensor::zeros({3, out});
  ops::mseLoss(model.forward(x), y, 1.0f, d);
  model.zeroGrad();
  model.backward(d);
  int checked = 0, skipped = 0;
  for (auto& p : model.parameters()) {
    auto grad = p.grad.toVector();
    float* v = p.value.data<float>();
    for (std::size_t i = 0; i < p.value.numel(); ++i) {
      const float h = 1e-2f;
      float keep = v[i];
      v[i] = keep + h;
      double up = lossOf(model, x, y);
      v[i] = keep - h;
      double down = lossOf(model, x, y);
      v[i] = keep;
      double center = lossOf(model, x, y);
      // A ReLU kink between the probes makes the one-sided slopes disagree: no derivative to compare.
      double ahead = (up - center) / h, behind = (center - down) / h;
      if (std::abs(ahead - behind) > 0.05 * std::max(std::abs(ahead), std::abs(behind)) + 1e-3) {
        ++skipped;
        continue;
      }
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
  EXPECT_LE(skipped, checked / 5) << "too many non-smooth points to trust the check";
}

INSTANTIATE_TEST_SUITE_P(Activations, MlpGradient,
                         ::testing::Values("mlp:6x3,in=4,out=3", "mlp:6x3,in=4,out=3,act=relu",
                                           "mlp:5x2,in=4,out=2,bias=0", "mlp:4x1,in=3,out=2"),
                         [](const auto& info) { return std::to_string(info.index); });

TEST(Mlp, ReportsEachGradientOnceLastLayerFirstAndOnlyWhenFinal) {
  Mlp model(parseModelSpec("mlp:6x3,in=4,out=3"), 3);
  Tensor x = Tensor::fromVector({2, 4}, {1, -1, 0.5f, 2, 0, 1, -2, 1});
  Tensor d = Tensor::fromVector({2, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.0f, -0.1f});
  model.forward(x);
  std::vector<std::size_t> order;
  std::vector<std::vector<float>> atReady(model.parameters().size());
  model.backward(d, [&](std::size_t i) {
    order.push_back(i);
    atReady[i] = model.parameters()[i].grad.toVector();
  });
  // Registration: layers.0.weight=0, layers.0.bias=1, ..., layers.2.bias=5.
  EXPECT_EQ(order, (std::vector<std::size_t>{4, 5, 2, 3, 0, 1}));
  for (std::size_t i = 0; i < atReady.size(); ++i)
    EXPECT_EQ(atReady[i], model.parameters()[i].grad.toVector());
  EXPECT_EQ(model.parameters()[4].name, "layers.2.weight");
  EXPECT_EQ(model.parameters()[4].value.shapeString(), "[3, 6]");
}

TEST(Mlp, BackwardAccumulatesLikeAutograd) {
  Mlp model(parseModelSpec("mlp:4x2,in=3,out=2"), 1);
  Tensor x = Tensor::fromVector({1, 3}, {1, 2, 3});
  Tensor d = Tensor::fromVector({1, 2}, {1, -1});
  model.forward(x);
  model.backward(d);
  auto once = model.parameters()[0].grad.toVector();
  model.forward(x);
  model.backward(d);
  auto twice = model.parameters()[0].grad.toVector();
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
  model.zeroGrad();
  for (float g : model.parameters()[0].grad.toVector()) EXPECT_EQ(g, 0.0f);
}

TEST(MlpSpec, ParsesSpecsAndPresets) {
  auto s = parseModelSpec("mlp:1024x8");
  EXPECT_EQ(s.width, 1024);
  EXPECT_EQ(s.layers, 8);
  EXPECT_EQ(s.paramCount(), 8u * (1024 * 1024 + 1024));
  EXPECT_EQ(s.toString(), "mlp:1024x8");
  auto r = parseModelSpec("mlp:64x3,act=relu,bias=0,in=16,out=8");
  EXPECT_EQ(r.toString(), "mlp:64x3,act=relu,bias=0,in=16,out=8");
  EXPECT_EQ(r.paramCount(), 16u * 64 + 64 * 64 + 64 * 8);
  auto near = [](std::size_t n, double want) { return std::abs(static_cast<double>(n) / want - 1.0) < 0.1; };
  EXPECT_TRUE(near(parseModelSpec("1m").paramCount(), 1e6));
  EXPECT_TRUE(near(parseModelSpec("25m").paramCount(), 25e6));
  EXPECT_TRUE(near(parseModelSpec("mlp-100m").paramCount(), 100e6));
  EXPECT_NE(errorOf([] { parseModelSpec("resnet50"); }).find("expected a preset (1m, 25m, 100m) or mlp:"),
            std::string::npos);
  EXPECT_NE(errorOf([] { parseModelSpec("mlp:0x3"); }).find("width '0' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(errorOf([] { parseModelSpec("mlp:8x3,act=tanh"); }).find("unknown option 'act=tanh'"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Data

TEST(Dataset, IsDeterministicFromItsSeed) {
  DatasetOptions o;
  o.samples = 20;
  o.inDim = 5;
  o.outDim = 3;
  TeacherStudentDataset a(o), b(o);
  o.seed = 99;
  TeacherStudentDataset c(o);
  Tensor xa, ya, xb, yb, xc, yc;
  a.batch({3, 7, 19}, xa, ya);
  b.batch({3, 7, 19}, xb, yb);
  c.batch({3, 7, 19}, xc, yc);
  EXPECT_EQ(xa.toVector(), xb.toVector());
  EXPECT_EQ(ya.toVector(), yb.toVector());
  EXPECT_NE(ya.toVector(), yc.toVector());
  EXPECT_EQ(ya.shapeString(), "[3, 3]");
}

std::vector<std::size_t> indicesOf(std::size_t n, int replicas, int rank, bool shuffle, bool dropLast,
                                   std::uint64_t epoch = 0) {
  DistributedSampler s(n, SamplerOptions{replicas, rank, shuffle, 0, dropLast});
  s.setEpoch(epoch);
  return s.indices();
}

TEST(DistributedSampler, PadsByWrappingAroundLikeTorch) {
  // torch: DistributedSampler(range(10), num_replicas=3, shuffle=False)
  EXPECT_EQ(indicesOf(10, 3, 0, false, false), (std::vector<std::size_t>{0, 3, 6, 9}));
  EXPECT_EQ(indicesOf(10, 3, 1, false, false), (std::vector<std::size_t>{1, 4, 7, 0}));
  EXPECT_EQ(indicesOf(10, 3, 2, false, false), (std::vector<std::size_t>{2, 5, 8, 1}));
  // Padding longer than the dataset repeats it: 2 samples over 5 replicas.
  EXPECT_EQ(indicesOf(2, 5, 4, false, false), (std::vector<std::size_t>{0}));
  EXPECT_EQ(indicesOf(2, 5, 3, false, false), (std::vector<std::size_t>{1}));
}

TEST(DistributedSampler, DropLastCutsToEqualShards) {
  DistributedSampler s(10, SamplerOptions{3, 0, false, 0, true});
  EXPECT_EQ(s.numSamples(), 3u);  // ceil((10 - 3) / 3)
  EXPECT_EQ(indicesOf(10, 3, 2, false, true), (std::vector<std::size_t>{2, 5, 8}));
  EXPECT_EQ(DistributedSampler(11, SamplerOptions{3, 0, false, 0, true}).numSamples(), 3u);
  EXPECT_EQ(DistributedSampler(12, SamplerOptions{3, 0, false, 0, true}).numSamples(), 4u);
}

TEST(DistributedSampler, ShufflesPerEpochIdenticallyOnEveryRank) {
  std::vector<std::size_t> all;
  for (int r = 0; r < 4; ++r) {
    auto mine = indicesOf(64, 4, r, true, false, 3);
    EXPECT_EQ(mine, indicesOf(64, 4, r, true, false, 3)) << "deterministic";
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::set<std::size_t> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), 64u) << "the shards partition the dataset";
  EXPECT_NE(indicesOf(64, 4, 0, true, false, 3), indicesOf(64, 4, 0, true, false, 4))
      << "a new order each epoch";
  EXPECT_NE(indicesOf(64, 4, 0, true, false, 0), indicesOf(64, 4, 0, false, false, 0));
}

TEST(DistributedSampler, RejectsABadRankWithTorchsMessage) {
  EXPECT_NE(errorOf([] {
              DistributedSampler(10, SamplerOptions{2, 2, true, 0, false});
            }).find("invalid rank 2, rank should be in the interval [0, 1]"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Optimizers

Parameter param(std::vector<float> v, std::vector<float> g) {
  Parameter p;
  p.name = "p";
  p.value = Tensor::fromVector({static_cast<std::int64_t>(v.size())}, v);
  p.grad = Tensor::fromVector({static_cast<std::int64_t>(g.size())}, g);
  return p;
}

TEST(Optimizer, SgdWithMomentumFollowsTorch) {
  std::vector<Parameter> ps{param({1.0f}, {0.5f})};
  OptimizerOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  auto opt = makeOptimizer(o);
  opt->step(ps);  // buf = g = 0.5; p = 1 - 0.05
  EXPECT_FLOAT_EQ(ps[0].value.toVector()[0], 0.95f);
  opt->step(ps);  // buf = 0.9*0.5 + 0.5 = 0.95; p = 0.95 - 0.095
  EXPECT_FLOAT_EQ(ps[0].value.toVector()[0], 0.855f);
}

TEST(Optimizer, AdamWFollowsTorch) {
  std::vector<Parameter> ps{param({1.0f, -2.0f}, {0.5f, -0.25f})};
  OptimizerOptions o;
  o.kind = "adamw";
  o.lr = 0.1f;
  auto opt = makeOptimizer(o);
  opt->step(ps);
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * sign(g) (eps aside), after decay 1 - lr*0.01.
  auto v = ps[0].value.toVector();
  EXPECT_NEAR(v[0], 1.0f * (1 - 0.1f * 0.01f) - 0.1f, 1e-6);
  EXPECT_NEAR(v[1], -2.0f * (1 - 0.1f * 0.01f) + 0.1f, 1e-6);
  OptimizerOptions bad;
  bad.kind = "lamb";
  EXPECT_NE(errorOf([&] { makeOptimizer(bad); }).find("expected sgd or adamw"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Bucket assignment (pure)

std::vector<BucketParam> f32Params(const std::vector<std::size_t>& numels) {
  std::vector<BucketParam> out;
  for (auto n : numels) out.push_back({n, DType::kF32, {}});
  return out;
}

std::vector<std::vector<std::size_t>> members(const std::vector<BucketSpec>& b) {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& s : b) out.push_back(s.params);
  return out;
}

TEST(BucketAssignment, DefaultsAre25MiBWithAFirstBucketOf1MiB) {
  EXPECT_EQ(bucketCapBytes(kDefaultBucketCapMb), 25u * 1024 * 1024);
  EXPECT_EQ(BucketSizeLimits{}.firstBucketBytes, 1u << 20);
  EXPECT_EQ(BucketSizeLimits{}.bucketCapBytes, 25u << 20);
  EXPECT_NE(errorOf([] { bucketCapBytes(0); }).find("bucket_cap_mb must be positive"), std::string::npos);
}

TEST(BucketAssignment, ReverseOrderFirstBucketSmallThenCap) {
  // Ten parameters of 400 KB: reversed, the first bucket closes once it reaches 1 MiB (3 params =
  // 1.2 MB), the rest fit in one 25 MiB bucket.
  auto b = assignBuckets(f32Params(std::vector<std::size_t>(10, 100000)), BucketSizeLimits{});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].params, (std::vector<std::size_t>{9, 8, 7}));
  EXPECT_EQ(b[0].bytes, 1200000u);
  EXPECT_EQ(b[0].sizeLimit, 1u << 20);
  EXPECT_EQ(b[1].params, (std::vector<std::size_t>{6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(b[1].sizeLimit, 25u << 20);
  EXPECT_EQ(b[1].numel, 700000u);
}

TEST(BucketAssignment, ABucketClosesWhenItReachesItsCap) {
  BucketSizeLimits l{100, 200};
  // bytes: 40 each; reversed 5,4,3 = 120 >= 100 closes the first; then 2,1,0 = 120 < 200 stays open.
  auto b = assignBuckets(f32Params({10, 10, 10, 10, 10, 10}), l);
  EXPECT_EQ(members(b), (std::vector<std::vector<std::size_t>>{{5, 4, 3}, {2, 1, 0}}));
  // A parameter larger than the cap closes the bucket it joins; the next one starts afresh.
  auto big = assignBuckets(f32Params({10, 1000, 10}), l);
  EXPECT_EQ(members(big), (std::vector<std::vector<std::size_t>>{{2, 1}, {0}}));
  EXPECT_TRUE(assignBuckets({}, l).empty());
}

TEST(BucketAssignment, GroupsByDtypeEachWithItsOwnFirstBucket) {
  std::vector<BucketParam> ps{{100, DType::kF32, {}},  {100, DType::kBF16, {}}, {100, DType::kF32, {}},
                              {100, DType::kBF16, {}}, {100, DType::kF32, {}},  {100, DType::kBF16, {}}};
  auto b = assignBuckets(ps, BucketSizeLimits{400, 100000});
  for (const auto& s : b) {
    for (auto i : s.params) EXPECT_EQ(ps[i].dtype, s.dtype) << "bucket mixes dtypes";
  }
  // Reversed: 5(bf16) 4(f32) 3(bf16) 2(f32) 1(bf16) 0(f32). bf16: 200 B each -> {5, 3} closes at 400 B;
  // f32: 400 B each -> {4} closes at once; then {2, 0} and {1} stay open until the end.
  EXPECT_EQ(members(b), (std::vector<std::vector<std::size_t>>{{4}, {5, 3}, {1}, {2, 0}}));
  EXPECT_EQ(b[1].dtype, DType::kBF16);
}

TEST(BucketAssignment, RebuildFollowsTheGivenReadyOrder) {
  BucketSizeLimits l{80, 160};
  auto initial = assignBuckets(f32Params({10, 10, 10, 10, 10, 10}), l);
  EXPECT_EQ(members(initial), (std::vector<std::vector<std::size_t>>{{5, 4}, {3, 2, 1, 0}}));
  // Gradients became ready weight-before-bias: 4, 5, 2, 3, 0, 1.
  auto rebuilt = assignBuckets(f32Params({10, 10, 10, 10, 10, 10}), l, {4, 5, 2, 3, 0, 1});
  EXPECT_EQ(members(rebuilt), (std::vector<std::vector<std::size_t>>{{4, 5}, {2, 3, 0, 1}}));
  EXPECT_NE(errorOf([&] {
              assignBuckets(f32Params({1, 1, 1}), l, {0, 1, 1});
            }).find("index 1 appears twice"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              assignBuckets(f32Params({1, 1, 1}), l, {0, 1});
            }).find("lists 2 parameters, the model has 3"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              assignBuckets(f32Params({1, 1}), l, {0, 5});
            }).find("index 5 is out of range"),
            std::string::npos);
}

TEST(BucketAssignment, IsPureAndCoversEveryParameterOnce) {
  auto ps = f32Params({300, 7, 3000, 12, 45000, 1, 999, 100000, 3});
  BucketSizeLimits l{4096, 65536};
  auto a = assignBuckets(ps, l);
  EXPECT_EQ(a, assignBuckets(ps, l));
  std::vector<int> seen(ps.size(), 0);
  for (const auto& s : a) {
    std::size_t numel = 0;
    for (auto i : s.params) {
      ++seen[i];
      numel += ps[i].numel;
    }
    EXPECT_EQ(numel, s.numel);
    EXPECT_EQ(s.bytes, numel * 4);
  }
  for (int c : seen) EXPECT_EQ(c, 1);
}

TEST(CommHook, NamesAndErrors) {
  EXPECT_EQ(makeCommHook("allreduce")->name(), "allreduce");
  EXPECT_EQ(makeCommHook("fp16")->name(), "fp16_compress");
  EXPECT_EQ(makeCommHook("bf16_compress")->name(), "bf16_compress");
  EXPECT_NE(errorOf([] { makeCommHook("powersgd"); }).find("expected allreduce, fp16 or bf16"),
            std::string::npos);
}

TEST(DdpLogging, SamplesTheFirstTenThenEveryHundredth) {
  std::vector<long> sampled;
  for (long n = 1; n <= 300; ++n)
    if (isSampledIteration(n)) sampled.push_back(n);
  EXPECT_EQ(sampled, (std::vector<long>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 200, 300}));
}

TEST(ChooseOverlap, OnlyWhereTheCommHasACoreUnboundRanksOrANetwork) {
  using ds::ddp::chooseOverlap;
  using ds::ddp::OverlapPlacement;
  // dsrun, 2 ranks on a 2-core host, 1 BLAS thread each: every CPU computes, but unbound ranks leave
  // their CPU to the comm threads while they wait for each other.
  auto c = chooseOverlap(OverlapPlacement{true, 2, 2, 2, 1, false});
  EXPECT_TRUE(c.overlap) << c.reason;
  EXPECT_NE(c.reason.find("1 CPU (2 for 2 ranks on this host)"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("no rank is bound"), std::string::npos) << c.reason;
  // More unbound ranks than CPUs: none is ever idle.
  c = chooseOverlap(OverlapPlacement{true, 2, 2, 4, 1, false});
  EXPECT_FALSE(c.overlap) << c.reason;
  // mpirun's default binding: one core each.
  c = chooseOverlap(OverlapPlacement{true, 1, 16, 2, 1, false});
  EXPECT_FALSE(c.overlap);
  EXPECT_NE(c.reason.find("1 CPU (its affinity mask)"), std::string::npos) << c.reason;
  // A spare CPU beyond the compute threads.
  c = chooseOverlap(OverlapPlacement{true, 16, 16, 2, 4, false});
  EXPECT_TRUE(c.overlap) << c.reason;
  EXPECT_NE(c.reason.find("8 CPUs"), std::string::npos) << c.reason;
  // Every CPU computing, but the comm waits on a network, or runs on a GPU.
  EXPECT_TRUE(chooseOverlap(OverlapPlacement{true, 2, 2, 2, 1, true}).overlap);
  EXPECT_TRUE(chooseOverlap(OverlapPlacement{false, 1, 2, 2, 1, false}).overlap);
}

// ---------------------------------------------------------------------------------------------
// bf16 parameters (dsbench train --dtype bf16): the host maths is the reference the CUDA kernels and
// cuBLAS are checked against (cuda_test.cpp), so it must be right on its own.

std::vector<float> randomValues(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

TEST(Bf16, GemmSumsInF32AndRoundsOnceForEveryTransposition) {
  // C = alpha op(A) op(B) + beta C on bf16 tensors, against a double-precision product of the same
  // bf16 values: within one bf16 rounding of the result (relative 2^-8) plus the f32 sums' error.
  const int m = 5, n = 7, k = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = Tensor::fromVector(ta ? std::vector<std::int64_t>{k, m} : std::vector<std::int64_t>{m, k},
                                    randomValues(static_cast<std::size_t>(m * k), 1))
                     .toDType(DType::kBF16);
      Tensor b = Tensor::fromVector(tb ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n},
                                    randomValues(static_cast<std::size_t>(k * n), 2))
                     .toDType(DType::kBF16);
      Tensor c = Tensor::fromVector({m, n}, randomValues(static_cast<std::size_t>(m * n), 3)).toDType(DType::kBF16);
      const auto av = a.toVector(), bv = b.toVector(), c0 = c.toVector();
      ops::gemm(ta, tb, 0.5f, a, b, 1.0f, c);
      ASSERT_EQ(c.dtype(), DType::kBF16);
      const auto got = c.toVector();
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double want = 0;
          for (int p = 0; p < k; ++p) {
            const double x = ta ? av[static_cast<std::size_t>(p * m + i)] : av[static_cast<std::size_t>(i * k + p)];
            const double y = tb ? bv[static_cast<std::size_t>(j * k + p)] : bv[static_cast<std::size_t>(p * n + j)];
            want += x * y;
          }
          want = 0.5 * want + c0[static_cast<std::size_t>(i * n + j)];
          EXPECT_NEAR(got[static_cast<std::size_t>(i * n + j)], want, std::abs(want) / 256 + 1e-5)
              << "transA " << ta << " transB " << tb << " at " << i << "," << j;
        }
      }
    }
  }
}

TEST(Bf16, MixingDtypesInOneCallIsABug) {
  Tensor a = Tensor::fromVector({2, 2}, {1, 2, 3, 4});
  Tensor b = a.toDType(DType::kBF16);
  Tensor c = Tensor::zeros({2, 2}, DType::kBF16);
  EXPECT_THROW(ops::gemm(false, false, 1.0f, a, b, 0.0f, c), ds::InternalError);
  Tensor h = Tensor::zeros({2, 2}, DType::kF16);
  EXPECT_THROW(ops::activationForward(ops::Activation::kGelu, h, h), ds::InternalError);
}

TEST(Bf16, MlpForwardAndBackwardStayWithinBf16OfF32) {
  // The same weights (drawn in f32, rounded) and inputs: outputs and gradients agree to a few bf16
  // roundings (8 mantissa bits, 3 layers); a wrong transpose or a lost bias is far outside.
  const MlpSpec spec = parseModelSpec("mlp:48x3,in=24,out=8");
  Mlp f32(spec, 7), bf16(spec, 7, Device{}, DType::kBF16);
  ASSERT_EQ(bf16.parameters()[0].value.dtype(), DType::kBF16);
  ASSERT_EQ(bf16.parameters()[0].grad.dtype(), DType::kBF16);
  Tensor x = Tensor::fromVector({16, 24}, randomValues(16 * 24, 4));
  const auto yf = f32.forward(x).toVector();
  const auto yb = bf16.forward(x.toDType(DType::kBF16)).toVector();
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < yf.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(yf[i])));
    err = std::max(err, std::abs(static_cast<double>(yf[i]) - yb[i]));
  }
  EXPECT_GT(scale, 0.05);
  EXPECT_LT(err, 0.03 * scale) << "forward";
  Tensor dOut = Tensor::fromVector({16, 8}, randomValues(16 * 8, 5));
  f32.backward(dOut);
  bf16.backward(dOut.toDType(DType::kBF16));
  for (std::size_t p = 0; p < f32.parameters().size(); ++p) {
    const auto gf = f32.parameters()[p].grad.toVector(), gb = bf16.parameters()[p].grad.toVector();
    double s = 0, e = 0;
    for (std::size_t i = 0; i < gf.size(); ++i) {
      s = std::max(s, std::abs(static_cast<double>(gf[i])));
      e = std::max(e, std::abs(static_cast<double>(gf[i]) - gb[i]));
    }
    EXPECT_LT(e, 0.03 * s + 1e-6) << f32.parameters()[p].name;
  }
  EXPECT_NE(errorOf([&] { bf16.forward(x); }).find("convert the batch first"), std::string::npos);
  EXPECT_NE(errorOf([&] { Mlp(spec, 7, Device{}, DType::kF16); }).find("use f32 or bf16"), std::string::npos);
}

TEST(Bf16, MasterWeightsKeepUpdatesSmallerThanABf16Step) {
  // p = 1 in bf16 has a step of 2^-7; ten SGD updates of 1e-3 each are each rounded away on a bf16
  // parameter, but accumulate in the f32 master: p becomes bf16(0.99), as DeepSpeed's bf16 optimizer.
  Parameter p;
  p.name = "w";
  p.value = Tensor::fromVector({1}, {1.0f}).toDType(DType::kBF16);
  p.grad = Tensor::fromVector({1}, {1e-3f}).toDType(DType::kBF16);
  const float g = p.grad.toVector()[0];  // 1e-3 rounded to bf16
  std::vector<Parameter> ps{p};
  OptimizerOptions o;
  o.lr = 1.0f;
  o.momentum = 0.0f;
  auto opt = makeOptimizer(o);
  for (int i = 0; i < 10; ++i) opt->step(ps);
  EXPECT_EQ(ps[0].value.dtype(), DType::kBF16);
  const float want = Tensor::fromVector({1}, {1.0f - 10 * g}).toDType(DType::kBF16).toVector()[0];
  EXPECT_LT(want, 1.0f);
  EXPECT_EQ(ps[0].value.toVector()[0], want);
}

TEST(Bf16, SingleProcessTrainingLearnsAndStaysNearF32) {
  TrainConfig c;
  c.model = parseModelSpec("mlp:32x3,in=16,out=8");
  c.samples = 256;
  c.batch = 16;
  c.steps = 40;
  c.optimizer.kind = "adamw";
  c.optimizer.lr = 0.01f;
  c.evalSamples = 64;
  ops::setBlasThreads(1);
  TrainResult f32 = train(c, nullptr);
  c.dtype = DType::kBF16;
  TrainResult bf16 = train(c, nullptr);
  EXPECT_LT(bf16.evalLossEnd, 0.7 * bf16.evalLossStart) << bf16.evalLossStart << " -> " << bf16.evalLossEnd;
  EXPECT_NEAR(bf16.evalLossEnd, f32.evalLossEnd, 0.1 * f32.evalLossEnd);
  EXPECT_NE(bf16.finalChecksum, f32.finalChecksum) << "the bf16 run really ran in bf16";
}

TEST(MlpSpec, GemmFlopsCountForwardWeightAndInputGradients) {
  // Layer 0 (32 -> 64): forward and weight gradient only; layers 1 (64 -> 64) and 2 (64 -> 16): all three.
  EXPECT_DOUBLE_EQ(parseModelSpec("mlp:64x3,in=32,out=16").gemmFlopsPerSample(),
                   4.0 * 32 * 64 + 6.0 * 64 * 64 + 6.0 * 64 * 16);
  EXPECT_DOUBLE_EQ(parseModelSpec("mlp:8x1").gemmFlopsPerSample(), 4.0 * 8 * 8);
}

}  // namespace
