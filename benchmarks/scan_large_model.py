"""What `epaudit scan` costs on a large model with external data, measured in one run.

    python benchmarks/scan_large_model.py [--nodes 1000] [--layers 830] [--embed-gib 8]

First (issue 25's target: a 1,000-node model with node probes and ``--whole`` on the CPU
EP in under 60 s on 2 cores, peak RSS under 500 MiB): an opset-23 decoder
(``tests/scan_models.py`` ``opset23_decoder``, 12 nodes a layer, ai.onnx only so
onnx.reference checks the CPU EP too) of about ``--nodes`` nodes, weights in an external
file, scanned by the real CLI ``epaudit scan MODEL --ep CPU --whole`` in a subprocess: wall
time, probes run, node coverage, the whole-model result, and the peak RSS of the largest
process of the run (the scan, a probe worker or a whole-model child). Then:

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


#: Runs a command and prints its wall time, exit code, stdout and the largest child's
#: ru_maxrss (KiB): from a small launcher, so the maximum is the scan's own processes'.
LAUNCHER = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(json.dumps({'wall': time.perf_counter() - t, 'rc': r.returncode, 'out': r.stdout, 'err': r.stderr[-400:], "
            "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")


def thousand(directory: Path, nodes: int) -> None:
    """The 1,000-node measurement (module doc)."""
    import onnx
    import scan_models as sm

    layers = max(1, (nodes - 1) // 12)
    model = sm.opset23_decoder(layers=layers, heads=2, kv_heads=2, head=32)
    path = directory / "thousand.onnx"
    sm.save_external(model, path, "thousand.onnx.data")
    count = len(onnx.load(str(path), load_external_data=False).graph.node)
    exe = str(Path(sys.executable).with_name("epaudit"))
    # The generated catalog is built once per machine (its store, not timed here: the first
    # run of any command builds it); the probe cache is what a repeated scan reuses.
    subprocess.run([exe, "features", "--format", "json"], capture_output=True, check=False)
    for label, extra in (("--no-cache", ["--no-cache"]), ("probe cache warm", []), ("probe cache warm", [])):
        run = json.loads(subprocess.run([sys.executable, "-c", LAUNCHER, exe, "scan", str(path), "--ep", "CPU",
                                         "--whole", "--format", "json", *extra], capture_output=True, text=True,
                                        check=True).stdout)
        doc = json.loads(run["out"]) if run["out"].startswith("{") else None
        if doc is None:
            print(f"1,000-node scan failed (exit {run['rc']}): {run['err']}")
            return
        (m,) = doc["models"]
        (e,) = m["eps"]
        probes = sum(1 for f in m["used"] if f.startswith("node."))
        print(f"1,000-node model ({count} nodes, {layers} layers, opset 23) node probes + --whole on CPU, {label}: "
              f"{run['wall']:.1f} s wall, exit {run['rc']}, {len(m['node_configs'])} distinct configurations, "
              f"{probes} node-config probes, {m['probed_nodes']} of {m['compute_nodes']} compute nodes probed, whole "
              f"model {e['whole']['status']} ({e['whole']['reference']}); peak RSS of the largest process "
              f"{run['rss'] / 1024:.0f} MiB; verdict: {e['verdict_text']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=830)
    ap.add_argument("--embed-gib", type=float, default=8.0)
    ap.add_argument("--only-thousand", action="store_true", help="only the 1,000-node measurement")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="epaudit-scan-bench-") as tmp:
        thousand(Path(tmp), args.nodes)
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        if args.only_thousand:
            return
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
