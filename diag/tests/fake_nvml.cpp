// A fake libnvidia-ml.so.1 for dsdiag's NVML health checks (and engine/host's reader): two H200s
// whose state comes from DS_FAKE_NVML_SCENARIO (healthy when unset). dsdiag loads it through
// LD_LIBRARY_PATH exactly as it loads the driver's library. Scenarios: healthy, ecc, ecc_history, x8,
// foreign_process, mig, exclusive, slowdown, nvlink_down, persistence_off, crash (nvmlInit_v2
// segfaults), hang (it never returns); for gpu.topology, topo_nvswitch (eight H200s on an NVSwitch
// fabric, 18 links each, GPUs 0-3 on socket 0 and 4-7 on socket 1), topo_link_down (the same with
// links 16 and 17 of GPU 3 down), topo_gpu_off_fabric (every link of GPU 5 down) and topo_bridged (four
// GPUs with 4 links each, bridged in pairs: 0-1 and 2-3). Every GPU's NVLinks lead to an NVSwitch; NVML's common ancestor of
// two GPUs is NODE on one socket, SYSTEM across. Built with DS_FAKE_NVML_NO_TOPOLOGY (the library in
// tests/fake-nvml-old), it lacks the topology calls, as a driver older than 450 does.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/host/nvml_api.h"

struct nvmlDevice_st {
  unsigned index;
  const char* uuid;
  const char* busId;
  unsigned long long eccVolatile = 0, eccAggregate = 0;
  unsigned remapPending = 0;
  unsigned width = 16;
  unsigned long long reasons = nvmlClocksEventReasonGpuIdle;
  unsigned foreignPid = 0;
  int persistence = NVML_FEATURE_ENABLED;
  unsigned mig = 0;
  int computeMode = NVML_COMPUTEMODE_DEFAULT;
  int downLink = -1;
  int downLink2 = -1;
  bool allLinksDown = false;
  unsigned links = NVML_NVLINK_MAX_LINKS;  // the links the GPU has
  int peer = -1;                           // the GPU its links lead to (a bridge); -1: an NVSwitch
};

namespace {

constexpr unsigned kMaxDevices = 8;
nvmlDevice_st gDevices[kMaxDevices] = {
    {0, "GPU-8c4f2a51-0d3e-4b7a-9f21-6a1c0e5b7d10", "00000000:19:00.0"},
    {1, "GPU-3e9b7c02-51aa-4d86-b0e4-92f7d1c3a8e5", "00000000:3B:00.0"},
    {2, "GPU-0a6d1f83-7c2e-4e55-8b19-c4d2e7f90a31", "00000000:4C:00.0"},
    {3, "GPU-5b2e9a74-18cd-4f03-a6e2-3d9c0b8f7e12", "00000000:5D:00.0"},
    {4, "GPU-c7e41d09-2b8a-4a6f-9e35-81f0d2c6b4a7", "00000000:9B:00.0"},
    {5, "GPU-2f8c6b15-e4a3-47d9-b0c2-6e9a1d5f3c88", "00000000:BB:00.0"},
    {6, "GPU-9d3a7e20-5f1b-4c84-a7d6-0b2e8c4f19d3", "00000000:CB:00.0"},
    {7, "GPU-4e1b8c36-a9d7-4025-8f3e-d6c0a2b7e951", "00000000:DB:00.0"},
};
unsigned gCount = 2;
bool gReady = false;

std::string scenario() {
  const char* s = std::getenv("DS_FAKE_NVML_SCENARIO");
  return s != nullptr ? s : "healthy";
}

void copyText(char* out, unsigned len, const char* text) {
  if (len == 0) return;
  std::strncpy(out, text, len - 1);
  out[len - 1] = '\0';
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  std::string s = scenario();
  if (s == "crash") raise(SIGSEGV);
  if (s == "hang") {
    for (;;) pause();  // sleeps until killed: dsdiag's probe timeout must end it
  }
  for (unsigned i = 0; i < kMaxDevices; ++i) gDevices[i] = {i, gDevices[i].uuid, gDevices[i].busId};
  gCount = s.rfind("topo_", 0) == 0 ? 8 : 2;
  if (s == "topo_link_down") {
    gDevices[3].downLink = 16;
    gDevices[3].downLink2 = 17;
  } else if (s == "topo_gpu_off_fabric") {
    gDevices[5].allLinksDown = true;
  } else if (s == "topo_bridged") {
    gCount = 4;
    for (unsigned i = 0; i < 4; ++i) {
      gDevices[i].links = 4;
      gDevices[i].peer = static_cast<int>(i ^ 1U);
    }
  }
  if (s == "ecc") {
    gDevices[1].eccVolatile = 3;
    gDevices[1].eccAggregate = 7;
    gDevices[1].remapPending = 1;
  } else if (s == "ecc_history") {
    gDevices[0].eccAggregate = 2;
  } else if (s == "x8") {
    gDevices[0].width = 8;
  } else if (s == "foreign_process") {
    gDevices[1].foreignPid = 4242;
  } else if (s == "mig") {
    gDevices[0].mig = NVML_DEVICE_MIG_ENABLE;
  } else if (s == "exclusive") {
    gDevices[0].computeMode = gDevices[1].computeMode = NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
  } else if (s == "slowdown") {
    gDevices[1].reasons = nvmlClocksThrottleReasonHwThermalSlowdown;
  } else if (s == "nvlink_down") {
    gDevices[0].downLink = 5;
  } else if (s == "persistence_off") {
    gDevices[0].persistence = gDevices[1].persistence = NVML_FEATURE_DISABLED;
  }
  gReady = true;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }

nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned len) {
  copyText(v, len, "580.95.05");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gReady ? gCount : 0;
  return gReady ? NVML_SUCCESS : 1;  // NVML_ERROR_UNINITIALIZED
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= gCount) return NVML_ERROR_INVALID_ARGUMENT;
  *d = &gDevices[i];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned len) {
  copyText(name, len, "NVIDIA H200");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t, nvmlDeviceArchitecture_t* arch) {
  *arch = NVML_DEVICE_ARCH_HOPPER;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned len) {
  copyText(uuid, len, d->uuid);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  copyText(pci->busId, sizeof pci->busId, d->busId);
  copyText(pci->busIdLegacy, sizeof pci->busIdLegacy, d->busId + 4);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t, nvmlEnableState_t* current, nvmlEnableState_t* pending) {
  *current = *pending = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int errorType, int counterType, unsigned long long* count) {
  if (errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) {
    *count = 0;
    return NVML_SUCCESS;
  }
  *count = counterType == NVML_VOLATILE_ECC ? d->eccVolatile : d->eccAggregate;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corr, unsigned* unc, unsigned* pending,
                                       unsigned* failed) {
  *corr = 0;
  *unc = d->remapPending;
  *pending = d->remapPending;
  *failed = 0;
  return NVML_SUCCESS;
}

