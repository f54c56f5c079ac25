#!/usr/bin/env bash
# sendrecv of 2 ranks on gloo, shm and mpi, two builds interleaved round by round (docs/performance.md,
# "Point-to-point posted when issued"): scripts/bench-p2p.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]
# Prints, per round, build and backend, each size's time per operation (us, out-of-place).
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]   (each a build folder with bin/dsrun and bin/dsbench)" >&2
  exit 2
fi
rounds=${3:-2}
sweep=(coll --coll sendrecv -b 8 -e 1M -f 32 -n 200 -w 20)
pick() { grep -E '^ +[0-9]+ ' | awk '{print "  " $1 " B: " $6 " us"}'; }
for ((round = 1; round <= rounds; round++)); do
  for tree in "$1" "$2"; do
    for be in gloo shm; do
      echo "round $round, $tree, $be"
      timeout 300 "$tree/bin/dsrun" --nproc-per-node 2 --standalone "$tree/bin/dsbench" "${sweep[@]}" --backend "$be" 2>&1 |
        pick || echo "  (failed or skipped)"
    done
    if command -v mpirun >/dev/null; then
      echo "round $round, $tree, mpi"
      timeout 300 mpirun -np 2 --oversubscribe --allow-run-as-root "$tree/bin/dsbench" "${sweep[@]}" --backend mpi 2>&1 |
        pick || echo "  (failed or skipped)"
    fi
  done
done
