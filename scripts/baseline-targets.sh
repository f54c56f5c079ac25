#!/usr/bin/env bash
# Issue 28's fleet target, measured on the namespace fleet (diag/tests/fleet.sh): fleet-mode dsdiag
# runs of a healthy fleet build a baseline (`dsreport baseline`), then more healthy runs and runs with
# one host's NIC slowed (tc tbf, 30 mbit) are each checked against it (`dsreport check`, one run at a
# time, k = n = 1). Prints one line per checked run and the totals: slowed hosts flagged (target:
# every one) and healthy hosts flagged (target: none).
#   scripts/baseline-targets.sh [--hosts 16] [--baseline-runs 10] [--check-runs 20] [--slow-runs 10]
#                               [--rules FILE] [--keep DIR] [--reuse]
# --rules: a rules file for baseline and check (default: the built-in rules); --keep: where the runs,
# the baseline and the verdicts go (default: a new folder under build/); --reuse: judge the runs
# already in --keep again (other rules, a newer dsreport) instead of running the fleet. Uses $DS_BUILD_DIR (default
# build/) and builds dsdiag, dsreport and ds_diag_fleet_smoke_tests there if needed. Needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hosts=16 base_runs=10 check_runs=20 slow_runs=10 rules="" keep="" reuse=0
die() { echo "baseline-targets.sh: $1" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while (($#)); do
  case $1 in
    --hosts) need "$@"; hosts=$2; shift 2 ;;
    --baseline-runs) need "$@"; base_runs=$2; shift 2 ;;
    --check-runs) need "$@"; check_runs=$2; shift 2 ;;
    --slow-runs) need "$@"; slow_runs=$2; shift 2 ;;
    --rules) need "$@"; rules=$2; shift 2 ;;
    --keep) need "$@"; keep=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'; the flags are --hosts, --baseline-runs, --check-runs, --slow-runs, --rules, --keep and --reuse" ;;
  esac
done
for v in hosts base_runs check_runs slow_runs; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v//_/-} '${!v}' must be a whole number"
done
((hosts >= 4 && hosts <= 250)) || die "--hosts '$hosts' must be from 4 to 250"
((base_runs >= 1)) || die "--baseline-runs must be at least 1"
[[ -z "$rules" || -r "$rules" ]] || die "--rules '$rules' is not a readable file"
((reuse)) && [[ -z "$keep" ]] && die "--reuse needs --keep DIR (the folder of an earlier run)"
((EUID == 0 || reuse)) || die "needs root: the fleet is made of network namespaces"

build=${DS_BUILD_DIR:-$root/build}
[[ -f "$build/CMakeCache.txt" ]] || die "no build in $build; run scripts/build.sh first (or set DS_BUILD_DIR)"
cmake --build "$build" --target dsdiag dsreport ds_diag_fleet_smoke_tests -j "${DS_JOBS:-2}" >/dev/null
keep=${keep:-$build/baseline-targets-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$keep/healthy" "$keep/slow"
rm -rf "$keep/checks" && mkdir -p "$keep/checks"
rule_args=()
[[ -n "$rules" ]] && rule_args=(--rules "$rules")

fleet() {  # fleet <test> <runs> <keep dir>
  ((${2} > 0)) || return 0
  echo "baseline-targets.sh: $1 on $hosts hosts, $2 run(s)" >&2
  DS_FLEET_HOSTS=$hosts DS_FLEET_KEEP=$3 DS_FLEET_RESULTS=$keep/results.jsonl DS_BIN_DIR=$build/bin \
    DS_TEST_DIR=$build/tests "$build/tests/ds_diag_fleet_smoke_tests" --gtest_filter="$1" \
    --gtest_repeat="$2" >>"$keep/fleet.log" 2>&1 || true
}
if ((!reuse)); then
  fleet FleetSmoke.HealthyFleetNamesNobody $((base_runs + check_runs)) "$keep/healthy"
  fleet FleetSmoke.SlowNicIsNamed "$slow_runs" "$keep/slow"
fi

mapfile -t healthy < <(ls "$keep"/healthy/*.json 2>/dev/null | sort)
mapfile -t slow < <(ls "$keep"/slow/*.json 2>/dev/null | sort)
((${#healthy[@]} >= base_runs)) || die "only ${#healthy[@]} healthy run(s) kept of $((base_runs + check_runs)); see $keep/fleet.log"
"$build/bin/dsreport" baseline ${rule_args[@]+"${rule_args[@]}"} -o "$keep/baseline.json" "${healthy[@]:0:base_runs}" >"$keep/baseline.txt"
for f in "${healthy[@]:base_runs}" "${slow[@]}"; do
  "$build/bin/dsreport" check ${rule_args[@]+"${rule_args[@]}"} --baseline "$keep/baseline.json" \
    -o "$keep/checks/$(basename "$f")" "$f" >/dev/null || true
done

python3 - "$keep" <<'PY'
import glob, json, os, sys
keep = sys.argv[1]
# Flagged: unhealthy or no result. cannot_judge (the baseline too noisy to tell; dsreport.md) is
# neither a false alarm nor a detection: counted on its own.
blind = 0
def unhealthy(path):
    global blind
    c = json.load(open(path))
    blind += sum(1 for h in c["hosts"] if h["state"] == "cannot_judge")
    return {h["host"]: h["summary"] for h in c["hosts"] if h["state"] in ("unhealthy", "no_result")}
hf = hok = 0
lines = []
for f in sorted(glob.glob(os.path.join(keep, "checks", "healthy-*.json"))):
    u = unhealthy(f)
    hf += len(u)
    hok += 1
    lines.append(f"healthy {os.path.basename(f)}: {len(u)} host(s) flagged" + "".join(f"\n    {h}: {s}" for h, s in u.items()))
results = [json.loads(l) for l in open(os.path.join(keep, "results.jsonl"))] if os.path.exists(os.path.join(keep, "results.jsonl")) else []
# The host each slow run slowed, as the test recorded it (results.jsonl, in run order), by host index.
slow_expected = [r["expected"] for r in results if r["scenario"] == "slow_nic"]
sf = sm = si = 0
for i, f in enumerate(sorted(glob.glob(os.path.join(keep, "checks", "slow_nic-*.json")))):
    run = json.load(open(os.path.join(keep, "slow", os.path.basename(f))))
    ranks = run["fleet"]["input"]["ranks"]
    idx = slow_expected[i] if i < len(slow_expected) else []
    want = {ranks[j]["host"] for j in idx if j < len(ranks)}
    u = unhealthy(f)
    hit = want <= set(u)
    sf += 1 if hit else 0
    sm += 1
    si += len(set(u) - want)
    lines.append(f"slow    {os.path.basename(f)}: slowed {','.join(sorted(want))} {'flagged' if hit else 'MISSED'}"
                 + "".join(f"\n    {h}: {s}" for h, s in u.items()))
print("\n".join(lines))
print(f"\nhealthy runs checked: {hok}, healthy hosts flagged: {hf} (target 0)")
print(f"slow-NIC runs checked: {sm}, slowed host flagged in: {sf} (target {sm}), innocent hosts flagged: {si}")
print(f"host verdicts that could not judge (cannot_judge, in all the checks above): {blind}")
print(f"runs, baseline and verdicts: {keep}")
PY
