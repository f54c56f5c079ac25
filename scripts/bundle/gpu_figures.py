#!/usr/bin/env python3
"""The figures of one run-gpu-checks.sh output folder as Markdown (step i writes OUT/figures.md), ready
to paste into docs/performance.md's GPU section:

  header   GPU model(s), driver, CUDA and NCCL versions, dsperf's version, host, date and result
           (summary.json, dsdiag.json, sweep-nccl.json's metadata, nvidia-smi's lines kept in
           summary.json, peers.json);
  steps    each step's PASS / FAIL / SKIP with its reason and seconds (summary.json);
  sweep    the NCCL sweep per collective: size, time, algbw and busbw out-of-place and in-place, at the
           sizes nearest 8 B, 1 MiB, 64 MiB, 1 GiB and 4 GiB, the largest and the peak busbw
           (sweep-nccl.json; every row when a collective has 8 or fewer);
  train    each dsbench train run: preset, dtype, step time, samples/s, TFLOP/s of the GEMMs, the step
           split, and torch's step and the ratio where peers.json has them (train-*.json, peers.json);
  copies   dsbench gpu's rows (step g; kept whole in peers.json's gpu_copies.dsperf): each copy's median,
           min and max GB/s, its bound and the fraction reached, and torch's x.copy_ on the same copy
           and size with dsperf/torch in GB/s (GPU 0); the rows of GPU 0 and its pairs, the rest counted;
  peers    torch's allreduce against the sweep's, and its device-to-device copy (peers.json).

Every figure is read from the folder's JSON; nothing is estimated. A file or field that is missing gives
a line saying which, never an exception. Python 3 standard library only: it runs with the GPU node's own
python, inside the bundle.
Usage: gpu_figures.py OUTDIR [--out FILE]   (default OUTDIR/figures.md; '-' prints it)
Exit 0 when written (missing inputs included), 2 on bad usage or when FILE cannot be written.
"""
import glob
import json
import math
import os
import re
import sys
import tempfile

# The sizes the sweep table keeps per collective (the nearest row to each), besides the largest and the
# peak busbw; a collective of at most ROWS_ALL rows keeps them all.
TARGET_SIZES = [8, 1 << 20, 64 << 20, 1 << 30, 4 << 30]
ROWS_ALL = 8


class Doc:
    """One JSON file of the folder: its data, or why there is none."""

    def __init__(self, folder, name):
        self.name = name
        self.path = os.path.join(folder, name)
        self.data = None
        self.problem = None
        if not os.path.exists(self.path):
            self.problem = f"{name} is missing"
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                self.data = json.load(f)
        except (OSError, ValueError) as e:
            self.problem = f"{name} is unreadable ({e.__class__.__name__}: {e})"
            return
        if not isinstance(self.data, dict):
            self.problem = f"{name} is not a JSON object"
            self.data = None

    def get(self, *keys):
        """The value at keys (dict keys or list indices), or None."""
        v = self.data
        for k in keys:
            if isinstance(v, dict) and isinstance(k, str):
                v = v.get(k)
            elif isinstance(v, list) and isinstance(k, int) and -len(v) <= k < len(v):
                v = v[k]
            else:
                return None
        return v

    def check(self, check_id):
        """The check record of a dsperf.diag document, or None."""
        for c in self.get("checks") or []:
            if isinstance(c, dict) and c.get("id") == check_id:
                return c
        return None


def md(value):
    """A string from outside as Markdown text, safe inside a table cell: one line, no HTML, no pipes."""
    s = " ".join(str(value).split())
    return re.sub(r"([\\`*<>|\[\]])", r"\\\1", s)


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fixed(v, digits=2):
    return f"{v:.{digits}f}" if num(v) else "-"


def human_bytes(n):
    if not num(n):
        return "-"
    n = int(n)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def missing(what, why):
    return f"- **Missing:** {what}: {why}."


