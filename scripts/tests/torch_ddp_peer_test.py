#!/usr/bin/env python3
"""run-gpu-checks' torch DDP peer (scripts/bundle/peers/torch_ddp_peer.py) on a CPU: torch's
DistributedDataParallel over gloo at world size 1 trains the MLP dsbench train builds, with dsbench's
parameter count, and reports a median step. Exit 77 (skipped) where python3 cannot import torch."""
import os
import subprocess
import sys
import json

here = os.path.dirname(os.path.abspath(__file__))
peers = os.path.join(here, "..", "bundle", "peers")
try:
    import torch  # noqa: F401
except Exception as e:  # noqa: BLE001 - any import failure means no peer here
    print(f"skipped: python3 cannot import torch ({e}); apt-get install python3-torch runs this test")
    sys.exit(77)

out = subprocess.run([sys.executable, os.path.join(peers, "torch_ddp_peer.py"), "--device", "cpu", "--model",
                      "mlp:64x3,in=32,out=16", "--batch", "8", "--steps", "3"],
                     capture_output=True, text=True, timeout=240)
assert out.returncode == 0, out.stderr
r = json.loads(out.stdout.strip().splitlines()[-1])
# dsperf's mlp:64x3,in=32,out=16: 32->64->64->16 with biases.
assert r["params"] == 32 * 64 + 64 + 64 * 64 + 64 + 64 * 16 + 16, r
assert r["ddp"] is True and r["backend"] == "gloo" and r["timer"] == "host clock", r
assert r["steps"] == 3 and 0 < r["step_ms_min"] <= r["step_ms"] <= r["step_ms_max"], r
# A GPU run without a GPU says so and exits 2, never a traceback.
if not torch.cuda.is_available():
    gpu = subprocess.run([sys.executable, os.path.join(peers, "torch_ddp_peer.py")], capture_output=True, text=True,
                         timeout=120)
    assert gpu.returncode == 2 and "sees no CUDA device" in gpu.stderr, (gpu.returncode, gpu.stderr)
print("torch DDP peer on gloo:", r)
