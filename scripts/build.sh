#!/usr/bin/env bash
# Configures and builds dsperf into build/ (or $DS_BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. -DDS_WITH_CUDA=OFF.
# --target NAME (repeatable) builds only those targets (scripts/demo.sh builds the four tools it runs).
# --sanitize=address (ASan+UBSan) or --sanitize=thread (TSan) builds into build-asan/ or build-tsan/
# instead (still $DS_BUILD_DIR when set), with -DDS_SANITIZE=<mode>, without CUDA, and with clang when
# it is installed (DS_SANITIZER_CC=gcc for GCC).
# --verbose shows the compiler's output as it comes; by default the build is quiet: progress on one
# line, the full log in <build>.build.log (named at the end), and any warning or error printed from it.
# DS_WARNINGS_FAIL=1 in the environment makes a build with any compiler warning fail (CI: .ci/run). It
# reads the log, so compiler-cache hits count too (ccache replays their warnings) and the compile lines
# stay those of every other build; -DDS_WERROR=ON (cmake/Warnings.cmake) is the compiler's -Werror.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/sanitizers/env.sh"
ds_parse_sanitize_flag "$@"
set -- ${args[@]+"${args[@]}"}
args=()
targets=()
verbose=0
while (($#)); do
  case "$1" in
    --target)
      (($# >= 2)) || { echo "build: --target needs a target name, e.g. --target dsdiag" >&2; exit 1; }
      targets+=(--target "$2"); shift 2 ;;
    --target=*) targets+=(--target "${1#--target=}"); shift ;;
    --verbose|-v) verbose=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -n "$sanitize" ]]; then
  ds_sanitizer_env "$sanitize" "$root/scripts/sanitizers"  # test discovery runs the test binaries
  args=(-DDS_SANITIZE="$sanitize" -DDS_WITH_CUDA=OFF ${args[@]+"${args[@]}"})
fi
default_build=$(ds_build_dir_for "$sanitize" "$root")
build=${DS_BUILD_DIR:-$default_build}
jobs=${DS_JOBS:-$(nproc)}
# Ninja when it is installed (setup.sh installs it): it starts a target's compiles before the libraries
# it links are done and has no recursive-make overhead, so 2 cores stay busy. A build folder keeps the
# generator it was first configured with (cmake refuses to switch one).
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
# Unity builds (CMake compiles each target's sources 16 to a file): a cold build takes half the CPU,
# since the heavy headers (nlohmann/json in 180 files, gtest, fmt) are parsed once per batch, not per
# file (docs/dev/testing.md); 16 took about a fifth less compile CPU than CMake's default of 8. A new build folder gets one unless DS_UNITY=0; an existing folder keeps
# what it has unless DS_UNITY says otherwise. One edited file rebuilds its batch, so a developer who
# rebuilds often may prefer DS_UNITY=0. Both kinds must compile: CI builds unity, most of us don't.
unity=()
if [[ -n "${DS_UNITY:-}" ]]; then
  [[ "$DS_UNITY" =~ ^[01]$ ]] || { echo "build: DS_UNITY='$DS_UNITY' must be 1 (unity build) or 0 (one file at a time)" >&2; exit 1; }
  unity=(-DCMAKE_UNITY_BUILD=$([[ $DS_UNITY == 1 ]] && echo ON || echo OFF) -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
elif [[ ! -f "$build/CMakeCache.txt" ]]; then
  unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
fi
# A new sanitizer build folder is compiled with clang when it is installed (scripts/setup.sh installs
# it): it compiles ASan+UBSan code in about two thirds of GCC's time (docs/dev/testing.md), and its
# UBSan also checks float-to-integer casts, which GCC's does not.
# DS_SANITIZER_CC=gcc keeps GCC; an existing folder keeps the compiler it was configured with.
compiler=()
if [[ -n "$sanitize" && ! -f "$build/CMakeCache.txt" ]]; then
  case "${DS_SANITIZER_CC:-clang}" in
    clang)
      if command -v clang++ >/dev/null && command -v clang >/dev/null; then
        compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
        # lld links a test binary in a third of ld.bfd's time (ds_diag_tests: 0.37 s against 1.27 s).
        if command -v ld.lld >/dev/null; then
          compiler+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
                     -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
        fi
      else
        echo "build: clang is not installed, so the $sanitize build uses GCC (twice as slow to compile; scripts/setup.sh installs clang)" >&2
      fi ;;
    gcc) ;;
    *) echo "build: DS_SANITIZER_CC='$DS_SANITIZER_CC' must be clang (the default) or gcc" >&2; exit 1 ;;
  esac
fi
cmake -S "$root" -B "$build" ${generator[@]+"${generator[@]}"} ${unity[@]+"${unity[@]}"} ${compiler[@]+"${compiler[@]}"} -DCMAKE_BUILD_TYPE=${DS_BUILD_TYPE:-RelWithDebInfo} ${args[@]+"${args[@]}"} >"$build.configure.log" 2>&1 || {
  cat "$build.configure.log"; echo "build: cmake configure failed (log above)" >&2; exit 1; }
grep -E '^-- DS_(WITH_|SANITIZE)' "$build.configure.log" || true

if ((verbose)); then
  exec cmake --build "$build" -j "$jobs" ${targets[@]+"${targets[@]}"}
fi

log=$build.build.log
start=$SECONDS
# Progress: the build tool's "[ 42%] Building CXX object ..." lines, rewritten in place on a terminal;
# elsewhere (CI, a pipe) one line per tenth of the way, so logs stay short.
progress() {
  local line tty=0 width=${COLUMNS:-100} last=-1 pct=0
  [[ -t 1 ]] && tty=1
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    # Make: "[ 42%] Building ..."; Ninja: "[123/456] Building ...".
    if [[ "$line" =~ ^\[\ *([0-9]+)%\]\ (.*)$ ]]; then
      pct=${BASH_REMATCH[1]}
    elif [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
      pct=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
    else
      continue
    fi
    if ((tty)); then
      printf '\r\033[K%s' "${line:0:$((width - 1))}"
    else
      ((pct / 10 > last)) && { last=$((pct / 10)); echo "build: ${pct}%"; }
    fi
  done
  ((tty)) && printf '\r\033[K'
  return 0
}
: >"$log"
set +e
cmake --build "$build" -j "$jobs" ${targets[@]+"${targets[@]}"} 2>&1 | progress
rc=${PIPESTATUS[0]}
set -e
warnings=$(grep -c 'warning:' "$log" || true)
if ((rc != 0)); then
  echo "build: FAILED (exit $rc) after $((SECONDS - start)) s. The errors, from $log:" >&2
  grep -E -B2 -A6 'error:|Error [0-9]+|undefined reference|CMake Error|^FAILED:' "$log" | sed -n 1,80p >&2 || tail -40 "$log" >&2
  echo "build: the full log is $log" >&2
  exit "$rc"
fi
if ((warnings > 0)); then
  echo "build: $warnings compiler warning(s) (the first ones below; all of them in $log):" >&2
  grep -E -A3 'warning:' "$log" | sed -n 1,40p >&2
  if [[ "${DS_WARNINGS_FAIL:-0}" == 1 ]]; then
    echo "build: FAILED: DS_WARNINGS_FAIL=1 and the compiler warned $warnings time(s); fix them (the log: $log)" >&2
    exit 1
  fi
fi
what="everything"
((${#targets[@]})) && what=$(printf '%s ' "${targets[@]}" | sed 's/--target //g; s/ $//')
echo "build: built $what in $build in $((SECONDS - start)) s; the full log is $log"
