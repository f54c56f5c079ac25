#!/usr/bin/env python3
# Run from the repository root: python3 reports/tests/data/gen_fleet16.py (deterministic: seed 26).
# Generates reports/tests/data/fleet16.json: 16 hosts, one rank each; node07 (rank 6) slow NIC,
# the link node03 (rank 2) <-> node11 (rank 10) unreachable, node14 (rank 13) frozen in "links".
import json, random
random.seed(26)
N = 16
host = lambda r: f"node{r+1:02d}"
SLOW, A, B, FROZEN = 6, 2, 10, 13
ranks = []
for r in range(N):
    fr = r == FROZEN
    ranks.append({"rank": r, "host": host(r), "local_rank": 0, "probe_port": 29600,
                  "ifaces": [{"name": "eth0", "addr": f"10.79.0.{r+2}", "prefix_len": 24, "mtu": 1500}],
                  "nccl_socket_ifname": "", "gloo_socket_ifname": "",
                  "affinity_cpus": 2, "cpu_quota": None, "cpu_quota_file": "", "joined": True, "frozen": fr,
                  "exited": False, "reported": not fr, "last_stage": "links" if fr else "done",
                  "silent_for_s": 7.2 if fr else 0.0})
reach = []
for r in range(N):
    if r == FROZEN: continue
    fails = []
    peers = [p for p in range(N) if p != r]
    if r in (A, B):
        o = B if r == A else A
        fails.append({"from": r, "to": o, "from_iface": "eth0", "to_iface": "eth0", "to_addr": f"10.79.0.{o+2}",
                      "error": "timed out after 2.0 s", "timed_out": True, "ms": 2001.4})
    reach.append({"rank": r, "probes": len(peers), "ok": len(peers) - len(fails), "failures": fails})
# Plan: ring in two rounds, then 4 random matchings; rank 13 froze during round 2.
rounds = [[(i, i + 1) for i in range(0, N, 2)], [(i, (i + 1) % N) for i in range(1, N, 2)]]
for _ in range(4):
    p = list(range(N)); random.shuffle(p)
    rounds.append([tuple(sorted(p[i:i+2])) for i in range(0, N, 2)])
pairs = []
def pair(a, b, rnd, stage):
    a, b = min(a, b), max(a, b)
    bw = round(random.uniform(1.78, 2.02), 3); lat = round(random.uniform(38, 52), 1)
    out, err = "ok", ""
    if FROZEN in (a, b) and rnd >= 2:
        out, err, bw, lat = ("timeout", f"no answer from {host(FROZEN)} (rank {FROZEN}) within the pair deadline of 10 s", None, None) if rnd == 2 else ("skipped", f"{host(FROZEN)} (rank {FROZEN}) is frozen", None, None)
    elif {a, b} == {A, B}:
        out, err, bw, lat = "failed", f"cannot connect to {host(B)} (10.79.0.{B+2}:29600): timed out after 2.0 s", None, None
    elif SLOW in (a, b):
        bw = round(random.uniform(0.027, 0.034), 4); lat = round(random.uniform(310, 420), 1)
    pairs.append({"a": a, "b": b, "round": rnd, "stage": stage, "outcome": out, "latency_us": lat,
                  "bandwidth_gbps": bw, "error": err})
for i, rd in enumerate(rounds):
    for a, b in rd: pair(a, b, i, "links")
# The link 2-10 may not have been in the plan: make sure it is (confirm round retests it).
if not any({p["a"], p["b"]} == {A, B} for p in pairs):
    pair(A, B, len(rounds), "confirm")
slowpeers = sorted({p["b"] if p["a"] == SLOW else p["a"] for p in pairs if SLOW in (p["a"], p["b"])})
pair(SLOW, 0, len(rounds), "confirm"); pair(SLOW, 15, len(rounds), "confirm")
pair(A, 5, len(rounds), "confirm"); pair(B, 8, len(rounds), "confirm")
nrounds = max(p["round"] for p in pairs) + 1
ok = sorted(p["bandwidth_gbps"] for p in pairs if p["outcome"] == "ok" and SLOW not in (p["a"], p["b"]))
med = ok[len(ok)//2]
mad = sorted(abs(x - med) for x in ok)[len(ok)//2]
lats = sorted(p["latency_us"] for p in pairs if p["outcome"] == "ok" and SLOW not in (p["a"], p["b"]))
lmed = lats[len(lats)//2]; lmad = sorted(abs(x - lmed) for x in lats)[len(lats)//2]
slowp = [p for p in pairs if SLOW in (p["a"], p["b"]) and p["outcome"] == "ok"]
ev_slow = []
for p in slowp:
    o = p["b"] if p["a"] == SLOW else p["a"]
    ev_slow.append({"kind": "link_slow", "stage": p["stage"],
                    "text": f"bandwidth with {host(o)} (rank {o}) {p['bandwidth_gbps']} GB/s, fleet median {med} GB/s",
                    "peers": [o], "measured": p["bandwidth_gbps"], "fleet_median": med})
hosts = []
for r in range(N):
    h = {"host": host(r), "ranks": [r], "state": "healthy", "evidence": [], "nccl_socket_ifname": "eth0"}
    if r == SLOW:
        h["state"] = "suspect"; h["evidence"] = ev_slow
    if r == FROZEN:
        h["state"] = "suspect"
        h["evidence"] = [{"kind": "frozen", "stage": "links",
                          "text": f"{host(r)} (rank {r}) sent no heartbeat for 7.2 s; its last stage was links",
                          "peers": [], "measured": 7.2, "fleet_median": None}]
    hosts.append(h)
links = [{"host_a": host(A), "host_b": host(B), "rank_a": A, "rank_b": B, "evidence": [
    {"kind": "unreachable", "stage": "reachability",
     "text": f"{host(A)} (rank {A}) cannot open a TCP connection to {host(B)} (10.79.0.{B+2}) on eth0: timed out after 2.0 s; both reach every other peer",
     "peers": [A, B], "measured": 2.0014, "fleet_median": None},
    {"kind": "link_failed", "stage": "links",
     "text": f"the link test {host(A)} - {host(B)} failed: cannot connect, timed out after 2.0 s",
     "peers": [A, B], "measured": None, "fleet_median": None}]}]
doc = {"schema": "dsperf.fleet", "schema_version": "1.1",
       "input": {"world_size": N, "ranks": ranks, "reach": reach, "pairs": pairs, "bisect": [],
                 "connect_timeout_s": 2.0, "min_link_gbps": 0.0, "slow_link_ms": 0.0, "standalone": False},
       "judgement": {"hosts": hosts, "links": links, "median_bandwidth_gbps": med, "mad_bandwidth_gbps": round(mad, 4),
                     "median_latency_us": lmed, "mad_latency_us": round(lmad, 2), "job_socket_ifname": "eth0",
                     "notes": [f"{host(FROZEN)} (rank {FROZEN}) froze during the link tests: its later pairs were skipped."],
                     "retest": []},
       "stats": {"rounds": nrounds, "pairs": len(pairs), "messages": 16*15 + len(pairs)*18,
                 "stage_seconds": {"join": 0.41, "local_checks": 1.12, "reachability": 2.31, "links": 14.6, "confirm": 1.9, "report": 0.05}}}
json.dump(doc, open("reports/tests/data/fleet16.json", "w"), indent=1)
print(nrounds, len(pairs), med, mad)
