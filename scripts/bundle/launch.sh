#!/usr/bin/env bash
# The bundle's launcher: bin/<tool> is a copy of this file and runs libexec/<tool>. Every library the
# tools need is inside the bundle (lib/, found through RPATH $ORIGIN/../lib) except those the node
# provides: glibc, libstdc++, libgcc_s, the driver's libcuda and libnvidia-ml, and libnccl.so.2 and
# libcublas*.so.13, which are looked up here, once per job (DS_BUNDLE_LIBS marks it done for the
# ranks that dsrun starts):
#   1. DS_NCCL_LIB / DS_CUBLAS_LIB: a folder holding the library, or the library file itself;
#   2. the node's Python (DS_PYTHON, else python3): its nvidia-* packages (nvidia-nccl-cu13, nvidia-cublas);
#   3. the CUDA toolkit (CUDA_HOME, else /usr/local/cuda): lib64, lib, targets/x86_64-linux/lib.
# One line on stderr says which was used (DS_BUNDLE_QUIET=1 silences it).
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")  # bin/, also when called through a symlink
bundle=$(cd "$here/.." && pwd)
# shellcheck source=find-libs.sh
source "$bundle/share/dsperf/find-libs.sh"
ds_bundle_find_libs "$bundle"
exec "$bundle/libexec/$(basename "$(readlink -f "${BASH_SOURCE[0]}")")" "$@"
