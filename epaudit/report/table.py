"""The terminal report: features x EPs table, findings, verdict (rich).

A run of more than :data:`~epaudit.report.summary.FULL_TABLE_MAX` features is summarised
before it is listed (counts per operator and EP, then only the rows that are not a pass
or carry a failing finding); ``--all`` on ``check`` and ``probe`` draws every row.
"""

from __future__ import annotations

import io
from typing import Any, Iterable, Sequence, Tuple, Union

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.style import Style
from rich.text import Text

from ..contract.outcomes import Outcome
from ..contract.results import RunResult
from ..surface.coverage import summary
from ..textenc import one_line
from .summary import OperatorRow, by_operator, grouped_warnings, large, notable


def esc(text) -> str:
    """A string from outside (a results file, a model, ORT) as rich markup text of one line:
    no newline, escape code or workflow command (:func:`epaudit.textenc.one_line`), no markup."""
    return _markup_escape(one_line(text))

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


#: A grid cell: plain text, a rich ``Text``, or ``(text, style)`` segments.
GridCell = Union[str, Text, Sequence[Tuple[str, str]]]


def _segments(cell: GridCell) -> tuple[tuple[str, str], ...]:
    """A cell as ``(text, rich style)`` segments; a ``Text`` keeps its style and spans."""
    if isinstance(cell, str):
        return ((one_line(cell), ""),)
    if isinstance(cell, Text):
        plain = cell.plain
        cuts = sorted({0, len(plain), *(sp.start for sp in cell.spans), *(sp.end for sp in cell.spans)})
        return tuple((plain[a:b], " ".join(str(x) for x in [cell.style] + [sp.style for sp in cell.spans
                                                                          if sp.start <= a and sp.end >= b] if x))
                     for a, b in zip(cuts, cuts[1:]))
    return tuple(cell)


def _paint(text: str, style: str) -> str:
    """``text`` in ``style`` as ANSI SGR codes (the named colours used here render the same
    in every colour system)."""
    return Style.parse(style).render(text, color_system=ColorSystem.TRUECOLOR) if style and text else text


