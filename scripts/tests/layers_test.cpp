// Layers.*: the floors of docs/dev/layout.md, read from the sources' #include lines.
//
//   ground floor   engine/common/ (vocabulary, errors, logging), engine/host/ (host facts)
//   engine         the rest of engine/
//   reports        reports/: never engine/comm, engine/init.h or engine/ddp (records only)
//   diag, bench    side by side on top; neither includes the other
//
// An include may only go to its own floor or one below. A test folder is held to the floor of the
// code it sits beside, and may also use engine/testing (the test support). Each violation is
// reported as "file:line: includes X (floor A may not use floor B)", so the message says what to move.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "engine/testing/paths.h"

namespace {

namespace fs = std::filesystem;

struct Floor {
  const char* prefix;
  const char* name;
  int level;
};
// Longest prefix first: a file belongs to the first floor whose prefix it starts with.
constexpr Floor kFloors[] = {
    {"engine/common/", "ground floor", 0},
    {"engine/host/", "ground floor", 0},
    {"engine/", "engine", 1},
    {"reports/", "reports", 2},
    {"diag/", "diag", 3},
    {"bench/", "bench", 3},
};

const Floor* floorOf(const std::string& path) {
  for (const Floor& f : kFloors) {
    if (path.rfind(f.prefix, 0) == 0) return &f;
  }
  return nullptr;
}

bool isTestFile(const std::string& path) {
  return path.find("/tests/") != std::string::npos || path.find("/fuzz/") != std::string::npos;
}

// The verdict on one include of `from` (a path relative to the source root); "" when it is allowed.
std::string judge(const std::string& from, const std::string& target) {
  const Floor* a = floorOf(from);
  const Floor* b = floorOf(target);
  if (a == nullptr || b == nullptr) return "";
  if (isTestFile(from) && target.rfind("engine/testing/", 0) == 0) return "";
  const std::string why = std::string(" (") + a->name + " may not use " + b->name + ")";
  if (b->level > a->level) return "includes " + target + why;
  if (a->level == b->level && std::string(a->name) != b->name) return "includes " + target + why;
  if (std::string(a->name) == "reports") {
    for (const char* banned : {"engine/comm/", "engine/init.h", "engine/ddp/"}) {
      if (target.rfind(banned, 0) == 0) {
        return "includes " + target + " (reports reads records and never uses the engine's " +
               "communication, init or DDP; move the record it needs down a floor)";
      }
    }
  }
  return "";
}

std::vector<std::string> violationsIn(const fs::path& root) {
  static const std::regex kInclude(R"(^\s*#\s*include\s+"([^"]+)\")");
  std::vector<std::string> out;
  for (const char* top : {"engine", "reports", "diag", "bench"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, kInclude)) continue;
        const std::string verdict = judge(rel, m[1].str());
        if (!verdict.empty()) out.push_back(rel + ":" + std::to_string(n) + ": " + verdict);
      }
    }
  }
  return out;
}

// Folder-level loops: two folders, neither inside the other, that include each other (a loop such as
// reports/sweep <-> reports/baseline means one of them holds something of the other's). A parent and
// its own subfolder may name each other (a CLI and its subcommands, a factory and its backends).
std::vector<std::string> siblingLoopsIn(const fs::path& root) {
  static const std::regex kInclude(R"(^\s*#\s*include\s+"((engine|reports|diag|bench)/[^"]+)\")");
  std::map<std::string, std::map<std::string, std::string>> edges;  // folder -> folder -> first file:line
  for (const char* top : {"engine", "reports", "diag", "bench"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string rel = fs::relative(e.path(), root).generic_string();
      if (!e.is_regular_file() || isTestFile(rel)) continue;
      const std::string from = fs::path(rel).parent_path().generic_string();
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, kInclude)) continue;
        const std::string to = fs::path(m[1].str()).parent_path().generic_string();
        if (to != from) edges[from].emplace(to, rel + ":" + std::to_string(n));
      }
    }
  }
  auto inside = [](const std::string& a, const std::string& b) { return a.rfind(b + "/", 0) == 0; };
  std::vector<std::string> out;
  for (const auto& [a, tos] : edges) {
    for (const auto& [b, where] : tos) {
      if (a >= b || inside(a, b) || inside(b, a)) continue;
      auto back = edges.find(b);
      if (back == edges.end() || !back->second.count(a)) continue;
      out.push_back(a + " <-> " + b + ": " + where + " and " + back->second.at(a));
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

TEST(Layers, NoIncludeClimbsAFloorOrCrossesIntoTheEnginesComm) {
  const std::vector<std::string> bad = violationsIn(DS_SOURCE_DIR);
  EXPECT_TRUE(bad.empty()) << bad.size() << " include(s) break the floors of docs/dev/layout.md:\n"
                           << joined(bad);
}

TEST(Layers, NoTwoFoldersIncludeEachOther) {
  const std::vector<std::string> loops = siblingLoopsIn(DS_SOURCE_DIR);
  EXPECT_TRUE(loops.empty()) << loops.size() << " folder loop(s); move what both need into one of them or "
                             << "a floor below:\n"
                             << joined(loops);
}

// The check itself: each include that broke the floors before the ground floor was laid (issue 40)
// is caught, and what the floors allow passes.
TEST(Layers, TheCheckCatchesEachKindOfBrokenInclude) {
  const std::pair<const char*, const char*> broken[] = {
      {"bench/fleet/fleet_scale.cpp", "diag/check.h"},
      {"bench/coll/host_hardware.cpp", "diag/hardware/hardware_reader.h"},
      {"reports/import/nccl_tests_import.cpp", "engine/comm/types.h"},
      {"reports/import/nccl_tests_import.cpp", "engine/comm/backends/nccl/nccl_version.h"},
      {"reports/world_text.h", "engine/init.h"},
      {"engine/host/hardware_reader.h", "reports/baseline/hardware.h"},
      {"engine/common/net.cpp", "engine/comm/process_group.h"},
      {"engine/comm/process_group.cpp", "reports/json_io.h"},
      {"diag/world/world_mode.cpp", "bench/coll/coll.h"},
      {"reports/train/train_schema.cpp", "engine/ddp/ddp.h"},
  };
  for (const auto& [from, to] : broken) EXPECT_NE(judge(from, to), "") << from << " -> " << to;
  const std::pair<const char*, const char*> allowed[] = {
      {"bench/coll/coll.cpp", "reports/sweep/sweep_schema.h"},
      {"bench/coll/coll.cpp", "engine/comm/process_group.h"},
      {"diag/world/world_mode.cpp", "reports/diag/diag_schema.h"},
      {"reports/json_io.cpp", "engine/common/error.h"},
      {"reports/schema/deepspeed_view.h", "engine/env/deepspeed_view.h"},
      {"engine/comm/process_group.cpp", "engine/host/affinity.h"},
      {"reports/tests/json_io_test.cpp", "engine/testing/temp_dir.h"},
  };
  for (const auto& [from, to] : allowed) EXPECT_EQ(judge(from, to), "") << from << " -> " << to;
}

}  // namespace
