// Family "system": the node's limits and layout (REFERENCE.md §7.7, §7.11): /dev/shm, ulimits, CPU
// affinity, NUMA/PCI topology (hwloc), host identity.
#include <dirent.h>
#include <hwloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "diag/check.h"
#include "diag/checks/affinity.h"
#include "diag/util.h"
#include "engine/common/error.h"
#include "engine/common/ranges.h"
#include "engine/host/net.h"
#include "engine/host/resources.h"
#include "reports/schema/placement.h"

namespace ds::diag {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Finding shmSize(Context& c) {
  const std::string& path = c.paths().shm;
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) {
    return fail(
        fmt::format("{} is missing or unusable ({}): NCCL and Gloo's shared-memory transports cannot create "
                    "segments (\"unhandled system error\")",
                    path, ds::errnoText(errno)),
        "Mount a tmpfs at /dev/shm (docker: --shm-size=8g or --ipc=host).");
  }
  double total = static_cast<double>(st.f_blocks) * st.f_frsize;
  double avail = static_cast<double>(st.f_bavail) * st.f_frsize;
  Json data{{"path", path}, {"size_bytes", total}, {"available_bytes", avail}};
  std::string what = fmt::format("{} is {} ({} free)", path, humanBytes(total), humanBytes(avail));
  if (total < 64 * kMiB) {
    return fail(
        what +
            ": below 64 MiB, NCCL's shared-memory segments do not fit and init fails with \"unhandled "
            "system error\"",
        "Enlarge it: docker run --shm-size=8g (or --ipc=host); Kubernetes: an emptyDir with medium Memory "
        "mounted at /dev/shm.",
        data);
  }
  if (total < 512 * kMiB) {
    return warn(
        what +
            ": below 512 MiB (a container default); NCCL's intra-node transport can run out with several "
            "GPUs or large buffers",
        "Enlarge it to several GiB: docker --shm-size=8g or --ipc=host.", data);
  }
  return pass(what, data);
}

std::string limitText(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : std::to_string(v); }

Finding ulimits(Context& c) {
  rlimit mem{}, files{};
  getrlimit(RLIMIT_MEMLOCK, &mem);
  getrlimit(RLIMIT_NOFILE, &files);
  Json data{{"memlock_soft", limitText(mem.rlim_cur)},
            {"memlock_hard", limitText(mem.rlim_max)},
            {"nofile_soft", limitText(files.rlim_cur)},
            {"nofile_hard", limitText(files.rlim_max)}};
  int n = c.worldSize();
  std::vector<std::string> problems;
  bool fatal = false;
  // The store server on rank 0 holds a socket per rank, Gloo a few per peer.
  rlim_t needFiles = static_cast<rlim_t>(n) * 4 + 64;
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < needFiles) {
    problems.push_back(
        fmt::format("nofile={} is below ~{} needed for {} rank(s) (a socket per rank at the store, "
                    "several per peer in Gloo): accept() fails with EMFILE",
                    files.rlim_cur, needFiles, n));
    fatal = true;
  } else if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < 4096) {
    problems.push_back(
        fmt::format("nofile={} is low for a training job (data loaders and sockets)", files.rlim_cur));
  }
  // memlock matters for RDMA only: judge it where an InfiniBand/RoCE device exists.
  bool rdma = false;
  if (DIR* d = opendir((c.paths().sysfs + "/class/infiniband").c_str())) {
    while (dirent* e = readdir(d)) rdma = rdma || e->d_name[0] != '.';
    closedir(d);
  }
  data["rdma_devices"] = rdma;
  if (rdma && mem.rlim_cur != RLIM_INFINITY && mem.rlim_cur < 64ull * 1024 * 1024) {
    problems.push_back(
        fmt::format("memlock={} KiB: RDMA (InfiniBand/RoCE) memory registration fails or falls back to "
                    "slower paths",
                    mem.rlim_cur / 1024));
  }
  std::string summary =
      fmt::format("memlock {}, nofile {} (soft)", limitText(mem.rlim_cur), limitText(files.rlim_cur));
  if (problems.empty()) return pass(summary, data);
  std::string msg = summary + ": " + join(problems, "; ");
  std::string remedy =
      "Raise the limits in /etc/security/limits.conf (memlock unlimited, nofile 1048576), the "
      "container (--ulimit memlock=-1 --ulimit nofile=1048576) or the Slurm/systemd unit.";
  return fatal ? fail(msg, remedy, data) : warn(msg, remedy, data);
}

