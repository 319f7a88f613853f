"""What the reports cost at a thousand features: ``python benchmarks/report_scale.py``.

Builds a run of ``--features`` features (ids ``onnx.OpNNN.attrA.test_case_I``, ten per
operator) x 5 EP columns (CPU live with a mix of outcomes, CUDA live, three not live)
with its gate applied through a glob matrix, then times, each the median of ``--reps``:
the terminal table (summary, ``--all``; plain and coloured), Markdown, JSON and JUnit;
and, as the ratio's denominator, the grid drawn the way it was drawn before (a rich
``Text`` printed through the console). Also the matrix: parsing 1000-feature globs.
Formatters are pure, so no probe runs here. ``--show table`` (or ``markdown``) prints
that report of the synthetic run instead.

Prints a table of milliseconds (CPU time of this process, median) and the ratio of the
``--all`` table to the grid as drawn before, measured in this one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import statistics
import time

from rich.console import Console
from rich.text import Text

from epaudit.contract.outcomes import Outcome
from epaudit.contract.results import Classified, EPInfo, RunResult
from epaudit.gate.rules import apply, describe
from epaudit.matrix.load import parse
from epaudit.report import FORMATS
from epaudit.report.table import STYLE, draw

EPS = ("CPU", "CUDA", "WebGPU", "QNN", "OpenVINO")
TODAY = dt.date(2026, 11, 29)


def ids(n: int) -> list[str]:
    return [f"onnx.Op{i // 10:03d}.attr{i % 3}.test_case_{i}" for i in range(n)]


def matrix_text(n: int) -> str:
    ops = sorted({f.split(".")[1] for f in ids(n)})
    text = ['schema_version = 1', '[gate]', 'reference = ["CPU"]', 'gated = ["CUDA"]']
    text += [f'[providers.{a}]\nname = "{a}ExecutionProvider"' for a in EPS]
    text += ['[features."onnx.*"]', 'CPU = "supported"', 'CUDA = "supported"']
    for op in ops[::7]:  # a governed gap per seventh operator on CUDA
        text += [f'[features."onnx.{op}.*"]',
                 'CUDA = { status = "unsupported", issue = "https://example.org/1", until = 2099-01-01 }']
    return "\n".join(text) + "\n"


def run_result(n: int) -> RunResult:
    fids = ids(n)
    m = parse(matrix_text(n), "bench.toml", feature_ids=fids)
    eps = {a: EPInfo(a, f"{a}ExecutionProvider", a in ("CPU", "CUDA"), reason="" if a in ("CPU", "CUDA")
                     else f"${a} is not set") for a in EPS}
    results = {}
    for i, fid in enumerate(fids):
        for a in EPS:
            if not eps[a].live:
                o = Outcome.UNAVAILABLE
            elif a == "CPU":
                o = Outcome.REJECTED if i % 50 == 7 else Outcome.IGNORED if i % 333 == 5 else Outcome.PASS
            else:
                d = m.declaration(fid, a)
                o = Outcome.REJECTED if d is not None and d.status == "unsupported" else Outcome.PASS
            results[(fid, a)] = Classified(fid, a, o, f"{o.value.lower()} on {a}")
    gate = apply(m, eps, results, fids, today=TODAY)
    declared = {(f, a): describe(d) for f in fids for a in EPS if (d := m.declaration(f, a)) is not None}
    return RunResult("bench.toml", tuple(fids), eps, results, gate, {"epaudit": "bench"}, "bench", declared=declared)


def old_grid(result: RunResult) -> str:
    """The grid as drawn before: Text cells, printed through a rich console."""
    rows = [[Text(fid)] + [Text(result.results[(fid, a)].outcome.value, style=STYLE[result.results[(fid, a)].outcome])
                           for a in result.eps] for fid in result.features]
    header = ["feature"] + list(result.eps)
    out = Text(draw(header, [], color=False).split("\n")[0] + "\n")  # header rule: same cost class
    for row in rows:
        line = Text("│")
        for c in row:
            line.append(" ")
            line.append_text(c)
            line.append(" │")
        out.append_text(line)
        out.append("\n")
    buf = io.StringIO()
    Console(file=buf, width=160, no_color=True, highlight=False, soft_wrap=False).print(out, soft_wrap=True)
    return buf.getvalue()


def ms(fn, reps: int) -> float:
    """Median CPU time of ``fn`` in ms: this process's CPU time, not the wall clock, since
    on a shared machine the wall clock measures the neighbours too."""
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--show", choices=("table", "markdown"),
                    help="print that report of the synthetic run instead of timing")
    args = ap.parse_args()
    n = args.features
    if args.show:
        print(FORMATS[args.show](run_result(n)), end="")
        return
    fids = ids(n)
    text = matrix_text(n)
    parse_ms = ms(lambda: parse(text, "bench.toml", feature_ids=fids), args.reps)
    result = run_result(n)
    table, md = FORMATS["table"], FORMATS["markdown"]
    rows = [
        ("matrix parse (globs resolved)", parse_ms),
        ("table, summary (default)", ms(lambda: table(result), args.reps)),
        ("table, summary, colour", ms(lambda: table(result, color=True), args.reps)),
        ("table --all", ms(lambda: table(result, all_rows=True), args.reps)),
        ("table --all, colour", ms(lambda: table(result, all_rows=True, color=True), args.reps)),
        ("grid as drawn before (Text through the console)", ms(lambda: old_grid(result), args.reps)),
        ("markdown", ms(lambda: md(result), args.reps)),
        ("json", ms(lambda: FORMATS["json"](result), args.reps)),
        ("junit", ms(lambda: FORMATS["junit"](result), args.reps)),
    ]
    before = dict(rows)["grid as drawn before (Text through the console)"]
    print(f"{n} features x {len(EPS)} EP columns ({sum(i.live for i in result.eps.values())} live), "
          f"{len(result.gate.findings)} findings; CPU ms, median of {args.reps}")
    print(f"{'measure':<50} {'ms':>9} {'vs before':>10}")
    for name, t in rows:
        ratio = f"{t / before:.2f} x" if name.startswith("table --all") else ""
        print(f"{name:<50} {t:>9.1f} {ratio:>10}")
    print(f"markdown size: {len(md(result).encode('utf-8'))} bytes; "
          f"table (summary) lines: {table(result).count(chr(10))}")


if __name__ == "__main__":
    main()
