#!/usr/bin/env bash
# Peers side by side (a benchmark, not a test): allreduce (f32, sum) from 8 B to 256 MiB on 2 ranks
# and on 4 oversubscribed ranks, on
#   shm      dsbench coll --backend shm (our shared-memory backend)
#   gloo     dsbench coll --backend gloo
#   mpi      dsbench coll --backend mpi (Open MPI through the engine's process group)
#   mpi-raw  ds_mpi_allreduce_raw: MPI_Allreduce with no engine (and mpi-raw-nb: MPI_Iallreduce +
#            MPI_Wait, the call the engine makes), so the engine's overhead shows
#   torch    torch.distributed all_reduce on gloo (scripts/peers/torch_allreduce.py), when
#            /usr/bin/python3 (or $DS_TORCH_PYTHON) can import torch (scripts/setup.sh --peers)
#   limit    ds_membw_probe: the copy bandwidth of this machine, measured in the same run, and the
#            busbw an ideal zero-copy allreduce would reach with it
# under a placement matrix, because users start ranks bound, sharing cores and beside other work:
#   unbound         mpirun --bind-to none (as dsrun/torchrun start them)
#   mpirun-default  mpirun's own binding (each rank on one core for 2 ranks)
#   shared-core     every rank on CPU 0 (mpirun --bind-to none taskset -c 0 ...)
#   hog             unbound, with one busy CPU hog (a shell loop) beside the ranks
# interleaved: each round runs the probe, then per placement every peer over all sizes, per world
# size, in an order that rotates from round to round; the report takes the median round per size. It
# prints the ratio tables and the targets per placement, then the matrix of every target under every
# placement, and writes one dsperf.sweep JSON (peers.json) with every backend's rows, each with its
# placement (pseudo-backends mpi-raw, mpi-raw-nb, torch-gloo and membw-limit included). Every row's
# JSON also records each rank's CPU affinity and the node's load.
# Every target is judged under three statistics at once (issue 29), each on the median round by it:
#   mean  the loop time per op, nccl-tests' time (what users compare)
#   p50   the median of the per-iteration times, each iteration's slowest rank (a busy machine
#         disturbs it least)
#   p99   the 99th percentile of the same (the stalls a step at scale waits for)
# and says which statistics pass; * marks those a target must pass (mean for every target, and p99
# too for shm at 8 B). The output folder holds:
#   table.txt      the side-by-side tables by the mean, and every target under all three statistics
#   table-p50.txt  the same tables by p50 (the targets as in table.txt)
#   table-p99.txt  the same tables by p99
#   summary.txt    the targets x statistics x placements verdicts alone, a few lines (printed at the end)
#   tables.md      the placement matrix and every peer's mean / p50 / p99 per size, as Markdown; with
#                  --docs it also replaces the block between the bench-peers markers of
#                  docs/performance.md, so the page's tables are this script's output
#   peers.json     the rows, each the median round by the mean
#
#   scripts/bench-peers.sh [--quick | --full] [--rounds R] [--np 2,4] [-e 256M] [--min-time S]
#                          [--placements unbound,mpirun-default,shared-core,hog] [--no-torch]
#                          [--out DIR] [--no-build] [--docs]
# With the defaults (3 rounds, 4 placements, 2 and 4 ranks) it runs for over 30 minutes on 2 cores and
# prints its estimate first; --quick takes a few minutes.
#
# Exit: 0 the report was written (targets missed are reported, not failed; a missing shm is said
# loudly); 3 a peer other than a missing shm failed in some round (the report still has the rest);
# 1 nothing to report (build failed, no mpirun, another bench-peers running).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS_BUILD_DIR:-$root/build}
bin=$build/bin

