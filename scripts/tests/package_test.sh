#!/usr/bin/env bash
# ctest package.deb: the .deb and .tar.gz that cpack makes from this build (cmake/Packaging.cmake)
# install and run on their own.
#   1. cpack -G "DEB;TGZ" from BUILD_DIR's CPackConfig.cmake into a temporary folder;
#   2. the .deb's Depends come from dpkg-shlibdeps; every library that ldd resolves for its binaries
#      belongs to a package that Depends names (dpkg -S), so a machine with those packages has them all;
#   3. `dpkg -x` into an empty root; in a private mount namespace with the source tree and the build
#      folder hidden, the unpacked /usr/bin tools run: dsdiag --list, dsbench world --dry-run,
#      dsreport --help, and man -l of the unpacked dsdiag page;
#   4. the .tar.gz holds the same bin/ tools, and its README's apt-get line names every package the
#      .deb depends on (the tarball has no Depends; the cleannode test runs that line).
# Usage: package_test.sh BUILD_DIR. Exit 77 (ctest SKIP) when dpkg-deb, dpkg-shlibdeps or unshare -m
# are unavailable.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: package_test.sh BUILD_DIR}" && pwd)
for t in dpkg-deb dpkg-shlibdeps cpack; do
  command -v $t >/dev/null || { echo "SKIP: $t is not installed (apt-get install dpkg-dev)"; exit 77; }
