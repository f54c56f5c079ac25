#include "bench/metadata.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "engine/common/ranges.h"
#include "engine/common/version.h"
#include "engine/host/resources.h"

#if DS_WITH_MPI
#include <mpi.h>
#endif
#if DS_WITH_GLOO && __has_include(<gloo/config.h>)
#include <gloo/config.h>
#define DS_HAVE_GLOO_CONFIG 1
#endif
#if DS_WITH_NCCL
#include "engine/comm/backends/nccl/nccl_version.h"
// Defined by the nccl backend's object library, which only some binaries link (dsbench does, the
// tests of this module do not): a weak reference is null where it is absent.
namespace ds::comm {
NcclVersions ncclVersions(bool load) __attribute__((weak));
}
#endif

extern char** environ;

namespace ds::bench::coll {

std::map<std::string, std::string> libraryVersions(bool withNccl) {
  std::map<std::string, std::string> v;
  v["dsperf"] = ds::version();
  v["git_sha"] = ds::gitCommit();
#if DS_WITH_NCCL
  if (&ds::comm::ncclVersions != nullptr) {
    auto n = ds::comm::ncclVersions(withNccl);
    v["nccl_header"] = n.header.str();
    if (n.loaded || !n.runtimeError.empty())
      v["nccl"] = n.runtimeError.empty() ? n.runtime.str() : "unavailable: " + n.runtimeError;
  }
#endif
#if DS_WITH_MPI
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
    std::string s(lib, static_cast<std::size_t>(len));
    // "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: ..., May 26, 2022"
    v["open_mpi"] = s.substr(0, s.find(','));
  }
#endif
#ifdef DS_HAVE_GLOO_CONFIG
  v["gloo"] = fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
#endif
  return v;
}

std::map<std::string, std::string> relevantEnv() {
  static const char* kPrefixes[] = {"DS_",         "DSBENCH_",     "DEEPSPEED_",           "NCCL_",
                                    "OMPI_",       "GLOO_",        "TORCHELASTIC_RUN_ID",  "MASTER_ADDR",
                                    "MASTER_PORT", "SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
                                    "MALLOC_"};
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    for (const char* p : kPrefixes) {
      if (k.rfind(p, 0) == 0) {
        out[k] = kv.substr(eq + 1);
        break;
      }
    }
  }
  return out;
}

std::string launcherName() {
  if (std::getenv("TORCHELASTIC_RUN_ID")) return "dsrun/torchrun";
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) return "mpirun (Open MPI)";
  if (std::getenv("PMI_RANK")) return "mpirun (Hydra)";
  if (std::getenv("SLURM_PROCID")) return "srun";
  return "none";
}

std::string commandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string raw = ss.str(), out, arg;
  auto flush = [&] {
    if (!out.empty()) out += ' ';
    out += arg.find_first_of(" \t'\"") == std::string::npos && !arg.empty() ? arg : "'" + arg + "'";
    arg.clear();
  };
  for (char c : raw) {
    if (c == '\0')
      flush();
    else
      arg += c;
  }
  if (!arg.empty()) flush();
  return out;
}

report::Placement currentPlacement() {
  report::Placement p;
  if (const std::vector<int> cpus = sys::affinityCpus(); !cpus.empty()) {
    p.cpus = formatRanges(cpus);
    p.cpuCount = static_cast<int>(cpus.size());
  }
  p.onlineCpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream in("/proc/loadavg");
  std::string line;
  if (std::getline(in, line)) {
    if (auto l = report::parseLoadavg(line)) {
      p.load1 = l->load1;
      p.runnable = l->runnable;
    }
  }
  return p;
}

}  // namespace ds::bench::coll
