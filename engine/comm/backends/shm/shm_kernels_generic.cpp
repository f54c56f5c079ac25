// The reduction kernels compiled for generic (flags in CMakeLists.txt); see shm_kernels_impl.inc.
#define DS_SHM_KERNEL_FN reduceGeneric
#include "engine/comm/backends/shm/shm_kernels_impl.inc"
