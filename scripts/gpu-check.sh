#!/usr/bin/env bash
# The GPU checks of dsperf: the one script run on a machine with NVIDIA GPUs (CI, or by hand).
# Installs what is missing, builds with CUDA and NCCL into build-gpu/, shows the GPUs and NCCL
# versions, and runs every ctest test labelled `gpu` (with DS_REQUIRE_GPU=1, so that a test that
# finds no GPU fails instead of skipping). Budget: under 8 minutes on one H200, build included.
#
# Usage: scripts/gpu-check.sh
# Environment: DS_GPU_BUILD_DIR (default <repo>/build-gpu), DS_JOBS (default nproc),
#   DS_TEST_JOBS (parallel ctest jobs, default 4), DS_BUILD_TYPE (default RelWithDebInfo),
#   DS_GPU_CHECK_BUDGET_S (default 470: ctest is cut off so the whole run ends before 8 min),
#   DS_GPU_CMAKE_ARGS (extra configure arguments), DS_GPU_CHECK_STEPS (run only these steps, e.g.
#   "configure build nccl_versions" to try the script on a machine without a GPU; never PASS for real).
# Output: one block per step, then summary lines ending with exactly one of
#   gpu-check: PASS              every step passed (exit 0)
#   gpu-check: FAIL (<steps>)    the steps that failed and why (exit 1)
#
# Adding a check: write a function check_<name> that returns non-zero on failure (print why), add
# "<name>" to STEPS (mark it required with REQUIRED if the later steps cannot run without it), and
# add any binaries it needs to BUILD_TARGETS. Keep the whole run inside the budget.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_GPU_BUILD_DIR:-$root/build-gpu}
jobs=${DS_JOBS:-$(nproc)}
test_jobs=${DS_TEST_JOBS:-4}
budget_s=${DS_GPU_CHECK_BUDGET_S:-470}
logs=$build/gpu-check-logs

# The targets the checks need; building only these saves minutes over the whole tree. A gpu test
# whose binary is missing here shows up in ctest as *_NOT_BUILT and fails the run, never passes it.
BUILD_TARGETS=(
  ds_nccl_unit_tests   # engine/comm/backends/nccl: version decode, factory checks
  ds_nccl_gpu_tests    # engine/comm/backends/nccl: the collective matrix on the GPU
  ds_ddp_gpu_tests     # engine/ddp: tensor, cuBLAS MLP and DDP on the GPU
)

# The steps, in order. REQUIRED steps stop the run when they fail (later steps would only add noise).
STEPS=(setup gpu_visible configure build nccl_versions ctest_gpu ctest_nccl_unit)
if [[ -n "${DS_GPU_CHECK_STEPS:-}" ]]; then
  read -r -a STEPS <<<"$DS_GPU_CHECK_STEPS"
  echo "gpu-check: running only the steps ${STEPS[*]} (DS_GPU_CHECK_STEPS)"
fi
REQUIRED=(setup gpu_visible configure build)

t0=$SECONDS
remaining() { echo $((budget_s - (SECONDS - t0))); }
fail_reasons=()
note() { echo "gpu-check: $*"; }
# Prints the last lines of a log, for a step that failed with its output in a file.
show_tail() { echo "----- last ${2:-60} lines of $1 -----"; tail -n "${2:-60}" "$1"; echo "-----"; }

check_setup() {
  # setup.sh is quiet and quick when nothing is missing; it installs only what is.
  "$root/scripts/setup.sh" || { fail_reasons+=("setup: scripts/setup.sh could not install the packages"); return 1; }
  if [[ ! -x /usr/local/cuda/bin/nvcc && -z "$(command -v nvcc)" ]]; then
    fail_reasons+=("setup: no CUDA toolkit (nvcc) in /usr/local/cuda or PATH; install CUDA with NCCL first")
    return 1
  fi
}

check_gpu_visible() {
  if ! command -v nvidia-smi >/dev/null; then
    echo "nvidia-smi is not installed: this machine has no NVIDIA driver."
    fail_reasons+=("gpu_visible: no GPU visible (nvidia-smi missing)")
    return 1
  fi
  local list
  list=$(nvidia-smi -L 2>&1)
  local rc=$?
  echo "$list"
  if ((rc != 0)) || ! grep -q '^GPU [0-9]' <<<"$list"; then
    echo "nvidia-smi lists no GPU (exit $rc). Check the driver (dmesg for Xid errors) and CUDA_VISIBLE_DEVICES."
    fail_reasons+=("gpu_visible: no GPU visible")
    return 1
  fi
  [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]] && echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
}

