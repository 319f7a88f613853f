"""Outcomes joined with the features a model uses: per model and EP, what would go wrong.

The verdict of a model on an EP is the worst outcome among the features its nodes use
(catalog features and the node-config probes of its attention nodes):

========================  ==============================================================
verdict                   outcomes
========================  ==============================================================
would be silently wrong   ``IGNORED``, ``UNWRITTEN``, ``NAN``, ``MISMATCH``
would crash or hang       ``CRASH``, ``TIMEOUT`` (a gap must refuse, never crash)
would be refused          ``REJECTED``
would fall back           ``FALLBACK``, ``DECOMPOSED``
not checked               the EP is not live, a cell is ``SKIPPED``/``ERROR``, or saved
                          results lack a feature the model uses
would run as expected     every feature the model uses ``PASS``-es (a pass is earned: any
                          used feature without a PASS keeps the verdict off this line)
========================  ==============================================================

"As expected" speaks only for the configuration the probes cover: the report lists the
rest as uncovered next to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Sequence

from ..contract.outcomes import Outcome
from ..contract.results import Classified, EPInfo


class Verdict(str, Enum):
    """What a model would do on an EP (worst first in :data:`ORDER`)."""

    SILENT = "would be silently wrong"
    """A used feature computes something wrong without an error."""
    CRASH = "would crash or hang"
    """A used feature crashed the worker or timed out."""
    REFUSED = "would be refused"
    """A used feature is refused loudly (session creation or run fails)."""
    FALLBACK = "would fall back"
    """A used feature's node would not run on the EP (placed elsewhere, or decomposed)."""
    UNCHECKED = "not checked"
    """Some used feature has no outcome on this EP (EP not live, skipped, not in results)."""
    EXPECTED = "would run as expected"
    """Every used feature passes."""


ORDER = (Verdict.SILENT, Verdict.CRASH, Verdict.REFUSED, Verdict.FALLBACK, Verdict.UNCHECKED, Verdict.EXPECTED)

_BY_OUTCOME = {Outcome.IGNORED: Verdict.SILENT, Outcome.UNWRITTEN: Verdict.SILENT, Outcome.NAN: Verdict.SILENT,
               Outcome.MISMATCH: Verdict.SILENT, Outcome.CRASH: Verdict.CRASH, Outcome.TIMEOUT: Verdict.CRASH,
               Outcome.REJECTED: Verdict.REFUSED, Outcome.FALLBACK: Verdict.FALLBACK,
               Outcome.DECOMPOSED: Verdict.FALLBACK, Outcome.PASS: Verdict.EXPECTED}


def verdict_of(outcome: Outcome | None) -> Verdict:
    """The verdict one outcome implies (``None``: no outcome, not checked)."""
    return _BY_OUTCOME.get(outcome, Verdict.UNCHECKED) if outcome is not None else Verdict.UNCHECKED


@dataclass(frozen=True)
class Gap:
    """One used feature that does not pass on one EP.

    Attributes:
        feature: feature id (catalog, or ``node.<hash>.<part>`` for a node-config probe).
        outcome: the outcome, or ``None`` when there is none (not in the results).
        summary: the classifier's one line (or why there is no outcome).
        nodes: names of the model's nodes that use it, at most :data:`SHOWN`.
        count: how many nodes use it.
        declared: the matrix declaration in words (``supported``, ``unsupported ...``),
            ``undeclared``, or ``node config`` for a node-config probe.
        issue: the declaration's issue link, or ``""``.
        verdict: what this gap alone implies.
    """

    feature: str
    outcome: Outcome | None
    summary: str
    nodes: tuple[str, ...]
    count: int
    declared: str
    issue: str
    verdict: Verdict


@dataclass(frozen=True)
class EPVerdict:
    """One model on one EP.

    Attributes:
        ep: EP alias (or fleet column ``ALIAS@LABEL``).
        live: the EP was live in the run (or the saved results).
        verdict: the worst verdict over ``gaps`` (``EXPECTED`` when there are none).
        gaps: every used feature that does not pass, worst first (none when the EP is
            not live: nothing was checked there).
        passed: how many used features passed.
        reason: why the EP is not live (ORT's words), or ``""``.
    """

    ep: str
    live: bool
    verdict: Verdict
    gaps: tuple[Gap, ...] = ()
    passed: int = 0
    reason: str = ""


#: Node names shown per gap or uncovered item; the rest are counted.
SHOWN = 3


