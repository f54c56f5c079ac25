// Every dsbench subcommand spells the same thing the same way: a long flag that two subcommands share
// has the same short form and the same environment twin in both, and the flags every run needs (JSON
// output, timeout, backend, init method) exist in each. New flags are held to this automatically.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "bench/coll/coll_command.h"
#include "bench/command.h"
#include "bench/gpu/gpu_command.h"
#include "bench/train/train_command.h"

namespace ds::bench {
namespace {

struct Spelling {
  std::set<std::string> shortNames, longNames;
  std::string env;
  bool operator==(const Spelling& o) const {
    return shortNames == o.shortNames && longNames == o.longNames && env == o.env;
  }
};

std::string describe(const Spelling& s) {
  std::string out;
  for (const auto& n : s.shortNames) out += "-" + n + " ";
  for (const auto& n : s.longNames) out += "--" + n + " ";
  return out + "env " + (s.env.empty() ? "(none)" : s.env);
}

// subcommand -> long name -> spelling
std::map<std::string, std::map<std::string, Spelling>> allFlags(CLI::App& app) {
  std::vector<Command> commands{addWorldCommand(app), addCollCommand(app), addTrainCommand(app), addGpuCommand(app)};
  std::map<std::string, std::map<std::string, Spelling>> out;
  for (const auto& c : commands) {
    for (const CLI::Option* o : c.app->get_options()) {
      if (o->get_lnames().empty()) continue;  // positional, or --help's short-only forms
      Spelling s;
      for (const auto& n : o->get_snames()) s.shortNames.insert(n);
      for (const auto& n : o->get_lnames()) s.longNames.insert(n);
      s.env = o->get_envname();
      for (const auto& n : s.longNames) out[c.app->get_name()][n] = s;
    }
  }
  return out;
}

TEST(DsbenchFlags, ASharedFlagIsSpelledTheSameInEverySubcommand) {
  CLI::App app;
  auto flags = allFlags(app);
  ASSERT_EQ(flags.size(), 4u);
  int shared = 0;
  for (const auto& [a, fa] : flags) {
    for (const auto& [b, fb] : flags) {
      if (a >= b) continue;
      for (const auto& [name, sa] : fa) {
        auto it = fb.find(name);
        if (it == fb.end() || name == "help") continue;
        ++shared;
        EXPECT_EQ(sa, it->second) << "--" << name << " is '" << describe(sa) << "' in dsbench " << a << " but '"
                                  << describe(it->second) << "' in dsbench " << b;
      }
    }
  }
  EXPECT_GT(shared, 8);  // the comparison compared something
  // One environment twin means one flag: the same DSBENCH_ variable never names two different flags.
  std::map<std::string, std::pair<std::string, Spelling>> byEnv;
  for (const auto& [sub, fs] : flags) {
    for (const auto& [name, s] : fs) {
      if (s.env.empty()) continue;
      auto [it, inserted] = byEnv.emplace(s.env, std::pair{sub, s});
      if (!inserted) {
        EXPECT_EQ(it->second.second, s) << s.env << " in " << sub << " and " << it->second.first;
      }
    }
  }
}

TEST(DsbenchFlags, EverySubcommandTakesTheCommonFlags) {
  CLI::App app;
  auto flags = allFlags(app);
  const std::map<std::string, Spelling> common{
      {"json", {{"J"}, {"json"}, "DSBENCH_JSON"}},
      {"timeout", {{"T"}, {"timeout"}, "DSBENCH_TIMEOUT"}},
      {"backend", {{}, {"backend"}, "DSBENCH_BACKEND"}},
      {"init-method", {{}, {"init-method"}, "DSBENCH_INIT_METHOD"}},
  };
  for (const auto& [sub, fs] : flags) {
    for (const auto& [name, want] : common) {
      // dsbench gpu is one process on one host: no process group, so no backend, init method or timeout.
      if (sub == "gpu" && name != "json") continue;
      auto it = fs.find(name);
      ASSERT_NE(it, fs.end()) << "dsbench " << sub << " has no --" << name;
      EXPECT_EQ(it->second, want) << "dsbench " << sub << " --" << name << ": " << describe(it->second);
    }
  }
  for (const char* sub : {"coll", "train", "gpu"}) EXPECT_TRUE(flags[sub].count("label")) << sub;
}

}  // namespace
}  // namespace ds::bench
