#!/usr/bin/env bash
# ctest package.clean_node (label cleannode): the .deb, the tarball and the bundle on a clean Debian
# node, as a new user would meet them (issue 42, item 4). Each gets its own fresh root, a debootstrap
# minbase of this machine's Debian release (nothing of our build tree in it), where a new user
# (dsuser, not root) runs, from the installed files only:
#   dsdiag --version and dsdiag (no FAIL; mpi.start PASS where MPI is in the build),
#   dsrun --nproc-per-node 2 --standalone dsdiag --world,
#   dsrun --nproc-per-node 2 --standalone dsbench coll --backend gloo,shm,
#   mpirun -np 2 dsbench coll --backend mpi, and dsbench coll --backend mpi alone (an Open MPI
#   singleton, which docs/install.md promises),
#   dsreport html of all of it.
#   1. the bundle (scripts/bundle.sh --cpu-only, the configuration shipped: no mpi backend) on a root
#      with nothing installed: dsdiag, --world, gloo and shm sweeps, --backend mpi refused with a
#      sentence, run-gpu-checks.sh ending in FAIL (gpu_visible); its files are rendered by the .deb
#      root's dsreport, as docs/gpu-nodes.md says (the bundle carries no dsreport);
#   2. the .deb: `apt-get install ./dsperf_*.deb` (its Depends come from the registry);
#   3. the tarball: unpacked under /opt, its README's `apt-get install` line run as written.
# Every step is checked by its exit status and by what it wrote (the JSON read back on this side).
#
# Packages come from the Debian registry: the mirror is the first URI of this release's main suite in
# this machine's apt sources. The minbase root is made once and kept as a tarball in
# ${DS_CLEANNODE_CACHE:-~/.cache/dsperf}, keyed by suite, architecture and debootstrap version (delete
# it to make a new one); downloaded .debs are kept beside it (apt-archives-<suite>), so a second run
# fetches only the registry's index. Every root is a fresh copy in a temporary folder, its mounts
# (/proc, /sys read-only, a tmpfs /dev/shm, the .deb cache) live in a private mount namespace and are
# unmounted on every way out, and the folder is removed.
#
# Usage: clean_node_test.sh BUILD_DIR. DS_CLEANNODE_BUNDLE=DIR takes an existing bundle instead of
# building one (scripts/bundle.sh --cpu-only --build-dir BUILD_DIR-bundle-cpu; a compile on the
# first run); DS_CLEANNODE_ONLY="bundle deb tarball" runs some parts only.
# Exit 77 (ctest SKIP) with one sentence when not root, when debootstrap is missing and cannot be
# installed, when this is not Debian, or when the registry cannot be reached.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: clean_node_test.sh BUILD_DIR}" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "the clean-node test needs root (debootstrap, chroot and mounts); run it as root."
# shellcheck source=/dev/null
. /etc/os-release 2>/dev/null || true
[[ "${ID:-}" == debian && -n "${VERSION_CODENAME:-}" ]] ||
  skip "this is not Debian (/etc/os-release: ${PRETTY_NAME:-unknown}); the clean-node root is a Debian minbase of the release the .deb was built on."
suite=$VERSION_CODENAME
if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
    skip "debootstrap is not installed and apt-get install debootstrap failed (scripts/setup.sh installs it)."
fi
for t in cpack dpkg-deb unshare chroot python3; do
  command -v $t >/dev/null || skip "$t is not installed (scripts/setup.sh installs what the tests need)."
done

# This machine's mirror for $suite main: deb822 .sources first, then one-line .list files.
mirror_of() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk -v s="$1" 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; suite = 0; main = 0; deb = 0; on = 1
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[ \t]*#/ || $i !~ /:/) continue
          key = $i; sub(/:.*/, "", key); val = $i; sub(/^[^:]*:[ \t]*/, "", val)
          n = split(val, w, /[ \t]+/)
          if (key == "URIs") uri = w[1]
          for (j = 1; j <= n; j++) {
            if (key == "Suites" && w[j] == s) suite = 1
            if (key == "Components" && w[j] == "main") main = 1
            if (key == "Types" && w[j] == "deb") deb = 1
          }
          if (key == "Enabled" && val == "no") on = 0
        }
        if (uri != "" && suite && main && deb && on) { print uri; exit }
      }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v s="$1" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) == s) for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i; exit } }'
}
mirror=$(mirror_of "$suite" | head -n 1)
[[ -n "$mirror" ]] || skip "no '$suite main' source in this machine's apt sources (/etc/apt/sources.list.d, /etc/apt/sources.list), so there is no mirror to build the root from."

