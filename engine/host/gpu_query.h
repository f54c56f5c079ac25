// What the GPUs of this host are, as NVML tells: name, PCI address, architecture, active NVLinks and
// PCIe link. The hardware reader (hardware_reader.h) asks through this interface, so that tests hand it
// a fake machine and dsdiag or dsbench hand it the driver's libnvidia-ml.so.1, opened with dlopen: a
// host without the driver (or with a broken one) still reports its NICs, and says why its GPUs are
// unknown.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ds::hw {

struct GpuFacts {
  std::string name;   // "NVIDIA H100 80GB HBM3"
  std::string busId;  // PCI address as sysfs writes it: "0000:19:00.0" ("" unknown)
  // nvmlDeviceArchitecture_t: 4 Pascal, 5 Volta, 6 Turing, 7 Ampere, 8 Ada, 9 Hopper, 10 Blackwell;
  // 0 unknown.
  unsigned arch = 0;
  int nvlinksActive = 0;  // links nvmlDeviceGetNvLinkState calls active (0 also when NVML has none)
  int pcieMaxGen = 0;     // NVML's max PCIe generation and current width: used when sysfs lacks the
  int pcieWidth = 0;      // device (containers without /sys/bus/pci); 0 unknown
  // Where each active NVLink goes (nvmlDeviceGetNvLinkRemoteDeviceType, then
  // nvmlDeviceGetNvLinkRemotePciInfo_v2): the far GPU's PCI address as sysfs writes it, or "switch"
  // for an NVSwitch. Empty when NVML could not say for every active link (older drivers): unknown.
  std::vector<std::string> nvlinkRemotes;
};

struct GpuView {
  bool loaded = false;  // NVML loaded and initialised; `gpus` is then what it reported
  std::string
      error;  // why not ("libnvidia-ml.so.1: cannot open shared object file", "nvmlInit_v2 failed (3)")
  std::vector<GpuFacts> gpus;
};

class GpuQuery {
 public:
  virtual ~GpuQuery() = default;
  // Every GPU of the host, in NVML's order (PCI order). Never throws: a failure is a view with
  // loaded = false and the reason.
  virtual GpuView query() = 0;
};

// NVML through dlopen of the first of `libraries` that loads (default libnvidia-ml.so.1, then
// libnvidia-ml.so). In-process: the caller's thread blocks for as long as nvmlInit takes (seconds on
// GPUs without persistence mode); dsdiag runs its own probes in a child for drivers that hang.
std::unique_ptr<GpuQuery> nvmlGpuQuery(std::vector<std::string> libraries = {"libnvidia-ml.so.1",
                                                                             "libnvidia-ml.so"});

// A query that answers `view` (tests; and callers that already hold NVML's answers).
std::unique_ptr<GpuQuery> fixedGpuQuery(GpuView view);

// One direction of one NVLink in GB/s for an architecture, from NVIDIA's published figures: Pascal 20
// (NVLink 1), Volta, Turing, Ampere and Hopper 25 (NVLink 2-4: A100 12 links = 600 GB/s both ways,
// H100 18 links = 900 GB/s), Blackwell 50 (NVLink 5). Ampere's workstation cards (A40, RTX A6000, RTX
// 3090, by `name`) bridge at 14.0625. 0 when unknown (newer architectures): the bound is then unknown
// rather than guessed. Not nvmlDeviceGetNvLinkVersion: its numbering changed between drivers (some
// report NVLink 5 for Hopper), while the architecture's is stable.
double nvlinkGBpsPerLink(unsigned arch, const std::string& name);

}  // namespace ds::hw
