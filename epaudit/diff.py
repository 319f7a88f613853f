"""What changed per (feature, EP) between two saved runs (``epaudit diff OLD NEW``).

Typical use: the same fleet before and after an onnxruntime upgrade. Cells are matched
by feature id and column name (``CUDA``, ``CUDA@h100``). Outcomes are ranked by how bad
they are for a release, and a cell whose rank rises **got worse** (exit 1):

====  =====================================================  ===========================
rank  outcomes                                               why
====  =====================================================  ===========================
0     ``PASS``                                               earned
1     ``REJECTED``, ``FALLBACK``, ``DECOMPOSED``             refuses or routes around, loudly
2     ``CRASH``, ``TIMEOUT``, ``ERROR``                      dies: fails any gate
3     ``IGNORED``, ``UNWRITTEN``, ``NAN``, ``MISMATCH``      wrong numbers, silently
====  =====================================================  ===========================

``UNAVAILABLE`` and ``SKIPPED`` (and a cell only one run has) say nothing about the EP:
such changes are listed as *not comparable*, never as worse or better, because a
runner without its GPU must not read as a regression (nor as a fix).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .outcomes import Outcome
from .results import Classified, RunResult

RANK = {
    Outcome.PASS: 0,
    Outcome.REJECTED: 1, Outcome.FALLBACK: 1, Outcome.DECOMPOSED: 1,
    Outcome.CRASH: 2, Outcome.TIMEOUT: 2, Outcome.ERROR: 2,
    Outcome.IGNORED: 3, Outcome.UNWRITTEN: 3, Outcome.NAN: 3, Outcome.MISMATCH: 3,
}
"""Badness of a judged outcome; UNAVAILABLE and SKIPPED are not judged."""


class Change(str, Enum):
    """How one cell moved between the two runs, in report order."""

    WORSE = "worse"
    """Its rank rose (newly broken): exit 1."""
    BETTER = "better"
    """Its rank fell (fixed)."""
    CHANGED = "changed"
    """Another outcome of the same rank (``REJECTED`` -> ``FALLBACK``)."""
    NOT_COMPARABLE = "not comparable"
    """One side is ``UNAVAILABLE``/``SKIPPED`` or missing: nothing to say about the EP."""


@dataclass(frozen=True)
class CellChange:
    """One (feature, column) whose outcome differs.

    Attributes:
        feature_id: catalog id.
        ep: column name.
        change: how it moved.
        old: outcome in OLD, or ``None`` when OLD has no such cell.
        new: outcome in NEW, or ``None``.
        summary: NEW's one-line explanation (OLD's when NEW has none).
    """

    feature_id: str
    """Catalog id."""
    ep: str
    """Column."""
    change: Change
    """Direction."""
    old: Outcome | None
    """Outcome before."""
    new: Outcome | None
    """Outcome after."""
    summary: str
    """Why, in one line."""


def _direction(old: Classified | None, new: Classified | None) -> Change:
    if old is None or new is None or old.outcome not in RANK or new.outcome not in RANK:
        return Change.NOT_COMPARABLE
    a, b = RANK[old.outcome], RANK[new.outcome]
    return Change.WORSE if b > a else Change.BETTER if b < a else Change.CHANGED


def compare(old: RunResult, new: RunResult) -> list[CellChange]:
    """Every cell whose outcome differs, worse first, then better, changed, not comparable;
    within each, in NEW's feature and column order."""
    features = list(dict.fromkeys(list(new.features) + list(old.features)))
    columns = list(dict.fromkeys(list(new.eps) + list(old.eps)))
    out = []
    for fid in features:
        for ep in columns:
            a, b = old.results.get((fid, ep)), new.results.get((fid, ep))
            if a is None and b is None:
                continue
            if a is not None and b is not None and a.outcome is b.outcome:
                continue
            summary = (b or a).summary
            out.append(CellChange(fid, ep, _direction(a, b), a.outcome if a else None,
                                  b.outcome if b else None, summary))
    order = list(Change)
    return sorted(out, key=lambda c: order.index(c.change))  # stable: keeps feature order


def format_text(changes: list[CellChange], old_name: str, new_name: str, old: RunResult, new: RunResult) -> str:
    """The diff for a terminal: a header naming both runs' onnxruntime, one line per cell."""
    def versions(r: RunResult) -> str:
        seen = dict.fromkeys(f"{a}={i.distribution or '?'}" for a, i in r.eps.items())
        return ", ".join(seen) or "no EPs"

    lines = [f"--- {old_name} ({versions(old)})", f"+++ {new_name} ({versions(new)})"]
    if not changes:
        lines.append("no cell changed")
    for c in changes:
        before = c.old.value if c.old else "(absent)"
        after = c.new.value if c.new else "(absent)"
        lines.append(f"{c.change.value.upper():<15} {c.feature_id} on {c.ep}: {before} -> {after}"
                     + (f" — {c.summary[:200]}" if c.summary else ""))
    worse = sum(c.change is Change.WORSE for c in changes)
    better = sum(c.change is Change.BETTER for c in changes)
    lines.append(f"{worse} worse, {better} better, {len(changes) - worse - better} other change(s)")
    return "\n".join(lines) + "\n"
