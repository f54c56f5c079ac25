#!/usr/bin/env bash
# Runs one libFuzzer target for a while:  scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags...]
#   TARGET   a fuzz target (store_server_fuzz, env_discovery_fuzz, slurm_lists_fuzz,
#            cuda_visible_fuzz, nccl_ifname_fuzz, explain_fuzz, run_file_fuzz, nccl_tests_import_fuzz);
#            `scripts/fuzz.sh --list` lists them
#   SECONDS  how long to fuzz (libFuzzer's -max_total_time)
# Builds the target first in build-fuzz/ (clang, -DDS_FUZZ=ON; $DS_FUZZ_BUILD_DIR overrides).
# Seeds come from the target's corpus/ and regressions/ folders in the repo; new inputs go to
# build-fuzz/fuzz-corpus/TARGET (kept between runs), crashes to build-fuzz/fuzz-artifacts/TARGET/.
# LeakSanitizer is on; each input may take at most 10 s and the process 2 GiB.
# Exit status: 0 when the time ran out without a finding, libFuzzer's (non-zero) when it found one.
# A crash reproducer, once fixed, belongs in the target's regressions/ folder: ctest replays it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_FUZZ_BUILD_DIR:-$root/build-fuzz}

fuzz_dir_of() {  # the repo folder holding <target>.cpp
  local f
  f=$(cd "$root" && ls -d engine/*/fuzz/"$1".cpp diag/fuzz/"$1".cpp reports/fuzz/"$1".cpp 2>/dev/null | head -1)
  [[ -n "$f" ]] && dirname "$f"
}

if [[ "${1:-}" == "--list" ]]; then
  (cd "$root" && ls engine/*/fuzz/*_fuzz.cpp diag/fuzz/*_fuzz.cpp reports/fuzz/*_fuzz.cpp 2>/dev/null) |
    sed 's|.*/||; s|\.cpp$||'
  exit 0
fi
if [[ $# -lt 2 || ! "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   (scripts/fuzz.sh --list shows the targets)" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
dir=$(fuzz_dir_of "$target") || true
if [[ -z "$dir" ]]; then
  echo "fuzz.sh: there is no fuzz target '$target'; these exist:" >&2
  "$0" --list >&2
  exit 2
fi
short=${target%_fuzz}

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ is missing; libFuzzer comes with clang (apt-get install clang)" >&2
  exit 2
fi
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DDS_FUZZ=ON -DDS_WITH_CUDA=OFF -DDS_WITH_MPI=OFF -DDS_WITH_GLOO=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; echo "fuzz.sh: configure failed (log above)" >&2; exit 1; }
fi
if [[ -z "${DS_FUZZ_NO_BUILD:-}" ]]; then  # set it to run the binary as it is
  cmake --build "$build" --target "$target" -j "${DS_JOBS:-2}" >/dev/null || {
    echo "fuzz.sh: building $target failed; run: cmake --build $build --target $target" >&2; exit 1; }
fi

work=$build/fuzz-corpus/$target
artifacts=$build/fuzz-artifacts/$target
mkdir -p "$work" "$artifacts"
seeds=("$root/$dir/corpus/$short")
[[ -d "$root/$dir/regressions/$short" ]] && seeds+=("$root/$dir/regressions/$short")
flags=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -detect_leaks=1 -print_final_stats=1
       -artifact_prefix="$artifacts/")
[[ -f "$root/$dir/$short.dict" ]] && flags+=(-dict="$root/$dir/$short.dict")
# Per-target defaults (e.g. -max_len for texts pasted whole), one flag per line.
if [[ -f "$root/$dir/$short.options" ]]; then
  while read -r opt; do [[ -n "$opt" && "$opt" != \#* ]] && flags+=("$opt"); done <"$root/$dir/$short.options"
fi
log=$build/fuzz-$target.log
echo "fuzz.sh: $target for ${seconds}s; corpus $work; log $log" >&2
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} nice -n 10 "$build/bin/$target" "${flags[@]}" "$@" \
  "$work" "${seeds[@]}" 2>&1 | tee "$log" | grep -E '^(#[0-9]+ +(INITED|DONE)|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written)' 
rc=${PIPESTATUS[0]}
set -e
# The figures: executions, coverage (cov: edges, ft: features), corpus size.
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
echo "fuzz.sh: $target: ${execs:-?} executions; last status: ${last:-none}" >&2
if [[ $rc -ne 0 ]]; then
  echo "fuzz.sh: $target found a problem (exit $rc); the reproducer is in $artifacts/ (see $log)" >&2
fi
exit "$rc"
