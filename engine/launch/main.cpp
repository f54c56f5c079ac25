// dsrun: start N copies of a program on this node with torchrun's environment (see launcher.h for
// the behaviour and the exit codes).
#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <cstdio>

#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/version.h"
#include "engine/launch/launcher.h"

int main(int argc, char** argv) {
  ds::launch::LaunchOptions opts;
  bool noPython = false;

  CLI::App app{
      "dsrun [options] program [args...]\n"
      "Starts --nproc-per-node copies of the program on this node with torchrun's worker environment "
      "(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), stops them all when one fails, and prints "
      "which rank failed first. Everything from the program name on goes to the program, so dsrun "
      "flags must come before it ('--' may separate them).",
      "dsrun"};
  app.prefix_command();
  app.set_version_flag("--version", ds::versionLine("dsrun"));
  app.option_defaults()->always_capture_default();

  app.add_option("--nproc-per-node,--nproc_per_node", opts.nprocPerNode, "Worker processes on this node")
      ->transform(ds::cli::integer(1, ds::launch::kMaxWorkersPerNode))
      ->envname("DSRUN_NPROC_PER_NODE");
  app.add_option("--nnodes", opts.nnodes, "Number of nodes of the job")
      ->transform(ds::cli::integer(1, 1000000))
      ->envname("DSRUN_NNODES");
  app.add_option("--node-rank,--node_rank", opts.nodeRank, "Rank of this node, 0..nnodes-1")
      ->transform(ds::cli::integer(0, 999999))
      ->envname("DSRUN_NODE_RANK");
  app.add_option("--master-addr,--master_addr", opts.masterAddr, "Address of node 0 (MASTER_ADDR)")
      ->envname("DSRUN_MASTER_ADDR");
  app.add_option("--master-port,--master_port", opts.masterPort, "Port of the rendezvous store (MASTER_PORT)")
      ->transform(ds::cli::integer(1, 65535))
      ->envname("DSRUN_MASTER_PORT");
  app.add_flag("--standalone", opts.standalone, "Single node: MASTER_ADDR=127.0.0.1 and a free MASTER_PORT")
      ->envname("DSRUN_STANDALONE");
  app.add_option("--rdzv-id,--rdzv_id,--run-id,--run_id", opts.runId,
                 "Job id: TORCHELASTIC_RUN_ID and DS_JOB_ID (default: random on one node; with --nnodes > 1 "
                 "SLURM_JOB_ID, else <master-addr>_<master-port>, the same on every node)")
      ->envname("DSRUN_RDZV_ID");
  app.add_option("--log-dir,--log_dir", opts.logDir,
                 "Write each worker's output to <dir>/<run_id>/attempt_0/<local_rank>/{stdout,stderr}.log")
      ->check(ds::cli::checkedBy([](const std::string& dir) {
        // dsrun creates the folders; a file, device or FIFO in the way is refused before anything starts.
        struct stat st {};
        if (!dir.empty() && ::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
          throw ds::ConfigError(ds::cli::shown(dir) + " exists and is not a directory; give a folder for the logs.");
      }))
      ->envname("DSRUN_LOG_DIR");
  app.add_flag("--tee", opts.tee, "Also print every worker line to the console, prefixed [rank<N>]:")
      ->envname("DSRUN_TEE");
  app.add_option("--grace-period,--grace_period", opts.gracePeriodS,
                 "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->transform(ds::cli::number(0, 3600))
      ->envname("DSRUN_GRACE_PERIOD");
  app.add_option("--max-restarts,--max_restarts", opts.maxRestarts,
                 "Accepted for torchrun; only 0 is supported")
      ->transform(ds::cli::integer(0, 1000))
      ->envname("DSRUN_MAX_RESTARTS");
  app.add_flag("--no-python,--no_python", noPython,
               "Accepted for torchrun; dsrun always runs the program directly")
      ->envname("DSRUN_NO_PYTHON");
  app.footer(
      "Exit codes: 0 all workers succeeded; N the first failed worker's exit code; 128+S it was killed by "
      "signal S; 2 usage or configuration error (nothing started); 3 dsrun itself failed; 130/143 dsrun got "
      "SIGINT/SIGTERM and stopped the workers.\n");

  try {
    ds::cli::parse(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : ds::launch::kExitUsage;
  }
  opts.command = app.remaining();
  // CLI11 keeps the '--' that may separate dsrun's flags from the program.
  if (!opts.command.empty() && opts.command.front() == "--") opts.command.erase(opts.command.begin());

  try {
    return ds::launch::launch(opts);
  } catch (const ds::ConfigError& e) {
    std::fprintf(stderr, "dsrun: error: %s\n", e.what());
    return ds::launch::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsrun: error: %s\n", e.what());
    return ds::launch::kExitLauncherFailed;
  }
}
