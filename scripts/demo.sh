#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on 4 local ranks: dsrun starts them, each
# runs init_distributed and a store barrier, and rank 0 prints who is who.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
bin=${DS_BUILD_DIR:-$root/build}/bin
out=${DS_DEMO_DIR:-$root/demo-out}
mkdir -p "$out"
echo
echo "== dsrun --nproc-per-node 4 --standalone dsbench world"
"$bin/dsrun" --nproc-per-node 4 --standalone "$bin/dsbench" world --json "$out/world.json"
echo
echo "demo: the world report is in $out/world.json"
