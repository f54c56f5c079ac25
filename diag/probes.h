// Probes of the vendor libraries dsdiag never links: libcuda, libnvidia-ml, libnccl and libmpi are
// dlopen'ed in a forked child (util.h runIsolated), so a missing, wrong or crashing library becomes
// a finding instead of a crash of dsdiag. Each probe is plain data, filled once per run.
#pragma once

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
