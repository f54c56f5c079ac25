#include <memory>

#include "bench/command.h"
#include "bench/world/world.h"
#include "engine/common/cli.h"
#include "engine/init.h"

namespace ds::bench {

Command addWorldCommand(CLI::App& parent) {
  auto o = std::make_shared<WorldOptions>();
  auto* w = parent.add_subcommand("world",
                                  "init_distributed, a store barrier, a smoke allreduce, and a table of "
                                  "who every rank is");
  w->add_option("--backend", o->backend, "nccl, gloo, mpi or shm (default: the accelerator's)")
      ->check(cli::oneOf({"nccl", "gloo", "mpi", "shm"}))
      ->envname("DSBENCH_BACKEND");
  w->add_option("--init-method", o->initMethod, "env:// (default), tcp://HOST:PORT or file:///PATH")
      ->check(cli::checkedBy([](const std::string& t) { parseInitMethod(t); }))
      ->envname("DSBENCH_INIT_METHOD");
  w->add_option("--timeout", o->timeoutSeconds, "seconds; default DEEPSPEED_TIMEOUT minutes or 10 min")
      ->transform(cli::integer(0, 1000000))
      ->envname("DSBENCH_TIMEOUT");
  w->add_option("--json", o->jsonPath, "write the world report as JSON to this file (rank 0)")
      ->check(cli::outputFile())
      ->envname("DSBENCH_JSON");
  w->add_flag("!--quiet", o->verbose, "do not log what init_distributed discovered");
  return Command{w, [o] { return runWorld(*o); }};
}

}  // namespace ds::bench
