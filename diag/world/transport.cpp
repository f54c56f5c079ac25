#include "diag/world/transport.h"

#include <fmt/format.h>

#include <algorithm>

#include "diag/check.h"
#include "diag/world/world_checks.h"

namespace ds::diag {

namespace {

bool has(const std::vector<std::string>& v, const std::string& b) {
  return std::find(v.begin(), v.end(), b) != v.end();
}

// gloo, or the first backend this build has (mpi when gloo is not built).
std::string fallback(const std::vector<std::string>& available) {
  if (has(available, "gloo") || available.empty()) return "gloo";
  for (const auto& b : available) {
    if (b != "nccl") return b;
  }
  return available.front();
}

}  // namespace

Transport localTransport(const std::string& job, const std::vector<std::string>& available,
                         const std::string& gpuProblem) {
  if (!has(available, job)) {
    return {fallback(available), fmt::format("this dsdiag was built without the {} backend", job)};
  }
  if (job == "nccl" && !gpuProblem.empty()) return {fallback(available), gpuProblem};
  return {job, ""};
}

Transport agreedTransport(const std::string& job, const std::vector<std::string>& available,
                          const std::vector<RankReport>& reports) {
  for (const auto& r : reports) {
    if (r.transport != job) {
      const std::string why =
          !r.transportWhy.empty() ? r.transportWhy
          : r.transport.empty()   ? std::string("its dsdiag named no backend (an older version?)")
                                  : "it chose " + r.transport;
      return {fallback(available), fmt::format("rank {}: {}", r.rank, why)};
    }
  }
  if (job == "nccl") {
    WorldFacts f;
    f.reports = reports;
    const Finding g = world::gpuUnique(f);
    if (g.status == DiagStatus::kFail) return {fallback(available), g.message};
  }
  return {job, ""};
}

}  // namespace ds::diag
