#!/usr/bin/env bash
# ctest install.prefix: `cmake --install` to a fresh prefix gives a tree that works on its own.
#   1. cmake --install BUILD --prefix <tmp>/a, then the tree is moved to <tmp>/b (relocatable);
#   2. in a private mount namespace with the source tree and the build folder hidden (an empty tmpfs
#      over each), the installed tools run: dsdiag --list, dsbench world --dry-run, dsreport --help,
#      every tool's --version (the project() version and a commit), `man -l` of the installed dsdiag.1,
#      dsperf-gpu-checks' figures.md (step a only);
#   3. a small CMake project finds the engine with find_package(dsperf) in the moved prefix, links
#      dsperf::dsengine, and prints ds::versionLine().
# Usage: install_test.sh BUILD_DIR. Exit 77 (ctest SKIP) when unshare -m is unavailable.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)
unshare -m true 2>/dev/null || { echo "SKIP: cannot create a mount namespace here (unshare -m needs root or CAP_SYS_ADMIN)"; exit 77; }
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds_install_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! cmake --install "$build" --prefix "$tmp/a" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"; echo "FAIL: cmake --install $build --prefix $tmp/a"; exit 1
fi
mv "$tmp/a" "$tmp/b"
p=$tmp/b
echo "installed and moved to $p: $(find "$p" -type f | wc -l) files"

# The consumer project of step 3, written before the source tree is hidden.
mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(dsperf REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE dsperf::dsengine)
CM
cat >"$tmp/consumer/main.cpp" <<'CPP'
#include <cstdio>
#include "engine/common/version.h"
int main() { std::printf("%s\n", ds::versionLine("consumer").c_str()); }
CPP

# A sanitizer build makes no man pages (cmake/Manpages.cmake); read here, before the build is hidden.
sanitize=$(sed -n 's/^DS_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
# Its programs read their suppression files from the source tree, which is about to be hidden: copies.
source "$src/scripts/sanitizers/env.sh"
ds_sanitizer_suppressions_in "$sanitize" "$src/scripts/sanitizers" "$tmp"
# Step 2 and 3 inside the namespace; the script is copied out of the tree it hides.
cat >"$tmp/inside.sh" <<'IN'
set -uo pipefail
p=$1 version=$2 tmp=$3 sanitize=$4  # sanitize: DS_SANITIZE of the build ("" for none)
fails=0
check() {  # description, expected text (a regex, may be empty), then the command
  local what=$1 want=$2 out rc
  shift 2
  out=$("$@" 2>&1); rc=$?
  if ((rc == 0)) && [[ -z "$want" || "$out" =~ $want ]]; then
    echo "ok: $what"
  else
    echo "FAIL: $what (exit $rc); its output:"; printf '%s\n' "$out" | head -20
    fails=$((fails + 1))
  fi
}
unset DS_BIN_DIR DS_TEST_DIR
export PATH=$p/bin:/usr/bin:/bin
check "dsdiag --list lists checks" 'env\.' dsdiag --list
check "dsbench world --dry-run shows discovery" 'RANK=0' env -u RANK -u WORLD_SIZE dsbench world --dry-run
check "dsreport --help" 'compare' dsreport --help
for t in dsrun dsdiag dsbench dsreport; do
  check "$t --version says $version and a commit" "^$t $version \\(git [0-9a-f]{7,}(-dirty)?\\)|^$t $version \\(git unknown\\)" "$t" --version
done
if [[ -n "$sanitize" ]]; then
  echo "skip: the man page of dsdiag (a sanitizer build makes no man pages, cmake/Manpages.cmake)"
else
  check "the man page of dsdiag renders from the prefix" 'pre-flight' env MANWIDTH=80 man -l "$p/share/man/man1/dsdiag.1"
fi
check "the JSON schema is installed" '"\$schema"' cat "$p/share/dsperf/schema/dsperf.schema.json"
# Only step a (quick with or without a GPU): the installed dsperf-gpu-checks finds the installed
# gpu_figures.py and writes figures.md.
check "dsperf-gpu-checks writes figures.md from the prefix" "wrote $tmp/gpu-out/figures.md" \
  bash -c "DS_GPU_CHECKS_STEPS=gpu_visible dsperf-gpu-checks '$tmp/gpu-out'; test -s '$tmp/gpu-out/figures.md'"
check "the Grafana dashboard is installed" '"uid": "dsperf-fleet"' cat "$p/share/dsperf/grafana/dsperf-dashboard.json"
if command -v promtool >/dev/null; then
  check "the installed alerting rules load in promtool" 'SUCCESS' promtool check rules "$p/share/dsperf/prometheus/dsperf-alerts.yml"
else
  check "the alerting rules are installed" 'alert: DsperfHostNotHealthy' cat "$p/share/dsperf/prometheus/dsperf-alerts.yml"
fi
check "find_package(dsperf) configures a consumer" '' cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$p"
check "the consumer builds against dsperf::dsengine" '' cmake --build "$tmp/consumer/build"
check "the consumer runs" "^consumer $version " "$tmp/consumer/build/consumer"
exit $((fails > 0))
IN
hide=("$src")
[[ "$build" == "$src"/* ]] || hide+=("$build")
mounts=""
for d in "${hide[@]}"; do mounts+="mount -t tmpfs none '$d' && "; done
unshare -m bash -c "mount --make-rprivate / && ${mounts}bash '$tmp/inside.sh' '$p' '$version' '$tmp' '$sanitize'"
rc=$?
((rc == 0)) && echo "install: PASS" || echo "install: FAIL"
exit $rc
