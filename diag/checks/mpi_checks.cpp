// Family "mpi": which launcher started us, which MPI library is installed, and whether the MPI
// world matches env:// (REFERENCE.md §1, §8).
#include <unistd.h>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/env/slurm.h"

namespace ds::diag {
namespace {

struct LauncherGuess {
  std::string name;
  std::string evidence;
  bool mpiFamily = false;
  std::string family = "";  // "openmpi", "mpich", "" for others
};

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

LauncherGuess guessLauncher(const Context& c) {
  std::string parent = trim(readTextFile(fmt::format("{}/{}/comm", c.paths().procfs, getppid())).value_or(""));
  if (c.get("TORCHELASTIC_RUN_ID")) {
    std::string who = parent == "dsrun" ? "dsrun" : parent.empty() ? "dsrun/torchrun" : "torchrun (or dsrun)";
    return {who, fmt::format("TORCHELASTIC_RUN_ID={}; parent process '{}'", *c.get("TORCHELASTIC_RUN_ID"), parent)};
  }
  if (c.get("OMPI_COMM_WORLD_RANK")) return {"Open MPI mpirun", "OMPI_COMM_WORLD_RANK", true, "openmpi"};
  const auto place = env::slurmPlace(c.env());
  // srun --mpi=pmi2/pmix exports PMI_RANK (and PMI_FD) or PMIX_RANK equal to SLURM_PROCID: that is srun
  // serving a PMI, not MPICH's mpiexec (whose PMI_RANK differs from its proxies' SLURM_PROCID).
  if (place == env::SlurmPlace::kStep && c.get("SLURM_PROCID")) {
    auto procid = c.get("SLURM_PROCID");
    const std::string plugin = env::slurmMpiPlugin(c.env());
    const char* pmiRank = plugin == "pmix" ? "PMIX_RANK" : "PMI_RANK";
    if (plugin == "none" || c.get(pmiRank) == procid) {
      return {fmt::format("Slurm srun (--mpi={})", plugin),
              plugin == "none" ? "SLURM_PROCID, SLURM_STEP_ID; no PMIX_RANK or PMI_RANK"
                               : fmt::format("SLURM_PROCID, SLURM_STEP_ID, {} equal to SLURM_PROCID", pmiRank),
              false, "srun-" + plugin};
    }
  }
  if (c.get("PMI_RANK") && (c.get("MPI_LOCALRANKID") || c.get("HYDRA_CONTROL_FD") || c.get("PMI_FD"))) {
    return {"MPICH/Hydra (or Intel MPI) mpiexec", "PMI_RANK", true, "mpich"};
  }
  if (c.get("MV2_COMM_WORLD_RANK")) return {"MVAPICH mpirun_rsh", "MV2_COMM_WORLD_RANK", true, "mpich"};
  if (c.get("PMI_RANK")) return {"a PMI launcher", "PMI_RANK", true, ""};
  if (c.get("PMIX_RANK")) return {"a PMIx launcher", "PMIX_RANK", true, ""};
  if (c.get("CROSS_RANK") || c.get("LOCAL_SIZE")) return {"DeepSpeed's launcher", "CROSS_RANK/LOCAL_SIZE"};
  if (c.get("RANK") || c.get("WORLD_SIZE")) return {"a job script (env:// variables set by hand)", "RANK/WORLD_SIZE"};
  if (place == env::SlurmPlace::kAllocation) {
    auto step = c.get("SLURM_STEP_ID");
    return {"none (a Slurm batch script or salloc shell, outside any srun step)",
            fmt::format("SLURM_JOB_ID={} with {}", *c.get("SLURM_JOB_ID"),
                        step ? fmt::format("SLURM_STEP_ID={} (not a task step)", *step) : "no SLURM_STEP_ID")};
  }
  return {"none (a lone process)", "no launcher variables"};
}

Finding launcher(Context& c) {
  auto g = guessLauncher(c);
  Json data{{"launcher", g.name}, {"evidence", g.evidence}};
  const bool outsideStep = env::slurmPlace(c.env()) == env::SlurmPlace::kAllocation;
  if (outsideStep && c.worldSize() == 1 && !g.mpiFamily && !c.get("TORCHELASTIC_RUN_ID")) {
    auto tasks = env::firstSet(c.env(), {"SLURM_NTASKS", "SLURM_NPROCS"});
    if (tasks && parseInteger(tasks->second).value_or(1) > 1) {
      return warn(fmt::format("Slurm allocated {}={} tasks, but this process runs in the batch script (or salloc "
                              "shell), outside any srun step: it is a single process, not rank 0 of {}",
                              tasks->first, tasks->second, tasks->second),
                  "Start the command with srun inside the script (`srun dsbench ...`), or with `dsrun "
                  "--nproc-per-node N` on one node.",
                  data);
    }
  }
  if (outsideStep && c.worldSize() > 1 && !g.mpiFamily && !c.get("TORCHELASTIC_RUN_ID")) {
    return warn(fmt::format("Started by {} with WORLD_SIZE={} inside a Slurm allocation but not through srun: Slurm does "
                            "not know these processes (no cleanup, no binding)",
                            g.name, c.worldSize()),
                "Start the ranks with srun (or mpirun / dsrun per node under srun).", data);
  }
  return pass(fmt::format("Started by {} ({})", g.name, g.evidence), data);
}

Finding mpiVersion(Context& c) {
  auto g = guessLauncher(c);
  bool needed = g.mpiFamily || c.jobBackend() == "mpi";
  auto& p = c.mpi();
  Json data{{"path", p.path}, {"version", p.libraryVersion}, {"error", p.error}};
  if (!p.broken.empty()) {
    return brokenLibrary(p.broken, p.error, "MPI (dsbench, dsrun's workers under mpirun)",
                         " Reinstall Open MPI (libopenmpi-dev openmpi-bin) if it is the system's.", data);
  }
  if (!p.loaded || !p.error.empty()) {
    std::string msg = fmt::format("No usable MPI library ({})", p.error);
    if (needed) {
      return fail(msg + fmt::format("; the job {} needs it", g.mpiFamily ? "runs under " + g.name : "uses backend mpi"),
                  "Install Open MPI (libopenmpi-dev openmpi-bin) on every node, the same version everywhere.", data);
    }
    return skip(msg + "; not needed: the job neither runs under mpirun nor uses backend mpi", data);
  }
  bool isOmpi = p.libraryVersion.find("Open MPI") != std::string::npos;
  // Under srun the PMI comes from srun's --mpi plugin, and the library must speak it.
  if (g.family.rfind("srun-", 0) == 0) {
    const std::string plugin = g.family.substr(5);
    const bool speaks = plugin == "pmix" || (plugin == "pmi2" && !isOmpi);
    const int tasks = c.worldSize();
    if (needed && tasks > 1 && !speaks) {
      return fail(fmt::format("The job uses backend mpi under srun --mpi={}, but '{}' does not speak that PMI: "
                              "MPI_Init aborts (init_distributed refuses first)",
                              plugin, firstLine(p.libraryVersion)),
                  fmt::format("Start the step with `srun --mpi={} ...` (`srun --mpi=list` shows this Slurm's "
                              "plugins), or use backend gloo, which needs no MPI.",
                              isOmpi ? "pmix" : "pmi2"),
                  data);
    }
    return pass(fmt::format("{} ({}); under srun --mpi={}{}", firstLine(p.libraryVersion), p.path, plugin,
                            needed ? "" : ": not used, the backend is not mpi"),
                data);
  }
  if ((g.family == "openmpi" && !isOmpi) || (g.family == "mpich" && isOmpi)) {
    return fail(fmt::format("Started by {} but the MPI library here is '{}': a launcher and library of different MPIs do "
                            "not talk, and every process becomes rank 0 of a world of 1",
                            g.name, p.libraryVersion),
                "Use the mpirun that belongs to the installed library (check `which mpirun` and LD_LIBRARY_PATH).", data);
  }
  return pass(fmt::format("{} ({})", p.libraryVersion, p.path), data);
}

// The lines of Open MPI's help text that say what went wrong (the boxes between dashed lines, the
// ORTE_ERROR_LOG lines), joined into one sentence-sized excerpt.
std::string mpiOutputExcerpt(const std::string& output) {
  std::vector<std::string> keep;
  for (std::string line : split(output, '\n')) {
    line = trim(line);
    if (line.empty() || line.find_first_not_of('-') == std::string::npos) continue;
    if (line.rfind("***", 0) == 0) continue;
    keep.push_back(line);
    if (keep.size() == 6) break;
  }
  std::string s = join(keep, " ");
  return s.size() > 600 ? s.substr(0, 600) + " ..." : s;
}

// Whether an executable `name` is on the job's PATH.
bool onJobPath(const Context& c, const std::string& name) {
  return ds::diag::onPath(c.get("PATH").value_or(""), name);
}

// MPI started here as the job's ranks will start it: proof, not the library's presence. A rank that
// no MPI launcher started (dsrun, torchrun, a lone dsbench --backend mpi) is an Open MPI singleton,
// which needs orted (openmpi-bin) and Open MPI's help files (openmpi-common); the library alone
// loads and answers its version without them.
Finding mpiStart(Context& c) {
  auto& p = c.mpi();
  if (!p.loaded || !p.error.empty() || !p.broken.empty()) {
    return skip("Not tried: no usable MPI library (mpi.version says why)");
  }
  const auto g = guessLauncher(c);
  if (g.mpiFamily || g.family.rfind("srun-", 0) == 0) {
    return skip(fmt::format("Not tried: {} started this process, so MPI starts through it; a second MPI_Init here "
                            "would join the job's own world (mpi.world_match checks it)",
                            g.name));
  }
  const bool needed = c.jobBackend() == "mpi";
  const auto s = probeMpiStart(p.path, c.get("PATH").value_or(""), std::chrono::seconds(30));
  Json data{{"path", p.path}, {"seconds", s.seconds}, {"started", s.ok}, {"output", s.output}};
  if (s.ok) {
    return pass(fmt::format("MPI_Init and MPI_Finalize worked in a child started as a rank without mpirun (an Open MPI "
                            "singleton) in {:.1f} s",
                            s.seconds),
                data);
  }
  std::string missing;
  std::string remedy;
  const bool openMpi = p.libraryVersion.find("Open MPI") != std::string::npos;
  if (openMpi && !onJobPath(c, "orted")) {
    missing = "orted is not on PATH";
    remedy = "Install openmpi-bin (orted and mpirun) and openmpi-common (Open MPI's help files): apt-get install "
             "openmpi-bin openmpi-common; or start the job with mpirun.";
  } else if (s.output.find("You were supposed to get help about") != std::string::npos) {
    missing = "Open MPI's help files are missing";
    remedy = "Install openmpi-common (apt-get install openmpi-common).";
  } else {
    remedy = "Read MPI's message above; start the job with mpirun, or use backend gloo, which needs no MPI.";
  }
  const std::string excerpt = mpiOutputExcerpt(s.output);
  std::string msg = fmt::format("MPI could not start in a child started as a rank without mpirun ({}{}; it {}){}",
                                p.path, missing.empty() ? "" : ": " + missing, s.error,
                                excerpt.empty() ? "" : ". MPI said: " + excerpt);
  if (needed) {
    return fail(msg + ". The job uses backend mpi, so every rank would stop at start", remedy, data);
  }
  return warn(msg + ". `--backend mpi` (dsbench, dsrun) would stop at start here; the job's backend is not mpi",
              remedy, data);
}

Finding worldMatch(Context& c) {
  struct Set {
    const char* name;
    const char* size;
    const char* localSize;
  };
  static const Set kSets[] = {{"Open MPI", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                              {"PMI (MPICH/Hydra, or srun --mpi=pmi2)", "PMI_SIZE", "MPI_LOCALNRANKS"},
                              {"MVAPICH", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"}};
  const Set* s = nullptr;
  for (const auto& k : kSets) {
    if (c.get(k.size)) {
      s = &k;
      break;
    }
  }
  bool wantsMpi = c.jobBackend() == "mpi";
  if (s == nullptr) {
    if (wantsMpi) {
      return fail("The job's backend is mpi but no MPI launcher started this process: MPI_Init makes a world of 1 and "
                  "the world check fails",
                  "Start the job with mpirun (backend mpi needs it), or use backend gloo under dsrun/torchrun.");
    }
    return skip("No MPI launcher variables");
  }
  auto mpiSize = parseInteger(*c.get(s->size));
  Json data{{"launcher", s->name}, {"mpi_size_var", s->size}, {"mpi_size", *c.get(s->size)}};
  if (!mpiSize || *mpiSize < 1) {
    return fail(fmt::format("{}={} is not a positive integer", s->size, quoteValue(*c.get(s->size))),
                "This variable is set by mpirun itself; do not export it by hand.", data);
  }
  if (c.get("TORCHELASTIC_RUN_ID")) {
    return pass(fmt::format("{} world of {} launches per-node agents (dsrun/torchrun); their workers' env:// world is "
                            "what counts",
                            s->name, *mpiSize),
                data);
  }
  std::vector<std::string> diffs;
  if (auto ws = c.get("WORLD_SIZE")) {
    auto w = parseInteger(*ws);
    if (!w || *w != *mpiSize) diffs.push_back(fmt::format("WORLD_SIZE={} vs {}={}", quoteValue(*ws), s->size, *mpiSize));
  }
  if (auto ls = c.get("LOCAL_WORLD_SIZE"); ls && s->localSize && c.get(s->localSize)) {
    if (parseInteger(*ls) != parseInteger(*c.get(s->localSize))) {
      diffs.push_back(fmt::format("LOCAL_WORLD_SIZE={} vs {}={}", quoteValue(*ls), s->localSize,
                                  quoteValue(*c.get(s->localSize))));
    }
  }
  if (!diffs.empty()) {
    return fail(fmt::format("The {} world differs from env://: {}. The store waits for one world, MPI runs another; the "
                            "job hangs at rendezvous or the mpi backend refuses the world",
                            s->name, join(diffs, "; ")),
                "Do not export WORLD_SIZE/LOCAL_WORLD_SIZE under mpirun; let discovery read them from MPI.", data);
  }
  return pass(fmt::format("{} world of {} matches env://", s->name, *mpiSize), data);
}

}  // namespace

std::vector<CheckDef> mpiChecks() {
  return {
      {"mpi.launcher", "mpi", "Which launcher started this process", launcher},
      {"mpi.version", "mpi", "MPI library version (dlopen), matching the launcher", mpiVersion},
      {"mpi.start", "mpi", "MPI starts here as a rank without mpirun starts it (Open MPI's singleton)", mpiStart},
      {"mpi.world_match", "mpi", "The MPI launcher's world against env:// and the backend", worldMatch},
  };
}

}  // namespace ds::diag
