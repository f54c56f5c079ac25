#include "engine/common/backends.h"

namespace ds {

std::vector<std::string> backendNames() { return {std::begin(kBackendNames), std::end(kBackendNames)}; }

bool isBackendName(std::string_view name) {
  for (const char* b : kBackendNames) {
    if (name == b) return true;
  }
  return false;
}

std::string backendNamesText(const char* last) {
  std::string out;
  const std::size_t n = std::size(kBackendNames);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? std::string(" ") + last + " " : ", ";
    out += kBackendNames[i];
  }
  return out;
}

const char* defaultBackendFor(std::string_view accelerator) {
  return accelerator == "cuda" ? "nccl" : "gloo";
}

}  // namespace ds
