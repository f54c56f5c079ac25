// Reduction kernels of the shm backend: N inputs folded into one or two outputs in one pass.
//
// The same source is compiled three times (generic x86-64, AVX2+FMA+F16C, AVX-512) and the best one
// the CPU supports is picked at first use; DS_SHM_KERNEL=generic|avx2|avx512 forces one (an ISA the
// CPU lacks is a ConfigError). Floats accumulate in their own type (16-bit floats in f32, rounded
// once at the end, so an N-way sum rounds once, not N-1 times); integers wrap as the hardware does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/comm/types.h"

namespace ds::comm::shm {

enum class Isa { kGeneric, kAvx2, kAvx512 };
const char* isaName(Isa isa);
// The ISAs this CPU can run, best last.
std::vector<Isa> supportedIsas();

// out[i] = ins[0][i] op ins[1][i] op ... op ins[n-1][i], then divided by `divisor` when it is above
// 1 (avg; integers truncate toward zero); out2, unless null, gets the same values. `op` is the wire
// op (never kAvg). out and out2 may be the same memory as one of the inputs (element-wise in place);
// other overlaps are not allowed.
void reduceN(void* out, void* out2, const void* const* ins, int n, std::size_t count, DType t, ReduceOp op,
             int divisor);
// The same on a chosen ISA (tests compare every ISA with the reference); Isa must be supported.
void reduceNWith(Isa isa, void* out, void* out2, const void* const* ins, int n, std::size_t count, DType t,
                 ReduceOp op, int divisor);
// The ISA reduceN uses (after DS_SHM_KERNEL).
Isa activeIsa();

namespace detail {
using ReduceFn = void (*)(void*, void*, const void* const*, int, std::size_t, DType, ReduceOp, int);
// One per compiled ISA (shm_kernels_<isa>.cpp).
void reduceGeneric(void*, void*, const void* const*, int, std::size_t, DType, ReduceOp, int);
void reduceAvx2(void*, void*, const void* const*, int, std::size_t, DType, ReduceOp, int);
void reduceAvx512(void*, void*, const void* const*, int, std::size_t, DType, ReduceOp, int);
}  // namespace detail

}  // namespace ds::comm::shm