Finding cpuAffinity(Context& c) {
  std::vector<int> cpus = sys::affinityCpus();
  int allowed = cpus.empty() ? -1 : static_cast<int>(cpus.size());
  int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  int local = c.localWorldSize();
  if (cpus.size() > 1024) cpus.resize(1024);
  Json data{{"online", online}, {"allowed", allowed}, {"local_world_size", local}, {"cpus", cpus}};
  std::string summary = fmt::format("{} CPU(s) online, {} allowed to this process, {} rank(s) on this node",
                                    online, allowed, local);
  if (allowed > 0 && allowed < local) {
    return warn(summary +
                    ": fewer CPUs than ranks; waiting ranks that busy-poll (MPI, NCCL proxies) steal each "
                    "other's cores, and small messages get 100-1000x slower",
                "Start at most one rank per allowed CPU, or bind ranks to disjoint cores (--cpu-bind / "
                "numactl); Open "
                "MPI needs --oversubscribe and then yields when idle.",
                data);
  }
  if (allowed > 0 && online > 0 && allowed < online && local > 1) {
    return pass(
        summary + " (restricted by affinity/cgroup: check that ranks do not all share the same few cores)",
        data);
  }
  return pass(summary, data);
}

// The cgroup's CPU bandwidth limit against the ranks that share it. Below one CPU per rank the kernel
// stops the ranks for the rest of every period once they used their share: a collective waits up to a
// period (100 ms by default) for them, again and again, and NCCL's proxy threads starve.
Finding cpuQuota(Context& c) {
  const sys::CgroupCpu q = sys::readCgroupCpu(c.paths().procfs, c.paths().sysfs);
  const int local = c.localWorldSize();
  const std::vector<int> cpus = sys::affinityCpus();
  Json data{{"quota_cpus", q.quotaCpus < 0 ? Json() : Json(q.quotaCpus)},
            {"file", q.file},
            {"text", q.text},
            {"periods", q.periods},
            {"throttled_periods", q.throttled},
            {"throttled_s", q.throttledS < 0 ? Json() : Json(q.throttledS)},
            {"affinity_cpus", static_cast<int>(cpus.size())},
            {"local_world_size", local}};
  if (q.quotaCpus < 0)
    return pass("No cgroup CPU limit on this process (cpu.max / cfs_quota_us unset)", data);
  const double perRank = q.quotaCpus / local;
  std::string summary =
      fmt::format("{}; {} rank(s) on this node share it: {:.2g} CPU per rank", q.describe(), local, perRank);
  const std::string remedy = fmt::format(
      "Give the job at least one CPU per rank, two with NCCL's proxy threads (raise the container's --cpus, "
      "the pod's CPU limit, or Slurm's CPUQuota), or remove the limit in {}.",
      q.file);
  if (perRank < 0.5) {
    return fail(
        summary +
            ": the kernel stops this node's ranks for most of every period, so every collective waits "
            "for them and the whole job runs at this node's pace",
        remedy, data);
  }
  const double throttledShare = q.periods > 0 && q.throttled >= 0
                                    ? static_cast<double>(q.throttled) / static_cast<double>(q.periods)
                                    : 0;
  if (perRank < 1 || (throttledShare >= 0.05 && q.quotaCpus < static_cast<double>(cpus.size()))) {
    return warn(
        summary + (perRank < 1 ? ": less than one CPU per rank; ranks are throttled whenever they all run"
                               : ": the limit is already being hit; ranks stall when it throttles them"),
        remedy, data);
  }
  return pass(summary, data);
}

