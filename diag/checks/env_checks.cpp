// Family "env": who this process is, according to its launcher (REFERENCE.md §1, §2, §7.3, §7.4,
// §7.12).
#include <algorithm>

#include "diag/check.h"
#include "diag/util.h"
#include "engine/accelerator/accelerator.h"
#include "engine/common/error.h"
#include "engine/env/launcher_args.h"
#include "engine/env/launchers.h"
#include "engine/env/slurm.h"
#include "engine/env/world_json.h"
#include "engine/init.h"
#include "reports/schema/deepspeed_view.h"

namespace ds::diag {
namespace {

// Which launcher started this process: the same detection discovery uses (engine/env/launchers.h),
// so dsdiag and init_distributed reach one conclusion.
env::LauncherDetection detectLauncher(const Context& c) { return env::detectLaunchers(c.env()); }

std::string localLauncherSkip(const env::LocalLauncher& l) {
  return fmt::format(
      "Under {} ({}): an outer mpirun's/srun's variables describe the per-node launcher and are "
      "ignored, as discovery does",
      l.name, l.evidence);
}

Finding worldInfo(Context& c) {
  if (!c.world()) {
    return fail("Discovery fails: " + c.worldError(),
                "Fix the variable named above (or unset it and let the launcher set it); init_distributed stops with "
                "the same error.");
  }
  const auto& w = *c.world();
  Json data = env::worldInfoJson(w);
  // This rank's own --local_rank argument (each rank's row in the world report shows its own).
  if (const auto& arg = env::launcherLocalRankArg()) data["local_rank_arg"] = arg->value;
  std::string msg = fmt::format("RANK={} WORLD_SIZE={} LOCAL_RANK={} LOCAL_WORLD_SIZE={} NODE_RANK={} MASTER={}:{} "
                                "(rank from {}, size from {})",
                                w.rank.value, w.worldSize.value, w.localRank.value, w.localWorldSize.value,
                                w.nodeRank.value, w.needsMpiMasterAddr ? "<via MPI>" : w.masterAddr.value,
                                w.masterPort.value, w.rank.source, w.worldSize.source);
  return pass(msg, data);
}

Finding launcherVars(Context& c) {
  const char* envVars[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"};
  std::vector<std::string> set, missing;
  for (const char* v : envVars) (c.get(v) ? set : missing).emplace_back(v);
  const auto detected = detectLauncher(c);
  const env::LauncherVars* l = detected.launcher;
  const std::string label = detected.label;
  Json data{{"set", set},
            {"missing", missing},
            {"launcher", l ? label : (detected.local ? detected.local->name : "none")},
            {"slurm_allocation_only", detected.slurmAllocationOnly}};
  if (set.empty()) {
    if (l != nullptr) {
      return pass(
          fmt::format("No env:// variables; rank and size come from the {} launcher (MPI discovery, as "
                      "DeepSpeed's auto_mpi_discovery)",
                      label),
          data);
    }
    if (detected.slurmAllocationOnly) {
      return pass(
          fmt::format(
              "SLURM_PROCID={} and SLURM_NTASKS={} describe the Slurm allocation, not ranks: this is a "
              "batch script or salloc shell outside an srun step, so it runs as a single process. "
              "Start the ranks with srun inside the script",
              c.get("SLURM_PROCID").value_or("?"), c.get("SLURM_NTASKS").value_or("?")),
          data);
    }
    return pass("No launcher variables: a single process (WORLD_SIZE=1). Under dsrun, torchrun, mpirun or srun dsdiag "
                "sees the job's variables",
                data);
  }
  bool hasRank = c.get("RANK").has_value(), hasSize = c.get("WORLD_SIZE").has_value();
  if (hasRank != hasSize) {
    const char* absent = hasRank ? "WORLD_SIZE" : "RANK";
    if (l != nullptr) {
      return warn(
          fmt::format("environment variable {} expected, but not set, while {} is: discovery silently falls "
                      "back to the {} launcher's {} for it, mixing two sources",
                      absent, hasRank ? "RANK" : "WORLD_SIZE", label, hasRank ? l->size : l->rank),
          fmt::format("Export both RANK and WORLD_SIZE, or neither (and let {} set the world).", label),
          data);
    }
    return fail(fmt::format("environment variable {} expected, but not set ({} is set): init_distributed stops here",
                            absent, hasRank ? "RANK" : "WORLD_SIZE"),
                "Start the job with dsrun, torchrun, mpirun or srun, which set RANK and WORLD_SIZE for every process, "
                "or export both.",
                data);
  }
  auto size = c.get("WORLD_SIZE") ? parseInteger(*c.get("WORLD_SIZE")) : std::nullopt;
  bool multi = size && *size > 1;
  if (multi && !c.get("MASTER_ADDR") && l == nullptr && !c.get("SLURM_JOB_NODELIST")) {
    return fail("environment variable MASTER_ADDR expected, but not set, with WORLD_SIZE > 1: no rank knows where the "
                "store is",
                "Export MASTER_ADDR with an address of rank 0's host that every node can reach (or use dsrun/torchrun, "
                "which set it).",
                data);
  }
  std::vector<std::string> notes;
  if (multi && !c.get("MASTER_PORT")) notes.push_back("MASTER_PORT unset: 29500 is used");
  if (multi && !c.get("LOCAL_RANK")) {
    return warn(
        fmt::format(
            "LOCAL_RANK is not set with WORLD_SIZE={}: the local rank is derived{}, and a wrong guess "
            "puts two ranks on one GPU",
            *size, l ? fmt::format(" from {}", label) : " as RANK % LOCAL_WORLD_SIZE (one node assumed)"),
        "Export LOCAL_RANK (and LOCAL_WORLD_SIZE) per process, as dsrun/torchrun do.", data);
  }
  return pass(fmt::format("env:// variables set: {}{}", join(set, ", "),
                          notes.empty() ? "" : "; " + join(notes, "; ")),
              data);
}

Finding launcherAgreement(Context& c) {
  const auto detected = detectLauncher(c);
  if (detected.local) return skip(localLauncherSkip(*detected.local));
  std::vector<std::string> conflicts;
  std::vector<std::string> launchers;
  Json pairs = Json::array();
  for (const auto& [lp, label] : detected.present) {
    const env::LauncherVars& l = *lp;
    launchers.push_back(label);
    std::pair<const char*, const char*> cmp[] = {
        {"RANK", l.rank},
        {"WORLD_SIZE", l.size && c.get(l.size) ? l.size : l.sizeFallback},
        {"LOCAL_RANK", l.localRank && c.get(l.localRank) ? l.localRank : l.localRankFallback},
        {"LOCAL_WORLD_SIZE", l.localSize}};
    for (auto [e, lv] : cmp) {
      if (lv == nullptr) continue;
      auto a = c.get(e), b = c.get(lv);
      if (!a || !b) continue;
      pairs.push_back({{"env", e}, {"launcher", lv}, {"env_value", *a}, {"launcher_value", *b}});
      auto ia = parseInteger(*a), ib = parseInteger(*b);
      if (ia && ib && *ia == *ib) continue;
      conflicts.push_back(fmt::format("{}={} but {}={}", e, quoteValue(*a), lv, quoteValue(*b)));
    }
  }
  if (pairs.empty()) {
    if (launchers.empty()) return skip("No launcher variables next to env:// ones: nothing to compare", {{"pairs", pairs}});
    return skip(fmt::format("No env:// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) next to the {} "
                            "launcher's: it alone describes the world, nothing to compare",
                            join(launchers, "/")),
                {{"pairs", pairs}, {"launchers", launchers}});
  }
  if (!conflicts.empty()) {
    return fail(fmt::format("env:// and the launcher describe different processes: {}. Ranks would pair up wrongly "
                            "and hang at rendezvous",
                            join(conflicts, "; ")),
                "A job script exported stale RANK/WORLD_SIZE/LOCAL_RANK: unset them and let the launcher set the world, "
                "or start the job without mpirun/srun around it.",
                {{"pairs", pairs}, {"conflicts", conflicts}});
  }
  return pass(fmt::format("{} env:// value(s) agree with the launcher's", pairs.size()), {{"pairs", pairs}});
}

Finding rankRange(Context& c) {
  if (c.world()) {
    const auto& w = *c.world();
    return pass(fmt::format("RANK {} < WORLD_SIZE {}; LOCAL_RANK {} < LOCAL_WORLD_SIZE {}", w.rank.value,
                            w.worldSize.value, w.localRank.value, w.localWorldSize.value),
                {{"rank", w.rank.value},
                 {"world_size", w.worldSize.value},
                 {"local_rank", w.localRank.value},
                 {"local_world_size", w.localWorldSize.value}});
  }
  // Discovery failed: say precisely which value is wrong.
  auto num = [&](const char* n) -> std::optional<long long> {
    auto v = c.get(n);
    return v ? parseInteger(*v) : std::nullopt;
  };
  std::vector<std::string> bad;
  for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "GROUP_RANK", "NODE_RANK"}) {
    auto v = c.get(n);
    if (!v) continue;
    auto i = parseInteger(*v);
    if (!i) bad.push_back(fmt::format("{}={} is not an integer", n, quoteValue(*v)));
    else if (*i < 0) bad.push_back(fmt::format("{}={} is negative", n, *i));
  }
  auto rank = num("RANK"), size = num("WORLD_SIZE"), lrank = num("LOCAL_RANK");
  auto lsize = num("LOCAL_WORLD_SIZE") ? num("LOCAL_WORLD_SIZE") : num("LOCAL_SIZE");
  if (size && *size < 1) bad.push_back(fmt::format("WORLD_SIZE={} must be at least 1", *size));
  if (rank && size && *rank >= *size && *size >= 1) {
    bad.push_back(fmt::format("RANK={} is not below WORLD_SIZE={} (ranks run 0 to {})", *rank, *size, *size - 1));
  }
  if (lrank && lsize && *lrank >= *lsize) {
    bad.push_back(fmt::format("LOCAL_RANK={} is not below LOCAL_WORLD_SIZE={}", *lrank, *lsize));
  }
  if (lsize && size && *lsize > *size) bad.push_back(fmt::format("LOCAL_WORLD_SIZE={} exceeds WORLD_SIZE={}", *lsize, *size));
  if (bad.empty()) return skip("Discovery failed for another reason (see env.world_info); the values that are set are in range");
  return fail(fmt::format("{}: every rank must have a distinct RANK below WORLD_SIZE, or rendezvous waits forever for "
                          "a rank that cannot exist",
                          join(bad, "; ")),
              "Check that the launcher's process count matches WORLD_SIZE and that the job script does not override "
              "RANK/LOCAL_RANK.",
              {{"problems", bad}});
}

Finding worldSizeProduct(Context& c) {
  if (!c.world()) return skip("Discovery failed (see env.world_info)");
  const auto& w = *c.world();
  int size = w.worldSize.value, local = w.localWorldSize.value;
  auto nodes = c.nodeCount();
  // Under srun, the step's own layout: its tasks per node add up to its size, however uneven
  // ("2(x3),1"), and whatever the allocation around it was (SLURM_NTASKS_PER_NODE is the
  // allocation's and stays set inside a smaller step).
  if (w.launcher == env::Launcher::kSlurm) {
    if (auto tpn = env::firstSet(c.env(), {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
      std::vector<int> counts;
      try {
        counts = env::expandTasksPerNode(tpn->second, tpn->first);
      } catch (const ConfigError& e) {
        return fail(e.what(), "srun sets this variable: do not export it by hand in the job script.",
                    {{"variable", tpn->first}, {"value", tpn->second}});
      }
      long long sum = 0;
      for (int n : counts) sum += n;
      Json data{{"world_size", size}, {"tasks_per_node_var", tpn->first}, {"tasks_per_node", tpn->second},
                {"nodes", counts.size()}, {"tasks", sum}};
      if (sum != size) {
        return fail(fmt::format("WORLD_SIZE={} but {}='{}' adds up to {} task(s) on {} node(s): {}", size, tpn->first,
                                tpn->second, sum, counts.size(),
                                sum > size ? "rank 0 waits for processes that were never started"
                                           : "some processes get a RANK beyond WORLD_SIZE"),
                    "Do not export WORLD_SIZE in a job script run under srun: discovery reads the step's size.", data);
      }
      bool uneven = std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) != counts.end();
      return pass(fmt::format("WORLD_SIZE={} = the step's {}='{}' over {} node(s){}", size, tpn->first, tpn->second,
                              counts.size(), uneven ? " (uneven: legal under srun)" : ""),
                  data);
    }
  }
  // Slurm's own product, when it is the launcher and gave no tasks-per-node list.
  if (auto ntpn = c.get("SLURM_NTASKS_PER_NODE");
      ntpn && nodes && nodes->second.rfind("SLURM", 0) == 0 && w.launcher == env::Launcher::kSlurm) {
    if (auto t = parseInteger(*ntpn); t && *t * nodes->first != size) {
      return fail(fmt::format("WORLD_SIZE={} but {}={} x SLURM_NTASKS_PER_NODE={} = {}: rank 0 waits for processes "
                              "that were never started",
                              size, nodes->second, nodes->first, *t, *t * nodes->first),
                  "Make WORLD_SIZE equal nodes x tasks per node (or let srun set it: do not export WORLD_SIZE).",
                  {{"world_size", size}, {"nodes", nodes->first}, {"tasks_per_node", *t}});
    }
  }
  if (!nodes) {
    if (size % local != 0) {
      return warn(fmt::format("WORLD_SIZE={} is not a multiple of LOCAL_WORLD_SIZE={}: nodes run different numbers of "
                              "ranks (or WORLD_SIZE is wrong)",
                              size, local),
                  "Check --nproc-per-node on every node and WORLD_SIZE; uneven nodes are legal but usually a mistake.",
                  {{"world_size", size}, {"local_world_size", local}});
    }
    return skip(fmt::format("The node count is not known here (no SLURM_NNODES, CROSS_SIZE or GROUP_WORLD_SIZE); "
                            "WORLD_SIZE={} is a multiple of LOCAL_WORLD_SIZE={}",
                            size, local),
                {{"world_size", size}, {"local_world_size", local}});
  }
  long long product = static_cast<long long>(nodes->first) * local;
  Json data{{"world_size", size}, {"nodes", nodes->first}, {"nodes_from", nodes->second}, {"nproc_per_node", local}};
  if (product != size) {
    return fail(fmt::format("WORLD_SIZE={} but {} node(s) ({}) x LOCAL_WORLD_SIZE={} = {}: {}", size, nodes->first,
                            nodes->second, local, product,
                            product < size ? "rank 0 waits for processes that were never started, until the timeout"
                                           : "some processes get a RANK beyond WORLD_SIZE"),
                "Make WORLD_SIZE equal nnodes x nproc-per-node (or let the launcher set it instead of exporting it).",
                data);
  }
  return pass(fmt::format("WORLD_SIZE={} = {} node(s) x {} per node", size, nodes->first, local), data);
}

Finding ompThreads(Context& c) {
  int local = c.localWorldSize();
  auto v = c.get("OMP_NUM_THREADS");
  if (!v) {
    if (local > 1) {
      return warn(fmt::format("OMP_NUM_THREADS is unset with {} ranks on this node: each rank's OpenMP/BLAS pool "
                              "takes every core, and {} pools oversubscribe the CPU (slow steps, busy-wait stalls)",
                              local, local),
                  fmt::format("export OMP_NUM_THREADS=<cores / {}> (dsrun and torchrun set 1 when unset).", local),
                  {{"local_world_size", local}});
    }
    return pass("OMP_NUM_THREADS unset with one rank on this node (the runtime uses every core)");
  }
  auto n = parseInteger(*v);
  if (!n || *n < 1) {
    return warn(fmt::format("OMP_NUM_THREADS={} is not a positive integer: OpenMP ignores it and uses every core",
                            quoteValue(*v)),
                "Set OMP_NUM_THREADS to a positive integer, e.g. cores per node / ranks per node.", {{"value", *v}});
  }
  return pass(fmt::format("OMP_NUM_THREADS={} with {} rank(s) on this node", *n, local), {{"value", *n}});
}

bool isLauncherFlag(const std::string& arg) {
  static const char* kFlags[] = {"nproc-per-node", "nproc_per_node", "nnodes", "node-rank", "node_rank",
                                 "master-addr", "master_addr", "master-port", "master_port", "standalone",
                                 "rdzv-id", "rdzv_id", "rdzv-endpoint", "rdzv_endpoint", "rdzv-backend",
                                 "rdzv_backend", "run-id", "run_id", "log-dir", "log_dir", "max-restarts",
                                 "max_restarts", "no-python", "no_python", "num_gpus", "num-gpus", "num_nodes",
                                 "num-nodes", "hostfile", "include", "exclude", "tee", "redirects"};
  if (arg.rfind("--", 0) != 0) return false;
  std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
  return std::find(std::begin(kFlags), std::end(kFlags), name) != std::end(kFlags);
}

Finding launcherFlags(Context& c) {
  const auto& extra = c.options().extraArgs;
  std::vector<std::string> misplaced, localRankArgs, other;
  // main() took the --local_rank argument (any spelling or position) and checked it against LOCAL_RANK.
  if (const auto& arg = env::launcherLocalRankArg()) localRankArgs.push_back(arg->given);
  for (const auto& a : extra) {
    if (isLauncherFlag(a)) misplaced.push_back(a);
    else other.push_back(a);
  }
  Json data{{"misplaced", misplaced}, {"local_rank_args", localRankArgs}, {"unrecognised", other}};
  if (!misplaced.empty()) {
    return fail(fmt::format("Launcher flag(s) {} reached dsdiag: they were written after the program name, so the "
                            "launcher passed them to the program and did not apply them (the classic --master_port case)",
                            join(misplaced, " ")),
                "Move launcher flags before the program: dsrun --master-port 29501 prog args (everything after the "
                "program name goes to the program).",
                data);
  }
  if (!other.empty()) {
    return warn(fmt::format("Unrecognised argument(s) ignored: {}", join(other, " ")),
                "Check the command line; dsdiag --help lists its flags.", data);
  }
  if (!localRankArgs.empty()) {
    return pass(fmt::format("{} passed by the launcher (torch.distributed.launch and DeepSpeed's launcher do this) "
                            "agrees with LOCAL_RANK; scripts must accept both --local_rank and --local-rank",
                            localRankArgs.front()),
                data);
  }
  return pass("No launcher flags after the program name", data);
}

// Whether the job's Python can import mpi4py, which DeepSpeed's MPI discovery needs
// (`from mpi4py import MPI` in deepspeed/comm/comm.py). The probe finds mpi4py.MPI without importing
// it: importing it would call MPI_Init, and a pre-flight started by mpirun must not join its job.
struct Mpi4pyProbe {
  enum class Outcome { kImports, kMissing, kUnknown, kNotAsked } outcome = Outcome::kNotAsked;
  std::string python;  // the interpreter asked
  std::string text;    // "mpi4py 3.1.4 at ...", "ModuleNotFoundError: No module named 'mpi4py'", or why unknown
  bool deepspeed = false;  // that Python has a deepspeed package (found, not imported)
};

constexpr const char* kMpi4pyProbe =
    "import sys, importlib.util\n"
    "try:\n"
    "    ds = importlib.util.find_spec('deepspeed') is not None\n"
    "except BaseException:\n"
    "    ds = False\n"
    "print('deepspeed: ' + ('yes' if ds else 'no'))\n"
    "try:\n"
    "    import mpi4py\n"
    "except BaseException as e:\n"
    "    print(f'{type(e).__name__}: {e}'); sys.exit(3)\n"
    "if importlib.util.find_spec('mpi4py.MPI') is None:\n"
    "    print(\"ModuleNotFoundError: No module named 'mpi4py.MPI'\"); sys.exit(3)\n"
    "print(f'mpi4py {getattr(mpi4py, \"__version__\", \"?\")} at {mpi4py.__file__}')\n";

// A line of a child's output for a message: printable ASCII, at most 200 characters.
std::string printable(std::string_view line) {
  std::string out;
  for (char ch : line.substr(0, 200)) out += (ch >= 32 && ch < 127) ? ch : '?';
  return out;
}

Mpi4pyProbe probeMpi4py(Context& c) {
  Mpi4pyProbe p;
  const auto path = c.get("PATH");
  if (!path) return p;  // not a real environment: nothing to ask
  for (const char* name : {"python3", "python"}) {
    p.python = findOnPath(*path, name);
    if (!p.python.empty()) break;
  }
  if (p.python.empty()) {
    p.outcome = Mpi4pyProbe::Outcome::kUnknown;
    p.text = "no python3 or python on PATH to ask";
    return p;
  }
  const auto r = runProgram({p.python, "-c", kMpi4pyProbe}, std::chrono::seconds(20));
  const std::string out = trim(r.output);
  p.deepspeed = out.rfind("deepspeed: yes", 0) == 0;
  const std::string last = out.substr(out.find_last_of('\n') == std::string::npos ? 0 : out.find_last_of('\n') + 1);
  if (!r.error.empty()) {
    p.outcome = Mpi4pyProbe::Outcome::kUnknown;
    p.text = r.error;
  } else if (r.timedOut) {
    p.outcome = Mpi4pyProbe::Outcome::kUnknown;
    p.text = fmt::format("{} did not answer within 20 s", p.python);
  } else if (r.exitCode == 0) {
    p.outcome = Mpi4pyProbe::Outcome::kImports;
    p.text = last;
  } else if (r.exitCode == 3) {
    p.outcome = Mpi4pyProbe::Outcome::kMissing;
    p.text = printable(last);
  } else {
    p.outcome = Mpi4pyProbe::Outcome::kUnknown;
    p.text = fmt::format("{} -c exited {}: {}", p.python, r.exitCode, printable(last));
  }
  return p;
}

// What deepspeed.init_distributed() would conclude here (DeepSpeed's rules, engine/env/deepspeed_view.h)
// beside dsperf's own conclusion, field by field.
Finding deepspeedConclusion(Context& c) {
  auto view = deepspeedViewFor(InitOptions{}, c.env());
  std::optional<env::WorldInfo> mine;
  std::string err;
  try {
    InitOptions o;
    o.discovery =
        Discovery::kDsperf;  // the comparison is with dsperf's own rules, whatever DS_DISCOVERY says
    mine = discoverWorldFor(o, c.env());
  } catch (const std::exception& e) {
    err = e.what();
  }
  auto diffs = env::deepspeedDifferences(view, mine ? &*mine : nullptr, err, c.env());
  Json data = report::deepspeedViewJson(view, diffs);
  if (view.failure) {
    std::string unless =
        view.failure->unless.empty() ? "" : fmt::format(" where {} is not installed", view.failure->unless);
    return fail(fmt::format("deepspeed.init_distributed() would fail here, at {}{}: {}: {}{}",
                            view.failure->stage == "import" ? "`import deepspeed`" : "init_distributed()",
                            unless, view.failure->type, view.failure->message,
                            mine ? " (dsperf's own rules would start the job)" : ""),
                "Fix the variable DeepSpeed names above (env.deepspeed_timeout and env.ds_accelerator check "
                "the two it reads "
                "at import).",
                data);
  }
  const bool lone = view.worldSizeValue == 1 && mine && mine->worldSize.value == 1;
  const Mpi4pyProbe mpi4py = view.mpi4pyNeeded ? probeMpi4py(c) : Mpi4pyProbe{};
  if (mpi4py.outcome != Mpi4pyProbe::Outcome::kNotAsked) {
    data["mpi4py"] = {{"python", mpi4py.python},
                      {"imports", mpi4py.outcome == Mpi4pyProbe::Outcome::kImports},
                      {"deepspeed", mpi4py.deepspeed},
                      {"known", mpi4py.outcome != Mpi4pyProbe::Outcome::kUnknown},
                      {"answer", mpi4py.text}};
  }
  const std::string mpi4pyTodo =
      "Install mpi4py for the Python that runs the job (`pip install mpi4py`, or Debian's python3-mpi4py; it "
      "needs an MPI library), or export all five of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT "
      "(DeepSpeed's launcher, torchrun and dsrun do), so that DeepSpeed skips MPI discovery.";
  // A FAIL only where the job can be DeepSpeed's (its Python has deepspeed): a plain mpirun or srun job
  // of dsbench or torch needs no mpi4py, and its pre-flight must not fail for it.
  if (mpi4py.outcome == Mpi4pyProbe::Outcome::kMissing && !lone && mpi4py.deepspeed) {
    return fail(fmt::format("deepspeed.init_distributed() would fail here: DeepSpeed runs MPI discovery ({}) and "
                            "imports mpi4py, which {} cannot import ({}). dsperf's own rules {}",
                            view.why, mpi4py.python, mpi4py.text,
                            mine ? fmt::format("make this rank {} of {}", mine->rank.value, mine->worldSize.value)
                                 : "would not start the job either"),
                mpi4pyTodo, data);
  }
  std::vector<std::string> sentences, minor;
  bool worldDiffers = false;
  for (const auto& d : diffs) {
    bool world = d.field == "RANK" || d.field == "WORLD_SIZE" || d.field == "outcome";
    worldDiffers = worldDiffers || world;
    ((world || !lone) && d.field != "mpi4py" ? sentences : minor).push_back(d.sentence);
  }
  std::string where = view.masterAddrFromMpiRank0 ? "rank 0's first `hostname -I` address"
                                                  : (view.masterAddr.text ? *view.masterAddr.text : "?");
  std::string summary =
      fmt::format("deepspeed.init_distributed() would make this rank {} of {} at {}:{} ({}: {})",
                  view.rankValue ? std::to_string(*view.rankValue) : "<MPI's rank>",
                  view.worldSizeValue ? std::to_string(*view.worldSizeValue) : "<MPI's size>", where,
                  view.masterPortValue ? std::to_string(*view.masterPortValue) : "?", view.path, view.why);
  for (const auto& w : view.warnings) sentences.push_back(w);
  if (mpi4py.outcome == Mpi4pyProbe::Outcome::kMissing) {  // one process, or no deepspeed: a note
    minor.push_back(fmt::format("Here {} cannot import it ({}){}.", mpi4py.python, mpi4py.text,
                                mpi4py.deepspeed ? "" : "; it has no deepspeed either, so no job of it runs DeepSpeed"));
  } else if (mpi4py.outcome == Mpi4pyProbe::Outcome::kUnknown) {
    (lone || !mpi4py.deepspeed ? minor : sentences)
        .push_back(fmt::format("Whether the job's Python can import mpi4py, which DeepSpeed's MPI discovery needs, is "
                               "not known: {}.",
                               mpi4py.text));
  }
  if (!mine && !worldDiffers) worldDiffers = true;
  const std::string todo =
      "Export all five of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (DeepSpeed's launcher, "
      "torchrun and "
      "dsrun do), so that DeepSpeed uses them as they are; or run dsperf with --discovery deepspeed to "
      "follow "
      "DeepSpeed's rules.";
  // Through MPI discovery inside an srun step, the outcome is what mpi4py reports under srun's PMI
  // plugin, which the view can only model: a warning, not a failure, so that a plain srun job that
  // never runs DeepSpeed does not fail its pre-flight. Outside any launcher, a singleton is certain.
  const bool throughMpi = view.path.rfind("mpi_discovery", 0) == 0 && c.get("SLURM_STEP_ID").has_value();
  if (worldDiffers && !throughMpi) return fail(fmt::format("{}. {}", summary, join(sentences, " ")), todo, data);
  if (worldDiffers) {
    return warn(fmt::format("{}. {} (through MPI discovery inside an srun step: what mpi4py reports there decides; "
                            "with srun's PMI plugin, e.g. --mpi=pmix, it is the real rank and size)",
                            summary, join(sentences, " ")),
                todo, data);
  }
  if (!sentences.empty()) return warn(fmt::format("{}. {}", summary, join(sentences, " ")), todo, data);
  return pass(fmt::format("{}; dsperf concludes the same{}", summary,
                          minor.empty() ? "" : fmt::format(" (for one process: {})", join(minor, " "))),
              data);
}

// DEEPSPEED_TIMEOUT exactly as deepspeed/constants.py reads it at import: Python's int(), in minutes.
Finding deepspeedTimeout(Context& c) {
  auto v = c.get("DEEPSPEED_TIMEOUT");
  if (!v) {
    return pass(
        "DEEPSPEED_TIMEOUT unset: 10 minutes, DeepSpeed's default since 0.19.6 (30 minutes through 0.19.5) "
        "and dsperf's",
        {{"minutes", 10}, {"source", "default"}});
  }
  auto m = env::pythonInt(*v);
  Json data{{"value", *v}, {"minutes", m ? Json(*m) : Json(nullptr)}};
  if (!m) {
    return fail(
        fmt::format(
            "DEEPSPEED_TIMEOUT={} is not a whole number of minutes: `import deepspeed` raises ValueError "
            "(invalid literal for int() with base 10: {}) before any rank starts, and dsperf stops too",
            quoteValue(*v), env::pythonRepr(*v)),
        "Set DEEPSPEED_TIMEOUT to whole minutes, e.g. 30, or unset it for the default of 10.", data);
  }
  if (*m <= 0) {
    return warn(
        fmt::format("DEEPSPEED_TIMEOUT={} gives a {}-second timeout: DeepSpeed passes it to torch without a "
                    "word, and every rendezvous and collective then times out at once (dsperf refuses it)",
                    quoteValue(*v), *m * 60),
        "Set a positive number of minutes (the default is 10).", data);
  }
  std::string read = std::to_string(*m) == *v
                         ? ""
                         : fmt::format(" (Python's int() reads {} as {})", env::pythonRepr(*v), *m);
  if (*m > 7 * 24 * 60) {
    return warn(
        fmt::format(
            "DEEPSPEED_TIMEOUT={} minutes{}: a hung job holds its nodes that long, and dsperf refuses "
            "more than a week (10080)",
            *m, read),
        "Use at most 10080 minutes; a few times the slowest expected step is enough.", data);
  }
  return pass(fmt::format("DEEPSPEED_TIMEOUT={} minutes{}: rendezvous and collectives wait at most {} s", *m,
                          read, *m * 60),
              data);
}

// DS_ACCELERATOR exactly as DeepSpeed's get_accelerator() reads it at import.
Finding dsAccelerator(Context& c) {
  auto v = c.get("DS_ACCELERATOR");
  std::string why;
  const bool cuda = accel::tryMakeCudaAccelerator(why) != nullptr;
  Json data{{"value", v ? Json(*v) : Json(nullptr)}, {"cuda_usable", cuda}, {"cuda_reason", why}};
  if (!v) {
    return pass(fmt::format("DS_ACCELERATOR unset: DeepSpeed and dsperf detect {}{}", cuda ? "cuda" : "cpu",
                            cuda ? "" : fmt::format(" (no usable GPU: {})", why)),
                data);
  }
  if (*v == "cpu")
    return pass("DS_ACCELERATOR=cpu: DeepSpeed and dsperf run on the CPU (backend gloo)", data);
  if (*v == "cuda") {
    if (cuda) return pass("DS_ACCELERATOR=cuda, and a GPU is usable here", data);
    return fail(
        fmt::format("DS_ACCELERATOR=cuda but no GPU is usable here ({}): DeepSpeed takes it without checking "
                    "and the job fails later, at the first CUDA call or at NCCL's init; dsperf stops at init",
                    why),
        "Unset DS_ACCELERATOR on CPU-only nodes (or set it to cpu), or fix the GPU (see the gpu checks).",
        data);
  }
  if (auto module = env::deepspeedAcceleratorModule(*v)) {
    return fail(
        fmt::format(
            "DS_ACCELERATOR={}: {} is a DeepSpeed accelerator that dsperf does not support (dsperf runs "
            "on cpu and cuda); DeepSpeed itself needs {} for it and raises ValueError at `import "
            "deepspeed` where that is missing",
            *v, *v, *module),
        "Unset DS_ACCELERATOR (or set cpu or cuda) for dsperf's tools.", data);
  }
  std::vector<std::string> names;
  for (auto n : env::deepspeedAcceleratorNames()) names.emplace_back(n);
  return fail(
      fmt::format("DS_ACCELERATOR={} is not an accelerator DeepSpeed knows: `import deepspeed` raises "
                  "ValueError (DS_ACCELERATOR must be one of {}), and dsperf stops too",
                  quoteValue(*v), join(names, ", ")),
      "Unset DS_ACCELERATOR to detect the accelerator, or set one of the names above (lower case).", data);
}

}  // namespace

std::vector<CheckDef> envChecks() {
  return {
      {"env.world_info", "env", "Discovered world (rank, sizes, master) with where each value came from",
       worldInfo},
      {"env.launcher_vars", "env", "env:// variables missing or half set", launcherVars},
      {"env.launcher_agreement", "env", "env:// values agree with the MPI/Slurm launcher's",
       launcherAgreement},
      {"env.rank_range", "env", "RANK < WORLD_SIZE, LOCAL_RANK < LOCAL_WORLD_SIZE", rankRange},
      {"env.world_size_product", "env", "WORLD_SIZE == nnodes x nproc-per-node where knowable",
       worldSizeProduct},
      {"env.omp_num_threads", "env", "OMP_NUM_THREADS set when several ranks share a node", ompThreads},
      {"env.launcher_flags", "env", "Launcher flags placed after the program name", launcherFlags},
      {"env.deepspeed", "env",
       "What deepspeed.init_distributed() would conclude here, and every difference from dsperf's",
       deepspeedConclusion},
      {"env.deepspeed_timeout", "env", "DEEPSPEED_TIMEOUT as DeepSpeed reads it (Python int(), minutes)",
       deepspeedTimeout},
      {"env.ds_accelerator", "env", "DS_ACCELERATOR as DeepSpeed reads it (its 10 names; cuda needs a GPU)",
       dsAccelerator},
  };
}

}  // namespace ds::diag
