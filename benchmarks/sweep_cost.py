"""What `epaudit sweep --budget 500` of one operator costs on the CPU EP, shrinker included.

Runs the command as a user does (a fresh process, the generated catalog warm in its store)
``--repeat`` times per operator and prints the median wall time, the sweep's own split
(build, run, shrink) and the shrinker's cost (failures, batches, configurations tried,
seconds), from the JSON report. The target (issue 26): under 60 s on 2 cores.

Usage: python benchmarks/sweep_cost.py [--op Conv --op AveragePool] [--budget 500] [--seed 7] [--repeat 3]
       [--python /path/to/venv/bin/python]   (the interpreter whose epaudit runs; default this one)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MATRIX = """schema_version = 1
[gate]
reference = ["CPU"]
gated = []
[providers.CPU]
name = "CPUExecutionProvider"
"""


def once(python: str, op: str, budget: int, seed: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        m = os.path.join(tmp, "m.toml")
        with open(m, "w") as fh:
            fh.write(MATRIX)
        out = os.path.join(tmp, "r.json")
        cmd = [python, "-m", "epaudit", "sweep", "--matrix", m, "--ep", "CPU", "--op", op, "--budget", str(budget),
               "--seed", str(seed), "--format", "json", "--output", out, "--repro", os.path.join(tmp, "repros")]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode not in (0, 1):
            raise SystemExit(f"sweep exited {proc.returncode}: {proc.stderr[-2000:]}")
        with open(out) as fh:
            return wall, json.load(fh)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", action="append")
    p.add_argument("--budget", type=int, default=500)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    print(f"epaudit sweep --budget {a.budget} --seed {a.seed}, CPU EP, {os.cpu_count()} cores visible, "
          f"median of {a.repeat}")
    print("| operator | wall s (median) | build s | run s | shrink s | configurations built | failures | "
          "shrinker: batches / tried |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for op in a.op or ["Conv", "AveragePool"]:
        runs = [once(a.python, op, a.budget, a.seed) for _ in range(a.repeat)]
        walls = [w for w, _ in runs]
        doc = runs[walls.index(sorted(walls)[len(walls) // 2])][1]
        s, sh = doc["seconds"], doc["shrink"]
        built = sum(o["built"] for o in doc["operators"])
        print(f"| {op} | {statistics.median(walls):.1f} | {s.get('build', 0):.1f} | {s.get('run', 0):.1f} | "
              f"{s.get('shrink', 0):.1f} | {built} | {len(doc['failures'])} | {sh['rounds']} / {sh['tried']} |")


if __name__ == "__main__":
    main()
