// The launcher argument contract (REFERENCE.md §2, §9): torch.distributed.launch without --use_env
// and DeepSpeed's launcher append --local_rank=N to the program's arguments; torch >= 2 writes
// --local-rank=N. dsbench and dsdiag accept all four forms (=N or N as the next argument, either
// spelling), before or after a subcommand, check the value against LOCAL_RANK, and record it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/env/env_source.h"

namespace ds::env {

struct LocalRankArg {
  int value = 0;
  std::string given;  // as on the command line, e.g. "--local_rank=1" or "--local-rank 1"
};

// Removes every --local_rank / --local-rank argument (and its separate value) from args (argv
// without the program name) and returns the value. Throws ConfigError when a value is missing or
// not a non-negative integer, when two of them disagree, or when LOCAL_RANK is set to another value.
std::optional<LocalRankArg> takeLocalRankArg(std::vector<std::string>& args, const EnvSource& env);

// The value main() took for this process (set once at startup by rememberLocalRankArg, read by the
// report code); nullopt when the launcher passed none.
const std::optional<LocalRankArg>& launcherLocalRankArg();
void rememberLocalRankArg(std::optional<LocalRankArg> arg);

// For a CLI's main(): argv without the program name and without the local-rank argument (taken,
// checked against the process's LOCAL_RANK and remembered), in the reverse order that CLI11's
// App::parse(std::vector<std::string>&) expects. Throws ConfigError as takeLocalRankArg.
std::vector<std::string> cliArgsWithoutLocalRank(int argc, char** argv);

}  // namespace ds::env
