"""The gate: outcomes + declarations -> findings, verdict and exit code.

Rules are docs/outcomes-and-gates.md "Gate rules" 1–8. An EP that is not live is judged
by rule 8 alone: its cells are ``UNAVAILABLE``, never a pass and never a lag; the run is
``incomplete`` (exit 3) when that EP is required or gated, unless the run allows that
gated EP to be absent, and the verdict line then names it as not audited. Process
failures (``CRASH``, ``TIMEOUT``, ``ERROR``) fail the gate on any cell,
whatever is declared: a declared gap must refuse, not die.

Each probed cell yields at most one outcome finding, the first that applies of
silent, crash, timeout, error, regression, lag, stale; declaration findings
(ungoverned, expired, undeclared) come on top.
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterable, Mapping, Sequence

from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import Classified, EPInfo, Finding, GateResult
from ..matrix.model import Declaration, Matrix, governance_gap

_PROCESS = {Outcome.CRASH: FindingKind.CRASH, Outcome.TIMEOUT: FindingKind.TIMEOUT,
            Outcome.ERROR: FindingKind.ERROR}


def describe(decl: Declaration | None) -> str:
    """A declaration in words, for findings and tables."""
    if decl is None:
        return "undeclared"
    if decl.status == "supported":
        return "supported"
    bits = [decl.status]
    if decl.issue:
        bits.append(decl.issue)
    if decl.until:
        bits.append(f"until {decl.until.isoformat()}")
    return " ".join(bits)


def apply(matrix: Matrix, eps: Mapping[str, EPInfo], results: Mapping[tuple[str, str], Classified],
          features: Sequence[str], *, require: Iterable[str] = (), strict: bool = False,
          today: _dt.date | None = None, unfinished: int = 0,
          allow_absent: Iterable[str] = ()) -> GateResult:
    """Apply the gate to one run.

    Args:
        matrix: the declarations and ``[gate]`` settings.
        eps: alias -> EP info, for the EPs of the run.
        results: (feature id, alias) -> classified outcome.
        features: the feature ids of the run, in order.
        require: EP aliases that must be live, on top of ``[gate] require``.
        allow_absent: gated EP aliases that may be not live (``--allow-absent``), on top
            of ``[gate] allow_absent``; the verdict line names them.
        strict: ``undeclared`` fails the gate instead of warning.
        today: the date ``until`` is compared with (default: today).
        unfinished: probes of the plan that did not finish because the run was
            interrupted (Ctrl-C, SIGTERM): an ``incomplete`` finding, exit 3 unless a
            failing finding is already known.

    Returns:
        Findings (failing first), exit code (1 failing > 3 incomplete > 0) and verdict.
    """
    today = today or _dt.date.today()
    gate = matrix.gate
    findings: list[Finding] = []
    live_refs = [a for a in gate.reference if a in eps and eps[a].live]

    for fid in features:
        for alias, info in eps.items():
            res = results.get((fid, alias))
            decl = matrix.declaration(fid, alias)
            line = matrix.line_of(fid, alias)
            declared = describe(decl)

            def add(kind: FindingKind, message: str, failing: bool = True,
                    outcome: Outcome | None = res.outcome if res else None) -> None:
                findings.append(Finding(kind, fid, alias, failing, declared, outcome, message, line))

            if decl is not None and decl.status != "supported":
                if not decl.governed:
                    missing = governance_gap(decl.issue, decl.until, decl.issue_pattern)
                    add(FindingKind.UNGOVERNED, f"{decl.status} cell has {missing}: every gap needs an owner "
                                                "(an issue link) and an end date", outcome=None)
                if decl.until is not None and decl.until < today:
                    add(FindingKind.EXPIRED, f"{decl.status} until {decl.until.isoformat()} has passed; re-probe and renew or fix", outcome=None)
            if res is None or not info.live or res.outcome in (Outcome.UNAVAILABLE, Outcome.SKIPPED):
                continue
            o = res.outcome
            if o.silent:
                add(FindingKind.SILENT, f"{o.value}: {res.summary} — an EP that cannot do this must refuse it")
            elif o in _PROCESS:
                add(_PROCESS[o], f"{o.value}: {res.summary}")
            elif decl is not None and decl.status == "supported" and o is not Outcome.PASS:
                add(FindingKind.REGRESSION, f"declared supported but {o.value}: {res.summary}")
            elif alias in gate.gated and o is not Outcome.PASS and _bar_met(fid, live_refs, results, gate.parity) \
                    and not (decl is not None and decl.status == "unsupported" and decl.governed):
                refs = ", ".join(a for a in live_refs if _passes(fid, a, results))
                add(FindingKind.LAG, f"{o.value} while reference {refs} pass(es): {res.summary}")
            elif decl is not None and decl.status == "unsupported" and o is Outcome.PASS:
                add(FindingKind.STALE, "declared unsupported but PASS: the gap is fixed, update the matrix")
            if decl is None:
                add(FindingKind.UNDECLARED, f"{o.value} on a cell the matrix does not declare", failing=strict)

    findings.extend(required(matrix, eps, require, allow_absent))
    live = [a for a, info in eps.items() if info.live]
    if live and features and not unfinished and not any(
            r is not None and r.outcome is not Outcome.SKIPPED
            for r in (results.get((fid, a)) for fid in features for a in live)):
        # Every selected cell of every live EP is declared skip: no probe ran, and a
        # verdict with no evidence is not a PASS (found by a fresh user selecting only
        # the align_corners Resize probes, which the shipped matrix skips).
        findings.append(Finding(FindingKind.INCOMPLETE, "", "", True, "", None,
                                f"nothing was probed: all {len(features)} selected feature(s) are "
                                f"declared skip on {', '.join(live)}"))
    if unfinished:
        findings.append(Finding(FindingKind.INCOMPLETE, "", "", True, "", None,
                                f"run interrupted: {unfinished} probe(s) did not finish"))
    return verdict(findings)


def required(matrix: Matrix, eps: Mapping[str, EPInfo], require: Iterable[str] = (),
             allow_absent: Iterable[str] = ()) -> list[Finding]:
    """Rule 8: which EPs the verdict could not audit.

    * an ``incomplete`` finding (exit 3) per EP in ``[gate] require`` or ``require`` that
      is not live, and per *gated* EP of the run that is not live, unless it is named in
      ``[gate] allow_absent`` or ``allow_absent``: a gate over a gated EP that was never
      probed is not a pass;
    * an ``incomplete`` finding when no EP of the run was live at all (nothing probed);
    * an ``incomplete`` finding per EP of the run that is not live because of a setup
      mistake (``EPInfo.absence == "configuration"``), whatever its role;
    * a ``not-audited`` finding (never failing; the verdict line names it) per gated EP
      that was allowed to be absent, or that the run left out (``--ep CPU``).

    Source: docs "Gate rules" rule 8 (issue 12: a CPU-only machine read PASS over CUDA).
    """
    out = []
    if eps and not any(info.live for info in eps.values()):
        # No EP ran a single probe (or conformance case): a verdict with no evidence at all
        # is not a PASS, whatever may be absent.
        out.append(Finding(FindingKind.INCOMPLETE, "", "", True, "", None,
                           "no EP was live: nothing was probed ("
                           + "; ".join(f"{a}: {i.reason or 'not live'}"[:120] for a, i in eps.items()) + ")"))
    allowed = set(matrix.gate.allow_absent) | set(allow_absent)
    wanted = dict.fromkeys(list(matrix.gate.require) + list(require))
    for alias in wanted:
        info = eps.get(alias)
        if info is None or not info.live:
            why = info.reason if info is not None else "not in this run"
            in_matrix = alias in matrix.gate.require  # else only --require asked for it
            out.append(Finding(FindingKind.INCOMPLETE, "", alias, True,
                               "required ([gate] require)" if in_matrix else "required (--require)",
                               Outcome.UNAVAILABLE, f"required EP {alias} is not live: {why}",
                               _provider_line(matrix, alias)))
    for alias, info in eps.items():
        if not info.live and info.absence == "configuration" and alias not in wanted:
            # A setup mistake (an interpreter that is not a Python with onnxruntime, or
            # never answered) is no absence to accept, whatever the EP's role.
            out.append(Finding(FindingKind.INCOMPLETE, "", alias, True, "misconfigured", Outcome.UNAVAILABLE,
                               f"EP {alias} is misconfigured, so it was not audited: {info.reason}",
                               _provider_line(matrix, alias)))
    for alias in matrix.gate.gated:
        if alias in wanted or (alias in eps and eps[alias].absence == "configuration"):
            continue
        info = eps.get(alias)
        if info is None:
            out.append(Finding(FindingKind.NOT_AUDITED, "", alias, False, "gated", None,
                               f"gated EP {alias} is not in this run", _provider_line(matrix, alias)))
        elif not info.live and alias in allowed:
            out.append(Finding(FindingKind.NOT_AUDITED, "", alias, False, "gated, allowed absent",
                               Outcome.UNAVAILABLE, f"gated EP {alias} is not live (allowed absent): "
                                                    f"{info.reason or 'not live'}", _provider_line(matrix, alias)))
        elif not info.live:
            out.append(Finding(FindingKind.INCOMPLETE, "", alias, True, "gated ([gate] gated)",
                               Outcome.UNAVAILABLE,
                               f"gated EP {alias} is not live, so it was not audited: {info.reason or 'not live'} "
                               f"(--allow-absent {alias} or [gate] allow_absent accepts that)",
                               _provider_line(matrix, alias)))
    return out


def _provider_line(matrix: Matrix, alias: str) -> int | None:
    p = matrix.providers.get(alias)
    return p.line if p is not None else None


def verdict(findings: Iterable[Finding]) -> GateResult:
    """Exit code and verdict line from findings (docs/outcomes-and-gates.md "Exit codes":
    a failing finding wins over incomplete); findings come back failing first. Every
    verdict line ends by naming the gated EPs it did not audit (``not-audited`` findings)."""
    findings = sorted(findings, key=lambda f: (not f.failing, f.kind is FindingKind.INCOMPLETE))
    failing = [f for f in findings if f.failing and f.kind is not FindingKind.INCOMPLETE]
    incomplete = [f for f in findings if f.kind is FindingKind.INCOMPLETE]
    unaudited = [f for f in findings if f.kind is FindingKind.NOT_AUDITED]
    kinds = sorted({f.kind.value for f in failing})
    not_live = [f.ep for f in incomplete if f.ep]
    interrupted = [f.message for f in incomplete if not f.ep]  # the run itself was cut short
    tail = ""
    if unaudited:
        tail = "; not audited: " + ", ".join(
            f"{f.ep} ({'not in this run' if f.outcome is None else 'not live, allowed absent'})" for f in unaudited)
    if failing:
        return GateResult(tuple(findings), 1, f"FAIL: {len(failing)} failing finding(s) ({', '.join(kinds)})"
                          + (f"; {len(not_live)} EP(s) not live: {', '.join(not_live)}" if not_live else "")
                          + "".join(f"; {m}" for m in interrupted) + tail)
    if incomplete:
        why = ([f"EP(s) not live, so not audited: {', '.join(not_live)}"] if not_live else []) + interrupted
        return GateResult(tuple(findings), 3, "INCOMPLETE: " + "; ".join(why) + tail)
    warnings = len(findings) - len(unaudited)
    return GateResult(tuple(findings), 0, "PASS" + (f" with {warnings} warning(s)" if warnings else "") + tail)


def _passes(fid: str, alias: str, results) -> bool:
    r = results.get((fid, alias))
    return r is not None and r.outcome is Outcome.PASS


def _bar_met(fid: str, live_refs: Sequence[str], results, parity: str) -> bool:
    """Has the live reference set this feature's bar? (rule 3, ``parity``)."""
    if not live_refs:
        return False
    if parity == "all":
        return all(_passes(fid, a, results) for a in live_refs)
    return any(_passes(fid, a, results) for a in live_refs)
