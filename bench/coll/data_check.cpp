#include "bench/coll/data_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ds::bench::coll {

namespace {

bool isSigned(comm::DType t) { return t != comm::DType::kU8; }

double fold(comm::ReduceOp op, double a, double b) {
  switch (op) {
    case comm::ReduceOp::kProd:
      return a * b;
    case comm::ReduceOp::kMin:
      return std::min(a, b);
    case comm::ReduceOp::kMax:
      return std::max(a, b);
    default:
      return a + b;
  }
}

double tolerance(comm::DType t) {
  switch (t) {
    case comm::DType::kF16:
      return 1e-3;
    case comm::DType::kBF16:
      return 1e-2;
    case comm::DType::kF32:
      return 1e-6;
    case comm::DType::kF64:
      return 1e-12;
    default:
      return 0;
  }
}

}  // namespace

double roundTo(comm::DType t, double v) {
  std::uint64_t scratch = 0;
  comm::setElementFromDouble(&scratch, 0, t, v);
  return comm::elementAsDouble(&scratch, 0, t);
}

double reduceInput(const CheckArgs& a, int rank, std::size_t i) {
  const long r = rank;
  const long k = static_cast<long>((i + static_cast<std::size_t>(a.rep)) % kReducePeriod);
  switch (a.op) {
    case comm::ReduceOp::kProd:
      return (r + k) % a.nranks == 0 ? 2 : 1;
    case comm::ReduceOp::kMin:
    case comm::ReduceOp::kMax:
      return static_cast<double>((r * 5 + k * 3) % 11 - (isSigned(a.dtype) ? 5 : 0));
    default:
      return static_cast<double>((r * 3 + k) % 7 - (isSigned(a.dtype) ? 3 : 0));
  }
}

double reducedValue(const CheckArgs& a, std::size_t i) {
  double acc = reduceInput(a, 0, i);
  for (int r = 1; r < a.nranks; ++r) acc = fold(a.op, acc, reduceInput(a, r, i));
  if (a.op == comm::ReduceOp::kAvg)
    acc = comm::isFloating(a.dtype) ? acc / a.nranks : std::trunc(acc / a.nranks);
  return roundTo(a.dtype, acc);
}

double moveInput(const CheckArgs& a, int rank, std::size_t i) {
  const long v = static_cast<long>(
      (static_cast<std::size_t>(rank) * 7 + i + static_cast<std::size_t>(a.rep)) % kMovePeriod);
  return static_cast<double>(v - (isSigned(a.dtype) ? 48 : 0));
}

long long countWrong(const CollSpec& spec, const CheckArgs& a, const void* got) {
  if (!spec.checked(a)) return 0;
  const std::size_t n = a.counts.recvCount;
  const double tol = tolerance(a.dtype);
  std::size_t block = spec.checkBlock != nullptr ? spec.checkBlock(a) : n;
  if (block == 0) block = n;
  long long wrong = 0;
  std::vector<double> want, slack;
  for (std::size_t start = 0; start < n; start += block) {
    const std::size_t len = std::min(block, n - start);
    const std::size_t period = spec.period == 0 ? len : std::min(spec.period, len);
    want.resize(period);
    slack.resize(period);
    for (std::size_t j = 0; j < period; ++j) {
      want[j] = spec.expected(a, start + j);
      slack[j] = tol * std::max(1.0, std::fabs(want[j]));
    }
    for (std::size_t i = 0, j = 0; i < len; ++i) {
      const double have = comm::elementAsDouble(got, start + i, a.dtype);
      if (!(std::fabs(have - want[j]) <= slack[j])) ++wrong;
      if (++j == period) j = 0;
    }
  }
  return wrong;
}

}  // namespace ds::bench::coll
