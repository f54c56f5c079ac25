#!/usr/bin/env python3
"""Makes real PyTorch Flight Recorder (FR) dumps with torch's gloo backend, one injected fault per
scenario, as test fixtures of `dsdiag hang` (diag/hang/tests/fixtures/torch-<version>-gloo/).

    python make_fr_fixtures.py OUTDIR [--scenario NAME]... [--timeout S] [--buffer N] [--no-analyzer]

Run it with the python of scripts/hang/setup-torch-venv.sh (torch 2.15.0). For every scenario it
spawns 4 ranks (subprocesses of this file, `--worker`) on 127.0.0.1, a free port, env:// rendezvous,
gloo with a short collective timeout. Each rank: a world group and new_group([0, 1]) beside it, ~20
healthy collectives on the world group plus 3 on the subgroup, then the scenario's fault. Every
wait is bounded: each rank has a deadline and the parent kills whatever is left.

What each scenario folder gets (OUTDIR/<scenario>/):
  rank_<N>, json/rank_<N>.json        dump after the timeout (or, for `healthy`, at the end): the
                                      rank catches the collective's exception and calls
                                      _dump_fr_trace() / _dump_fr_trace_json(). If torch itself
                                      wrote a dump on the timeout (TORCH_FR_DUMP_ON_TIMEOUT and
                                      TORCH_FR_DUMP_TEMP_FILE are set for the ranks) that file is
                                      taken instead and expected.json says so. In 2.15 gloo never does.
  during_hang/rank_<N>, during_hang/json/rank_<N>.json
                                      dump taken while the ranks are blocked, half-way into the
                                      timeout, by a thread of the rank (not for `healthy`): gloo
                                      retires the failed collective when it throws, so only this
                                      dump shows it still in flight.
  expected.json                       the injected fault and who is to blame
  torch_fr_trace.txt                  torch's own analyzer (fr_trace) on those pickles
Ranks that die (crash) leave no dump.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta

WORLD = 4
SUB_RANKS = [0, 1]
SCENARIOS = ["healthy", "skip", "size", "op", "dtype", "stall", "crash", "subgroup", "p2p", "raise"]

# What each scenario injects, at which rank. The sequence ids are filled in from the plan below
# (healthy world collectives are seq 1..N_WORLD_HEALTHY; the subgroup's are 1..N_SUB_HEALTHY).
FAULTS = {
    "healthy": dict(culprits=[],
                    fault="No fault: {nw} collectives on the world group (pg 0) and {ns} on the "
                          "[0, 1] subgroup (pg 1) all complete; every rank dumps on demand at the end."),
    "skip": dict(culprits=[2],
                 fault="Rank 2 skips the all_reduce at world-group (pg 0) collective_seq_id {f} that "
                       "ranks 0, 1, 3 enter, and waits without entering any other collective; "
                       "ranks 0, 1, 3 time out in it."),
    "size": dict(culprits=[1],
                 fault="Rank 1 calls the all_reduce at world-group (pg 0) collective_seq_id {f} with "
                       "a float32 tensor of 17 elements where ranks 0, 2, 3 use 16."),
    "op": dict(culprits=[3],
               fault="Rank 3 calls broadcast (src 0) at world-group (pg 0) collective_seq_id {f} "
                     "where ranks 0, 1, 2 call all_reduce (same float32[16] tensor)."),
    "dtype": dict(culprits=[1],
                  fault="Rank 1 calls the all_reduce at world-group (pg 0) collective_seq_id {f} "
                        "with a float64[16] tensor where ranks 0, 2, 3 use float32[16]."),
    "stall": dict(culprits=[2],
                  fault="Rank 2 sleeps {stall}s (twice the {t}s timeout) on the host before "
                        "entering the all_reduce at world-group (pg 0) collective_seq_id {f}; "
                        "ranks 0, 1, 3 time out in it first, rank 2 enters late and times out too."),
    "crash": dict(culprits=[3],
                  fault="Rank 3 exits (os._exit(1)) just before the all_reduce at world-group "
                        "(pg 0) collective_seq_id {f} and leaves no dump; ranks 0, 1, 2 fail in it."),
    "raise": dict(culprits=[3],
                  fault="Rank 3 raises ValueError in its own code (load_batch) just before the "
                        "all_reduce at world-group (pg 0) collective_seq_id {f}; Python prints the "
                        "traceback and the process exits with code 1, leaving no dump; ranks 0, 1, 2 "
                        "fail in the all_reduce and print theirs. The ranks' logs are kept in logs/."),
    "subgroup": dict(culprits=[1],
                     fault="Rank 1 never enters the all_reduce at the [0, 1] subgroup's (pg 1) "
                           "collective_seq_id {sf} and goes on to the world all_reduce at pg 0 "
                           "collective_seq_id {f}; rank 0 blocks in the subgroup op, so ranks 1, 2, "
                           "3 block in the world op waiting for rank 0 (stuck in group B keeps "
                           "group A waiting)."),
    "p2p": dict(culprits=[1],
                fault="Rank 0 sends a float32[16] to rank 1 (world group, dist.send) but rank 1 "
                      "never posts the recv and goes on to the world all_reduce at pg 0 "
                      "collective_seq_id {f} with ranks 2, 3; rank 0 blocks in the send. gloo "
                      "records no send/recv in the Flight Recorder, so the dumps show only rank 0 "
                      "missing from the world all_reduce."),
}

N_WORLD_HEALTHY = 20
N_SUB_HEALTHY = 3


# ----------------------------------------------------------------------------------------------
# rank side
# ----------------------------------------------------------------------------------------------

def _log(rank, msg):
    sys.stdout.write(f"[rank {rank} +{time.monotonic() - _T0:.2f}s] {msg}\n")
    sys.stdout.flush()


_T0 = time.monotonic()


def healthy_steps(dist, torch, rank, sub):
    """20 world collectives (pg 0, collective_seq_id 1..20) and, on ranks 0 and 1, 3 collectives on
    the [0, 1] subgroup (pg 1, seq 1..3). One entry each in the trace."""
    W = WORLD
    f16 = lambda v=1.0: torch.full((16,), float(v))
    in_sub = rank in SUB_RANKS

    def sub_op(kind):
        if not in_sub:
            return
        t = torch.full((4,), float(rank))
        if kind == "all_reduce":
            dist.all_reduce(t, group=sub)
        else:
            dist.broadcast(t, src=0, group=sub)

    t = f16(rank)
    dist.all_reduce(t)                                                   # 1
    dist.broadcast(t, src=0)                                             # 2
    dist.all_gather([torch.zeros(4) for _ in range(W)], torch.ones(4))  # 3
    dist.all_reduce(t)                                                   # 4
    sub_op("all_reduce")                                                 # sub 1
    dist.reduce_scatter_tensor(torch.zeros(4), f16())                    # 5 (gloo: all_reduce)
    dist.all_gather_into_tensor(torch.zeros(4 * W), torch.ones(4))      # 6
    dist.all_reduce(t)                                                   # 7
    dist.reduce(t, dst=0)                                                # 8
    dist.broadcast(t, src=1)                                             # 9
    dist.all_reduce(torch.ones(8, dtype=torch.int64))                    # 10
    sub_op("broadcast")                                                  # sub 2
    dist.all_to_all_single(torch.zeros(8), torch.ones(8))                # 11
    dist.barrier()                                                       # 12
    dist.all_reduce(t)                                                   # 13
    dist.all_gather([torch.zeros(4) for _ in range(W)], torch.ones(4))  # 14
    dist.all_reduce(t)                                                   # 15
    sub_op("all_reduce")                                                 # sub 3
    dist.broadcast(t, src=0)                                             # 16
    dist.all_reduce(t)                                                   # 17
    dist.all_gather_into_tensor(torch.zeros(4 * W), torch.ones(4))      # 18
    dist.all_reduce(t)                                                   # 19
    dist.broadcast(t, src=2)                                             # 20


def worker(scenario, rank, port, outdir, timeout_s, deadline_s):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch
    import torch.distributed as dist
    c10d = torch._C._distributed_c10d

    # Whatever happens, this rank is gone by its deadline.
    def _bail():
        _log(rank, "deadline reached; exiting")
        os._exit(3)
    bail = threading.Timer(deadline_s, _bail)
    bail.daemon = True
    bail.start()

    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timeout)
    sub = dist.new_group(SUB_RANKS, timeout=timeout)
    store = dist.distributed_c10d._get_default_store()

    def write_dump(folder):
        os.makedirs(os.path.join(folder, "json"), exist_ok=True)
        pk = c10d._dump_fr_trace()
        js = c10d._dump_fr_trace_json()
        with open(os.path.join(folder, f"rank_{rank}"), "wb") as f:
            f.write(pk)
        with open(os.path.join(folder, "json", f"rank_{rank}.json"), "wb") as f:
            f.write(js)

    healthy_steps(dist, torch, rank, sub)
    _log(rank, "healthy part done")
    # The first dump of a process that holds entries takes seconds (the frames' symbolizer is set
    # up lazily); take one now and drop it, so that the dump taken while the ranks hang is not
    # delayed past the timeout.
    t = time.monotonic()
    c10d._dump_fr_trace()
    _log(rank, f"warm-up dump took {time.monotonic() - t:.2f}s")

    outcome = {"error": None, "raised_after_s": None, "during_hang_dump_after_s": None}
    during = None
    fault_t0 = time.monotonic()
    if scenario != "healthy" and not (scenario in ("crash", "raise") and rank == 3):
        def _during():
            took = time.monotonic() - fault_t0
            write_dump(os.path.join(outdir, "during_hang"))
            outcome["during_hang_dump_after_s"] = round(took, 2)
            _log(rank, f"during-hang dump written at +{took:.2f}s after reaching the fault")
        during = threading.Timer(timeout_s * 0.5, _during)
        during.start()

    t16 = torch.full((16,), 1.0)
    if scenario == "raise" and rank == 3:
        def load_batch(step):
            tokens = [16] * 1833 + [17]
            if len(set(tokens)) != 1:
                raise ValueError(f"batch {step}: sample {len(tokens)} has {tokens[-1]} tokens, expected 16")
        _log(rank, "raising ValueError in load_batch (uncaught)")
        load_batch(N_WORLD_HEALTHY + 1)   # Python prints the traceback and exits 1: no dump
    try:
        if scenario == "healthy":
            # gloo retires an entry on its own thread after the caller's wait returns, so a dump
            # taken at once can show the last collective or two not completed yet; let it settle.
            time.sleep(1.0)
        elif scenario == "skip":
            if rank == 2:
                time.sleep(timeout_s + 1.5)   # does something else; never enters the all_reduce
            else:
                dist.all_reduce(t16)
        elif scenario == "size":
            dist.all_reduce(torch.ones(17) if rank == 1 else t16)
        elif scenario == "op":
            if rank == 3:
                dist.broadcast(t16, src=0)
            else:
                dist.all_reduce(t16)
        elif scenario == "dtype":
            dist.all_reduce(torch.ones(16, dtype=torch.float64) if rank == 1 else t16)
        elif scenario == "stall":
            if rank == 2:
                time.sleep(2 * timeout_s)
            dist.all_reduce(t16)
        elif scenario == "crash":
            if rank == 3:
                _log(rank, "crashing: os._exit(1)")
                os._exit(1)
            dist.all_reduce(t16)
        elif scenario == "raise":
            dist.all_reduce(t16)                             # rank 3 raised before it
        elif scenario == "subgroup":
            if rank == 0:
                dist.all_reduce(torch.ones(4), group=sub)   # rank 1 never comes
            dist.all_reduce(t16)
        elif scenario == "p2p":
            if rank == 0:
                dist.send(t16, dst=1)                        # rank 1 never posts the recv
            dist.all_reduce(t16)
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        _log(rank, "fault step returned without an exception")
    except Exception as e:  # gloo raises RuntimeError / DistBackendError
        traceback.print_exc()  # as the uncaught exception of a real job would print it
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        outcome["error"] = f"{type(e).__name__}: {first}"
        outcome["raised_after_s"] = round(time.monotonic() - fault_t0, 2)
        _log(rank, f"fault step raised after {time.monotonic() - fault_t0:.2f}s: {outcome['error']}")
    if during is not None:
        during.join(timeout=timeout_s * 2)

    write_dump(outdir)
    _log(rank, "dump written")
    with open(os.path.join(outdir, f".outcome_{rank}.json"), "w") as f:
        json.dump(outcome, f)
    # Leave together (through the store; not recorded): a rank that exits while a peer is still
    # inside a collective would turn the peer's hang into a "connection closed" error.
    # Rank 0 serves the store, so it leaves last.
    expect = WORLD - (1 if scenario in ("crash", "raise") else 0)

    def wait_for(key, n):
        while store.add(key, 0) < n and time.monotonic() - _T0 < deadline_s - 2:
            time.sleep(0.2)
    try:
        store.add("fixture_done", 1)
        wait_for("fixture_done", expect)
        if rank == 0:
            wait_for("fixture_left", expect - 1)
        else:
            store.add("fixture_left", 1)
    except Exception as e:  # the store is gone; just leave
        _log(rank, f"exit sync: {type(e).__name__}: {str(e).splitlines()[0]}")
    os._exit(0)


# ----------------------------------------------------------------------------------------------
# parent side
# ----------------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_scenario(name, outdir, timeout_s, buffer_size, logdir):
    sdir = os.path.join(outdir, name)
    if os.path.exists(sdir):
        shutil.rmtree(sdir)
    os.makedirs(sdir)
    auto = os.path.join(logdir, name, "auto")      # where torch would write on its own
    os.makedirs(auto, exist_ok=True)
    env = dict(os.environ)
    env.update({
        "TORCH_FR_BUFFER_SIZE": str(buffer_size),
        "TORCH_FR_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": os.path.join(auto, "rank_"),
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(auto, "nccl_rank_"),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    })
    deadline = 4 * timeout_s + 40
    port = free_port()
    procs, logs = [], []
    for r in range(WORLD):
        lf = open(os.path.join(logdir, name, f"rank_{r}.log"), "w")
        logs.append(lf)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", name, str(r), str(port), sdir,
             str(timeout_s), str(deadline)],
            env=env, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True))
    t0 = time.monotonic()
    codes = {}
    while time.monotonic() - t0 < deadline + 10 and len(codes) < WORLD:
        for r, p in enumerate(procs):
            if r not in codes and p.poll() is not None:
                codes[r] = p.returncode
        time.sleep(0.2)
    for r, p in enumerate(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            codes[r] = "killed"
    for lf in logs:
        lf.close()
    elapsed = time.monotonic() - t0

    # Dumps torch wrote on its own replace the on-demand ones.
    auto_files = sorted(f for f in os.listdir(auto) if os.path.isfile(os.path.join(auto, f)))
    how = "on demand after the timeout" if name != "healthy" else "on demand at the end"
    if auto_files:
        how = "on timeout by torch"
        for f in auto_files:
            r = f.rsplit("_", 1)[-1]
            shutil.copyfile(os.path.join(auto, f), os.path.join(sdir, f"rank_{r}"))

    outcomes, timeline = {}, {}
    for r in range(WORLD):
        p = os.path.join(sdir, f".outcome_{r}.json")
        if os.path.exists(p):
            with open(p) as f:
                o = json.load(f)
            os.remove(p)
            outcomes[str(r)] = o["error"] or "no exception"
            timeline[str(r)] = {k: o[k] for k in ("raised_after_s", "during_hang_dump_after_s")}
        else:
            # A rank that died: say how (gloo's std::terminate message, if any).
            why = ""
            with open(os.path.join(logdir, name, f"rank_{r}.log"), errors="replace") as f:
                for line in f:
                    if "what():" in line or "crashing:" in line:
                        why = "; " + line.strip()
                        break
            outcomes[str(r)] = f"died without a dump (exit code {codes.get(r)}){why}"
    no_dump = [r for r in range(WORLD) if not os.path.exists(os.path.join(sdir, f"rank_{r}"))]

    import torch
    spec = FAULTS[name]
    fault_seq = N_WORLD_HEALTHY + 1
    expected = {
        "scenario": name,
        "torch_version": torch.__version__,
        "world_size": WORLD,
        "culprits": spec["culprits"],
        "no_dump": no_dump,
        "fault": spec["fault"].format(f=fault_seq, sf=N_SUB_HEALTHY + 1, nw=N_WORLD_HEALTHY,
                                      ns=N_SUB_HEALTHY, t=timeout_s, stall=2 * timeout_s),
        "how_dumped": how,
        "fault_pg_id": None if name == "healthy" else (1 if name == "subgroup" else 0),
        "fault_collective_seq_id": None if name == "healthy" else (
            N_SUB_HEALTHY + 1 if name == "subgroup" else fault_seq),
        "timeout_s": timeout_s,
        "fr_buffer_size": buffer_size,
        "during_hang_dumps": os.path.isdir(os.path.join(sdir, "during_hang")),
        "rank_outcome": outcomes,
        "rank_timeline_s": timeline,
        "exit_codes": {str(r): codes.get(r) for r in range(WORLD)},
        "torch_wrote_on_its_own": auto_files,
    }
    if name == "raise":  # its evidence is in the logs: keep them beside the dumps
        os.makedirs(os.path.join(sdir, "logs"), exist_ok=True)
        for r in range(WORLD):
            shutil.copyfile(os.path.join(logdir, name, f"rank_{r}.log"), os.path.join(sdir, "logs", f"rank_{r}.log"))
    with open(os.path.join(sdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    print(f"{name}: {elapsed:.1f}s, exit codes {expected['exit_codes']}, "
          f"files {sorted(os.listdir(sdir))}", flush=True)
    return sdir


def _patched_pg_config(dump, rank):
    """pg_config as it would read if gloo keyed it by group name: torch 2.15's gloo writes one key
    '' (the group's name is not set yet when the backend registers its ranks), so the analyzer's
    lookup of (process_group[0], rank) fails. Membership comes from this generator's plan."""
    members = {"0": list(range(WORLD)), "1": SUB_RANKS}
    descs = {e["process_group"][0]: e["process_group"][1] for e in dump["entries"]}
    descs.setdefault("0", "default_pg")
    if rank in SUB_RANKS:
        descs.setdefault("1", "undefined")
    return {n: {"name": n, "desc": d, "ranks": str(members[n])} for n, d in sorted(descs.items())}


def run_analyzer(sdir, logdir):
    """torch's fr_trace on the scenario's pickles. It walks its folder recursively and reads every
    file whose name holds the prefix, so it gets a copy of the pickles alone (json/rank_0.json would
    make it fail on int('0.json')). A last run per set gets copies whose pg_config is rebuilt (see
    _patched_pg_config): what torch's matcher says once it gets past the lookup it fails on."""
    import pickle
    out = []
    sets = [("after the timeout" if not sdir.rstrip("/").endswith("healthy") else "at the end", sdir)]
    if os.path.isdir(os.path.join(sdir, "during_hang")):
        sets.append(("during the hang", os.path.join(sdir, "during_hang")))
    runs = [(False, []), (False, ["--allow-incomplete-ranks"]), (True, ["--allow-incomplete-ranks"])]
    for label, src in sets:
        rel = os.path.relpath(src, os.path.dirname(sdir))
        for patched, extra in runs:
            with tempfile.TemporaryDirectory(dir=logdir) as tmp:
                for f in sorted(os.listdir(src)):
                    if not (f.startswith("rank_") and os.path.isfile(os.path.join(src, f))):
                        continue
                    if patched:
                        with open(os.path.join(src, f), "rb") as fh:
                            d = pickle.load(fh)
                        d["pg_config"] = _patched_pg_config(d, int(f[len("rank_"):]))
                        with open(os.path.join(tmp, f), "wb") as fh:
                            pickle.dump(d, fh, protocol=2)
                    else:
                        shutil.copyfile(os.path.join(src, f), os.path.join(tmp, f))
                cmd = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", tmp,
                       "-p", "rank_"] + extra
                what = "copies with pg_config REBUILT (not torch's bytes)" if patched else "copy"
                shown = ("python -m torch.distributed.flight_recorder.fr_trace "
                         f"<{what} of {rel}/rank_*> -p rank_ " + " ".join(extra)).rstrip()
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
                    text, rc = p.stdout + p.stderr, p.returncode
                except subprocess.TimeoutExpired as e:
                    text = f"{e.stdout or ''}{e.stderr or ''}\n[timed out after 180s]"
                    rc = "timeout"
                text = text.replace(tmp, "<dir>")
                out.append(f"### dumps {label}: {shown}\n### exit code: {rc}\n{text.rstrip()}\n")
    with open(os.path.join(sdir, "torch_fr_trace.txt"), "w") as f:
        f.write("\n".join(out))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, rank, port, sdir, timeout_s, deadline = sys.argv[2:8]
        worker(name, int(rank), int(port), sdir, float(timeout_s), float(deadline))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--scenario", action="append", choices=SCENARIOS,
                    help="scenario to make (repeatable); default: all")
    ap.add_argument("--timeout", type=float, default=5.0, help="collective timeout, seconds")
    ap.add_argument("--buffer", type=int, default=64, help="TORCH_FR_BUFFER_SIZE")
    ap.add_argument("--no-analyzer", action="store_true", help="skip torch's fr_trace")
    ap.add_argument("--logdir", help="where the ranks' logs go (default: a temporary folder)")
    args = ap.parse_args()
    logdir = args.logdir or tempfile.mkdtemp(prefix="fr-fixtures-")
    os.makedirs(args.outdir, exist_ok=True)
    print(f"logs: {logdir}", flush=True)
    for name in args.scenario or SCENARIOS:
        os.makedirs(os.path.join(logdir, name), exist_ok=True)
        sdir = run_scenario(name, args.outdir, args.timeout, args.buffer, logdir)
        if not args.no_analyzer:
            run_analyzer(sdir, logdir)


if __name__ == "__main__":
    main()
