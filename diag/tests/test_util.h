// Helpers for dsdiag's unit tests: run one check against a crafted environment.
#pragma once

#include <gtest/gtest.h>

#include "diag/registry.h"

namespace ds::diag::testing {

// The definition of check `id` (fails the test when unknown).
inline const CheckDef& checkDef(const std::string& id) {
  for (const auto& c : localChecks()) {
    if (c.id == id) return c;
  }
  throw std::runtime_error("no check " + id);
}

// Runs check `id` with exactly the variables in `vars` (names given explicitly, since MapEnv cannot
// list them).
inline Finding runCheck(const std::string& id, std::map<std::string, std::string, std::less<>> vars,
                        DiagOptions opt = {}) {
  std::vector<std::string> names;
  for (const auto& [k, _] : vars) names.push_back(k);
  if (names.empty()) names.push_back("DSDIAG_NO_VARIABLES");
  env::MapEnv env(vars);
  Context ctx(env, opt, names);
  return checkDef(id).run(ctx);
}

inline const char* st(DiagStatus s) { return report::diagStatusName(s); }

}  // namespace ds::diag::testing

#define EXPECT_STATUS(f, s) EXPECT_STREQ(::ds::diag::testing::st((f).status), #s) << (f).message << " | " << (f).remedy
