#!/usr/bin/env bash
# Soak and churn of the TcpStore server (a benchmark, not a test):
#   scripts/soak-store.sh [--seconds N | --quick] [ds_store_soak flags...]
# 1,024 well-behaved clients (4 processes x 256 threads) connect, do set/get/add/wait and disconnect,
# over and over; 16 victim processes at a time are SIGKILLed mid-request; 8 garbage senders send
# random bytes, bad handshakes and lying lengths. Prints operations per second, p99 latency, and
# the server's RSS and open descriptors at start and end; exits 1 if a well-behaved client saw an
# error or the server's descriptors or memory grew.
#   --seconds N   how long (default 60)       --quick   10 seconds
# Other flags go to ds_store_soak (--clients, --processes, --victims, --garbage, --rss-tolerance-mib).
# Uses $DS_BUILD_DIR (default build/) and builds ds_store_soak there if needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_BUILD_DIR:-$root/build}
seconds=60
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) seconds=10 ;;
    --seconds) seconds=${2:?--seconds needs a number}; shift ;;
    --seconds=*) seconds=${1#--seconds=} ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done

# 1,024 clients need 1,024+ descriptors in the server and a few hundred per client process.
want=8192
if [[ $(ulimit -n) -lt $want ]]; then
  if ! ulimit -n "$want" 2>/dev/null; then
    hard=$(ulimit -Hn)
    if [[ "$hard" != unlimited && "$hard" -lt 2048 ]]; then
      echo "soak-store.sh: the open-file limit is $(ulimit -n) (hard limit $hard); 1,024 clients need about 1,300." >&2
      echo "  Raise the hard limit (e.g. in /etc/security/limits.conf, or run as root), or pass --clients 256." >&2
      exit 2
    fi
    ulimit -n "$hard"
  fi
fi

bin=$build/bin/ds_store_soak
if [[ ! -x "$bin" ]]; then
  [[ -f "$build/CMakeCache.txt" ]] || { echo "soak-store.sh: no build in $build; run scripts/build.sh first" >&2; exit 2; }
  cmake --build "$build" --target ds_store_soak -j "${DS_JOBS:-2}" >/dev/null
fi
echo "soak-store.sh: $seconds s against a fresh server (ulimit -n $(ulimit -n))" >&2
exec "$bin" --seconds "$seconds" ${args[@]+"${args[@]}"}
