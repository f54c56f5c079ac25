#!/usr/bin/env bash
# Tests through a real Slurm (the fixture of scripts/slurm-fixture.sh, one node): how dsbench and
# dsdiag find their world under srun's --mpi plugins, inside allocations wider than the step, from a
# batch script without srun, with a rank that never joins and a port that is taken, and an sbatch
# that ends with dsreport html.
#   slurm_srun_test.sh CASE FIXTURE_DIR BIN_DIR
# Exits 77 (ctest: skipped) with the fixture's reason when Slurm could not start here.
set -uo pipefail
case_=${1:?case} fixture=${2:?fixture dir} bin=${3:?bin dir}
if [[ -f $fixture/skip-reason ]]; then
  cat "$fixture/skip-reason"
  exit 77
fi
if [[ ! -f $fixture/env ]]; then
  echo "slurm test: the fixture in $fixture did not run (run the whole 'slurm' label: ctest -L slurm)"
  exit 77
fi
source "$fixture/env"
work=$(mktemp -d "$fixture/work.$case_.XXXX")
cd "$work" || exit 1
export DS_LOG_LEVEL=info OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect FILE TEXT...: every TEXT occurs in FILE.
expect() {
  local f=$1; shift
  for t in "$@"; do grep -qF -- "$t" "$f" || fail "'$t' not found in $f:"$'\n'"$(tail -30 "$f")"; done
}
expect_not() {
  local f=$1; shift
  for t in "$@"; do ! grep -qF -- "$t" "$f" || fail "'$t' found in $f, but must not be there"; done
}
# run NAME CMD...: runs a bounded command, output in NAME.out, status in $rc.
run() {
  local name=$1; shift
  timeout 120 "$@" >"$name.out" 2>&1
  rc=$?
  echo "--- $name (rc $rc): $*"; tail -5 "$name.out"
}
plugin_available() { srun --mpi=list 2>&1 | grep -qw "$1"; }

case $case_ in
  mpi_none | mpi_pmi2 | mpi_pmix)
    # srun --mpi=PLUGIN with each CPU backend: works, or ends at once naming what works.
    p=${case_#mpi_}
    plugin_available "$p" || { echo "this Slurm has no --mpi=$p plugin (srun --mpi=list)"; exit 77; }
    for b in gloo shm; do
      run "$b" srun -n 2 --mpi="$p" "$bin/dsbench" world --backend "$b" --timeout 60
      [[ $rc == 0 ]] || fail "srun --mpi=$p dsbench world --backend $b exited $rc"
      expect "$b.out" "world_size 2"
      expect_not "$b.out" "MPI_Init"
    done
    # Under ASan, Open MPI's own allocations at MPI_Init (its PMIx plugin here) are not freed at
    # MPI_Finalize, and its libraries have no frame pointers for lsan.supp to match by name: the MPI
    # ranks run without leak detection, as engine/testing's mpirunOptions() does for mpirun.
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" run mpi srun -n 2 --mpi="$p" "$bin/dsbench" world --backend mpi --timeout 60
    if [[ $p == pmix ]]; then
      [[ $rc == 0 ]] || fail "srun --mpi=pmix dsbench world --backend mpi exited $rc"
    else
      [[ $rc != 0 ]] || fail "srun --mpi=$p --backend mpi was expected to be refused"
      expect mpi.out "backend mpi under srun" "--mpi=$p" "srun --mpi=pmix" "backend gloo"
      expect_not mpi.out "Timed out"
    fi
    # dsdiag names the launcher for what it is.
    run diag srun -n 2 --mpi="$p" "$bin/dsdiag" --only mpi.launcher,env.world_info,env.launcher_agreement --backend gloo
    expect diag.out "Slurm srun (--mpi=$p)"
    expect_not diag.out "MPICH/Hydra" "Rank -1"
    ;;

  step_in_wider_allocation)
    # sbatch --ntasks-per-node=4, srun -n 2: the step's world, not the allocation's.
    cat >job.sh <<JOB
