#!/usr/bin/env bash
# verdict_calibration.smoke: scripts/verdict-calibration.sh on a toy sweep. Usage: $0 BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(DS_BUILD_DIR=$1 bash "$here/../verdict-calibration.sh" --pairs 1 --runs 2 \
        --coll-args "-b 1K -e 8K -f 2 -n 2 -w 1" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: verdict-calibration.sh exited $rc"; exit 1; }
for want in "A/A (nothing changed)" "A/B x1.11" "A/B x1.4" "load average (1 min) before the runs" \
            "for 8 runs and 3 comparisons of 2 runs a side" "note: 1 pairs per kind"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: the table lacks '$want'"; exit 1; }
done
# Two runs a side can never be significant: every pair is inconclusive or unchanged, never exit 1.
if grep -E '^A/(A|B) ' <<<"$out" | cut -c29- | awk '{ if ($3 != 0) bad = 1 } END { exit !bad }'; then
  echo "FAIL: a pair of 2 runs a side exited 1"; exit 1
fi
# The health gate's calibration (--gate check) on the same toy sweep: 2 trials, baselines of 3 runs,
# 2 checked runs. Its rates are figures too, never asserted: the table's shape and counts are.
out=$(DS_BUILD_DIR=$1 bash "$here/../verdict-calibration.sh" --gate check --checks 2 --baseline-runs 3 \
        --window 2 --coll-args "-b 1K -e 8K -f 2 -n 2 -w 1" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: verdict-calibration.sh --gate check exited $rc"; exit 1; }
for want in "baseline of 3 run(s), the newest run alone:" "baseline of 3 run(s), the last 2 runs (--n 2):" \
            "A/A (nothing changed)" "x2 (times x2, busbw / 2)" "x1.5 (times x1.5)" \
            "run-to-run spread of the baselines of 3 run(s)" "for 10 runs and 12 checks" "note: 2 trials"; do
  grep -qF "$want" <<<"$out" || { echo "FAIL: the check table lacks '$want'"; exit 1; }
done
# Every x2 row: 2 checks (column n), and healthy + unhealthy + cannot judge = 2.
if [ "$(grep -cF "x2 (times x2" <<<"$out")" -ne 2 ] ||
   grep -F "x2 (times x2" <<<"$out" | awk '{ if ($7 != 2 || $8 + $9 + $10 != 2) bad = 1 } END { exit !bad }'; then
  echo "FAIL: an x2 row lacks its checks, or they are not healthy, unhealthy or cannot judge"; exit 1
fi
echo "PASS"
