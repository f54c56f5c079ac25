#!/usr/bin/env bash
# Configures and builds dsperf into build/ (or $DS_BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. -DDS_WITH_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_BUILD_DIR:-$root/build}
jobs=${DS_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${DS_BUILD_TYPE:-RelWithDebInfo} "$@" >"$build.configure.log" 2>&1 || {
  cat "$build.configure.log"; echo "build: cmake configure failed (log above)" >&2; exit 1; }
grep -E '^-- DS_WITH_' "$build.configure.log" || true
cmake --build "$build" -j "$jobs"
