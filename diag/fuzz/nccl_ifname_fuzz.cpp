// Fuzz target: the NCCL_SOCKET_IFNAME / NCCL_IB_HCA syntax ([^][=]name[:port][,name[:port]...]) as
// dsdiag parses it (diag/util.h parseIfnameSpec), and the matching of entries against interface
// names.
//
// Oracle: either an error text and no further use, or entries with non-empty names free of '^'/'='
// and ports in 0-65535; an exact entry matches its own name and nothing longer; a prefix entry
// matches its name with anything appended.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "diag/util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace ds::diag;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = parseIfnameSpec(text);
  auto bad = [&](const char* why) {
    std::fprintf(stderr, "parseIfnameSpec('%s'): %s\n", quoteValue(text).c_str(), why);
    std::abort();
  };
  if (!spec.error.empty()) return 0;
  if (spec.entries.empty()) bad("no error and no entries");
  for (const auto& e : spec.entries) {
    if (e.name.empty()) bad("an entry with an empty name");
    if (e.name.find_first_of("^=") != std::string::npos) bad("an entry name holds '^' or '='");
    if (e.port && (*e.port < 0 || *e.port > 65535)) bad("a port out of range");
    if (!ifnameEntryMatches(spec, e, e.name)) bad("an entry does not match its own name");
    const bool longer = ifnameEntryMatches(spec, e, e.name + "0");
    if (spec.exact == longer) bad("exact/prefix matching is the wrong way round");
  }
  return 0;
}
