#!/usr/bin/env python3
"""torch's DDP step as the peer of `dsbench train` (issue 39): the same MLP, batch and dtype wrapped in
torch.nn.parallel.DistributedDataParallel (bucket_cap_mb 25, gradient_as_bucket_view off: DDP's and
dsbench's defaults) on a process group of its own, world size 1, each step timed with two CUDA events
(first forward to zero_grad, the batch already on the device), as dsbench records time_ms.step_device.

torch_peers.py (run-gpu-checks' step g) calls ddp_step_peer() on the GPU with nccl. On a CPU (gloo) the
same code runs with the host's clock, which is how the suite tests it without a GPU:
  torch_ddp_peer.py --device cpu --model mlp:64x3 --batch 8 --steps 3
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def build_mlp(torch, spec, dtype, device):
    """dsperf's mlp:WxL: L linear layers in -> W -> ... -> W -> out, an activation between them."""
    width, layers, in_features, out_features, act, bias = spec
    dims = [in_features] + [width] * (layers - 1) + [out_features]
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    mods = []
    for i in range(len(dims) - 1):
        mods.append(torch.nn.Linear(dims[i], dims[i + 1], bias=bias, device=device, dtype=tdtype))
        if i < len(dims) - 2:
            mods.append(torch.nn.ReLU() if act == "relu" else torch.nn.GELU())
    return torch.nn.Sequential(*mods), dims, tdtype


def ddp_step_peer(torch, spec, batch, dtype, steps=10, warmup=3, device="cuda"):
    """One configuration: median step time in ms over `steps` measured steps after `warmup`. bf16: the
    model, batch and gradients (and their allreduce) in bfloat16, SGD on float32 master weights written
    back rounded, as dsbench and DeepSpeed's bf16 optimizer do."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    cuda = device != "cpu"
    store = tempfile.NamedTemporaryFile(prefix="ds_ddp_peer_store_", delete=False).name
    os.unlink(store)
    dist.init_process_group("nccl" if cuda else "gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model, dims, tdtype = build_mlp(torch, spec, dtype, device)
        ddp = DistributedDataParallel(model, device_ids=[0] if cuda else None, bucket_cap_mb=25,
                                      gradient_as_bucket_view=False)
        params = list(model.parameters())
        masters = [p.detach().float().clone() for p in params] if dtype == "bf16" else params
        opt = torch.optim.SGD(masters, lr=0.01, momentum=0.9)
        x = torch.randn(batch, dims[0], device=device, dtype=tdtype)
        y = torch.randn(batch, dims[-1], device=device, dtype=tdtype)

        def step():
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            if dtype == "bf16":
                for m, p in zip(masters, params):
                    m.grad = p.grad.float()
                opt.step()
                with torch.no_grad():
                    for m, p in zip(masters, params):
                        p.copy_(m)
            else:
                opt.step()
            # dsbench zeroes its gradients at the end of the step (model.zeroGrad()); torch's default
            # set_to_none frees them, the cheaper of the two.
            opt.zero_grad(set_to_none=True)
            ddp.zero_grad(set_to_none=True)

        times = []
        for k in range(warmup + steps):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                step()
                ms = (time.perf_counter() - t0) * 1e3
            if k >= warmup:
                times.append(ms)
        count = sum(p.numel() for p in params)
        return {"params": count, "batch": batch, "dtype": dtype, "steps": steps, "step_ms": statistics.median(times),
                "step_ms_min": min(times), "step_ms_max": max(times), "ddp": True,
                "backend": "nccl" if cuda else "gloo", "timer": "cuda events" if cuda else "host clock"}
    finally:
        dist.destroy_process_group()


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_peers import parse_model  # noqa: E402 - beside this file in the bundle and the install

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp:64x3")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"torch_ddp_peer: torch {torch.__version__} sees no CUDA device; --device cpu runs it on gloo",
              file=sys.stderr)
        return 2
    print(json.dumps(ddp_step_peer(torch, parse_model(a.model), a.batch, a.dtype, a.steps, 1, a.device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
