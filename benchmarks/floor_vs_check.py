"""What `epaudit check` costs over ONNX Runtime itself, measured in one run.

    python benchmarks/floor_vs_check.py [--reps N] [--scales 1,4,16]

Prints, from runs interleaved on this machine (medians of ``--reps``):

* **floor**: one Python process that imports onnxruntime and, for every probe of the
  default catalog, creates the subject and control sessions on the CPU EP and runs each
  once (models prebuilt and written to a file before timing: building them is not in the
  floor), each session with its own intra-op pool as ORT makes it by default. **shared
  floor**: the same with one global pool of the same size for every session, as the
  worker runs them (``epaudit/worker/ortinfo.py``): the floor for what epaudit itself
  adds. ``interp`` is one bare interpreter start (``python -c pass``).
* **check**: ``epaudit check --ep CPU`` (the real CLI, started as the console script
  starts it; exit status and report as usual) with its probe cache warm, as on every run
  after the first for a given epaudit and catalog, and the ratio ``check / (floor +
  interp)`` (issue 7 target: <= 1.5). Also ``--no-cache``: every probe built (onnx
  imported, models serialized, references computed), the cost of a first run.
  Bytecode is compiled first (``compileall``), as ``pip install`` does: a checkout run
  with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile epaudit on every start.
* **scaling**: the catalog replicated 1x, 4x, 16x under synthetic feature ids; the
  marginal cost per probe (subject + control) of floor and check between scales, which
  should stay flat.
* **parallel EPs**: ``check`` with two EPs (CPU and a second alias of the CPU EP) at
  ``--jobs 1`` and ``--jobs 2``, against one EP: with two or more cores the two-EP run
  at ``--jobs 2`` costs about one EP, not two.
* **memory**: peak RSS of the parent ``check`` process (and of its largest worker).

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def _write_floor_cases(path: Path, ids: set[str] | None = None) -> int:
    """Prebuild every probe of the default catalog that ``check --ep CPU`` runs (not the
    cells the shipped matrix declares ``skip`` on CPU: check never runs them, and one of
    them aborts ORT 1.31.1 in-process, which would end the floor); write (model, feeds,
    outputs) per case."""
    sys.path.insert(0, str(ROOT))
    from epaudit.catalog import FEATURES
    from epaudit.matrix.load import load

    matrix = load(None)
    run = [f for f in FEATURES
           if ((d := matrix.declaration(f.id, "CPU")) is None or d.status != "skip") and (ids is None or f.id in ids)]
    cases = []
    for f in run:
        p = f.build()
        for c in (p.subject, p.control):
            cases.append((c.model, dict(c.feeds), tuple(c.outputs)))
    path.write_bytes(pickle.dumps(cases))
    return len(run)


def _wall(cmd: list[str], env: dict | None = None, ok=(0,), cwd: Path = ROOT) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.decode()[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (median taken)")
    ap.add_argument("--scales", default="1,4,16", help="catalog replication factors")
    ap.add_argument("--ids", type=Path, help="only these feature ids (one per line; those of another "
                    "version's catalog, to compare versions on the same probes); scale 1 only")
    args = ap.parse_args()
    scales = [int(s) for s in args.scales.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="epaudit-bench-"))
    try:
        return _measure(args, scales, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(args, scales: list[int], tmp: Path) -> int:
    cases = tmp / "cases.pkl"
    ids = set(args.ids.read_text().split()) if args.ids else None
    if ids is not None:
        sys.path.insert(0, str(ROOT))
        from epaudit.catalog import BY_ID

        ids &= set(BY_ID)
        scales[:] = [1]
        print(f"{len(ids)} of the given ids are in this catalog; scale 1 only")
    n = _write_floor_cases(cases, ids)
    only = [a for fid in sorted(ids) for a in ("--feature", fid)] if ids is not None else []
    rss_file = tmp / "rss"
    two = tmp / "two.toml"
    two.write_text(textwrap.dedent('''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.CPU2]
        name = "CPUExecutionProvider"
        '''))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               EPAUDIT_CACHE_DIR=str(tmp / "cache"), EPAUDIT_BENCH_REPLICAS=str(tmp))
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "epaudit")], check=True,
                   stdout=subprocess.DEVNULL)

    def check(k: int, *extra: str) -> float:
        # One probe cache per scale (the generated store, under EPAUDIT_CACHE_DIR, is shared).
        # Run outside the checkout: there `check` reads ./capabilities.toml, not the packaged
        # matrix _check.py extends with the replicas' declarations, and every replica of a
        # cell declared `skip` on CPU (32 features: 480 probes at 16x, 45 of them crashes
        # that restart the worker) was probed where the floor leaves the originals out.
        # One EP exits 0, as `check --ep CPU` on the packaged matrix does.
        # Each replica is declared with its original's resolved cells (_check.py), so the
        # run at k x exits as the run at 1 x does.
        two_eps = "--matrix" in extra
        return _wall([PY, str(HERE / "_check.py"), str(k), str(rss_file), "--", "check",
                      "--cache-dir", str(tmp / f"probes-x{k}"), *extra], env=env,
                     ok=(0, 1) if two_eps else (0,), cwd=tmp)

    def floor(k: int, *mode: str) -> float:
        return _wall([PY, str(HERE / "_floor.py"), str(cases), str(k), *mode], env=env)

    # Warm the page cache, ORT's first-use costs and the probe cache before timing.
    floor(1)
    for k in scales:  # each scale's probe cache written once, as a first run writes it
        check(k, "--ep", "CPU", *only)

    t: dict[str, list[float]] = {}
    rss: dict[int, list[tuple[int, int]]] = {}
    for _ in range(args.reps):
        t.setdefault("interp", []).append(_wall([PY, "-c", "pass"]))
        for k in scales:
            t.setdefault(f"floor{k}", []).append(floor(k))
            t.setdefault(f"shared{k}", []).append(floor(k, "shared"))
            t.setdefault(f"check{k}", []).append(check(k, "--ep", "CPU", *only))
            me, kids = map(int, rss_file.read_text().split())
            rss.setdefault(k, []).append((me, kids))
        t.setdefault("cold", []).append(check(1, "--ep", "CPU", "--no-cache", *only))
        t.setdefault("two_j1", []).append(check(1, "--matrix", str(two), "--jobs", "1"))
        t.setdefault("two_j2", []).append(check(1, "--matrix", str(two), "--jobs", "2"))
    m = {key: statistics.median(v) for key, v in t.items()}

    def paired(num: str, den: list[str]) -> str:
        """Median (and range) of the ratio taken within each repetition: the runs of one
        repetition are back to back, so a drift of the machine's speed cancels."""
        r = sorted(t[num][i] / sum(t[d][i] for d in den) for i in range(args.reps))
        return f"{statistics.median(r):.2f} x (per-run {r[0]:.2f}-{r[-1]:.2f})"

    print(f"# epaudit check vs the ORT floor ({n} probes x 2 sessions; median of {args.reps} "
          f"interleaved runs; {os.cpu_count()} cores; Python {sys.version.split()[0]})")
    print()
    print("| measure | seconds | ratio |")
    print("|---|---:|---:|")
    print(f"| interpreter start (`python -c pass`) | {m['interp']:.3f} | |")
    print(f"| floor (import onnxruntime, {2 * n} sessions created and run once) | {m['floor1']:.3f} | |")
    print(f"| shared floor (the same sessions on one intra-op pool) | {m['shared1']:.3f} | |")
    print(f"| `epaudit check --ep CPU` | {m['check1']:.3f} | {paired('check1', ['floor1', 'interp'])} (floor + interp); "
          f"{paired('check1', ['shared1', 'interp'])} (shared floor + interp) |")
    print(f"| `epaudit check --ep CPU --no-cache` (first run: probes built) | {m['cold']:.3f} "
          f"| {paired('cold', ['floor1', 'interp'])} (floor + interp) |")
    for k in scales[1:]:
        print(f"| floor, catalog x{k} | {m[f'floor{k}']:.3f} | |")
        print(f"| shared floor, catalog x{k} | {m[f'shared{k}']:.3f} | |")
        print(f"| check, catalog x{k} | {m[f'check{k}']:.3f} | {paired(f'check{k}', [f'floor{k}', 'interp'])} (floor + interp); "
              f"{paired(f'check{k}', [f'shared{k}', 'interp'])} (shared floor + interp) |")
    print(f"| check, two EPs, `--jobs 1` | {m['two_j1']:.3f} | {paired('two_j1', ['check1'])} one EP |")
    print(f"| check, two EPs, `--jobs 2` | {m['two_j2']:.3f} | {paired('two_j2', ['check1'])} one EP |")
    print()
    print("| marginal cost per probe | floor ms | shared floor ms | check ms | ratio to floor | to shared floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for a, b in zip(scales, scales[1:]):
        d = (b - a) * n
        fl = (m[f"floor{b}"] - m[f"floor{a}"]) / d * 1e3
        sh = (m[f"shared{b}"] - m[f"shared{a}"]) / d * 1e3
        ch = (m[f"check{b}"] - m[f"check{a}"]) / d * 1e3
        print(f"| x{a} -> x{b} | {fl:.2f} | {sh:.2f} | {ch:.2f} | {ch / fl:.2f} | {ch / sh:.2f} |")
    print()
    me = max(r[0] for r in rss[scales[0]]) / 1024
    kids = max(r[1] for r in rss[scales[0]]) / 1024
    print(f"peak RSS of the `check` parent: {me:.0f} MiB (largest worker: {kids:.0f} MiB)")
    for k in scales[1:]:
        print(f"  catalog x{k}: parent {max(r[0] for r in rss[k]) / 1024:.0f} MiB "
              f"(largest worker: {max(r[1] for r in rss[k]) / 1024:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
