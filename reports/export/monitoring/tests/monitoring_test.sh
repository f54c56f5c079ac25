#!/usr/bin/env bash
# ctest label prometheus: the shipped Prometheus rules and Grafana dashboard (reports/export/monitoring/).
#   monitoring_test.sh rules-check          promtool check rules dsperf-alerts.yml
#   monitoring_test.sh rules-test           promtool test rules dsperf-alerts.test.yml: each alert fires on
#                                           the series that should raise it, and only there
#   monitoring_test.sh dashboard DSREPORT   dsperf-dashboard.json against a real `dsreport export` of
#                                           fixture runs (check_dashboard.py), then every panel query
#                                           through promtool on that export
# Exit 77 (ctest: skipped) with the reason when promtool (Debian prometheus) or a python3 with jsonschema
# and yaml (python3-jsonschema, python3-yaml) is missing; scripts/setup.sh installs them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mon=$(dirname "$here")
root=$(cd "$mon/../../.." && pwd)
mode=${1:?"usage: monitoring_test.sh rules-check|rules-test|dashboard DSREPORT"}

have_promtool() { command -v promtool >/dev/null 2>&1; }
need_promtool() {
  have_promtool || { echo "SKIP: promtool not found (Debian package prometheus; scripts/setup.sh installs it): $1"; exit 77; }
}

case "$mode" in
  rules-check)
    need_promtool "the alerting rules cannot be checked"
    promtool check rules "$mon/dsperf-alerts.yml"
    ;;
  rules-test)
    need_promtool "the alerting rules cannot be run on test series"
    promtool test rules "$here/dsperf-alerts.test.yml"
    ;;
  dashboard)
    dsreport=${2:?"usage: monitoring_test.sh dashboard DSREPORT"}
    python=""
    for p in /usr/bin/python3 "$(command -v python3 || true)"; do
      if [[ -n "$p" && -x "$p" ]] && "$p" -c 'import jsonschema, yaml' 2>/dev/null; then python=$p; break; fi
    done
    [[ -n "$python" ]] || { echo "SKIP: no python3 that imports jsonschema and yaml (Debian python3-jsonschema, python3-yaml; scripts/setup.sh installs them): the dashboard cannot be checked"; exit 77; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    data=$root/reports/tests/data
    fleet=$root/diag/hang/tests/data/evidence/diag_fleet16.json  # a real dsdiag --world run of 16 hosts
    # A real export with every family: a host's sweep, the same sweep as a job across two hosts, a fleet
    # run, and a check of them against a baseline of the sweep (one host healthy, two unhealthy, the
    # rest without a baseline).
    "$python" - "$data/sweep_golden.json" "$tmp/job.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["metadata"]["hosts"] = ["node-a", "node-b"]
d["metadata"]["start_time"] = "2026-01-31T13:00:00.000Z"
d["metadata"]["end_time"] = "2026-01-31T13:00:01.500Z"
json.dump(d, open(sys.argv[2], "w"))
PY
    "$dsreport" baseline "$data/sweep_golden.json" -o "$tmp/baseline.json" >/dev/null
    rc=0
    "$dsreport" check "$data/sweep_golden.json" "$fleet" --baseline "$tmp/baseline.json" -o "$tmp/check.json" -q \
      >/dev/null || rc=$?
    ((rc <= 2)) || { echo "dsreport check could not run (exit $rc)"; exit 1; }
    "$dsreport" export --openmetrics "$tmp/fixture.prom" --check "$tmp/check.json" \
      "$data/sweep_golden.json" "$tmp/job.json" "$fleet"
    mkdir "$tmp/out"
    "$python" "$here/check_dashboard.py" "$mon/dsperf-dashboard.json" "$here/grafana-dashboard.schema.json" \
      "$mon/dsperf-alerts.yml" "$tmp/fixture.prom" "$tmp/out"
    need_promtool "the dashboard's JSON and metric names are right, but its queries could not be run"
    # absent(<query>) for each panel query must not fire: valid PromQL that returns data on the export.
    promtool test rules "$tmp/out/panels.test.yml"
    ;;
  *)
    echo "monitoring_test.sh: unknown mode '$mode' (rules-check, rules-test, dashboard)" >&2
    exit 2
    ;;
esac
