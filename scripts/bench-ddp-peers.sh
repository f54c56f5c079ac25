#!/usr/bin/env bash
# dsbench train against PyTorch DDP (a benchmark, not a test): the same model (the 25m preset,
# mlp:1024x24 with GELU), batch (32 per rank), optimizer (SGD, momentum 0.9, lr 0.01), bucket cap
# (25 MB), ranks (2, unbound: mpirun --bind-to none) and threads (1 per rank: OMP_NUM_THREADS=1,
# --blas-threads 1). dsbench runs on gloo and on every other CPU backend that works here (shm, mpi),
# each with overlap on and off; PyTorch DDP runs scripts/peers/torch_ddp.py on gloo (Debian's
# python3-torch: scripts/setup.sh --peers).
#
# Prints step-time and exposed-comm ratios (ours / PyTorch's, median per step) and the targets as
# PASS/MISS:
#   step with our best CPU backend  <= 0.8x PyTorch DDP's
#   step on gloo                    <= 1.0x PyTorch DDP's
#   overlap on never slower than overlap off, per backend (within 2% noise)
# PyTorch's exposed comm is its step minus the same step under no_sync() (no communication).
#
#   scripts/bench-ddp-peers.sh [--quick] [--steps N] [--warmup N] [--model 25m] [--backends gloo,shm,mpi]
#                              [--out DIR] [--no-build]
#
# Exit: 0 the comparison was printed (targets missed are reported, not failed); 1 nothing to compare
# (build failed, no mpirun, no torch); 3 some run failed (the rest is printed).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_BUILD_DIR:-$root/build}
bin=$build/bin

steps=20
warmup=3
model=25m
backends=gloo,shm,mpi
out=""
do_build=1
prog=bench-ddp-peers
source "$root/scripts/lib/args.sh"  # usage, bad, value_of
while [ $# -gt 0 ]; do
  case $1 in
    --quick) steps=8; warmup=2 ;;
    --steps) steps=$(value_of "$@") || exit 1; shift ;;
    --warmup) warmup=$(value_of "$@") || exit 1; shift ;;
    --model) model=$(value_of "$@") || exit 1; shift ;;
    --backends) backends=$(value_of "$@") || exit 1; shift ;;
    --out) out=$(value_of "$@") || exit 1; shift ;;
    --no-build) do_build=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-ddp-peers: unknown argument '$1'; see --help." >&2; exit 1 ;;
  esac
  shift
done
case $steps in ''|*[!0-9]*|0) bad "--steps '$steps' must be a whole number of at least 1" ;; esac
case $warmup in ''|*[!0-9]*) bad "--warmup '$warmup' must be a whole number" ;; esac
[[ "$backends" =~ ^(gloo|shm|mpi)(,(gloo|shm|mpi))*$ ]] || bad "--backends '$backends' must be names from gloo, shm, mpi separated by commas"
[[ ",$backends," == *,gloo,* ]] || bad "--backends must include gloo (the like-for-like comparison with PyTorch DDP)"
# Our model presets as PyTorch layers: WIDTH x LAYERS.
case $model in
  1m) spec=mlp:1024x1 ;; 25m) spec=mlp:1024x24 ;; 100m) spec=mlp:2048x24 ;; mlp:*) spec=$model ;;
  *) bad "--model '$model' must be a preset (1m, 25m, 100m) or mlp:WIDTHxLAYERS" ;;
esac
[[ "$spec" =~ ^mlp:([0-9]+)x([0-9]+)$ ]] || bad "--model '$model': only plain mlp:WIDTHxLAYERS specs have a PyTorch twin here"
width=${BASH_REMATCH[1]}; layers=${BASH_REMATCH[2]}

