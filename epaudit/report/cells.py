"""What every CI-facing report says about one (feature, EP) cell, decided once.

JUnit, Markdown and GitHub annotations all need the same answer: did the cell earn a
pass, is it a governed gap that refused loudly, was the EP not there, or did the gate
find something wrong with it? Only ``PASS`` without a failing finding reads as passed;
every other outcome is a failure (a failing finding) or a skip with its reason, never
a silent pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from ..catalog import operator
from ..contract.outcomes import Outcome
from ..contract.results import Classified, Finding, RunResult


class Verdict(str, Enum):
    """How a cell reads in CI."""

    PASSED = "passed"
    """``PASS`` and no failing finding."""
    FAILED = "failed"
    """At least one failing finding on the cell."""
    DECLARED_GAP = "declared_gap"
    """Declared ``unsupported`` and the EP refused loudly (REJECTED, FALLBACK)."""
    DECLARED_SKIP = "declared_skip"
    """Declared ``skip``: not probed."""
    UNAVAILABLE = "unavailable"
    """The EP is not live on this machine: never a pass."""
    NOT_PASSED = "not_passed"
    """Anything else that is not a pass and not a failing finding (an undeclared refusal)."""


@dataclass(frozen=True)
class Cell:
    """One cell as the CI reports show it.

    Attributes:
        feature_id: catalog id.
        ep: column (EP alias, or ``ALIAS@MACHINE`` in a fleet run).
        operator: ``GroupQueryAttention`` / ``Attention`` (catalog), or the id's prefix.
        result: the classified outcome, or ``None`` when the cell was not probed.
        declared: the declaration in words (``undeclared`` when absent).
        findings: the gate's findings on this cell, failing ones first.
        verdict: how the cell reads.
    """

    feature_id: str
    """Catalog id."""
    ep: str
    """Column."""
    operator: str
    """Operator name."""
    result: Classified | None
    """Outcome, or None."""
    declared: str
    """Declaration in words."""
    findings: tuple[Finding, ...]
    """Findings on this cell."""
    verdict: Verdict
    """How the cell reads."""

    @property
    def failing(self) -> tuple[Finding, ...]:
        """The findings that fail the gate."""
        return tuple(f for f in self.findings if f.failing)


def cells(result: RunResult) -> list[Cell]:
    """Every (feature, EP) cell of the run, features outer, EPs in column order."""
    by_cell: dict[tuple[str, str], list[Finding]] = {}
    for f in result.gate.findings if result.gate else ():
        if f.feature_id:
            by_cell.setdefault((f.feature_id, f.ep), []).append(f)
    out = []
    for fid in result.features:
        for ep in result.eps:
            res = result.results.get((fid, ep))
            findings = tuple(sorted(by_cell.get((fid, ep), []), key=lambda f: not f.failing))
            declared = result.declared.get((fid, ep), "undeclared")
            out.append(Cell(fid, ep, operator(fid), res, declared, findings, _verdict(res, declared, findings)))
    return out


def ep_findings(result: RunResult) -> list[Finding]:
    """Findings about a whole EP (``incomplete``), not one cell."""
    return [f for f in (result.gate.findings if result.gate else ()) if not f.feature_id]


def _verdict(res: Classified | None, declared: str, findings: tuple[Finding, ...]) -> Verdict:
    if any(f.failing for f in findings):
        return Verdict.FAILED
    if res is None or res.outcome is Outcome.SKIPPED:
        return Verdict.DECLARED_SKIP if declared.startswith("skip") else Verdict.UNAVAILABLE
    if res.outcome is Outcome.UNAVAILABLE:
        return Verdict.UNAVAILABLE
    if res.outcome is Outcome.PASS:
        return Verdict.PASSED
    if declared.startswith("unsupported") and res.outcome in (Outcome.REJECTED, Outcome.FALLBACK):
        return Verdict.DECLARED_GAP
    return Verdict.NOT_PASSED


def evidence_text(cell: Cell, limit: int) -> str:
    """The cell's evidence as indented strict JSON, cut at ``limit`` characters with a note
    (the JSON report keeps all of it); ``""`` when there is none."""
    from .json import _clean

    if cell.result is None or not cell.result.evidence:
        return ""
    text = json.dumps(_clean(dict(cell.result.evidence)), indent=1, allow_nan=False)
    if len(text) > limit:
        text = text[:limit] + "\n… (evidence truncated; the JSON report has all of it)"
    return text
