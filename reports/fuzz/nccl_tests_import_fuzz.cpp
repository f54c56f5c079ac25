// Fuzz target: the nccl-tests importer (reports/import): console text of any version and -J JSON.
//
// Every input goes through looksLikeNcclTests and the text importer; inputs that parse as JSON also
// through the JSON importer. Oracle: a sweep or a ds::Error (ConfigError naming the file and line);
// any other exception escaping would give the user a bare library message, so it is a bug, as are
// crashes, UB and leaks. An imported sweep must serialise and name its collective.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "reports/import/nccl_tests_import.h"
#include "reports/json_io.h"

namespace {

// An imported sweep must serialise (dsreport writes it), and every row must have a collective.
void check(const ds::report::SweepRun& run, const char* how) {
  for (const auto& r : run.results) {
    if (r.collective.empty()) {
      std::fprintf(stderr, "%s import produced a row without a collective\n", how);
      std::abort();
    }
  }
  // As dsreport writes it: bytes that are not UTF-8 are replaced, not an exception.
  (void)ds::report::dumpJson(ds::report::sweepToJson(run), 2);
}

template <typename F>
void guarded(const char* what, F&& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    if (std::string(e.what()).find("fuzz-input") == std::string::npos) {
      std::fprintf(stderr, "%s: an error that does not name the file: %s\n", what, e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s let a non-dsperf exception escape: %s\n", what, e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace ds::report;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)looksLikeNcclTests(text);
  guarded("importNcclTestsText", [&] { check(importNcclTestsText(text, "fuzz-input.txt"), "text"); });
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_discarded()) {
    guarded("importNcclTestsJson", [&] { check(importNcclTestsJson(doc, "fuzz-input.json"), "json"); });
  }
  return 0;
}
