"""A torch TCPStore server for dsperf's client to talk to.

    /usr/bin/python3 torch_server.py

Prints "PORT <n>" once it listens, then serves for 300 s or until the test kills it.
"""
import time
from datetime import timedelta

import torch.distributed as dist

store = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=60), wait_for_workers=False)
store.set("from_torch", "hello")
print("PORT", store.port, flush=True)
time.sleep(300)
