#!/usr/bin/env python3
"""Step h of run-gpu-checks.sh: the node's own torch as the peer of dsperf on the same GPU, in the
same run. It measures, with torch only (nothing else from the bundle):

  allreduce   torch.distributed NCCL allreduce at world size 1, float32, on the sizes of dsperf's sweep;
  mlp         the MLP of each dsbench train file, once per dtype in it (same width, depth, batch and
              dtype; bf16 with f32 master weights, as dsperf): torch's DistributedDataParallel on nccl at
              world size 1 (torch_ddp_peer.py), forward, backward and an SGD step, each step timed with
              CUDA events, against dsbench's time_ms.step_device (its step on the same CUDA events);
  copy        device-to-device copy bandwidth (torch Tensor.copy_), the memory limit of the GPU;
  gpu_copies  the copies of a dsbench gpu file on GPU 0, at its size and repetitions, with torch's own
              x.copy_: pinned host -> device, device -> pinned host, pageable host -> device and back,
              and device -> device; each copy timed alone with CUDA events (pageable: the host's clock
              around the copy and a synchronise, as dsbench gpu), the median; GB/s of bytes copied once
              (nvbandwidth's, as dsbench gpu). The ratio is dsperf / torch in GB/s: below 1, dsperf is slower.

It writes PEERS.json (the dsbench gpu document whole in gpu_copies.dsperf, since run-gpu-checks keeps
it out of its 8 files) and prints ratio tables (time ratios dsperf / torch: above 1 means dsperf takes
longer; the copies' GB/s ratio: below 1 means dsperf is slower).
Usage: torch_peers.py --out PEERS.json [--sweep SWEEP.json] [--train TRAIN.json ...] [--gpu-copies GPU.json]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ddp_peer import ddp_step_peer  # noqa: E402 - beside this file in the bundle and the install


def load(path):
    with open(path) as f:
        return json.load(f)


def timed(torch, fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters  # ms


def allreduce_peer(torch, sizes, deadline):
    import torch.distributed as dist
    store_file = tempfile.NamedTemporaryFile(prefix="ds_peer_store_", delete=False).name
    os.unlink(store_file)
    dist.init_process_group("nccl", init_method="file://" + store_file, rank=0, world_size=1,
                            device_id=torch.device("cuda:0"))
    rows = []
    try:
        for size in sizes:
            if time.monotonic() > deadline:
                break
            n = max(1, size // 4)
            x = torch.ones(n, dtype=torch.float32, device="cuda")
            iters = 20 if size < (64 << 20) else 5
            ms = timed(torch, lambda: dist.all_reduce(x), iters, 3)
            rows.append({"size": n * 4, "time_us": ms * 1000.0, "alg_bw": n * 4 / (ms * 1e6)})
            del x
    finally:
        dist.destroy_process_group()
    return rows


def gemm_flops_per_sample(dims):
    """dsperf's MlpSpec::gemmFlopsPerSample: forward and weight gradient of every layer, input gradient
    of every layer but the first (torch computes none for the data either)."""
    return sum((4.0 if i == 0 else 6.0) * dims[i] * dims[i + 1] for i in range(len(dims) - 1))


def copy_peer(torch):
    n = 1 << 30  # bytes
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = timed(torch, lambda: b.copy_(a), 20, 3)
    # A copy reads and writes every byte.
    return {"bytes": n, "time_ms": ms, "gbps": 2 * n / (ms * 1e6)}


# dsbench gpu's testcases that torch's x.copy_ does the same way, on GPU 0: (testcase, source, destination).
COPY_CASES = [("host_to_device_memcpy_ce", "pinned", "device"), ("device_to_host_memcpy_ce", "device", "pinned"),
              ("host_to_device_memcpy_ce_pageable", "pageable", "device"),
              ("device_to_host_memcpy_ce_pageable", "device", "pageable"),
              ("device_local_copy", "device", "device2")]


def copies_peer(torch, nbytes, iters, warmup):
    """torch's x.copy_ on the copies of COPY_CASES, nbytes each: {testcase: {"median_gbps", "median_us"}}."""
    bufs = {"pinned": torch.empty(nbytes, dtype=torch.uint8, pin_memory=True),
            "pageable": torch.empty(nbytes, dtype=torch.uint8),
            "device": torch.empty(nbytes, dtype=torch.uint8, device="cuda"),
            "device2": torch.empty(nbytes, dtype=torch.uint8, device="cuda")}
    bufs["pageable"].fill_(4)  # touched, so that first-touch page faults stay out of the timed copies
    stream = torch.cuda.Stream()
    out = {}
    with torch.cuda.stream(stream):
        for testcase, src, dst in COPY_CASES:
            a, b = bufs[src], bufs[dst]
            pageable = "pageable" in (src, dst)
            for _ in range(warmup):
                b.copy_(a, non_blocking=not pageable)
            stream.synchronize()
            us = []
            for _ in range(iters):
                if pageable:
                    t0 = time.perf_counter()
                    b.copy_(a)
                    stream.synchronize()
                    us.append((time.perf_counter() - t0) * 1e6)
                else:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record(stream)
                    b.copy_(a, non_blocking=True)
                    end.record(stream)
                    end.synchronize()
                    us.append(start.elapsed_time(end) * 1e3)
            median = statistics.median(us)
            out[testcase] = {"median_us": median, "median_gbps": nbytes / (median * 1e3)}
    del bufs
    return out


