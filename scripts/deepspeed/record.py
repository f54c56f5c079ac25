#!/usr/bin/env python3
"""Records what the real deepspeed.init_distributed() concludes in each environment of cases.json.

    scripts/deepspeed/record.py --python VENV_PYTHON [--cases FILE] [--out FILE]

Each case runs in a fresh child process (DeepSpeed reads DEEPSPEED_TIMEOUT and DS_ACCELERATOR at
import) with exactly the case's environment (plus PATH, HOME and CUDA_VISIBLE_DEVICES=""), and
calls deepspeed.init_distributed() with the case's options. Nothing connects:

  - torch.distributed.rendezvous._create_c10d_store is replaced by a recorder that keeps the
    (master_addr, master_port, rank, world_size, timeout) torch's own env:// handler parsed, and
    stops init_process_group there. So the values are DeepSpeed's and torch's, not ours.
  - mpi4py is a stand-in whose COMM_WORLD is the case's "mpi" entry (what the MPI library under
    that launcher reports: rank, size, lower ranks on this host), or absent ("mpi": null), so that
    the MPI discovery path runs without an MPI job. `hostname -I` answers STUB_HOSTNAME_I.
  - deepspeed.comm.torch.build_shm_op returns None (it would JIT-compile a C++ op; not discovery).

The output (fixtures.json) holds DeepSpeed's and torch's versions, and per case either the values
torch's store would have been created with, or the exception (type, text, stage: import or
init_distributed), and the environment after DeepSpeed's patching.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CASES = os.path.join(REPO, "engine/env/tests/deepspeed/cases.json")
FIXTURES = os.path.join(REPO, "engine/env/tests/deepspeed/fixtures.json")
STUB_HOSTNAME_I = "192.0.2.10 198.51.100.7"
WATCHED = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME"]


def install_stubs(mpi):
    import types

    if mpi is None:
        sys.modules["mpi4py"] = None  # `from mpi4py import MPI` raises ModuleNotFoundError
    else:
        rank, size, local = mpi["rank"], mpi["size"], mpi["local_rank"]

        class Comm:
            def Get_rank(self):
                return rank

            def Get_size(self):
                return size

            def bcast(self, obj, root=0):
                # Rank 0 broadcasts the first word of its `hostname -I`.
                return obj if rank == 0 else STUB_HOSTNAME_I.split()[0]

            def allgather(self, name):
                # Lower ranks: the first (rank - local) on other hosts, then `local` on this one.
                names = ["other-%d" % i for i in range(rank - local)] + [name] * local + [name]
                return names + ["later-%d" % i for i in range(size - rank - 1)]

        mpi_mod = types.ModuleType("mpi4py.MPI")
        mpi_mod.COMM_WORLD = Comm()
        mpi_mod.Get_processor_name = lambda: "this-host"
        pkg = types.ModuleType("mpi4py")
        pkg.MPI = mpi_mod
        pkg.__version__ = "stub"
        sys.modules["mpi4py"] = pkg
        sys.modules["mpi4py.MPI"] = mpi_mod

    real_check_output = subprocess.check_output

    def check_output(cmd, *args, **kwargs):
        if list(cmd) == ["hostname", "-I"]:
            return (STUB_HOSTNAME_I + " \n").encode()
        return real_check_output(cmd, *args, **kwargs)

    subprocess.check_output = check_output


def run_case(case):
    """In the child: import DeepSpeed, call init_distributed, describe what happened."""
    install_stubs(case.get("mpi", {"rank": 0, "size": 1, "local_rank": 0}))
    out = {}
    try:
        import deepspeed  # noqa: F401  (reads DEEPSPEED_TIMEOUT and DS_ACCELERATOR)
    except BaseException as e:  # noqa: B902 - a ValueError at import is the finding
        return {"ok": False, "stage": "import", "error_type": type(e).__name__, "error": str(e)}
    import torch.distributed as td
    import torch.distributed.rendezvous  # noqa: F401
    from deepspeed.accelerator import get_accelerator

    class Recorded(Exception):
        pass

    def create_store(hostname, port, rank, world_size, timeout):
        out.update(master_addr=hostname, master_port=port, rank=rank, world_size=world_size,
                   timeout_s=timeout.total_seconds())
        raise Recorded()

    # As attributes, torch.distributed.rendezvous is a function and deepspeed.comm.torch is the torch
    # module (both re-exported by their packages): patch the modules themselves.
    sys.modules["torch.distributed.rendezvous"]._create_c10d_store = create_store
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    real_ipg = td.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        out["backend"] = str(backend)
        return real_ipg(backend, *args, **kwargs)

    td.init_process_group = init_process_group
    opts = case.get("options", {})
    try:
        deepspeed.init_distributed(**opts)
        result = {"ok": False, "stage": "init_distributed", "error_type": "NoStore",
                  "error": "init_distributed returned without creating torch's store"}
    except Recorded:
        result = {"ok": True}
        result.update(out)
    except BaseException as e:  # noqa: B902
        result = {"ok": False, "stage": "init_distributed", "error_type": type(e).__name__, "error": str(e)}
    accel = get_accelerator()
    result["accelerator"] = accel.device_name()
    result["accelerator_backend"] = accel.communication_backend_name()
    result["env_after"] = {k: os.environ.get(k) for k in WATCHED}
    return result


def child_main(case_file, result_file):
    with open(case_file) as f:
        case = json.load(f)
    result = run_case(case)
    with open(result_file, "w") as f:
        json.dump(result, f)


def run_child(python, script, case, tmp, env, cwd=None):
    """Runs `script --child` on one case in a fresh process (files in tmp) and returns its result."""
    cf, rf = os.path.join(tmp, "case.json"), os.path.join(tmp, "result.json")
    with open(cf, "w") as f:
        json.dump(case, f)
    if os.path.exists(rf):
        os.remove(rf)
    proc = subprocess.run([python, os.path.abspath(script), "--child", cf, rf], env=env, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    if not os.path.exists(rf):
        sys.stderr.write("case %s: the child wrote no result (exit %d):\n%s\n" %
                         (case["name"], proc.returncode, proc.stdout.decode(errors="replace")[-3000:]))
        sys.exit(2)
    with open(rf) as f:
        return {"name": case["name"], "result": json.load(f)}


def map_cases(fn, cases):
    """fn(case) on every case, DS_RECORD_JOBS (default: the CPUs this process may use) at a time; the
    results in the cases' order. Each case is a child process of its own (DeepSpeed's import is most of
    its time), so they run side by side; a failing case still stops the record (run_child exits 2)."""
    jobs = int(os.environ.get("DS_RECORD_JOBS", "0") or 0) or len(os.sched_getaffinity(0))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(fn, cases))


def record(python, cases):
    def one(case):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
                   "CUDA_VISIBLE_DEVICES": ""}
            env.update(case["env"])
            return run_child(python, __file__, case, tmp, env)
    return map_cases(one, cases)


def versions(python):
    code = ("import json, deepspeed, torch, sys; print(json.dumps({'deepspeed': deepspeed.__version__, "
            "'torch': torch.__version__, 'python': sys.version.split()[0]}))")
    proc = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
                               "CUDA_VISIBLE_DEVICES": ""}, check=True)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def cli(doc, cases_default, fixtures_default, schema, stub, record_cases, child, what):
    """The command line of both recorders: `--child CASE RESULT` runs one case in this process (what
    record_cases starts per case); otherwise records every case with --python's DeepSpeed into --out,
    atomically (temp file + rename), with the versions and the stub address."""
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--python", required=True, help="the venv's python (scripts/deepspeed/setup-venv.sh prints it)")
    ap.add_argument("--cases", default=cases_default)
    ap.add_argument("--out", default=fixtures_default)
    args = ap.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)["cases"]
    out = {"schema": schema, "versions": versions(args.python), "stub_hostname_i": stub,
           "cases": record_cases(args.python, cases)}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, args.out)
    print("recorded %d %s(s) with DeepSpeed %s into %s" % (len(cases), what, out["versions"]["deepspeed"], args.out))


def main():
    cli(__doc__, CASES, FIXTURES, "dsperf.deepspeed_fixtures v1", STUB_HOSTNAME_I, record, child_main, "case")


if __name__ == "__main__":
    main()
