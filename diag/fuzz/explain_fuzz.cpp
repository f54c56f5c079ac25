// Fuzz target: `dsdiag explain`'s matcher: any text a user pastes (a line or a whole log) against
// the catalogue of error patterns, then the formatted answer.
//
// Oracle: no crash, hang or stack overflow on any text; every match is a catalogue entry; the
// output is non-empty and names every match's key.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "diag/explain.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace ds::diag;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto found = explain(text);
  const auto& all = explanations();
  for (const auto& f : found) {
    bool known = false;
    for (const auto& e : all) known = known || e.key == f.key;
    if (!known) std::abort();
  }
  std::string out = formatExplanations(text, found);
  if (out.empty()) std::abort();
  for (const auto& f : found) {
    if (out.find("[" + f.key + "]") == std::string::npos) std::abort();
  }
  return 0;
}