// Hopper retires rows, not pages: NVML answers NOT_SUPPORTED, as the real one does.
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t, nvmlEnableState_t*) {
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned* gen) {
  *gen = (d->reasons & nvmlClocksEventReasonGpuIdle) != 0 ? 1 : 5;  // idle GPUs drop to Gen1
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t, unsigned* gen) {
  *gen = 5;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned* width) {
  *width = d->width;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t, unsigned* width) {
  *width = 16;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* reasons) {
  *reasons = d->reasons;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* count, nvmlProcessInfo_t* infos) {
  unsigned n = d->foreignPid != 0 ? 1 : 0;
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  if (n == 1) infos[0] = {d->foreignPid, 10ULL << 30, 0xFFFFFFFFu, 0xFFFFFFFFu};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t, unsigned* count, nvmlProcessInfo_t*) {
  *count = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned pid, char* name, unsigned len) {
  if (pid != 4242) return 6;  // NVML_ERROR_NOT_FOUND
  copyText(name, len, "python3");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t* mode) {
  *mode = d->persistence;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  *current = *pending = d->mig;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int* mode) {
  *mode = d->computeMode;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, nvmlEnableState_t* active) {
  if (link >= d->links) return NVML_ERROR_INVALID_ARGUMENT;
  const int l = static_cast<int>(link);
  const bool down = d->allLinksDown || l == d->downLink || l == d->downLink2;
  *active = down ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

#ifndef DS_FAKE_NVML_NO_TOPOLOGY
// GPUs 0-3 sit on socket 0, 4-7 on socket 1 (with two GPUs, both on socket 0).
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t* level) {
  if (a == nullptr || b == nullptr || level == nullptr || a == b) return NVML_ERROR_INVALID_ARGUMENT;
  *level = (a->index < 4) == (b->index < 4) ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}

// Every link leads to one of four NVSwitches, as on an HGX H200 board.
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned link, nvmlIntNvLinkDeviceType_t* type) {
  if (link >= d->links) return NVML_ERROR_INVALID_ARGUMENT;
  *type = d->peer >= 0 ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t* pci) {
  if (link >= d->links) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  const char* switches[] = {"00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"};
  copyText(pci->busId, sizeof pci->busId, d->peer >= 0 ? gDevices[d->peer].busId : switches[link % 4]);
  return NVML_SUCCESS;
}
#endif

}  // extern "C"
