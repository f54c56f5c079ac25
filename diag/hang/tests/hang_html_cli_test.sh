#!/usr/bin/env bash
# dsreport html on a real `dsdiag hang --json` report (the torch 2.15 gloo dtype scenario): the page
# names the culprit and draws the group timeline; a truncated hang report and a JSON that is no
# report at all each fail with exit 2 (bad input) and a message naming the file.
# Usage: hang_html_cli_test.sh DSDIAG DSREPORT FIXTURE_DUMPS WORKDIR
set -u
dsdiag=$1 dsreport=$2 dumps=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }

"$dsdiag" hang "$dumps" --json "$dir/hang.json" > "$dir/hang.txt"
rc=$?
[ "$rc" -eq 2 ] || fail "dsdiag hang exited $rc, not 2 (culprit found)"
"$dsreport" html "$dir/hang.json" -o "$dir/hang.html" || fail "dsreport html failed on a hang report"
grep -q 'class="verdict fail"' "$dir/hang.html" || fail "no failing verdict on the page"
grep -q 'Culprits' "$dir/hang.html" || fail "no culprits section"
grep -q 'rank 1' "$dir/hang.html" || fail "the culprit, rank 1, is not named"
grep -q '<table class="timeline">' "$dir/hang.html" || fail "no group timeline"
grep -q 'What to do' "$dir/hang.html" || fail "no advice"
grep -q '<script src=\|<link [^>]*href="http' "$dir/hang.html" && fail "the page loads something from outside"

head -c 300 "$dir/hang.json" > "$dir/truncated.json"
grep -q '"schema"' "$dir/truncated.json" || printf '{"schema": "dsperf.hang", "schema_version": "1.1", "verdict": ' > "$dir/truncated.json"
"$dsreport" html "$dir/truncated.json" -o "$dir/t.html" > "$dir/t.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "a truncated hang report exited $rc, not 2: $(cat "$dir/t.out")"
grep -q 'truncated.json' "$dir/t.out" || fail "the error does not name the file: $(cat "$dir/t.out")"

echo '{"hello": "world"}' > "$dir/other.json"
"$dsreport" html "$dir/other.json" -o "$dir/o.html" > "$dir/o.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "a JSON that is no report exited $rc, not 2: $(cat "$dir/o.out")"
grep -q 'other.json' "$dir/o.out" || fail "the error does not name the file: $(cat "$dir/o.out")"
[ -e "$dir/o.html" ] && fail "a page was written for a JSON that is no report"
echo "ok: $(wc -c < "$dir/hang.html") bytes of page"