mode=full
rounds=""
nps=""
maxbytes=""
mintime=""
out=""
do_build=1
placements=unbound,mpirun-default,shared-core,hog
use_torch=1
docs=0
prog=bench-peers
source "$root/scripts/lib/args.sh"  # usage, bad, value_of
source "$root/scripts/lib/placement.sh"  # set_placement, start_hog, stop_hog, free_port
while [ $# -gt 0 ]; do
  case $1 in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --rounds) rounds=$(value_of "$@") || exit 1; shift ;;
    --np) nps=$(value_of "$@") || exit 1; shift ;;
    -e|--maxbytes) maxbytes=$(value_of "$@") || exit 1; shift ;;
    --min-time) mintime=$(value_of "$@") || exit 1; shift ;;
    --out) out=$(value_of "$@") || exit 1; shift ;;
    --no-build) do_build=0 ;;
    --placements) placements=$(value_of "$@") || exit 1; shift ;;
    --no-torch) use_torch=0 ;;
    --docs) docs=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-peers: unknown argument '$1'; see --help." >&2; exit 1 ;;
  esac
  shift
done

# quick: 1 round, 2 ranks, sizes ×8 up to 128 MiB (8 B, 64 B, ... 16 MiB, 128 MiB: one size in each
# target's range), short timing; full: 3 rounds, 2 and 4 ranks, sizes ×2 up to 256 MiB. Every default
# can be overridden by its flag.
if [ "$mode" = quick ]; then
  rounds=${rounds:-1}; nps=${nps:-2}; maxbytes=${maxbytes:-128M}; mintime=${mintime:-0.01}; factor=8
else
  rounds=${rounds:-3}; nps=${nps:-2,4}; maxbytes=${maxbytes:-256M}; mintime=${mintime:-0.03}; factor=2
