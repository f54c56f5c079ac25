#!/usr/bin/env bash
# Every GPU check of dsperf in one call, on a GPU node (docs/gpu-nodes.md). It runs inside the
# relocatable bundle (scripts/bundle.sh copies it to the bundle's top folder), installed as
# <prefix>/bin/dsperf-gpu-checks (cmake --install, the .deb), or from the source tree after a CUDA
# build (scripts/gpu-check.sh: DS_GPU_BIN_DIR and DS_GPU_TEST_DIR name the build).
#
# Usage: run-gpu-checks.sh OUTDIR
# Steps, each under its own timeout, 8 minutes in all (DS_GPU_CHECKS_BUDGET_S, default 480):
#   gpu_visible  a. the GPUs (nvidia-smi), the driver, and the NCCL and cuBLAS libraries found
#   dsdiag       b. dsdiag --json: every gpu.* and nccl.* check PASS or WARN, never SKIP or FAIL (but
#                   gpu.topology, which skips on a one-GPU machine without a NIC of its own)
#   gpu_tests    c. the gpu test binaries: NCCL collective matrix at world size 1; tensor, cuBLAS MLP, DDP
#   sweep        d. dsbench world --backend nccl (the NCCL smoke allreduce on device memory), then
#                   dsbench coll --backend nccl, world size 1, every collective, 8 B to 4 GiB, -J
#   two_ranks    e. two ranks on GPU 0: dsdiag --world fails world.gpu_unique naming both ranks and the
#                   bus id; dsbench coll --backend nccl ends within its timeout naming NCCL's duplicate-GPU error
#   train        f. dsbench train on CUDA: the 100m preset and an MLP of width 8192, each in f32 and bf16
#   copies       g. dsbench gpu on every GPU: nvbandwidth's copies (host<->device pinned and pageable, within
#                   a GPU, peer pairs; copy engine and kernel) at 512 MiB, 10 timed after 2, each row with its
#                   bound; a few seconds per GPU. Its JSON goes into peers.json (the 8-file limit below)
#   peers        h. the node's torch on the same work (allreduce, DDP step: torch's DistributedDataParallel
#                   against dsbench train's CUDA-event step, device copy; step g's copies at the same size
#                   with x.copy_, CUDA events, median): ratio tables
#   summary      i. summary.json (a dsperf.diag document: `dsreport html summary.json` makes a report), then
#                   figures.md: the figures of the JSON as Markdown for docs/performance.md's GPU section
#                   (gpu_figures.py, beside the peers: share/dsperf/ in the bundle and the install)
# Files written to OUTDIR (at most 8, the most a GPU machine we run this on hands back from one run):
# gpu-checks.log, summary.json, figures.md, dsdiag.json, sweep-nccl.json, train-100m.json,
# train-mlp8192.json, peers.json. Step e's dsdiag --world JSON stays in a temporary folder: its verdict,
# world.gpu_unique's message, is the step's message in summary.json and figures.md; step g's dsbench gpu
# JSON too, and peers.json holds it whole (its "gpu_copies" block).
# The last line is `gpu-checks: PASS` (exit 0) or `gpu-checks: FAIL (<steps>)` (exit 1); 2: bad usage.
# DS_GPU_CHECKS_STEPS="a list" runs only those steps (never PASS).
set -uo pipefail