# Everything else happens in a private mount namespace: the roots' mounts vanish with this process
# whatever ends it; the trap below also unmounts them before the folder is removed.
if [[ -z "${DS_CLEANNODE_NS:-}" ]]; then
  DS_CLEANNODE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds_clean_node.XXXXXX")
roots=()
umount_root() {
  local r=$1 m
  for m in var/cache/apt/archives dev/shm sys proc; do
    mountpoint -q "$r/$m" 2>/dev/null && { umount "$r/$m" 2>/dev/null || umount -l "$r/$m"; }
  done
}
cleanup() {
  local r
  for r in ${roots[@]+"${roots[@]}"}; do umount_root "$r"; done
  if findmnt -rn -o TARGET | grep -q "^$tmp/"; then
    echo "clean-node: something is still mounted under $tmp; not removing it"
  else
    rm -rf --one-file-system "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

/usr/lib/apt/apt-helper download-file "$mirror/dists/$suite/InRelease" "$tmp/InRelease" >"$tmp/reach.log" 2>&1 ||
  skip "the Debian registry cannot be reached ($mirror/dists/$suite/InRelease: $(tail -n 1 "$tmp/reach.log"))."

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
t_all=$SECONDS
only=${DS_CLEANNODE_ONLY:-bundle deb tarball}
wants() { [[ " $only " == *" $1 "* ]]; }

# --- The minbase root, made once ----------------------------------------------------------------
cache=${DS_CLEANNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsperf}
arch=$(dpkg --print-architecture)
dbver=$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null)
base=$cache/minbase-$suite-$arch-debootstrap${dbver:-unknown}.tar.gz
archives=$cache/apt-archives-$suite-$arch
mkdir -p "$cache" "$archives/partial"
t=$SECONDS
exec 9>"$cache/.minbase.lock"
flock 9
if [[ ! -s "$base" ]]; then
  echo "clean-node: no cached root ($base): debootstrap --variant=minbase $suite from $mirror"
  mk=$tmp/mk
  if ! debootstrap --variant=minbase --arch="$arch" "$suite" "$mk" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
    tail -n 15 "$tmp/debootstrap.log"
    echo "FAIL: debootstrap --variant=minbase $suite from $mirror failed (log above)"; exit 1
  fi
  rm -f "$mk"/var/cache/apt/archives/*.deb
  tar -C "$mk" --numeric-owner -czf "$base.part" . && mv "$base.part" "$base"
  rm -rf --one-file-system "$mk"
  echo "clean-node: minbase root made and cached in $((SECONDS - t)) s ($(du -m "$base" | cut -f1) MiB)"
else
  echo "clean-node: minbase root from the cache ($base)"
fi
flock -u 9

# A fresh root: the cached minbase, this machine's resolver and hosts, a user, the mounts.
new_root() {
  local r=$tmp/$1
  mkdir -p "$r"
  tar -C "$r" --numeric-owner -xpzf "$base" || { echo "FAIL: cannot unpack $base"; exit 1; }
  roots+=("$r")
  cp -L /etc/resolv.conf "$r/etc/resolv.conf"
  cp -L /etc/hosts "$r/etc/hosts"
  mount -t proc proc "$r/proc"
  mount -t sysfs -o ro sysfs "$r/sys"
  mount -t tmpfs -o mode=1777,size=1g tmpfs "$r/dev/shm"  # the shm backend's segments
  mount --bind "$archives" "$r/var/cache/apt/archives"
  chroot "$r" useradd -m -s /bin/bash dsuser || { echo "FAIL: useradd in the $1 root"; exit 1; }
}
# As root in the root (apt): name, seconds, command.
as_root() {
  local r=$1 lim=$2
  shift 2
  timeout -k 5 "$lim" chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}
# One step as the new user, in its home: root, what, seconds, the regex its output must match, and
# the shell command (PATH is the root's plus $upath). Prints ok/FAIL with the time.
upath=""
step() {
  local r=$1 what=$2 lim=$3 want=$4 cmd=$5 out rc t=$SECONDS
  out=$(timeout -k 5 "$lim" chroot --userspec=dsuser:dsuser "$r" env -i HOME=/home/dsuser USER=dsuser \
    LOGNAME=dsuser LANG=C.UTF-8 PATH="${upath:+$upath:}/usr/local/bin:/usr/bin:/bin" \
    bash -c "cd ~ && $cmd" 2>&1)
  rc=$?
  printf '%s\n' "$out" >>"$r.log"
  if ((rc == 0)) && [[ "$out" =~ $want ]]; then
    echo "ok: $what ($((SECONDS - t)) s)"
    return 0
  fi
  if ((rc == 124 || rc == 137)); then
    fail "$what: did not end within $lim s. Its last lines:"
  elif ((rc != 0)); then
    fail "$what: exit $rc. Its last lines:"
  else
    fail "$what: exit 0, but its output lacks /$want/. Its last lines:"
  fi
  printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
  return 1
}
# What a step wrote, read back here: root, kind, file (under the user's home), arguments.
check_file() {
  local r=$1 kind=$2 f=$3 out
  shift 3
  out=$(python3 - "$kind" "$r/home/dsuser/$f" "$@" <<'PY' 2>&1
import json, sys
kind, path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
name = path.split("/home/dsuser/", 1)[1]
try:
    text = open(path, encoding="utf-8", errors="replace").read()
except OSError as e:
    sys.exit(f"{name} was not written ({e.strerror})")
if kind == "html":
    missing = [w for w in args if w not in text]
    if not text.rstrip().endswith("</html>") or missing:
        sys.exit(f"{name} ({len(text)} bytes) is not a whole report naming {', '.join(args)}: missing {missing}")
    print(f"{name}: {len(text) // 1024} KiB of HTML naming {', '.join(args)}")
    sys.exit(0)
doc = json.loads(text)
if kind == "diag":
    # args: the check ids that must PASS
    checks = doc.get("checks", [])
    bad = [f"{c['id']} ({c['message'][:100]})" for c in checks if c.get("status") == "FAIL"]
    if bad:
        sys.exit(f"{name}: FAIL in " + "; ".join(bad))
    status = {c["id"]: c["status"] for c in checks if "rank" not in c or c.get("rank") == 0}
    notpass = [f"{i}={status.get(i, 'absent')}" for i in args if status.get(i) != "PASS"]
    if notpass:
        sys.exit(f"{name}: expected PASS of {', '.join(notpass)}")
    n = {s: sum(1 for c in checks if c.get("status") == s) for s in ("PASS", "WARN", "SKIP")}
    print(f"{name}: {len(checks)} checks, no FAIL ({n['PASS']} PASS, {n['WARN']} WARN, {n['SKIP']} SKIP), world size {doc.get('world_size')}")
elif kind == "sweep":
    # args: world size, then the backends that must have rows
    world, backends = int(args[0]), args[1:]
    rows = doc.get("results", [])
    status = doc.get("summary", {}).get("status")
    seen = sorted({r["backend"] for r in rows})
    wrong = [r for r in rows if r.get("world_size") != world]
    if status != "ok" or sorted(backends) != seen or wrong:
        sys.exit(f"{name}: status {status}, backends {seen} (want {sorted(backends)}), "
                 f"{len(wrong)} rows not at world size {world}; error: {doc.get('summary', {}).get('error', '')}")
    print(f"{name}: {len(rows)} rows, status ok, backends {', '.join(seen)}, world size {world}")
else:
    sys.exit(f"unknown kind {kind}")
PY
  )
  local rc=$?
  if ((rc == 0)); then echo "   $out"; else fail "$out"; fi
}

# The steps every installed form runs: root, label (for the messages), whether mpi is in the build.
common_steps() {
  local r=$1 form=$2 mpi=$3 mpistart=""
  [[ $mpi == yes ]] && mpistart="mpi.start"
  step "$r" "$form: dsdiag --version" 30 'dsdiag [0-9]+\.[0-9]+\.[0-9]+' "dsdiag --version"
  step "$r" "$form: dsdiag" 120 'PASS' "dsdiag --fail-on fail --json diag.json" &&
    check_file "$r" diag diag.json $mpistart
  step "$r" "$form: dsrun --nproc-per-node 2 --standalone dsdiag --world" 180 'PASS' \
    "dsrun --nproc-per-node 2 --standalone dsdiag --world --fail-on fail --json world.json" &&
    check_file "$r" diag world.json
  step "$r" "$form: dsbench coll --backend gloo,shm at 2 ranks under dsrun" 180 'busbw|algbw' \
    "dsrun --nproc-per-node 2 --standalone dsbench coll --backend gloo,shm -b 8 -e 1M -f 8 -J s.json" &&
    check_file "$r" sweep s.json 2 gloo shm
}

# --- 1. The bundle ------------------------------------------------------------------------------
bundle_out=""
if wants bundle; then
  t=$SECONDS
  bundle=${DS_CLEANNODE_BUNDLE:-}
  if [[ -z "$bundle" ]]; then
    bundle=$tmp/bundle-dist
    if "$src/scripts/bundle.sh" --cpu-only --build-dir "$build-bundle-cpu" --out "$bundle" >"$tmp/bundle.log" 2>&1; then
      echo "bundle: scripts/bundle.sh --cpu-only --build-dir $build-bundle-cpu in $((SECONDS - t)) s: $(tail -n 2 "$tmp/bundle.log" | head -n 1)"
    else
      tail -n 20 "$tmp/bundle.log"; fail "scripts/bundle.sh --cpu-only did not make a bundle (log above)"; bundle=""
    fi
  fi
  if [[ -n "$bundle" ]]; then
    t=$SECONDS
    new_root bundle
    r=$tmp/bundle
    cp -a "$bundle" "$r/opt/dsperf-bundle"
    echo "bundle root: fresh minbase with the bundle in /opt/dsperf-bundle ($((SECONDS - t)) s)"
    mpi=no
    grep -q 'mpi backend: left out' "$bundle/MANIFEST" || mpi=yes
    upath=/opt/dsperf-bundle/bin
    common_steps "$r" bundle $mpi
    if [[ $mpi == no ]]; then
      step "$r" "bundle: dsbench coll --backend mpi says the bundle has no mpi backend" 60 'mpi' \
        "! dsbench coll --backend mpi -b 8 -e 64K -f 8"
    fi
    step "$r" "bundle: run-gpu-checks.sh ends with 'gpu-checks: FAIL (gpu_visible)' without a GPU" 120 \
      'gpu-checks: FAIL \(gpu_visible\)' "/opt/dsperf-bundle/run-gpu-checks.sh gpu-out; test \$? -eq 1"
    bundle_out=$tmp/bundle-out
    mkdir -p "$bundle_out"
    cp "$r"/home/dsuser/{diag.json,world.json,s.json} "$bundle_out/" 2>/dev/null
    cp "$r"/home/dsuser/gpu-out/summary.json "$bundle_out/" 2>/dev/null
    umount_root "$r"
    rm -rf --one-file-system "$r"
    echo "bundle: $((SECONDS - t)) s on its root"
  fi
fi

# --- 2. The .deb and 3. the tarball, from one cpack run -----------------------------------------
if wants deb || wants tarball; then
  t=$SECONDS
  if ! cpack --config "$build/CPackConfig.cmake" -G "DEB;TGZ" -B "$tmp/out" >"$tmp/cpack.log" 2>&1; then
    tail -n 20 "$tmp/cpack.log"; echo "FAIL: cpack in $build (log above)"; exit 1
  fi
  deb=$(ls "$tmp"/out/*.deb 2>/dev/null | head -n 1)
  tgz=$(ls "$tmp"/out/*.tar.gz 2>/dev/null | head -n 1)
  [[ -f "$deb" && -f "$tgz" ]] || { tail -n 20 "$tmp/cpack.log"; echo "FAIL: cpack made no .deb or .tar.gz"; exit 1; }
  echo "cpack: $(basename "$deb") and $(basename "$tgz") in $((SECONDS - t)) s"
  mpi=no
  dpkg-deb -f "$deb" Depends | grep -q libopenmpi && mpi=yes
fi

mpi_steps() {
  local r=$1 form=$2
  # A chroot shares this machine's network: another job may hold the default MASTER_PORT (29500),
  # which dsbench's store takes under mpirun too; a free port keeps the step about the package.
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
  step "$r" "$form: mpirun -np 2 dsbench coll --backend mpi" 180 'busbw|algbw' \
    "MASTER_PORT=$port mpirun --allow-run-as-root --oversubscribe -np 2 dsbench coll --backend mpi -b 8 -e 1M -f 8 -J m.json" &&
    check_file "$r" sweep m.json 2 mpi
  step "$r" "$form: dsbench coll --backend mpi started alone (an Open MPI singleton)" 120 'busbw|algbw' \
    "dsbench coll --backend mpi -b 8 -e 64K -f 8 -J m1.json" &&
    check_file "$r" sweep m1.json 1 mpi
}
report_step() {
  local r=$1 form=$2
  shift 2
  step "$r" "$form: dsreport html of its diag, world and sweeps" 120 'html' \
    "dsreport html diag.json world.json s.json $* -o report.html && ls report.html" &&
    check_file "$r" html report.html gloo shm ${mpi/yes/mpi}
}

if wants deb; then
  t=$SECONDS
  new_root deb
  r=$tmp/deb
  cp "$deb" "$r/tmp/"
  if as_root "$r" 300 apt-get update -qq >"$tmp/deb-apt.log" 2>&1 &&
    as_root "$r" 600 apt-get install -y "/tmp/$(basename "$deb")" >>"$tmp/deb-apt.log" 2>&1; then
    echo "ok: deb: apt-get install ./$(basename "$deb") in a fresh root ($((SECONDS - t)) s: $(grep -E '^[0-9]+ upgraded' "$tmp/deb-apt.log"))"
    upath=""
    common_steps "$r" deb $mpi
    [[ $mpi == yes ]] && mpi_steps "$r" deb
    extra=""
    [[ $mpi == yes ]] && extra="m.json"
    report_step "$r" deb $extra
    if [[ -n "$bundle_out" ]]; then
      mkdir -p "$r/home/dsuser/bundle-out"
      cp "$bundle_out"/* "$r/home/dsuser/bundle-out/" && chroot "$r" chown -R dsuser: /home/dsuser/bundle-out
      step "$r" "bundle's files brought back: the .deb's dsreport html renders them (docs/gpu-nodes.md)" 120 'html' \
        "cd bundle-out && dsreport html * -o bundle.html" && check_file "$r" html bundle-out/bundle.html gloo shm gpu_checks
    fi
  else
    tail -n 20 "$tmp/deb-apt.log"
    fail "deb: apt-get install ./$(basename "$deb") failed in a fresh root (log above)"
  fi
  umount_root "$r"
  rm -rf --one-file-system "$r"
  echo "deb: $((SECONDS - t)) s on its root"
fi

if wants tarball; then
  t=$SECONDS
  new_root tarball
  r=$tmp/tarball
  tar -C "$r/opt" -xzf "$tgz"
  top=$(tar -tzf "$tgz" | head -n 1 | cut -d/ -f1)
  readme=$r/opt/$top/README
  if [[ ! -f "$readme" ]]; then
    fail "tarball: $(basename "$tgz") has no README at its top ($top/README) to say what a node needs"
  else
    # The README's own command, as written (one line that starts with apt-get install).
    install=$(grep -m 1 -E '^[[:space:]]*apt-get install ' "$readme" | sed 's/^[[:space:]]*//')
    if [[ -z "$install" ]]; then
      fail "tarball: its README has no 'apt-get install' line for the runtime packages"
    elif as_root "$r" 300 apt-get update -qq >"$tmp/tgz-apt.log" 2>&1 &&
      as_root "$r" 600 bash -c "$install -y" >>"$tmp/tgz-apt.log" 2>&1; then
      echo "ok: tarball: unpacked in /opt and the README's '$(cut -c1-60 <<<"$install")...' run ($((SECONDS - t)) s)"
      upath=/opt/$top/bin
      common_steps "$r" tarball $mpi
      [[ $mpi == yes ]] && mpi_steps "$r" tarball
      extra=""
      [[ $mpi == yes ]] && extra="m.json"
      report_step "$r" tarball $extra
    else
      tail -n 20 "$tmp/tgz-apt.log"
      fail "tarball: the README's '$install' failed in a fresh root (log above)"
    fi
  fi
  umount_root "$r"
  rm -rf --one-file-system "$r"
  echo "tarball: $((SECONDS - t)) s on its root"
fi

echo "clean-node: $((SECONDS - t_all)) s in all"
((fails == 0)) && echo "clean-node: PASS" || echo "clean-node: FAIL ($fails problems)"
((fails == 0))
