"""A torch TCPStore client against a dsperf store server: the c10d operations a torch rank uses.

    /usr/bin/python3 torch_client.py HOST PORT

The dsperf side set "from_dsperf" = "hi" before; this sets "from_torch" = "hello" for it to read.
Prints "OK <torch version>" and exits 0 when every check holds; an assertion names the one that failed.
"""
import sys
import time
from datetime import timedelta
from multiprocessing import Process

import torch
import torch.distributed as dist

host, port = sys.argv[1], int(sys.argv[2])


def client(timeout_s=10):
    return dist.TCPStore(host, port, None, False, timedelta(seconds=timeout_s), wait_for_workers=False)


s = client()
assert s.get("from_dsperf") == b"hi", "a key our client set is not visible to torch (key prefix?)"
s.set("a", "1")
assert s.get("a") == b"1"
assert s.add("cnt", 2) == 2 and s.add("cnt", 3) == 5
assert s.get("cnt") == b"5", "add keeps the counter as decimal text, as c10d does"
assert s.compare_set("cas", "", "x") == b"x", "compare_set of a missing key with expected '' sets it"
assert s.compare_set("cas", "wrong", "y") == b"x", "compare_set with the wrong expected value changes nothing"
assert s.compare_set("cas", "x", "y") == b"y"
# (torch 1.13's Python TCPStore has no check(); our client tests CHECK against torch's server.)
s.wait(["a", "cnt"])
t0 = time.monotonic()
try:
    s.wait(["never_set"], timedelta(milliseconds=300))
    raise AssertionError("wait for a key nobody sets returned")
except RuntimeError as e:  # torch's client times the wait out itself
    assert "imeout" in str(e) or "timed out" in str(e), str(e)
assert time.monotonic() - t0 < 5
s2 = client()  # the timed-out wait must not have broken the server for others
assert s2.get("a") == b"1"
before = s2.num_keys()
s2.set("tmp", "")
assert s2.num_keys() == before + 1
assert s2.delete_key("tmp") and not s2.delete_key("tmp")
assert s2.num_keys() == before


def barrier_rank(n):
    st = client()
    if st.add("barrier/arrived", 1) == n:
        st.set("barrier/done", "1")
    st.wait(["barrier/done"])


# A barrier as torch's _store_based_barrier does it: 4 processes, add then wait.
procs = [Process(target=barrier_rank, args=(4,)) for _ in range(4)]
for p in procs:
    p.start()
for p in procs:
    p.join(30)
    assert p.exitcode == 0, f"a barrier rank exited with {p.exitcode}"
assert s.get("barrier/arrived") == b"4"

s.set("from_torch", "hello")
print("OK", torch.__version__)
