#!/usr/bin/env python3
"""dsdiag and dsbench reach one conclusion on every environment of cases.json, and the DeepSpeed view
in their JSON is what DeepSpeed itself concluded there (fixtures.json).

    compare_cli.py BIN_DIR [--fixtures FILE]

Per environment (the cases without init_distributed options, which the CLIs do not take): runs
`dsbench world --dry-run --json` and `dsdiag --only env --json` with exactly that environment, then
checks that (1) dsdiag's env.world_info is dsbench's plan (or both fail with the same sentence),
(2) dsdiag's env.deepspeed data equals dsbench's "deepspeed" object, and (3) that object gives
DeepSpeed's recorded answer. Exit 0 when all hold, 1 with every mismatch listed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_tools(bin_dir, env, tmp):
    bench_json, diag_json = os.path.join(tmp, "bench.json"), os.path.join(tmp, "diag.json")
    for f in (bench_json, diag_json):
        if os.path.exists(f):
            os.remove(f)
    b = subprocess.run([os.path.join(bin_dir, "dsbench"), "world", "--dry-run", "--json", bench_json], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    d = subprocess.run([os.path.join(bin_dir, "dsdiag"), "--only", "env", "--json", diag_json], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if not os.path.exists(bench_json):
        raise RuntimeError("dsbench wrote no JSON (exit %d): %s" % (b.returncode, b.stderr.decode(errors="replace")))
    if not os.path.exists(diag_json):
        raise RuntimeError("dsdiag wrote no JSON (exit %d): %s" % (d.returncode, d.stderr.decode(errors="replace")))
    with open(bench_json) as f1, open(diag_json) as f2:
        return json.load(f1), json.load(f2)


def against_deepspeed(view, case, result, stub_addr):
    """The DeepSpeed view (dsbench's JSON) against DeepSpeed's recorded result: a list of mismatches."""
    bad = []
    no_mpi4py = case["mpi"] is None
    failure = view["failure"]
    if not result["ok"]:
        if result["error_type"] == "ModuleNotFoundError" and no_mpi4py:
            if not view["mpi4py_needed"] or failure:
                bad.append("DeepSpeed needed mpi4py here; the view does not say so")
            return bad
        if not failure:
            return ["DeepSpeed fails (%s: %s) but the view does not" % (result["error_type"], result["error"])]
        for key, theirs in (("stage", result["stage"]), ("type", result["error_type"])):
            if failure[key] != theirs:
                bad.append("failure %s: view %r, DeepSpeed %r" % (key, failure[key], theirs))
        if not failure["unless_installed"] and failure["message"] != result["error"]:
            bad.append("failure message: view %r, DeepSpeed %r" % (failure["message"], result["error"]))
        return bad
    if failure:
        return ["the view fails (%s: %s) but DeepSpeed starts" % (failure["type"], failure["message"])]
    if no_mpi4py and view["mpi4py_needed"]:
        bad.append("the view needs mpi4py, but DeepSpeed ran without it")
    addr = stub_addr if view["master_addr_from_mpi_rank0"] else view["master_addr"]
    pairs = [("rank", view["rank"], result["rank"]), ("world_size", view["world_size"], result["world_size"]),
             ("master_addr", addr, result["master_addr"]), ("master_port", view["master_port"], result["master_port"]),
             ("timeout_s", view["timeout_s"], result["timeout_s"]), ("backend", view["backend"], result["backend"]),
             ("accelerator", view["accelerator"], result["accelerator"]),
             ("LOCAL_RANK after", view["local_rank"], result["env_after"]["LOCAL_RANK"]),
             ("NCCL_SOCKET_IFNAME after", view["nccl_socket_ifname"], result["env_after"]["NCCL_SOCKET_IFNAME"])]
    for what, ours, theirs in pairs:
        if ours != theirs:
            bad.append("%s: view %r, DeepSpeed %r" % (what, ours, theirs))
    return bad


def tools_agree(bench, diag):
    checks = {c["id"]: c for c in diag["checks"]}
    bad = []
    wi = checks.get("env.world_info")
    if wi is None:
        return ["dsdiag has no env.world_info finding"]
    if bench["dsperf"] is None:
        err = bench["dsperf_error"]
        if wi["status"].lower() == "fail":
            if err not in wi["message"]:
                bad.append("dsbench stops (%s) but dsdiag's env.world_info says: %s" % (err, wi["message"]))
        else:
            # Not discovery: the accelerator or the timeout. dsdiag must flag the variable dsbench names.
            var = err.split("=")[0].split(" ")[0]
            flagged = [c for c in diag["checks"] if c["family"] == "env" and c["status"].lower() in ("warn", "fail")
                       and var in c["message"]]
            if not flagged:
                bad.append("dsbench stops (%s) but no dsdiag env check flags %s" % (err, var))
    else:
        if wi["status"].lower() != "pass":
            bad.append("dsbench plans a world but dsdiag's env.world_info says %s: %s" % (wi["status"], wi["message"]))
        else:
            for key in ("rank", "world_size", "local_rank", "local_world_size", "node_rank", "master_port", "launcher"):
                if wi["data"].get(key) != bench["dsperf"][key]:
                    bad.append("%s: dsdiag %r, dsbench %r" % (key, wi["data"].get(key), bench["dsperf"][key]))
    ds = checks.get("env.deepspeed")
    if ds is None:
        bad.append("dsdiag has no env.deepspeed finding")
    # "mpi4py": dsdiag's answer from the job's Python (can it import mpi4py?), which the view does not hold.
    elif {k: v for k, v in ds["data"].items() if k != "mpi4py"} != bench["deepspeed"]:
        bad.append("DeepSpeed views differ: dsdiag %s, dsbench %s" % (json.dumps(ds["data"]), json.dumps(bench["deepspeed"])))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--fixtures", default=os.path.join(HERE, "fixtures.json"))
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.json"))
    args = ap.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)["cases"]
    with open(args.fixtures) as f:
        fixtures = json.load(f)
    results = {c["name"]: c["result"] for c in fixtures["cases"]}
    stub_addr = fixtures["stub_hostname_i"].split()[0]
    problems, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            if case.get("options"):
                continue  # init_distributed's arguments: ds_deepspeed_fixture_tests covers them
            if case["name"] not in results:
                problems.append("%s: no recorded result; re-record with scripts/deepspeed/record.py" % case["name"])
                continue
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
                   "CUDA_VISIBLE_DEVICES": "", "DSDIAG_COLOR": "never"}
            env.update(case["env"])
            try:
                bench, diag = run_tools(args.bin_dir, env, tmp)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                problems.append("%s: %s" % (case["name"], e))
                continue
            checked += 1
            for p in tools_agree(bench, diag) + against_deepspeed(bench["deepspeed"], case, results[case["name"]], stub_addr):
                problems.append("%s: %s" % (case["name"], p))
    for p in problems:
        print("MISMATCH " + p)
    print("%d environment(s): %s (DeepSpeed %s)" % (checked, "%d mismatch(es)" % len(problems) if problems else
                                                   "dsdiag and dsbench agree, and both give DeepSpeed's answer",
                                                   fixtures["versions"]["deepspeed"]))
    return 1 if problems or checked < 40 else 0


if __name__ == "__main__":
    sys.exit(main())
