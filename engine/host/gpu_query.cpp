#include "engine/host/gpu_query.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "engine/common/shared_library.h"
#include "engine/host/nvml_api.h"
#include "engine/host/pci_topology.h"

namespace ds::hw {

namespace {

template <typename F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

class NvmlGpuQuery : public GpuQuery {
 public:
  explicit NvmlGpuQuery(std::vector<std::string> libraries) : libraries_(std::move(libraries)) {}

  GpuView query() override {
    GpuView v;
    sys::OpenedLibrary lib = sys::openFirstLibrary(libraries_, /*stopAtBroken=*/true);
    if (lib.handle == nullptr) {
      v.error = lib.broken.empty() ? fmt::format("NVML not loaded: {}", lib.error)
                                   : fmt::format("NVML is there but broken: {} ({})", lib.broken, lib.error);
      return v;
    }
    void* n = lib.handle;
    using InitFn = nvmlReturn_t (*)();
    using CountFn = nvmlReturn_t (*)(unsigned*);
    using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
    using TextFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
    using PciFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
    using ArchFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDeviceArchitecture_t*);
    using UintFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
    using LinkFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlEnableState_t*);
    using RemoteTypeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*);
    using RemotePciFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
    auto init = sym<InitFn>(n, "nvmlInit_v2");
    if (init == nullptr) init = sym<InitFn>(n, "nvmlInit");
    auto shutdown = sym<InitFn>(n, "nvmlShutdown");
    auto count = sym<CountFn>(n, "nvmlDeviceGetCount_v2");
    auto handle = sym<HandleFn>(n, "nvmlDeviceGetHandleByIndex_v2");
    if (init == nullptr || count == nullptr || handle == nullptr) {
      v.error = fmt::format(
          "{} lacks nvmlInit_v2/nvmlDeviceGetCount_v2/nvmlDeviceGetHandleByIndex_v2 (a driver "
          "older than 418?)",
          sys::locateLibrary(lib.used));
      dlclose(n);
      return v;
    }
    if (nvmlReturn_t rc = init(); rc != NVML_SUCCESS) {
      v.error = fmt::format("nvmlInit failed (nvmlReturn_t {}): is the NVIDIA driver loaded?", rc);
      dlclose(n);
      return v;
    }
    unsigned c = 0;
    if (nvmlReturn_t rc = count(&c); rc != NVML_SUCCESS) {
      v.error = fmt::format("nvmlDeviceGetCount_v2 failed (nvmlReturn_t {})", rc);
    } else {
      v.loaded = true;
      auto name = sym<TextFn>(n, "nvmlDeviceGetName");
      auto pci = sym<PciFn>(n, "nvmlDeviceGetPciInfo_v3");
      auto arch = sym<ArchFn>(n, "nvmlDeviceGetArchitecture");
      auto maxGen = sym<UintFn>(n, "nvmlDeviceGetMaxPcieLinkGeneration");
      auto width = sym<UintFn>(n, "nvmlDeviceGetCurrPcieLinkWidth");
      auto link = sym<LinkFn>(n, "nvmlDeviceGetNvLinkState");
      auto remoteType = sym<RemoteTypeFn>(n, "nvmlDeviceGetNvLinkRemoteDeviceType");
      auto remotePci = sym<RemotePciFn>(n, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
      for (unsigned i = 0; i < c && i < 64; ++i) {
        nvmlDevice_t d = nullptr;
        if (handle(i, &d) != NVML_SUCCESS) continue;
        GpuFacts g;
        char text[96] = {0};
        if (name != nullptr && name(d, text, sizeof text - 1) == NVML_SUCCESS) g.name = text;
        nvmlPciInfo_t info{};
        if (pci != nullptr && pci(d, &info) == NVML_SUCCESS) {
          info.busId[sizeof info.busId - 1] = '\0';
          g.busId = sysfsPciAddress(info.busId);
        }
        nvmlDeviceArchitecture_t a = 0;
        if (arch != nullptr && arch(d, &a) == NVML_SUCCESS && a < 64) g.arch = a;
        unsigned u = 0;
        if (maxGen != nullptr && maxGen(d, &u) == NVML_SUCCESS && u <= 8) g.pcieMaxGen = static_cast<int>(u);
        if (width != nullptr && width(d, &u) == NVML_SUCCESS && u <= 32) g.pcieWidth = static_cast<int>(u);
        if (link != nullptr) {
          bool remotesKnown = remoteType != nullptr && remotePci != nullptr;
          for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
            nvmlEnableState_t active = NVML_FEATURE_DISABLED;
            // NOT_SUPPORTED / INVALID_ARGUMENT: the GPU has no such link.
            if (link(d, l, &active) != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
            ++g.nvlinksActive;
            if (!remotesKnown) continue;
            nvmlIntNvLinkDeviceType_t type = -1;
            nvmlPciInfo_t far{};
            if (remoteType(d, l, &type) == NVML_SUCCESS && type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
              g.nvlinkRemotes.emplace_back("switch");
            } else if (remotePci(d, l, &far) == NVML_SUCCESS) {
              far.busId[sizeof far.busId - 1] = '\0';
              g.nvlinkRemotes.push_back(sysfsPciAddress(far.busId));
            } else {
              remotesKnown = false;
            }
          }
          if (!remotesKnown) g.nvlinkRemotes.clear();
        }
        v.gpus.push_back(std::move(g));
      }
    }
    if (shutdown != nullptr) shutdown();
    // The library stays mapped: unloading NVML while the CUDA driver in this process uses it is not safe.
    return v;
  }

 private:
  std::vector<std::string> libraries_;
};

class FixedGpuQuery : public GpuQuery {
 public:
  explicit FixedGpuQuery(GpuView v) : view_(std::move(v)) {}
  GpuView query() override { return view_; }

 private:
  GpuView view_;
};

}  // namespace

std::unique_ptr<GpuQuery> nvmlGpuQuery(std::vector<std::string> libraries) {
  return std::make_unique<NvmlGpuQuery>(std::move(libraries));
}

std::unique_ptr<GpuQuery> fixedGpuQuery(GpuView view) {
  return std::make_unique<FixedGpuQuery>(std::move(view));
}

double nvlinkGBpsPerLink(unsigned arch, const std::string& name) {
  switch (arch) {
    case NVML_DEVICE_ARCH_PASCAL:
      return 20;
    case NVML_DEVICE_ARCH_VOLTA:
    case NVML_DEVICE_ARCH_TURING:
    case NVML_DEVICE_ARCH_HOPPER:
      return 25;
    case NVML_DEVICE_ARCH_AMPERE:
      for (const char* bridged : {"A40", "A6000", "RTX 30", "A5000", "A4500"})
        if (name.find(bridged) != std::string::npos) return 14.0625;
      return 25;
    case NVML_DEVICE_ARCH_BLACKWELL:
      return 50;
    default:
      return 0;
  }
}

}  // namespace ds::hw
