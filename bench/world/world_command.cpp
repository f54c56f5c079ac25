#include <memory>

#include "bench/command.h"
#include "bench/common_flags.h"
#include "bench/world/world.h"

namespace ds::bench {

Command addWorldCommand(CLI::App& parent) {
  auto o = std::make_shared<WorldOptions>();
  auto* w = parent.add_subcommand("world",
                                  "init_distributed, a store barrier, a smoke allreduce, and a table of "
                                  "who every rank is");
  flags::backend(w, o->backend, "nccl, gloo, mpi or shm (default: the accelerator's)");
  flags::initMethod(w, o->initMethod);
  flags::timeout(w, o->timeoutSeconds, "seconds; default DEEPSPEED_TIMEOUT minutes or 10 min");
  flags::json(w, o->jsonPath, "write the world report as JSON to this file (rank 0)");
  flags::quiet(w, o->verbose);
  w->add_flag("--dry-run", o->dryRun,
              "print what discovery concludes from this environment (every value with its source) and exit, "
              "contacting nothing")
      ->envname("DSBENCH_DRY_RUN");
  w->add_option(
       "--discovery", o->discovery,
       "whose rules discovery follows: dsperf (field by field, checked against the launcher) or deepspeed "
       "(exactly deepspeed.init_distributed()'s); default DS_DISCOVERY, else dsperf. With --dry-run --json, "
       "the JSON holds both views and their differences")
      ->envname("DSBENCH_DISCOVERY")
      ->check(CLI::IsMember({"dsperf", "deepspeed"}));
  return Command{w, [o] { return runWorld(*o); }};
}

}  // namespace ds::bench
