"""Re-records the torch 2.x wire fixtures of engine/store/tests/fixtures/ (test support only).

    PY=/path/to/venv-with-torch2/bin/python3
    $PY record_fixtures.py client engine/store/tests/fixtures/torch2_client.txt
    $PY record_fixtures.py server PORT_FILE      (then point a dsperf client at it: see below)

`client`: a torch TCPStore server and a torch client, with wire_tap.py between them; the client runs
the c10d operations a torch rank uses. store_unit_tests (Torch2Wire.*) replays the client's bytes to
our server and expects the torch server's replies byte for byte.

`server`: a torch TCPStore server behind wire_tap.py; the tap's port is written to PORT_FILE, and the
tap appends to PORT_FILE.txt. Run `Torch2Wire.RecordOurClient` (DS_RECORD_PORT=<port>) against it to
record what the torch server answers our client (torch2_our_client.txt).
"""
import os
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
mode, out = sys.argv[1], sys.argv[2]


def start_tap(target_port, out_file):
    tap = subprocess.Popen([sys.executable, os.path.join(HERE, "wire_tap.py"), "0", str(target_port), out_file],
                           stdout=subprocess.PIPE, text=True)
    line = tap.stdout.readline()
    assert line.startswith("TAP "), line
    return tap, int(line.split()[1])


server = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=30), wait_for_workers=False)
if os.path.exists(out):
    os.remove(out)

if mode == "server":
    server.set("from_torch", "hello")
    tap, port = start_tap(server.port, out + ".txt")
    with open(out, "w") as f:
        f.write(f"{port}\n")
    print("PORT", port, "torch", torch.__version__, flush=True)
    time.sleep(120)
    tap.kill()
    sys.exit(0)

tap, port = start_tap(server.port, out)
with open(out, "a") as f:
    f.write(f"# torch {torch.__version__}: a torch TCPStore client and server (record_fixtures.py client)\n")
c = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10), wait_for_workers=False)
c.set("a", "1")
assert c.get("a") == b"1"
assert c.add("cnt", 2) == 2 and c.add("cnt", 3) == 5
assert c.compare_set("cas", "", "x") == b"x"
assert c.compare_set("cas", "wrong", "y") == b"x"
assert c.compare_set("cas", "x", "y") == b"y"
assert c.check(["a", "cnt"]) and not c.check(["a", "missing"])
c.wait(["a", "cnt"])
try:
    c.wait(["never_set"], timedelta(milliseconds=200))
    raise AssertionError("a wait for a missing key returned")
except Exception as e:  # DistStoreError (a RuntimeError) in 2.x
    assert "imeout" in str(e) or "timed out" in str(e), str(e)
assert c.num_keys() == 3, c.num_keys()
c.set("tmp", "")
assert c.delete_key("tmp") and not c.delete_key("tmp")
c.append("app", "ab")
c.append("app", "cd")
assert c.get("app") == b"abcd"
c.multi_set(["m1", "m2"], ["1", "22"])
assert c.multi_get(["m1", "m2"]) == [b"1", b"22"]
del c
time.sleep(0.5)
tap.kill()
print("recorded", out, "torch", torch.__version__)
