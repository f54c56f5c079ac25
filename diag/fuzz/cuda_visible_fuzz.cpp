// Fuzz target: the CUDA_VISIBLE_DEVICES parser behind dsdiag's gpu.visible_devices check.
//
// The parser (parseVisible, diag/checks/visible_devices.h) is the check's own, linked from dsdiaglib.
//
// Oracle: every comma-separated entry ends up in exactly one of `entries` and `ignored`; duplicates
// are entries; `kind` is one of the documented values; the value can be quoted for messages.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "diag/checks/visible_devices.h"
#include "diag/util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace ds::diag;
  std::string v(reinterpret_cast<const char*>(data), size);
  auto s = parseVisible(v);
  auto bad = [&](const char* why) {
    std::fprintf(stderr, "parseVisible('%s'): %s\n", quoteValue(v).c_str(), why);
    std::abort();
  };
  if (!s.set) bad("a set value was reported unset");
  static const std::set<std::string> kinds{"indices", "uuids", "mig", "mixed", "none"};
  if (!kinds.count(s.kind)) bad("unknown kind");
  if (!trim(v).empty() && s.entries.size() + s.ignored.size() != split(v, ',').size())
    bad("entries + ignored do not add up to the comma-separated items");
  for (const auto& d : s.duplicates) {
    if (std::find(s.entries.begin(), s.entries.end(), d) == s.entries.end()) bad("a duplicate is not an entry");
  }
  if (s.entries.empty() && s.kind != "none") bad("no entries but a kind");
  if (quoteValue(v).size() > 200) bad("quoteValue did not shorten");
  auto unset = parseVisible(std::nullopt);
  if (unset.set) bad("unset reported as set");
  return 0;
}
