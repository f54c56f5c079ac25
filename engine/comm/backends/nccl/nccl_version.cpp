#include "engine/comm/backends/nccl/nccl_version.h"

#include <fmt/format.h>
#include <nccl.h>

#include "engine/comm/backends/nccl/nccl_api.h"
#include "engine/common/error.h"

namespace ds::comm {

static_assert(encodeNcclVersion(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE,
              "our NCCL version encoding disagrees with nccl.h");

NcclVersions ncclVersions(bool load) {
  NcclVersions v;
  v.header = decodeNcclVersion(NCCL_VERSION_CODE);
  if (!load && !ncclApiLoaded()) return v;
  try {
    const NcclApi& nccl = ncclApi();
    v.loaded = true;
    int code = 0;
    ncclResult_t r = nccl.ncclGetVersion(&code);
    if (r != ncclSuccess) {
      v.runtimeError = fmt::format("ncclGetVersion failed: {}", nccl.ncclGetErrorString(r));
    } else {
      v.runtime = decodeNcclVersion(code);
    }
  } catch (const BackendError& e) {
    v.runtimeError = e.what();
  }
  return v;
}

std::string NcclVersions::describe() const {
  std::string rt = !runtimeError.empty() ? fmt::format("NCCL runtime version unknown ({})", runtimeError)
                   : loaded              ? fmt::format("NCCL {} (runtime, code {})", runtime.str(), runtime.code)
                                         : std::string("NCCL runtime not loaded");
  std::string s = fmt::format("{}; built with {} (NCCL_VERSION_CODE {})", rt, header.str(), header.code);
  if (mismatch()) s += " -- MISMATCH: the loaded libnccl is not the one dsperf was built with; check LD_LIBRARY_PATH";
  return s;
}

}  // namespace ds::comm
