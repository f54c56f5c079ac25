// The NCCL versions a binary sees. ncclVersions() is built only with NCCL (DS_WITH_NCCL); it opens
// libnccl (nccl_api.h). The version code itself is vocabulary: engine/common/nccl_version.h.
#pragma once

#include <string>

#include "engine/common/nccl_version.h"

namespace ds::comm {

using ds::decodeNcclVersion;
using ds::encodeNcclVersion;
using ds::NcclVersion;

// Both versions a binary sees: the library loaded at run time (ncclGetVersion) and the header it
// was built against (NCCL_VERSION_CODE). They can differ, e.g. when LD_LIBRARY_PATH or a pip wheel
// puts another libnccl first; report both.
struct NcclVersions {
  NcclVersion runtime;  // valid when loaded and runtimeError is empty
  NcclVersion header;
  bool loaded = false;       // libnccl was opened (ncclVersions(false) leaves an unopened one closed)
  std::string runtimeError;  // why libnccl did not load or ncclGetVersion failed, else empty
  bool mismatch() const { return loaded && runtimeError.empty() && runtime.code != header.code; }
  // "NCCL 2.28.9 (runtime, code 22809); built with 2.28.9 (NCCL_VERSION_CODE 22809)"
  std::string describe() const;
};

// Never throws; a libnccl that does not load or a failing ncclGetVersion is reported in runtimeError.
// Needs no GPU. load = false: the runtime version only when libnccl is already open in this process
// (a run that used the nccl backend), so that a CPU-only run never maps it.
NcclVersions ncclVersions(bool load = true);

}  // namespace ds::comm
