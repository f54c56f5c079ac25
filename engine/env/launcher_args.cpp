#include "engine/env/launcher_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "engine/common/error.h"

namespace ds::env {

namespace {

std::optional<LocalRankArg>& remembered() {
  static std::optional<LocalRankArg> arg;
  return arg;
}

bool isLocalRankName(const std::string& a) { return a == "--local_rank" || a == "--local-rank"; }

}  // namespace

std::optional<LocalRankArg> takeLocalRankArg(std::vector<std::string>& args, const EnvSource& env) {
  std::optional<LocalRankArg> found;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (!isLocalRankName(name)) {
      rest.push_back(a);
      continue;
    }
    std::string text;
    std::string given = a;
    if (eq != std::string::npos) {
      text = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      text = args[++i];
      given += " " + text;
    } else {
      throw ConfigError(
          fmt::format("{} needs a value (the launcher passes --local_rank=N); give it as {}=N or {} N", name,
                      name, name));
    }
    const int value =
        static_cast<int>(parseIntVar(name, text, 0, std::numeric_limits<int>::max(), "0 or more"));
    if (found && found->value != value) {
      throw ConfigError(fmt::format("{} and {} disagree; give the local rank once", found->given, given));
    }
    found = LocalRankArg{value, given};
  }
  args = std::move(rest);
  if (found) {
    if (auto lr = env.get("LOCAL_RANK"); lr && !lr->empty() && *lr != std::to_string(found->value)) {
      throw ConfigError(
          fmt::format("{} says this is local rank {} but LOCAL_RANK={}: the launcher and the environment "
                      "disagree, so this "
                      "process would use another rank's device. Start it with one launcher (torchrun, "
                      "torch.distributed.launch, deepspeed or dsrun), and don't set LOCAL_RANK by hand",
                      found->given, found->value, *lr));
    }
  }
  return found;
}

const std::optional<LocalRankArg>& launcherLocalRankArg() { return remembered(); }
void rememberLocalRankArg(std::optional<LocalRankArg> arg) { remembered() = std::move(arg); }

std::vector<std::string> cliArgsWithoutLocalRank(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  rememberLocalRankArg(takeLocalRankArg(args, ProcessEnv()));
  std::reverse(args.begin(), args.end());
  return args;
}

}  // namespace ds::env