fi
# Each peer runs two sweeps: up to 1 MiB, timed for --min-time per size (latency-bound sizes need
# many ops to average out the scheduler); above, a fixed -n 3 (one op lasts milliseconds, and
# dsbench's --min-time pilot alone would cost 5 ops of up to a second each at 256 MiB).
split=1048576
case $rounds in ''|*[!0-9]*|0) bad "--rounds '$rounds' must be a whole number of at least 1" ;; esac
[[ "$nps" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bad "--np '$nps' must be rank counts separated by commas, e.g. 2,4"
[[ "$mintime" =~ ^[0-9]+(\.[0-9]+)?$ ]] || bad "--min-time '$mintime' must be seconds, e.g. 0.03"
[[ "$placements" =~ ^(unbound|mpirun-default|shared-core|hog)(,(unbound|mpirun-default|shared-core|hog))*$ ]] ||
  bad "--placements '$placements' must be names from unbound, mpirun-default, shared-core, hog separated by commas"
max_b=$(numfmt --from=iec "${maxbytes%B}" 2>/dev/null) || bad "-e '$maxbytes' is not a size; give bytes with an optional K, M or G, e.g. 32M"
out=${out:-$root/demo-out/peers-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || { echo "bench-peers: cannot create the output folder $out." >&2; exit 1; }

tools=(dsbench ds_mpi_allreduce_raw ds_membw_probe ds_peers_report)
missing_tool=0
for t in "${tools[@]}"; do [ -x "$bin/$t" ] || missing_tool=1; done
if [ $missing_tool = 1 ] || [ $do_build = 1 ]; then
  if [ $do_build = 0 ]; then
    echo "bench-peers: $bin lacks one of ${tools[*]}; build first (scripts/build.sh) or drop --no-build." >&2
    exit 1
  fi
  echo "== building in $build (scripts/build.sh; up to date builds take seconds)"
  DS_BUILD_DIR=$build "$root/scripts/build.sh" >"$out/build.log" 2>&1 || {
    tail -30 "$out/build.log"; echo "bench-peers: the build failed; full log: $out/build.log" >&2; exit 1; }
  for t in "${tools[@]}"; do
    [ -x "$bin/$t" ] || { echo "bench-peers: $bin/$t was not built (is MPI installed? scripts/setup.sh)." >&2; exit 1; }
  done
fi
mpirun=$(command -v mpirun) || { echo "bench-peers: mpirun not found; install Open MPI (scripts/setup.sh)." >&2; exit 1; }

# One bench-peers at a time on this machine: two at once measure each other (a run beside another
# read raw MPI at 8 B as 4-8 ms). The lock lives as long as this shell; DS_BENCH_PEERS_LOCK moves it.
lock=${DS_BENCH_PEERS_LOCK:-/tmp/dsperf-bench-peers.lock}
exec 9>>"$lock" || { echo "bench-peers: cannot open the lock file $lock; set DS_BENCH_PEERS_LOCK to a writable path." >&2; exit 1; }
if ! flock -n 9; then
  holder=$(cat "$lock.pid" 2>/dev/null || true)
  echo "bench-peers: another bench-peers is running on this machine${holder:+ ($holder)}, and two at once measure each other. Wait for it to finish or stop it, then run this again." >&2
  exit 1
fi
echo "pid $$, started $(date -u +%H:%M:%SZ), results in $out" >"$lock.pid"

# mpirun as root needs these (REFERENCE.md §8); more ranks than cores need --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 DS_ACCELERATOR=cpu
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR TORCHELASTIC_RUN_ID

# The current placement: mpirun's options (place_mpi) and a wrapper before the program (place_wrap),
# set by set_placement; free_port and the hog come from scripts/lib/placement.sh too.
# run_mpi NP LOG CMD...: one job under the current placement, bounded; returns its exit code.
run_mpi() {
  local np=$1 log=$2; shift 2
  MASTER_PORT=$(free_port) timeout --kill-after=10 900 \
    "$mpirun" -np "$np" --oversubscribe "${place_mpi[@]}" -x MASTER_PORT -x DS_ACCELERATOR -x OMP_NUM_THREADS \
    ${place_wrap[@]+"${place_wrap[@]}"} "$@" >"$log" 2>&1
}
# The hog runs for the hog placement only, and is stopped at exit whatever happens.
trap stop_hog EXIT

# The torch peer: Debian's python3-torch lives under /usr/bin/python3 (pyenv's python3 may come first
# on PATH and lack it).
torch_py=""
if [ $use_torch = 1 ]; then
  for py in ${DS_TORCH_PYTHON:-} /usr/bin/python3 python3; do
    if "$py" -c 'import torch' >/dev/null 2>&1; then torch_py=$(command -v "$py"); break; fi
  done
fi

small=(-b 8 -e "$((max_b < split ? max_b : split))" -f "$factor" -n 5 -w 2 --min-time "$mintime")
large=()
first_large=8  # the first size of the ×factor grid from 8 B beyond the small sweep, so both sweeps share one grid
while [ "$first_large" -le "$split" ]; do first_large=$((first_large * factor)); done
[ "$max_b" -ge "$first_large" ] && large=(-b "$first_large" -e "$maxbytes" -f "$factor" -n 3 -w 1)
IFS=, read -r -a np_list <<<"$nps"
start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# CPU time the hypervisor gave to others while this VM wanted it (/proc/stat's steal column, summed
# over CPUs): a noisy neighbour slows every peer of a run, which nothing else in the run shows.
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
read -r ticks_before steal_before < <(cpu_ticks)
echo "== bench-peers ($mode): $rounds round(s), ranks ${np_list[*]}, sizes 8 B to $maxbytes ×$factor, min-time ${mintime}s"
echo "   results in $out; load average before: $load_before"

IFS=, read -r -a place_list <<<"$placements"
echo "   placements: ${place_list[*]}; torch peer: ${torch_py:-none (scripts/setup.sh --peers installs python3-torch)}"
# How long: one full round (4 placements, 2 and 4 ranks, 8 B to 256 MiB) took 581 s on the 2-core
# development machine (issue 30); the estimate scales that by rounds, placements and world sizes.
if [ "$mode" = full ]; then
  est_min=$(( (581 * rounds * ${#place_list[@]} * ${#np_list[@]} / 8 + 59) / 60 ))
  echo "   expected duration: about $est_min min (581 s a round of 4 placements x 2 world sizes on 2 cores);"
  echo "   scripts/bench-peers.sh --quick takes a few minutes (1 round, 2 ranks, fewer sizes)"
else
  echo "   expected duration: a few minutes (--quick); the full matrix (the default) takes over 30 min"
fi

# Is shm there? A one-size run says so (and why not) before the rounds.
# --quick leaves out mpi-raw-nb (a diagnosis of the engine's mpi overhead, no target of its own) to
# keep four placements within a few minutes.
nb=(mpi-raw-nb)
[ "$mode" = quick ] && nb=()
peers=(shm gloo mpi mpi-raw ${nb[@]+"${nb[@]}"})
[ -n "$torch_py" ] && peers+=(torch)
shm_note=""
if ! run_mpi 2 "$out/shm-probe.log" "$bin/dsbench" coll --backend shm -b 8 -e 8 -n 1 -w 0 -c 1 -T 60; then
  why=$(grep -E 'error|Error|not' "$out/shm-probe.log" | sed -n 1,3p)
  echo
  echo "!! shm is MISSING: 'dsbench coll --backend shm' failed, so its columns stay empty and the"
  echo "!! shm targets read n/a. Its output ($out/shm-probe.log):"
  echo "${why:-$(tail -3 "$out/shm-probe.log")}" | sed 's/^/!!   /'
  echo
  shm_note="shm missing: dsbench coll --backend shm failed before the rounds: $(echo "$why" | head -1)"
  peers=(gloo mpi mpi-raw ${nb[@]+"${nb[@]}"})
  [ -n "$torch_py" ] && peers+=(torch)
fi

failed=()
for ((r = 1; r <= rounds; r++)); do
  t0=$(date +%s)
  "$bin/ds_membw_probe" -b 8 -e "$maxbytes" -f "$factor" --ranks "$nps" --min-time 0.02 \
    -J "$out/r$r-limit.json" >"$out/r$r-limit.log" 2>&1 || failed+=("round $r membw probe")
  for place in "${place_list[@]}"; do
  set_placement "$place"
  [ "$place" = hog ] && start_hog
  for np in "${np_list[@]}"; do
    # Rotate the order so that no peer always runs first (warm caches, a quiet machine) or last.
    n=${#peers[@]}
    for ((i = 0; i < n; i++)); do
      peer=${peers[$(((i + r - 1) % n))]}
      p0=$(date +%s.%N)
      rc=0
      for part in small large; do
        if [ $part = small ]; then sweep=("${small[@]}"); else sweep=("${large[@]}"); fi
        [ ${#sweep[@]} -eq 0 ] && continue
        json="$out/r$r-$place-np$np-$peer-$part.json"
        log="$out/r$r-$place-np$np-$peer-$part.log"
        case $peer in
          mpi-raw) run_mpi "$np" "$log" "$bin/ds_mpi_allreduce_raw" "${sweep[@]}" -J "$json" ;;
          mpi-raw-nb) run_mpi "$np" "$log" "$bin/ds_mpi_allreduce_raw" --nonblocking "${sweep[@]}" -J "$json" ;;
          torch) run_mpi "$np" "$log" "$torch_py" "$root/scripts/peers/torch_allreduce.py" \
                   "${sweep[@]}" -T 120 -J "$json" ;;
          # No -I: the per-iteration statistics (p50, p99) are in the JSON without it, and -I's times_us
          # would add every one of --min-time's thousands of iterations to each file.
          *) run_mpi "$np" "$log" "$bin/dsbench" coll --backend "$peer" "${sweep[@]}" -c 1 -T 120 -J "$json" ;;
        esac
        prc=$?
        [ $prc -ne 0 ] && rc=$prc
      done
      secs=$(awk -v a="$p0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      logs="$out/r$r-$place-np$np-$peer-*.log"
      if [ $rc -ne 0 ]; then
        failed+=("round $r $place np=$np $peer (exit $rc, $logs)")
        printf '   round %d/%d  %-14s np=%d  %-10s FAILED (exit %d) after %.1f s; log: %s\n' "$r" "$rounds" "$place" "$np" "$peer" "$rc" "$secs" "$logs"
      else
        printf '   round %d/%d  %-14s np=%d  %-10s %6.1f s\n' "$r" "$rounds" "$place" "$np" "$peer" "$secs"
      fi
    done
  done
  [ "$place" = hog ] && stop_hog
  done
  echo "   round $r took $(( $(date +%s) - t0 )) s"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
read -r ticks_after steal_after < <(cpu_ticks)
steal=$(awk -v t=$((ticks_after - ticks_before)) -v s=$((steal_after - steal_before)) \
  'BEGIN { if (t > 0) printf "%.1f%%", 100 * s / t; else print "unknown" }')
elapsed=$(( $(date +%s) - start ))

echo
# Per placement, its runs plus the round's probe (the limit is the machine's, whatever the placement).
inputs=()
for place in "${place_list[@]}"; do
  inputs+=(--placement "$place")
  for f in "$out"/r*-limit.json "$out"/r*-"$place"-np*.json; do [ -s "$f" ] && inputs+=("$f"); done
done
rev=$(git -C "$root" describe --always --dirty 2>/dev/null || echo "unknown revision")
notes=(--note "bench-peers.sh --$mode: $rounds round(s), placements $placements, ranks $nps, -e $maxbytes -f $factor, min-time ${mintime}s, ${elapsed} s; load average before $load_before, after $load_after; CPU steal $steal of the run")
notes+=(--note "source $rev, $(date -u +%Y-%m-%dT%H:%MZ), $(getconf _NPROCESSORS_ONLN) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))")
[ -n "$shm_note" ] && notes+=(--note "$shm_note")
for f in "${failed[@]}"; do notes+=(--note "failed: $f"); done
"$bin/ds_peers_report" -o "$out/peers.json" --summary "$out/summary.txt" --markdown "$out/tables.md" \
  "${notes[@]}" "${inputs[@]}" \
  | tee "$out/table.txt"
report_rc=${PIPESTATUS[0]}
# The same tables by the per-iteration median and p99 (the targets in them are those of table.txt: all
# three statistics every time). On a busy machine the loop mean is mostly the scheduler's stalls (see
# the noise column); the median shows the collectives themselves, the p99 what a step waits for.
for stat in p50 p99; do
  "$bin/ds_peers_report" --stat $stat "${inputs[@]}" >"$out/table-$stat.txt" || report_rc=1
done
echo
[ -s "$out/summary.txt" ] && cat "$out/summary.txt"
echo
echo "bench-peers: $elapsed s in all; load average before: $load_before, after: $load_after; CPU steal (time the hypervisor gave to other guests): $steal"
[ -n "$shm_note" ] && echo "bench-peers: shm was MISSING from this run (see above)."
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench-peers: these runs failed (their rows are missing):"
  printf '  %s\n' "${failed[@]}"
fi
[ $report_rc -ne 0 ] && { echo "bench-peers: the report failed (exit $report_rc)." >&2; exit 1; }
if [ $docs = 1 ]; then
  # The block between the markers is replaced by tables.md; everything else of the page stays.
  page=$root/docs/performance.md
  begin='<!-- bench-peers tables: begin -->'
  end='<!-- bench-peers tables: end -->'
  if grep -qxF "$begin" "$page" && grep -qxF "$end" "$page"; then
    awk -v b="$begin" -v e="$end" -v f="$out/tables.md" '
      $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
      $0 == e { skip = 0 }
      !skip' "$page" >"$page.tmp" && mv "$page.tmp" "$page"
    echo "bench-peers: docs/performance.md's tables replaced by $out/tables.md"
  else
    echo "bench-peers: --docs: $page lacks the lines '$begin' and '$end'; the tables are in $out/tables.md." >&2
  fi
fi
echo "bench-peers: tables in $out/table.txt (by the loop mean), $out/tables.md (Markdown), $out/table-p50.txt and table-p99.txt (by the per-iteration p50 and p99), the verdicts in $out/summary.txt, JSON in $out/peers.json (dsreport html $out/peers.json)"
[ ${#failed[@]} -gt 0 ] && exit 3
exit 0
