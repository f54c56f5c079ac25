// NCCL version codes (REFERENCE.md §6). The encode/decode functions are header-only and need no
// NCCL, so that dsdiag (which dlopens libnccl) can decode what ncclGetVersion returned there.
// ncclVersions() is built only with NCCL (DS_WITH_NCCL); it opens libnccl (nccl_api.h).
#pragma once

#include <string>

namespace ds::comm {

struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  int code = 0;  // as ncclGetVersion / NCCL_VERSION_CODE give it
  bool operator==(const NcclVersion&) const = default;
  // "2.23.4"
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch); }
};

// NCCL's own rule (nccl.h NCCL_VERSION): X·1000+Y·100+Z up to 2.8.x, X·10000+Y·100+Z after.
constexpr int encodeNcclVersion(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch : major * 10000 + minor * 100 + patch;
}

// 2804 -> 2.8.4, 22304 -> 2.23.4. Codes of 10000 and up use the new encoding.
constexpr NcclVersion decodeNcclVersion(int code) {
  NcclVersion v;
  v.code = code;
  if (code >= 10000) {
    v.major = code / 10000;
    v.minor = (code % 10000) / 100;
  } else {
    v.major = code / 1000;
    v.minor = (code % 1000) / 100;
  }
  v.patch = code % 100;
  return v;
}

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
