// NCCL version codes (REFERENCE.md §6): header-only and needing no NCCL, so that dsdiag (which
// dlopens libnccl), the nccl-tests importer and the backend all decode what ncclGetVersion returned
// with one rule.
#pragma once

#include <string>

namespace ds {

struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  int code = 0;  // as ncclGetVersion / NCCL_VERSION_CODE give it
  bool operator==(const NcclVersion&) const = default;
  // "2.23.4"
  std::string str() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
};

// NCCL's own rule (nccl.h NCCL_VERSION): X·1000+Y·100+Z up to 2.8.x, X·10000+Y·100+Z after.
constexpr int encodeNcclVersion(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch
                                    : major * 10000 + minor * 100 + patch;
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

}  // namespace ds
