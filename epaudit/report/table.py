"""The terminal report: features x EPs table, findings, verdict (rich)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markup import escape as esc
from rich.text import Text

from ..outcomes import Outcome
from ..results import RunResult

STYLE = {
    Outcome.PASS: "bold green", Outcome.REJECTED: "yellow", Outcome.FALLBACK: "magenta",
    Outcome.DECOMPOSED: "magenta", Outcome.IGNORED: "bold red", Outcome.UNWRITTEN: "bold red",
    Outcome.NAN: "bold red", Outcome.MISMATCH: "bold red", Outcome.CRASH: "bold red",
    Outcome.TIMEOUT: "bold red", Outcome.UNAVAILABLE: "dim", Outcome.ERROR: "bold red reverse",
    Outcome.SKIPPED: "dim",
}
#: What a declaration leads one to expect; a cell shows the declaration when they differ.
EXPECTED = {"supported": {Outcome.PASS},
            "unsupported": {Outcome.REJECTED, Outcome.FALLBACK, Outcome.DECOMPOSED},
            "skip": {Outcome.SKIPPED},
            # a conformance skip: a strict expected failure (anything but a pass or a process failure)
            "xfail": set(Outcome) - {Outcome.PASS, Outcome.CRASH, Outcome.TIMEOUT, Outcome.ERROR}}


def same_ep_columns(result: RunResult) -> list[tuple[str, str]]:
    """Pairs of live columns that are the same EP in the same environment on the same
    machine, with no injected fault: an alias pointing at another alias's provider (say
    ``[providers.CUDA] name = "CPUExecutionProvider"``) would make CUDA "pass" as CPU."""
    live = [(a, i) for a, i in result.eps.items() if i.live and not i.fault]
    return [(a, b) for n, (a, i) in enumerate(live) for b, j in live[n + 1:]
            if (i.name, i.python, i.machine) == (j.name, j.python, j.machine)]


def grid(header: list[str], rows: list[list[Text | str]]) -> Text:
    """The outcome grid as rich draws a default table (``box.HEAVY_HEAD``, bold header,
    one space of padding), without rich's layout engine.

    Every cell is one line and no column wraps, so the drawing is padding to the widest
    cell of each column: ~1 ms for the default catalog where ``rich.table.Table`` took
    ~30 ms (0.35 ms a row, ``benchmarks/floor_vs_check.py``), a cost every run pays. The
    grid is as wide as its cells; it is never cropped to the console width.
    """
    cells = [[Text(h, style="bold") for h in header]]
    cells += [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    widths = [max(row[i].cell_len for row in cells) for i in range(len(header))]

    def rule(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right + "\n"

    def line(row: list[Text], bar: str) -> Text:
        out = Text(bar)
        for cell, w in zip(row, widths):
            out.append(" ")
            out.append_text(cell)
            out.append(" " * (w - cell.cell_len) + " " + bar)
        out.append("\n")
        return out

    out = Text(rule("┏", "┳", "┓", "━"))
    out.append_text(line(cells[0], "┃"))
    out.append(rule("┡", "╇", "┩", "━"))
    for row in cells[1:]:
        out.append_text(line(row, "│"))
    out.append(rule("└", "┴", "┘", "─").rstrip("\n"))
    return out


def _console(color: bool, width: int | None) -> tuple[Console, io.StringIO]:
    """A console writing into a buffer: ``width`` columns, or no wrapping at all when
    ``None`` (a pipe or a file: one finding, one line; epaudit/terminal.py)."""
    buf = io.StringIO()
    return Console(file=buf, force_terminal=color, no_color=not color, width=width or 160,
                   highlight=False, soft_wrap=width is None), buf


def _quiet(con: Console, result: RunResult) -> None:
    """``--quiet``: the failing findings and the verdict, nothing else."""
    findings = result.gate.findings if result.gate else ()
    for f in findings:
        if f.failing:
            cell = f"{f.feature_id} on {f.ep}" if f.feature_id else f.ep
            con.print(f"[bold red]FAIL[/] [bold]{f.kind.value}[/] {esc(cell)}: {esc(f.message)}")
    warnings = sum(not f.failing for f in findings)
    if warnings:
        con.print(f"[dim]{warnings} warning(s) not shown (--quiet)[/]")
    if result.gate is not None:
        style = {0: "bold green", 1: "bold red", 3: "bold yellow"}[result.gate.exit_code]
        con.print(f"[{style}]verdict: {esc(result.gate.verdict)}[/] (exit {result.gate.exit_code})")
    else:
        bad = sum(c.outcome is not Outcome.PASS for c in result.results.values())
        con.print(f"{len(result.results) - bad} of {len(result.results)} cell(s) PASS (no gate applied)")
    if result.incomplete:
        con.print("[bold yellow]run interrupted: results are incomplete[/]")


def format(result: RunResult, *, color: bool = False,  # noqa: A001
           width: int | None = None, details: bool = False, quiet: bool = False, **_: Any) -> str:
    """Render the run: table, EP availability, findings (or per-cell details), verdict.

    ``width``: columns to lay out for; ``None`` wraps nothing. ``quiet``: only the
    failing findings and the verdict.
    """
    con, buf = _console(color, width)
    if quiet:
        _quiet(con, result)
        return buf.getvalue()
    conf = result.conformance
    what = (f"{len(result.features)} {'/'.join(conf.ops)} backend test case(s) from onnx {conf.onnx_version}"
            + (" (with _expanded)" if conf.expanded else "") if conf else f"{len(result.features)} feature(s)")
    con.print(f"[bold]epaudit[/] {esc(str(result.environment.get('epaudit', '')))}: {esc(what)} "
              f"x {len(result.eps)} execution provider(s); matrix {esc(str(result.matrix_path))}")
    header = ["case" if conf else "feature"]
    header += [alias if info.live else f"{alias} (not live)" for alias, info in result.eps.items()]
    rows: list[list[Text | str]] = []
    for fid in result.features:
        row: list[Text | str] = [fid]
        for alias in result.eps:
            c = result.results.get((fid, alias))
            if c is None:
                row.append(Text("—", style="dim"))
                continue
            cell = Text(c.outcome.value, style=STYLE[c.outcome])
            status = result.declared.get((fid, alias), "").split(" ")[0] or None
            if status is not None and c.outcome not in (Outcome.UNAVAILABLE,) \
                    and c.outcome not in EXPECTED.get(status, set()):
                cell.append(f" ≠ {status}", style="italic")
            row.append(cell)
        rows.append(row)
    con.print(grid(header, rows), soft_wrap=True)
    for alias, info in result.eps.items():
        where = f"{info.distribution or 'onnxruntime ?'} under {info.python}" if info.python else ""
        if info.live:
            con.print(f"[green]{esc(alias)}[/]: live ({esc(info.name)}; {esc(where)})"
                      + (f" [red]fault injected: {esc(info.fault)}[/]" if info.fault else ""))
        else:
            con.print(f"[dim]{esc(alias)}[/]: UNAVAILABLE — {esc(info.reason)}")
    for a, b in same_ep_columns(result):
        con.print(f"[yellow]note[/]: {esc(a)} and {esc(b)} both ran {esc(result.eps[a].name)} under one interpreter on one "
                  "machine: a parity check between them compares an EP with itself")
    if details:
        for (fid, alias), c in result.results.items():
            con.print(f"[bold]{esc(fid)}[/] on {esc(alias)}: ", Text(c.outcome.value, style=STYLE[c.outcome]),
                      Text(f" — {c.summary}"), sep="")
            if c.control is not None:
                con.print(f"    control model: {c.control.value}")
            err = c.evidence.get("error")
            if err and c.outcome is not Outcome.REJECTED:
                con.print(Text(f"    ORT: {err.get('message', '')[:300]}"))
            if c.evidence.get("placement"):
                on = {p['ep'] for p in c.evidence['placement']}
                con.print(Text(f"    placement ({c.evidence.get('placement_source')}): {', '.join(sorted(map(str, on)))}"))
    if conf is not None:
        con.print("[bold]Summary[/] (pass = passed, not skipped; fail = failing finding; gap = skipped and failed, "
                  "accounted for)")
        for alias, n in conf.summary.items():
            con.print(f"  {esc(alias)}: " + (f"{n['pass']} pass, {n['fail']} fail, {n['gap']} gap"
                                        if result.eps[alias].live else f"not live ({n['unavailable']} case(s) not run)"))
    if result.gate is not None:
        if result.gate.findings:
            con.print()
            con.print("[bold]Findings[/]")
        for f in result.gate.findings:
            tag = "[bold red]FAIL[/]" if f.failing else "[yellow]warn[/]"
            cell = f"{f.feature_id} on {f.ep}" if f.feature_id else f.ep
            line = f" (matrix line {f.line})" if f.line else ""
            declared = "not declared" if f.declared == "undeclared" else f"declared {f.declared}"
            con.print(f"{tag} [bold]{f.kind.value}[/] {esc(cell)}{line}: {esc(declared)}; {esc(f.message)}")
        con.print()
        style = {0: "bold green", 1: "bold red", 3: "bold yellow"}[result.gate.exit_code]
        con.print(f"[{style}]verdict: {result.gate.verdict}[/] (exit {result.gate.exit_code})")
    if result.incomplete:
        con.print("[bold yellow]run interrupted: results are incomplete[/]")
    return buf.getvalue()
