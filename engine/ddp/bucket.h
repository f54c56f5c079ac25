// Gradient bucket assignment (PyTorch's compute_bucket_assignment_by_size), as a pure function.
//
// Parameters are visited in `order` (default: reverse registration order, since backward produces
// the last layers' gradients first) and grouped by (dtype, device). Each group fills one open bucket;
// a bucket closes when its bytes reach its limit: the first bucket of a group gets
// firstBucketBytes (1 MiB), later ones bucketCapBytes (bucket_cap_mb, 25 MiB). Buckets are returned
// in the order they become complete when gradients arrive in `order` (the position of their last
// member), which is the order DDP launches them in.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "engine/comm/types.h"

namespace ds::ddp {

inline constexpr std::size_t kMiB = std::size_t{1} << 20;
inline constexpr std::size_t kDefaultFirstBucketBytes = kMiB;
inline constexpr double kDefaultBucketCapMb = 25.0;
inline constexpr std::size_t kUnlimitedBucketBytes = std::numeric_limits<std::size_t>::max();

struct BucketParam {
  std::size_t numel = 0;
  comm::DType dtype = comm::DType::kF32;
  comm::Device device{};
};

struct BucketSizeLimits {
  std::size_t firstBucketBytes = kDefaultFirstBucketBytes;
  std::size_t bucketCapBytes = 25 * kMiB;
};

struct BucketSpec {
  comm::DType dtype = comm::DType::kF32;
  comm::Device device{};
  // Parameter indices in the order they were visited; a member's slot in the flat buffer follows it.
  std::vector<std::size_t> params;
  std::size_t numel = 0;
  std::size_t bytes = 0;
  std::size_t sizeLimit = 0;  // the limit this bucket was filled against
  bool operator==(const BucketSpec&) const = default;
};

// bucket_cap_mb -> bytes (MiB, as PyTorch: int(bucket_cap_mb * 1024 * 1024)). Throws ConfigError when
// not positive.
std::size_t bucketCapBytes(double bucketCapMb);

// `order` must be empty or a permutation of [0, params.size()); otherwise ConfigError naming the
// offending index. No I/O, no state.
std::vector<BucketSpec> assignBuckets(const std::vector<BucketParam>& params, const BucketSizeLimits& limits,
                                      const std::vector<std::size_t>& order = {});

}  // namespace ds::ddp
