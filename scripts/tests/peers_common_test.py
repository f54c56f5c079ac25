#!/usr/bin/env python3
"""scripts/peers/common.py's iter_stats gives what reports/sweep/sweep_schema.cpp's computeIterStats
gives (the same keys, interpolation and sample standard deviation), so that the torch peer's p99 and
dsbench's p99 in one peers.json mean the same. The figures are those of reports/sweep/tests'
SweepStats test; torch is not needed."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import common  # noqa: E402

failures = []


def near(what, got, want, tol=1e-6):
    if not math.isclose(got, want, rel_tol=0, abs_tol=tol):
        failures.append(f"{what}: got {got}, want {want}")


s = common.iter_stats([5, 1, 4, 2, 3])
want = {"n": 5, "min_us": 1, "max_us": 5, "avg_us": 3, "p50_us": 3, "p90_us": 4.6, "p95_us": 4.8, "p99_us": 4.96,
        "p999_us": 4.996, "stdev_us": 1.5811388, "cv_pct": 52.704627}
if set(s) != set(want):
    failures.append(f"keys {sorted(s)} != {sorted(want)}")
for k, v in want.items():
    near(k, s.get(k, float("nan")), v, 1e-5)
one = common.iter_stats([7])
near("stdev of one value", one["stdev_us"], 0)
near("p99.9 of one value", one["p999_us"], 7)
empty = common.iter_stats([])
if any(v != 0 for v in empty.values()) or "p999_us" not in empty:
    failures.append(f"empty: {empty}")
# 1000 values 1..1000: p99.9 between the two largest, as numpy's default.
near("p99.9 of 1..1000", common.iter_stats(list(range(1, 1001)))["p999_us"], 999.001, 1e-9)

if failures:
    print("peers_common_test: FAILED\n  " + "\n  ".join(failures))
    sys.exit(1)
print("peers_common_test: ok")
