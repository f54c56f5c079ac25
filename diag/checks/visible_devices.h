// CUDA_VISIBLE_DEVICES as CUDA reads it, for the gpu.visible_devices check (gpu_checks.cpp) and its
// fuzz target (diag/fuzz/cuda_visible_fuzz.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ds::diag {

struct VisibleSpec {
  bool set = false;
  std::vector<std::string> entries;  // as CUDA will use them (up to the first invalid one)
  std::vector<std::string> ignored;  // from the first invalid entry on: CUDA silently drops them
  std::vector<std::string> duplicates;
  std::string kind;  // "indices", "uuids", "mig", "mixed", "none"
};

// The value of CUDA_VISIBLE_DEVICES (nullopt: unset): indices, GPU- UUIDs or MIG- UUIDs, comma
// separated; CUDA stops at the first entry it cannot parse.
VisibleSpec parseVisible(const std::optional<std::string>& v);

}  // namespace ds::diag
