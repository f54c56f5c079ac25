"""Runs torchrun or torch.distributed.launch from Debian's python3-torch 1.13 on Python 3.11.

Test support only, never product code. torch 1.13's Std.from_str("0") returns None under Python
3.11 (iterating an IntFlag no longer yields its zero member NONE), so torchrun dies with
"AttributeError: 'NoneType' object has no attribute 'get'" before it starts a worker. This parses the
--redirects/--tee value itself, then runs the module as `python3 -m` would:

    /usr/bin/python3 torch_launcher_shim.py run    --nproc_per_node 2 --no_python dsbench world
    /usr/bin/python3 torch_launcher_shim.py launch --nproc_per_node 2 --no_python dsbench world

Remove it when the CI's torch is fixed (torch >= 2.0 parses the value correctly).
"""
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


if api.Std.from_str("0") is None:  # only where the bug is
    api.Std.from_str = staticmethod(_from_str)

if len(sys.argv) < 2 or sys.argv[1] not in ("run", "launch"):
    sys.exit("usage: torch_launcher_shim.py run|launch [torchrun or torch.distributed.launch arguments]")
module = "torch.distributed." + sys.argv[1]
sys.argv = [module] + sys.argv[2:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
