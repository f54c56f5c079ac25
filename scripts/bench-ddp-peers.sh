#!/usr/bin/env bash
# dsbench train against PyTorch DDP (a benchmark, not a test): the same model (the 25m preset,
# mlp:1024x24 with GELU), batch (32 per rank), optimizer (SGD, momentum 0.9, lr 0.01), bucket cap
# (25 MB), ranks (2) and threads (1 per rank: OMP_NUM_THREADS=1, --blas-threads 1). dsbench runs on
# gloo and on every other CPU backend that works here (shm, mpi), each with overlap on and off;
# PyTorch DDP runs scripts/peers/torch_ddp.py on gloo (Debian's python3-torch: scripts/setup.sh
# --peers). Both sides run under every placement of --placements (scripts/lib/placement.sh):
#   unbound         mpirun --bind-to none (as dsrun/torchrun start them)
#   mpirun-default  mpirun's own binding: one core per rank
# (shared-core and hog, bench-peers' other two, are accepted too.)
# gradient_as_bucket_view (--gradient-as-bucket-view off|on|both, default both): with both, gloo and
# PyTorch each run with and without it (PyTorch's default is without), shm and mpi without.
#
# Prints, per placement, step-time and exposed-comm ratios (ours / PyTorch's, median per step) and the
# targets as PASS/MISS:
#   step with our best CPU backend  <= 0.8x PyTorch DDP's
#   step on gloo                    <= 1.0x PyTorch DDP's (each side's default; and views on both sides)
#   overlap on never slower than overlap off, per backend (within 2% noise)
# and, per backend, what --overlap auto chooses there and why.
# PyTorch's exposed comm is its step minus the same step under no_sync() (no communication).
#
# A 2-core VM drifts by 10-30% between runs a few seconds apart, more than the 2% the overlap target
# allows, so every figure is measured in rounds: each round runs, per placement, every backend and
# PyTorch once, in an order that rotates each round, and each dsbench run times overlap on and off
# twice, in the order on, off, off, on (dsbench train --repeat 2), so a steady drift weighs on both
# alike. A run's step is the mean of its passes' median steps; a figure is the median over the rounds;
# the overlap ratio is the median of each round's own on/off ratio, and "spread" is its range over the
# rounds.
#
#   scripts/bench-ddp-peers.sh [--quick] [--rounds R] [--steps N] [--warmup N] [--model 25m]
#                              [--backends gloo,shm,mpi] [--placements unbound,mpirun-default]
#                              [--gradient-as-bucket-view off|on|both] [--out DIR] [--no-build]
#   --quick: 3 rounds of 8 steps after 2 warm-up (about 9 minutes with both placements and both
#   gradient layouts); default 5 rounds of 20 after 3
#
# Exit: 0 the comparison was printed (targets missed are reported, not failed); 1 nothing to compare
# (build failed, no mpirun, no torch, a bad flag); 3 some run failed (the rest is printed).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_BUILD_DIR:-$root/build}
bin=$build/bin

steps=20
warmup=3
rounds=5
model=25m
backends=gloo,shm,mpi
placements=unbound,mpirun-default
views=both
out=""
do_build=1
prog=bench-ddp-peers
source "$root/scripts/lib/args.sh"  # usage, bad, value_of
source "$root/scripts/lib/placement.sh"  # set_placement, place_describe, start_hog, stop_hog, free_port
while [ $# -gt 0 ]; do
  case $1 in
    --quick) steps=8; warmup=2; rounds=3 ;;
    --rounds) rounds=$(value_of "$@") || exit 1; shift ;;
    --steps) steps=$(value_of "$@") || exit 1; shift ;;
    --warmup) warmup=$(value_of "$@") || exit 1; shift ;;
    --model) model=$(value_of "$@") || exit 1; shift ;;
    --backends) backends=$(value_of "$@") || exit 1; shift ;;
    --placements) placements=$(value_of "$@") || exit 1; shift ;;
    --gradient-as-bucket-view) views=$(value_of "$@") || exit 1; shift ;;
    --out) out=$(value_of "$@") || exit 1; shift ;;
    --no-build) do_build=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-ddp-peers: unknown argument '$1'; see --help." >&2; exit 1 ;;
  esac
  shift