if (($# != 1)) || [[ "$1" == -* ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
out=$1
mkdir -p "$out" || { echo "gpu-checks: cannot create the output folder $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ -f "$here/share/dsperf/find-libs.sh" ]]; then
  mode=bundle
  bin=$here/bin
  tests=$here/libexec
  peers=$here/share/dsperf/peers
  figures=$here/share/dsperf/gpu_figures.py
  bundle_source=$(sed -n 's/^source: //p' "$here/MANIFEST" 2>/dev/null)
  # shellcheck source=bundle/find-libs.sh
  source "$here/share/dsperf/find-libs.sh"
  DS_BUNDLE_QUIET=1 ds_bundle_find_libs "$here"
elif [[ -x "$here/dsdiag" && -d "$here/../share/dsperf/peers" ]]; then
  # Installed (cmake --install or the .deb) as <prefix>/bin/dsperf-gpu-checks: cmake/install.cmake.
  mode=installed
  bin=$here
  tests=$here/../libexec/dsperf
  peers=$here/../share/dsperf/peers
  figures=$here/../share/dsperf/gpu_figures.py
else
  mode=source
  bin=${DS_GPU_BIN_DIR:-$here/../build-gpu/bin}
  tests=${DS_GPU_TEST_DIR:-$here/../build-gpu/tests}
  peers=$here/bundle/peers
  figures=$here/bundle/gpu_figures.py
fi
python=${DS_PYTHON:-python3}
budget_s=${DS_GPU_CHECKS_BUDGET_S:-480}
[[ "$budget_s" =~ ^[0-9]+$ ]] || { echo "gpu-checks: DS_GPU_CHECKS_BUDGET_S='$budget_s' is not a whole number of seconds" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-checks.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
STEPS=(gpu_visible dsdiag gpu_tests sweep two_ranks train copies peers)
REQUIRED=(gpu_visible)
if [[ -n "${DS_GPU_CHECKS_STEPS:-}" ]]; then
  read -r -a STEPS <<<"$DS_GPU_CHECKS_STEPS"
  echo "gpu-checks: running only ${STEPS[*]} (DS_GPU_CHECKS_STEPS)"
fi
t0=$SECONDS
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
remaining() { echo $((budget_s - (SECONDS - t0))); }
# Runs a command under min($1, what is left of the budget) seconds; 124 when cut off.
bounded() {
  local limit=$1 left
  shift
  left=$(remaining)
  ((left < limit)) && limit=$left
  ((limit < 1)) && return 124
  timeout -k 5 "$limit" "$@"
}
why=""     # a step's one-line reason when it fails
remedy=""  # and what to do, when the step knows better than "read the log"
note=""    # what a step that passed proved, when "ok" says too little
# JSON queries go through the node's python (present on every node the bundle targets).
pyq() { "$python" -c "$1" "${@:2}"; }

step_gpu_visible() {
  echo "dsperf run-gpu-checks ($mode), host $(uname -n), $started"
  [[ -n "${DS_BUNDLE_LIBS:-}" ]] && echo "libraries: $DS_BUNDLE_LIBS"
  if ! command -v nvidia-smi >/dev/null; then
    why="no GPU: nvidia-smi is not installed, so this machine has no NVIDIA driver"
    remedy="Run on a GPU node with the NVIDIA driver loaded (nvidia-smi -L must list a GPU)."
    echo "$why"
    return 1
  fi
  local list rc
  list=$(bounded 10 nvidia-smi -L 2>&1)
  rc=$?
  echo "$list"
  if ((rc != 0)) || ! grep -q '^GPU [0-9]' <<<"$list"; then
    why="no GPU: nvidia-smi lists none (exit $rc)"
    remedy="Check the driver (dmesg for Xid/NVRM errors) and CUDA_VISIBLE_DEVICES."
    echo "$why"
    return 1
  fi
  # Kept for summary.json (gpu_checks.nvidia_smi), where figures.md reads the GPUs and driver when
  # dsdiag.json has none.
  bounded 10 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,persistence_mode \
    --format=csv 2>&1 | tee "$tmp/nvidia-smi.csv"
  if [[ "${DS_BUNDLE_LIBS:-}" == *"NOT FOUND"* ]]; then
    why="libraries missing: ${DS_BUNDLE_LIBS#*NOT FOUND: }"
    remedy="Set DS_NCCL_LIB / DS_CUBLAS_LIB to the folder holding them, or DS_PYTHON to a python with nvidia-nccl-cu13 and nvidia-cublas."
    return 1
  fi
}

step_dsdiag() {
  DS_ACCELERATOR=cuda bounded 60 "$bin/dsdiag" --backend nccl --json "$out/dsdiag.json"
  local rc=$?
  [[ -f "$out/dsdiag.json" ]] || { why="dsdiag wrote no JSON (exit $rc)"; return 1; }
  local bad
  bad=$(pyq 'import json, sys
j = json.load(open(sys.argv[1]))
print("; ".join(c["id"] + " " + c["status"] for c in j["checks"]
                if c["id"].split(".")[0] in ("gpu", "nccl") and c["status"] not in ("PASS", "WARN")
                and not (c["id"] == "gpu.topology" and c["status"] == "SKIP")))' \
    "$out/dsdiag.json") || { why="dsdiag.json is unreadable"; return 1; }
  if [[ -n "$bad" ]]; then
    why="gpu/nccl checks not PASS or WARN: $bad"
    return 1
  fi
}

step_gpu_tests() {
  local t failed=()
  for t in ds_nccl_gpu_tests ds_ddp_gpu_tests; do
    if [[ ! -x "$tests/$t" ]]; then
      failed+=("$t missing")
      continue
    fi
    echo "--- $t"
    DS_REQUIRE_GPU=1 bounded 150 "$tests/$t" --gtest_brief=1 || failed+=("$t exit $?")
  done
  ((${#failed[@]} == 0)) || { why="${failed[*]}"; return 1; }
}

step_sweep() {
  # The NCCL smoke test docs/dsdiag.md promises: a checked allreduce on device memory, world size 1.
  DS_ACCELERATOR=cuda bounded 60 "$bin/dsbench" world --backend nccl >"$tmp/world-nccl.txt" 2>&1
  local wrc=$?
  cat "$tmp/world-nccl.txt"
  grep -q "smoke allreduce on nccl: ok" "$tmp/world-nccl.txt" ||
    { why="dsbench world --backend nccl (exit $wrc) printed no 'smoke allreduce on nccl: ok'"; return 1; }
  DS_ACCELERATOR=cuda bounded 150 "$bin/dsbench" coll --backend nccl --coll all -b 8 -e 4G -f 4 -n 10 -w 2 \
    -T 60 -J "$out/sweep-nccl.json" --journal "$tmp/sweep.journal.jsonl"
  local rc=$?
  ((rc == 0)) || { why="dsbench coll --backend nccl exit $rc$( ((rc == 124)) && echo ' (cut off: a hang)')"; return 1; }
}

step_two_ranks() {
  # Both ranks take GPU 0: LOCAL_RANK=0 for each, as a launcher that loses the local rank would do.
  local problems=()
  # Its JSON stays in $tmp (OUTDIR holds at most 8 files); the verdict goes to the step's message.
  CUDA_VISIBLE_DEVICES=0 DS_ACCELERATOR=cuda bounded 60 "$bin/dsrun" --standalone --nproc-per-node 2 -- env LOCAL_RANK=0 \
    "$bin/dsdiag" --world --timeout 30 --json "$tmp/two-ranks.json" >"$tmp/world.txt" 2>&1
  local rc=$?
  tail -n 20 "$tmp/world.txt"
  local seen=""
  if [[ ! -f "$tmp/two-ranks.json" ]]; then
    problems+=("dsdiag --world wrote no JSON (exit $rc)")
  else
    local verdict
    verdict=$(pyq 'import json, re, sys
j = json.load(open(sys.argv[1]))
c = [c for c in j["checks"] if c["id"] == "world.gpu_unique"]
if not c: print("BAD world.gpu_unique missing"); sys.exit()
m = " ".join(c[0]["message"].split())
if c[0]["status"] != "FAIL": print("BAD world.gpu_unique is " + c[0]["status"] + ", not FAIL: " + m)
elif not re.search(r"ranks 0-1 share GPU [0-9a-fA-F]+:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9]", m):
    print("BAD world.gpu_unique does not name both ranks and the bus id: " + m)
else: print("OK world.gpu_unique FAIL, as it must: " + m)' \
      "$tmp/two-ranks.json")
    echo "${verdict#* }"
    case $verdict in
      "OK "*) seen=${verdict#OK } ;;
      "BAD "*) problems+=("${verdict#BAD }") ;;
      *) problems+=("two-ranks.json is unreadable") ;;
    esac
  fi
  CUDA_VISIBLE_DEVICES=0 NCCL_DEBUG=WARN DS_ACCELERATOR=cuda bounded 90 "$bin/dsrun" --standalone \
    --nproc-per-node 2 -- env LOCAL_RANK=0 "$bin/dsbench" coll --backend nccl -b 1M -e 1M -n 5 -T 30 \
    >"$tmp/dup.txt" 2>&1
  rc=$?
  grep -iE 'duplicate|error' "$tmp/dup.txt" | sed -n 1,8p
  if ((rc == 124)); then
    problems+=("dsbench on two ranks of one GPU hung until the step's timeout")
  elif ((rc == 0)); then
    problems+=("dsbench on two ranks of one GPU succeeded: NCCL should refuse a duplicate GPU")
  elif ! grep -qi 'duplicate GPU' "$tmp/dup.txt"; then
    problems+=("dsbench failed (exit $rc) without naming NCCL's duplicate-GPU error")
  fi
  note="$seen; dsbench coll --backend nccl ended (exit $rc) naming NCCL's duplicate-GPU error"
  ((${#problems[@]} == 0)) || { why=$(printf '%s; ' "${problems[@]}"); why=${why%; }; return 1; }
}

step_train() {
  # Both dtypes in one file per model (one run per --dtype value): OUTDIR's 8-file limit holds.
  local failed=()
  DS_ACCELERATOR=cuda bounded 150 "$bin/dsbench" train --backend nccl --model 100m --batch 64 --steps 20 \
    --warmup 5 --dtype f32,bf16 --json "$out/train-100m.json" || failed+=("100m exit $?")
  DS_ACCELERATOR=cuda bounded 150 "$bin/dsbench" train --backend nccl --model mlp:8192x8 --batch 256 --steps 20 \
    --warmup 5 --dtype f32,bf16 --json "$out/train-mlp8192.json" || failed+=("mlp:8192x8 exit $?")
  # dsbench train keeps a journal beside each JSON so that a killed run keeps its steps; a JSON that
  # was written holds them all, and the journals would pass the 8 files the output may hold.
  for f in "$out"/train-*.json; do
    [[ -f "$f" ]] || continue
    rm -f "${f%.json}.journal.jsonl"
    pyq 'import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    t = r["time_ms"]; step = t["step"]["p50"]
    tf = r.get("gemm_tflops") or 6.0 * r["params"] * r["per_rank_batch"] / (step * 1e-3) / 1e12
    print("%s %s batch %d overlap %s: step %.2f ms = forward %.2f + backward %.2f + exposed comm %.2f + optimizer %.2f; GEMMs %.1f TFLOP/s"
          % (r["model"], r.get("dtype", "f32"), r["per_rank_batch"], "on" if r["overlap"] else "off", step,
             t["forward"]["p50"], t["backward_compute"]["p50"], t["exposed_comm"]["p50"], t["optimizer"]["p50"], tf))' "$f" || true
  done
  ((${#failed[@]} == 0)) || { why="${failed[*]}"; return 1; }
}

step_copies() {
  # nvbandwidth's default size; 10 timed copies after 2 keep it to seconds per GPU (pageable rows are the
  # slowest, some 25-50 ms a copy). The JSON stays in $tmp for the peers step (OUTDIR's 8 files).
  DS_ACCELERATOR=cuda bounded 90 "$bin/dsbench" gpu --size 512M -n 10 --warmup 2 -J "$tmp/gpu-copies.json"
  local rc=$?
  ((rc == 0)) || { why="dsbench gpu exit $rc$( ((rc == 124)) && echo ' (cut off)')"; return 1; }
  local verdict
  verdict=$(pyq 'import json, sys
j = json.load(open(sys.argv[1]))
rows = j["rows"]
bad = [r["testcase"] for r in rows if not r["skipped"] and not r["median_gbps"] > 0]
bad += [r["testcase"] + " skipped (" + r["note"] + ")" for r in rows if r["skipped"] and r["peer"] is None]
if bad: print("BAD " + "; ".join(bad)); sys.exit()
def show(r):
    b = r["bound"]
    return "%s %.1f GB/s (%s)" % (r["testcase"], r["median_gbps"],
        "%.0f%% of %s" % (100 * b["fraction"], b["name"]) if b.get("fraction") else "bound unknown")
first = j["devices"][0]["index"] if j["devices"] else 0
keep = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_local_copy")
peers = [r for r in rows if r["peer"] is not None]
print("OK GPU %d: " % first + ", ".join(show(r) for r in rows if r["device"] == first and r["testcase"] in keep)
      + "; %d GPU(s), %d rows, %d peer rows (%d skipped)" % (len(j["devices"]), len(rows), len(peers),
                                                             sum(r["skipped"] for r in peers)))' \
    "$tmp/gpu-copies.json") || { why="dsbench gpu's JSON is unreadable"; return 1; }
  case $verdict in
    "OK "*) note=${verdict#OK } ;;
    "BAD "*) why="dsbench gpu rows without a figure: ${verdict#BAD }"; return 1 ;;
    *) why="dsbench gpu's JSON is unreadable"; return 1 ;;
  esac
}

step_peers() {
  local args=(--out "$out/peers.json" --budget-s 100)
  [[ -f "$out/sweep-nccl.json" ]] && args+=(--sweep "$out/sweep-nccl.json")
  [[ -f "$tmp/gpu-copies.json" ]] && args+=(--gpu-copies "$tmp/gpu-copies.json")
  local f
  for f in "$out"/train-*.json; do [[ -f "$f" ]] && args+=(--train "$f"); done
  bounded 150 "$python" "$peers/torch_peers.py" "${args[@]}"
  local rc=$?
  ((rc == 0)) || { why="torch peers exit $rc (see above)"; return 1; }
}

is_required() { local s; for s in "${REQUIRED[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }

# One dsperf.diag record per step (JSON-escaped through python when present, by sed otherwise).
records=()
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=$(tr -d '\000-\037' <<<"$s")
  printf '"%s"' "$s"
}
npass=0 nskip=0 nfail=0
record() {  # step status message remedy seconds
  case $2 in PASS) npass=$((npass + 1)) ;; SKIP) nskip=$((nskip + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
  records+=("{\"id\": \"gpu_checks.$1\", \"family\": \"gpu_checks\", \"status\": \"$2\", \"message\": $(json_str "$3"), \"remedy\": $(json_str "$4"), \"data\": {\"seconds\": $5}, \"rank\": -1, \"host\": $(json_str "$(uname -n)")}")
}

run_all() {
  failed_steps=()
  stopped=""
  for step in "${STEPS[@]}"; do
    if ! declare -F "step_$step" >/dev/null; then
      echo "gpu-checks: unknown step '$step' (steps: gpu_visible dsdiag gpu_tests sweep two_ranks train copies peers)"
      failed_steps+=("$step")
      record "$step" FAIL "unknown step" "Use the step names of run-gpu-checks.sh --help." 0
      continue
    fi
    if [[ -n "$stopped" ]]; then
      echo "gpu-checks: $step: not run ($stopped failed)"
      record "$step" SKIP "not run: $stopped failed" "" 0
      continue
    fi
    echo "===== gpu-checks: $step ($(remaining) s of the budget left) ====="
    start=$SECONDS
    why=""
    remedy=""
    note=""
    if "step_$step"; then
      echo "gpu-checks: $step: ok ($((SECONDS - start)) s)${note:+: $note}"
      record "$step" PASS "${note:-ok}" "" $((SECONDS - start))
    else
      echo "gpu-checks: $step: FAILED ($((SECONDS - start)) s): ${why:-see the output above}"
      failed_steps+=("$step")
      record "$step" FAIL "${why:-failed, see gpu-checks.log}" "${remedy:-See the output of the step in gpu-checks.log.}" \
        $((SECONDS - start))
      is_required "$step" && stopped=$step
    fi
  done

  if ((${#failed_steps[@]} == 0)) && [[ -n "${DS_GPU_CHECKS_STEPS:-}" ]]; then
    result="FAIL (only ${STEPS[*]} ran, by DS_GPU_CHECKS_STEPS)"
  elif ((${#failed_steps[@]} == 0)); then
    result="PASS"
  else
    result="FAIL ($(IFS=,; echo "${failed_steps[*]}"))"
  fi
  # What figures.md heads its table with, beside dsdiag.json's versions (absent when step b did not run).
  local version smi=()
  version=$(timeout -k 5 10 "$bin/dsdiag" --version 2>/dev/null | head -n 1)
  if [[ -f "$tmp/nvidia-smi.csv" ]]; then
    local line
    while IFS= read -r line; do smi+=("$(json_str "$line")"); done <"$tmp/nvidia-smi.csv"
  fi
  write_summary() {  # again once figures.md is written, so that its list of files names it
    local files
    files=$(cd "$out" && ls -1 | grep -v '^summary.json$' | sed 's/.*/"&"/' | paste -sd, -)
    {
      echo "{\"schema\": \"dsperf.diag\", \"schema_version\": \"1.0\", \"mode\": \"local\", \"world_size\": 1,"
      echo " \"host\": $(json_str "$(uname -n)"), \"tool_version\": \"run-gpu-checks ($mode)\","
      echo " \"summary\": {\"pass\": $npass, \"warn\": 0, \"fail\": $nfail, \"skip\": $nskip, \"exit_code\": $((nfail > 0 ? 2 : 0))},"
      echo " \"gpu_checks\": {\"result\": $(json_str "gpu-checks: $result"), \"started\": \"$started\", \"seconds\": $((SECONDS - t0)),"
      echo "  \"budget_s\": $budget_s, \"dsperf\": $(json_str "$version"), \"bundle_source\": $(json_str "${bundle_source:-}"),"
      echo "  \"nvidia_smi\": [$(IFS=,; echo "${smi[*]-}")], \"files\": [${files}]},"
      echo " \"checks\": ["
      (IFS=$'\n'; echo "${records[*]}" | sed '$!s/$/,/')
      echo " ]}"
    } >"$out/summary.json"
  }
  write_summary
  echo "gpu-checks: wrote $out/summary.json (dsreport html $out/summary.json makes a report; the sweep and train JSON are standard dsperf files)"
  local frc
  if [[ ! -f "$figures" ]]; then
    echo "gpu-checks: figures.md not written: $figures is missing"
  else
    timeout -k 5 60 "$python" "$figures" "$out" 2>&1
    frc=$?
    if ((frc == 0)) && [[ -f "$out/figures.md" ]]; then
      write_summary
      echo "gpu-checks: wrote $out/figures.md (the run's figures as Markdown tables, ready for docs/performance.md's GPU section)"
    else
      echo "gpu-checks: figures.md not written: $python $figures $out exit $frc"
    fi
  fi
  echo "gpu-checks: total $((SECONDS - t0)) s of ${budget_s} s"
  echo "gpu-checks: $result"
  [[ "$result" == PASS ]]
}

# Everything the steps print also goes to gpu-checks.log; the pipeline ends only when tee has written it.
run_all 2>&1 | tee "$out/gpu-checks.log"
exit "${PIPESTATUS[0]}"
