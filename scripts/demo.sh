#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on 4 local ranks started by dsrun:
#   1. pre-flight: dsdiag --world (every rank's checks, merged on rank 0, plus cross-rank checks);
#   2. a small allreduce sweep with dsbench coll (nccl-tests columns) on gloo (the cpu default) and on
#      shm (our shared-memory backend), side by side;
#   3. an HTML report of both (dsreport html), self-contained, at reports/out/report.html.
# Results go to demo-out/ (or $DS_DEMO_DIR) as JSON, with the sweep's JSON-lines journal; the report to
# reports/out/ (or $DS_REPORT_DIR).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" || exit 1
# Only the four tools the demo runs; scripts/test.sh builds the rest (tests, fuzz replays, benchmarks).
"$root/scripts/build.sh" --target dsrun --target dsdiag --target dsbench --target dsreport || exit 1
bin=${DS_BUILD_DIR:-$root/build}/bin
out=${DS_DEMO_DIR:-$root/demo-out}
mkdir -p "$out"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo
echo "== 1. pre-flight: dsrun --nproc-per-node 4 --standalone dsdiag --world --fail-on fail"
# --fail-on fail: warnings are advice and exit 0, so dsrun sees four clean ranks; a failure still exits 2.
"$bin/dsrun" --nproc-per-node 4 --standalone "$bin/dsdiag" --world --fail-on fail --json "$out/diag.json"
diag_rc=$?
if ((diag_rc != 0)); then
  echo "demo: pre-flight found failures (exit $diag_rc); see the FAIL rows above. Stopping." >&2
  exit "$diag_rc"
fi
warnings=$(python3 -c 'import json,sys; print(sum(c["status"]=="WARN" for c in json.load(open(sys.argv[1]))["checks"]))' \
  "$out/diag.json" 2>/dev/null || echo "?")
if [[ "$warnings" == "0" ]]; then
  echo "demo: pre-flight passed: no failures, no warnings."
else
  note=""
  cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc obeys OMP_NUM_THREADS, exported above
  ((cores < 4)) && note=" With $cores core(s) for 4 ranks, CPU-affinity and thread warnings are expected here."
  echo "demo: pre-flight passed: no failures; $warnings warning row(s) above are advice.$note"
fi

echo
echo "== 2. sweep: dsrun --nproc-per-node 4 --standalone dsbench coll --backend gloo,shm -b 8 -e 4M -f 8"
"$bin/dsrun" --nproc-per-node 4 --standalone "$bin/dsbench" coll --backend gloo,shm -b 8 -e 4M -f 8 \
  -J "$out/sweep.json" || {
  rc=$?; echo "demo: the sweep failed (exit $rc)" >&2; exit "$rc"; }

echo
report_dir=${DS_REPORT_DIR:-$root/reports/out}
echo "== 3. report: dsreport html sweep.json diag.json -o $report_dir/report.html"
mkdir -p "$report_dir"
"$bin/dsreport" html "$out/sweep.json" "$out/diag.json" -o "$report_dir/report.html" || {
  rc=$?; echo "demo: writing the HTML report failed (exit $rc)" >&2; exit "$rc"; }

echo
echo "demo: results in $out: diag.json (pre-flight), sweep.json and sweep.journal.jsonl (the sweep)."
echo "demo: the HTML report is $report_dir/report.html: one file with its charts embedded; open it in any"
echo "      browser, offline (e.g. xdg-open $report_dir/report.html, or copy it off the cluster)."