// OPENBLAS_NUM_THREADS wins over OMP_NUM_THREADS in OpenBLAS; garbage reads as unset (env.omp_num_threads
// reports it).
AffinityFacts liveAffinityFacts(Context& c) {
  AffinityFacts f;
  f.cpus = sys::affinityCpus();
  f.onlineCpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    auto v = c.get(var);
    if (!v || v->empty() || v->size() > 4 || v->find_first_not_of("0123456789") != std::string::npos)
      continue;
    int n = std::stoi(*v);
    if (n < 1) continue;
    f.blasThreads = n;
    f.blasFrom = fmt::format("{}={}", var, *v);
    break;
  }
  if (c.get("OMPI_COMM_WORLD_SIZE"))
    f.launcher = "mpirun";
  else if (c.get("SLURM_PROCID") || c.get("SLURM_STEP_ID"))
    f.launcher = "srun";
  return f;
}

// The runner names the rank; identical findings of several ranks then merge into one line.
Finding threadAffinity(Context& c) { return judgeThreadAffinity(liveAffinityFacts(c)); }

}  // namespace

Finding judgeThreadAffinity(const AffinityFacts& f) {
  const int mask = static_cast<int>(f.cpus.size());
  const int busy = std::max(1, f.blasThreads) + 1;
  const std::string cpus = formatRanges(f.cpus);
  Json data{{"cpus", cpus},
            {"cpu_count", mask},
            {"online_cpus", f.onlineCpus},
            {"blas_threads", f.blasThreads},
            {"busy_threads", busy},
            {"launcher", f.launcher}};
  std::string blas = f.blasFrom.empty()
                         ? "1 BLAS thread (OMP_NUM_THREADS unset: counted as 1)"
                         : fmt::format("{} BLAS/OMP thread(s) ({})", f.blasThreads, f.blasFrom);
  std::string threads = fmt::format(
      "the caller with {}, the process group's worker, and its heartbeat (asleep "
      "between beats)",
      blas);
  if (mask == 0) return skip("The CPU affinity mask could not be read (sched_getaffinity failed)", data);
  if (mask >= busy) {
    return pass(fmt::format("Affinity cpus {} ({} of {} online) fits the {} busy thread(s): {}", cpus, mask,
                            f.onlineCpus, busy, threads),
                data);
  }
  std::string remedy;
  if (f.launcher == "mpirun") {
    remedy = fmt::format(
        "Open MPI binds each rank to one core by default (up to 2 ranks per node). Start the job with "
        "'mpirun --bind-to none "
        "...', or give each rank {} cores with 'mpirun --map-by slot:PE={} --bind-to core ...'.",
        busy, busy);
  } else if (f.launcher == "srun") {
    remedy = fmt::format(
        "Give each task {} CPUs: 'srun --cpus-per-task={} ...' (or --cpu-bind=none to leave the ranks "
        "unbound).",
        busy, busy);
  } else {
    remedy = fmt::format(
        "Widen the mask to {} CPUs per rank (taskset -c, numactl --physcpubind, or the launcher's "
        "binding: mpirun --bind-to none or --map-by slot:PE={}; srun --cpus-per-task={}), or lower "
        "OMP_NUM_THREADS.",
        busy, busy, busy);
  }
  return warn(
      fmt::format("The affinity mask is cpus {} ({} of {} online), narrower than the {} busy thread(s) "
                  "this rank runs: {}. They take turns on {}: a small allreduce that takes about 1 us "
                  "unbound took 34-44 us with each rank bound to one core",
                  cpus, mask, f.onlineCpus, busy, threads, mask == 1 ? "that core" : "those cores"),
      remedy, data);
}

