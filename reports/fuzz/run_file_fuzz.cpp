// Fuzz target: the JSON result reader every dsreport subcommand goes through (loadRunFile):
// dsperf sweep/train/diag/world documents, dsbench journals (.jsonl), and nccl-tests output that it
// imports on the fly.
//
// Input: the first byte picks the file name's extension (odd: ".jsonl", even: ".json"); the rest is
// the file's content, written to a private temporary folder. Oracle: a RunFile of a known kind or a
// ds::Error (ConfigError for bad content) whose message names the file; any other exception
// (nlohmann::json's type_error, std::out_of_range, ...) would reach the user as a bare library message
// without the file, so it is a bug, as are crashes, UB and leaks.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/common/error.h"
#include "reports/run/run_file.h"

namespace {

std::string tempDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/run_file_fuzz.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    static std::string made(tmpl);
    std::atexit([] { ::rmdir(made.c_str()); });  // the file is unlinked after each input
    return made;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string path = tempDir() + ((data[0] & 1) ? "/run.jsonl" : "/run.json");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  try {
    ds::report::RunFile f = ds::report::loadRunFile(path);
    const std::string kind = ds::report::runKindName(f.kind);
    const int set = f.sweep.has_value() + f.train.has_value() + f.diag.has_value() + f.world.has_value();
    if (set != 1) {
      std::fprintf(stderr, "loadRunFile returned a %s run with %d record sets (expected exactly one)\n",
                   kind.c_str(), set);
      std::abort();
    }
    if (f.runId.size() != 16) {
      std::fprintf(stderr, "loadRunFile returned runId '%s' (expected 16 hex characters)\n", f.runId.c_str());
      std::abort();
    }
  } catch (const ds::Error& e) {
    if (std::string(e.what()).find("run.json") == std::string::npos) {
      std::fprintf(stderr, "an error that does not name the file: %s\n", e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loadRunFile let a non-dsperf exception escape (the user would see no file name): %s\n",
                 e.what());
    std::abort();
  }
  ::unlink(path.c_str());
  return 0;
}