done
unshare -m true 2>/dev/null || { echo "SKIP: cannot create a mount namespace here (unshare -m needs root or CAP_SYS_ADMIN)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds_package_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

start=$SECONDS
if ! cpack --config "$build/CPackConfig.cmake" -G "DEB;TGZ" -B "$tmp/out" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log"; echo "FAIL: cpack in $build"; exit 1
fi
deb=$(ls "$tmp"/out/*.deb 2>/dev/null | head -1)
tgz=$(ls "$tmp"/out/*.tar.gz 2>/dev/null | head -1)
[[ -f "$deb" && -f "$tgz" ]] || { cat "$tmp/cpack.log"; echo "FAIL: cpack made no .deb or .tar.gz"; exit 1; }
echo "cpack: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) and $(basename "$tgz") in $((SECONDS - start)) s"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# The package names of Depends (alternatives and versions dropped).
declare -A declared=()
for d in $(printf '%s' "$depends" | tr ',|' '\n\n' | sed 's/(.*)//; s/:.*//' | tr -d ' '); do declared[$d]=1; done
# What no linked library shows: an Open MPI singleton start (a rank without mpirun) needs orted and
# the help files (cmake/Packaging.cmake).
if ldd "$build/bin/dsbench" 2>/dev/null | grep -q libmpi; then
  for need in openmpi-bin openmpi-common; do
    [[ -n "${declared[$need]:-}" ]] || { echo "FAIL: the .deb links Open MPI but its Depends lack $need (Depends: $depends)"; exit 1; }
  done
fi

# A library may also come from what a declared package depends on (libopenblas0 is provided by
# libopenblas0-pthread or another variant): one level of the declared packages' own Depends counts.
declare -A via=()
for d in "${!declared[@]}"; do
  for dd in $(dpkg-query -W -f='${Depends}' "$d" 2>/dev/null | tr ',|' '\n\n' | sed 's/(.*)//; s/:.*//' | tr -d ' '); do
    [[ -n "${declared[$dd]:-}" ]] || via[$dd]=$d
  done
done

root=$tmp/root
dpkg -x "$deb" "$root"
for b in dsrun dsdiag dsbench dsreport; do
  [[ -x "$root/usr/bin/$b" ]] || fail "the .deb has no /usr/bin/$b"
done
# 2. Every library a binary links directly (its NEEDED entries; their own dependencies are their
# packages' business) comes from a declared package.
declare -A checked=()
for f in "$root"/usr/bin/* "$root"/usr/libexec/dsperf/*; do
  [[ -f "$f" ]] && head -c 4 "$f" | grep -q ELF || continue
  needed=" $(objdump -p "$f" | awk '$1 == "NEEDED" { printf "%s ", $2 }')"
  while read -r lib path; do
    [[ "$needed" == *" $lib "* ]] || continue
    [[ -z "$path" || -n "${checked[$path]:-}" ]] && continue
    checked[$path]=1
    real=$(readlink -f "$path")
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
    [[ -z "$pkg" ]] && pkg=$(dpkg -S "$real" 2>/dev/null | head -1 | cut -d: -f1)
    if [[ -z "$pkg" ]]; then
      fail "$(basename "$f") loads $lib from $path, which no Debian package owns"
    elif [[ -z "${declared[$pkg]:-}" && -z "${via[$pkg]:-}" ]]; then
      fail "$(basename "$f") loads $lib from package $pkg, which the .deb's Depends lacks (Depends: $depends)"
    fi
  done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done
echo "ldd: ${#checked[@]} directly linked libraries, each from a package that Depends names (or one of its dependencies)"

# 3. The unpacked tools run with the source tree and the build folder hidden. A sanitizer build makes
# no man pages (cmake/Manpages.cmake); read here, before the build is hidden.
sanitize=$(sed -n 's/^DS_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
# Its programs read their suppression files from the source tree, which is about to be hidden: copies.
source "$src/scripts/sanitizers/env.sh"
ds_sanitizer_suppressions_in "$sanitize" "$src/scripts/sanitizers" "$tmp"
cat >"$tmp/inside.sh" <<'IN'
set -uo pipefail
root=$1 sanitize=$2  # sanitize: DS_SANITIZE of the build ("" for none)
fails=0
check() {
  local what=$1 want=$2 out rc
  shift 2
  out=$("$@" 2>&1); rc=$?
  if ((rc == 0)) && [[ "$out" =~ $want ]]; then echo "ok: $what"; else
    echo "FAIL: $what (exit $rc):"; printf '%s\n' "$out" | head -20; fails=$((fails + 1)); fi
}
unset DS_BIN_DIR DS_TEST_DIR
export PATH=$root/usr/bin:/usr/bin:/bin
check "dsdiag --list from the .deb" 'env\.' dsdiag --list
check "dsbench world --dry-run from the .deb" 'rank|RANK' env -u RANK -u WORLD_SIZE dsbench world --dry-run
check "dsreport --help from the .deb" 'compare' dsreport --help
page=$(ls "$root"/usr/share/man/man1/dsdiag.1* 2>/dev/null | head -1)
if [[ -n "$sanitize" ]]; then
  echo "skip: man -l of the .deb's dsdiag page (a sanitizer build makes no man pages, cmake/Manpages.cmake)"
else
  check "man -l of the .deb's dsdiag page" 'pre-flight' env MANWIDTH=80 man -l "${page:-$root/usr/share/man/man1/dsdiag.1}"
fi
check "the .deb's Grafana dashboard" '"uid": "dsperf-fleet"' cat "$root/usr/share/dsperf/grafana/dsperf-dashboard.json"
check "the .deb's Prometheus alerting rules" 'alert: DsperfHostNotHealthy' cat "$root/usr/share/dsperf/prometheus/dsperf-alerts.yml"
exit $((fails > 0))
IN
hide=("$src")
[[ "$build" == "$src"/* ]] || hide+=("$build")
mounts=""
for d in "${hide[@]}"; do mounts+="mount -t tmpfs none '$d' && "; done
unshare -m bash -c "mount --make-rprivate / && ${mounts}bash '$tmp/inside.sh' '$root' '$sanitize'" || fails=$((fails + 1))

# 4. The tarball has the tools too.
listing=$(tar -tzf "$tgz")
for b in dsrun dsdiag dsbench dsreport; do
  grep -q "/bin/$b\$" <<<"$listing" || fail "$(basename "$tgz") has no bin/$b"
done
for f in share/dsperf/grafana/dsperf-dashboard.json share/dsperf/prometheus/dsperf-alerts.yml; do
  grep -q "/$f\$" <<<"$listing" || fail "$(basename "$tgz") has no $f"
done
# The tarball's README (packaging/tarball/README) names every package of the .deb's Depends in its
# apt-get line, except the C and C++ runtimes every Debian node has; the cleannode test runs that line.
readme=$(tar -xzOf "$tgz" --wildcards '*/README' 2>/dev/null)
line=" $(grep -m 1 -E '^[[:space:]]*apt-get install ' <<<"$readme") "
if [[ "$line" == "  " ]]; then
  fail "$(basename "$tgz") has no README with an 'apt-get install' line at its top (packaging/tarball/README)"
else
  for d in "${!declared[@]}"; do
    case $d in libc6|libgcc-s1|libstdc++6) continue ;; esac
    # A sanitizer build's .deb also needs the sanitizers' run-time libraries; the README is the
    # release build's.
    if [[ -n "$sanitize" && "$d" =~ ^lib(asan|ubsan|tsan|lsan)[0-9]*$ ]]; then
      echo "skip: $d in the tarball's README (a run-time library of this $sanitize sanitizer build only)"
      continue
    fi
    [[ "$line" == *" $d "* ]] || fail "the tarball's README does not name $d, which the .deb depends on (packaging/tarball/README)"
  done
fi
((fails == 0)) && echo "package: PASS" || echo "package: FAIL ($fails problems)"
exit $((fails > 0))
