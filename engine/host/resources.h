// What this machine has, read before a tool allocates a lot (DESIGN.md: bounded resources), so that a
// large request is refused with a sentence instead of an OOM kill or "std::bad_alloc".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ds::sys {

struct MemoryInfo {
  long long memAvailable = -1;  // /proc/meminfo MemAvailable in bytes; -1 = unknown
  long long cgroupLimit =
      -1;  // this process's cgroup memory limit (v2 memory.max, v1 limit_in_bytes); -1 = none
  long long cgroupUsage = -1;  // and what the cgroup uses now; -1 = unknown
  // The bytes a new allocation can take: MemAvailable, or less when the cgroup leaves less. -1 = unknown.
  long long available() const;
  // "21.3 GiB available (MemAvailable 21.3 GiB; cgroup limit 8 GiB, 1.2 GiB used)".
  std::string describe() const;
};

// Reads /proc/meminfo and the cgroup of this process (v2, else v1). Never throws.
MemoryInfo readMemoryInfo();

// Throws ConfigError when `bytes` is more than `info` says is available:
// "<what> needs about <bytes>, but <available> ... <remedy>". Passes when nothing is known.
void checkMemory(double bytes, const MemoryInfo& info, const std::string& what, const std::string& remedy);

// This process's cgroup CPU bandwidth limit (v2 cpu.max, v1 cpu.cfs_quota_us/cpu.cfs_period_us): the
// tightest one on the way from its cgroup to the root, with that cgroup's throttling counters. A
// container's "--cpus 0.5", a Kubernetes CPU limit or a Slurm/systemd CPUQuota all land here; a rank
// under a limit is stopped for the rest of every period once it has used its share, so a collective
// stalls on it for up to a period (100 ms by default) at a time.
struct CgroupCpu {
  double quotaCpus = -1;     // quota / period, in CPUs; -1 = no limit (or none readable)
  std::string file;          // the file that sets it: "/sys/fs/cgroup/a/b/cpu.max"
  std::string text;          // what it says: "5000 100000"
  long long periods = -1;    // cpu.stat nr_periods of that cgroup; -1 = unknown
  long long throttled = -1;  // cpu.stat nr_throttled: periods in which it was stopped
  double throttledS = -1;    // time stopped (v2 throttled_usec, v1 throttled_time in ns), seconds
  // "cgroup limit 0.05 CPU (/sys/fs/cgroup/x/cpu.max: 5000 100000), throttled in 120 of 300 periods"
  std::string describe() const;
};

// Reads <procfs>/self/cgroup and the cgroup files under <sysfs>/fs/cgroup (v2 unified, else v1's cpu
// hierarchy). The roots let tests read a fake tree (dsdiag's DSDIAG_PROCFS and DSDIAG_SYSFS). Never throws.
CgroupCpu readCgroupCpu(const std::string& procfs = "/proc", const std::string& sysfs = "/sys");

// The CPUs of this process's affinity mask (sched_getaffinity), ascending; empty when unreadable.
std::vector<int> affinityCpus();
// How many CPUs this process may run on: the affinity mask's count, else the hardware's; at least 1.
int affinityCpuCount();

// The ranks the launcher put on this node, read from its variables (LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, MV2_COMM_WORLD_LOCAL_SIZE) so that a preflight can run
// before any rendezvous; 1 when none is set or readable (discovery reports bad values later).
int launcherLocalRanks();

// "1.5 GiB", "512 MiB", "8 KiB", "100 B": binary units, one decimal where it helps.
std::string bytesText(double bytes);

}  // namespace ds::sys
