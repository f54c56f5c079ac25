// The cuBLAS functions the DDP engine calls, through libcublas opened on the first GPU GEMM
// (engine/common/shared_library.h) rather than linked: libcublas and its libcublasLt (600 MiB) are
// mapped only by a run that trains on a GPU, not at every dsbench start.
#pragma once

#include <cublas_v2.h>

namespace ds::ddp::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  // cublasGemmEx is overloaded (an inline wrapper takes the old cudaDataType compute type): the library's.
  cublasStatus_t (*gemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                           const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                           cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) statusString = nullptr;
};

// Opens libcublas (the soname of the toolkit dsperf was built with, e.g. libcublas.so.13) on the
// first call; thread-safe. Throws BackendError naming it and what to do when it does not load.
const CublasApi& cublasApi();

}  // namespace ds::ddp::cuda