# ---------------------------------------------------------------------------------------------- header
def gpu_lines(diag, summary):
    """The GPUs: dsdiag's gpu.devices, else the nvidia-smi lines summary.json kept, else the sweep's."""
    c = diag.check("gpu.devices")
    devs = c["data"].get("devices") if isinstance(c, dict) and isinstance(c.get("data"), dict) else None
    if isinstance(devs, list) and devs:
        names = {}
        for d in devs:
            if isinstance(d, dict):
                key = (d.get("name", "?"), d.get("memory_bytes"))
                names[key] = names.get(key, 0) + 1
        parts = []
        for (name, mem), n in names.items():
            size = f", {mem / 2**30:.0f} GiB" if num(mem) else ""
            parts.append(f"{n} × {md(name)}{size}")
        return "; ".join(parts) + " (dsdiag.json gpu.devices)"
    smi = smi_rows(summary)
    if smi:
        names = {}
        for r in smi:
            key = (r.get("name", "?"), r.get("memory.total [MiB]", ""))
            names[key] = names.get(key, 0) + 1
        return "; ".join(f"{n} × {md(name)}" + (f", {md(mem)}" if mem else "") for (name, mem), n in names.items()) + \
            " (nvidia-smi)"
    return None


def smi_rows(summary):
    """nvidia-smi --query-gpu=... --format=csv as summary.json's gpu_checks.nvidia_smi keeps it: dicts."""
    lines = summary.get("gpu_checks", "nvidia_smi")
    if not isinstance(lines, list) or len(lines) < 2:
        return []
    header = [h.strip() for h in str(lines[0]).split(",")]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in str(line).split(",")]
        if len(cells) == len(header):
            rows.append(dict(zip(header, cells)))
    return rows


