#!/usr/bin/env bash
# The fleet targets of issue 26, measured on the namespace fleet (diag/tests/fleet.sh): runs each
# scenario of the long fleet suite R times on 16 and on 64 hosts and prints one table: for the
# healthy fleet, the runs that named anybody; for each fault, the runs that named the right host (or
# link) and no innocent one, the runs with an innocent named, and rank 0's run times.
#   scripts/fleet-targets.sh [--rounds R] [--hosts 16,64] [--scenarios Healthy,SlowNic,...] [--out FILE]
#   scripts/fleet-targets.sh --from FILE
# --rounds: runs per scenario and size (default 20); --hosts: fleet sizes (default 16,64);
# --scenarios: test names of ds_diag_fleet_tests (default: the healthy fleet and every single fault);
# --out: where the per-run JSON lines go (default build/fleet-targets.jsonl; appended to).
# --from: runs nothing; prints the table of the records already in FILE (DS_FLEET_RESULTS of any run,
# e.g. `DS_FLEET_RESULTS=FILE ctest -L fleet` repeated: each run is one round of every scenario).
# Uses $DS_BUILD_DIR (default build/) and builds dsdiag and ds_diag_fleet_tests there if needed.
# Needs root (network namespaces). Slow on a small machine: 64 dsdiag ranks share its cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=20 hosts=16,64 out="" from=""
scenarios=Healthy,SlowNic,CutOneWay,CutBothWays,CutByBlackholeRoute,CutLink,MtuSwitchPort,MtuHost,Ifname,PacketLoss,Delay,CpuStarved,FrozenBySigstop,KilledBySigkill
all="Healthy SlowNic CutOneWay CutBothWays CutByBlackholeRoute CutLink MtuSwitchPort MtuHost Ifname PacketLoss Delay CpuStarved FrozenBySigstop KilledBySigkill SeveralFaultsAtOnce FourRanksPerHostSlowNic"
die() { echo "fleet-targets.sh: $1" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while (($#)); do
  case $1 in
    --rounds) need "$@"; rounds=$2; shift 2 ;;
    --hosts) need "$@"; hosts=$2; shift 2 ;;
    --scenarios) need "$@"; scenarios=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --from) need "$@"; from=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'; the flags are --rounds R, --hosts 16,64, --scenarios A,B, --out FILE and --from FILE" ;;
  esac
done
table_py='
import json, statistics, sys
rows = {}
for line in sys.stdin:
    r = json.loads(line)
    rows.setdefault((r["scenario"], r["hosts"], r["ranks"]), []).append(r)
print("| scenario | hosts | ranks | runs | right, no innocent | innocent named | no fleet verdict | s median | s max | within 60 s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (name, hosts, ranks), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    secs = [r["seconds"] for r in rs]
    nofleet = sum(1 for r in rs if not r["fleet"])
    right = "%d" % sum(1 for r in rs if r["right"])
    if not rs[0]["expected"] and not rs[0].get("expected_links"):
        right += " (named nobody)"
    print("| %s | %d | %d | %d | %s | %d | %d | %.1f | %.1f | %d |" % (
        name, hosts, ranks, len(rs), right, sum(1 for r in rs if r["innocent"]), nofleet,
        statistics.median(secs), max(secs), sum(1 for s in secs if s <= 60)))
'
table() {  # table FILE FIRST_LINE: one row per scenario and size from the records after FIRST_LINE
  tail -n +"$(($2 + 1))" "$1" | python3 -c "$table_py"
}
if [[ -n "$from" ]]; then
  [[ -r "$from" ]] || die "--from: cannot read '$from'; give the file DS_FLEET_RESULTS wrote"
  python3 -c "import json,sys
for n, line in enumerate(open(sys.argv[1]), 1):
    try: json.loads(line)
    except ValueError: sys.exit('fleet-targets.sh: --from: line %d of %s is not a JSON record (a run cut off while writing?); remove it and run again' % (n, sys.argv[1]))" "$from" || exit 2
  table "$from" 0
  exit 0
fi
[[ "$rounds" =~ ^[0-9]+$ ]] && ((rounds >= 1)) || die "--rounds '$rounds' must be a whole number of at least 1"
IFS=, read -ra sizes <<<"$hosts"
((${#sizes[@]})) || die "--hosts is empty; give sizes like 16,64"
for h in "${sizes[@]}"; do
  [[ "$h" =~ ^[0-9]+$ ]] && ((h >= 4 && h <= 250)) || die "--hosts: '$h' is not a fleet size from 4 to 250"
done
IFS=, read -ra names <<<"$scenarios"
((${#names[@]})) || die "--scenarios is empty; give test names like Healthy,SlowNic"
for s in "${names[@]}"; do
  [[ " $all " == *" $s "* || "$s" == FleetStage.* ]] ||
    die "--scenarios: '$s' is not a fleet scenario; choose from: $all (or FleetStage.RankIsNamed/<freeze or exit>_<stage>)"
done
((EUID == 0)) || die "needs root: the fleet is made of network namespaces"

build=${DS_BUILD_DIR:-$root/build}
[[ -f "$build/CMakeCache.txt" ]] || die "no build in $build; run scripts/build.sh first (or set DS_BUILD_DIR)"
cmake --build "$build" --target dsdiag ds_diag_fleet_tests -j "${DS_JOBS:-2}" >/dev/null
out=${out:-$build/fleet-targets.jsonl}
start_line=0
[[ -f "$out" ]] && start_line=$(wc -l <"$out")

for h in "${sizes[@]}"; do
  for s in "${names[@]}"; do
    filter="Fleet.$s"
    [[ "$s" == FleetStage.* ]] && filter="Stages/$s"
    echo "fleet-targets.sh: $s on $h hosts, $rounds run(s)" >&2
    DS_FLEET_HOSTS=$h DS_FLEET_RESULTS=$out DS_BIN_DIR=$build/bin DS_TEST_DIR=$build/tests \
      "$build/tests/ds_diag_fleet_tests" --gtest_filter="$filter" --gtest_repeat="$rounds" >"$build/fleet-targets.log" 2>&1 || true
  done
done

table "$out" "$start_line"
echo "fleet-targets.sh: per-run records in $out; the last test log in $build/fleet-targets.log" >&2
