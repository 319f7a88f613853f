"""The generated catalog measured: counts, drops by reason, build from nothing, warm start.

    python benchmarks/generated_catalog.py [--floor-reps N] [--no-floor]

Prints (numbers from this run, on this machine):

* the catalog from a **fresh cache directory**: wall time of the first
  ``epaudit features`` (corpus generated in one child, every case derived in a pool of
  one child per core), probes, operators with at least one probe, probes per kind
  (ablated input / ablated attribute / variation / operator itself) and per opset stamp, every drop by
  reason (``epaudit/catalog/corpus/derive.py`` REASONS);
* the **warm start**: wall time of a second ``epaudit features`` and whether importing
  the catalog imported onnx (it must not: the manifest is JSON);
* then ``benchmarks/floor_vs_check.py`` over hand-written plus generated features
  (``--floor-reps`` repetitions, scales 1 and 2): check vs the ORT floor, marginal cost
  per probe, parent peak RSS.

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def _features(env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([PY, "-m", "epaudit", "features"], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise SystemExit(f"epaudit features exited {proc.returncode}: {proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--floor-reps", type=int, default=3)
    ap.add_argument("--no-floor", action="store_true", help="skip floor_vs_check.py")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="epaudit-gen-bench-"))
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   EPAUDIT_CACHE_DIR=str(tmp), EPAUDIT_GENERATED="1")
        cold = _features(env)
        warm = _features(env)
        probe = subprocess.run([PY, "-c", "import sys, epaudit.catalog as c; "
                                "print(len(c.FEATURES), 'onnx' in sys.modules)"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        n_all, onnx_imported = probe.stdout.split()
        (manifest,) = (tmp / "generated").glob("manifest-*.json")
        doc = json.loads(manifest.read_text())
        feats = doc["features"]
        ops = collections.Counter(f["op_type"] for f in feats)
        kinds = collections.Counter(f["kind"] for f in feats)
        stamps = collections.Counter(f["opset"] for f in feats)
        print(f"# generated catalog (onnx corpus: {doc['cases']} single-node cases; "
              f"{os.cpu_count()} cores; Python {sys.version.split()[0]})")
        print()
        print("| measure | value |")
        print("|---|---:|")
        print(f"| build from nothing (first `epaudit features`, fresh cache) | {cold:.1f} s |")
        print(f"| of which in build() (corpus generation + derivation) | {doc['seconds']:.1f} s |")
        print(f"| warm start (second `epaudit features`) | {warm:.2f} s |")
        print(f"| catalog import imports onnx | {onnx_imported} |")
        print(f"| features in the catalog (hand-written + generated) | {n_all} |")
        print(f"| generated probes | {len(feats)} |")
        print(f"| ONNX operators with >= 1 generated probe | {len(ops)} |")
        print(f"| ablated input / ablated attribute / variation / operator itself | {kinds['input']} / "
              f"{kinds['attribute']} / {kinds['vary']} / {kinds['itself']} |")
        decisive = {f["op_type"] for f in feats if f["kind"] != "itself"}
        print(f"| ONNX operators with >= 1 ablation or variation probe | {len(decisive)} |")
        print(f"| ONNX operators whose only probes are the operator itself | {len(set(ops) - decisive)} |")
        print(f"| probe file | {sum(p.stat().st_size for p in (tmp / 'generated').glob('probes-*')) / 2**20:.1f} MiB |")
        print()
        print("| dropped: reason | count |")
        print("|---|---:|")
        for reason, count in sorted(doc["drops"].items(), key=lambda kv: -kv[1]):
            print(f"| {reason} | {count} |")
        print()
        print("opset stamps: " + ", ".join(f"{k}: {v}" for k, v in sorted(stamps.items())))
        print("probes per operator: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
        sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.no_floor:
        print()
        subprocess.run([PY, str(HERE / "floor_vs_check.py"), "--reps", str(args.floor_reps), "--scales", "1,2"],
                       cwd=ROOT, env=dict(os.environ, EPAUDIT_GENERATED="1"), check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