def header(docs):
    summary, diag, sweep, peers = docs["summary"], docs["dsdiag"], docs["sweep"], docs["peers"]
    out = []
    gpus = gpu_lines(diag, summary)
    host = summary.get("host") or diag.get("host")
    date = summary.get("gpu_checks", "started") or sweep.get("metadata", "start_time")
    title = "GPU checks"
    if gpus:
        title += " on " + gpus.split(" (")[0]
    if date:
        title += ", " + md(date)
    out += [f"### {title}", ""]
    rows, gaps = [], []

    def row(what, value, gap):
        if value:
            rows.append([what, value])
        else:
            gaps.append(missing(what, gap))

    row("GPU", gpus, "no gpu.devices data in dsdiag.json and no nvidia-smi lines in summary.json"
        + problem_note(diag, summary))
    drv = diag.check("gpu.driver_version")
    drv_data = drv.get("data") if isinstance(drv, dict) and isinstance(drv.get("data"), dict) else {}
    nvml = drv_data.get("nvml_driver_version")
    driver = None
    if nvml:
        driver = f"{md(nvml)} (dsdiag.json gpu.driver_version)"
    else:
        smi = [r.get("driver_version") for r in smi_rows(summary) if r.get("driver_version")]
        if smi:
            driver = f"{md(', '.join(sorted(set(smi))))} (nvidia-smi)"
    row("Driver", driver, "no nvml_driver_version in dsdiag.json's gpu.driver_version and no nvidia-smi lines"
        + problem_note(diag, summary))
    cuda = []
    if drv_data.get("driver_cuda_version"):
        cuda.append(f"driver supports {md(drv_data['driver_cuda_version'])}")
    if drv_data.get("built_cuda_version"):
        cuda.append(f"dsperf built with {md(drv_data['built_cuda_version'])}")
    row("CUDA", "; ".join(cuda) + " (dsdiag.json gpu.driver_version)" if cuda else None,
        "no CUDA versions in dsdiag.json's gpu.driver_version" + problem_note(diag))
    nccl = []
    nv = diag.check("nccl.version")
    nv_data = nv.get("data") if isinstance(nv, dict) and isinstance(nv.get("data"), dict) else {}
    if nv_data.get("runtime"):
        nccl.append(f"{md(nv_data['runtime'])} loaded by dsdiag (header {md(nv_data.get('header', '-'))})")
    sv = sweep.get("metadata", "versions") or {}
    if isinstance(sv, dict) and sv.get("nccl"):
        nccl.append(f"{md(sv['nccl'])} in the sweep (header {md(sv.get('nccl_header', '-'))})")
    row("NCCL", "; ".join(nccl) if nccl else None,
        "no runtime version in dsdiag.json's nccl.version nor in sweep-nccl.json's metadata.versions"
        + problem_note(diag, sweep))
    if peers.data is not None:
        t = [f"torch {md(peers.get('torch'))}" if peers.get("torch") else None,
             f"CUDA {md(peers.get('cuda'))}" if peers.get("cuda") else None,
             f"NCCL {md(peers.get('nccl'))}" if peers.get("nccl") else None]
        t = [x for x in t if x]
        row("torch peer", ", ".join(t) + (f" on {md(peers.get('device'))}" if peers.get("device") else "") if t else None,
            "peers.json has no torch version")
    version = []  # the first source that has it, and the bundle's source revision
    if summary.get("gpu_checks", "dsperf"):
        version.append(f"{md(summary.get('gpu_checks', 'dsperf'))} (dsdiag --version)")
    elif diag.get("tool_version"):
        version.append(f"{md(diag.get('tool_version'))} (dsdiag.json)")
    elif isinstance(sv, dict) and sv.get("dsperf"):
        version.append(f"{md(sv['dsperf'])}" + (f" git {md(sv['git_sha'])}" if sv.get("git_sha") else "")
                       + " (sweep-nccl.json)")
    if summary.get("gpu_checks", "bundle_source"):
        version.append(f"bundle of {md(summary.get('gpu_checks', 'bundle_source'))} (MANIFEST)")
    row("dsperf", "; ".join(version) if version else None,
        "no gpu_checks.dsperf in summary.json, no tool_version in dsdiag.json, no metadata.versions in "
        "sweep-nccl.json" + problem_note(summary, diag, sweep))
    row("Host", md(host) if host else None, "no host in summary.json or dsdiag.json" + problem_note(summary, diag))
    row("Date", md(date) + (" (run-gpu-checks started)" if summary.get("gpu_checks", "started") else " (sweep started)")
        if date else None, "no gpu_checks.started in summary.json and no metadata.start_time in sweep-nccl.json"
        + problem_note(summary, sweep))
    result = summary.get("gpu_checks", "result")
    row("Result", f"`{result}`" if result else None, "no gpu_checks.result in summary.json" + problem_note(summary))
    out += table(["", "value (source)"], rows)
    if gaps:
        out += [""] + gaps
    return out


def problem_note(*docs):
    notes = [d.problem for d in docs if d.problem]
    return " (" + "; ".join(notes) + ")" if notes else ""


# ----------------------------------------------------------------------------------------------- steps
def steps(docs):
    summary = docs["summary"]
    out = ["### Steps", ""]
    if summary.data is None:
        return out + [missing("each step's verdict", summary.problem)]
    rows = []
    for c in summary.get("checks") or []:
        if not isinstance(c, dict):
            continue
        sid = str(c.get("id", "?"))
        sid = sid[len("gpu_checks."):] if sid.startswith("gpu_checks.") else sid
        secs = (c.get("data") or {}).get("seconds") if isinstance(c.get("data"), dict) else None
        reason = c.get("message") or ""
        if c.get("status") == "FAIL" and c.get("remedy"):
            reason += " — " + str(c.get("remedy"))
        rows.append([md(sid), md(c.get("status", "?")), str(secs) if num(secs) else "-", md(reason) or "-"])
    if not rows:
        return out + [missing("each step's verdict", "summary.json has no checks")]
    out += table(["step", "status", "s", "reason"], rows)
    d = docs["dsdiag"]
    if d.data is not None and isinstance(d.get("summary"), dict):
        s = d.get("summary")
        flagged = [f"{md(c.get('id'))} {md(c.get('status'))}" for c in d.get("checks") or []
                   if isinstance(c, dict) and c.get("status") in ("WARN", "FAIL")]
        out += ["", f"dsdiag: {s.get('pass', '-')} pass, {s.get('warn', '-')} warn, {s.get('fail', '-')} fail, "
                f"{s.get('skip', '-')} skip" + (f" ({', '.join(flagged)})" if flagged else "") + "."]
    return out


