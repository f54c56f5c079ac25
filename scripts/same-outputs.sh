#!/usr/bin/env bash
# Do two builds of dsperf say the same things? Runs the demo's jobs (dsdiag --world and a gloo,shm
# sweep on 4 local ranks under dsrun), dsbench world --dry-run and dsdiag on one rank with each
# build's tools, and each build's dsreport (html, compare, export) on the SAME input files, then
# compares every JSON and text output with what must differ between two runs masked: measured
# numbers (any non-integer, and the fields of times, ports, pids and addresses), dates and clock
# times. A change that should alter no output (a refactor such as issue 40's) shows no difference.
#
#   scripts/same-outputs.sh BEFORE_BIN AFTER_BIN [OUT_DIR]
#     e.g. git worktree add /tmp/before <rev>; DS_BUILD_DIR=/tmp/before/build scripts/build.sh \
#            --target dsrun --target dsdiag --target dsbench --target dsreport  (in /tmp/before)
#          scripts/same-outputs.sh /tmp/before/build/bin build/bin
#
# Exit: 0 when every output matches after masking, 1 when one differs (the diff is printed), 2 for
# bad arguments or a job that failed to run.
set -uo pipefail
if (($# < 2)) || [[ ! -x "$1/dsdiag" || ! -x "$2/dsdiag" ]]; then
  echo "usage: $0 BEFORE_BIN AFTER_BIN [OUT_DIR]: two folders holding dsrun, dsdiag, dsbench and dsreport" >&2
  exit 2
fi
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=${3:-$(mktemp -d /tmp/same-outputs.XXXXXX)}
mkdir -p "$out"
export OMP_NUM_THREADS=1
root=$(cd "$(dirname "$0")/.." && pwd)

fail=0
run() {  # run NAME SIDE CMD...: stdout+stderr to $out/SIDE/NAME.txt, exit status to NAME.rc
  local name=$1 side=$2
  shift 2
  "$@" >"$out/$side/$name.txt" 2>&1
  echo $? >"$out/$side/$name.rc"
}

for side in before after; do
  bin=$before
  [[ $side == after ]] && bin=$after
  d=$out/$side
  mkdir -p "$d"
  run world "$side" "$bin/dsrun" --nproc-per-node 4 --standalone "$bin/dsdiag" --world --fail-on fail --json "$d/diag.json"
  run sweep "$side" "$bin/dsrun" --nproc-per-node 4 --standalone "$bin/dsbench" coll --backend gloo,shm -b 8 -e 4M -f 8 \
    -J "$d/sweep.json"
  run dryrun "$side" env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$bin/dsbench" world --dry-run \
    -J "$d/dryrun.json"
  run dryrun_mpi "$side" env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 "$bin/dsbench" world --dry-run -J "$d/dryrun_mpi.json"
  run diag_one "$side" env RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$bin/dsdiag" \
    --json "$d/diag_one.json"
done
# The reports of one set of inputs (the after side's), by each build's dsreport.
for side in before after; do
  bin=$before
  [[ $side == after ]] && bin=$after
  d=$out/$side
  in=$out/after
  run report_html "$side" "$bin/dsreport" html "$in/sweep.json" "$in/diag.json" -o "$d/report.html"
  run report_compare "$side" "$bin/dsreport" compare "$out/before/sweep.json" "$in/sweep.json"
  run report_export "$side" "$bin/dsreport" export --openmetrics "$d/export.prom" "$in/sweep.json"
done

python3 - "$out" <<'PY' || fail=1
import difflib, json, os, re, sys

out = sys.argv[1]
VOLATILE = re.compile(r"(time|_us|_ms|_ns|_s$|seconds|elapsed|duration|port|pid|date|busbw|algbw|bw|gbps|"
                      r"timestamp|addr|address|uptime|load|mem|free|journal|path|file|command_line|argv|"
                      r"loadavg|latency|skew|offset|rtt|rate|iters_run|spread|cv|p50|p90|p99|min|max|mean|median|job_id|run_id|"
                      r"last_stage|runnable|git_sha|tool_version)",
                      re.I)
TEXT_MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<when>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(\.\d+)?\b"), "<clock>"),
    (re.compile(r"(TORCHELASTIC_RUN_ID|JOB_ID)=\w+"), "\\1=<id>"),
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b"), "<ip>"),
    (re.compile(r"\d+\.\d+(e[+-]?\d+)?"), "<f>"),
    (re.compile(r"\b\d+ GB/s"), "<f> GB/s"),
    (re.compile(r"\b\d+ runnable"), "<n> runnable"),
    (re.compile(r"\b\d+ (us|ms|s)\b"), "<n> \\1"),
    (re.compile(r"-?<f> ms \(rank \d+\)"), "<f> ms (rank <n>)"),
    (re.compile(r"\br\d+\+\d+%"), "r<n>+<n>%"),
    (re.compile(r"\b\d+% of\b"), "<n>% of"),
    (re.compile(r"(port|pid)[ =:]+\d+", re.I), r"\1 <n>"),
    (re.compile(r"/tmp/[\w./-]+"), "<tmp>"),
    (re.compile(re.escape(out) + r"/(before|after)"), "<out>"),
]

def mask_json(v, key="", under=False):
    # under: inside a field that is a measurement as a whole (the sweep's straggler: which rank was
    # slowest is the scheduler's choice)
    if isinstance(v, dict):
        return {k: mask_json(x, k, under or k == "straggler") for k, x in v.items()}
    if isinstance(v, list):
        return [mask_json(x, key, under) for x in v]
    volatile = under or bool(VOLATILE.search(key or ""))
    if isinstance(v, float):
        return "<f>"
    if isinstance(v, int) and not isinstance(v, bool) and volatile:
        return "<n>"
    if isinstance(v, str):
        return "<v>" if volatile else mask_text(v)
    return v

TABLE_ROW = re.compile(r"^(\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+)(.*)$")

def mask_text(s):
    for rx, rep in TEXT_MASKS:
        s = rx.sub(rep, s)
    lines = []
    for line in s.split("\n"):
        m = TABLE_ROW.match(line)
        if m:  # a table row: its size, count, type, op and root; the figures after them are measured
            line = m.group(1) + re.sub(r"\S+", "<m>", m.group(2))
        lines.append(" ".join(line.split()))  # column widths follow the figures
    return "\n".join(lines)

# The world run's links, confirm rounds, smoke timing and port holders change from run to run
# (which pairs a round confirms depends on the times it measured): of it, each check's id, rank and
# status are compared, not its data or sentence.
def world_view(path):
    if path.endswith(".json"):
        with open(path) as f:
            return [f"{c.get('status')} {c.get('id')} rank {c.get('rank')}" for c in json.load(f)["checks"]]
    with open(path, errors="replace") as f:
        return [" ".join(m.groups()) for m in
                (re.match(r"\s+(PASS|WARN|FAIL|SKIP|INFO)\s+(\S+)\s+(\[[^]]*\])", l) for l in f) if m]

def load(path):
    if os.path.basename(path) in ("diag.json", "world.txt"):
        return world_view(path)
    if path.endswith(".json"):
        with open(path) as f:
            return json.dumps(mask_json(json.load(f)), indent=1, sort_keys=True).splitlines()
    with open(path, errors="replace") as f:
        lines = mask_text(f.read()).splitlines()
    # Each rank's closing line comes when that rank ends: their order is the scheduler's.
    ranks = sorted(l for l in lines if re.match(r"\w+ rank \d+ ", l))
    it = iter(ranks)
    return [next(it) if re.match(r"\w+ rank \d+ ", l) else l for l in lines]

bad = 0
names = sorted(set(os.listdir(os.path.join(out, "before"))) | set(os.listdir(os.path.join(out, "after"))))
for name in names:
    if name.endswith(".jsonl"):
        continue  # the sweep's journal: the same rows as sweep.json
    a, b = os.path.join(out, "before", name), os.path.join(out, "after", name)
    if not (os.path.exists(a) and os.path.exists(b)):
        print(f"DIFFERS {name}: only in {'after' if os.path.exists(b) else 'before'}")
        bad += 1
        continue
    la, lb = load(a), load(b)
    if la == lb:
        print(f"same    {name}")
        continue
    bad += 1
    print(f"DIFFERS {name}:")
    for line in list(difflib.unified_diff(la, lb, "before/" + name, "after/" + name, lineterm="", n=1))[:60]:
        print("   " + line)
sys.exit(1 if bad else 0)
PY
if ((fail)); then
  echo "same-outputs: the builds' outputs differ (above); outputs in $out" >&2
  exit 1
fi
echo "same-outputs: every output matches after masking; outputs in $out"