def gpu_copies(torch, path):
    """dsbench gpu's rows of GPU 0 beside torch's at the same size and repetitions."""
    doc = load(path)
    args = doc.get("args", {})
    nbytes, iters, warmup = int(args.get("bytes", 512 << 20)), int(args.get("iters", 10)), int(args.get("warmup", 2))
    peer = copies_peer(torch, nbytes, iters, warmup)
    first = 0  # torch's "cuda" is device 0
    rows = []
    for testcase, _, _ in COPY_CASES:
        mine = next((r for r in doc.get("rows", []) if r["testcase"] == testcase and r["device"] == first
                     and not r.get("skipped")), None)
        theirs = peer[testcase]
        row = {"testcase": testcase, "bytes": nbytes, "torch_gbps": theirs["median_gbps"],
               "torch_us": theirs["median_us"], "dsperf_gbps": mine["median_gbps"] if mine else None,
               "ratio": mine["median_gbps"] / theirs["median_gbps"] if mine else None,
               "bound_gbps": (mine or {}).get("bound", {}).get("gbps") or None,
               "bound": (mine or {}).get("bound", {}).get("name")}
        rows.append(row)
    return {"bytes": nbytes, "iters": iters, "warmup": warmup, "device": first, "rows": rows, "dsperf": doc}