# ----------------------------------------------------------------------------------------------- sweep
def pick_rows(rows):
    """Per collective: all rows when few, else those nearest TARGET_SIZES, the largest and the peak."""
    rows = sorted(rows, key=lambda r: r["size"])
    if len(rows) <= ROWS_ALL:
        return rows, peak_of(rows)
    keep = set()
    for t in TARGET_SIZES:
        best = min(rows, key=lambda r: abs(math.log2(max(r["size"], 1)) - math.log2(t)))
        keep.add(id(best))
    keep.add(id(rows[-1]))
    peak = peak_of(rows)
    if peak is not None:
        keep.add(id(peak))
    return [r for r in rows if id(r) in keep], peak


def peak_of(rows):
    best, best_bw = None, None
    for r in rows:
        for place in ("out_of_place", "in_place"):
            bw = (r.get(place) or {}).get("bus_bw") if isinstance(r.get(place), dict) else None
            if num(bw) and (best_bw is None or bw > best_bw):
                best, best_bw = r, bw
    return best


def place_cells(r, place):
    p = r.get(place) if isinstance(r.get(place), dict) else {}
    return [fixed(p.get("time")), fixed(p.get("alg_bw")), fixed(p.get("bus_bw"))]


def sweep_section(docs):
    sweep = docs["sweep"]
    out = ["### NCCL sweep (`dsbench coll --backend nccl`, sweep-nccl.json)", ""]
    if sweep.data is None:
        return out + [missing("the NCCL sweep", sweep.problem)]
    results = [r for r in sweep.get("results") or [] if isinstance(r, dict) and num(r.get("size"))]
    if not results:
        return out + [missing("the NCCL sweep", "sweep-nccl.json has no results")]
    groups = {}
    for r in results:
        key = (r.get("backend", "?"), r.get("collective", "?"), r.get("dtype", "?"), r.get("op", "?"),
               r.get("world_size", "?"))
        groups.setdefault(key, []).append(r)
    order = [c for c in sweep.get("args", "collectives") or []]
    keys = sorted(groups, key=lambda k: (order.index(k[1]) if k[1] in order else len(order), k))
    reducing = sorted({str(k[3]) for k in keys if k[3] != "none"})  # "none": the collective reduces nothing
    many_ops = len(reducing) > 1
    rows, shown, total = [], 0, 0
    for key in keys:
        picked, peak = pick_rows(groups[key])
        total += len(groups[key])
        shown += len(picked)
        backend, coll, dtype, op, ws = key
        for r in picked:
            note = "peak busbw" if r is peak else ""
            wrong = [str((r.get(p) or {}).get("nwrong")) for p in ("out_of_place", "in_place")
                     if isinstance(r.get(p), dict) and num(r[p].get("nwrong")) and r[p]["nwrong"] > 0]
            if wrong:
                note = (note + "; " if note else "") + "#wrong " + "/".join(wrong)
            rows.append([md(coll), md(dtype)] + ([md(op)] if many_ops else []) + [human_bytes(r["size"])]
                        + place_cells(r, "out_of_place") + place_cells(r, "in_place") + [note])
    ws = sorted({str(k[4]) for k in keys})
    ops = f"op {md(reducing[0])} where it reduces; " if len(reducing) == 1 else ""
    out.append(f"World size {', '.join(ws)}; {ops}time in µs per op (the loop time / iterations), algbw and busbw in "
               f"GB/s. {shown} of {total} rows: per collective, the sizes nearest 8 B, 1 MiB, 64 MiB, 1 GiB and "
               f"4 GiB, the largest and the peak busbw (every row when {ROWS_ALL} or fewer); all are in "
               f"sweep-nccl.json.")
    out.append("")
    out += table(["collective", "dtype"] + (["op"] if many_ops else []) + ["size", "time", "algbw", "busbw",
                                                                          "in-place time", "algbw", "busbw", "note"],
                 rows)
    s = sweep.get("summary")
    if isinstance(s, dict):
        out += ["", f"Sweep status {md(s.get('status', '-'))}, exit {md(s.get('exit_code', '-'))}, average busbw "
                f"{fixed(s.get('avg_bus_bw'))} GB/s" + (f", error: {md(s['error'])}" if s.get("error") else "") + "."]
    for n in sweep.get("notes") or []:
        out.append(f"- Note: {md(n)}")
    return out