#!/bin/bash
srun -n 2 "$bin/dsdiag" --world --backend gloo --timeout 60 --only env,mpi.launcher
echo "dsdiag-rc=\$?"
JOB
    run sbatch sbatch -W -N1 --ntasks-per-node=4 -o job.out job.sh
    expect job.out "env.world_size_product" "dsdiag-rc="
    expect_not job.out "SLURM_NTASKS_PER_NODE=4 =" "dsdiag-rc=2" "dsdiag-rc=3"
    ;;

  batch_without_srun)
    # A batch script that forgot srun: one process that says so, not rank 0 of 4 waiting.
    cat >job.sh <<JOB
#!/bin/bash
"$bin/dsbench" world --backend gloo --timeout 60
echo "dsbench-rc=\$?"
"$bin/dsdiag" --only mpi.launcher,env.world_info
echo "dsdiag-rc=\$?"
JOB
    run sbatch sbatch -W -n 4 -o job.out job.sh
    expect job.out "not in an srun step" "SLURM_NTASKS=4" "dsbench-rc=0" "world_size 1" \
      "outside any srun step" "dsdiag-rc=1"
    expect_not job.out "Timed out"
    ;;

  rank_never_joins)
    # Task 2 dies before joining: the others say who is missing within seconds and name srun -K.
    run srun srun -n 3 bash -c '[[ $SLURM_PROCID == 2 ]] && exit 3; exec "$0" world --backend gloo --timeout 14' "$bin/dsbench"
    [[ $rc != 0 ]] || fail "the step was expected to fail"
    expect srun.out "rendezvous: still waiting after 10 s" "2/3 ranks joined" "missing ranks: 2" "srun, add -K" \
      "Ranks that never joined: 2"
    ;;

  rank_killed_mid_collective)
    # Task 1 is SIGKILLed during a sweep: task 0 names it and ends, well before its 20 s timeout.
    run srun srun -n 2 bash -c 'if [[ $SLURM_PROCID == 1 ]]; then "$0" coll --backend gloo -b 1M -e 64M -f 2 -n 200 --timeout 20 & pid=$!; sleep 4; kill -9 $pid; wait $pid; exit 9; fi; exec "$0" coll --backend gloo -b 1M -e 64M -f 2 -n 200 --timeout 20' "$bin/dsbench"
    [[ $rc != 0 ]] || fail "the step was expected to fail"
    expect srun.out "task 0: Exited with exit code" "failed on rank 0" "is rank 1"
    expect_not srun.out "Timed out after"
    ;;

  port_taken)
    # Rank 0 cannot bind MASTER_PORT: it says why with Slurm's advice, and rank 1 does not wait silently.
    python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >port.txt &
    holder=$!
    for _ in $(seq 1 50); do [[ -s port.txt ]] && break; sleep 0.1; done
    port=$(cat port.txt)
    MASTER_PORT=$port run srun srun -n 2 "$bin/dsbench" world --backend gloo --timeout 14
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    [[ $rc != 0 ]] || fail "the step was expected to fail"
    # Rank 1 reaches the port but finds the silent holder, not a store: it says so within its 10 s
    # handshake bound and points at rank 0's output (before the c10d handshake it waited, saying "still
    # cannot reach the store").
    expect srun.out "failed to bind" "under Slurm, export MASTER_PORT" "srun, add -K" \
      "is not a PyTorch c10d TCPStore server" "see rank 0's output"
    expect_not srun.out "dsrun --standalone"
    ;;

  sbatch_report)
    # A whole batch job: a sweep under srun, then dsreport html on the result.
    cat >job.sh <<JOB
#!/bin/bash
set -e
srun -n 2 --mpi=none "$bin/dsbench" coll --backend gloo -b 8 -e 1K -f 4 -n 2 -w 1 -J sweep.json
"$bin/dsreport" html sweep.json -o report.html
echo "job-done"
JOB
    run sbatch sbatch -W -n 2 -o job.out job.sh
    expect job.out "job-done"
    [[ -s report.html ]] && grep -q "<html" report.html || fail "report.html was not written"
    ;;

  *)
    echo "unknown case '$case_'"
    exit 2
    ;;
esac
[[ $failures == 0 ]] || { echo "$failures failure(s) in $case_ (files kept in $work)"; exit 1; }
rm -rf "$work"
echo "PASS: $case_"
