#!/usr/bin/env bash
# Label deepspeed: the differential test against the DeepSpeed installed here, live.
#
#   live_test.sh CASE BIN_DIR TEST_DIR      CASE: table | launcher | runner
#
#   table     re-records every environment of cases.json with the real DeepSpeed (into a temp file)
#             and compares dsperf's DeepSpeed view with it: the gtest on every case, and dsbench's and
#             dsdiag's JSON on the CLI cases.
#   launcher  DeepSpeed's own launcher starts dsbench directly (`deepspeed --no_python
#             --no_local_rank --num_gpus 2 dsbench world`), bare and inside a Slurm step's variables
#             (the case dsperf used to refuse): both must form a 2-rank world.
#   runner    re-records DeepSpeed's runner (fetch_hostfile, parse_inclusion_exclusion, runner.main)
#             on every case of runner_cases.json and compares dsperf's runner model with it.
#
# Skips (77) with the reason where DeepSpeed does not import: DS_DEEPSPEED_PYTHON, else the venv of
# scripts/deepspeed/setup-venv.sh.
set -uo pipefail
case_name=$1 bin=$2 tests=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
py=${DS_DEEPSPEED_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/dsperf/deepspeed-venv/bin/python}
if [ ! -x "$py" ]; then
  echo "SKIP: no DeepSpeed venv at $py; create it with scripts/deepspeed/setup-venv.sh (or set DS_DEEPSPEED_PYTHON)."
  exit 77
fi
if ! version=$(env -i PATH=/usr/bin:/bin HOME="$HOME" CUDA_VISIBLE_DEVICES= "$py" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1); then
  echo "SKIP: DeepSpeed does not import with $py; re-run scripts/deepspeed/setup-venv.sh."
  exit 77
fi
echo "DeepSpeed $version ($py)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case "$case_name" in
  table)
    python3 "$root/scripts/deepspeed/record.py" --python "$py" --out "$tmp/live.json" || exit 1
    DS_DEEPSPEED_FIXTURES="$tmp/live.json" "$tests/ds_deepspeed_fixture_tests" \
      --gtest_filter='DeepSpeedFixtures.*' || exit 1
    python3 "$here/compare_cli.py" "$bin" --fixtures "$tmp/live.json" || exit 1
    ;;
  launcher)
    launcher="$(dirname "$py")/deepspeed"
    [ -x "$launcher" ] || { echo "SKIP: no deepspeed launcher beside $py"; exit 77; }
    base=(env -i PATH="$(dirname "$py"):/usr/bin:/bin" HOME="$HOME" CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1
          DS_ACCELERATOR=cpu DEEPSPEED_TIMEOUT=1)
    slurm=(SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_NUM_TASKS=1 SLURM_LOCALID=0
           SLURM_NODEID=0 SLURM_JOB_NODELIST=localhost SLURM_STEP_NODELIST=localhost)
    port=$((20000 + RANDOM % 20000))
    for where in bare slurm_step; do
      extra=()
      [ "$where" = slurm_step ] && extra=("${slurm[@]}")
      out="$tmp/$where.txt"
      timeout 120 "${base[@]}" ${extra[@]+"${extra[@]}"} "$launcher" --no_python --no_local_rank --num_gpus 2 \
        --master_port "$port" "$bin/dsbench" world --json "$tmp/$where.json" >"$out" 2>&1
      rc=$?
      port=$((port + 1))
      if [ $rc -ne 0 ] || ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d["ranks"]) == 2 else 1)' "$tmp/$where.json" 2>/dev/null; then
        echo "FAIL ($where): deepspeed --no_python ... dsbench world did not form a 2-rank world (exit $rc):"
        tail -40 "$out"
        exit 1
      fi
      echo "ok ($where): DeepSpeed's launcher started a 2-rank dsbench world"
    done
    ;;
  runner)
    python3 "$root/scripts/deepspeed/record_runner.py" --python "$py" --out "$tmp/runner.json" || exit 1
    DS_DEEPSPEED_RUNNER_FIXTURES="$tmp/runner.json" "$tests/ds_deepspeed_runner_tests" \
      --gtest_filter='DeepSpeedRunnerFixtures.*' || exit 1
    ;;
  *)
    echo "live_test.sh: unknown case '$case_name' (table, launcher or runner)" >&2
    exit 2
    ;;
esac
