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
echo "PASS"