namespace {

Finding topology(Context& c) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return warn("hwloc could not initialise", "Check libhwloc.");
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Not the components that start other stacks to name OS devices this check does not use: gl connects
  // to X displays, opencl starts the OpenCL loader (on NVIDIA, the CUDA driver), cuda makes a CUDA
  // context on every GPU (their memory, at pre-flight). PCI, sysfs and NVML are enough here. (Under
  // LeakSanitizer, X11's and OpenCL's thread-local storage also crashed its leak scan at exit.)
  for (const char* name : {"gl", "opencl", "cuda"})
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, name);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return warn("hwloc could not load the topology", "Check that /sys is mounted.");
  }
  int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  Json gpus = Json::array(), nics = Json::array();
  std::vector<std::string> parts;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    unsigned cls = pci->attr->pcidev.class_id;
    bool isGpu = pci->attr->pcidev.vendor_id == 0x10de && (cls >> 8) == 0x03;
    bool isNic = (cls >> 8) == 0x02;
    if (!isGpu && !isNic) continue;
    std::string bus = fmt::format("{:04x}:{:02x}:{:02x}.{:01x}", pci->attr->pcidev.domain,
                                  pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    std::vector<std::string> names;
    for (hwloc_obj_t io = pci->io_first_child; io != nullptr; io = io->next_sibling) {
      if (io->type == HWLOC_OBJ_OS_DEVICE && io->name != nullptr) names.emplace_back(io->name);
    }
    int node = -1;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
    if (anc != nullptr && anc->nodeset != nullptr) node = hwloc_bitmap_first(anc->nodeset);
    Json d{{"bus_id", bus}, {"numa_node", node}, {"os_devices", names}};
    (isGpu ? gpus : nics).push_back(d);
    parts.push_back(
        fmt::format("{} {} on NUMA {}", isGpu ? "GPU" : "NIC", names.empty() ? bus : join(names, "/"), node));
  }
  hwloc_topology_destroy(topo);
  Json data{{"numa_nodes", numa}, {"packages", packages}, {"cores", cores},
            {"pus", pus},         {"gpus", gpus},         {"nics", nics}};
  std::string summary =
      fmt::format("{} package(s), {} NUMA node(s), {} core(s), {} PU(s)", packages, numa, cores, pus);
  if (parts.empty())
    return pass(summary + "; no GPU/NIC PCI devices visible to hwloc (VM or container)", data);
  return pass(summary + "; " + join(parts, ", "), data);
}

Finding hostIdentity(Context& c) {
  const std::string host = net::hostName();
  std::string bootId = trim(readTextFile(c.paths().procfs + "/sys/kernel/random/boot_id").value_or(""));
  Json data{{"hostname", host}, {"boot_id", bootId}};
  if (bootId.empty()) return pass(fmt::format("host {} (boot id not readable)", host), data);
  return pass(fmt::format("host {}, boot id {}", host, bootId), data);
}

}  // namespace

std::vector<CheckDef> systemChecks() {
  return {
      {"system.shm_size", "system", "/dev/shm size (< 512 MiB warn, < 64 MiB fail)", shmSize},
      {"system.ulimits", "system", "memlock and nofile ulimits", ulimits},
      {"system.cpu_affinity", "system", "CPU count and affinity against ranks per node", cpuAffinity},
      {"system.cpu_quota", "system",
       "The cgroup CPU limit (cpu.max, cfs_quota_us) against ranks per node (< 0.5 CPU per rank fail, < 1 "
       "warn)",
       cpuQuota},
      {"system.thread_affinity", "system",
       "The affinity mask is as wide as the threads a rank runs (caller + BLAS threads + the process group's "
       "worker)",
       threadAffinity},
      {"system.topology", "system", "NUMA and PCI topology (hwloc): which NUMA node each GPU and NIC sits on",
       topology},
      {"system.host_identity", "system", "Hostname and boot id", hostIdentity},
  };
}

}  // namespace ds::diag
