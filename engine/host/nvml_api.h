// The part of NVML's C API (nvml.h, driver 450+) that dsdiag's health probe and the hardware reader
// (engine/host) call through dlsym.
// nvml.h ships with the driver's development files, not with every CUDA toolkit, so the few types
// and constants are declared here with NVML's own names, layouts and values. The fake
// libnvidia-ml.so.1 of the tests implements the same functions from this header.
#pragma once

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;  // NOLINT: NVML's own name
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;

typedef struct nvmlDevice_st* nvmlDevice_t;  // NOLINT

typedef int nvmlEnableState_t;  // NOLINT
constexpr nvmlEnableState_t NVML_FEATURE_DISABLED = 0;
constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;

// nvmlMemoryErrorType_t, nvmlEccCounterType_t
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
constexpr int NVML_AGGREGATE_ECC = 1;

// nvmlComputeMode_t
constexpr int NVML_COMPUTEMODE_DEFAULT = 0;
constexpr int NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1;
constexpr int NVML_COMPUTEMODE_PROHIBITED = 2;
constexpr int NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3;

constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

// nvmlDeviceArchitecture_t (nvmlDeviceGetArchitecture, driver 450+).
typedef unsigned int nvmlDeviceArchitecture_t;  // NOLINT
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_PASCAL = 4;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_VOLTA = 5;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_TURING = 6;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_AMPERE = 7;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_ADA = 8;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_HOPPER = 9;
constexpr nvmlDeviceArchitecture_t NVML_DEVICE_ARCH_BLACKWELL = 10;

// nvmlClocksEventReasons (nvmlClocksThrottleReasons before driver 535; same bits).
constexpr unsigned long long nvmlClocksEventReasonGpuIdle = 0x1ULL;
constexpr unsigned long long nvmlClocksEventReasonApplicationsClocksSetting = 0x2ULL;
constexpr unsigned long long nvmlClocksEventReasonSwPowerCap = 0x4ULL;
constexpr unsigned long long nvmlClocksThrottleReasonHwSlowdown = 0x8ULL;
constexpr unsigned long long nvmlClocksEventReasonSyncBoost = 0x10ULL;
constexpr unsigned long long nvmlClocksEventReasonSwThermalSlowdown = 0x20ULL;
constexpr unsigned long long nvmlClocksThrottleReasonHwThermalSlowdown = 0x40ULL;
constexpr unsigned long long nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80ULL;
constexpr unsigned long long nvmlClocksEventReasonDisplayClockSetting = 0x100ULL;

// nvmlGpuTopologyLevel_t (nvmlDeviceGetTopologyCommonAncestor): the closest common ancestor of two
// GPUs, the levels `nvidia-smi topo -m` prints as PIX (INTERNAL, SINGLE), PXB, PHB, NODE and SYS.
typedef int nvmlGpuTopologyLevel_t;  // NOLINT
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_INTERNAL = 0;     // on one board (a K80's two GPUs)
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SINGLE = 10;      // one PCIe switch
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_MULTIPLE = 20;    // several PCIe switches, no host bridge
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_HOSTBRIDGE = 30;  // the same PCIe host bridge
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_NODE = 40;        // host bridges of one NUMA node
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SYSTEM = 50;      // across the SMP interconnect

// nvmlIntNvLinkDeviceType_t (nvmlDeviceGetNvLinkRemoteDeviceType, driver 460+): what the far end of a
// link is.
typedef int nvmlIntNvLinkDeviceType_t;  // NOLINT
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2.
typedef struct nvmlPciInfo_st {  // NOLINT
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

// nvmlProcessInfo_t as filled by nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3.
typedef struct nvmlProcessInfo_st {  // NOLINT
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

// The topology calls (driver 450+; a driver without them leaves gpu.topology to sysfs):
//   nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*);
//   nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned link, nvmlPciInfo_t*);
//   nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned link, nvmlIntNvLinkDeviceType_t*);

}  // extern "C"
