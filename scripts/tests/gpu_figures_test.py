#!/usr/bin/env python3
"""ctest gpu_figures.markdown: scripts/bundle/gpu_figures.py (run-gpu-checks' figures.md) on the JSON of
the real tools, made here on the CPU (dsdiag --json; dsbench coll and dsbench train on gloo at 2 ranks
under dsrun), with the GPU-only fields added by hand (gpu.devices and gpu.driver_version of an H200 in
dsdiag.json, nvidia-smi's lines in summary.json, a peers.json as torch_peers.py writes it). It checks
that the versions rows, a sweep row, a train row and the peers' ratios are the JSON's figures; that the
sweep table keeps the rows it promises; that every table is well formed; that a missing or broken
file gives the sentence naming it (and exit 0); and that run-gpu-checks.sh from the source tree writes
figures.md and lists it in summary.json, within its 8 files.
Usage: gpu_figures_test.py BIN_DIR (the build's bin/ with dsrun, dsdiag, dsbench). About 5 s."""
import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
generator = os.path.join(root, "scripts", "bundle", "gpu_figures.py")
failures = []


def check(what, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else f"\n  {detail}"))
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=120, **kw)


def figures(folder):
    r = run([sys.executable, generator, folder])
    path = os.path.join(folder, "figures.md")
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    return r.returncode, text, r.stdout


def tables_well_formed(text):
    """Every Markdown table: a header, a separator of as many cells, rows of as many cells."""
    bad = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            cells = [len(re.findall(r"(?<!\\)\|", b)) for b in block]
            if len(block) < 2 or not re.fullmatch(r"\|(---\|)+", block[1]) or len(set(cells)) != 1:
                bad.append(block[0])
        i += 1
    return bad


