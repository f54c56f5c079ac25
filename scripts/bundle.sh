#!/usr/bin/env bash
# Builds a relocatable, self-contained dsperf for GPU nodes that lack our Debian packages (and often
# any network): dsrun, dsdiag, dsbench with CUDA and NCCL, the gpu test binaries, run-gpu-checks.sh,
# the torch peer scripts and the figures' Markdown writer, in one folder to copy (docs/gpu-nodes.md).
#
# Usage: scripts/bundle.sh [--out DIR] [--cuda-arch LIST] [--cpu-only] [--from-build DIR]
#                          [--build-dir DIR] [--max-mib N]
#   --out DIR          the bundle folder, replaced (default <repo>/dsperf-bundle)
#   --cuda-arch LIST   CMAKE_CUDA_ARCHITECTURES, e.g. 90 (H100/H200, the default), 80 (A100), "80;90"
#   --cpu-only         without CUDA and NCCL (what the self-containment test bundles: no CUDA build)
#   --from-build DIR   package the binaries of an existing build folder instead of building
#   --build-dir DIR    where to build (default <repo>/build-bundle[-cpu])
#   --max-mib N        fail when the bundle is larger (default 48)
# Environment: DS_JOBS (parallel build jobs, default nproc).
#
# Layout: bin/<tool> (launchers: they find libnccl/libcublas, then run libexec/<tool>), libexec/ (the
# binaries, RPATH $ORIGIN/../lib), lib/ (every library they need that is not on the allowlist),
# share/dsperf/ (find-libs.sh, runtime-libs, peers/*.py, gpu_figures.py), run-gpu-checks.sh, MANIFEST,
# README (packaging/bundle/README: what the node needs, with the glibc/libstdc++ floor filled in). The allowlist
# (what the node provides) is in scripts/bundle/allowlist.sh.
# The mpi backend is left out (-DDS_WITH_MPI=OFF): Open MPI finds its plugins, help files and
# configuration through paths fixed at its install, so a copied libmpi does not start. CPU GEMMs use
# the netlib BLAS (-DDS_BLAS=reference, 0.5 MiB): OpenBLAS alone is 36 MiB; GPU GEMMs use cuBLAS.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/dsperf-bundle
archs=90
cuda=ON
from_build=""
build=""
max_mib=48
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while (($# > 0)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --cuda-arch) archs=$2; shift 2 ;;
    --cpu-only) cuda=OFF; shift ;;
    --from-build) from_build=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --max-mib) max_mib=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$archs" =~ ^[0-9]+[a-z]?(;[0-9]+[a-z]?)*$ ]] || {
  echo "bundle: --cuda-arch '$archs' is not a CMake architecture list such as 90 or \"80;90\"" >&2; exit 2; }
[[ "$max_mib" =~ ^[0-9]+$ ]] || { echo "bundle: --max-mib '$max_mib' is not a whole number of MiB" >&2; exit 2; }
for tool in patchelf ldd strip objdump; do
  command -v "$tool" >/dev/null || { echo "bundle: $tool is missing (scripts/setup.sh installs it)" >&2; exit 2; }
done
t0=$SECONDS

# shellcheck source=bundle/allowlist.sh
source "$root/scripts/bundle/allowlist.sh"

tools=(dsrun dsdiag dsbench)
gpu_tests=(ds_nccl_gpu_tests ds_ddp_gpu_tests)
if [[ -n "$from_build" ]]; then
  build=$(cd "$from_build" && pwd)
else
  suffix=""
  [[ $cuda == OFF ]] && suffix=-cpu
  build=${build:-$root/build-bundle$suffix}
  # Build time (a cold build of the ~127 translation units these targets need): -O2, as the tree's
  # own RelWithDebInfo, not Release's -O3 (slower to compile; the GPU checks time GPU work); Ninja
  # where installed (one graph for all five targets: no serial tail per target as make's). ccache
  # (CMakeLists.txt) serves a second bundle build, in any checkout; it cannot reuse the main build's
  # objects, whose command lines differ in DS_WITH_MPI and MPI's include folders (PUBLIC on dsengine).
  # A unity build does not compile yet: files share names in anonymous namespaces (signalName in
  # engine/launch/launcher.cpp and failure_report.cpp).
  gen=()
  if command -v ninja >/dev/null && ! grep -qs '^CMAKE_GENERATOR:INTERNAL=' "$build/CMakeCache.txt"; then
    gen=(-G Ninja)
  fi
  echo "bundle: configuring $build (-O2, CUDA $cuda, sm $archs, MPI off, reference BLAS)"
  cmake -S "$root" -B "$build" ${gen[@]+"${gen[@]}"} -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    "-DCMAKE_CUDA_FLAGS_RELEASE=-O2 -DNDEBUG" -DCMAKE_UNITY_BUILD=OFF \
    -DDS_WITH_MPI=OFF -DDS_BLAS=reference -DDS_WITH_CUDA=$cuda -DDS_WITH_NCCL=$cuda \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs" >"$build.configure.log" 2>&1 || {
    tail -n 30 "$build.configure.log"; echo "bundle: cmake configure failed (log: $build.configure.log)" >&2; exit 1; }
  targets=("${tools[@]}")
  [[ $cuda == ON ]] && targets+=("${gpu_tests[@]}")
  load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
  echo "bundle: building ${targets[*]} with ${DS_JOBS:-$(nproc)} jobs"
  tb=$SECONDS
  cmake --build "$build" -j "${DS_JOBS:-$(nproc)}" --target "${targets[@]}" >"$build.build.log" 2>&1 || {
    grep -E 'error' "$build.build.log" | sed -n 1,20p; echo "bundle: build failed (log: $build.build.log)" >&2; exit 1; }
  echo "bundle: built in $((SECONDS - tb)) s (load average before: $load)"
