"""The conformance gate: case outcomes + ``[[conformance.skip]]`` entries -> findings.

Every backend test case is expected to pass on every EP. A skip entry turns one case
(or a glob's cases) on one EP into a strict expected failure; it never hides the case
on another EP. Rules, per EP of the run (docs/conformance.md):

* a case that is not skipped and does not pass: ``silent`` (IGNORED, UNWRITTEN, NAN,
  MISMATCH) or ``regression`` (REJECTED, FALLBACK, DECOMPOSED);
* a skipped case that passes: ``stale`` (the gap is fixed: remove the entry);
* a skipped case that fails: an accounted gap, no finding;
* ``crash``, ``timeout``, ``error``: fail whatever the skip-list says (a gap must
  refuse, not die), as in ``epaudit check``;
* an entry without ``issue`` or ``until``: ``ungoverned``; past its ``until``:
  ``expired``; matching no generated case: ``dead``; a glob matching more than its
  ``max_matches``: ``overbroad``.

An EP that is not live is judged by ``incomplete`` alone (when required), and its
cells count as ``unavailable``, never as passes.
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterable, Mapping, Sequence

from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import Classified, EPInfo, Finding, GateResult
from ..gate.rules import required, verdict
from ..matrix.model import ConformanceSkip, Matrix, governance_gap

_PROCESS = {Outcome.CRASH: FindingKind.CRASH, Outcome.TIMEOUT: FindingKind.TIMEOUT,
            Outcome.ERROR: FindingKind.ERROR}


def skip_for(matrix: Matrix, case: str, alias: str) -> ConformanceSkip | None:
    """The first ``[[conformance.skip]]`` entry for EP ``alias`` that names ``case``, or ``None``."""
    for s in matrix.skips:
        if s.ep == alias and s.matches(case):
            return s
    return None


def apply(matrix: Matrix, eps: Mapping[str, EPInfo], results: Mapping[tuple[str, str], Classified],
          cases: Sequence[str], generated: Sequence[str], *, require: Iterable[str] = (),
          today: _dt.date | None = None, allow_absent: Iterable[str] = ()) -> tuple[GateResult, dict[str, dict[str, int]], tuple[dict, ...]]:
    """Judge one conformance run.

    Args:
        matrix: the ``[[conformance.skip]]`` entries and ``[gate] require``.
        eps: alias -> EP info, for the EPs of the run.
        results: (case name, alias) -> classified outcome.
        cases: the case names that ran, in order.
        generated: every case name onnx has for the run's operators (``_expanded`` ones
            included): what ``dead`` and ``overbroad`` are judged against.
        require: EP aliases that must be live, on top of ``[gate] require``.
        allow_absent: gated EPs that may be not live (``--allow-absent``).
        today: the date ``until`` is compared with (default: today).

    Returns:
        ``(gate result, alias -> {pass, fail, gap, unavailable}, skip entries with their
        matches)``.
    """
    today = today or _dt.date.today()
    findings: list[Finding] = []
    summary: dict[str, dict[str, int]] = {a: {"pass": 0, "fail": 0, "gap": 0, "unavailable": 0} for a in eps}
    entries = []
    for s in matrix.skips:
        if s.ep not in eps:
            continue  # as in `check`, only the EPs of this run are judged
        matches = [n for n in generated if s.matches(n)]
        entries.append({"ep": s.ep, "test": s.test, "issue": s.issue, "until": s.until, "reason": s.reason,
                        "line": s.line, "matches": matches})

        def add(kind: FindingKind, message: str, s: ConformanceSkip = s) -> None:
            findings.append(Finding(kind, s.test, s.ep, True, s.describe(), None, message, s.line))

        if not s.governed:
            missing = governance_gap(s.issue, s.until, s.issue_pattern)
            add(FindingKind.UNGOVERNED, f"skip entry has {missing}: every skip needs an owner (an issue link) "
                                        "and an end date")
        if s.until is not None and s.until < today:
            add(FindingKind.EXPIRED, f"skip until {s.until.isoformat()} has passed; re-run and renew or remove it")
        if not matches:
            add(FindingKind.DEAD, f"matches none of the {len(generated)} generated case(s); remove it or fix the name")
        elif s.is_glob and s.max_matches is not None and len(matches) > s.max_matches:
            add(FindingKind.OVERBROAD, f"glob matches {len(matches)} cases, more than max_matches = "
                                       f"{s.max_matches}: {', '.join(matches[:5])}{', …' if len(matches) > 5 else ''}")

    for case in cases:
        for alias, info in eps.items():
            res = results.get((case, alias))
            if res is None:
                continue
            if not info.live or res.outcome is Outcome.UNAVAILABLE:
                summary[alias]["unavailable"] += 1
                continue
            skip = skip_for(matrix, case, alias)
            o = res.outcome
            declared = skip.describe() if skip else "supported"
            line = skip.line if skip else None

            def fail(kind: FindingKind, message: str) -> None:
                findings.append(Finding(kind, case, alias, True, declared, o, message, line))
                summary[alias]["fail"] += 1

            if o in _PROCESS:
                fail(_PROCESS[o], f"{o.value}: {res.summary}")
            elif o is Outcome.PASS:
                if skip is not None:
                    fail(FindingKind.STALE, f"skipped ({skip.test}) but PASS: the gap is fixed, remove the skip entry")
                else:
                    summary[alias]["pass"] += 1
            elif skip is not None:
                summary[alias]["gap"] += 1
            elif o.silent:
                fail(FindingKind.SILENT, f"{o.value}: {res.summary} — no skip entry accounts for it")
            else:
                fail(FindingKind.REGRESSION, f"{o.value}: {res.summary} — no skip entry accounts for it")

    findings.extend(required(matrix, eps, require, allow_absent))
    return verdict(findings), summary, tuple(entries)
