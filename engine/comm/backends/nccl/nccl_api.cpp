#include "engine/comm/backends/nccl/nccl_api.h"

#include "engine/common/shared_library.h"

namespace ds::comm {

namespace {

sys::LazyLibrary& library() {
  static sys::LazyLibrary lib(
      "NCCL", {DS_NCCL_SONAME},
      "Put the folder that holds " DS_NCCL_SONAME " on LD_LIBRARY_PATH (the bundle's launchers: set "
      "DS_NCCL_LIB), or use another backend (--backend gloo). `dsdiag --only nccl.version` checks it.");
  return lib;
}

}  // namespace

const NcclApi& ncclApi() {
  // Filled once; a failed load throws out of the initialiser, and the next call tries again.
  static const NcclApi api = [] {
    NcclApi a;
#define DS_NCCL_LOAD(f) a.f = reinterpret_cast<decltype(a.f)>(library().symbol(#f));
    DS_NCCL_FUNCTIONS(DS_NCCL_LOAD)
#undef DS_NCCL_LOAD
    return a;
  }();
  return api;
}

bool ncclApiLoaded() { return library().loaded(); }

}  // namespace ds::comm