fi

rm -rf "$out"
mkdir -p "$out/bin" "$out/libexec" "$out/lib" "$out/share/dsperf/peers"
for t in "${tools[@]}"; do
  [[ -x "$build/bin/$t" ]] || { echo "bundle: $build/bin/$t is missing: build it first" >&2; exit 1; }
  cp "$build/bin/$t" "$out/libexec/"
  cp "$root/scripts/bundle/launch.sh" "$out/bin/$t"
done
for t in "${gpu_tests[@]}"; do
  if [[ -x "$build/tests/$t" ]]; then
    cp "$build/tests/$t" "$out/libexec/"
  elif [[ $cuda == ON && -z "$from_build" ]]; then
    echo "bundle: $build/tests/$t was not built" >&2; exit 1
  fi
done
chmod +x "$out/bin/"*

# Every library the binaries resolve (ldd lists the whole closure), except the allowlist, goes to lib/.
declare -A copied=()
runtime=()
for f in "$out/libexec/"*; do
  while read -r name path _; do
    [[ -z "$name" || "$name" == /* ]] && continue
    if [[ "$name" =~ $ds_allowed_re ]]; then
      if [[ "$name" =~ $ds_runtime_re ]] && [[ ! " ${runtime[*]-} " == *" $name "* ]]; then runtime+=("$name"); fi
      continue
    fi
    if [[ "$path" == "not" || -z "$path" ]]; then
      echo "bundle: $(basename "$f") needs $name, which is not found on this machine" >&2; exit 1
    fi
    [[ -n "${copied[$name]:-}" ]] && continue
    cp -L "$path" "$out/lib/$name"
    chmod u+w "$out/lib/$name"
    copied[$name]=$path
  done < <(ldd "$f" | sed 's/=>//; s/(0x[0-9a-f]*)//')
done
# libnccl and libcublas are opened at run time (dlopen), so ldd does not list them: the build names them
# in dlopen-libs (cmake/Dependencies.cmake), and the launcher must find them like the linked ones.
if [[ -f "$build/dlopen-libs" ]]; then
  while read -r name; do
    if [[ -n "$name" && ! " ${runtime[*]-} " == *" $name "* ]]; then runtime+=("$name"); fi
  done <"$build/dlopen-libs"
fi
printf '%s\n' ${runtime[@]+"${runtime[@]}"} >"$out/share/dsperf/runtime-libs"

# RPATH (not RUNPATH) on the binaries: it also applies to the libraries they load, and wins over an
# LD_LIBRARY_PATH that points at the node's own, possibly different, copies.
for f in "$out/libexec/"*; do
  strip --strip-unneeded "$f"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$out/lib/"*; do
  strip --strip-unneeded "$f" 2>/dev/null || true
  patchelf --force-rpath --set-rpath '$ORIGIN' "$f"
done

cp "$root/scripts/bundle/find-libs.sh" "$out/share/dsperf/"
cp "$root/scripts/bundle/peers/"*.py "$out/share/dsperf/peers/"
cp "$root/scripts/bundle/gpu_figures.py" "$out/share/dsperf/"
cp "$root/scripts/run-gpu-checks.sh" "$out/"
chmod +x "$out/run-gpu-checks.sh"

# The newest glibc and libstdc++ symbol versions any bundled file asks for: the node's must be as new.
needs=$(for f in "$out/libexec/"* "$out/lib/"*; do objdump -T "$f" 2>/dev/null; done |
  grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -u -V |
  awk -F_ '{ last[$1] = $0 } END { printf "%s %s %s", last["GLIBC"], last["GLIBCXX"], last["CXXABI"] }')
{
  echo "dsperf bundle"
  echo "source: $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  if [[ -n "$from_build" ]]; then
    echo "packaged from the build $build, with its own options (not the GPU bundle's)"
  else
    echo "cuda: $cuda (architectures $archs); mpi backend: left out; CPU BLAS: netlib reference"
  fi
  echo "built against: $(ldd --version | head -n 1)"
  echo "the node needs at least: $needs"
  echo "bundled libraries:"
  for name in $(printf '%s\n' "${!copied[@]}" | sort); do echo "  $name <- ${copied[$name]}"; done
  echo "found on the node at run time: ${runtime[*]-none}"
} >"$out/MANIFEST"
sed "s|@NEEDS@|$needs|" "$root/packaging/bundle/README" >"$out/README"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "bundle: $out: $mib MiB ($bytes bytes, stripped), ${#copied[@]} bundled libraries, built in $((SECONDS - t0)) s"
echo "bundle: found on the node at run time: ${runtime[*]-none}; the node needs at least $needs"
if ((bytes > max_mib * 1048576)); then
  echo "bundle: $mib MiB is over the limit of $max_mib MiB; the largest files:" >&2
  du -ab "$out" | sort -rn | sed -n '2,9p' >&2
  exit 1
fi
