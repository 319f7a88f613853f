"""What a large run's reports say first: counts per operator and EP, then the rows to read.

A run over a generated catalog has a thousand features; a table with a row each is not
read. Above :data:`FULL_TABLE_MAX` features the terminal table and the Markdown summary
first count outcomes per operator and EP (:func:`by_operator`), then list the rows that
need a reader (:func:`notable`); ``--all`` (terminal) or the full table further down
(Markdown) show every row. JSON and JUnit always carry every cell. Pure functions of a
:class:`~epaudit.results.RunResult`, shared by ``table.py`` and ``markdown.py``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from ..outcomes import FindingKind, Outcome
from ..results import Finding, RunResult
from .cells import operator

#: Runs with at most this many features keep the one-row-per-feature table (the
#: hand-written catalog has 60; the README shows its table as it is). Above it the
#: summary comes first. Chosen so the default catalog plus a few dozen more stays as it
#: was, and a table of this many rows still fits a terminal's scrollback at a glance.
FULL_TABLE_MAX = 80


def large(result: RunResult) -> bool:
    """Does the run get the summary-first layout (more than :data:`FULL_TABLE_MAX`
    features; a conformance run keeps its own layout and summary)?"""
    return len(result.features) > FULL_TABLE_MAX and result.conformance is None


@dataclass(frozen=True)
class OperatorRow:
    """One operator's line of the summary.

    Attributes:
        operator: ``domain.op_type`` (``ai.onnx.Resize``), from the catalog.
        features: how many features of the run probe it.
        counts: EP column -> outcome -> number of cells (outcomes in enum order; a cell
            not probed at all is left out).
        failing: failing findings on its cells, over every EP.
        warnings: warnings (``undeclared`` unless ``--strict``) on its cells.
    """

    operator: str
    """Operator."""
    features: int
    """Features probing it."""
    counts: Mapping[str, Mapping[Outcome, int]]
    """EP -> outcome -> cells."""
    failing: int
    """Failing findings."""
    warnings: int
    """Warnings."""


def _by_cell(result: RunResult) -> dict[tuple[str, str], list[Finding]]:
    out: dict[tuple[str, str], list[Finding]] = {}
    for f in result.gate.findings if result.gate else ():
        if f.feature_id:
            out.setdefault((f.feature_id, f.ep), []).append(f)
    return out


def by_operator(result: RunResult) -> list[OperatorRow]:
    """Outcome counts per operator and EP, operators in order of first appearance."""
    order: dict[str, list[str]] = {}
    for fid in result.features:
        order.setdefault(operator(fid), []).append(fid)
    found = _by_cell(result)
    rank = {o: n for n, o in enumerate(Outcome)}
    rows = []
    for op, fids in order.items():
        counts: dict[str, Mapping[Outcome, int]] = {}
        failing = warnings = 0
        for ep in result.eps:
            c: Counter[Outcome] = Counter()
            for fid in fids:
                res = result.results.get((fid, ep))
                if res is not None:
                    c[res.outcome] += 1
                for f in found.get((fid, ep), ()):
                    failing += f.failing
                    warnings += not f.failing
            counts[ep] = dict(sorted(c.items(), key=lambda kv: rank[kv[0]]))
        rows.append(OperatorRow(op, len(fids), counts, failing, warnings))
    return rows


def notable(result: RunResult) -> list[str]:
    """Feature ids, in run order, with at least one cell a reader must see: an outcome
    other than ``PASS`` on a live EP (``SKIPPED`` included: a pass must be earned), or a
    failing finding on any EP. Cells of an EP that is not live (all ``UNAVAILABLE``, one
    reason, printed once) and warnings alone (``undeclared``: counted in the summary and
    the findings) do not make a row notable."""
    failing = {(f.feature_id, f.ep) for f in (result.gate.findings if result.gate else ()) if f.failing}
    live = [ep for ep, info in result.eps.items() if info.live]
    out = []
    for fid in result.features:
        if any((fid, ep) in failing for ep in result.eps) or any(
                (r := result.results.get((fid, ep))) is not None and r.outcome is not Outcome.PASS for ep in live):
            out.append(fid)
    return out


def grouped_warnings(findings: tuple[Finding, ...] | list[Finding]) -> tuple[list[Finding], dict[str, int]]:
    """Split findings into the ones listed one per line and ``undeclared`` warnings
    counted per EP (what a large run's findings section collapses).

    Returns:
        ``(listed, undeclared)``: every failing finding and every warning of another
        kind, in order; EP -> number of undeclared warnings.
    """
    listed, undeclared = [], {}
    for f in findings:
        if not f.failing and f.kind is FindingKind.UNDECLARED:
            undeclared[f.ep] = undeclared.get(f.ep, 0) + 1
        else:
            listed.append(f)
    return listed, undeclared
