#!/usr/bin/env python3
"""Records what DeepSpeed's runner makes of its inputs, for each case of runner_cases.json.

    scripts/deepspeed/record_runner.py --python VENV_PYTHON [--cases FILE] [--out FILE]

Each case runs in a fresh child process, in a temporary working directory with a temporary HOME,
holding the case's files (the hostfile, `.deepspeed_env` in ~ or in the working directory), with
exactly the case's environment (plus PATH). The child imports DeepSpeed's own runner and records:

  fetch    deepspeed.launcher.runner.fetch_hostfile(hostfile): the pool, None, or the exception;
  filter   parse_inclusion_exclusion(pool, include, exclude) on that pool (when it parsed);
  main     runner.main(args) itself: the world_info it hands launch.py, whether it launches on
           several hosts and with which launcher (pdsh, openmpi, mpich, impi, slurm, mvapich; "local"
           for launch.py here), the master address, the launcher's exports, the command line it
           starts, what it sets in and removes from that command's environment, and the file it
           writes first (mvapich's hostfile); or the exception.

Nothing connects: `ssh HOST hostname` succeeds, `ssh HOST hostname -I` answers STUB_HOSTNAME_I,
every launcher's backend_exists() answers the case's "backend_exists" (default true), and the
Popen that would start the job records its command line and environment instead. The
accelerator's device_count() answers the case's "device_count". The case's "args" go before the
script, its "user_args" after it. Paths that differ per run are written as $CWD (the working
directory), $PYTHON (sys.executable) and $DEEPSPEED_LAUNCHER (deepspeed/launcher), so that fixtures
do not depend on them; mvapich's /tmp/deepspeed_mvapich_hostfile is written into the case's
temporary folder instead and recorded under its own name.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record as record_cli  # noqa: E402  (the shared command line; sibling file)
REPO = os.path.dirname(os.path.dirname(HERE))
CASES = os.path.join(REPO, "engine/env/tests/deepspeed/runner_cases.json")
FIXTURES = os.path.join(REPO, "engine/env/tests/deepspeed/runner_fixtures.json")
STUB_HOSTNAME_I = "198.51.100.20 10.0.0.1"


def error(e):
    return {"ok": False, "error_type": type(e).__name__, "error": str(e)}


def run_case(case, cwd):
    import base64

    from deepspeed.accelerator import get_accelerator
    from deepspeed.launcher import runner, multinode_runner

    accel = get_accelerator()
    accel.device_count = lambda: case.get("device_count", 0)
    out = {"accelerator": accel.device_name()}
    hostfile = case.get("hostfile_path", "hostfile")
    try:
        pool = runner.fetch_hostfile(hostfile)
        out["fetch"] = {"ok": True, "pool": None if pool is None else [[h, n] for h, n in pool.items()]}
    except BaseException as e:  # noqa: B902 - the exception is the answer
        pool = None
        out["fetch"] = error(e)
    if pool is not None:
        try:
            active = runner.parse_inclusion_exclusion(pool, case.get("include", ""), case.get("exclude", ""))
            out["filter"] = {"ok": True, "active": [[h, s] for h, s in active.items()]}
        except BaseException as e:  # noqa: B902
            out["filter"] = error(e)

    class Launched(Exception):
        pass

    captured = {}

    def check_call(cmd, *a, **k):
        captured.setdefault("ssh_checks", []).append(list(cmd))
        return 0

    def check_output(cmd, *a, **k):
        return (STUB_HOSTNAME_I + "\n").encode()

    def popen(cmd, *a, **k):
        captured["cmd"] = list(cmd)
        captured["env"] = dict(k.get("env") or os.environ)
        raise Launched()

    real_encode = runner.encode_world_info

    def encode_world_info(world_info):
        captured["world"] = [[h, list(s)] for h, s in world_info.items()]
        return real_encode(world_info)

    real_parse_args = runner.parse_args

    def parse_args(a=None):
        captured["args"] = real_parse_args(a)
        return captured["args"]

    mvapich_file = os.path.join(os.path.dirname(cwd), "deepspeed_mvapich_hostfile")
    multinode_runner.MVAPICH_TMP_HOSTFILE = mvapich_file
    exists = case.get("backend_exists", True)
    for cls in (multinode_runner.PDSHRunner, multinode_runner.OpenMPIRunner, multinode_runner.MPICHRunner,
                multinode_runner.IMPIRunner, multinode_runner.SlurmRunner, multinode_runner.MVAPICHRunner):
        real_get_cmd = cls.get_cmd

        def get_cmd(self, environment, active_resources, real_get_cmd=real_get_cmd):
            captured["exports"] = dict(self.exports)
            captured["launcher"] = self.name
            return real_get_cmd(self, environment, active_resources)

        cls.backend_exists = lambda self: exists
        cls.get_cmd = get_cmd
    runner.subprocess.check_call = check_call
    runner.subprocess.check_output = check_output
    runner.subprocess.Popen = popen
    runner.encode_world_info = encode_world_info
    runner.parse_args = parse_args
    launcher_dir = os.path.dirname(os.path.realpath(multinode_runner.__file__))

    def portable(text):
        return (text.replace(mvapich_file, "/tmp/deepspeed_mvapich_hostfile").replace(launcher_dir, "$DEEPSPEED_LAUNCHER")
                .replace(cwd, "$CWD"))

    args = ["--hostfile", os.path.join(cwd, hostfile)] + case.get("args", []) + ["train.py"] + case.get("user_args", [])
    if case.get("include"):
        args = ["--include", case["include"]] + args
    if case.get("exclude"):
        args = ["--exclude", case["exclude"]] + args
    before = dict(os.environ)
    try:
        runner.main(args)
        out["main"] = {"ok": False, "error_type": "NoLaunch", "error": "main() returned without launching"}
    except Launched:
        cmd = captured["cmd"]
        launcher = captured.get("launcher", "local")
        multi = launcher != "local"
        env = captured["env"]
        launcher_file = None
        if launcher == "mvapich" and os.path.exists(mvapich_file):
            with open(mvapich_file) as f:
                launcher_file = {"path": "/tmp/deepspeed_mvapich_hostfile", "text": f.read()}
        exports = {k: portable(v) for k, v in captured.get("exports", {}).items()}
        out["main"] = {"ok": True, "world_info": captured.get("world"), "multi_node": multi, "launcher": launcher,
                       "master_addr": captured["args"].master_addr, "exports": exports if multi else None,
                       "command": ["$PYTHON" if a == sys.executable else portable(a) for a in cmd],
                       "env_set": {k: portable(v) for k, v in env.items() if before.get(k) != v},
                       "env_unset": sorted(k for k in before if k not in env),
                       "launcher_file": launcher_file}
    except BaseException as e:  # noqa: B902
        out["main"] = error(e)
    return out


def child_main(case_file, result_file):
    with open(case_file) as f:
        case = json.load(f)
    result = run_case(case, os.getcwd())
    with open(result_file, "w") as f:
        json.dump(result, f)


def write_file(path, spec):
    """spec: text, {"text": ...}, {"bytes_hex": ...} or {"dir": true}; "mode" (octal) for either file."""
    if isinstance(spec, str):
        spec = {"text": spec}
    if spec.get("dir"):
        os.makedirs(path, exist_ok=True)
        return
    data = bytes.fromhex(spec["bytes_hex"]) if "bytes_hex" in spec else spec["text"].encode()
    with open(path, "wb") as f:
        f.write(data)
    if "mode" in spec:
        os.chmod(path, spec["mode"])


def record(python, cases):
    def one(case):
        with tempfile.TemporaryDirectory() as tmp:
            cwd, home = os.path.join(tmp, "cwd"), os.path.join(tmp, "home")
            os.makedirs(cwd)
            os.makedirs(home)
            for rel, spec in case.get("files", {}).items():
                base = home if rel.startswith("~/") else cwd
                write_file(os.path.join(base, rel[2:] if rel.startswith("~/") else rel), spec)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
            env.update(case.get("env", {}))
            return record_cli.run_child(python, __file__, case, tmp, env, cwd=cwd)
    return record_cli.map_cases(one, cases)


def main():
    record_cli.cli(__doc__, CASES, FIXTURES, "dsperf.deepspeed_runner_fixtures v1", STUB_HOSTNAME_I, record,
                   child_main, "runner case")


if __name__ == "__main__":
    main()
