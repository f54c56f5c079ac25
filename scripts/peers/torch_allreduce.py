#!/usr/bin/env python3
"""The torch peer of scripts/bench-peers.sh: torch.distributed allreduce (f32 sum, in place) on gloo,
the same sizes and timing loop as `dsbench coll`, written as a dsperf.sweep JSON with the pseudo-backend
"torch-gloo" (ds_peers_report and dsreport read it). Debian's python3-torch links the same system
libgloo as dsperf, so it is a fair peer. One thread per rank (torch.set_num_threads(1)).

  mpirun -np 2 /usr/bin/python3 scripts/peers/torch_allreduce.py -b 8 -e 1M -f 8 -n 5 -w 2 \\
      --min-time 0.01 -J torch.json

Rank and world come from mpirun (OMPI_COMM_WORLD_*) or dsrun/torchrun (RANK, WORLD_SIZE); the
rendezvous is MASTER_ADDR (default 127.0.0.1) : MASTER_PORT (required).
Times: per iteration, each op timed on every rank; an iteration's time is the slowest rank's; the
row's time is the loop mean averaged over ranks (dsbench coll -a 1)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def size_arg(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.upper().rstrip("B")
    u = t[-1] if t and t[-1] in "KMG" else ""
    try:
        return int(float(t[: len(t) - len(u)]) * units[u])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size; give bytes with an optional K, M or G")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-b", "--minbytes", type=size_arg, default=8)
    ap.add_argument("-e", "--maxbytes", type=size_arg, default=1 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.0, help="run each size at least this long (s)")
    ap.add_argument("-T", "--timeout", type=float, default=120)
    ap.add_argument("-J", "--json", required=True, help="write the dsperf.sweep JSON here (rank 0)")
    a = ap.parse_args()
    if a.stepfactor < 2 or a.iters < 1 or a.minbytes < 4 or a.maxbytes < a.minbytes:
        ap.error("need -f >= 2, -n >= 1 and 4 <= -b <= -e")

    rank, size, local = common.world()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        sys.exit("torch_allreduce.py: MASTER_PORT is not set; export a free port for the rendezvous.")
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(size)
    import datetime
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    start = common.iso_now()
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=a.timeout))
    me = common.rank_record(rank, local)
    gathered = [None] * size
    dist.all_gather_object(gathered, me)

    rows = []
    bus_factor = 2.0 * (size - 1) / size
    nbytes = a.minbytes
    while nbytes <= a.maxbytes:
        count = max(1, nbytes // 4)
        t = torch.ones(count, dtype=torch.float32)
        for _ in range(a.warmup_iters):
            dist.all_reduce(t)
        # As dsbench: -n ops, or more until --min-time has passed (the same count on every rank).
        iters = a.iters
        if a.min_time > 0:
            t0 = time.perf_counter()
            for _ in range(min(5, iters)):
                dist.all_reduce(t)
            per = (time.perf_counter() - t0) / min(5, iters)
            want = torch.tensor([max(iters, int(a.min_time / per) + 1 if per > 0 else iters)], dtype=torch.int64)
            dist.all_reduce(want, op=dist.ReduceOp.MAX)
            iters = int(min(want.item(), 1_000_000))
        times = torch.zeros(iters, dtype=torch.float64)
        loop0 = time.perf_counter()
        for i in range(iters):
            s = time.perf_counter()
            dist.all_reduce(t)
            times[i] = (time.perf_counter() - s) * 1e6
        loop_us = (time.perf_counter() - loop0) * 1e6 / iters
        slowest = times.clone()
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        mean = torch.tensor([loop_us], dtype=torch.float64)
        dist.all_reduce(mean)
        time_us = mean.item() / size
        per_rank = [torch.zeros(1, dtype=torch.float64) for _ in range(size)]
        dist.all_gather(per_rank, torch.tensor([loop_us], dtype=torch.float64))
        ranks = [{"rank": r, "time_us": per_rank[r].item(), "iter": common.iter_stats([])} for r in range(size)]
        ranks[rank]["iter"] = common.iter_stats(times.tolist())
        lo = min(range(size), key=lambda r: per_rank[r].item())
        hi = max(range(size), key=lambda r: per_rank[r].item())
        spread = 100 * (per_rank[hi].item() - per_rank[lo].item()) / per_rank[lo].item() if per_rank[lo].item() > 0 else 0
        bytes_ = count * 4
        algbw = bytes_ / 1e9 / (time_us * 1e-6) if time_us > 0 else 0
        place = {"time": time_us, "alg_bw": algbw, "bus_bw": algbw * bus_factor, "nwrong": None, "iters": iters,
                 "iter": common.iter_stats(slowest.tolist()), "straggler": {"rank": hi, "spread_pct": spread},
                 "ranks": ranks}
        rows.append({"backend": "torch-gloo", "collective": "allreduce", "dtype": "f32", "op": "sum", "root": -1,
                     "world_size": size, "requested_bytes": nbytes, "size": bytes_, "count": count,
                     "bus_factor": bus_factor, "out_of_place": None, "in_place": place})
        if rank == 0:
            print(f"{bytes_:>12} {iters:>8} {time_us:>10.2f} us  p50 {place['iter']['p50_us']:>10.2f} us  "
                  f"busbw {place['bus_bw']:.3f} GB/s", flush=True)
        nbytes *= a.stepfactor
    dist.barrier()
    if rank == 0:
        doc = {
            "schema": "dsperf.sweep", "schema_version": "1.2",
            "args": {"minbytes": a.minbytes, "maxbytes": a.maxbytes, "stepbytes": 0, "stepfactor": a.stepfactor,
                     "iters": a.iters, "warmup_iters": a.warmup_iters, "check": 0, "op": ["sum"],
                     "datatype": ["f32"], "root": 0, "average": 1, "timeout_s": a.timeout,
                     "min_time_s": a.min_time, "blocking": False, "collectives": ["allreduce"],
                     "backends": ["torch-gloo"]},
            "metadata": {"command_line": " ".join([sys.executable] + sys.argv), "hosts": sorted({r["host"] for r in gathered}),
                         "world_size": size, "ranks": gathered, "launcher": "mpirun (Open MPI)" if "OMPI_COMM_WORLD_SIZE" in os.environ else "dsrun/torchrun",
                         "versions": {"torch": torch.__version__}, "env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GLOO_", "MASTER_"))},
                         "start_time": start, "end_time": common.iso_now()},
            "results": rows,
            "notes": ["torch peer (scripts/peers/torch_allreduce.py): torch.distributed all_reduce on gloo, in place, "
                      "1 thread per rank; not checked for correctness"],
            "summary": {"out_of_bounds": 0, "avg_bus_bw": sum(r["in_place"]["bus_bw"] for r in rows) / max(1, len(rows)),
                        "rows": len(rows), "min_bus_bw": -1, "bw_below_min": False, "status": "ok", "error": "",
                        "exit_code": 0},
        }
        common.write_json(a.json, doc)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
