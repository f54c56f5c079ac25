// The shm reduction kernels on every ISA this CPU runs, against reduceInto (engine/comm/reduce.h).
#include "engine/comm/backends/shm/shm_kernels.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/comm/reduce.h"

namespace ds::comm::shm {
namespace {

// Random values that keep every op finite in every dtype (prod of up to 5 values in [-2, 2]).
double valueFor(std::mt19937& rng, DType t, ReduceOp op) {
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  if (op == ReduceOp::kProd) return isFloating(t) ? real(rng) : small(rng);
  if (!isFloating(t)) return std::uniform_int_distribution<int>(-100, 100)(rng);
  return real(rng) * 100;
}

TEST(ShmKernels, EveryIsaMatchesTheReference) {
  std::mt19937 rng(7);
  const DType types[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                         DType::kI32, DType::kI64, DType::kU8,  DType::kI8};
  for (Isa isa : supportedIsas()) {
    for (DType t : types) {
      for (ReduceOp op : kAllReduceOps) {
        for (int n : {1, 2, 3, 5}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1023}, std::size_t{3001}}) {
            const std::size_t es = dtypeSize(t);
            std::vector<std::vector<char>> ins(n, std::vector<char>(count * es));
            for (auto& in : ins) {
              for (std::size_t i = 0; i < count; ++i)
                setElementFromDouble(in.data(), i, t, valueFor(rng, t, op));
            }
            std::vector<const void*> ptrs;
            for (auto& in : ins) ptrs.push_back(in.data());
            std::vector<char> out(count * es), out2(count * es);
            const int divisor = op == ReduceOp::kAvg ? n : 1;
            reduceNWith(isa, out.data(), out2.data(), ptrs.data(), n, count, t, wireOp(op), divisor);
            // The reference: in double for floats (one rounding, as the kernels promise for 16-bit
            // floats, and within an ulp or two for f32/f64); pairwise reduceInto for integers.
            std::vector<char> ref = ins[0];
            if (!isFloating(t)) {
              for (int k = 1; k < n; ++k) reduceInto(ref.data(), ins[k].data(), count, t, op);
              if (divisor > 1) divideBy(ref.data(), count, t, divisor);
            }
            int wrong = 0;
            for (std::size_t i = 0; i < count && wrong < 3; ++i) {
              double got = elementAsDouble(out.data(), i, t);
              double want;
              double scale = 1.0;  // the size of the rounding error: the inputs' magnitude, not the result's
              if (isFloating(t)) {
                double acc = elementAsDouble(ins[0].data(), i, t);
                double mag = std::fabs(acc);
                for (int k = 1; k < n; ++k) {
                  double v = elementAsDouble(ins[k].data(), i, t);
                  mag = wireOp(op) == ReduceOp::kProd ? mag * std::fabs(v) : mag + std::fabs(v);
                  switch (wireOp(op)) {
                    case ReduceOp::kProd:
                      acc *= v;
                      break;
                    case ReduceOp::kMin:
                      acc = std::min(acc, v);
                      break;
                    case ReduceOp::kMax:
                      acc = std::max(acc, v);
                      break;
                    default:
                      acc += v;
                  }
                }
                want = acc / divisor;
                scale = std::max({1.0, mag, std::fabs(want)});
              } else {
                want = elementAsDouble(ref.data(), i, t);
              }
              double tol = 0;
              if (t == DType::kF16) tol = 1.0 / 1024;
              if (t == DType::kBF16) tol = 1.0 / 128;
              if (t == DType::kF32) tol = 1e-6;
              if (t == DType::kF64) tol = 1e-14;
              if (std::fabs(got - want) > tol * scale) {
                ++wrong;
                ADD_FAILURE() << fmt::format("{} {} {} n={} count={} [{}]: got {} want {}", isaName(isa),
                                             dtypeName(t), reduceOpName(op), n, count, i, got, want);
              }
            }
            EXPECT_EQ(std::memcmp(out.data(), out2.data(), out.size()), 0) << "out2 differs from out";
          }
        }
      }
    }
  }
}

TEST(ShmKernels, OutputMayAliasAnInput) {
  for (Isa isa : supportedIsas()) {
    std::vector<float> a(2000), b(2000);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 1.0f;
    }
    const void* ins[] = {a.data(), b.data()};
    reduceNWith(isa, a.data(), nullptr, ins, 2, a.size(), DType::kF32, ReduceOp::kSum, 1);
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], static_cast<float>(i) + 1.0f) << isaName(isa);
  }
}

TEST(ShmKernels, SixteenBitFloatsRoundOnceLikeTheReference) {
  // 1 + 2^-9 + 2^-9 in f16: rounding after each step loses both halves; one rounding keeps 2^-8.
  for (Isa isa : supportedIsas()) {
    std::vector<std::uint16_t> one{0x3c00};  // 1.0
    std::uint16_t t9 = 0;
    {
      std::vector<char> buf(2);
      setElementFromDouble(buf.data(), 0, DType::kF16, std::ldexp(1.0, -11));
      std::memcpy(&t9, buf.data(), 2);
    }
    std::uint16_t out = 0;
    const void* ins[] = {one.data(), &t9, &t9, &t9, &t9};
    reduceNWith(isa, &out, nullptr, ins, 5, 1, DType::kF16, ReduceOp::kSum, 1);
    std::vector<char> buf(2);
    std::memcpy(buf.data(), &out, 2);
    EXPECT_EQ(elementAsDouble(buf.data(), 0, DType::kF16), 1.0 + std::ldexp(1.0, -9)) << isaName(isa);
  }
}

}  // namespace
}  // namespace ds::comm::shm
