// The reduction kernels compiled for avx2 (flags in CMakeLists.txt); see shm_kernels_impl.inc.
#define DS_SHM_KERNEL_FN reduceAvx2
#include "engine/comm/backends/shm/shm_kernels_impl.inc"
