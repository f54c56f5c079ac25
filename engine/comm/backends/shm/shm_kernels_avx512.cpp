// The reduction kernels compiled for avx512 (flags in CMakeLists.txt); see shm_kernels_impl.inc.
#define DS_SHM_KERNEL_FN reduceAvx512
#include "engine/comm/backends/shm/shm_kernels_impl.inc"
