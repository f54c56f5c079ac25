// Probes of the vendor libraries dsdiag never links: libcuda, libnvidia-ml, libnccl and libmpi are
// dlopen'ed in a forked child (util.h runIsolated), so a missing, wrong or crashing library becomes
// a finding instead of a crash of dsdiag. Each probe is plain data, filled once per run.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diag/check.h"

namespace ds::diag {

struct GpuDevice {
  int index = 0;
  std::string name;
  std::uint64_t memoryBytes = 0;
  std::string busId;
  std::string uuid;  // "GPU-xxxxxxxx-..."
};

// One GPU as NVML sees it (NVML's index is nvidia-smi's: PCI order, not CUDA's default order), with
// the health fields of DCGM's level-1 diagnostics. A field is empty when NVML does not support it on
// this GPU or driver.
struct GpuProcess {
  unsigned pid = 0;
  std::string name;            // nvmlSystemGetProcessName, else /proc/<pid>/comm, else ""
  std::uint64_t usedBytes = 0; // 0 when NVML cannot tell (containers, MIG)
};
struct NvmlDevice {
  int index = 0;
  std::string name;
  std::string busId;
  std::string uuid;
  std::optional<bool> eccEnabled;
  std::optional<std::uint64_t> eccVolatileUncorrected;   // since the driver loaded
  std::optional<std::uint64_t> eccAggregateUncorrected;  // over the GPU's lifetime
  std::optional<unsigned> remappedUncorrectable;  // rows remapped for uncorrectable errors (A100 and later)
  std::optional<bool> remapPending;               // a remap waits for a GPU reset
  std::optional<bool> remapFailure;               // a remap failed: the GPU should be replaced
  std::optional<bool> retiredPagesPending;        // page retirement (before A100) waits for a reset
  std::optional<unsigned> pcieGen, pcieMaxGen, pcieWidth, pcieMaxWidth;
  std::optional<std::uint64_t> clockEventReasons;  // nvmlClocksEventReason* bits
  std::optional<std::vector<GpuProcess>> processes;  // compute and graphics processes holding memory
  std::optional<bool> persistence;
  std::optional<unsigned> migCurrent, migPending;
  std::optional<int> computeMode;
  std::vector<int> nvlinkActive;  // per link NVML reports (absent links left out): 1 active, 0 down
  std::vector<int> nvlinkIds;     // the link numbers of nvlinkActive
  // Where each active link leads (gpu.topology): nvmlIntNvLinkDeviceType_t (-1 unknown) and the far
  // end's PCI bus id as NVML prints it ("" unknown).
  struct NvlinkRemote {
    int link = 0;
    int type = -1;
    std::string busId;
  };
  std::vector<NvlinkRemote> nvlinkRemote;
};

// nvmlDeviceGetTopologyCommonAncestor of two GPUs (NVML indices): an nvmlGpuTopologyLevel_t.
struct NvmlTopologyLevel {
  int a = 0, b = 0;
  int level = -1;
};

struct GpuProbe {
  // libcuda
  bool cudaLoaded = false;
  std::string cudaPath;   // the name that loaded
  std::string cudaError;  // dlopen / cuInit / probe failure text
  int driverVersion = 0;  // cuDriverGetVersion: 12040 -> 12.4
  int initResult = -1;    // cuInit's CUresult (0 success, 100 no device)
  std::vector<GpuDevice> devices;
  // libnvidia-ml
  bool nvmlLoaded = false;
  std::string nvmlPath;
  std::string nvmlError;
  std::string nvmlDriverVersion;  // "550.54.15"
  bool nvmlProbeBroken = false;   // the library crashed or hung in the probe child (nvmlError says which)
  std::vector<NvmlDevice> nvmlDevices;
  std::vector<NvmlTopologyLevel> nvmlTopologyLevels;  // each GPU pair NVML answered for
  bool nvmlTopologyKnown = false;                     // the driver has nvmlDeviceGetTopologyCommonAncestor
  std::vector<std::string> nvmlTopologyMissing;       // topology calls this driver lacks, by name
  // CUDA toolkit the tools were built with (CUDA_VERSION), 0 when unknown.
  int builtCudaVersion = 0;
};

struct NcclProbe {
  bool loaded = false;
  std::string path;
  std::string error;   // dlopen or ncclGetVersion failure
  int runtimeCode = 0; // ncclGetVersion
  int headerCode = 0;  // NCCL_VERSION_CODE of the nccl.h the tools were built with; 0 unknown
  // The library file that exists but does not load or is not NCCL (empty, wrong ELF, missing
  // symbols); empty when none. The tools would load the same file and fail to start.
  std::string broken;
};

struct MpiProbe {
  bool loaded = false;
  std::string path;
  std::string error;
  std::string libraryVersion;  // MPI_Get_library_version's text, first line
  std::string broken;          // as NcclProbe::broken
};

// MPI started as a rank started without a launcher starts it (Open MPI: a "singleton", which execs
// orted): MPI_Init and MPI_Finalize in a forked child whose stdout and stderr are kept, under a time
// limit. The library is the one at `path` (MpiProbe::path); `pathEnv`, when not empty, is the child's
// PATH (where Open MPI looks for orted): the checked environment's, which tests set.
struct MpiStartProbe {
  bool ok = false;
  double seconds = 0;
  std::string error;   // how the child ended when not ok ("exited with code 1", "did not finish ...")
  std::string output;  // what MPI printed (Open MPI's help text on a failure), at most 64 KiB
};
MpiStartProbe probeMpiStart(const std::string& path, const std::string& pathEnv,
                            std::chrono::milliseconds timeout);

GpuProbe probeGpu(const LibraryNames& libs);
NcclProbe probeNccl(const LibraryNames& libs);
MpiProbe probeMpi(const LibraryNames& libs);

// The FAIL of a library file that exists but does not load or lacks its symbols (a probe's `broken`):
// it names the file, says who cannot start (`users`: the programs linked against it) and what to do.
Finding brokenLibrary(const std::string& path, const std::string& error, const std::string& users,
                      const std::string& extraRemedy, Json data);

// "12.4" from 12040.
std::string cudaVersionText(int v);

}  // namespace ds::diag
