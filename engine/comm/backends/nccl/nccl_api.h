// The NCCL functions the nccl backend calls, through libnccl opened on first use
// (engine/common/shared_library.h) rather than linked: dsbench maps NCCL's 200+ MiB only in a run that
// uses --backend nccl, and starts (and runs gloo, shm, mpi) where libnccl is missing or broken.
#pragma once

#include <nccl.h>

namespace ds::comm {

#define DS_NCCL_FUNCTIONS(X)                                                                                 \
  X(ncclGetVersion)                                                                                          \
  X(ncclGetErrorString)                                                                                      \
  X(ncclGetLastError)                                                                                        \
  X(ncclGetUniqueId)                                                                                         \
  X(ncclCommInitRankConfig)                                                                                  \
  X(ncclCommAbort)                                                                                           \
  X(ncclCommGetAsyncError)                                                                                   \
  X(ncclCommFinalize)                                                                                        \
  X(ncclCommDestroy)                                                                                         \
  X(ncclAllReduce)                                                                                           \
  X(ncclBroadcast)                                                                                           \
  X(ncclReduce)                                                                                              \
  X(ncclAllGather)                                                                                           \
  X(ncclReduceScatter)                                                                                       \
  X(ncclGroupStart)                                                                                          \
  X(ncclGroupEnd)                                                                                            \
  X(ncclSend)                                                                                                \
  X(ncclRecv)

// One pointer per function, with nccl.h's own signature, named as the function.
struct NcclApi {
#define DS_NCCL_MEMBER(f) decltype(&::f) f = nullptr;
  DS_NCCL_FUNCTIONS(DS_NCCL_MEMBER)
#undef DS_NCCL_MEMBER
};

// Opens libnccl (the soname nccl.h belongs to, e.g. libnccl.so.2) on the first call; thread-safe.
// Throws BackendError naming the library and what to do when it does not load or lacks a function.
const NcclApi& ncclApi();
// Whether libnccl is loaded in this process, without loading it.
bool ncclApiLoaded();

}  // namespace ds::comm
