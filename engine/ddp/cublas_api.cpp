#include "engine/ddp/cublas_api.h"

#include "engine/common/shared_library.h"

namespace ds::ddp::cuda {

const CublasApi& cublasApi() {
  static sys::LazyLibrary lib("cuBLAS", {DS_CUBLAS_SONAME},
                              "Put the folder that holds " DS_CUBLAS_SONAME " (and libcublasLt) on "
                              "LD_LIBRARY_PATH (the bundle's launchers: set DS_CUBLAS_LIB), or train on "
                              "the CPU.");
  // Filled once; a failed load throws out of the initialiser, and the next call tries again.
  static const CublasApi api = [] {
    CublasApi a;
    a.create = reinterpret_cast<decltype(a.create)>(lib.symbol("cublasCreate_v2"));
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(lib.symbol("cublasSgemm_v2"));
    a.gemmEx = reinterpret_cast<decltype(a.gemmEx)>(lib.symbol("cublasGemmEx"));
    a.statusString = reinterpret_cast<decltype(a.statusString)>(lib.symbol("cublasGetStatusString"));
    return a;
  }();
  return api;
}

}  // namespace ds::ddp::cuda
