#!/usr/bin/env bash
# ctest bundle.self_contained: proves that scripts/bundle.sh makes a bundle that runs where the Debian
# packages it carries are missing. To stay within CI time it packages the binaries of this build
# (--from-build; no CUDA compile) rather than building the GPU bundle, so the packaging, the RPATHs,
# the launcher (with its search order for libnccl) and the allowlist are what is tested, on the CPU steps.
#   1. ldd of every bundled binary resolves each library inside the bundle or on the allowlist;
#   2. in a private mount namespace where every system copy of a bundled library is hidden (an empty
#      file bind-mounted over it), this build's own dsdiag no longer starts, while the bundle's dsdiag
#      (local), and dsbench coll --backend gloo and shm at 2 ranks under the bundle's dsrun, run;
#   3. the bundle's run-gpu-checks.sh ends with `gpu-checks: FAIL (gpu_visible)` here (no GPU), says
#      so, and writes a summary.json that dsreport html reads and a figures.md that says what is missing.
# Usage: bundle_test.sh BUILD_DIR. Exit 77 (ctest SKIP) when unshare -m or patchelf is unavailable.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: bundle_test.sh BUILD_DIR}" && pwd)
command -v patchelf >/dev/null || { echo "SKIP: patchelf is not installed (scripts/setup.sh installs it)"; exit 77; }
unshare -m true 2>/dev/null || { echo "SKIP: cannot create a mount namespace here (unshare -m needs root or CAP_SYS_ADMIN)"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds_bundle_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # description, then the command; counts a failure
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

# A CPU build is enough; CI time allows no CUDA compile. No size limit: this build carries OpenBLAS
# and Open MPI, which the GPU bundle leaves out (its 48 MiB are checked by scripts/bundle.sh itself).
if ! "$root/scripts/bundle.sh" --from-build "$build" --out "$tmp/bundle" --max-mib 1000 >"$tmp/bundle.log" 2>&1; then
  cat "$tmp/bundle.log"
  echo "FAIL: scripts/bundle.sh --from-build $build did not make a bundle"
  exit 1
fi
cat "$tmp/bundle.log"
b=$tmp/bundle

# 1. Every library resolves inside the bundle or is on the allowlist.
source "$root/scripts/bundle/allowlist.sh"
ldd_ok() {
  local f bad=0 name path
  for f in "$b/libexec/"* "$b/lib/"*; do
    while read -r name path _; do
      [[ -z "$name" || "$name" == /* || "$name" =~ $ds_allowed_re ]] && continue
      if [[ "$(readlink -f "$path")" != "$b/lib/"* ]]; then
        echo "  $(basename "$f"): $name resolves to '$path', outside the bundle"
        bad=1
      fi
    done < <(ldd "$f" | sed 's/=>//; s/(0x[0-9a-f]*)//')
  done
  return $bad
}
check "ldd: every bundled binary and library resolves inside the bundle or on the allowlist" ldd_ok
check "RPATH of the binaries is \$ORIGIN/../lib" bash -c "readelf -d '$b/libexec/dsdiag' | grep -q 'RPATH.*\\\$ORIGIN/../lib'"

check "the README says what the node needs, with the glibc floor of MANIFEST filled in" \
  bash -c "grep -q \"at least as new as this bundle asks for: \$(sed -n 's/^the node needs at least: //p' '$b/MANIFEST')\" '$b/README' && ! grep -q '@NEEDS@' '$b/README'"
ln -s "$b/bin/dsdiag" "$tmp/dsdiag-link"
check "a symlink to a launcher runs its tool" bash -c "DS_BUNDLE_QUIET=1 '$tmp/dsdiag-link' --list | grep -q gpu.ecc"

# 2. Hide every system copy of what the bundle carries (MANIFEST: "  libfmt.so.9 <- /lib/...").
hidden=()
while read -r _ _ path; do
  hidden+=("$path" "$(readlink -f "$path")")
done < <(grep ' <- ' "$b/MANIFEST")
((${#hidden[@]} > 0)) || { echo "FAIL: the MANIFEST lists no bundled library"; exit 1; }
: >"$tmp/empty"
cat >"$tmp/inside.sh" <<EOF
set -u
for p in $(printf '%q ' "${hidden[@]}"); do
  mount --bind "$tmp/empty" "\$p" || { echo "cannot hide \$p"; exit 90; }
done
# This build's dsdiag uses the system copies: it must no longer start.
if "$build/bin/dsdiag" --list >/dev/null 2>"$tmp/system.err"; then echo "the system copies are not hidden"; exit 91; fi
echo "system dsdiag without its libraries: \$(head -n 1 "$tmp/system.err")"
"$b/bin/dsdiag" --json "$tmp/diag.json" >"$tmp/diag.out" 2>&1
rc=\$?
((rc <= 2)) || { cat "$tmp/diag.out"; echo "bundled dsdiag exit \$rc"; exit 92; }
for be in gloo shm; do
  "$b/bin/dsrun" --standalone --nproc-per-node 2 -- "$b/bin/dsbench" coll --backend \$be -b 8 -e 64K -f 8 -n 3 -w 1 \
    -J "$tmp/sweep-\$be.json" >"$tmp/\$be.out" 2>&1 || { cat "$tmp/\$be.out"; echo "bundled dsbench --backend \$be failed"; exit 93; }
done
exit 0
EOF
env -u LD_LIBRARY_PATH -u DS_BUNDLE_LIBS unshare -m bash "$tmp/inside.sh" >"$tmp/inside.out" 2>&1
rc=$?
cat "$tmp/inside.out"
check "inside a namespace with ${#hidden[@]} system library paths hidden: bundled dsdiag, dsbench gloo and shm run (exit $rc)" \
  test "$rc" -eq 0
check "bundled dsdiag wrote its JSON" test -s "$tmp/diag.json"
check "bundled dsbench wrote the gloo and shm sweeps" test -s "$tmp/sweep-gloo.json" -a -s "$tmp/sweep-shm.json"

# The launcher's search order for the libraries the node provides: DS_NCCL_LIB, then the python's
# nvidia packages, then the CUDA toolkit; it names the one it used.
mkdir -p "$tmp/fake/share/dsperf" "$tmp/site/nvidia/nccl/lib" "$tmp/override" "$tmp/cuda/lib64"
cp "$root/scripts/bundle/find-libs.sh" "$tmp/fake/share/dsperf/"
echo libnccl.so.2 >"$tmp/fake/share/dsperf/runtime-libs"
: >"$tmp/site/nvidia/nccl/lib/libnccl.so.2"
: >"$tmp/override/libnccl.so.2"
: >"$tmp/cuda/lib64/libnccl.so.2"
found_by() {  # the launcher's line, with the given extra variables
  env -u DS_BUNDLE_LIBS -u DS_NCCL_LIB PYTHONPATH="$tmp/site" CUDA_HOME="$tmp/cuda" "$@" bash -c \
    'source "$1/share/dsperf/find-libs.sh"; ds_bundle_find_libs "$1" 2>&1; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"' _ "$tmp/fake"
}
if python3 -c 'import nvidia' 2>/dev/null; then
  echo "skipped the python-package case: this python already has nvidia packages"
else
  out_py=$(found_by)
  echo "$out_py"
  check "the launcher takes libnccl from the python's nvidia packages" \
    grep -q "libnccl.so.2 from $tmp/site/nvidia/nccl/lib (python3's nvidia packages)" <<<"$out_py"
fi
out_override=$(found_by DS_NCCL_LIB="$tmp/override")
echo "$out_override"
check "DS_NCCL_LIB comes first" \
  grep -q "libnccl.so.2 from $tmp/override (\$DS_NCCL_LIB)" <<<"$out_override"
check "its folder is put on LD_LIBRARY_PATH" grep -q "^LD_LIBRARY_PATH=$tmp/override" <<<"$out_override"
out_cuda=$(found_by PYTHONPATH=/nonexistent DS_PYTHON=/nonexistent/python3)
echo "$out_cuda"
check "without an override or a python package, the CUDA toolkit" \
  grep -q "libnccl.so.2 from $tmp/cuda/lib64 (the CUDA toolkit)" <<<"$out_cuda"
rm "$tmp/cuda/lib64/libnccl.so.2"
out_none=$(found_by DS_PYTHON=/nonexistent/python3)
echo "$out_none"
check "nowhere: it says NOT FOUND and what to set" grep -q "NOT FOUND: libnccl.so.2.*set DS_NCCL_LIB" <<<"$out_none"

# 3. run-gpu-checks.sh inside the bundle, on this machine without a GPU.
# (The issue asks for an end within 10 s; the time is printed, not asserted: a loaded CI machine is
# no place for timing assertions. The 60 s bound only catches a wait.)
start=$SECONDS
env PATH=/usr/bin:/bin timeout 60 "$b/run-gpu-checks.sh" "$tmp/gpu-out" >"$tmp/gpu.out" 2>&1
rc=$?
echo "run-gpu-checks.sh without a GPU took $((SECONDS - start)) s"
tail -n 4 "$tmp/gpu.out"
check "run-gpu-checks.sh exits 1 without a GPU (exit $rc)" test "$rc" -eq 1
check "its last line is 'gpu-checks: FAIL (gpu_visible)'" test "$(tail -n 1 "$tmp/gpu.out")" = "gpu-checks: FAIL (gpu_visible)"
check "it says there is no GPU" grep -q 'no GPU' "$tmp/gpu.out"
check "no step after gpu_visible ran" bash -c "! grep -q '===== gpu-checks: dsdiag' '$tmp/gpu.out'"
check "it wrote summary.json" test -s "$tmp/gpu-out/summary.json"
check "it wrote at most 8 files" test "$(ls -1 "$tmp/gpu-out" | wc -l)" -le 8
check "it wrote figures.md with the bundle's gpu_figures.py, and says where" \
  grep -q "gpu-checks: wrote $tmp/gpu-out/figures.md" "$tmp/gpu.out"
check "figures.md has gpu_visible's FAIL and says the sweep is missing" bash -c "
  grep -q '^| gpu_visible | FAIL |.*no GPU' '$tmp/gpu-out/figures.md' &&
  grep -q 'Missing:\*\* the NCCL sweep: sweep-nccl.json is missing' '$tmp/gpu-out/figures.md'"
check "figures.md names the bundle's source revision from its MANIFEST" \
  grep -q "bundle of $(sed -n 's/^source: //p' "$b/MANIFEST") (MANIFEST)" "$tmp/gpu-out/figures.md"
if python3 -c 'import jsonschema' 2>/dev/null; then
  check "summary.json validates against reports/schema/dsperf.schema.json" python3 -c '
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' \
    "$tmp/gpu-out/summary.json" "$root/reports/schema/dsperf.schema.json"
fi
check "dsreport html turns summary.json into a report" \
  "$build/bin/dsreport" html "$tmp/gpu-out/summary.json" -o "$tmp/report.html"

((fails == 0)) && echo "bundle test: all checks passed" || echo "bundle test: $fails check(s) failed"
((fails == 0))
