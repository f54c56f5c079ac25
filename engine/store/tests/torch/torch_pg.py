"""torch ranks forming a gloo process group through a dsperf store server, as under torchrun's agent.

    /usr/bin/python3 torch_pg.py tcp|env HOST PORT

With TORCHELASTIC_USE_AGENT_STORE=True (set here) every torch rank, rank 0 included, is a client of
the store at HOST:PORT, which is what torchrun's agent hosts; our server plays that agent. Two ranks
init_process_group("gloo") with init_method tcp://HOST:PORT or env://, allreduce, and check the sum.
Prints "OK" and exits 0.
"""
import os
import sys
from datetime import timedelta
from multiprocessing import Process

import torch
import torch.distributed as dist

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])


def rank_main(rank):
    # As torchrun's agent exports them. torch 2.x honours the agent store only at MASTER_ADDR:MASTER_PORT
    # (rendezvous._agent_store_serves), for tcp:// too, and uses no /worker/attempt_N/ prefix.
    os.environ.update(TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                      MASTER_ADDR=host, MASTER_PORT=str(port))
    if mode == "tcp":
        dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=2,
                                timeout=timedelta(seconds=30))
    else:
        os.environ.update(RANK=str(rank), WORLD_SIZE="2")
        dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=30))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    assert t.item() == 3.0, f"rank {rank}: allreduce gave {t.item()}"
    dist.barrier()
    dist.destroy_process_group()


procs = [Process(target=rank_main, args=(r,)) for r in range(2)]
for p in procs:
    p.start()
for p in procs:
    p.join(60)
    assert p.exitcode == 0, f"a torch rank exited with {p.exitcode}"
print("OK", torch.__version__)
