// Element types and reduce ops: their names in flags and JSON ("f32", "sum"), nccl-tests' names,
// and their sizes. The vocabulary every floor shares; engine/comm/types.h adds devices and buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ds {

enum class DType : std::uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8, kI8 };
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                       DType::kI32, DType::kI64, DType::kU8,  DType::kI8};

enum class ReduceOp : std::uint8_t { kSum, kProd, kMin, kMax, kAvg };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kAvg};

std::size_t dtypeSize(DType t);
bool isFloating(DType t);
// "f32", "bf16", ... (the names flags and JSON use).
const char* dtypeName(DType t);
// Accepts our names and nccl-tests' (float, double, half, bfloat16, int32, int64, uint8, int8).
// Throws ConfigError listing the valid names.
DType parseDType(std::string_view name);

// "sum", "prod", "min", "max", "avg".
const char* reduceOpName(ReduceOp op);
ReduceOp parseReduceOp(std::string_view name);

}  // namespace ds
