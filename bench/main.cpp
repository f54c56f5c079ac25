// dsbench: collective sweeps and DDP step timing. Thin: each subcommand module binds its flags into
// its options struct and calls one library function.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "bench/coll/coll_command.h"
#include "bench/command.h"
#include "bench/exit_codes.h"
#include "bench/gpu/gpu_command.h"
#include "bench/train/train_command.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/version.h"
#include "engine/env/launcher_args.h"

int main(int argc, char** argv) {
  CLI::App app{
      "dsbench: distributed collective and training-step benchmarks, and GPU copy bandwidth. Start it with dsrun, mpirun or srun (gpu: alone)."};
  app.set_version_flag("--version", ds::versionLine("dsbench"));
  app.require_subcommand(1);
  std::vector<ds::bench::Command> commands{ds::bench::addWorldCommand(app), ds::bench::addCollCommand(app),
                                           ds::bench::addTrainCommand(app), ds::bench::addGpuCommand(app)};
  std::vector<std::string> args;
  try {
    args = ds::env::cliArgsWithoutLocalRank(argc, argv);  // --local_rank=N from the launchers, anywhere
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "dsbench: error: %s\n", e.what());
    return ds::bench::kExitConfig;
  }
  try {
    ds::cli::parse(app, std::move(args));
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : ds::bench::kExitConfig;
  }
  for (auto& c : commands) {
    if (c.app->parsed()) return ds::bench::runMain("dsbench", c.run);
  }
  return ds::bench::kExitInternal;
}
