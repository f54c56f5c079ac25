// A fake libnvidia-ml.so.1 for dsdiag's NVML health checks (and engine/host's reader): two H200s
// whose state comes from DS_FAKE_NVML_SCENARIO (healthy when unset). dsdiag loads it through
// LD_LIBRARY_PATH exactly as it loads the driver's library. Scenarios: healthy, ecc, ecc_history, x8,
// foreign_process, mig, exclusive, slowdown, nvlink_down, persistence_off, crash (nvmlInit_v2
// segfaults), hang (it never returns).
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
};

namespace {

nvmlDevice_st gDevices[2] = {
    {0, "GPU-8c4f2a51-0d3e-4b7a-9f21-6a1c0e5b7d10", "00000000:19:00.0"},
    {1, "GPU-3e9b7c02-51aa-4d86-b0e4-92f7d1c3a8e5", "00000000:3B:00.0"},
};
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
  gDevices[0] = {0, gDevices[0].uuid, gDevices[0].busId};
  gDevices[1] = {1, gDevices[1].uuid, gDevices[1].busId};
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
  *count = gReady ? 2 : 0;
  return gReady ? NVML_SUCCESS : 1;  // NVML_ERROR_UNINITIALIZED
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= 2) return NVML_ERROR_INVALID_ARGUMENT;
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
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *active = static_cast<int>(link) == d->downLink ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

// An HGX board: every NVLink goes to an NVSwitch.
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned link, nvmlIntNvLinkDeviceType_t* type) {
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned link, nvmlPciInfo_t* pci) {
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  return NVML_SUCCESS;
}

}  // extern "C"
