#!/usr/bin/env bash
# Configures and builds dsperf into build/ (or $DS_BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. -DDS_WITH_CUDA=OFF.
# --sanitize=address (ASan+UBSan) or --sanitize=thread (TSan) builds into build-asan/ or build-tsan/
# instead (still $DS_BUILD_DIR when set), with -DDS_SANITIZE=<mode> and without CUDA.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/sanitizers/env.sh"
ds_parse_sanitize_flag "$@"
if [[ -n "$sanitize" ]]; then
  ds_sanitizer_env "$sanitize" "$root/scripts/sanitizers"  # test discovery runs the test binaries
  args=(-DDS_SANITIZE="$sanitize" -DDS_WITH_CUDA=OFF ${args[@]+"${args[@]}"})
fi
default_build=$(ds_build_dir_for "$sanitize" "$root")
build=${DS_BUILD_DIR:-$default_build}
jobs=${DS_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${DS_BUILD_TYPE:-RelWithDebInfo} ${args[@]+"${args[@]}"} >"$build.configure.log" 2>&1 || {
  cat "$build.configure.log"; echo "build: cmake configure failed (log above)" >&2; exit 1; }
grep -E '^-- DS_(WITH_|SANITIZE)' "$build.configure.log" || true
cmake --build "$build" -j "$jobs"
