// Element-wise reductions on host memory, for every dtype and op. Used by CPU backends where the
// library lacks a type or an op (bf16 in Gloo, avg everywhere but NCCL) and by tests as the
// reference. 16-bit floats are computed in f32 and rounded once per step.
#pragma once

#include <cstddef>

#include "engine/comm/types.h"

namespace ds::comm {

// dst[i] = dst[i] (op) src[i] for i < count. kAvg accumulates as kSum; finish with divideBy.
void reduceInto(void* dst, const void* src, std::size_t count, DType t, ReduceOp op);
// data[i] /= n: the second half of avg. Integers truncate toward zero, as NCCL's ncclAvg.
void divideBy(void* data, std::size_t count, DType t, int n);
// The op to run on the wire for `op`: avg travels as sum and is divided afterwards.
inline ReduceOp wireOp(ReduceOp op) { return op == ReduceOp::kAvg ? ReduceOp::kSum : op; }

// Element i of a buffer as a double (for checks and error messages).
double elementAsDouble(const void* data, std::size_t i, DType t);
// Stores v, converted and rounded, into element i (integers: truncated toward zero and wrapped to the
// type, as an integer conversion does; never undefined behaviour).
void setElementFromDouble(void* data, std::size_t i, DType t, double v);

}  // namespace ds::comm
