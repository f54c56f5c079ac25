// dsdiag: pre-flight checks. Thin CLI: flags bind into DiagCommand; runDiag does the work.
// Exit codes: 0 all pass, 1 warnings only (0 with --fail-on fail), 2 a failure, 3 dsdiag itself could not
// run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "diag/diag.h"
#include "diag/fleet/fleet_defaults.h"
#include "diag/hang/hang_command.h"
#include "engine/common/backends.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/version.h"
#include "engine/env/launcher_args.h"

namespace {

std::vector<std::string> splitCsv(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t p = s.find(',', start);
    std::string part = s.substr(start, p == std::string::npos ? std::string::npos : p - start);
    if (!part.empty()) out.push_back(part);
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// --only/--skip are checked against the registry as typed, so that an unknown id names its flag or
// variable.
CLI::Validator knownChecks() {
  return ds::cli::checkedBy([](const std::string& text) {
    ds::diag::Selection s;
    s.only = splitCsv(text);
    ds::diag::validateSelection(s);
  });
}

// Every flag has an environment twin DSDIAG_<NAME>.
template <typename T>
CLI::Option* flag(CLI::App& app, const std::string& name, T& target, const std::string& help, const char* env) {
  return app.add_option(name, target, help)->envname(env);
}

}  // namespace

int main(int argc, char** argv) {
  ds::diag::DiagCommand cmd;
  double timeoutS = 30, connectS = 3, largeMiB = 4;
  double pairS = std::chrono::duration<double>(ds::diag::fleet::kDefaultPairTimeout).count();
  std::string only, skip, explainText, failOn = "warn";
  // DeepSpeed's runner inputs, with DeepSpeed's spellings; given at all, the runner.* checks run.
  ds::env::RunnerFlags runner;
  std::string hostfile;
  int sshPort = 0;
  CLI::App app{"dsdiag: pre-flight checks that say, before an expensive job starts, why it would hang or crawl.\n"
               "Exit codes: 0 all pass, 1 warnings only, 2 a failure, 3 dsdiag could not run."};
  app.set_version_flag("--version", ds::versionLine("dsdiag"));
  app.allow_extras();  // launcher flags placed after the program name are a finding, not a usage error
  app.add_flag("--world", cmd.options.world, "Run across the job (under dsrun/torchrun/mpirun/srun): gather on rank 0, "
                                             "cross-rank checks, smoke allreduce, link matrix")
      ->envname("DSDIAG_WORLD");
  flag(app, "--json", cmd.jsonPath, "Write the report as JSON (schema dsperf.diag v1)", "DSDIAG_JSON")
      ->check(ds::cli::outputFile());
  flag(app, "--junit", cmd.junitPath,
       "Write the findings as JUnit XML for a CI's test view (one test case per check; also when checks fail; "
       "warnings are failures unless --fail-on fail)",
       "DSDIAG_JUNIT")
      ->check(ds::cli::outputFile());
  flag(app, "--only", only, "Run only these checks: ids, families or prefixes (net.*), comma-separated",
       "DSDIAG_ONLY")
      ->check(knownChecks());
  flag(app, "--skip", skip, "Skip these checks (same forms as --only)", "DSDIAG_SKIP")->check(knownChecks());
  app.add_flag("--list", cmd.list, "List every check id and exit");
  flag(app, "--timeout", timeoutS, "Seconds for rendezvous, the gather and each collective (world mode)",
       "DSDIAG_TIMEOUT")
      ->transform(ds::cli::number(0, 86400, true));
  flag(app, "--connect-timeout", connectS, "Seconds for the TCP connect test and DNS lookups",
       "DSDIAG_CONNECT_TIMEOUT")
      ->transform(ds::cli::number(0, 3600, true));
  flag(app, "--backend", cmd.options.backend,
       "The job's backend: nccl, gloo, mpi or shm (default: the accelerator's)", "DSDIAG_BACKEND")
      ->check(ds::cli::oneOf(ds::backendNames()));
  flag(app, "--link-large-mib", largeMiB, "Large message of the link matrix, MiB", "DSDIAG_LINK_LARGE_MIB")
      ->transform(ds::cli::number(0, 4096, true));
  flag(app, "--slow-link-ms", cmd.options.slowLinkMs, "One-way latency above which a link is slow",
       "DSDIAG_SLOW_LINK_MS")
      ->transform(ds::cli::number(0, 1e6, true));
  flag(app, "--pair-timeout", pairS,
       "Seconds each link pair of world mode may take once both ends are there (a pair that hangs costs only itself)",
       "DSDIAG_PAIR_TIMEOUT")
      ->transform(ds::cli::number(0, 3600, true));
  app.add_flag("--all-pairs", cmd.options.allPairs,
               "World mode: test every pair of hosts (n-1 rounds) instead of ring neighbours plus log2(n) random "
               "matchings")
      ->envname("DSDIAG_ALL_PAIRS");
  flag(app, "--link-rounds", cmd.options.linkRounds,
       "World mode: random matchings after the ring rounds (default: ceil(log2 hosts))", "DSDIAG_LINK_ROUNDS")
      ->check(CLI::Range(0, 64));
  flag(app, "--min-link-gbps", cmd.options.minLinkGBps,
       "World mode: a pair below this bandwidth (GB/s) is bad even when the whole fleet is as slow (default 0: judged "
       "against the fleet's median only)",
       "DSDIAG_MIN_LINK_GBPS")
      ->transform(ds::cli::number(0, 1e6));
  flag(app, "--exclude-file", cmd.excludeFile,
       "World mode: write the suspect and no-result hosts as a Slurm hostlist (srun/sbatch --exclude take it); "
       "an empty file when every host is healthy",
       "DSDIAG_EXCLUDE_FILE")
      ->check(ds::cli::outputFile());
  flag(app, "--hostfile,-H", hostfile,
       "DeepSpeed's hostfile (`host slots=N` lines) to check as `deepspeed` reads it (runner.* checks; "
       "without it they use DeepSpeed's default, /job/hostfile)",
       "DSDIAG_HOSTFILE")
      ->check(ds::cli::inputFile());
  flag(app, "--include,-i", runner.include, "As deepspeed's --include: NAME[:SLOT[,SLOT...]][@NAME...]",
       "DSDIAG_INCLUDE");
  flag(app, "--exclude,-e", runner.exclude, "As deepspeed's --exclude (the same form; not with --include)",
       "DSDIAG_EXCLUDE");
  flag(app, "--num_nodes", runner.numNodes, "As deepspeed's --num_nodes: the first N hosts (-1: all)",
       "DSDIAG_NUM_NODES")
      ->transform(ds::cli::integer(-(1LL << 30), 1 << 20));
  flag(app, "--num_gpus,--num_accelerators", runner.numGpus,
       "As deepspeed's --num_gpus: slots 0..N-1 on every host (-1: the hostfile's)", "DSDIAG_NUM_GPUS")
      ->transform(ds::cli::integer(-(1LL << 30), 1 << 20));
  flag(app, "--ssh_port", sshPort, "As deepspeed's --ssh_port: the port runner.ssh connects to (default 22)",
       "DSDIAG_SSH_PORT")
      ->transform(ds::cli::integer(1, 65535));
  flag(app, "--launcher", runner.launcher,
       "As deepspeed's --launcher: pdsh (default), openmpi, mpich, impi, slurm or mvapich; runner.* check the "
       "command that launcher builds, its exports and the rules it adds",
       "DSDIAG_LAUNCHER");
  flag(app, "--launcher_args", runner.launcherArgs,
       "As deepspeed's --launcher_args: the launcher's own arguments, one string (write --launcher_args=-x..., "
       "as deepspeed's argparse needs for a value starting with -)",
       "DSDIAG_LAUNCHER_ARGS");
  flag(app, "--master_addr", runner.masterAddr,
       "As deepspeed's --master_addr (default: the first host's first `hostname -I` address, over ssh)",
       "DSDIAG_MASTER_ADDR");
  flag(app, "--master_port", runner.masterPort, "As deepspeed's --master_port (default 29500)", "DSDIAG_MASTER_PORT")
      ->transform(ds::cli::integer(0, 65535));
  app.add_flag("--no_ssh", runner.noSsh,
               "As deepspeed's --no_ssh: every host runs deepspeed itself with its --node_rank")
      ->envname("DSDIAG_NO_SSH");
  flag(app, "--node_rank", runner.nodeRank, "As deepspeed's --node_rank (with --no_ssh)", "DSDIAG_NODE_RANK")
      ->transform(ds::cli::integer(-1, 1 << 20));
  app.add_flag("--force_multi", runner.forceMulti,
               "As deepspeed's --force_multi: the multi-node launcher even for one host")
      ->envname("DSDIAG_FORCE_MULTI");
  app.add_flag("--verbose,-v", cmd.verbose, "Print each finding's data and every rank's rows")->envname("DSDIAG_VERBOSE");
  flag(app, "--color", cmd.color, "auto (on a TTY), always or never", "DSDIAG_COLOR")
      ->check(ds::cli::oneOf({"auto", "always", "never"}));
  flag(app, "--fail-on", failOn,
       "warn (default: exit 1 on warnings, 2 on failures) or fail (warnings exit 0; for launchers, where any "
       "non-zero exit reads as a crash)",
       "DSDIAG_FAIL_ON")
      ->check(ds::cli::oneOf({"warn", "fail"}));
  auto* ex = app.add_subcommand("explain", "Map a pasted error message to its likely causes and the checks that confirm them");
  ex->add_option("text", explainText, "The error text (quote it)")->required();
  ex->allow_extras();
  ds::diag::hang::HangCommand hang;
  auto* hg = app.add_subcommand(
      "hang",
      "Name the rank that stopped a hung job, from every rank's Flight Recorder dump (torch's or dsperf's). "
      "Exit codes: 0 no fault found, 1 cannot decide, 2 culprit found, 3 bad input");
  hg->add_option("dumps", hang.dumps, "The dumps: files, directories or globs (e.g. 'dumps/rank_*')")->required();
  hg->add_option("--logs", hang.logs, "The ranks' logs (files, directories or globs): watchdog and NCCL lines")
      ->envname("DSDIAG_HANG_LOGS");
  hg->add_option("--ras", hang.ras, "An NCCL RAS answer (STATUS / VERBOSE STATUS, text or JSON)")
      ->envname("DSDIAG_HANG_RAS")
      ->check(ds::cli::inputFile());
  hg->add_option("--fleet", hang.fleet, "dsdiag --world --json output: host verdicts and each rank's host")
      ->envname("DSDIAG_HANG_FLEET")
      ->check(ds::cli::inputFile());
  hg->add_option("--json", hang.jsonPath, "Write the verdict as JSON (schema dsperf.hang v1)")
      ->envname("DSDIAG_HANG_JSON")
      ->check(ds::cli::outputFile());

  std::vector<std::string> args;
  try {
    args = ds::env::cliArgsWithoutLocalRank(argc, argv);  // --local_rank=N from the launchers, anywhere
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "dsdiag: error: %s\n", e.what());
    return ds::diag::kExitToolError;
  }
  try {
    ds::cli::parse(app, std::move(args));
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : ds::diag::kExitToolError;
  }
  try {
    if (hg->parsed()) return ds::diag::hang::runHang(hang);
    if (ex->parsed()) {
      std::string text = explainText;
      for (const auto& extra : ex->remaining()) text += " " + extra;
      return ds::diag::runExplain(text);
    }
    cmd.options.extraArgs = app.remaining();
    // Extras are launcher flags written after the program name (a finding); a bare word first is a
    // mistyped subcommand, which must not pass as a warning.
    if (!cmd.options.extraArgs.empty() && cmd.options.extraArgs.front().rfind('-', 0) != 0) {
      throw ds::ConfigError(ds::cli::shown(cmd.options.extraArgs.front()) +
                            " is not a dsdiag command: the commands are 'explain' and 'hang'; run the checks with plain "
                            "'dsdiag [flags]' (dsdiag --help lists them).");
    }
    cmd.failOn = ds::diag::parseFailOn(failOn);
    cmd.selection.only = splitCsv(only);
    cmd.selection.skip = splitCsv(skip);
    if (timeoutS <= 0 || connectS <= 0 || largeMiB <= 0 || pairS <= 0) {
      throw ds::ConfigError("--timeout, --connect-timeout, --pair-timeout and --link-large-mib must be positive.");
    }
    cmd.options.pairTimeout = std::chrono::milliseconds(static_cast<long long>(pairS * 1000));
    cmd.options.timeout = std::chrono::milliseconds(static_cast<long long>(timeoutS * 1000));
    cmd.options.connectTimeout = std::chrono::milliseconds(static_cast<long long>(connectS * 1000));
    cmd.options.linkLargeBytes = static_cast<std::size_t>(largeMiB * 1024 * 1024);
    if (!hostfile.empty() || !runner.include.empty() || !runner.exclude.empty() || runner.numNodes != -1 ||
        runner.numGpus != -1 || sshPort != 0 || runner.launcher != "pdsh" || !runner.launcherArgs.empty() ||
        !runner.masterAddr.empty() || runner.masterPort != 29500 || runner.noSsh || runner.nodeRank != -1 ||
        runner.forceMulti) {
      if (!hostfile.empty()) runner.hostfile = hostfile;
      if (sshPort != 0) runner.sshPort = sshPort;
      cmd.options.runner = runner;
    }
    return ds::diag::runDiag(cmd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsdiag: error: %s\n", e.what());
    return ds::diag::kExitToolError;
  }
}
