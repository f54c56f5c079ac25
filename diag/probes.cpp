#include "diag/probes.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "diag/util.h"
#include "engine/comm/backends/nccl/nccl_version.h"
#include "engine/common/shared_library.h"
#include "engine/host/nvml_api.h"

namespace ds::diag {
namespace {

constexpr auto kProbeTimeout = std::chrono::seconds(20);

std::string locate(const std::string& name) { return sys::locateLibrary(name); }

// dlopen of the first name that loads (engine/common/shared_library.h); `errors` gets the loader's
// reason. With `broken`, a name that exists but does not load (empty, wrong ELF class, an unresolved
// symbol or dependency) ends the search with `broken` set to it: the tools would load the same file
// and fail, so a fallback that loads must not pass for it.
void* openFirst(const std::vector<std::string>& names, std::string& used, std::string& errors,
                std::string* broken = nullptr) {
  sys::OpenedLibrary o = sys::openFirstLibrary(names, /*stopAtBroken=*/broken != nullptr);
  used = o.used;
  errors = o.error;
  if (broken != nullptr && !o.broken.empty()) *broken = o.broken;
  return o.handle;
}

template <typename F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

std::string cuError(void* h, int rc) {
  using GetName = int (*)(int, const char**);
  const char* text = nullptr;
  if (auto f = sym<GetName>(h, "cuGetErrorName"); f != nullptr) f(rc, &text);
  return text != nullptr ? fmt::format("{} ({})", text, rc) : fmt::format("CUresult {}", rc);
}

Json probeCudaChild(const LibraryNames& libs) {
  Json j = Json::object();
  std::string used, errors;
  void* h = openFirst(libs.cuda, used, errors);
  j["loaded"] = h != nullptr;
  j["path"] = used;
  if (h == nullptr) {
    j["error"] = errors;
  } else {
    using IntFn = int (*)(int*);
    using InitFn = int (*)(unsigned);
    using GetFn = int (*)(int*, int);
    using NameFn = int (*)(char*, int, int);
    using MemFn = int (*)(std::size_t*, int);
    using UuidFn = int (*)(unsigned char*, int);
    if (auto f = sym<IntFn>(h, "cuDriverGetVersion"); f != nullptr) {
      int v = 0;
      if (f(&v) == 0) j["driver_version"] = v;
    }
    auto init = sym<InitFn>(h, "cuInit");
    if (init == nullptr) {
      j["error"] = fmt::format("{} has no cuInit: it is not a CUDA driver library", used);
    } else {
      int rc = init(0);
      j["init_result"] = rc;
      if (rc != 0) {
        j["error"] = fmt::format("cuInit failed: {}", cuError(h, rc));
      } else {
        int count = 0;
        if (auto f = sym<IntFn>(h, "cuDeviceGetCount"); f != nullptr) f(&count);
        Json devs = Json::array();
        auto get = sym<GetFn>(h, "cuDeviceGet");
        auto name = sym<NameFn>(h, "cuDeviceGetName");
        auto mem = sym<MemFn>(h, "cuDeviceTotalMem_v2");
        auto bus = sym<NameFn>(h, "cuDeviceGetPCIBusId");
        auto uuid = sym<UuidFn>(h, "cuDeviceGetUuid_v2");
        if (uuid == nullptr) uuid = sym<UuidFn>(h, "cuDeviceGetUuid");
        for (int i = 0; i < count && get != nullptr; ++i) {
          int dev = 0;
          if (get(&dev, i) != 0) continue;
          Json d{{"index", i}};
          char buf[256] = {};
          if (name != nullptr && name(buf, sizeof buf - 1, dev) == 0) d["name"] = std::string(buf);
          std::size_t bytes = 0;
          if (mem != nullptr && mem(&bytes, dev) == 0) d["memory_bytes"] = bytes;
          char busId[64] = {};
          if (bus != nullptr && bus(busId, sizeof busId - 1, dev) == 0) d["bus_id"] = std::string(busId);
          unsigned char u[16] = {};
          if (uuid != nullptr && uuid(u, dev) == 0) {
            d["uuid"] = fmt::format(
                "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
          }
          devs.push_back(d);
        }
        j["devices"] = devs;
      }
    }
  }
  return j;
}

// NVML in its own child: it is what nvidia-smi and DCGM use, it can be missing, broken or hung on its
// own, and a crash in it must not cost the CUDA findings. Every health query is optional: a function
// the driver lacks, or NOT_SUPPORTED on this GPU, leaves its key out.
Json probeNvmlChild(const LibraryNames& libs) {
  Json j = Json::object();
  std::string used, errors;
  void* n = openFirst(libs.nvml, used, errors);
  j["loaded"] = n != nullptr;
  j["path"] = used;
  if (n == nullptr) {
    j["error"] = errors;
    return j;
  }
  using InitFn = nvmlReturn_t (*)();
  auto init = sym<InitFn>(n, "nvmlInit_v2");
  if (init == nullptr) init = sym<InitFn>(n, "nvmlInit");
  int rc = init != nullptr ? init() : -1;
  if (rc != NVML_SUCCESS) {
    j["error"] = init == nullptr ? "no nvmlInit symbol" : fmt::format("nvmlInit failed (nvmlReturn_t {})", rc);
    return j;
  }
  char text[128] = {};
  using TextFn = nvmlReturn_t (*)(char*, unsigned);
  if (auto f = sym<TextFn>(n, "nvmlSystemGetDriverVersion"); f != nullptr && f(text, sizeof text - 1) == 0) {
    j["driver_version"] = std::string(text);
  }
  using CountFn = nvmlReturn_t (*)(unsigned*);
  using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
  using DevTextFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
  using PciFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
  using UintFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
  using IntFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
  using Uint2Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
  using Int2Fn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);
  using U64Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
  using EccFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
  using RowsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
  using ProcFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  using ProcNameFn = nvmlReturn_t (*)(unsigned, char*, unsigned);
  using LinkFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*);
  auto count = sym<CountFn>(n, "nvmlDeviceGetCount_v2");
  auto handle = sym<HandleFn>(n, "nvmlDeviceGetHandleByIndex_v2");
  if (count == nullptr || handle == nullptr) {
    j["error"] = used + " has no nvmlDeviceGetCount_v2/nvmlDeviceGetHandleByIndex_v2 (a driver older than 418?)";
    return j;
  }
  auto devText = [&](const char* fn, nvmlDevice_t d) -> std::optional<std::string> {
    auto f = sym<DevTextFn>(n, fn);
    char buf[128] = {};
    if (f == nullptr || f(d, buf, sizeof buf - 1) != NVML_SUCCESS) return std::nullopt;
    return std::string(buf);
  };
  unsigned devices = 0;
  if (int c = count(&devices); c != NVML_SUCCESS) {
    j["error"] = fmt::format("nvmlDeviceGetCount_v2 failed (nvmlReturn_t {})", c);
    return j;
  }
  auto procName = sym<ProcNameFn>(n, "nvmlSystemGetProcessName");
  using AncestorFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*);
  using RemotePciFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
  using RemoteTypeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*);
  auto ancestor = sym<AncestorFn>(n, "nvmlDeviceGetTopologyCommonAncestor");
  auto remotePci = sym<RemotePciFn>(n, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  auto remoteType = sym<RemoteTypeFn>(n, "nvmlDeviceGetNvLinkRemoteDeviceType");
  std::vector<nvmlDevice_t> handles;
  std::vector<unsigned> indices;
  Json arr = Json::array();
  for (unsigned i = 0; i < devices; ++i) {
    nvmlDevice_t d = nullptr;
    Json o{{"index", i}};
    if (handle(i, &d) != NVML_SUCCESS) {
      o["error"] = "nvmlDeviceGetHandleByIndex_v2 failed";
      arr.push_back(o);
      continue;
    }
    if (auto v = devText("nvmlDeviceGetName", d)) o["name"] = *v;
    if (auto v = devText("nvmlDeviceGetUUID", d)) o["uuid"] = *v;
    nvmlPciInfo_t pci{};
    if (auto f = sym<PciFn>(n, "nvmlDeviceGetPciInfo_v3"); f != nullptr && f(d, &pci) == NVML_SUCCESS) {
      o["bus_id"] = std::string(pci.busId, strnlen(pci.busId, sizeof pci.busId));
    }
    auto u = [&](const char* fn, const char* key) {
      unsigned v = 0;
      if (auto f = sym<UintFn>(n, fn); f != nullptr && f(d, &v) == NVML_SUCCESS) o[key] = v;
    };
    int cur = 0, pend = 0;
    if (auto f = sym<Int2Fn>(n, "nvmlDeviceGetEccMode"); f != nullptr && f(d, &cur, &pend) == NVML_SUCCESS) {
      o["ecc_enabled"] = cur == NVML_FEATURE_ENABLED;
    }
    if (auto f = sym<EccFn>(n, "nvmlDeviceGetTotalEccErrors"); f != nullptr) {
      unsigned long long v = 0;
      if (f(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &v) == NVML_SUCCESS) o["ecc_volatile_uncorrected"] = v;
      if (f(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &v) == NVML_SUCCESS) o["ecc_aggregate_uncorrected"] = v;
    }
    if (auto f = sym<RowsFn>(n, "nvmlDeviceGetRemappedRows"); f != nullptr) {
      unsigned corr = 0, unc = 0, pending = 0, failed = 0;
      if (f(d, &corr, &unc, &pending, &failed) == NVML_SUCCESS) {
        o["remapped_uncorrectable"] = unc;
        o["remap_pending"] = pending != 0;
        o["remap_failure"] = failed != 0;
      }
    }
    if (auto f = sym<IntFn>(n, "nvmlDeviceGetRetiredPagesPendingStatus"); f != nullptr) {
      int pending = 0;
      if (f(d, &pending) == NVML_SUCCESS) o["retired_pages_pending"] = pending == NVML_FEATURE_ENABLED;
    }
    u("nvmlDeviceGetCurrPcieLinkGeneration", "pcie_gen");
    u("nvmlDeviceGetMaxPcieLinkGeneration", "pcie_max_gen");
    u("nvmlDeviceGetCurrPcieLinkWidth", "pcie_width");
    u("nvmlDeviceGetMaxPcieLinkWidth", "pcie_max_width");
    // Renamed in driver 535; the old name stays exported by newer drivers.
    for (const char* fn : {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}) {
      unsigned long long v = 0;
      if (auto f = sym<U64Fn>(n, fn); f != nullptr && f(d, &v) == NVML_SUCCESS) {
        o["clock_event_reasons"] = v;
        break;
      }
    }
    bool procsKnown = false;
    Json procs = Json::array();
    for (const char* fn : {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3"}) {
      auto f = sym<ProcFn>(n, fn);
      if (f == nullptr) continue;
      std::vector<nvmlProcessInfo_t> infos(64);
      unsigned cnt = static_cast<unsigned>(infos.size());
      if (f(d, &cnt, infos.data()) != NVML_SUCCESS) continue;
      procsKnown = true;
      for (unsigned k = 0; k < cnt && k < infos.size(); ++k) {
        const auto& p = infos[k];
        bool dup = std::any_of(procs.begin(), procs.end(), [&](const Json& q) { return q["pid"] == p.pid; });
        if (dup) continue;
        char pname[256] = {};
        std::string name;
        if (procName != nullptr && procName(p.pid, pname, sizeof pname - 1) == NVML_SUCCESS) name = pname;
        if (name.empty()) name = trim(readTextFile(fmt::format("/proc/{}/comm", p.pid)).value_or(""));
        procs.push_back({{"pid", p.pid},
                         {"name", name},
                         {"used_bytes", p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ? 0ULL : p.usedGpuMemory}});
      }
    }
    if (procsKnown) o["processes"] = procs;
    if (auto f = sym<IntFn>(n, "nvmlDeviceGetPersistenceMode"); f != nullptr) {
      int mode = 0;
      if (f(d, &mode) == NVML_SUCCESS) o["persistence"] = mode == NVML_FEATURE_ENABLED;
    }
    if (auto f = sym<Uint2Fn>(n, "nvmlDeviceGetMigMode"); f != nullptr) {
      unsigned mc = 0, mp = 0;
      if (f(d, &mc, &mp) == NVML_SUCCESS) {
        o["mig_current"] = mc;
        o["mig_pending"] = mp;
      }
    }
    if (auto f = sym<IntFn>(n, "nvmlDeviceGetComputeMode"); f != nullptr) {
      int mode = 0;
      if (f(d, &mode) == NVML_SUCCESS) o["compute_mode"] = mode;
    }
    if (auto f = sym<LinkFn>(n, "nvmlDeviceGetNvLinkState"); f != nullptr) {
      Json links = Json::array(), remote = Json::array();
      for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
        int active = 0;
        // NOT_SUPPORTED / INVALID_ARGUMENT: this link does not exist on this GPU.
        if (f(d, l, &active) != NVML_SUCCESS) continue;
        links.push_back({l, active == NVML_FEATURE_ENABLED ? 1 : 0});
        // Where an active link leads (gpu.topology's NV#): its far end's kind and PCI bus id.
        if (active != NVML_FEATURE_ENABLED || (remoteType == nullptr && remotePci == nullptr)) continue;
        int type = -1;
        if (remoteType != nullptr && remoteType(d, l, &type) != NVML_SUCCESS) type = -1;
        nvmlPciInfo_t far{};
        std::string farBus;
        if (remotePci != nullptr && remotePci(d, l, &far) == NVML_SUCCESS)
          farBus = std::string(far.busId, strnlen(far.busId, sizeof far.busId));
        remote.push_back({l, type, farBus});
      }
      o["nvlink"] = links;
      if (!remote.empty()) o["nvlink_remote"] = remote;
    }
    arr.push_back(o);
    handles.push_back(d);
    indices.push_back(i);
  }
  j["devices"] = arr;
  // Each GPU pair's closest common ancestor (gpu.topology): NVML's own PIX..SYS, as nvidia-smi topo -m.
  if (ancestor != nullptr) {
    Json levels = Json::array();
    for (std::size_t a = 0; a < handles.size(); ++a) {
      for (std::size_t b = a + 1; b < handles.size(); ++b) {
        nvmlGpuTopologyLevel_t level = 0;
        if (ancestor(handles[a], handles[b], &level) == NVML_SUCCESS) levels.push_back({indices[a], indices[b], level});
      }
    }
    j["topology_levels"] = levels;
  }
  Json missing = Json::array();
  if (ancestor == nullptr) missing.push_back("nvmlDeviceGetTopologyCommonAncestor");
  if (remotePci == nullptr) missing.push_back("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (remoteType == nullptr) missing.push_back("nvmlDeviceGetNvLinkRemoteDeviceType");
  j["topology_missing"] = missing;
  if (auto f = sym<InitFn>(n, "nvmlShutdown"); f != nullptr) f();
  return j;
}

template <typename T>
std::optional<T> optionalField(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

void fillNvml(GpuProbe& p, const LibraryNames& libs) {
  auto r = runIsolated([&] { return probeNvmlChild(libs); }, kProbeTimeout);
  if (!r.error.empty()) {
    p.nvmlError = fmt::format("probing {} {}", libs.nvml.empty() ? "libnvidia-ml" : libs.nvml.front(), r.error);
    p.nvmlProbeBroken = true;
    return;
  }
  const Json& j = r.value;
  p.nvmlLoaded = j.value("loaded", false);
  p.nvmlPath = j.value("path", "");
  p.nvmlError = j.value("error", "");
  p.nvmlDriverVersion = j.value("driver_version", "");
  for (const auto& o : j.value("devices", Json::array())) {
    NvmlDevice d;
    d.index = o.value("index", 0);
    d.name = o.value("name", "");
    d.busId = o.value("bus_id", "");
    d.uuid = o.value("uuid", "");
    d.eccEnabled = optionalField<bool>(o, "ecc_enabled");
    d.eccVolatileUncorrected = optionalField<std::uint64_t>(o, "ecc_volatile_uncorrected");
    d.eccAggregateUncorrected = optionalField<std::uint64_t>(o, "ecc_aggregate_uncorrected");
    d.remappedUncorrectable = optionalField<unsigned>(o, "remapped_uncorrectable");
    d.remapPending = optionalField<bool>(o, "remap_pending");
    d.remapFailure = optionalField<bool>(o, "remap_failure");
    d.retiredPagesPending = optionalField<bool>(o, "retired_pages_pending");
    d.pcieGen = optionalField<unsigned>(o, "pcie_gen");
    d.pcieMaxGen = optionalField<unsigned>(o, "pcie_max_gen");
    d.pcieWidth = optionalField<unsigned>(o, "pcie_width");
    d.pcieMaxWidth = optionalField<unsigned>(o, "pcie_max_width");
    d.clockEventReasons = optionalField<std::uint64_t>(o, "clock_event_reasons");
    if (o.contains("processes")) {
      std::vector<GpuProcess> procs;
      for (const auto& q : o["processes"]) {
        procs.push_back({q.value("pid", 0u), q.value("name", ""), q.value("used_bytes", std::uint64_t{0})});
      }
      d.processes = procs;
    }
    d.persistence = optionalField<bool>(o, "persistence");
    d.migCurrent = optionalField<unsigned>(o, "mig_current");
    d.migPending = optionalField<unsigned>(o, "mig_pending");
    d.computeMode = optionalField<int>(o, "compute_mode");
    for (const auto& link : o.value("nvlink", Json::array())) {
      d.nvlinkIds.push_back(link[0].get<int>());
      d.nvlinkActive.push_back(link[1].get<int>());
    }
    for (const auto& r : o.value("nvlink_remote", Json::array()))
      d.nvlinkRemote.push_back({r[0].get<int>(), r[1].get<int>(), r[2].get<std::string>()});
    p.nvmlDevices.push_back(d);
  }
  for (const auto& l : j.value("topology_levels", Json::array()))
    p.nvmlTopologyLevels.push_back({l[0].get<int>(), l[1].get<int>(), l[2].get<int>()});
  p.nvmlTopologyKnown = j.contains("topology_levels");
  for (const auto& m : j.value("topology_missing", Json::array())) p.nvmlTopologyMissing.push_back(m.get<std::string>());
}

}  // namespace

Finding brokenLibrary(const std::string& path, const std::string& error, const std::string& users,
                      const std::string& extraRemedy, Json data) {
  data["broken"] = path;
  return fail(fmt::format("{} is found but broken: {}. Every program linked against {} loads this file and "
                          "fails to start",
                          path, error, users),
              fmt::format("Remove or replace {} (an empty or half-copied file, a 32-bit build, another library "
                          "under its name), or take its folder off LD_LIBRARY_PATH.{}",
                          path, extraRemedy),
              data);
}

std::string cudaVersionText(int v) { return v <= 0 ? "unknown" : fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

GpuProbe probeGpu(const LibraryNames& libs) {
  GpuProbe p;
#ifdef DSDIAG_CUDA_VERSION
  p.builtCudaVersion = DSDIAG_CUDA_VERSION;
#endif
  auto r = runIsolated([&] { return probeCudaChild(libs); }, kProbeTimeout);
  if (!r.error.empty()) {
    p.cudaError = fmt::format("probing {} {}", libs.cuda.empty() ? "libcuda" : libs.cuda.front(), r.error);
    fillNvml(p, libs);
    return p;
  }
  const Json& j = r.value;
  p.cudaLoaded = j.value("loaded", false);
  p.cudaPath = j.value("path", "");
  p.cudaError = j.value("error", "");
  p.driverVersion = j.value("driver_version", 0);
  p.initResult = j.value("init_result", -1);
  for (const auto& d : j.value("devices", Json::array())) {
    GpuDevice g;
    g.index = d.value("index", 0);
    g.name = d.value("name", "");
    g.memoryBytes = d.value("memory_bytes", std::uint64_t{0});
    g.busId = d.value("bus_id", "");
    g.uuid = d.value("uuid", "");
    p.devices.push_back(g);
  }
  fillNvml(p, libs);
  return p;
}

NcclProbe probeNccl(const LibraryNames& libs) {
  NcclProbe p;
#ifdef DSDIAG_NCCL_HEADER_MAJOR
  p.headerCode = comm::encodeNcclVersion(DSDIAG_NCCL_HEADER_MAJOR, DSDIAG_NCCL_HEADER_MINOR, DSDIAG_NCCL_HEADER_PATCH);
#endif
  auto r = runIsolated(
      [&]() -> Json {
        std::string used, errors, broken;
        void* h = openFirst(libs.nccl, used, errors, &broken);
        if (h == nullptr) return {{"loaded", false}, {"error", errors}, {"broken", broken}};
        using VerFn = int (*)(int*);
        auto f = sym<VerFn>(h, "ncclGetVersion");
        if (f == nullptr)
          return {{"loaded", true},
                  {"path", used},
                  {"broken", locate(used)},
                  {"error", locate(used) + " has no ncclGetVersion: it is not an NCCL library"}};
        int code = 0;
        int rc = f(&code);
        if (rc != 0)
          return {{"loaded", true}, {"path", used}, {"error", fmt::format("ncclGetVersion returned {}", rc)}};
        return {{"loaded", true}, {"path", used}, {"code", code}};
      },
      kProbeTimeout);
  if (!r.error.empty()) {
    p.error = fmt::format("probing {} {}", libs.nccl.empty() ? "libnccl" : libs.nccl.front(), r.error);
    return p;
  }
  p.loaded = r.value.value("loaded", false);
  p.path = r.value.value("path", "");
  p.error = r.value.value("error", "");
  p.runtimeCode = r.value.value("code", 0);
  p.broken = r.value.value("broken", "");
  return p;
}

MpiStartProbe probeMpiStart(const std::string& path, const std::string& pathEnv,
                            std::chrono::milliseconds timeout) {
  MpiStartProbe p;
  // The child's stdout and stderr go to a file the parent reads afterwards: Open MPI writes its
  // reasons there and then exits, so a pipe read only after the child ends could fill and block it.
  char name[] = "/tmp/dsdiag-mpi-start-XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd < 0) {
    p.error = fmt::format("could not make a temporary file for its output: {}", std::strerror(errno));
    return p;
  }
  ::unlink(name);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = runIsolated(
      [&]() -> Json {
        std::fflush(stdout);
        std::fflush(stderr);
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        if (!pathEnv.empty()) ::setenv("PATH", pathEnv.c_str(), 1);
        void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (h == nullptr) return {{"__error", fmt::format("dlopen {}: {}", path, ::dlerror())}};
        using InitFn = int (*)(int*, char***);
        using FinFn = int (*)();
        auto init = sym<InitFn>(h, "MPI_Init");
        auto fin = sym<FinFn>(h, "MPI_Finalize");
        if (init == nullptr || fin == nullptr) return {{"__error", path + " has no MPI_Init or MPI_Finalize"}};
        const int rc = init(nullptr, nullptr);
        if (rc != 0) return {{"__error", fmt::format("MPI_Init returned {}", rc)}};
        fin();
        return {{"ok", true}};
      },
      timeout);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.ok = r.error.empty() && r.value.value("ok", false);
  if (!p.ok) p.error = r.error.empty() ? r.value.value("__error", std::string("it reported nothing")) : r.error;
  std::string out(64 << 10, '\0');
  const ssize_t n = ::pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  ::close(fd);
  p.output = std::move(out);
  return p;
}

MpiProbe probeMpi(const LibraryNames& libs) {
  MpiProbe p;
  auto r = runIsolated(
      [&]() -> Json {
        std::string used, errors, broken;
        void* h = openFirst(libs.mpi, used, errors, &broken);
        if (h == nullptr) return {{"loaded", false}, {"error", errors}, {"broken", broken}};
        // Callable before MPI_Init (MPI-3).
        using VerFn = int (*)(char*, int*);
        auto f = sym<VerFn>(h, "MPI_Get_library_version");
        if (f == nullptr)
          return {{"loaded", true},
                  {"path", used},
                  {"broken", locate(used)},
                  {"error", locate(used) + " has no MPI_Get_library_version: it is not an MPI library"}};
        std::string buf(16384, '\0');
        int len = 0;
        if (f(buf.data(), &len) != 0)
          return {{"loaded", true}, {"path", used}, {"error", "MPI_Get_library_version failed"}};
        buf.resize(std::min<std::size_t>(std::strlen(buf.c_str()), buf.size()));
        return {{"loaded", true}, {"path", used}, {"version", trim(split(buf, '\n').front())}};
      },
      kProbeTimeout);
  if (!r.error.empty()) {
    p.error = fmt::format("probing {} {}", libs.mpi.empty() ? "libmpi" : libs.mpi.front(), r.error);
    return p;
  }
  p.loaded = r.value.value("loaded", false);
  p.path = r.value.value("path", "");
  p.error = r.value.value("error", "");
  p.libraryVersion = r.value.value("version", "");
  p.broken = r.value.value("broken", "");
  return p;
}

}  // namespace ds::diag