out=${out:-$root/demo-out/ddp-peers-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || { echo "bench-ddp-peers: cannot create the output folder $out." >&2; exit 1; }
if [ $do_build = 1 ] || [ ! -x "$bin/dsbench" ]; then
  [ $do_build = 0 ] && { echo "bench-ddp-peers: $bin/dsbench is missing; build first (scripts/build.sh) or drop --no-build." >&2; exit 1; }
  echo "== building in $build (scripts/build.sh)"
  DS_BUILD_DIR=$build "$root/scripts/build.sh" >"$out/build.log" 2>&1 || {
    tail -30 "$out/build.log"; echo "bench-ddp-peers: the build failed; full log: $out/build.log" >&2; exit 1; }
fi
mpirun=$(command -v mpirun) || { echo "bench-ddp-peers: mpirun not found; install Open MPI (scripts/setup.sh)." >&2; exit 1; }
torch_py=""
for py in ${DS_TORCH_PYTHON:-} /usr/bin/python3 python3; do
  if "$py" -c 'import torch' >/dev/null 2>&1; then torch_py=$(command -v "$py"); break; fi
done
[ -n "$torch_py" ] || { echo "bench-ddp-peers: no python3 here can import torch; install Debian's python3-torch (scripts/setup.sh --peers)." >&2; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 DS_ACCELERATOR=cpu
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR TORCHELASTIC_RUN_ID
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}
run_mpi() {
  local log=$1; shift
  MASTER_PORT=$(free_port) timeout --kill-after=10 1200 "$mpirun" -np 2 --oversubscribe --bind-to none \
    -x MASTER_PORT -x DS_ACCELERATOR -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS "$@" >"$log" 2>&1
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== bench-ddp-peers: $spec, batch 32/rank, 2 ranks unbound, 1 thread per rank, SGD, $steps steps after $warmup warm-up"
echo "   results in $out; load average before: $load_before"
failed=()
start=$(date +%s)
IFS=, read -r -a be_list <<<"$backends"
for be in "${be_list[@]}"; do
  t0=$(date +%s)
  if run_mpi "$out/dsbench-$be.log" "$bin/dsbench" train --backend "$be" --model "$model" --batch 32 --optimizer sgd \
      --lr 0.01 --bucket-cap-mb 25 --overlap both --blas-threads 1 --steps "$steps" --warmup "$warmup" \
      --json "$out/dsbench-$be.json"; then
    echo "   dsbench train --backend $be: $(( $(date +%s) - t0 )) s"
  else
    failed+=("dsbench train --backend $be (log: $out/dsbench-$be.log)")
    echo "   dsbench train --backend $be: FAILED; log: $out/dsbench-$be.log"
  fi
done
t0=$(date +%s)
if run_mpi "$out/torch-ddp.log" "$torch_py" "$root/scripts/peers/torch_ddp.py" --width "$width" --layers "$layers" \
    --batch 32 --steps "$steps" --warmup "$warmup" --lr 0.01 --bucket-cap-mb 25 --threads 1 --json "$out/torch-ddp.json"; then
  echo "   PyTorch DDP ($("$torch_py" -c 'import torch; print(torch.__version__)')): $(( $(date +%s) - t0 )) s"
else
  failed+=("PyTorch DDP (log: $out/torch-ddp.log)")
  echo "   PyTorch DDP: FAILED; log: $out/torch-ddp.log"
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo
python3 - "$out" "$load_before" "$load_after" "${be_list[@]}" <<'PY' | tee "$out/table.txt"
import json, os, sys
out, before, after, backends = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
torch = load(os.path.join(out, "torch-ddp.json"))
rows = []
for be in backends:
    d = load(os.path.join(out, f"dsbench-{be}.json"))
    if not d:
        continue
    for r in d["runs"]:
        t = r["time_ms"]
        rows.append({"backend": be, "overlap": r["overlap"], "step": t["step"]["p50"], "exposed": t["exposed_comm"]["p50"],
                     "bwd": t["backward_compute"]["p50"], "loss": r["loss"]})
print("# dsbench train vs PyTorch DDP: median step time per step (ms), the slowest rank's for PyTorch")
print(f"# load average before {before}, after {after} (a busy machine makes every figure noisy)")
ts = torch["step_ms"]["p50"] if torch else None
te = torch["exposed_comm_ms"] if torch else None
print(f"{'run':<24} {'step ms':>9} {'exposed ms':>11} {'bwd ms':>8} | {'step/torch':>10} {'exposed/torch':>13} | eval loss start -> end")
if torch:
    print(f"{'PyTorch DDP gloo':<24} {ts:>9.1f} {te:>11.1f} {'-':>8} | {'1.00':>10} {'1.00':>13} | -")
def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"
for r in rows:
    name = f"dsbench {r['backend']} overlap {'on' if r['overlap'] else 'off'}"
    ev = r["loss"]
    loss = f"{ev['eval_start']:.4f} -> {ev['eval_end']:.4f}" if "eval_start" in ev else f"{ev['start']:.4f} -> {ev['end']:.4f} (train)"
    print(f"{name:<24} {r['step']:>9.1f} {r['exposed']:>11.1f} {r['bwd']:>8.1f} | {ratio(r['step'], ts):>10} {ratio(r['exposed'], te):>13} | {loss}")
def verdict(ok):
    return "n/a (missing figures)" if ok is None else ("PASS" if ok else "MISS")
print("\n# targets")
best = min(rows, key=lambda r: r["step"]) if rows else None
v = best["step"] / ts if best and ts else None
print(f"#   step, our best CPU backend ({best['backend'] + ' overlap ' + ('on' if best['overlap'] else 'off') if best else '-'}) / PyTorch (<= 0.8)   "
      f"{(f'{v:.2f}x' if v is not None else '-'):>8}  {verdict(None if v is None else v <= 0.8)}")
gloo = [r for r in rows if r["backend"] == "gloo"]
g = min(r["step"] for r in gloo) / ts if gloo and ts else None
print(f"#   step on gloo (best overlap setting) / PyTorch (<= 1.0)          {(f'{g:.2f}x' if g is not None else '-'):>8}  {verdict(None if g is None else g <= 1.0)}")
for be in backends:
    on = [r for r in rows if r["backend"] == be and r["overlap"]]
    off = [r for r in rows if r["backend"] == be and not r["overlap"]]
    if on and off:
        q = on[0]["step"] / off[0]["step"]
        print(f"#   {be}: step with overlap / without (<= 1.02)                   {q:>7.2f}x  {verdict(q <= 1.02)}")
    else:
        print(f"#   {be}: step with overlap / without (<= 1.02)                         -  n/a (missing figures)")
PY
echo
echo "bench-ddp-peers: $(( $(date +%s) - start )) s; table in $out/table.txt, JSON in $out/dsbench-*.json and $out/torch-ddp.json"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'bench-ddp-peers: failed: %s\n' "${failed[@]}"
  exit 3
fi
exit 0
