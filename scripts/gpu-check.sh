#!/usr/bin/env bash
# The GPU checks on a machine that has our Debian packages (or a network to install them): installs
# what is missing, builds with CUDA and NCCL into build-gpu/ (only the targets the checks need), then
# runs the same steps as the relocatable bundle, scripts/run-gpu-checks.sh (one list of steps for
# both). A GPU node without the packages uses the bundle instead (scripts/bundle.sh, docs/gpu-nodes.md).
#
# Usage: scripts/gpu-check.sh [OUTDIR]   (default build-gpu/gpu-checks)
# Environment: DS_GPU_BUILD_DIR (default <repo>/build-gpu), DS_JOBS (default nproc), DS_BUILD_TYPE
#   (default RelWithDebInfo), DS_GPU_CMAKE_ARGS (extra configure arguments), and those of
#   run-gpu-checks.sh (DS_GPU_CHECKS_BUDGET_S, DS_GPU_CHECKS_STEPS, DS_PYTHON).
# Output: the build's lines, then run-gpu-checks.sh's; the last line is `gpu-checks: PASS` (exit 0)
#   or `gpu-checks: FAIL (<steps>)` (exit 1), where a failed setup or build counts as a step.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_GPU_BUILD_DIR:-$root/build-gpu}
out=${1:-$build/gpu-checks}
jobs=${DS_JOBS:-$(nproc)}
TARGETS=(dsrun dsdiag dsbench ds_nccl_gpu_tests ds_ddp_gpu_tests)
mkdir -p "$build"

fail() {  # step, reason
  echo "gpu-check: $1 failed: $2"
  echo "gpu-checks: FAIL ($1)"
  exit 1
}
"$root/scripts/setup.sh" || fail setup "scripts/setup.sh could not install the packages"
[[ -x /usr/local/cuda/bin/nvcc || -n "$(command -v nvcc)" ]] ||
  fail setup "no CUDA toolkit (nvcc) in /usr/local/cuda or PATH; install CUDA with NCCL first"
# shellcheck disable=SC2086 # DS_GPU_CMAKE_ARGS is a list of arguments
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${DS_BUILD_TYPE:-RelWithDebInfo}" -DDS_WITH_CUDA=ON \
  -DDS_WITH_NCCL=ON ${DS_GPU_CMAKE_ARGS:-} >"$build/configure.log" 2>&1 || {
  tail -n 40 "$build/configure.log"; fail configure "cmake with CUDA and NCCL failed (log: $build/configure.log)"; }
cmake --build "$build" -j "$jobs" --target "${TARGETS[@]}" >"$build/build.log" 2>&1 || {
  grep -E 'error' "$build/build.log" | sed -n 1,20p; fail build "${TARGETS[*]} did not build (log: $build/build.log)"; }
echo "gpu-check: built ${TARGETS[*]} in $build"
DS_GPU_BIN_DIR=$build/bin DS_GPU_TEST_DIR=$build/tests exec "$root/scripts/run-gpu-checks.sh" "$out"