check_configure() {
  mkdir -p "$build" "$logs"
  if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${DS_BUILD_TYPE:-RelWithDebInfo}" -DDS_WITH_CUDA=ON \
      -DDS_WITH_NCCL=ON ${DS_GPU_CMAKE_ARGS:-} >"$logs/configure.log" 2>&1; then
    show_tail "$logs/configure.log" 40
    fail_reasons+=("configure: cmake with CUDA and NCCL failed (log: $logs/configure.log)")
    return 1
  fi
  grep -E '^-- DS_WITH_' "$logs/configure.log" || true
}

check_build() {
  if ! timeout "$(remaining)" cmake --build "$build" -j "$jobs" --target "${BUILD_TARGETS[@]}" \
      >"$logs/build.log" 2>&1; then
    grep -E 'error|Error' "$logs/build.log" | head -20
    show_tail "$logs/build.log" 40
    fail_reasons+=("build: ${BUILD_TARGETS[*]} did not build (log: $logs/build.log)")
    return 1
  fi
  echo "built: ${BUILD_TARGETS[*]}"
}

check_nccl_versions() {
  # The header the build used and the library the binaries load; they can differ.
  local inc lib
  inc=$(sed -n 's/^NCCL_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")
  if [[ -f "$inc/nccl.h" ]]; then
    local code
    code=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' "$inc/nccl.h")
    echo "NCCL header: $inc/nccl.h, $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$inc/nccl.h" |
      paste -sd.) (NCCL_VERSION_CODE $code)"
  else
    echo "NCCL header: not found (NCCL_INCLUDE_DIR=$inc)"
  fi
  lib=$(ldd "$build/tests/ds_nccl_gpu_tests" 2>/dev/null | awk '/libnccl/ {print $3}')
  if [[ -n "$lib" && "$lib" != "not" ]]; then
    echo "NCCL library loaded by the tests: $lib -> $(readlink -f "$lib")"
  else
    echo "NCCL library: the tests do not resolve libnccl (ldd: $(ldd "$build/tests/ds_nccl_gpu_tests" 2>&1 | grep nccl))"
    fail_reasons+=("nccl_versions: libnccl does not load")
    return 1
  fi
  [[ -n "${NCCL_DEBUG:-}" ]] && echo "NCCL_DEBUG=$NCCL_DEBUG"
  return 0
}

# ctest with a label; fails on any failed, timed-out or not-built test and when none exist.
run_ctest() {
  local label=$1 name=$2
  shift 2
  local left
  left=$(remaining)
  if ((left < 30)); then
    fail_reasons+=("$name: no time left in the ${budget_s} s budget")
    return 1
  fi
  DS_REQUIRE_GPU=1 timeout "$left" ctest --test-dir "$build" -L "$label" "$@" --output-on-failure --no-tests=error \
    --timeout 300 -j "$test_jobs" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  local skipped
  skipped=$(grep -c '(Skipped)$' "$logs/$name.log")
  ((skipped > 0)) && note "$name: $skipped test(s) skipped (see the reasons above; multi-GPU tests need 2+ GPUs)"
  if ((rc == 124)); then
    fail_reasons+=("$name: cut off after ${left} s to stay in the budget")
    return 1
  elif ((rc != 0)); then
    local failed
    failed=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|Not Run\|SEGFAULT\|Subprocess aborted\|Exception\).*/\1/p' \
      "$logs/$name.log" | head -5 | paste -sd, -)
    fail_reasons+=("$name: tests failed: ${failed:-see $logs/$name.log}")
    return 1
  fi
}

check_ctest_gpu() { run_ctest gpu ctest_gpu; }
# The nccl unit tests (version decoding, runtime version readable) with the GPU build.
check_ctest_nccl_unit() { run_ctest unit ctest_nccl_unit -R '^Nccl'; }

is_required() { local s; for s in "${REQUIRED[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }

summary=()
stopped=""
for step in "${STEPS[@]}"; do
  if [[ -n "$stopped" ]]; then
    summary+=("$step: not run ($stopped failed)")
    continue
  fi
  echo "===== gpu-check: $step ====="
  start=$SECONDS
  if "check_$step"; then
    summary+=("$step: ok ($((SECONDS - start)) s)")
  else
    summary+=("$step: FAILED ($((SECONDS - start)) s)")
    is_required "$step" && stopped=$step
  fi
done

echo "===== gpu-check: summary ====="
for line in "${summary[@]}"; do note "$line"; done
note "total $((SECONDS - t0)) s (budget ${budget_s} s)"
if ((${#fail_reasons[@]} == 0)) && [[ -n "${DS_GPU_CHECK_STEPS:-}" ]]; then
  note "FAIL (only the steps ${STEPS[*]} ran, by DS_GPU_CHECK_STEPS; they passed)"
  exit 1
fi
if ((${#fail_reasons[@]} == 0)); then
  note "PASS"
  exit 0
fi
for r in "${fail_reasons[@]}"; do note "  - $r"; done
reasons=$(printf '%s; ' "${fail_reasons[@]}")
note "FAIL (${reasons%; })"
exit 1
