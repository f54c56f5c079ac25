// The data every rank puts into a collective and the reference results, shared by the specs. Values
// are small integers, exact in every dtype (f16/bf16 included) for the rank counts we run, so a
// check compares exactly for integers and within a rounding tolerance for floats.
#pragma once

#include <cstddef>

#include "bench/coll/collective.h"

namespace ds::bench::coll {

// Element i of `rank`'s input for a reducing collective with op a.op (prod uses 1s and one 2 per
// element, so products stay small; min/max spread the values; sum/avg stay small).
double reduceInput(const CheckArgs& a, int rank, std::size_t i);
// The reduction over all ranks of reduceInput(., i) with a.op (avg divides; integers truncate).
double reducedValue(const CheckArgs& a, std::size_t i);
// Element i of `rank`'s input for a collective that moves data (broadcast, allgather, ...).
double moveInput(const CheckArgs& a, int rank, std::size_t i);

// Fills `count` elements of host memory at `data` with fn(i).
template <typename Fn>
void fillHost(void* data, std::size_t count, comm::DType t, Fn&& fn);

// Number of elements of `got` (host memory, a.counts.recvCount elements) that differ from
// spec.expected beyond the dtype's tolerance.
long long countWrong(const CollSpec& spec, const CheckArgs& a, const void* got);

// The value rounded as the dtype stores it (what a backend can possibly return).
double roundTo(comm::DType t, double v);

}  // namespace ds::bench::coll

#include "engine/comm/reduce.h"

template <typename Fn>
void ds::bench::coll::fillHost(void* data, std::size_t count, comm::DType t, Fn&& fn) {
  for (std::size_t i = 0; i < count; ++i) comm::setElementFromDouble(data, i, t, fn(i));
}
