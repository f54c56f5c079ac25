// dsbench: collective sweeps and DDP step timing. Thin: each subcommand binds flags into its options
// struct and calls one library function.
#include <CLI/CLI.hpp>

#include "bench/exit_codes.h"
#include "bench/world/world.h"

int main(int argc, char** argv) {
  CLI::App app{"dsbench: distributed collective and training-step benchmarks. Start it with dsrun, mpirun or srun."};
  app.set_version_flag("--version", "dsbench 0.1.0");
  app.require_subcommand(1);

  ds::bench::WorldOptions world;
  auto* w = app.add_subcommand("world", "init_distributed, a store barrier, and a table of who every rank is");
  w->add_option("--backend", world.backend, "nccl, gloo, mpi or shm (default: the accelerator's)")
      ->envname("DSBENCH_BACKEND");
  w->add_option("--init-method", world.initMethod, "env:// (default), tcp://HOST:PORT or file:///PATH")
      ->envname("DSBENCH_INIT_METHOD");
  w->add_option("--timeout", world.timeoutSeconds, "seconds; default DEEPSPEED_TIMEOUT minutes or 10 min")
      ->check(CLI::NonNegativeNumber)
      ->envname("DSBENCH_TIMEOUT");
  w->add_option("--json", world.jsonPath, "write the world report as JSON to this file (rank 0)")
      ->envname("DSBENCH_JSON");
  w->add_flag("!--quiet", world.verbose, "do not log what init_distributed discovered");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : ds::bench::kExitConfig;
  }
  if (*w) return ds::bench::runMain("dsbench", [&] { return ds::bench::runWorld(world); });
  return ds::bench::kExitInternal;
}
