#!/usr/bin/env bash
# dsdiag hang on dsperf's own Flight Recorder dumps, the way a user meets a hang: dsrun starts 8 ranks
# of `dsbench train` (backend BACKEND, a 3 s timeout), rank 3 is stopped with SIGSTOP in the middle of
# its training steps, every live rank times out and writes its dump (TORCH_FR_DUMP_TEMP_FILE), dsrun
# stops the job, and `dsdiag hang` on the dump folder names rank 3: it left no dump and every other
# rank waits for it (exit 2, "culprit_found").
# Before the stop, SIGUSR2 makes rank 3 dump while it runs: that dump shows it is past its first
# collectives (so the stop lands in the training loop, not in a store barrier), and it is removed.
# Usage: own_dumps_test.sh BIN_DIR BACKEND. About 20 s. Exit 77 (skip) without python3.
set -euo pipefail
bin=$1
backend=$2
n=8
victim=3
timeout_s=3
command -v python3 >/dev/null || { echo "SKIP: python3 reads the running rank's dump"; exit 77; }

tmp=$(mktemp -d)
dsrun_pid=""
victim_pid=""
cleanup() {
  [[ -n "$victim_pid" ]] && kill -KILL "$victim_pid" 2>/dev/null || true
  [[ -n "$dsrun_pid" ]] && kill -KILL "$dsrun_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
logs=$tmp/logs/hang-e2e/attempt_0
fail() {
  echo "FAIL: $*" >&2
  echo "--- dsrun:" >&2
  cat "$tmp/dsrun.out" >&2 || true
  for r in $(seq 0 $((n - 1))); do
    echo "--- rank $r stderr (last lines):" >&2
    tail -n 5 "$logs/$r/stderr.log" >&2 || true
  done
  exit 1
}
# The last completed collective of the default group in a dump (pg_status), or -1.
last_completed() {
  python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb")); print(d["pg_status"]["0"]["last_completed_collective"])' "$1" 2>/dev/null || echo -1
}

TORCH_FR_DUMP_TEMP_FILE=$tmp/fr/rank_ "$bin/dsrun" --standalone --nproc-per-node $n --rdzv-id hang-e2e \
  --log-dir "$tmp/logs" --grace-period 1 \
  "$bin/dsbench" train --model 1m --batch 8 --backend "$backend" --timeout $timeout_s --steps 1000000 \
  --warmup 1 --overlap on --eval-samples 0 >"$tmp/dsrun.out" 2>&1 &
dsrun_pid=$!

# The victim's pid: the child of dsrun whose RANK is $victim.
for _ in $(seq 300); do
  for c in $(pgrep -P "$dsrun_pid" || true); do
    if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "RANK=$victim"; then victim_pid=$c; fi
  done
  [[ -n "$victim_pid" ]] && break
  sleep 0.1
done
[[ -n "$victim_pid" ]] || fail "dsrun started no rank $victim within 30 s"

# SIGUSR2's default action ends a process: wait until the recorder catches it (its process group is
# up), as /proc's SigCgt mask shows (SIGUSR2 is signal 12: bit 11).
catches_usr2() {
  local mask
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$victim_pid/status" 2>/dev/null) || return 1
  [[ -n "$mask" ]] && (((16#$mask >> 11) & 1))
}
for _ in $(seq 300); do
  catches_usr2 && break
  sleep 0.1
done
catches_usr2 || fail "rank $victim does not catch SIGUSR2 30 s after it started"

# SIGUSR2 until the victim's own dump shows it past collective #20 (the training steps' allreduces).
dump=$tmp/fr/rank_$victim
done_seq=-1
for _ in $(seq 60); do
  kill -USR2 "$victim_pid" 2>/dev/null || fail "rank $victim is gone before the stop"
  sleep 0.5
  [[ -f "$dump" ]] && done_seq=$(last_completed "$dump")
  ((done_seq >= 20)) && break
done
((done_seq >= 20)) || fail "rank $victim's SIGUSR2 dump never showed collective #20 completed (last: $done_seq)"
rm -f "$dump"
kill -STOP "$victim_pid"
stopped=$SECONDS

# Every live rank times out after 3 s, dumps, and dsrun stops the job (the victim with SIGKILL).
rc=0
wait "$dsrun_pid" || rc=$?
dsrun_pid=""
victim_pid=""
took=$((SECONDS - stopped))
# 4: the first rank to fail timed out; 3: a peer that had timed out and left closed its connection
# first (gloo: "Connection closed by peer"). Either is the job failing as it must.
((rc == 4 || rc == 3)) || fail "dsrun exited $rc, not 4 or 3 (the first failed rank's timeout or backend error)"
((took <= 40)) || fail "the job took $took s to stop after the victim did"
for r in $(seq 0 $((n - 1))); do
  if ((r == victim)); then
    [[ ! -e "$tmp/fr/rank_$r" ]] || fail "the stopped rank cannot have dumped, yet $tmp/fr/rank_$r exists"
    continue
  fi
  [[ -s "$tmp/fr/rank_$r" ]] || fail "rank $r wrote no dump"
  grep -q "flight recorder: wrote $tmp/fr/rank_$r" "$logs/$r/stderr.log" || fail "rank $r did not log its dump"
done
leftover=$(find "$tmp/fr" -name '*.tmp.*' | head -1)
[[ -z "$leftover" ]] || fail "a temp file was left in the dump folder: $leftover"

# dsdiag hang names the stopped rank.
hrc=0
"$bin/dsdiag" hang "$tmp/fr" --json "$tmp/hang.json" >"$tmp/hang.txt" 2>&1 || hrc=$?
cat "$tmp/hang.txt"
((hrc == 2)) || fail "dsdiag hang exited $hrc, not 2 (culprit found)"
head -1 "$tmp/hang.txt" | grep -q "^rank $victim left no dump; .* wait for it in all_reduce #" ||
  fail "dsdiag hang's first line does not name rank $victim"
grep -q "verdict: culprit_found (exit 2); $((n - 1)) of $n ranks left a dump" "$tmp/hang.txt" ||
  fail "dsdiag hang's verdict line is not culprit_found with $((n - 1)) of $n dumps"
python3 - "$tmp/hang.json" "$victim" <<'EOF' || fail "dsdiag hang's JSON does not name rank $victim alone, as no_dump"
import json, sys
r = json.load(open(sys.argv[1]))
culprits = [(c["rank"], c["kind"]) for c in r["culprits"]]
assert culprits == [(int(sys.argv[2]), "no_dump")], culprits
EOF
echo "PASS: dsdiag hang named rank $victim ($backend; its SIGUSR2 dump had #$done_seq completed; the job ended $took s after the stop)"
