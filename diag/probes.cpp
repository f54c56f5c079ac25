#include "diag/probes.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "diag/util.h"
#include "engine/comm/backends/nccl/nccl_version.h"

namespace ds::diag {
namespace {

constexpr auto kProbeTimeout = std::chrono::seconds(20);

// Where the dynamic loader found `name`, for messages: the name itself when it is a path, else the first
// LD_LIBRARY_PATH entry that holds it, else the name (the loader's cache or default folders).
std::string locate(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* llp = std::getenv("LD_LIBRARY_PATH");
  for (const auto& dir : split(llp != nullptr ? llp : "", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return name;
}

// dlopen of the first name that loads; `errors` collects each failure ("libcuda.so.1: cannot open
// shared object file ..."). A name that exists but does not load (empty, wrong ELF class, an
// unresolved symbol or dependency) ends the search with `broken` set to it: the tools, linked against
// that name, would load the same file and fail, so a fallback that loads must not pass for it.
void* openFirst(const std::vector<std::string>& names, std::string& used, std::string& errors,
                std::string* broken = nullptr) {
  for (const auto& n : names) {
    dlerror();
    void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      used = n;
      return h;
    }
    const char* e = dlerror();
    const std::string text = e != nullptr ? e : n + ": unknown dlopen error";
    const bool missing =
        text.rfind(n + ": cannot open shared object file: No such file or directory", 0) == 0;
    if (!missing && broken != nullptr) {
      *broken = locate(n);
      errors = text;
      return nullptr;
    }
    // The first name's error says it all (the others are fallbacks of the same library).
    if (errors.empty()) errors = text;
  }
  return nullptr;
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
  // NVML, independently: it is what nvidia-smi and DCGM use, and it can be missing on its own.
  std::string nused, nerrors;
  void* n = openFirst(libs.nvml, nused, nerrors);
  j["nvml_loaded"] = n != nullptr;
  j["nvml_path"] = nused;
  if (n == nullptr) {
    j["nvml_error"] = nerrors;
  } else {
    using InitFn = int (*)();
    using VerFn = int (*)(char*, unsigned);
    auto init = sym<InitFn>(n, "nvmlInit_v2");
    if (init == nullptr) init = sym<InitFn>(n, "nvmlInit");
    int rc = init != nullptr ? init() : -1;
    if (rc != 0) {
      j["nvml_error"] = init == nullptr ? "no nvmlInit symbol" : fmt::format("nvmlInit failed (nvmlReturn_t {})", rc);
    } else {
      char buf[96] = {};
      if (auto f = sym<VerFn>(n, "nvmlSystemGetDriverVersion"); f != nullptr && f(buf, sizeof buf - 1) == 0) {
        j["nvml_driver_version"] = std::string(buf);
      }
    }
  }
  return j;
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
    p.nvmlError = "not probed: the CUDA probe failed first";
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
  p.nvmlLoaded = j.value("nvml_loaded", false);
  p.nvmlPath = j.value("nvml_path", "");
  p.nvmlError = j.value("nvml_error", "");
  p.nvmlDriverVersion = j.value("nvml_driver_version", "");
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
