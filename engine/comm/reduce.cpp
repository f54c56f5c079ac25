#include "engine/comm/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/comm/half.h"
#include "engine/common/error.h"

namespace ds::comm {
namespace {

template <typename T>
void reduceTyped(T* d, const T* s, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] + s[i]);
      return;
    case ReduceOp::kProd:
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] * s[i]);
      return;
    case ReduceOp::kMin:
      for (std::size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]);
      return;
    case ReduceOp::kMax:
      for (std::size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]);
      return;
  }
}

template <float (*ToF)(std::uint16_t), std::uint16_t (*FromF)(float)>
void reduce16(std::uint16_t* d, const std::uint16_t* s, std::size_t n, ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    float a = ToF(d[i]);
    float b = ToF(s[i]);
    float r = 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        r = a + b;
        break;
      case ReduceOp::kProd:
        r = a * b;
        break;
      case ReduceOp::kMin:
        r = std::min(a, b);
        break;
      case ReduceOp::kMax:
        r = std::max(a, b);
        break;
    }
    d[i] = FromF(r);
  }
}

// Integer arithmetic in the type's own width wraps like the hardware (and NCCL) do; unsigned math
// avoids signed-overflow UB for sum and prod.
template <typename T, typename U>
void reduceInt(T* d, const T* s, std::size_t n, ReduceOp op) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<U>(d[i]) + static_cast<U>(s[i]));
  } else if (op == ReduceOp::kProd) {
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<U>(d[i]) * static_cast<U>(s[i]));
  } else {
    reduceTyped(d, s, n, op);
  }
}

}  // namespace

void reduceInto(void* dst, const void* src, std::size_t count, DType t, ReduceOp op) {
  switch (t) {
    case DType::kF32:
      return reduceTyped(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
    case DType::kF64:
      return reduceTyped(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
    case DType::kF16:
      return reduce16<f16ToFloat, floatToF16>(static_cast<std::uint16_t*>(dst),
                                              static_cast<const std::uint16_t*>(src), count, op);
    case DType::kBF16:
      return reduce16<bf16ToFloat, floatToBf16>(static_cast<std::uint16_t*>(dst),
                                                static_cast<const std::uint16_t*>(src), count, op);
    case DType::kI32:
      return reduceInt<std::int32_t, std::uint32_t>(static_cast<std::int32_t*>(dst),
                                                    static_cast<const std::int32_t*>(src), count, op);
    case DType::kI64:
      return reduceInt<std::int64_t, std::uint64_t>(static_cast<std::int64_t*>(dst),
                                                    static_cast<const std::int64_t*>(src), count, op);
    case DType::kU8:
      return reduceInt<std::uint8_t, unsigned>(static_cast<std::uint8_t*>(dst),
                                               static_cast<const std::uint8_t*>(src), count, op);
    case DType::kI8:
      return reduceInt<std::int8_t, unsigned>(static_cast<std::int8_t*>(dst),
                                              static_cast<const std::int8_t*>(src), count, op);
  }
}

void divideBy(void* data, std::size_t count, DType t, int n) {
  DS_CHECK(n > 0, "divideBy({})", n);
  switch (t) {
    case DType::kF32: {
      auto* p = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
      return;
    }
    case DType::kF64: {
      auto* p = static_cast<double*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= n;
      return;
    }
    case DType::kF16: {
      auto* p = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] = floatToF16(f16ToFloat(p[i]) / static_cast<float>(n));
      return;
    }
    case DType::kBF16: {
      auto* p = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] = floatToBf16(bf16ToFloat(p[i]) / static_cast<float>(n));
      return;
    }
    case DType::kI32: {
      auto* p = static_cast<std::int32_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= n;
      return;
    }
    case DType::kI64: {
      auto* p = static_cast<std::int64_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] /= n;
      return;
    }
    case DType::kU8: {
      auto* p = static_cast<std::uint8_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<std::uint8_t>(p[i] / n);
      return;
    }
    case DType::kI8: {
      auto* p = static_cast<std::int8_t*>(data);
      for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<std::int8_t>(p[i] / n);
      return;
    }
  }
}

double elementAsDouble(const void* data, std::size_t i, DType t) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kF64:
      return static_cast<const double*>(data)[i];
    case DType::kF16:
      return f16ToFloat(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kBF16:
      return bf16ToFloat(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kI32:
      return static_cast<const std::int32_t*>(data)[i];
    case DType::kI64:
      return static_cast<double>(static_cast<const std::int64_t*>(data)[i]);
    case DType::kU8:
      return static_cast<const std::uint8_t*>(data)[i];
    case DType::kI8:
      return static_cast<const std::int8_t*>(data)[i];
  }
  return 0;
}

namespace {
// A double as an integer of type T, defined for every input: truncated toward zero, NaN as 0, out of
// int64's range clamped to it, then wrapped modulo 2^bits as an integer conversion does (-60 as u8 is
// 196). A plain static_cast of an out-of-range double is undefined behaviour (UBSan's
// float-cast-overflow).
template <typename T>
T integerFromDouble(double v) {
  if (std::isnan(v)) return 0;
  constexpr double kLow = -9223372036854775808.0;  // -2^63, exact in a double
  if (v <= kLow) return static_cast<T>(std::numeric_limits<std::int64_t>::min());
  if (v >= -kLow) return static_cast<T>(std::numeric_limits<std::int64_t>::max());
  return static_cast<T>(static_cast<std::int64_t>(v));
}
}  // namespace

void setElementFromDouble(void* data, std::size_t i, DType t, double v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      return;
    case DType::kF64:
      static_cast<double*>(data)[i] = v;
      return;
    case DType::kF16:
      static_cast<std::uint16_t*>(data)[i] = floatToF16(static_cast<float>(v));
      return;
    case DType::kBF16:
      static_cast<std::uint16_t*>(data)[i] = floatToBf16(static_cast<float>(v));
      return;
    case DType::kI32:
      static_cast<std::int32_t*>(data)[i] = integerFromDouble<std::int32_t>(v);
      return;
    case DType::kI64:
      static_cast<std::int64_t*>(data)[i] = integerFromDouble<std::int64_t>(v);
      return;
    case DType::kU8:
      static_cast<std::uint8_t*>(data)[i] = integerFromDouble<std::uint8_t>(v);
      return;
    case DType::kI8:
      static_cast<std::int8_t*>(data)[i] = integerFromDouble<std::int8_t>(v);
      return;
  }
}

}  // namespace ds::comm
