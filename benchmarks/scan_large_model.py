"""What `epaudit scan` costs on a large model with external data, measured in one run.

    python benchmarks/scan_large_model.py [--layers 830] [--embed-gib 8]

Builds a GenAI-builder-style decoder (``tests/scan_models.py``) of ``--layers`` layers
(12 nodes each: about 10,000 nodes at 830), its weights in an external file, plus an
embedding table of ``--embed-gib`` GiB in a *sparse* external file (no disk used; a
reader that touched it would page it in). Then prints:

* **read + map**: ``epaudit.scan.model.read`` and the feature mapping, in process
  (median of 3), with the node count;
* **node-config plan**: building the node-config probes of the one distinct GQA
  configuration all layers share;
* **scan, end to end**: the real CLI ``epaudit scan MODEL --ep CPU`` in a subprocess, with
  a warm probe cache (every run after the first) and with ``--no-cache``, its wall time,
  how many probes it ran, and its peak RSS (``ru_maxrss`` of the child) next to the size of
  the external data it did not read.

Timings are printed, never asserted.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def build(directory: Path, layers: int, embed_gib: float) -> Path:
    import onnx
    import scan_models as sm
    from onnx import TensorProto

    model = sm.genai_decoder(layers=layers, heads=2, kv_heads=1, head=64, vocab=16)
    path = directory / "large.onnx"
    sm.save_external(model, path, "large.onnx.data")
    model = onnx.load(str(path), load_external_data=False)
    # An embedding table the size of a real LLM's, in a sparse file: its bytes exist only
    # as a length, so reading them would show up as RSS (and time), not as disk.
    rows = int(embed_gib * 2**30 / (2 * 4096))
    big = directory / "embed.bin"
    with open(big, "wb") as fh:
        fh.truncate(rows * 4096 * 2)
    table = onnx.TensorProto(name="model.embed_tokens.big", data_type=TensorProto.FLOAT16, dims=[rows, 4096])
    table.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", "embed.bin"), ("offset", "0"), ("length", str(rows * 4096 * 2))):
        table.external_data.add(key=k, value=v)
    model.graph.initializer.append(table)
    onnx.save(model, str(path))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=830)
    ap.add_argument("--embed-gib", type=float, default=8.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="epaudit-scan-bench-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        path = build(d, args.layers, args.embed_gib)
        external = sum(p.stat().st_size for p in d.iterdir() if p.name != "large.onnx")
        print(f"model: {path.stat().st_size / 2**20:.1f} MiB .onnx, {external / 2**30:.2f} GiB external data "
              f"(built in {time.perf_counter() - t0:.1f} s)")

        from epaudit.catalog import FEATURES
        from epaudit.scan import analyse
        from epaudit.scan.model import read

        runs, plans = [], []
        for _ in range(3):
            t = time.perf_counter()
            m = read(path)
            used, groups, uncovered = analyse(m, FEATURES, node_probes=False)
            runs.append(time.perf_counter() - t)
            t = time.perf_counter()
            from epaudit.scan.nodeprobe import plan
            groups = plan(list(m.nodes))
            plans.append(time.perf_counter() - t)
        print(f"read + map: {statistics.median(runs):.2f} s median of 3 ({min(runs):.2f}-{max(runs):.2f}); "
              f"{len(m.nodes)} nodes, {len(used)} catalog features used, {len(uncovered)} uncovered items")
        print(f"node-config plan: {statistics.median(plans):.2f} s; {len(groups)} distinct configuration(s), "
              f"{sum(len(g.features) for g in groups)} probes")

        # Memory of reading and mapping alone, in a fresh process (onnx, onnxruntime's
        # contrib schemas and the node list; no probe workers).
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child
        # of this (large) process would report this process's peak.
        code = ("import sys; from epaudit.catalog import FEATURES; from epaudit.scan import analyse; "
                "from epaudit.scan.model import read; m = read(sys.argv[1]); analyse(m, FEATURES); "
                "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))")
        rss = int(subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                                 check=True).stdout.split()[-1])
        print(f"read + map + node-config plan in a fresh process: peak RSS {rss / 1024:.0f} MiB "
              f"(external data {external / 2**30:.2f} GiB, not read)")

        exe = str(Path(sys.executable).with_name("epaudit"))
        env = dict(os.environ, EPAUDIT_CACHE_DIR=str(d / "cache"))
        # Each CLI run from a small launcher process, whose ru_maxrss of children is then
        # the scan's own largest process (the scan or a probe worker), not ours.
        launcher = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
                    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
                    "print(json.dumps({'wall': time.perf_counter() - t, 'rc': r.returncode, 'out': r.stdout, "
                    "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")
        for label, extra in (("--no-cache", ["--no-cache"]), ("cache cold", []), ("cache warm", [])):
            run = json.loads(subprocess.run([sys.executable, "-c", launcher, exe, "scan", str(path), "--ep", "CPU",
                                             "--format", "json", *extra], capture_output=True, text=True,
                                            env=env, check=True).stdout)
            doc = json.loads(run["out"])
            probes = len(doc["models"][0]["used"])
            print(f"scan {label}: {run['wall']:.2f} s wall, exit {run['rc']}, {probes} probes on CPU; "
                  f"peak RSS of its largest process (scan or probe worker) {run['rss'] / 1024:.0f} MiB")
        print(f"load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
