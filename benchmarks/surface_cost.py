"""What the surface costs: ``epaudit surface`` per EP, and coverage inside ``check``.

    python benchmarks/surface_cost.py [--reps N] [--ep CPU,WebGPU,...]

Prints, measured in one run on this machine (medians of ``--reps``):

* **registry**, per EP of the shipped matrix (``--ep``): the throw-away registry process
  cold (empty cache: onnxruntime imported, kernels and schemas read) and warm (the answer
  cached for this onnxruntime build: one interpreter start), and the EP's status.
* **check**: the CPU EP over the whole catalog, ``audit.run`` without the claims step
  (probes, classification, gate) against the claims step alone (:func:`epaudit.gate.claims.attach`:
  registry, layers, claim findings, coverage) with a warm cache, and their ratio.

Timings are printed, never asserted. Source the provider environments first
(``. /work/envs/webgpu/export.sh`` ...) to include the real EPs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def _median(xs):
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ep", default=None, help="comma-separated aliases (default: all in the shipped matrix)")
    args = ap.parse_args()

    from epaudit import audit
    from epaudit.catalog import FEATURES
    from epaudit.gate import claims
    from epaudit.matrix.load import load
    from epaudit.surface import kernels as surface

    matrix = load(None)
    aliases = args.ep.split(",") if args.ep else list(matrix.providers)
    print(f"registry query per EP (median of {args.reps}; cold = empty cache, warm = cached answer)")
    for alias in aliases:
        p = matrix.providers[alias]
        cold, warm = [], []
        reg = None
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as cache:
                surface._memo.clear()
                t0 = time.perf_counter()
                reg = surface.fetch(p, cache)
                cold.append(time.perf_counter() - t0)
                surface._memo.clear()
                t0 = time.perf_counter()
                surface.fetch(p, cache)
                warm.append(time.perf_counter() - t0)
        what = f"{len(reg.kernels)} kernels" if reg.status == "kernels" else f"{reg.status}: {reg.reason[:90]}"
        print(f"  {alias:9s} cold {_median(cold):6.3f} s  warm {_median(warm):6.3f} s  ({what})")

    cpu = matrix.providers["CPU"]
    real_attach = claims.attach
    runs, extras = [], []
    with tempfile.TemporaryDirectory() as cache:
        surface.fetch(cpu, surface.cache_dir(cache))  # warm the disk cache once
        for _ in range(args.reps):
            surface._memo.clear()
            kept = {}

            def no_claims(result, *a, **kw):
                kept["args"] = (result, a, kw)
                return result

            audit.attach = no_claims
            t0 = time.perf_counter()
            audit.run(matrix, providers=[cpu], features=FEATURES)
            runs.append(time.perf_counter() - t0)
            audit.attach = real_attach
            result, a, kw = kept["args"]
            kw = dict(kw, cache_base=cache)
            t0 = time.perf_counter()
            done = real_attach(result, *a, **kw)
            extras.append(time.perf_counter() - t0)
    cov = done.coverage["CPU"]
    print(f"check --ep CPU over {len(FEATURES)} features: run {_median(runs):.3f} s, claims + coverage "
          f"{_median(extras):.3f} s (warm cache) = {100 * _median(extras) / _median(runs):.1f}% of the run; "
          f"coverage {cov['covered']}/{cov['items']} items")


if __name__ == "__main__":
    main()
