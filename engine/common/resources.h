// What this machine has, read before a tool allocates a lot (DESIGN.md: bounded resources), so that a
// large request is refused with a sentence instead of an OOM kill or "std::bad_alloc".
#pragma once

#include <cstddef>
#include <string>

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

// The ranks the launcher put on this node, read from its variables (LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, MV2_COMM_WORLD_LOCAL_SIZE) so that a preflight can run
// before any rendezvous; 1 when none is set or readable (discovery reports bad values later).
int launcherLocalRanks();

// "1.5 GiB", "512 MiB", "8 KiB", "100 B": binary units, one decimal where it helps.
std::string bytesText(double bytes);

}  // namespace ds::sys