# ----------------------------------------------------------------------------------------------- train
def preset_of(doc):
    """The --model value of the command line (100m, mlp:8192x8), as the user named it."""
    cl = str(doc.get("metadata", "command_line") or "")
    m = re.search(r"--model(?:=|\s+)(\S+)", cl)
    return m.group(1) if m else None


def train_section(docs):
    out = ["### Training steps (`dsbench train`, train-*.json)", ""]
    trains, peers = docs["train"], docs["peers"]
    if not trains:
        return out + [missing("the training steps", "no train-*.json in the folder")]
    torch_mlp = {}
    if peers.data is not None:
        for p in peers.get("mlp") or []:
            if isinstance(p, dict):
                torch_mlp[(p.get("model"), p.get("dtype", "f32"))] = p
    rows, split, gaps = [], [], []
    for doc in trains:
        if doc.data is None:
            gaps.append(missing(doc.name, doc.problem))
            continue
        runs = [r for r in doc.get("runs") or [] if isinstance(r, dict)]
        if not runs:
            gaps.append(missing(doc.name, "no runs in it"))
            continue
        preset = preset_of(doc)
        for r in runs:
            t = r.get("time_ms") if isinstance(r.get("time_ms"), dict) else {}

            def p50(k):
                v = t.get(k)
                return v.get("p50") if isinstance(v, dict) else None

            model = str(r.get("model", "?"))
            name = md(model) if not preset or preset == model else f"{md(preset)} ({md(model)})"
            dtype = r.get("dtype", "f32")
            step = p50("step")
            peer = torch_mlp.get((model, dtype))
            if peer is not None and num(peer.get("step_ms")) and num(step) and peer["step_ms"] > 0:
                torch_ms, ratio = fixed(peer["step_ms"]), fixed(step / peer["step_ms"])
            else:
                torch_ms = ratio = "-"
            overlap = "-" if not isinstance(r.get("overlap"), bool) else ("on" if r["overlap"] else "off")
            rows.append([name, md(dtype), md(r.get("device", "-")), str(r.get("world_size", "-")),
                         str(r.get("per_rank_batch", "-")), overlap, fixed(step), fixed(r.get("samples_per_sec"), 0),
                         fixed(r.get("gemm_tflops"), 1), torch_ms, ratio])
            split.append([name, md(dtype), overlap, fixed(p50("forward")), fixed(p50("backward_compute")),
                          fixed(p50("exposed_comm")), fixed(p50("optimizer")), fixed(step)])
    if rows:
        out.append("Median (p50) of the measured steps; samples/s as dsbench reports it; TFLOP/s of the GEMMs at "
                   "the step time; torch: the node's torch on the same MLP, batch and dtype (peers.json); "
                   "dsperf/torch above 1 means dsperf takes longer.")
        out.append("")
        out += table(["model", "dtype", "device", "ranks", "batch/rank", "overlap", "step ms", "samples/s", "TFLOP/s",
                      "torch step ms", "dsperf/torch"], rows)
        out += ["", "Step split (p50, ms):", ""]
        out += table(["model", "dtype", "overlap", "forward", "backward", "exposed comm", "optimizer", "step"], split)
        if peers.data is None:
            gaps.append(missing("torch's step times", peers.problem))
    return out + ([""] + gaps if gaps and rows else gaps)


