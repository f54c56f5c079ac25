// Fuzz target: `dsdiag hang`'s reading of Flight Recorder dumps, i.e. any bytes a rank left behind:
// the data-only pickle reader (diag/hang/pickle.h), with and without streaming "entries", and the
// sniffing reader of pickles and JSON into RankDump (diag/hang/dump_reader.h parseDump).
//
// Oracle: no crash, hang, stack overflow, sanitizer report or unbounded allocation on any bytes;
// every refusal is a ds::Error (anything else escapes and aborts); every string read is valid UTF-8
// (dump() would throw otherwise); every warning names the file. The light path of streamed elements
// reads what the general machine reads and refuses what it refuses; only where an element is changed
// after later ones began (pickle.h) may it refuse more, or refuse for that reason instead. The same
// holds for the fast reading of a dump's entries against the general rules (EntryPath).
#include <fmt/format.h>
#include <fmt/ranges.h>

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
  auto bad = [](const std::string& why) {
    std::fprintf(stderr, "fr_dump_fuzz: %s\n", why.c_str());
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
  // An element changed after later ones began: the light path says so, where the general machine
  // may read the file or refuse it for another reason.
  const bool changedLate = light.error.find("after later elements were written") != std::string::npos;
  if (!light.error.empty() && general.error.empty()) {
    if (!changedLate) bad("the light path refused what the general machine read: " + light.error);
  } else if (light.error != general.error && !changedLate) {
    bad("the light path and the general machine refused with different messages: '" + light.error + "' and '" +
        general.error + "'");
  } else if (light.error.empty() && (light.top != general.top || light.elements != general.elements)) {
    bad("the light path and the general machine read different values");
  }

  // The dump, read the fast way (checked) and by the general rules: alike, as above.
  auto text = [](const RankDump& d) {
    std::string t = d.version + "|" + d.commLibVersion + "|" + d.extra.dump() + "|";
    for (const auto& w : d.warnings) t += w + "|";
    for (const FrEntry& e : d.entries) {
      t += fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}|", e.recordId.value_or(-7), e.pgId, e.pgName,
                       e.pgDesc, e.collectiveSeqId.value_or(-7), e.profilingName, e.backend, e.op,
                       e.p2pPeer.value_or(-7), e.state, e.timeCreatedNs.value_or(-7), e.durationMs.value_or(-7),
                       e.isP2p.value_or(false), e.retired.has_value(), e.topFrame);
      for (const auto& s : e.inputSizes) t += fmt::format("{},", fmt::join(s, ":"));
      t += fmt::format("{}|", fmt::join(e.outputDtypes, ","));
    }
    return t;
  };
  std::string fast, slow, fastError, slowError;
  try {
    const RankDump d = parseDump(bytes, "rank_7", 7);
    if (d.rank != 7 || d.file != "rank_7") bad("the rank or file name changed");
    if (d.format != "pickle" && d.format != "json") bad("an unknown format");
    for (const auto& w : d.warnings) {
      if (w.rfind("rank_7", 0) != 0) bad("a warning that does not name the file");
    }
    (void)d.extra.dump();
    fast = text(d);
  } catch (const ds::Error& e) {
    fastError = e.what();
  }
  try {
    slow = text(parseDump(bytes, "rank_7", 7, EntryPath::kGeneral));
  } catch (const ds::Error& e) {
    slowError = e.what();
  }
  if (fastError.find("after later elements were written") == std::string::npos &&
      (fastError != slowError || fast != slow)) {
    bad("the fast reading of the entries and the general rules read different dumps: '" + fastError + "' and '" +
        slowError + "'");
  }
  return 0;
}
