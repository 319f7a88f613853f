"""Size and load time of the HTML report at fleet scale, measured in one run.

    python benchmarks/html_report.py [--features 2000] [--eps 8] [--reps 3] [--keep DIR]

Builds a synthetic result (``--features`` features over 100 operators x ``--eps`` EP
columns; outcomes spread over every class, evidence shaped like a real cell's: placement,
comparison, ORT error), renders it with ``--format html``'s formatter and prints:

* render: Python time to make the page (median of ``--reps``), its size in bytes;
* load in Chromium (headless, ``--dump-dom``): the wall time of the whole browser run for
  the report and for an empty page (the browser's own start), their difference; and the
  page's own clock (``data-ready-ms``: navigation start to the end of the report's script,
  ``data-render-ms``: the script alone), medians of ``--reps``;
* the same with a filter applied from the URL fragment (``#outcome=MISMATCH``).

Timings are printed, never asserted. Needs Chromium (``apt-get install chromium``);
without it only the render numbers are printed.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from browser import dump_dom, find, url  # noqa: E402

from epaudit.contract.outcomes import FindingKind, Outcome  # noqa: E402
from epaudit.contract.results import Classified, EPInfo, Finding, GateResult, RunResult  # noqa: E402
from epaudit.report.html import format as format_html  # noqa: E402


def synthetic(n_features: int, n_eps: int) -> RunResult:
    """A result of ``n_features`` x ``n_eps`` cells with realistic evidence (deterministic)."""
    eps = {f"EP{j}@m{j % 3}": EPInfo(f"EP{j}@m{j % 3}", "CPUExecutionProvider", live=j != n_eps - 1,
                                     reason="" if j != n_eps - 1 else "CUDA driver not found",
                                     distribution="onnxruntime 1.32.0", machine=f"m{j % 3}",
                                     matrix_alias=f"EP{j}")
           for j in range(n_eps)}
    features = tuple(f"op{i % 100:03d}.feature_{i:05d}.variant" for i in range(n_features))
    cycle = [Outcome.PASS] * 10 + [Outcome.REJECTED, Outcome.FALLBACK, Outcome.MISMATCH, Outcome.NAN,
                                   Outcome.DECOMPOSED, Outcome.CRASH]
    results, findings, declared = {}, [], {}
    for i, fid in enumerate(features):
        for j, alias in enumerate(eps):
            if not eps[alias].live:
                results[(fid, alias)] = Classified(fid, alias, Outcome.UNAVAILABLE, "CUDA driver not found")
                continue
            o = cycle[(i * 7 + j * 3) % len(cycle)]
            ev = {"asked": "CPUExecutionProvider",
                  "placement": [{"ep": "CPUExecutionProvider", "op_type": f"Op{i % 100}", "domain": "",
                                 "name": "probe"}],
                  "placement_source": "assignment_info",
                  "comparison": {"Y": {"output": "Y", "size": 512, "match": o is Outcome.PASS,
                                       "bad": 0 if o is Outcome.PASS else 64, "max_abs": 1.2e-7 * (1 + i % 9),
                                       "max_rel": 3.1e-6, "max_ratio": 0.02 if o is Outcome.PASS else 886.1,
                                       "worst_index": [0, i % 4, 1, j]}},
                  "create_ms": 1.7, "run_ms": 0.21}
            if o is Outcome.REJECTED:
                ev["error"] = {"stage": "create", "type": "NotImplemented", "code": 9, "status": "NOT_IMPLEMENTED",
                               "message": f"Could not find an implementation for Op{i % 100}(23) node with name 'probe'"}
            summary = ("all 1 output(s) within tolerance (max abs 1.2e-07)" if o is Outcome.PASS
                       else f"Y: max abs err 1.25 (rel 0.31) at [0, {i % 4}, 1, {j}], 64 of 512 elements out of tolerance")
            results[(fid, alias)] = Classified(fid, alias, o, summary, ev)
            if o.silent:
                findings.append(Finding(FindingKind.SILENT, fid, alias, True, "supported", o,
                                        f"{o.value}: {summary} — an EP that cannot do this must refuse it", 10 + i))
            declared[(fid, alias)] = ("supported" if o is Outcome.PASS else
                                      "unsupported https://github.com/microsoft/onnxruntime/issues/29506 until 2027-03-31")
    gate = GateResult(tuple(findings), 1 if findings else 0,
                      f"FAIL: {len(findings)} failing finding(s)" if findings else "PASS")
    return RunResult("capabilities.toml", features, eps, results, gate,
                     {"epaudit": "bench", "started": "2026-12-01T13:00:00+00:00", "duration_s": 612.4},
                     "bench", declared=declared, catalog_version=3,
                     machines={f"m{k}": {"hostname": f"host{k}", "gpus": []} for k in range(3)})


def _ms(dom: str, key: str) -> float:
    m = re.search(rf'data-{key}="([0-9.]+)"', dom)
    return float(m.group(1)) if m else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", type=int, default=2000)
    ap.add_argument("--eps", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", help="write the report here instead of a temp folder")
    args = ap.parse_args()

    result = synthetic(args.features, args.eps)
    renders, text = [], ""
    for _ in range(args.reps):
        t0 = time.perf_counter()
        text = format_html(result)
        renders.append(time.perf_counter() - t0)
    size = len(text.encode("utf-8"))
    folder = Path(args.keep or tempfile.mkdtemp(prefix="epaudit-html-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    page, empty = folder / "report.html", folder / "empty.html"
    page.write_text(text, encoding="utf-8")
    empty.write_text("<!DOCTYPE html><html><body><script>document.body.dataset.ready='1'</script></body></html>")
    print(f"synthetic result: {args.features} features x {args.eps} EP columns = {args.features * args.eps} cells")
    print(f"render (python): median {statistics.median(renders):.3f} s over {args.reps}; "
          f"size {size:,} bytes ({size / 2**20:.2f} MiB, {size / (args.features * args.eps):.0f} bytes/cell)")
    print(f"report: {page}")
    if find() is None:
        print("chromium: not installed (apt-get install chromium): load time not measured")
        return
    rows = {"empty page": url(empty), "report": url(page), "report #outcome=MISMATCH": url(page, "outcome=MISMATCH")}
    walls: dict[str, list[float]] = {k: [] for k in rows}
    ready: dict[str, list[float]] = {k: [] for k in rows}
    render: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(args.reps):  # interleaved, so a busy moment hits every row alike
        for name, u in rows.items():
            dom, wall = dump_dom(u)
            walls[name].append(wall)
            ready[name].append(_ms(dom, "ready-ms"))
            render[name].append(_ms(dom, "render-ms"))
    base = statistics.median(walls["empty page"])
    for name in rows:
        w = statistics.median(walls[name])
        line = f"chromium {name:<26} wall {w:6.2f} s (+{w - base:5.2f} s over the empty page)"
        if name != "empty page":
            line += (f"; page clock: ready {statistics.median(ready[name]):7.0f} ms, "
                     f"script {statistics.median(render[name]):6.0f} ms")
        print(line)


if __name__ == "__main__":
    main()