# ----------------------------------------------------------------------------------------------- peers
def peers_section(docs):
    peers, sweep = docs["peers"], docs["sweep"]
    out = ["### The node's torch on the same work (peers.json)", ""]
    if peers.data is None:
        return out + [missing("the torch peer", peers.problem)]
    ours = {}
    for r in (sweep.get("results") or []) if sweep.data is not None else []:
        if isinstance(r, dict) and r.get("collective") == "allreduce" and r.get("dtype") in ("f32", "float", "float32") \
                and isinstance(r.get("out_of_place"), dict) and num(r["out_of_place"].get("time")):
            ours[r.get("size")] = r["out_of_place"]["time"]
    ar = [r for r in peers.get("allreduce") or [] if isinstance(r, dict) and num(r.get("size"))]
    if ar:
        picked, _ = pick_rows([dict(r, out_of_place={"bus_bw": r.get("alg_bw")}) for r in ar])
        rows = []
        for r in picked:
            mine = ours.get(r["size"])
            rows.append([human_bytes(r["size"]), fixed(r.get("time_us")), fixed(r.get("alg_bw")), fixed(mine),
                         fixed(mine / r["time_us"]) if num(mine) and num(r.get("time_us")) and r["time_us"] > 0 else "-"])
        out.append(f"allreduce, world size 1, float32, out-of-place (time in µs, algbw in GB/s); {len(picked)} of "
                   f"{len(ar)} sizes, chosen as in the sweep table:")
        out.append("")
        out += table(["size", "torch time", "torch algbw", "dsperf time", "dsperf/torch"], rows)
        if not ours:
            out += ["", missing("dsperf's allreduce times", sweep.problem or "sweep-nccl.json has no f32 allreduce rows")]
    else:
        out.append(missing("torch's allreduce", "peers.json has no allreduce rows"))
    copy = peers.get("copy")
    out.append("")
    if isinstance(copy, dict) and num(copy.get("gbps")):
        out.append(f"Device-to-device copy (torch, {human_bytes(copy.get('bytes'))}): {fixed(copy['gbps'], 0)} GB/s "
                   f"(read + write), {fixed(copy.get('time_ms'), 3)} ms.")
    else:
        out.append(missing("torch's device-to-device copy", "peers.json has no copy figures"))
    mlp = [p for p in peers.get("mlp") or [] if isinstance(p, dict)]
    out.append("")
    if mlp:
        rows = []
        for p in mlp:
            mine, theirs = p.get("dsperf_step_ms"), p.get("step_ms")
            rows.append([md(p.get("model", "?")), md(p.get("dtype", "f32")), str(p.get("batch", "-")), fixed(theirs),
                         fixed(mine), fixed(mine / theirs) if num(mine) and num(theirs) and theirs > 0 else "-",
                         fixed(p.get("tflops"), 1), fixed(p.get("dsperf_tflops"), 1)])
        host = [p for p in mlp if p.get("dsperf_timer", "cuda events") != "cuda events"]
        out.append("DDP step (forward + backward + allreduce + SGD), world size 1: torch's DistributedDataParallel "
                   "on nccl and dsbench train, each step on CUDA events with the batch on the GPU; TFLOP/s of the "
                   "GEMMs at the step time" + (" (dsperf's figures of this run are the host's clock with the "
                                                 "batch's load: its dsbench predates time_ms.step_device)" if host else "")
                   + ":")
        out.append("")
        out += table(["model", "dtype", "batch", "torch ms", "dsperf ms", "dsperf/torch", "torch TFLOP/s",
                      "dsperf TFLOP/s"], rows)
    else:
        out.append(missing("torch's DDP step", "peers.json has no mlp rows"))
    return out


