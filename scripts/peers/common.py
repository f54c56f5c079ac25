"""What the torch peers share: rank discovery under mpirun/dsrun/torchrun, the rank's placement as
dsperf records it (reports/schema/placement.h), and writing a dsperf.sweep / dsperf.train JSON that
dsreport and ds_peers_report read. No torch import here, so that --help works without it."""
import json
import os
import socket
import sys
import time


def world():
    """(rank, world size, local rank) from torchrun/dsrun (RANK, WORLD_SIZE) or Open MPI."""
    for r, w, l in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w]), int(os.environ.get(l, os.environ[r]))
    sys.exit("torch peer: no RANK/WORLD_SIZE (or OMPI_COMM_WORLD_*) in the environment; start it with "
             "mpirun -np 2 or dsrun --nproc-per-node 2.")


def cpu_list(cpus):
    cpus = sorted(set(cpus))
    parts, i = [], 0
    while i < len(cpus):
        k = i
        while k + 1 < len(cpus) and cpus[k + 1] == cpus[k] + 1:
            k += 1
        parts.append(str(cpus[i]) if k == i else f"{cpus[i]}-{cpus[k]}")
        i = k + 1
    return ",".join(parts)


def placement():
    cpus = sorted(os.sched_getaffinity(0))
    p = {"cpus": cpu_list(cpus), "cpu_count": len(cpus), "online_cpus": os.sysconf("SC_NPROCESSORS_ONLN")}
    try:
        with open("/proc/loadavg") as f:
            fields = f.read().split()
        p["load1"] = float(fields[0])
        p["runnable"] = int(fields[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        pass
    return p


def iso_now():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def rank_record(rank, local_rank):
    return {"rank": rank, "local_rank": local_rank, "node_rank": 0, "host": socket.gethostname(),
            "pid": os.getpid(), "device": "cpu", "placement": placement()}


def iter_stats(us):
    """The per-iteration statistics of reports/sweep/sweep_schema.cpp's computeIterStats, key for key:
    percentiles interpolated linearly between the closest ranks (reports/stats.h's quantileSorted,
    numpy's default), the sample standard deviation (n - 1), cv = stdev / avg in percent; all zeros
    for no values."""
    keys = ("n", "min_us", "max_us", "avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "stdev_us",
            "cv_pct")
    v = sorted(us)
    n = len(v)
    if n == 0:
        return {k: 0 for k in keys}

    def quantile(q):
        pos = min(max(q, 0.0), 1.0) * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    avg = sum(v) / n
    sd = (sum((x - avg) ** 2 for x in v) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return {"n": n, "min_us": v[0], "max_us": v[-1], "avg_us": avg, "p50_us": quantile(0.50),
            "p90_us": quantile(0.90), "p95_us": quantile(0.95), "p99_us": quantile(0.99),
            "p999_us": quantile(0.999), "stdev_us": sd, "cv_pct": 100 * sd / avg if avg > 0 else 0}


def write_json(path, doc):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
