"""What a large run's reports say first: counts per operator and EP, then the rows to read.

A run over a generated catalog has a thousand features; a table with a row each is not
read. Above :data:`FULL_TABLE_MAX` features the terminal table and the Markdown summary
first count outcomes per operator and EP (:func:`by_operator`), then list the rows that
need a reader (:func:`notable`); ``--all`` (terminal) or the full table further down
(Markdown) show every row. JSON and JUnit always carry every cell. Pure functions of a
:class:`~epaudit.contract.results.RunResult`, shared by ``table.py`` and ``markdown.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..catalog import operator
from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import Finding, RunResult

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
    """Outcome counts per operator and EP, operators in order of first appearance.

    Cost: one pass over the cells and one over the findings; counts are keyed by the
    outcome's value (a ``str``), since an ``Enum`` member hashes in Python code."""
    order: dict[str, list[str]] = {}
    op_of = {}
    for fid in result.features:
        op_of[fid] = op = operator(fid)
        order.setdefault(op, []).append(fid)
    failing: dict[str, int] = {}
    warnings: dict[str, int] = {}
    for f in result.gate.findings if result.gate else ():
        op = op_of.get(f.feature_id)
        if op is not None:
            tally = failing if f.failing else warnings
            tally[op] = tally.get(op, 0) + 1
    rank = {o.value: (n, o) for n, o in enumerate(Outcome)}
    got = result.results.get
    rows = []
    for op, fids in order.items():
        counts: dict[str, Mapping[Outcome, int]] = {}
        for ep in result.eps:
            c: dict[str, int] = {}
            for fid in fids:
                res = got((fid, ep))
                if res is not None:
                    k = res.outcome._value_
                    c[k] = c.get(k, 0) + 1
            counts[ep] = {rank[k][1]: n for k, n in sorted(c.items(), key=lambda kv: rank[kv[0]][0])}
        rows.append(OperatorRow(op, len(fids), counts, failing.get(op, 0), warnings.get(op, 0)))
    return rows


def notable(result: RunResult) -> list[str]:
    """Feature ids, in run order, with at least one cell a reader must see: an outcome
    other than ``PASS`` on a live EP (``SKIPPED`` included: a pass must be earned), or a
    failing finding on any EP. Cells of an EP that is not live (all ``UNAVAILABLE``, one
    reason, printed once) and warnings alone (``undeclared``: counted in the summary and
    the findings) do not make a row notable."""
    keep = {f.feature_id for f in (result.gate.findings if result.gate else ()) if f.failing}
    live = {ep for ep, info in result.eps.items() if info.live}
    keep |= {fid for (fid, ep), r in result.results.items() if ep in live and r.outcome is not Outcome.PASS}
    return [fid for fid in result.features if fid in keep]


def grouped_warnings(findings: tuple[Finding, ...] | list[Finding]) -> tuple[list[Finding], dict[str, int]]:
    """Split findings into the ones listed one per line and the warnings counted per EP
    (what a large run's findings section collapses): ``undeclared`` ones, and
    ``unregistered`` notes on type variants (a float16 variant the CPU EP runs through
    ORT's inserted casts: a note per operator and type, not a line per probe; issue 28).

    Returns:
        ``(listed, counted)``: every failing finding and every other warning, in order;
        ``"<kind> <EP>"`` -> number of collapsed warnings (``"undeclared CPU"``).
    """
    from ..catalog.variants import variant_base

    listed, counted = [], {}
    for f in findings:
        collapse = not f.failing and (f.kind is FindingKind.UNDECLARED or (
            f.kind is FindingKind.UNREGISTERED and f.feature_id and variant_base(f.feature_id)))
        if collapse:
            key = f"{f.kind.value} {f.ep}"
            counted[key] = counted.get(key, 0) + 1
        else:
            listed.append(f)
    return listed, counted
