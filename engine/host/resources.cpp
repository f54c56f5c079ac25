#include "engine/host/resources.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

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

// Which cgroup this process is in (<procfs>/self/cgroup): the v2 path ("0::/path") and, per v1
// controller, its path ("N:cpu,cpuacct:/path"). Paths are "" for the root, else "/a/b".
struct CgroupMembership {
  std::string v2;
  bool inV2 = false;
  std::map<std::string, std::string> v1;
};

std::string normalisePath(const std::string& p) { return p == "/" ? std::string() : p; }

CgroupMembership readSelfCgroup(const std::string& procfs) {
  CgroupMembership m;
  std::ifstream self(procfs + "/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = normalisePath(line.substr(b + 1));
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      m.v2 = path;
      m.inV2 = true;
    }
    std::stringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) m.v1[c] = path;
  }
  if (m.inV2 && m.v2.empty()) m.v2 = "/";
  return m;
}

// Calls f with the cgroup path and each ancestor's, up to the root (""): a limit anywhere above binds.
template <typename F>
void forEachAncestor(std::string p, F f) {
  if (p == "/") p.clear();
  for (;;) {
    f(p);
    if (p.empty()) break;
    auto slash = p.find_last_of('/');
    p = slash == std::string::npos || slash == 0 ? std::string() : p.substr(0, slash);
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
  const CgroupMembership self = readSelfCgroup("/proc");
  if (auto v1 = self.v1.find("memory"); v1 != self.v1.end()) {
    const std::string base = "/sys/fs/cgroup/memory" + (v1->second == "/" ? std::string() : v1->second);
    info.cgroupLimit = readCgroupValue(base + "/memory.limit_in_bytes");
    if (info.cgroupLimit >= 0) info.cgroupUsage = readCgroupValue(base + "/memory.usage_in_bytes");
  } else if (!self.v2.empty()) {
    // The limit that binds may sit on an ancestor; walk up to the root and keep the tightest.
    forEachAncestor(self.v2, [&](const std::string& p) {
      const std::string base = "/sys/fs/cgroup" + p;
      long long limit = readCgroupValue(base + "/memory.max");
      if (limit >= 0) {
        long long usage = readCgroupValue(base + "/memory.current");
        long long left = limit - std::max(0LL, usage);
        if (info.cgroupLimit < 0 || left < info.cgroupLimit - std::max(0LL, info.cgroupUsage)) {
          info.cgroupLimit = limit;
          info.cgroupUsage = usage;
        }
      }
    });
  }
  return info;
}

namespace {

bool isFile(const std::string& path) { return std::ifstream(path).good(); }

// cpu.stat's "key value" lines.
std::map<std::string, long long> readStat(const std::string& path) {
  std::map<std::string, long long> out;
  std::ifstream in(path);
  std::string k;
  long long v = 0;
  while (in >> k >> v) out[k] = v;
  return out;
}

}  // namespace

CgroupCpu readCgroupCpu(const std::string& procfs, const std::string& sysfs) {
  CgroupCpu out;
  const CgroupMembership self = readSelfCgroup(procfs);
  const std::string root = sysfs + "/fs/cgroup";
  auto keep = [&](double cpus, const std::string& file, const std::string& text, const std::string& statFile,
                  double throttledUnitS) {
    if (out.quotaCpus >= 0 && cpus >= out.quotaCpus) return;
    out.quotaCpus = cpus;
    out.file = file;
    out.text = text;
    auto stat = readStat(statFile);
    out.periods = stat.count("nr_periods") ? stat["nr_periods"] : -1;
    out.throttled = stat.count("nr_throttled") ? stat["nr_throttled"] : -1;
    const char* timeKey = throttledUnitS < 1e-6 ? "throttled_time" : "throttled_usec";
    out.throttledS = stat.count(timeKey) ? static_cast<double>(stat[timeKey]) * throttledUnitS : -1;
  };
  auto v1 = self.v1.find("cpu");
  if (v1 != self.v1.end()) {
    // v1 mounts the cpu controller alone or together with cpuacct.
    for (const char* mount : {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"}) {
      const std::string dir = root + mount;
      if (!isFile(dir + "/cpu.cfs_quota_us")) continue;
      forEachAncestor(v1->second, [&](const std::string& p) {
        const std::string base = dir + p;
        long long quota = readCgroupValue(base + "/cpu.cfs_quota_us");  // -1: no limit
        long long period = readCgroupValue(base + "/cpu.cfs_period_us");
        if (quota > 0 && period > 0) {
          keep(static_cast<double>(quota) / static_cast<double>(period), base + "/cpu.cfs_quota_us",
               fmt::format("{} per {} us", quota, period), base + "/cpu.stat", 1e-9);
        }
      });
      break;
    }
  } else if (!self.v2.empty() && isFile(root + "/cgroup.controllers")) {
    forEachAncestor(self.v2, [&](const std::string& p) {
      const std::string base = root + p;
      std::ifstream in(base + "/cpu.max");
      std::string quota;
      long long period = 0;
      if (!(in >> quota >> period) || quota == "max" || period <= 0) return;
      try {
        long long q = std::stoll(quota);
        if (q > 0) {
          keep(static_cast<double>(q) / static_cast<double>(period), base + "/cpu.max",
               fmt::format("{} {}", q, period), base + "/cpu.stat", 1e-6);
        }
      } catch (const std::exception&) {
        // Not a number: treated as no limit, as the kernel would not have written it.
      }
    });
  }
  return out;
}

std::string CgroupCpu::describe() const {
  if (quotaCpus < 0) return "no cgroup CPU limit";
  std::string s = fmt::format("cgroup CPU limit {:.3g} CPU ({}: {})", quotaCpus, file, text);
  if (throttled >= 0 && periods > 0) {
    s += fmt::format(", throttled in {} of {} periods", throttled, periods);
    if (throttledS >= 0) s += fmt::format(" ({:.1f} s stopped)", throttledS);
  }
  return s;
}

std::vector<int> affinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.push_back(i);
  }
  return out;
}

int affinityCpuCount() {
  const std::size_t n = affinityCpus().size();
  return n > 0 ? static_cast<int>(n) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