done
case $steps in ''|*[!0-9]*|0) bad "--steps '$steps' must be a whole number of at least 1" ;; esac
case $warmup in ''|*[!0-9]*) bad "--warmup '$warmup' must be a whole number" ;; esac
case $rounds in ''|*[!0-9]*|0) bad "--rounds '$rounds' must be a whole number of at least 1" ;; esac
[[ "$backends" =~ ^(gloo|shm|mpi)(,(gloo|shm|mpi))*$ ]] || bad "--backends '$backends' must be names from gloo, shm, mpi separated by commas"
[[ ",$backends," == *,gloo,* ]] || bad "--backends must include gloo (the like-for-like comparison with PyTorch DDP)"
place_re="(${placement_names[*]})"; place_re=${place_re// /|}
[[ "$placements" =~ ^$place_re(,$place_re)*$ ]] ||
  bad "--placements '$placements' must be names from ${placement_names[*]} separated by commas"
case $views in off|on|both) ;; *) bad "--gradient-as-bucket-view '$views' must be off, on or both" ;; esac
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
run_mpi() {
  local log=$1; shift
  MASTER_PORT=$(free_port) timeout --kill-after=10 600 "$mpirun" -np 2 --oversubscribe "${place_mpi[@]}" \
    -x MASTER_PORT -x DS_ACCELERATOR -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS \
    ${place_wrap[@]+"${place_wrap[@]}"} "$@" >"$log" 2>&1
}
trap stop_hog EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
IFS=, read -r -a place_list <<<"$placements"
echo "== bench-ddp-peers: $spec, batch 32/rank, 2 ranks, 1 thread per rank, SGD, $steps steps after $warmup warm-up, $rounds round(s)"
echo "   placements: $placements; gradient_as_bucket_view: $views"
echo "   results in $out; load average before: $load_before"
failed=()
start=$(date +%s)
IFS=, read -r -a be_list <<<"$backends"
# A peer is a backend or torch, with "-view" when it runs with gradient_as_bucket_view.
peers=()
for be in "${be_list[@]}" torch; do
  case $views in
    off) peers+=("$be") ;;
    on) peers+=("$be-view") ;;
    both) peers+=("$be"); [ "$be" = gloo ] || [ "$be" = torch ] && peers+=("$be-view") ;;
  esac
