// The test data of the dump reader's tests, shared by pickle_test.cpp and dump_reader_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/testing/paths.h"  // DS_HANG_FR_DUMP_DATA names a path through it
#include "engine/testing/subprocess.h"

#ifndef DS_HANG_FR_DUMP_DATA
#define DS_HANG_FR_DUMP_DATA "diag/hang/tests/data/fr_dump"
#endif

namespace ds::diag::hang::testing {

// Every pickle among the test data (Python's fixtures at every version, torch 2.15's own dumps), as
// (path, bytes) in path order; the `nested*` stress files only when asked for.
inline std::vector<std::pair<std::string, std::string>> picklesInTestData(bool withNested) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(DS_HANG_FR_DUMP_DATA)) {
    if (!e.is_regular_file()) continue;
    if (!withNested && e.path().filename().string().rfind("nested", 0) == 0) continue;
    std::string bytes = ds::testing::readFile(e.path().string());
    if (bytes.size() > 2 && static_cast<std::uint8_t>(bytes[0]) == 0x80) out.emplace_back(e.path().string(), bytes);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ds::diag::hang::testing
