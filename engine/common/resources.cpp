#include "engine/common/resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"

namespace ds::sys {

namespace {

// A number in a cgroup file; "max" (v2) or a v1 value near 2^63 (no limit) reads as -1.
long long readCgroupValue(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  try {
    long long v = std::stoll(text);
    return v >= (1LL << 60) ? -1 : v;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

long long MemoryInfo::available() const {
  long long a = memAvailable;
  if (cgroupLimit >= 0) {
    long long left = std::max(0LL, cgroupLimit - std::max(0LL, cgroupUsage));
    a = a < 0 ? left : std::min(a, left);
  }
  return a;
}

std::string MemoryInfo::describe() const {
  std::string parts;
  if (memAvailable >= 0) parts = "MemAvailable " + bytesText(static_cast<double>(memAvailable));
  if (cgroupLimit >= 0) {
    parts += fmt::format("{}cgroup limit {}", parts.empty() ? "" : "; ",
                         bytesText(static_cast<double>(cgroupLimit)));
    if (cgroupUsage >= 0) parts += fmt::format(", {} used", bytesText(static_cast<double>(cgroupUsage)));
  }
  return fmt::format("{} available ({})", bytesText(static_cast<double>(available())), parts);
}

MemoryInfo readMemoryInfo() {
  MemoryInfo info;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long long kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      info.memAvailable = kib * 1024;
      break;
    }
  }
  // cgroup v2: "0::/path"; v1: "N:memory:/path" (or "N:...,memory,...:/path").
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  std::string v2Path, v1Path;
  bool v1 = false;
  while (std::getline(self, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) v2Path = path;
    std::stringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) {
      if (c == "memory") {
        v1 = true;
        v1Path = path;
      }
    }
  }
  if (v1) {
    const std::string base = "/sys/fs/cgroup/memory" + (v1Path == "/" ? std::string() : v1Path);
    info.cgroupLimit = readCgroupValue(base + "/memory.limit_in_bytes");
    if (info.cgroupLimit >= 0) info.cgroupUsage = readCgroupValue(base + "/memory.usage_in_bytes");
  } else if (!v2Path.empty()) {
    // The limit that binds may sit on an ancestor; walk up to the root and keep the tightest.
    for (std::string p = v2Path;;) {
      const std::string base = "/sys/fs/cgroup" + (p == "/" ? std::string() : p);
      long long limit = readCgroupValue(base + "/memory.max");
      if (limit >= 0) {
        long long usage = readCgroupValue(base + "/memory.current");
        long long left = limit - std::max(0LL, usage);
        if (info.cgroupLimit < 0 || left < info.cgroupLimit - std::max(0LL, info.cgroupUsage)) {
          info.cgroupLimit = limit;
          info.cgroupUsage = usage;
        }
      }
      if (p == "/" || p.empty()) break;
      auto slash = p.find_last_of('/');
      p = slash == 0 ? "/" : p.substr(0, slash);
    }
  }
  return info;
}

void checkMemory(double bytes, const MemoryInfo& info, const std::string& what, const std::string& remedy) {
  const long long avail = info.available();
  if (avail < 0 || bytes <= static_cast<double>(avail)) return;
  throw ConfigError(fmt::format("{} needs about {} of memory, but this node has {}. {}", what,
                                bytesText(bytes), info.describe(), remedy));
}

int launcherLocalRanks() {
  for (const char* name :
       {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n > 0 && n < 1000000) return static_cast<int>(n);
  }
  return 1;
}

std::string bytesText(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  return bytes >= 100 ? fmt::format("{:.0f} {}", bytes, kUnits[u])
                      : fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

}  // namespace ds::sys