def copies_section(docs):
    peers = docs["peers"]
    out = ["### GPU copies (dsbench gpu, with torch's x.copy_; peers.json)", ""]
    if peers.data is None:
        return out + [missing("the GPU copies", peers.problem)]
    g = peers.get("gpu_copies")
    if not isinstance(g, dict) or not isinstance(g.get("dsperf"), dict):
        return out + [missing("the GPU copies", "peers.json has no gpu_copies (step copies did not run or failed)")]
    doc = g["dsperf"]
    rows = [r for r in doc.get("rows") or [] if isinstance(r, dict)]
    torch_by = {r.get("testcase"): r for r in g.get("rows") or [] if isinstance(r, dict)}
    first = g.get("device", 0)
    shown = [r for r in rows if r.get("device") == first or r.get("peer") == first]
    args = doc.get("args") or {}
    out.append(f"{human_bytes(args.get('bytes'))} per copy, median of {args.get('iters', '-')} after "
               f"{args.get('warmup', '-')} warm-up; GB/s of bytes copied once (nvbandwidth's); torch: x.copy_ on "
               f"GPU {first}, same size and repetitions; dsperf/torch in GB/s (below 1: dsperf slower).")
    out.append("")
    body = []
    for r in shown:
        b = r.get("bound") if isinstance(r.get("bound"), dict) else {}
        t = torch_by.get(r.get("testcase")) if r.get("device") == first and r.get("peer") is None else None
        frac = b.get("fraction")
        body.append([md(r.get("testcase", "?")), str(r.get("device", "-")),
                     "-" if r.get("peer") is None else str(r.get("peer")), md(r.get("host_memory") or "-"),
                     "skipped: " + md(r.get("note", "")) if r.get("skipped") else fixed(r.get("median_gbps")),
                     fixed(r.get("min_gbps")) if not r.get("skipped") else "-",
                     fixed(r.get("max_gbps")) if not r.get("skipped") else "-",
                     fixed(b.get("gbps")) if num(b.get("gbps")) and b.get("gbps") > 0 else "-",
                     f"{100 * frac:.0f}%" if num(frac) else "-",
                     md(b.get("name")) if num(b.get("gbps")) and b.get("gbps") > 0 else "unknown: " + md(b.get("why", "")),
                     fixed(t.get("torch_gbps")) if t else "-", fixed(t.get("ratio")) if t else "-"])
    out += table(["testcase", "gpu", "peer", "host", "median GB/s", "min", "max", "bound GB/s", "of bound", "bound",
                  "torch GB/s", "dsperf/torch"], body)
    if len(rows) > len(shown):
        out += ["", f"{len(rows) - len(shown)} more rows (the other GPUs and their pairs) are in peers.json's "
                    "gpu_copies.dsperf."]
    for n in doc.get("notes") or []:
        out += ["", "- " + md(n)]
    return out


def render(folder):
    docs = {"summary": Doc(folder, "summary.json"), "dsdiag": Doc(folder, "dsdiag.json"),
            "sweep": Doc(folder, "sweep-nccl.json"), "peers": Doc(folder, "peers.json"),
            "train": [Doc(folder, os.path.basename(p)) for p in sorted(glob.glob(os.path.join(folder, "train-*.json")))]}
    out = [f"<!-- gpu_figures.py from {md(os.path.basename(os.path.abspath(folder)))}/: every figure is from its JSON -->", ""]
    for part in (header, steps, sweep_section, train_section, copies_section, peers_section):
        try:
            out += part(docs)
        except Exception as e:  # noqa: BLE001 - a shape we did not foresee costs one section, not the file
            out.append(missing(part.__name__, f"its JSON has an unexpected shape ({e.__class__.__name__}: {md(e)})"))
        out.append("")
    return "\n".join(out)


def main(argv):
    args = list(argv)
    dest = None
    if "--out" in args:
        i = args.index("--out")
        if i + 1 >= len(args):
            print("gpu_figures: --out needs a file name", file=sys.stderr)
            return 2
        dest = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    folder = args[0]
    if not os.path.isdir(folder):
        print(f"gpu_figures: {folder} is not a folder (run-gpu-checks.sh's OUTDIR)", file=sys.stderr)
        return 2
    text = render(folder)
    if dest == "-":
        sys.stdout.write(text)
        return 0
    dest = dest or os.path.join(folder, "figures.md")
    # Written whole or not at all: a temporary file beside it, then a rename.
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".figures.", dir=os.path.dirname(os.path.abspath(dest)))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        print(f"gpu_figures: cannot write {dest}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
