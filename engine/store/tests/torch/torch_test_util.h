// Test support for the `torch` label: real PyTorch as the peer (Debian's python3-torch, which imports
// only under /usr/bin/python3, not a pyenv python3 first on PATH).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "engine/testing/subprocess.h"

namespace ds::testing::torch {

inline const char* kPython = "/usr/bin/python3";

// Empty when `import torch` works under kPython; else why not (for GTEST_SKIP).
inline const std::string& unavailable() {
  static const std::string why = [] {
    auto r = run({kPython, "-c",
                  "import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)"},
                 cleanOptions(std::chrono::seconds(60)));
    if (r.exitCode == 0) return std::string();
    return "PyTorch cannot be imported by " + std::string(kPython) +
           " (install Debian's python3-torch: scripts/setup.sh does): " +
           r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  }();
  return why;
}

// A script of engine/store/tests/torch.
inline std::string script(const std::string& name) { return std::string(DS_TORCH_SCRIPTS) + "/" + name; }

}  // namespace ds::testing::torch

#define DS_REQUIRE_TORCH()                                                                                 \
  do {                                                                                                     \
    if (!::ds::testing::torch::unavailable().empty()) GTEST_SKIP() << ::ds::testing::torch::unavailable(); \
  } while (0)
