// The data every rank puts into a collective and the reference results, shared by the specs. Values
// are small integers, exact in every dtype (f16/bf16 included) for the rank counts we run, so a
// check compares exactly for integers and within a rounding tolerance for floats.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "bench/coll/collective.h"

namespace ds::bench::coll {

// The inputs repeat every kReducePeriod elements (reducing collectives) or kMovePeriod (moving
// ones), so a fill or a check computes one period and copies or compares the rest: at 1 GiB the
// check is a pass over memory, not a quarter of a billion calls per rank.
inline constexpr std::size_t kReducePeriod = 1009;
inline constexpr std::size_t kMovePeriod = 97;

// Element i of `rank`'s input for a reducing collective with op a.op (prod uses 1s and one 2 per
// element, so products stay small; min/max spread the values; sum/avg stay small).
double reduceInput(const CheckArgs& a, int rank, std::size_t i);
// The reduction over all ranks of reduceInput(., i) with a.op (avg divides; integers truncate).
double reducedValue(const CheckArgs& a, std::size_t i);
// Element i of `rank`'s input for a collective that moves data (broadcast, allgather, ...).
double moveInput(const CheckArgs& a, int rank, std::size_t i);

// Fills `count` elements of host memory at `data` with fn(i), which repeats every `period` elements
// (0: no period): the first period is computed, the rest copied.
template <typename Fn>
void fillHost(void* data, std::size_t count, comm::DType t, std::size_t period, Fn&& fn);

// Number of elements of `got` (host memory, a.counts.recvCount elements) that differ from
// spec.expected beyond the dtype's tolerance. Computes spec.expected for one period of each block
// (CollSpec::period, checkBlock) and compares every element against it.
long long countWrong(const CollSpec& spec, const CheckArgs& a, const void* got);

// The value rounded as the dtype stores it (what a backend can possibly return).
double roundTo(comm::DType t, double v);

}  // namespace ds::bench::coll

#include "engine/comm/reduce.h"

template <typename Fn>
void ds::bench::coll::fillHost(void* data, std::size_t count, comm::DType t, std::size_t period, Fn&& fn) {
  const std::size_t first = period == 0 ? count : std::min(period, count);
  for (std::size_t i = 0; i < first; ++i) comm::setElementFromDouble(data, i, t, fn(i));
  // Doubling copies: [0, done) always holds whole periods, so copying it on keeps the phase.
  auto* bytes = static_cast<char*>(data);
  const std::size_t elt = comm::dtypeSize(t);
  for (std::size_t done = first; done < count;) {
    const std::size_t n = std::min(done, count - done);
    std::memcpy(bytes + done * elt, bytes, n * elt);
    done += n;
  }
}