done
torch_version=$("$torch_py" -c 'import torch; print(torch.__version__)' 2>/dev/null)
for ((round = 1; round <= rounds; round++)); do
  for place in "${place_list[@]}"; do
    set_placement "$place"
    [ "$place" = hog ] && start_hog
    n=${#peers[@]}
    for ((k = 0; k < n; k++)); do
      peer=${peers[$(( (k + round - 1) % n ))]}
      base=${peer%-view}
      view=""; [ "$base" != "$peer" ] && view=-view
      t0=$(date +%s)
      if [ "$base" = torch ]; then
        name="PyTorch DDP ($torch_version)${view:+ gradient_as_bucket_view}"
        stem=$out/r$round-$place-torch-ddp$view
        run_mpi "$stem.log" "$torch_py" "$root/scripts/peers/torch_ddp.py" --width "$width" --layers "$layers" \
          --batch 32 --steps "$steps" --warmup "$warmup" --lr 0.01 --bucket-cap-mb 25 --threads 1 \
          ${view:+--gradient-as-bucket-view} --json "$stem.json"
      else
        name="dsbench train --backend $base${view:+ --gradient-as-bucket-view}"
        stem=$out/r$round-$place-dsbench-$peer
        run_mpi "$stem.log" "$bin/dsbench" train --backend "$base" --model "$model" --batch 32 --optimizer sgd \
          --lr 0.01 --bucket-cap-mb 25 --overlap both --repeat 2 --blas-threads 1 --steps "$steps" \
          --warmup "$warmup" --gradient-as-bucket-view="$([ -n "$view" ] && echo true || echo false)" --json "$stem.json"
      fi
      if [ $? -eq 0 ]; then
        echo "   round $round, $place: $name: $(( $(date +%s) - t0 )) s"
      else
        failed+=("round $round, $place: $name (log: $stem.log)")
        echo "   round $round, $place: $name: FAILED; log: $stem.log"
      fi
    done
    [ "$place" = hog ] && stop_hog
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo
python3 - "$out" "$load_before" "$load_after" "$rounds" "$placements" "${peers[@]}" <<'PY' | tee "$out/table.txt"
import json, os, statistics, sys
out, before, after, rounds, placements, peers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(","), sys.argv[6:]
DESCRIBE = {"unbound": "mpirun --bind-to none", "mpirun-default": "mpirun's default binding: one core per rank",
            "shared-core": "every rank on CPU 0", "hog": "unbound, one busy CPU hog beside the ranks"}
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
def ratio(a, b):
    return a / b if a is not None and b else None
def fmt(v, spec=".1f", none="-"):
    return none if v is None else format(v, spec)
def verdict(ok):
    return "n/a (missing figures)" if ok is None else ("PASS" if ok else "MISS")
def line(text, value, ok, extra=""):
    print(f"#   {text:<76} {value:>8}  {verdict(ok)}{extra}")
ours = [p for p in peers if not p.startswith("torch")]
tpeers = [p for p in peers if p.startswith("torch")]
print(f"# dsbench train vs PyTorch DDP: median over {rounds} round(s) of each run's step time (ms); PyTorch's is its slowest rank's")
print(f"# load average before {before}, after {after} (a busy machine makes every figure noisy); 'view': gradient_as_bucket_view")
summary = []
for place in placements:
    # Per round: torch's step and exposed comm; per peer and overlap, the step (mean of the passes'
    # medians), exposed comm, backward compute and eval loss.
    torch, runs, auto = {}, {}, {}
    for r in range(1, rounds + 1):
        for tp in tpeers:
            t = load(os.path.join(out, f"r{r}-{place}-torch-ddp{tp[5:]}.json"))
            if t:
                torch.setdefault(tp, []).append((t["step_ms"]["p50"], t["exposed_comm_ms"]))
        for pe in ours:
            d = load(os.path.join(out, f"r{r}-{place}-dsbench-{pe}.json"))
            if not d:
                continue
            if "overlap_auto" in d.get("metadata", {}):
                auto[pe.removesuffix("-view")] = d["metadata"]["overlap_auto"]
            for run in d["runs"]:
                tm = run["time_ms"]
                passes = [x["step_ms"]["p50"] for x in run.get("repeats", [])] or [tm["step"]["p50"]]
                runs.setdefault((pe, run["overlap"]), {})[r] = {
                    "step": sum(passes) / len(passes), "exposed": tm["exposed_comm"]["p50"],
                    "bwd": tm["backward_compute"]["p50"], "loss": run["loss"]}
    tstep = {tp: med([x[0] for x in v]) for tp, v in torch.items()}
    texp = {tp: med([x[1] for x in v]) for tp, v in torch.items()}
    ts, te = tstep.get("torch"), texp.get("torch")
    if ts is None:  # only views were run: compare with PyTorch's view run
        ts, te = tstep.get("torch-view"), texp.get("torch-view")
    print(f"\n## placement {place} ({DESCRIBE.get(place, place)}); ratios against PyTorch DDP{' with views' if 'torch' not in tstep else ''}")
    print(f"{'run':<30} {'step ms':>9} {'exposed ms':>11} {'bwd ms':>8} | {'step/torch':>10} {'exposed/torch':>13} | eval loss start -> end")
    for tp in tpeers:
        if tstep.get(tp) is not None:
            name = "PyTorch DDP gloo" + (" view" if tp.endswith("-view") else "")
            print(f"{name:<30} {tstep[tp]:>9.1f} {texp[tp]:>11.1f} {'-':>8} | {fmt(ratio(tstep[tp], ts), '.2f'):>10} {fmt(ratio(texp[tp], te), '.2f'):>13} | -")
    rows = []
    for pe in ours:
        for ov in (True, False):
            per = runs.get((pe, ov))
            if not per:
                continue
            step, exposed, bwd = (med([x[k] for x in per.values()]) for k in ("step", "exposed", "bwd"))
            ev = per[max(per)]["loss"]
            loss = f"{ev['eval_start']:.6f} -> {ev['eval_end']:.6f}" if "eval_start" in ev else f"{ev['start']:.6f} -> {ev['end']:.6f} (train)"
            rows.append({"peer": pe, "overlap": ov, "step": step})
            name = f"dsbench {pe.replace('-view', ' view')} overlap {'on' if ov else 'off'}"
            print(f"{name:<30} {step:>9.1f} {exposed:>11.1f} {bwd:>8.1f} | {fmt(ratio(step, ts), '.2f'):>10} {fmt(ratio(exposed, te), '.2f'):>13} | {loss}")
    print(f"\n# {place}: what --overlap auto chooses here (ddp::chooseOverlap, recorded by dsbench train in metadata.overlap_auto)")
    for be in dict.fromkeys(pe.removesuffix("-view") for pe in ours):
        a = auto.get(be)
        print(f"#   {be}: {a['reason'] if a else '- (not recorded)'}")
    print(f"\n# {place}: targets")
    best = min(rows, key=lambda r: r["step"]) if rows else None
    v = ratio(best["step"], ts) if best else None
    label = f"{best['peer'].replace('-view', ' view')} overlap {'on' if best['overlap'] else 'off'}" if best else "-"
    line(f"step, our best CPU backend ({label}) / PyTorch (<= 0.8)", fmt(v, ".2f") + "x", None if v is None else v <= 0.8)
    summary.append((place, "best CPU backend / PyTorch (<= 0.8)", v, 0.8))
    # gloo: PyTorch's default (no views) on both sides, then views on both sides.
    for pe, tp, what in (("gloo", "torch", "neither with views (defaults)"),
                         ("gloo-view", "torch-view", "both with views")):
        gl = [r for r in rows if r["peer"] == pe]
        if not gl or tp not in tstep:
            continue
        g = ratio(min(r["step"] for r in gl), tstep[tp])
        line(f"step on gloo (best overlap) / PyTorch, {what} (<= 1.0)", fmt(g, ".2f") + "x", None if g is None else g <= 1.0)
        summary.append((place, f"gloo / PyTorch, {what} (<= 1.0)", g, 1.0))
    for pe in ours:
        on, off = runs.get((pe, True), {}), runs.get((pe, False), {})
        q = [on[r]["step"] / off[r]["step"] for r in sorted(on) if r in off]
        qm = med(q)
        spread = f"  (rounds {min(q):.2f}-{max(q):.2f}x)" if len(q) > 1 else ""
        a = auto.get(pe.removesuffix("-view"))
        chose = ""
        if a and qm is not None:
            right = a["overlap"] == (qm < 1.0)
            chose = f"; auto chooses {'on' if a['overlap'] else 'off'} ({'the faster' if right else 'the slower'} here)"
        line(f"{pe.replace('-view', ' view')}: step with overlap / without (<= 1.02)", fmt(qm, ".2f") + "x", None if qm is None else qm <= 1.02, spread + chose)
        summary.append((place, f"{pe.replace('-view', ' view')} overlap on / off (<= 1.02)", qm, 1.02))
if len(placements) > 1:
    print("\n# every target under every placement")
    names = list(dict.fromkeys(s[1] for s in summary))
    print(f"#   {'target':<58} " + " ".join(f"{p:>20}" for p in placements))
    for n in names:
        cells = []
        for p in placements:
            hit = [s for s in summary if s[0] == p and s[1] == n]
            v = hit[0][2] if hit else None
            cells.append(f"{fmt(v, '.2f') + 'x ' + verdict(None if v is None else v <= hit[0][3]):>20}" if v is not None else f"{'-':>20}")
        print(f"#   {n:<58} " + " ".join(cells))
PY
echo
echo "bench-ddp-peers: $(( $(date +%s) - start )) s; table in $out/table.txt, JSON in $out/r*-dsbench-*.json and $out/r*-torch-ddp.json"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'bench-ddp-peers: failed: %s\n' "${failed[@]}"
  exit 3
fi
exit 0
