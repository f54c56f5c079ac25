#!/usr/bin/env python3
"""The PyTorch DDP peer of scripts/bench-ddp-peers.sh: the model, batch, optimizer and threads of
`dsbench train`, on torch.nn.parallel.DistributedDataParallel over gloo.

  model      MLP of LAYERS nn.Linear(WIDTH, WIDTH) with GELU after every layer but the last
             (dsbench's mlp:WIDTHxLAYERS; the 25m preset is 1024x24)
  loss       MSE on synthetic data; optimizer SGD momentum 0.9 (dsbench train --optimizer sgd)
  threads    torch.set_num_threads(--threads) (dsbench train --blas-threads)
  timing     each step: forward, backward (DDP's overlapped allreduce), optimizer.step(); then the same
             steps under ddp.no_sync() (no communication): exposed comm = p50(step) - p50(no_sync step)

  gradients  --gradient-as-bucket-view: DDP(gradient_as_bucket_view=True) (PyTorch's default: False)

  mpirun -np 2 --bind-to none /usr/bin/python3 scripts/peers/torch_ddp.py --steps 20 --json torch-ddp.json

Writes (rank 0) {"peer": "torch-ddp", "step_ms": {...}, "nosync_step_ms": {...}, "exposed_comm_ms": x,
"placement": [...], ...}; times are the slowest rank's per step, in ms."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def percentiles(v):
    s = sorted(v)
    if not s:
        return {"p50": 0, "p90": 0, "min": 0, "max": 0, "mean": 0, "samples": 0}

    def pct(q):
        pos = q / 100 * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {"p50": pct(50), "p90": pct(90), "min": s[0], "max": s[-1], "mean": sum(s) / len(s), "samples": len(s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--steps", type=int, default=20, help="measured steps (each mode)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gradient-as-bucket-view", action="store_true",
                    help="DDP(gradient_as_bucket_view=True): gradients are views into the buckets (no copy in or out)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    if min(a.width, a.layers, a.batch, a.steps, a.threads) < 1 or a.warmup < 0:
        ap.error("--width, --layers, --batch, --steps and --threads must be positive, --warmup not negative")

    rank, size, local = common.world()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        sys.exit("torch_ddp.py: MASTER_PORT is not set; export a free port for the rendezvous.")
    import datetime
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=a.timeout))
    torch.manual_seed(42)
    layers = []
    for i in range(a.layers):
        layers.append(nn.Linear(a.width, a.width))
        if i + 1 < a.layers:
            layers.append(nn.GELU())
    model = nn.Sequential(*layers)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_cap_mb,
                                              gradient_as_bucket_view=a.gradient_as_bucket_view)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.MSELoss()
    g = torch.Generator().manual_seed(1234 + rank)
    batches = [(torch.randn(a.batch, a.width, generator=g), torch.randn(a.batch, a.width, generator=g)) for _ in range(4)]

    def step(k, sync):
        x, y = batches[k % len(batches)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if sync:
            loss = loss_fn(ddp(x), y)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = loss_fn(ddp(x), y)
                loss.backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3, loss.item()

    out = {}
    for mode, sync in (("step_ms", True), ("nosync_step_ms", False)):
        for k in range(a.warmup):
            step(k, sync)
        dist.barrier()
        mine = torch.tensor([step(k, sync)[0] for k in range(a.steps)], dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # the slowest rank's time per step
        out[mode] = percentiles(mine.tolist())
    where = [None] * size
    dist.all_gather_object(where, common.rank_record(rank, local))
    if rank == 0:
        doc = {"peer": "torch-ddp", "torch": torch.__version__, "model": f"mlp:{a.width}x{a.layers}", "world_size": size,
               "backend": "gloo", "per_rank_batch": a.batch, "optimizer": "sgd", "lr": a.lr, "threads": a.threads,
               "bucket_cap_mb": a.bucket_cap_mb, "gradient_as_bucket_view": a.gradient_as_bucket_view, "steps": a.steps, "warmup": a.warmup,
               "exposed_comm_ms": max(0.0, out["step_ms"]["p50"] - out["nosync_step_ms"]["p50"]),
               "ranks": where, "time": common.iso_now(), **out}
        common.write_json(a.json, doc)
        print(f"torch DDP: step p50 {out['step_ms']['p50']:.1f} ms, without comm (no_sync) "
              f"{out['nosync_step_ms']['p50']:.1f} ms, exposed comm {doc['exposed_comm_ms']:.1f} ms", flush=True)
    # Both ranks leave together, and skip gloo's teardown: a rank once hung for 10 minutes in it after
    # the other had written the JSON and exited (1m model, 2 steps), holding the whole benchmark.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
