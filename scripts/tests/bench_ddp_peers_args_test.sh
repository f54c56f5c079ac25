#!/usr/bin/env bash
# bench_ddp_peers.bad_flags: scripts/bench-ddp-peers.sh refuses bad flag values before it builds or
# runs anything: exit 1 and a sentence naming the flag and what it takes. Usage: $0
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
fail=0
# check WANT ARGS...: the script must exit 1 within seconds, say WANT, and leave --out empty.
check() {
  local want=$1; shift
  local msg rc
  # --no-build: a value the script failed to refuse ends in "dsbench is missing", never in a build.
  msg=$(DS_BUILD_DIR="$out_dir/no-build" timeout 20 bash "$here/../bench-ddp-peers.sh" --no-build --out "$out_dir/run" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || ! grep -qF -- "$want" <<<"$msg"; then
    echo "FAIL: bench-ddp-peers.sh $* exited $rc (want 1) saying: $msg"
    echo "      (want it to say: $want)"
    fail=1
  elif [ -e "$out_dir/run" ]; then
    echo "FAIL: bench-ddp-peers.sh $* created its output folder before refusing the flag"; fail=1
  else
    echo "ok: $* -> $msg"
  fi
}
check "--rounds '0' must be a whole number of at least 1; see --help." --rounds 0
check "--rounds '-1' must be a whole number of at least 1; see --help." --rounds -1
check "--rounds 'abc' must be a whole number of at least 1; see --help." --rounds abc
check "--rounds '' must be a whole number of at least 1" --rounds ""
check "--rounds needs a value" --rounds
check "--steps '0' must be a whole number of at least 1" --steps 0
check "--warmup 'x' must be a whole number" --warmup x
check "--placements 'bound' must be names from unbound mpirun-default shared-core hog" --placements bound
check "--placements 'unbound,' must be names from" --placements unbound,
check "--gradient-as-bucket-view 'yes' must be off, on or both" --gradient-as-bucket-view yes
check "--backends must include gloo" --backends shm
check "unknown argument '--round'" --round 3
[ $fail = 0 ] && echo PASS
exit $fail
