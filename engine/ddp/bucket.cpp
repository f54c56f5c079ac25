#include "engine/ddp/bucket.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/common/error.h"

namespace ds::ddp {

std::size_t bucketCapBytes(double bucketCapMb) {
  if (!(bucketCapMb > 0)) {
    throw ConfigError(fmt::format("bucket_cap_mb must be positive, got {}", bucketCapMb));
  }
  return static_cast<std::size_t>(bucketCapMb * 1024.0 * 1024.0);
}

std::vector<BucketSpec> assignBuckets(const std::vector<BucketParam>& params, const BucketSizeLimits& limits,
                                      const std::vector<std::size_t>& order) {
  const std::size_t n = params.size();
  std::vector<std::size_t> visit = order;
  if (visit.empty()) {
    for (std::size_t i = n; i-- > 0;) visit.push_back(i);
  } else {
    if (visit.size() != n) {
      throw ConfigError(fmt::format("bucket order lists {} parameters, the model has {}", visit.size(), n));
    }
    std::vector<bool> seen(n, false);
    for (std::size_t idx : visit) {
      if (idx >= n || seen[idx]) {
        throw ConfigError(fmt::format("bucket order is not a permutation of the {} parameters: index {} {}",
                                      n, idx, idx >= n ? "is out of range" : "appears twice"));
      }
      seen[idx] = true;
    }
  }
  struct Open {
    BucketSpec bucket;
    bool firstUsed = false;  // the group's first bucket was closed
    std::size_t lastPos = 0;
  };
  auto key = [](const BucketParam& p) {
    return std::make_tuple(static_cast<int>(p.dtype), static_cast<int>(p.device.type), p.device.index);
  };
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::pair<std::size_t, BucketSpec>> done;  // (position of the last member, bucket)
  for (std::size_t pos = 0; pos < visit.size(); ++pos) {
    const std::size_t idx = visit[pos];
    const BucketParam& p = params[idx];
    Open& o = open[key(p)];
    if (o.bucket.params.empty()) {
      o.bucket.dtype = p.dtype;
      o.bucket.device = p.device;
      o.bucket.sizeLimit = o.firstUsed ? limits.bucketCapBytes : limits.firstBucketBytes;
    }
    o.bucket.params.push_back(idx);
    o.bucket.numel += p.numel;
    o.bucket.bytes += p.numel * comm::dtypeSize(p.dtype);
    o.lastPos = pos;
    if (o.bucket.bytes >= o.bucket.sizeLimit) {
      done.emplace_back(pos, std::move(o.bucket));
      o.bucket = BucketSpec{};
      o.firstUsed = true;
    }
  }
  for (auto& [k, o] : open) {
    if (!o.bucket.params.empty()) done.emplace_back(o.lastPos, std::move(o.bucket));
  }
  std::stable_sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BucketSpec> out;
  out.reserve(done.size());
  for (auto& d : done) out.push_back(std::move(d.second));
  return out;
}

}  // namespace ds::ddp