def f2(v):
    return f"{v:.2f}"


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    bindir = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="ds_gpu_figures_test.")
    try:
        return body(bindir, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def body(bindir, tmp):
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)

    # The real tools' files, on this CPU machine.
    r = run([os.path.join(bindir, "dsdiag"), "--json", os.path.join(out, "dsdiag.json")], env=env)
    check("dsdiag --json ran (exit 0-2)", r.returncode in (0, 1, 2), r.stdout[-2000:])
    dsrun = [os.path.join(bindir, "dsrun"), "--standalone", "--nproc-per-node", "2", "--"]
    r = run(dsrun + [os.path.join(bindir, "dsbench"), "coll", "--backend", "gloo", "--coll", "all", "-b", "8", "-e", "2M",
                     "-f", "4", "-n", "3", "-w", "1", "-J", os.path.join(out, "sweep-nccl.json"),
                     "--journal", os.path.join(tmp, "sweep.journal.jsonl")], env=env)
    check("dsbench coll --backend gloo at 2 ranks wrote its JSON", r.returncode == 0, r.stdout[-2000:])
    r = run(dsrun + [os.path.join(bindir, "dsbench"), "train", "--backend", "gloo", "--model", "mlp:64x4", "--batch", "8",
                     "--steps", "3", "--warmup", "1", "--overlap", "on", "--json", os.path.join(out, "train-mlp64.json")],
            env=env)
    check("dsbench train --backend gloo at 2 ranks wrote its JSON", r.returncode == 0, r.stdout[-2000:])
    for j in os.listdir(out):
        if j.endswith(".jsonl"):
            os.unlink(os.path.join(out, j))
    if failures:
        return 1

    # The fields only a GPU node fills, by hand: an H200's gpu.devices and gpu.driver_version, nvidia-smi's
    # lines in summary.json, and the torch peer's file.
    diag_path = os.path.join(out, "dsdiag.json")
    diag = json.load(open(diag_path))
    gpu_checks = {
        "gpu.devices": {"status": "PASS", "message": "cuda:0 NVIDIA H200 139.8 GiB 00000000:19:00.0",
                        "data": {"devices": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": 150_110_011_392,
                                              "bus_id": "00000000:19:00.0", "uuid": "GPU-0"}]}},
        "gpu.driver_version": {"status": "PASS", "message": "Driver supports CUDA 13.0 (driver 580.65.06)",
                               "data": {"driver_cuda_version": "13.0", "built_cuda_version": "12.9",
                                        "nvml_driver_version": "580.65.06"}},
    }
    for c in diag["checks"]:
        if c["id"] in gpu_checks:
            c.update(gpu_checks[c["id"]])
    json.dump(diag, open(diag_path, "w"))
    nccl = next((c for c in diag["checks"] if c["id"] == "nccl.version"), {}).get("data", {})

    sweep = json.load(open(os.path.join(out, "sweep-nccl.json")))
    train = json.load(open(os.path.join(out, "train-mlp64.json")))
    run0 = train["runs"][0]
    ar = sorted((x for x in sweep["results"] if x["collective"] == "allreduce"), key=lambda x: x["size"])
    peers = {"torch": "2.9.1+cu129", "cuda": "12.9", "nccl": "2.27.7", "device": "NVIDIA H200",
             "allreduce": [{"size": x["size"], "time_us": 10.0 + i, "alg_bw": x["size"] / ((10.0 + i) * 1e3)}
                           for i, x in enumerate(ar)],
             "copy": {"bytes": 1 << 30, "time_ms": 0.5, "gbps": 4294.967296},
             "mlp": [{"params": run0["params"], "batch": run0["per_rank_batch"], "dtype": "f32", "forward_ms": 0.1,
                      "step_ms": 0.25, "gemm_flops_per_step": 1.0e6, "tflops": 0.004, "model": run0["model"],
                      "dsperf_step_ms": run0["time_ms"]["step"]["p50"], "dsperf_tflops": 0.003}]}
    # dsbench gpu's document (its shape: reports/gpu/gpu_copy.cpp) as the peers step embeds it, with
    # torch's copies beside GPU 0's rows; one row with an unknown bound, one skipped peer row.
    def copy_row(testcase, path, device, peer, gbps, bound, host=None, skipped=False, why=""):
        b = ({"name": bound[0], "gbps": bound[1], "fraction": gbps / bound[1], "why": ""} if bound
             else {"name": "unknown", "gbps": 0, "fraction": None, "why": why})
        return {"testcase": testcase, "path": path, "method": "ce", "host_memory": host, "device": device, "peer": peer,
                "bytes": 512 << 20, "iters": 10, "skipped": skipped, "note": "no P2P" if skipped else "",
                "median_gbps": 0 if skipped else gbps, "min_gbps": 0 if skipped else gbps * 0.99,
                "max_gbps": 0 if skipped else gbps * 1.01, "median_us": 0 if skipped else (512 << 20) / (gbps * 1e3),
                "bound": b}
    gpu_doc = {"schema": "dsperf.gpu", "schema_version": "1.2", "metadata": {"host": "gpu|node<1>"},
               "args": {"bytes": 512 << 20, "iters": 10, "warmup": 2}, "devices": [{"index": 0}, {"index": 1}],
               "rows": [copy_row("host_to_device_memcpy_ce", "host_to_device", 0, None, 55.1, ("PCIe Gen5 x16", 63.015),
                                 host="pinned"),
                        copy_row("device_local_copy", "device_local", 0, None, 1400, None,
                                 why="the memory clock or bus width of GPU 0 is unknown"),
                        copy_row("device_to_device_memcpy_read_ce", "peer_read", 0, 1, 0, None, skipped=True),
                        copy_row("device_local_copy", "device_local", 1, None, 1400, None)],
               "notes": ["GPUs 0 and 1: no peer rows, no P2P"]}
    peers["gpu_copies"] = {"bytes": 512 << 20, "iters": 10, "warmup": 2, "device": 0, "dsperf": gpu_doc,
                           "rows": [{"testcase": "host_to_device_memcpy_ce", "torch_gbps": 56.0, "dsperf_gbps": 55.1,
                                     "ratio": 55.1 / 56.0}]}
    json.dump(peers, open(os.path.join(out, "peers.json"), "w"))
    summary = {"schema": "dsperf.diag", "schema_version": "1.0", "mode": "local", "world_size": 1,
               "host": "gpu|node<1>", "tool_version": "run-gpu-checks (bundle)",
               "summary": {"pass": 1, "warn": 0, "fail": 1, "skip": 0, "exit_code": 2},
               "gpu_checks": {"result": "gpu-checks: FAIL (sweep)", "started": "2026-12-05T10:00:00Z", "seconds": 300,
                              "budget_s": 480, "dsperf": "dsdiag 0.2.0 (git abcdef1)", "bundle_source": "abcdef1",
                              "nvidia_smi": ["index, name, pci.bus_id, driver_version, memory.total [MiB], persistence_mode",
                                             "0, NVIDIA H200, 00000000:19:00.0, 580.65.06, 143771 MiB, Enabled"],
                              "files": []},
               "checks": [{"id": "gpu_checks.gpu_visible", "status": "PASS", "message": "ok", "remedy": "",
                           "data": {"seconds": 1}},
                          {"id": "gpu_checks.sweep", "status": "FAIL", "message": "dsbench coll exit 124 (cut off: a hang)",
                           "remedy": "See the output of the step in gpu-checks.log.", "data": {"seconds": 150}}]}
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"))

    rc, text, said = figures(out)
    check("gpu_figures.py exits 0 and writes figures.md", rc == 0 and text, said)
    check("no leftover temporary file", not [f for f in os.listdir(out) if f.startswith(".figures.")])
    check("every table is well formed", not tables_well_formed(text), tables_well_formed(text))
    check("the heading names the GPU and the date", "### GPU checks on 1 × NVIDIA H200, 140 GiB, 2026-12-05T10:00:00Z"
          in text, text[:400])
    check("the driver row is dsdiag's", "| Driver | 580.65.06 (dsdiag.json gpu.driver_version) |" in text)
    check("the CUDA row is dsdiag's", "| CUDA | driver supports 13.0; dsperf built with 12.9 (dsdiag.json "
          "gpu.driver_version) |" in text)
    if nccl.get("runtime"):
        check("the NCCL row is dsdiag's nccl.version", f"| NCCL | {nccl['runtime']} loaded by dsdiag (header "
              f"{nccl.get('header')})" in text, [l for l in text.split("\n") if l.startswith("| NCCL")])
    check("the torch peer's versions", "| torch peer | torch 2.9.1+cu129, CUDA 12.9, NCCL 2.27.7 on NVIDIA H200 |" in text)
    check("dsperf's version and the bundle's source", "| dsperf | dsdiag 0.2.0 (git abcdef1) (dsdiag --version); "
          "bundle of abcdef1 (MANIFEST) |" in text)
    check("the host is escaped for Markdown", "| Host | gpu\\|node\\<1\\> |" in text)
    check("the result row", "| Result | `gpu-checks: FAIL (sweep)` |" in text)
    check("the failed step with its reason and remedy", "| sweep | FAIL | 150 | dsbench coll exit 124 (cut off: a hang) "
          "— See the output of the step in gpu-checks.log. |" in text)

    # Sweep rows: the JSON's numbers; per collective the sizes nearest 8 B, 1 MiB, ..., the largest and peak.
    def row_of(x):
        o, i = x["out_of_place"], x.get("in_place")
        cells = [x["collective"], x["dtype"], human(x["size"]), f2(o["time"]), f2(o["alg_bw"]), f2(o["bus_bw"])]
        cells += [f2(i["time"]), f2(i["alg_bw"]), f2(i["bus_bw"])] if i else ["-", "-", "-"]
        return "| " + " | ".join(cells) + " |"

    small = ar[0]
    check("the 8 B allreduce row is the JSON's figures", (row_of(small) + "  |") in text or (row_of(small) + " peak busbw |")
          in text, row_of(small))
    # Each collective's largest row (allgather's and reduce_scatter's busbw is half their algbw at 2 ranks,
    # so a swapped column shows).
    for coll in sorted({x["collective"] for x in sweep["results"]}):
        largest = max((x for x in sweep["results"] if x["collective"] == coll), key=lambda x: x["size"])
        check(f"the largest {coll} row is the JSON's figures", row_of(largest)[:-1] in text, row_of(largest))
    shown = [l for l in text.split("\n") if l.startswith("| allreduce |")]
    peak = max(ar, key=lambda x: max(x["out_of_place"]["bus_bw"], (x.get("in_place") or {}).get("bus_bw", -1)))
    near_1m = min(ar, key=lambda x: abs(math.log2(x["size"]) - 20))
    want = {small["size"], near_1m["size"], ar[-1]["size"], peak["size"]}
    got = {x["size"] for x in ar if any(l.startswith(row_of(x)[:-1]) for l in shown)}
    check(f"allreduce keeps {len(want)} of its {len(ar)} rows: 8 B, nearest 1 MiB, the largest and the peak",
          got == want and len(shown) == len(want), f"got sizes {sorted(got)}, want {sorted(want)}; rows {shown}")
    check("the peak row is marked", any(l.startswith(row_of(peak)[:-1]) and l.endswith("peak busbw |") for l in shown),
          shown)
    check("the shown-of-total count is said", f"of {len(sweep['results'])} rows" in text)

    # Train rows: step p50, samples/s and the ratio to torch.
    step = run0["time_ms"]["step"]["p50"]
    train_row = (f"| mlp:64x4 | f32 | cpu | 2 | 8 | on | {f2(step)} | {run0['samples_per_sec']:.0f} | "
                 f"{run0.get('gemm_tflops', 0):.1f} | 0.25 | {f2(step / 0.25)} |")
    check("the train row is the JSON's figures with torch's step and the ratio", train_row in text,
          [train_row] + [l for l in text.split("\n") if l.startswith("| mlp:64x4")])
    # The peers' allreduce table: torch's time and dsperf's out-of-place time from the sweep, and their ratio.
    p0 = peers["allreduce"][0]
    mine = ar[0]["out_of_place"]["time"]
    peer_row = f"| {human(p0['size'])} | {f2(p0['time_us'])} | {f2(p0['alg_bw'])} | {f2(mine)} | {f2(mine / p0['time_us'])} |"
    check("the peers' allreduce ratio row", peer_row in text, peer_row)
    check("the device-to-device copy", "Device-to-device copy (torch, 1 GiB): 4295 GB/s (read + write), 0.500 ms." in text)
    copy_line = "| host_to_device_memcpy_ce | 0 | - | pinned | 55.10 | 54.55 | 55.65 | 63.02 | 87% | PCIe Gen5 x16 | 56.00 | 0.98 |"
    check("the GPU copy row: dsperf's figures, its bound and fraction, torch's and the ratio", copy_line in text,
          [copy_line] + [l for l in text.split("\n") if "memcpy" in l])
    check("an unknown bound says why", "unknown: the memory clock or bus width of GPU 0 is unknown" in text)
    check("a skipped peer row says why", "| device_to_device_memcpy_read_ce | 0 | 1 | - | skipped: no P2P |" in text)
    check("the other GPUs' rows are counted, not listed", "1 more rows (the other GPUs and their pairs)" in text)
    check("nothing is reported missing when every file is there", "**Missing:**" not in text,
          [l for l in text.split("\n") if "Missing" in l])

    # A missing file: a sentence naming it, the rest still written, exit 0.
    os.unlink(os.path.join(out, "peers.json"))
    rc, text, said = figures(out)
    check("without peers.json: exit 0", rc == 0, said)
    check("without peers.json: the sentence naming it", "- **Missing:** the torch peer: peers.json is missing." in text)
    check("without peers.json: the train row keeps its figures, torch's are '-'",
          f"| {f2(step)} | {run0['samples_per_sec']:.0f} | {run0.get('gemm_tflops', 0):.1f} | - | - |" in text)
    check("without peers.json: the sweep is still there", row_of(small)[:-1] in text)
    open(os.path.join(out, "sweep-nccl.json"), "w").write("{ not json")
    rc, text, said = figures(out)
    check("a broken sweep-nccl.json: exit 0 and a sentence",
          rc == 0 and "- **Missing:** the NCCL sweep: sweep-nccl.json is unreadable (JSONDecodeError" in text, said)
    broken = copy.deepcopy(train)
    broken["runs"][0]["time_ms"] = "no"
    broken["runs"][0].pop("samples_per_sec")
    json.dump(broken, open(os.path.join(out, "train-mlp64.json"), "w"))
    rc, text, said = figures(out)
    check("a train run without its fields: '-' in their cells, no exception",
          rc == 0 and "| mlp:64x4 | f32 | cpu | 2 | 8 | on | - | - |" in text, said + text[-1500:])
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    rc, text, said = figures(empty)
    for sentence in ("each step's verdict: summary.json is missing", "the NCCL sweep: sweep-nccl.json is missing",
                     "the training steps: no train-*.json in the folder", "the torch peer: peers.json is missing",
                     "GPU: no gpu.devices data in dsdiag.json"):
        check(f"an empty folder: '{sentence}'", rc == 0 and sentence in text, text)
    r = run([sys.executable, generator, os.path.join(tmp, "nowhere")])
    check("a folder that does not exist: exit 2 and a sentence", r.returncode == 2 and "is not a folder" in r.stdout,
          r.stdout)

    # run-gpu-checks.sh from the source tree writes figures.md and lists it (only step a: quick with or
    # without a GPU).
    gout = os.path.join(tmp, "gpu-out")
    genv = dict(env, DS_GPU_BIN_DIR=bindir, DS_GPU_TEST_DIR=os.path.join(os.path.dirname(bindir), "tests"),
                DS_GPU_CHECKS_STEPS="gpu_visible")
    r = run(["bash", os.path.join(root, "scripts", "run-gpu-checks.sh"), gout], env=genv)
    fig = os.path.join(gout, "figures.md")
    check("run-gpu-checks.sh wrote figures.md", os.path.exists(fig), r.stdout[-3000:])
    check("run-gpu-checks.sh says where figures.md is", f"gpu-checks: wrote {fig}" in r.stdout, r.stdout[-3000:])
    if os.path.exists(fig):
        text = open(fig, encoding="utf-8").read()
        check("its figures.md has the step's verdict and the result",
              re.search(r"^\| gpu_visible \| (PASS|FAIL) \|", text, re.M) and "| Result | `gpu-checks: FAIL" in text, text)
        check("its figures.md has dsperf's version from dsdiag --version", "(dsdiag --version)" in text, text)
    s = json.load(open(os.path.join(gout, "summary.json")))
    check("summary.json lists figures.md among the files", "figures.md" in s["gpu_checks"]["files"], s["gpu_checks"])
    check("at most 8 files", len(os.listdir(gout)) <= 8, os.listdir(gout))

    print("gpu_figures_test: " + ("ok" if not failures else f"{len(failures)} check(s) FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