def draw(header: Sequence[str], rows: Iterable[Sequence[GridCell]], *, color: bool = False) -> str:
    """The outcome grid as rich draws a default table (``box.HEAVY_HEAD``, bold header,
    one space of padding), as a string, without rich's layout engine or its console.

    Every cell is one line and no column wraps, so the drawing is padding to the widest
    cell of each column. Going through ``rich.table.Table`` cost ~30 ms for the default
    catalog (0.35 ms a row), and printing a ``Text`` grid through the console ~0.3 ms a
    row; a string built here costs a few microseconds a cell, which matters at a thousand
    features (``--all``; docs/matrix-globs-and-large-reports.md has the numbers). The grid
    is as wide as its cells; it is never cropped to the console width. Ends without a
    newline.

    Args:
        header: column titles (drawn bold).
        rows: one sequence of cells per row, as many as ``header``.
        color: ANSI colours and styles (a terminal); plain text otherwise.
    """
    cells = [[((one_line(h), "bold"),) for h in header]] + [[_segments(c) for c in row] for row in rows]
    lens = [[sum(cell_len(t) for t, _ in c) for c in row] for row in cells]
    widths = [max(row[i] for row in lens) for i in range(len(header))]

    def rule(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right

    def line(row, row_lens, bar: str) -> str:
        parts = [bar]
        for cell, n, w in zip(row, row_lens, widths):
            text = "".join(_paint(t, st) for t, st in cell) if color else "".join(t for t, _ in cell)
            parts.append(f" {text}{' ' * (w - n)} {bar}")
        return "".join(parts)

    out = [rule("┏", "┳", "┓", "━"), line(cells[0], lens[0], "┃"), rule("┡", "╇", "┩", "━")]
    out += [line(row, n, "│") for row, n in zip(cells[1:], lens[1:])]
    out.append(rule("└", "┴", "┘", "─"))
    return "\n".join(out)


def grid(header: list[str], rows: list[list[GridCell]]) -> Text:
    """:func:`draw` as a rich ``Text`` (styles kept), for a caller that prints renderables."""
    return Text.from_ansi(draw(header, rows, color=True))


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


def _outcome_cell(result: RunResult, fid: str, alias: str) -> GridCell:
    """An outcome, with ``≠ <declared>`` when the declaration leads one to expect another."""
    c = result.results.get((fid, alias))
    if c is None:
        return (("—", "dim"),)
    status = result.declared.get((fid, alias), "").split(" ")[0] or None
    if status is not None and c.outcome is not Outcome.UNAVAILABLE and c.outcome not in EXPECTED.get(status, set()):
        return ((c.outcome.value, STYLE[c.outcome]), (f" ≠ {status}", "italic"))
    return ((c.outcome.value, STYLE[c.outcome]),)


def _feature_rows(result: RunResult, fids: Iterable[str], aliases: Sequence[str]) -> list[list[GridCell]]:
    return [[fid] + [_outcome_cell(result, fid, a) for a in aliases] for fid in fids]


def _column(result: RunResult, alias: str) -> str:
    return alias if result.eps[alias].live else f"{alias} (not live)"


def _summary(result: RunResult, ops: Sequence[OperatorRow]) -> list[list[GridCell]]:
    """Outcome counts per operator and EP (:func:`summary.by_operator`), as grid rows."""
    rows: list[list[GridCell]] = []
    for r in ops:
        row: list[GridCell] = [r.operator, str(r.features)]
        for alias in result.eps:
            segs: list[tuple[str, str]] = []
            for o, n in r.counts[alias].items():
                segs += [(", ", "")] if segs else []
                segs.append((f"{n} {o.value}", STYLE[o]))
            row.append(segs or (("—", "dim"),))
        found = [(f"{r.failing} fail", "bold red")] if r.failing else []
        if r.warnings:
            found += [(", ", "")] * bool(found) + [(f"{r.warnings} warn", "yellow")]
        row.append(found or (("—", "dim"),))
        rows.append(row)
    return rows


def format(result: RunResult, *, color: bool = False,  # noqa: A001
           width: int | None = None, details: bool = False, all_rows: bool = False, quiet: bool = False,
           **_: Any) -> str:
    """Render the run: outcome grid, EP availability, findings (or per-cell details), verdict.

    Up to :data:`~epaudit.report.summary.FULL_TABLE_MAX` features (and always with
    ``all_rows``, the CLI's ``--all``) the grid has a row per feature and every finding
    gets a line. Above it: outcome counts per operator and EP first, then the rows of
    :func:`~epaudit.report.summary.notable` over the live EPs (plus any EP with a failing
    finding in them), per-cell details only for live cells that are not a ``PASS`` (or
    carry a failing finding), and
    ``undeclared`` warnings counted per EP instead of one line each.

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
    brief = large(result) and not all_rows
    aliases = list(result.eps)
    if not brief:
        header = ["case" if conf else "feature"] + [_column(result, a) for a in aliases]
        buf.write(draw(header, _feature_rows(result, result.features, aliases), color=color) + "\n")
    else:
        ops = by_operator(result)
        con.print(f"[bold]Summary[/]: {len(ops)} operator(s), {len(result.features)} feature(s); cells per outcome")
        buf.write(draw(["operator", "features"] + [_column(result, a) for a in aliases] + ["findings"],
                       _summary(result, ops), color=color) + "\n")
        rows = notable(result)
        failing_eps = {f.ep for f in (result.gate.findings if result.gate else ()) if f.failing and f.feature_id}
        shown = [a for a in aliases if result.eps[a].live or a in failing_eps]
        hidden = [a for a in aliases if a not in shown]
        con.print(f"[bold]Not a pass, or a failing finding[/]: {len(rows)} of {len(result.features)} feature row(s)"
                  + (f"; not live, not listed: {esc(', '.join(hidden))}" if hidden else "")
                  + " (--all lists every row)")
        if rows:
            buf.write(draw(["feature"] + [_column(result, a) for a in shown], _feature_rows(result, rows, shown),
                           color=color) + "\n")
    for alias, info in result.eps.items():
        where = f"{info.distribution or 'onnxruntime ?'} under {info.python}" if info.python else ""
        if info.live:
            con.print(f"[green]{esc(alias)}[/]: live ({esc(info.name)}; {esc(where)})"
                      + (f" [red]fault injected: {esc(info.fault)}[/]" if info.fault else ""))
        else:
            con.print(f"[dim]{esc(alias)}[/]: UNAVAILABLE — {esc(info.reason)}")
    for alias, cov in result.coverage.items():
        con.print(Text(one_line(f"coverage {summary(alias, cov)}"), style="dim" if cov.get("status") != "kernels" else ""),
                  soft_wrap=True)
    for a, b in same_ep_columns(result):
        con.print(f"[yellow]note[/]: {esc(a)} and {esc(b)} both ran {esc(result.eps[a].name)} under one interpreter on one "
                  "machine: a parity check between them compares an EP with itself")
    if details:
        failing = {(f.feature_id, f.ep) for f in (result.gate.findings if result.gate else ()) if f.failing}
        for (fid, alias), c in result.results.items():
            if brief and (fid, alias) not in failing and (c.outcome is Outcome.PASS or not result.eps[alias].live):
                continue  # a large run details what is not a pass; a dead EP's reason is printed once
            con.print(f"[bold]{esc(fid)}[/] on {esc(alias)}: ", Text(c.outcome.value, style=STYLE[c.outcome]),
                      Text(f" — {one_line(c.summary)}"), sep="")
            if c.control is not None:
                con.print(f"    control model: {c.control.value}")
            err = c.evidence.get("error")
            if err and c.outcome is not Outcome.REJECTED:
                con.print(Text(f"    ORT: {one_line(str(err.get('message', ''))[:300])}"))
            if c.evidence.get("placement"):
                on = {p['ep'] for p in c.evidence['placement']}
                con.print(Text(one_line(f"    placement ({c.evidence.get('placement_source')}): "
                                        f"{', '.join(sorted(map(str, on)))}")))
    if conf is not None:
        con.print("[bold]Summary[/] (pass = passed, not skipped; fail = failing finding; gap = skipped and failed, "
                  "accounted for)")
        for alias, n in conf.summary.items():
            con.print(f"  {esc(alias)}: " + (f"{n['pass']} pass, {n['fail']} fail, {n['gap']} gap"
                                        if result.eps[alias].live else f"not live ({n['unavailable']} case(s) not run)"))
    if result.gate is not None:
        listed, undeclared = (grouped_warnings(result.gate.findings) if brief
                              else (list(result.gate.findings), {}))
        if result.gate.findings:
            con.print()
            con.print("[bold]Findings[/]")
        for f in listed:
            tag = "[bold red]FAIL[/]" if f.failing else "[yellow]warn[/]"
            cell = f"{f.feature_id} on {f.ep}" if f.feature_id else f.ep
            line = f" (matrix line {f.line})" if f.line else ""
            declared = "not declared" if f.declared == "undeclared" else f"declared {f.declared}"
            con.print(f"{tag} [bold]{f.kind.value}[/] {esc(cell)}{line}: {esc(declared)}; {esc(f.message)}")
        for key, n in undeclared.items():
            kind, alias = key.split(" ", 1)
            if kind == "undeclared":
                con.print(f"[yellow]warn[/] [bold]undeclared[/] {n} cell(s) on {esc(alias)} the matrix does not declare "
                          "(a glob key declares many; --strict fails them; --all lists each)")
            else:
                con.print(f"[yellow]warn[/] [bold]unregistered[/] {n} type variant(s) ran on {esc(alias)} in a type its "
                          "kernel registry does not list (judged by their numbers; `epaudit surface --observed` "
                          "shows them per operator and type; --all lists each)")
        con.print()
        style = {0: "bold green", 1: "bold red", 3: "bold yellow"}[result.gate.exit_code]
        con.print(f"[{style}]verdict: {esc(result.gate.verdict)}[/] (exit {result.gate.exit_code})")
    if result.incomplete:
        con.print("[bold yellow]run interrupted: results are incomplete[/]")
    return buf.getvalue()
