#include "engine/comm/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "engine/comm/half.h"
#include "engine/comm/reduce.h"
#include "engine/comm/work.h"
#include "engine/common/error.h"

using namespace ds::comm;

TEST(DType, NamesAndSizesRoundTrip) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(parseDType(dtypeName(t)), t);
    EXPECT_GT(dtypeSize(t), 0u);
  }
  EXPECT_EQ(parseDType("float"), DType::kF32);
  EXPECT_EQ(parseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(dtypeSize(DType::kBF16), 2u);
  try {
    parseDType("f8");
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 (bfloat16)"), std::string::npos);
  }
  EXPECT_THROW(parseReduceOp("mean"), ds::ConfigError);
  EXPECT_EQ(parseReduceOp("avg"), ReduceOp::kAvg);
}

TEST(Half, EveryF16ValueRoundTrips) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float f = f16ToFloat(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToF16(f), h) << "h=" << h << " f=" << f;
  }
  EXPECT_EQ(f16ToFloat(floatToF16(1.0f)), 1.0f);
  EXPECT_EQ(f16ToFloat(floatToF16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16ToFloat(floatToF16(1e6f))));
  EXPECT_EQ(floatToF16(1.0f + 1.0f / 2048), floatToF16(1.0f));  // a tie rounds to even
}

TEST(Half, EveryBf16ValueRoundTrips) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float f = bf16ToFloat(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToBf16(f), h) << "h=" << h;
  }
  EXPECT_EQ(bf16ToFloat(floatToBf16(3.0f)), 3.0f);
}

TEST(Reduce, EveryOpOnIntegersIsExactAndWraps) {
  std::int32_t a[3] = {1, -5, 7};
  std::int32_t b[3] = {2, 3, -7};
  reduceInto(a, b, 3, DType::kI32, ReduceOp::kSum);
  EXPECT_EQ(a[0], 3);
  EXPECT_EQ(a[1], -2);
  EXPECT_EQ(a[2], 0);
  std::uint8_t u[1] = {200};
  std::uint8_t v[1] = {100};
  reduceInto(u, v, 1, DType::kU8, ReduceOp::kSum);
  EXPECT_EQ(u[0], 44);  // 300 mod 256
  std::int8_t m[2] = {-3, 4};
  std::int8_t n[2] = {2, -9};
  reduceInto(m, n, 2, DType::kI8, ReduceOp::kMin);
  EXPECT_EQ(m[0], -3);
  EXPECT_EQ(m[1], -9);
  std::int64_t p[1] = {6};
  std::int64_t q[1] = {-7};
  reduceInto(p, q, 1, DType::kI64, ReduceOp::kProd);
  EXPECT_EQ(p[0], -42);
  std::int32_t avg[2] = {7, -7};
  divideBy(avg, 2, DType::kI32, 2);
  EXPECT_EQ(avg[0], 3);
  EXPECT_EQ(avg[1], -3);  // truncation toward zero
}

TEST(Reduce, SixteenBitFloatsComputeInF32AndRoundOnce) {
  std::uint16_t a[1] = {floatToBf16(1.5f)};
  std::uint16_t b[1] = {floatToBf16(2.25f)};
  reduceInto(a, b, 1, DType::kBF16, ReduceOp::kMax);
  EXPECT_EQ(bf16ToFloat(a[0]), 2.25f);
  reduceInto(a, b, 1, DType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(bf16ToFloat(a[0]), 4.5f);
  std::uint16_t h[1] = {floatToF16(3.0f)};
  divideBy(h, 1, DType::kF16, 4);
  EXPECT_EQ(f16ToFloat(h[0]), 0.75f);
  EXPECT_DOUBLE_EQ(elementAsDouble(h, 0, DType::kF16), 0.75);
}

TEST(OpDescText, FingerprintNamesWhatMustMatch) {
  OpDesc d;
  d.type = OpType::kBroadcast;
  d.dtype = DType::kBF16;
  d.count = 10;
  d.root = 2;
  d.seq = 7;
  d.bytes = 20;
  EXPECT_EQ(d.fingerprint(), "broadcast(bf16, count=10, root=2)");
  EXPECT_EQ(d.describe(), "broadcast(bf16, count=10, root=2) #7 (20 bytes)");
  d.type = OpType::kAllreduce;
  d.op = ReduceOp::kMax;
  EXPECT_EQ(d.fingerprint(), "allreduce(bf16, count=10, op=max)");
}

TEST(WorkHandle, WaitRethrowsAndTimesOut) {
  OpDesc d;
  d.timeout = std::chrono::milliseconds(50);
  Work w(d);
  EXPECT_FALSE(w.isCompleted());
  // A caller timeout shorter than the op's leaves the op running.
  EXPECT_THROW(w.wait(std::chrono::milliseconds(5)), ds::TimeoutError);
  EXPECT_FALSE(w.isCompleted());
  // The op's own timeout completes it with an error.
  EXPECT_THROW(w.wait(), ds::TimeoutError);
  EXPECT_TRUE(w.isCompleted());
  EXPECT_TRUE(w.exception() != nullptr);
  Work ok(d);
  ok.markStarted();
  ok.markCompleted();
  ok.wait();
  EXPECT_GE(ok.duration().count(), 0);
  Work bad(d);
  bad.markCompleted(std::make_exception_ptr(ds::BackendError("boom")));
  EXPECT_THROW(bad.wait(), ds::BackendError);
}
