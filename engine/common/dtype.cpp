#include "engine/common/dtype.h"

#include <fmt/format.h>

#include "engine/common/error.h"

namespace ds {

std::size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kU8:
    case DType::kI8:
      return 1;
  }
  DS_CHECK(false, "unknown dtype {}", static_cast<int>(t));
  return 0;
}

bool isFloating(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16;
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
    case DType::kI8:
      return "i8";
  }
  return "?";
}

DType parseDType(std::string_view n) {
  struct Alias {
    std::string_view name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::kF32},     {"float", DType::kF32},   {"float32", DType::kF32},   {"f64", DType::kF64},
      {"double", DType::kF64},  {"float64", DType::kF64}, {"f16", DType::kF16},       {"half", DType::kF16},
      {"float16", DType::kF16}, {"bf16", DType::kBF16},   {"bfloat16", DType::kBF16}, {"i32", DType::kI32},
      {"int32", DType::kI32},   {"int", DType::kI32},     {"i64", DType::kI64},       {"int64", DType::kI64},
      {"u8", DType::kU8},       {"uint8", DType::kU8},    {"i8", DType::kI8},         {"int8", DType::kI8}};
  for (const auto& a : kAliases) {
    if (a.name == n) return a.t;
  }
  throw ConfigError(
      fmt::format("'{}' is not a data type; valid names are f32 (float), f64 (double), f16 (half), "
                  "bf16 (bfloat16), i32 (int32), i64 (int64), u8 (uint8) and i8 (int8).",
                  n));
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "?";
}

ReduceOp parseReduceOp(std::string_view n) {
  for (ReduceOp op : kAllReduceOps) {
    if (n == reduceOpName(op)) return op;
  }
  throw ConfigError(fmt::format("'{}' is not a reduce op; valid ops are sum, prod, min, max and avg.", n));
}

}  // namespace ds
