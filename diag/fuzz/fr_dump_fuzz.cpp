// Fuzz target: `dsdiag hang`'s reading of Flight Recorder dumps, i.e. any bytes a rank left behind:
// the data-only pickle reader (diag/hang/pickle.h), with and without streaming "entries", and the
// sniffing reader of pickles and JSON into RankDump (diag/hang/dump_reader.h parseDump).
//
// Oracle: no crash, hang, stack overflow, sanitizer report or unbounded allocation on any bytes;
// every refusal is a ds::Error (anything else escapes and aborts); every string read is valid UTF-8
// (dump() would throw otherwise); every warning names the file. The light path of streamed elements
// reads what the general machine reads and refuses what it refuses; it may refuse more only where an
// element is changed after later ones began (pickle.h).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "diag/hang/dump_reader.h"
#include "diag/hang/pickle.h"
#include "engine/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace ds::diag::hang;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto bad = [](const char* why) {
    std::fprintf(stderr, "fr_dump_fuzz: %s\n", why);
    std::abort();
  };

  struct Outcome {
    std::vector<std::string> elements;
    std::string top, error;
  };
  auto read = [&bytes](bool stream, bool light) {
    Outcome o;
    PickleOptions options;
    options.maxLiveBytes = 64 << 20;  // a fuzzer's memory; the bound itself is what is tested
    options.lightElements = light;
    if (stream) {
      options.streamKey = "entries";
      options.onElement = [&o](nlohmann::json&& e) { o.elements.push_back(e.dump()); };
    }
    try {
      o.top = readPickle(bytes, "fuzz", options).dump();
    } catch (const ds::Error& e) {
      o.error = e.what();
    }
    return o;
  };
  (void)read(false, false);
  const Outcome light = read(true, true), general = read(true, false);
  if (!light.error.empty() && general.error.empty()) {
    if (light.error.find("after later elements were written") == std::string::npos)
      bad("the light path refused what the general machine read");
  } else if (light.error != general.error) {
    bad("the light path and the general machine refused with different messages");
  } else if (light.error.empty() && (light.top != general.top || light.elements != general.elements)) {
    bad("the light path and the general machine read different values");
  }

  try {
    const RankDump d = parseDump(bytes, "rank_7", 7);
    if (d.rank != 7 || d.file != "rank_7") bad("the rank or file name changed");
    if (d.format != "pickle" && d.format != "json") bad("an unknown format");
    for (const auto& w : d.warnings) {
      if (w.rfind("rank_7", 0) != 0) bad("a warning that does not name the file");
    }
    (void)d.extra.dump();
  } catch (const ds::Error&) {
  }
  return 0;
}