def parse_model(spec):
    """dsperf's canonical spec mlp:WIDTHxLAYERS[,act=gelu|relu][,bias=1|0][,in=N][,out=N]."""
    body = spec.split(":", 1)[1]
    parts = body.split(",")
    width, layers = (int(v) for v in parts[0].split("x"))
    opts = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    return (width, layers, int(opts.get("in", width)), int(opts.get("out", width)), opts.get("act", "gelu"),
            opts.get("bias", "1") != "0")


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  " + "  ".join(str(v).rjust(w) for v, w in zip(r, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sweep", help="dsbench coll -J file (nccl, world size 1)")
    ap.add_argument("--train", action="append", default=[], help="dsbench train --json file")
    ap.add_argument("--gpu-copies", help="dsbench gpu -J file")
    ap.add_argument("--budget-s", type=float, default=100.0)
    a = ap.parse_args()
    deadline = time.monotonic() + a.budget_s
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no peer
        print(f"torch_peers: the node's python ({sys.executable}) cannot import torch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"torch_peers: torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    result = {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
              "device": torch.cuda.get_device_name(0)}
    print(f"torch {result['torch']} (CUDA {result['cuda']}, NCCL {result['nccl']}) on {result['device']}")

    ours = {}
    if a.sweep and os.path.exists(a.sweep):
        for r in load(a.sweep).get("results", []):
            if r.get("collective") == "allreduce" and r.get("dtype") in ("f32", "float", "float32"):
                ours[r["size"]] = r["out_of_place"]["time"]
    sizes = sorted(ours) or [8 << k for k in range(0, 30, 2)]
    result["allreduce"] = allreduce_peer(torch, sizes, deadline)
    rows = []
    for r in result["allreduce"]:
        mine = ours.get(r["size"])
        rows.append([r["size"], f"{r['time_us']:.1f}", f"{mine:.1f}" if mine else "-",
                     f"{mine / r['time_us']:.2f}" if mine else "-"])
    table("allreduce, world size 1, float32 (time in us)", ["bytes", "torch", "dsperf", "dsperf/torch"], rows)

    result["copy"] = copy_peer(torch)
    print(f"\ndevice-to-device copy (torch, 1 GiB): {result['copy']['gbps']:.0f} GB/s (read + write)")

    if a.gpu_copies and os.path.exists(a.gpu_copies):
        result["gpu_copies"] = gpu_copies(torch, a.gpu_copies)
        g = result["gpu_copies"]
        rows = [[r["testcase"], f"{r['torch_gbps']:.1f}",
                 f"{r['dsperf_gbps']:.1f}" if r["dsperf_gbps"] else "-",
                 f"{r['ratio']:.2f}" if r["ratio"] else "-",
                 f"{r['bound_gbps']:.1f} ({r['bound']})" if r["bound_gbps"] else "-"] for r in g["rows"]]
        table(f"GPU copies on GPU {g['device']}, {g['bytes']} bytes, median of {g['iters']} (GB/s, bytes copied once)",
              ["testcase", "torch", "dsperf", "dsperf/torch", "bound"], rows)

    result["mlp"] = []
    rows = []
    for path in a.train:
        if not os.path.exists(path):
            continue
        done = set()
        for run in load(path).get("runs", []):
            dtype = run.get("dtype", "f32")
            if run.get("device") != "cuda" or dtype in done or time.monotonic() > deadline:
                continue
            done.add(dtype)  # one configuration per model and dtype
            spec = parse_model(run["model"])
            peer = ddp_step_peer(torch, spec, run["per_rank_batch"], dtype)
            width, layers, in_features, out_features = spec[:4]
            dims = [in_features] + [width] * (layers - 1) + [out_features]
            peer["gemm_flops_per_step"] = gemm_flops_per_sample(dims) * run["per_rank_batch"]
            peer["tflops"] = peer["gemm_flops_per_step"] / (peer["step_ms"] * 1e-3) / 1e12
            if peer["params"] != run["params"]:
                print(f"torch_peers: note: torch's {run['model']} has {peer['params']} parameters, dsperf's "
                      f"{run['params']}: the models differ", file=sys.stderr)
            # Like for like: dsbench's step on CUDA events with the batch loaded (schema 1.3); an older
            # dsbench has only the host's clock with the batch's load, said in the JSON.
            timed_on = "step_device" if "step_device" in run["time_ms"] else "step"
            mine = run["time_ms"][timed_on]["p50"]
            peer["dsperf_timer"] = "cuda events" if timed_on == "step_device" else "host clock with the batch's load"
            mine_tflops = peer["gemm_flops_per_step"] / (mine * 1e-3) / 1e12
            peer.update({"model": run["model"], "dsperf_step_ms": mine, "dsperf_tflops": mine_tflops})
            result["mlp"].append(peer)
            rows.append([run["model"], dtype, run["per_rank_batch"], f"{peer['step_ms']:.2f}", f"{mine:.2f}",
                         f"{mine / peer['step_ms']:.2f}", f"{peer['tflops']:.1f}", f"{mine_tflops:.1f}"])
    if rows:
        table("DDP step (forward + backward + allreduce + SGD), world size 1, torch DDP vs dsperf, both on CUDA events; "
              "TFLOP/s of the GEMMs at the step time",
              ["model", "dtype", "batch", "torch ms", "dsperf ms", "dsperf/torch", "torch TFLOP/s", "dsperf TFLOP/s"],
              rows)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
