"""The tiny Python program between a Python-only launcher and a native binary, as DeepSpeed's
launcher and `torch.distributed.launch` (without --use_env) start `python3 -u SCRIPT --local_rank=N
ARGS`:

    python3 -m torch.distributed.launch --nproc_per_node 2 exec_wrapper.py /path/to/dsbench world

runs `/path/to/dsbench --local_rank=N world` in each worker: the launcher's argument keeps its place
before the subcommand, which is where dsbench must accept it.
"""
import os
import sys

args = sys.argv[1:]
at = next(i for i, a in enumerate(args) if not a.startswith("--"))
program = args[at]
os.execv(program, [program] + args[:at] + args[at + 1:])