def judge(used: Mapping[str, Sequence[str]], ep: str, info: EPInfo | None,
          results: Mapping[tuple[str, str], Classified], declared: Mapping[str, tuple[str, str]]) -> EPVerdict:
    """The verdict of one model on one EP.

    Args:
        used: feature id -> names of the model's nodes that use it.
        ep: the EP column.
        info: the EP as the run found it, ``None`` when the run has no such EP.
        results: (feature id, EP) -> classified outcome.
        declared: feature id -> (declaration in words, issue link) for this EP.
    """
    live = info is not None and info.live
    if not live:
        reason = info.reason if info is not None else f"{ep} is not in this run"
        return EPVerdict(ep, False, Verdict.UNCHECKED, reason=reason or "not live")
    gaps, passed = [], 0
    for fid, nodes in used.items():
        c = results.get((fid, ep))
        outcome = c.outcome if c is not None else None
        if outcome is Outcome.PASS:
            passed += 1
            continue
        summary = c.summary if c is not None else "not in the results given"
        words, issue = declared.get(fid, ("undeclared", ""))
        gaps.append(Gap(fid, outcome, summary, tuple(nodes[:SHOWN]), len(nodes), words, issue, verdict_of(outcome)))
    gaps.sort(key=lambda g: (ORDER.index(g.verdict), g.feature))
    # A pass is earned: a model whose nodes use no probed feature was not checked at all.
    worst = gaps[0].verdict if gaps else Verdict.EXPECTED if passed else Verdict.UNCHECKED
    return EPVerdict(ep, live, worst, tuple(gaps), passed)


@dataclass(frozen=True)
class Uncovered:
    """A node configuration no probe exercises.

    Attributes:
        operator: ``domain.op_type``.
        item: what is not covered (``attribute softcap=50``, ``dtype bfloat16``, or
            ``operator`` when no feature probes the operator at all).
        nodes: a few node names.
        count: how many nodes.
    """

    operator: str
    item: str
    nodes: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class ModelReport:
    """Everything ``scan`` says about one model.

    Attributes:
        path: the model file.
        nodes: how many nodes (subgraphs and functions included).
        opsets: domain -> version imported.
        external: external-data files referenced (never read).
        used: feature id -> node names using it (catalog features and node-config probes).
        node_configs: configuration in words -> (node names, node-config feature ids,
            parts not exercised) for each distinct attention configuration.
        uncovered: configurations no probe exercises.
        eps: one :class:`EPVerdict` per EP of the run.
    """

    path: str
    nodes: int
    opsets: Mapping[str, int]
    external: tuple[str, ...]
    used: Mapping[str, tuple[str, ...]]
    node_configs: Mapping[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]
    uncovered: tuple[Uncovered, ...]
    eps: tuple[EPVerdict, ...] = ()


@dataclass(frozen=True)
class ScanResult:
    """A whole scan: every model, the EPs and where the outcomes came from.

    Attributes:
        models: one report per model, in command-line order.
        eps: EP column -> info, in run order.
        source: ``probed now`` or ``saved results: <files>``.
        require: EPs named with ``--require``.
        exit_code: 0, 1 or 3 (see :func:`exit_code`).
        notes: one-line remarks (node-config probes not run from saved results, ...).
    """

    models: tuple[ModelReport, ...]
    eps: Mapping[str, EPInfo]
    source: str
    require: tuple[str, ...] = ()
    exit_code: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def exit_code(models: Sequence[ModelReport], eps: Mapping[str, EPInfo], require: Sequence[str]) -> int:
    """1: a model uses a feature that is silent, crashes or hangs on any EP of the run,
    whose probe failed (``ERROR``, an epaudit bug: ``check`` fails on it too), or that is
    refused or falls back on a required EP; else 3 when a required EP is not live, when no
    EP of the run is live, when a required EP has used features without an outcome, or
    when a model uses features and none has an outcome anywhere; else 0
    (docs/outcomes-and-gates.md exit codes: a failing finding wins over incomplete)."""
    required_cols = {c for c, i in eps.items() if i.base_alias in require or c in require}
    fail = False
    for m in models:
        for v in m.eps:
            for g in v.gaps:
                if g.verdict in (Verdict.SILENT, Verdict.CRASH) or g.outcome is Outcome.ERROR:
                    fail = True
                elif g.verdict in (Verdict.REFUSED, Verdict.FALLBACK) and v.ep in required_cols:
                    fail = True
    if fail:
        return 1
    missing = [a for a in require if not any(i.live for c, i in eps.items() if c == a or i.base_alias == a)]
    if missing:
        return 3
    # A verdict needs evidence: no EP live at all, or a required EP with used features
    # that have no outcome (not in the saved results, an interrupted run), is incomplete.
    if eps and not any(i.live for i in eps.values()):
        return 3
    if any(not i.live and i.absence == "configuration" for i in eps.values()):
        return 3  # a misconfigured EP makes a run incomplete whatever its role (as check)
    for m in models:
        for v in m.eps:
            if v.ep in required_cols and any(g.outcome is None for g in v.gaps):
                return 3
        if m.used and all(g.outcome is None for v in m.eps for g in v.gaps) \
                and not any(v.passed for v in m.eps):
            return 3  # features used, and not one of them has an outcome on any EP
    return 0
