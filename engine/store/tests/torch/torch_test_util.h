// Test support for the `torch` label: real PyTorch as the peer. By default Debian's python3-torch
// 1.13, which imports only under /usr/bin/python3 (not a pyenv python3 first on PATH); DS_TORCH_PYTHON
// names another interpreter, e.g. a venv with torch 2.x from PyPI:
//   DS_TORCH_PYTHON=/work/venv-torch2/bin/python3 ctest -L torch
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"

namespace ds::testing::torch {

// The interpreter that runs the torch side: $DS_TORCH_PYTHON, else /usr/bin/python3.
inline const std::string& python() {
  static const std::string p = [] {
    const char* env = std::getenv("DS_TORCH_PYTHON");
    return std::string(env && *env ? env : "/usr/bin/python3");
  }();
  return p;
}

// Empty when `import torch` works under python(); else why not (for GTEST_SKIP).
inline const std::string& unavailable() {
  static const std::string why = [] {
    auto r = run({python(), "-c",
                  "import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)"},
                 cleanOptions(std::chrono::seconds(60)));
    if (r.exitCode == 0) return std::string();
    return "PyTorch cannot be imported by " + python() +
           " (install Debian's python3-torch, as scripts/setup.sh does, or point DS_TORCH_PYTHON at a python "
           "with torch): " +
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
