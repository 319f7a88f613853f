"""Outcomes joined with the features a model uses: per model and EP, what would go wrong.

The verdict of a model on an EP is the worst of (a) the outcomes of the features its
nodes use (catalog features and the node-config probes built from its own nodes) and
(b) the whole model run on the EP (``--whole``), where one was run:

========================  ==============================================================
verdict                   when
========================  ==============================================================
cannot be loaded          an external data file is missing, short or outside the folder
would be silently wrong   a used feature is ``IGNORED``, ``UNWRITTEN``, ``NAN``,
                          ``MISMATCH``; or the whole model's outputs differ from the reference
would crash or hang       ``CRASH``, ``TIMEOUT`` (a gap must refuse, never crash)
would be refused          ``REJECTED``, or the whole model cannot be made or run
would fall back           ``FALLBACK`` (the node is placed on another EP)
would run decomposed      ``DECOMPOSED`` (no kernel of its own: its function body runs)
not checked               the EP is not live, a cell failed to build (``ERROR``), or saved
                          results lack a feature the model uses
partly checked            every probe ran passes, but some compute nodes have no probe in
                          their own configuration (``k of n compute nodes probed``)
would run as expected     every used feature passes and every compute node is probed in
                          its own configuration
========================  ==============================================================

A cell declared ``skip`` in the matrix is named beside the verdict (``declared gaps``),
never turning an otherwise passing model into "not checked". A disagreement between the
node probes and the whole model is said: a wrong whole model whose probes all pass means
a probe is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Sequence

from ..contract.outcomes import Outcome
from ..contract.results import Classified, EPInfo


class Verdict(str, Enum):
    """What a model would do on an EP (worst first in :data:`ORDER`)."""

    LOAD = "cannot be loaded"
    """The model's external data is missing, short or outside its folder."""
    SILENT = "would be silently wrong"
    """A used feature computes something wrong without an error."""
    CRASH = "would crash or hang"
    """A used feature crashed the worker or timed out."""
    REFUSED = "would be refused"
    """A used feature is refused loudly (session creation or run fails)."""
    FALLBACK = "would fall back"
    """A used feature's node would not run on the EP (placed on another EP)."""
    DECOMPOSED = "would run decomposed"
    """A used feature's node has no kernel of its own on the EP: its function body's
    primitives run instead (on the EP)."""
    UNCHECKED = "not checked"
    """Some used feature has no outcome on this EP (EP not live, not in results)."""
    PARTLY = "partly checked"
    """Every probe that ran passes, but some compute nodes have no probe of their own."""
    EXPECTED = "would run as expected"
    """Every used feature passes and every compute node is probed."""


ORDER = (Verdict.LOAD, Verdict.SILENT, Verdict.CRASH, Verdict.REFUSED, Verdict.FALLBACK, Verdict.DECOMPOSED,
         Verdict.UNCHECKED, Verdict.PARTLY, Verdict.EXPECTED)

_BY_OUTCOME = {Outcome.IGNORED: Verdict.SILENT, Outcome.UNWRITTEN: Verdict.SILENT, Outcome.NAN: Verdict.SILENT,
               Outcome.MISMATCH: Verdict.SILENT, Outcome.CRASH: Verdict.CRASH, Outcome.TIMEOUT: Verdict.CRASH,
               Outcome.REJECTED: Verdict.REFUSED, Outcome.FALLBACK: Verdict.FALLBACK,
               Outcome.DECOMPOSED: Verdict.DECOMPOSED, Outcome.PASS: Verdict.EXPECTED}


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
class Whole:
    """The whole model run on one EP (``--whole``) against its reference.

    Attributes:
        ep: EP column.
        status: ``match``, ``mismatch``, ``failed`` (the session could not be made or run),
            ``crashed`` (the process died or timed out), ``not run`` (with the reason in
            ``detail``), or ``reference differs`` (the difference is the reference's own
            optimised path: the EP agrees with it when graph optimisations are off).
        detail: one line: the worst output difference, ORT's message, or why not run.
        reference: what the EP was compared with (``CPU EP (onnxruntime 1.31.1)``,
            ``onnx.reference (float64)``).
        outputs: one dict per output: ``name``, ``match``, ``max_abs``, ``max_rel``, ``bad``,
            ``size``.
        first: the first node whose output diverges: ``node``, ``op``, ``config``,
            ``output``, ``max_abs``, ``bad``, ``method``, ``ran_on``, ``probe`` (the
            node-config probe's outcome there, when one ran), or ``None``.
        repro: the directory a reproduction was written to, or ``""``.
        notes: one line each (how the divergence was searched, a fusion the reference
            applies, a probe that is missing).
    """

    ep: str
    status: str
    detail: str = ""
    reference: str = ""
    outputs: tuple = ()
    first: Mapping[str, object] | None = None
    repro: str = ""
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict | None:
        """What the whole-model run alone implies (``None`` when it was not run)."""
        return {"match": Verdict.EXPECTED, "reference differs": Verdict.EXPECTED, "mismatch": Verdict.SILENT,
                "failed": Verdict.REFUSED, "crashed": Verdict.CRASH}.get(self.status)


@dataclass(frozen=True)
class EPVerdict:
    """One model on one EP.

    Attributes:
        ep: EP alias (or fleet column ``ALIAS@LABEL``).
        live: the EP was live in the run (or the saved results).
        verdict: the worst of the gaps, the coverage and the whole-model run.
        gaps: every used feature that does not pass, worst first (none when the EP is
            not live: nothing was checked there).
        passed: how many used features passed.
        reason: why the EP is not live (ORT's words), or ``""``.
        declared: used features the matrix declares ``skip`` on this EP (named beside the
            verdict, not probed).
        probed: compute nodes probed in their own configuration.
        compute: compute nodes of the model.
        whole: the whole-model run, or ``None``.
        notes: disagreements between the probes and the whole model, one line each.
    """

    ep: str
    live: bool
    verdict: Verdict
    gaps: tuple[Gap, ...] = ()
    passed: int = 0
    reason: str = ""
    declared: tuple[Gap, ...] = ()
    probed: int = 0
    compute: int = 0
    whole: Whole | None = None
    notes: tuple[str, ...] = ()


#: Node names shown per gap or uncovered item; the rest are counted.
SHOWN = 3


def judge(used: Mapping[str, Sequence[str]], ep: str, info: EPInfo | None,
          results: Mapping[tuple[str, str], Classified], declared: Mapping[str, tuple[str, str]],
          coverage: tuple[int, int] = (0, 0), whole: Whole | None = None, loadable: bool = True) -> EPVerdict:
    """The verdict of one model on one EP.

    Args:
        used: feature id -> names of the model's nodes that use it.
        ep: the EP column.
        info: the EP as the run found it, ``None`` when the run has no such EP.
        results: (feature id, EP) -> classified outcome.
        declared: feature id -> (declaration in words, issue link) for this EP.
        coverage: (compute nodes probed in their own configuration, compute nodes).
        whole: the whole-model run on this EP, if any.
        loadable: ``False`` when the model cannot be loaded (its external data).
    """
    probed, compute = coverage
    live = info is not None and info.live
    if not live:
        reason = info.reason if info is not None else f"{ep} is not in this run"
        return EPVerdict(ep, False, Verdict.LOAD if not loadable else Verdict.UNCHECKED, reason=reason or "not live",
                         probed=probed, compute=compute, whole=whole)
    gaps, skips, passed = [], [], 0
    for fid, nodes in used.items():
        c = results.get((fid, ep))
        outcome = c.outcome if c is not None else None
        if outcome is Outcome.PASS:
            passed += 1
            continue
        summary = c.summary if c is not None else "not in the results given"
        words, issue = declared.get(fid, ("undeclared", ""))
        gap = Gap(fid, outcome, summary, tuple(nodes[:SHOWN]), len(nodes), words, issue, verdict_of(outcome))
        (skips if outcome is Outcome.SKIPPED else gaps).append(gap)
    gaps.sort(key=lambda g: (ORDER.index(g.verdict), g.feature))
    verdicts = [g.verdict for g in gaps]
    if compute and probed < compute:
        verdicts.append(Verdict.PARTLY)
    if whole is not None and whole.verdict is not None:
        verdicts.append(whole.verdict)
    if not loadable:
        verdicts.append(Verdict.LOAD)
    # A pass is earned: a model of which nothing was checked is not "as expected".
    if not verdicts and not passed and not (whole is not None and whole.verdict is Verdict.EXPECTED):
        verdicts.append(Verdict.UNCHECKED)
    worst = min(verdicts, key=ORDER.index) if verdicts else Verdict.EXPECTED
    notes = []
    if whole is not None and whole.status == "mismatch" and not any(
            g.verdict is Verdict.SILENT for g in gaps):
        probe = whole.first.get("probe") if whole.first else None
        if whole.first and not probe:
            where = f" (the first diverging node, {whole.first.get('node')}, has no probe of its own)"
        elif probe and probe[0] == "PASS":
            where = f" (the first diverging node, {whole.first.get('node')}, passes its probe)"
        elif probe:
            where = (f" (the first diverging node's probe reads {probe[0]}: its outputs were not judged against "
                     "the reference)")
        else:
            where = ""
        notes.append("the whole model is wrong on this EP while no node probe reads silently wrong: a probe is "
                     "missing" + where)
    if whole is not None and whole.status in ("match", "reference differs") and any(
            g.verdict is Verdict.SILENT for g in gaps):
        notes.append("node probes find a silently wrong configuration that these whole-model inputs do not "
                     "show: the probes' inputs reach it, the seeded model inputs do not")
    return EPVerdict(ep, live, worst, tuple(gaps), passed, declared=tuple(skips), probed=probed, compute=compute,
                     whole=whole, notes=tuple(notes))


@dataclass(frozen=True)
class Uncovered:
    """A node configuration no probe exercises.

    Attributes:
        operator: ``domain.op_type``.
        item: what is not covered (``attribute softcap=50``, ``dtype bfloat16``,
            ``no probe at Conv-22 (probes at Conv-1, Conv-11)``, or ``operator`` when no
            feature probes the operator at all).
        nodes: a few node names.
        count: how many nodes.
    """

    operator: str
    item: str
    nodes: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class NodeConfig:
    """One distinct node configuration and its node-config probes, as reported.

    Attributes:
        words: the configuration in words.
        operator: ``domain.op_type``.
        nodes: every node that has it.
        probes: node-config feature ids.
        parts: feature id -> what it checks.
        skipped: what could not be exercised (for an unprobed configuration, why).
        probed: its ``config`` probe exists (the nodes count as probed).
        compute: how many of its nodes are compute nodes.
    """

    words: str
    operator: str
    nodes: tuple[str, ...]
    probes: tuple[str, ...]
    parts: Mapping[str, str]
    skipped: tuple[str, ...]
    probed: bool
    compute: int


@dataclass(frozen=True)
class ModelReport:
    """Everything ``scan`` says about one model.

    Attributes:
        path: the model file.
        nodes: how many nodes (subgraphs and functions included).
        opsets: domain -> version imported.
        external: external-data files referenced (never read by the probes).
        used: feature id -> node names using it (catalog features and node-config probes).
        configs: every distinct node configuration, probed or not.
        uncovered: configurations no probe exercises.
        eps: one :class:`EPVerdict` per EP of the run.
        domains: domain -> (nodes, compute nodes, compute nodes probed).
        problems: why the model cannot be loaded (external data), one line each.
        compute: compute nodes; probed: how many have a probe of their own.
    """

    path: str
    nodes: int
    opsets: Mapping[str, int]
    external: tuple[str, ...]
    used: Mapping[str, tuple[str, ...]]
    configs: tuple[NodeConfig, ...]
    uncovered: tuple[Uncovered, ...]
    eps: tuple[EPVerdict, ...] = ()
    domains: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    compute: int = 0
    probed: int = 0


@dataclass(frozen=True)
class ScanResult:
    """A whole scan: every model, the EPs and where the outcomes came from.

    Attributes:
        models: one report per model, in command-line order.
        eps: EP column -> info, in run order (the EPs asked for).
        source: ``probed now`` or ``saved results: <files>``.
        require: EPs named with ``--require``.
        exit_code: 0, 1, 2 or 3 (see :func:`exit_code`).
        notes: one-line remarks (node-config probes not run from saved results, ...).
        unreadable: one line per file that is not a readable model (the rest are scanned).
    """

    models: tuple[ModelReport, ...]
    eps: Mapping[str, EPInfo]
    source: str
    require: tuple[str, ...] = ()
    exit_code: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    unreadable: tuple[str, ...] = ()


def exit_code(models: Sequence[ModelReport], eps: Mapping[str, EPInfo], require: Sequence[str],
              unreadable: Sequence[str] = ()) -> int:
    """1: a model is silently wrong, crashes or hangs on any EP of the run, a probe failed
    (``ERROR``, an epaudit bug: ``check`` fails on it too), or a model is refused, falls back
    or cannot be loaded on a required EP; else 2 when a file could not be read as a model or
    a model cannot be loaded (the others are reported); else 3 when a required EP is not
    live, no EP of the run is live, a required EP has used features without an outcome, or
    a model uses features and none has an outcome anywhere; else 0
    (docs/outcomes-and-gates.md exit codes: a failing finding wins over incomplete)."""
    required_cols = {c for c, i in eps.items() if i.base_alias in require or c in require}
    fail = False
    for m in models:
        for v in m.eps:
            if v.verdict in (Verdict.SILENT, Verdict.CRASH):
                fail = True
            if v.ep in required_cols and v.verdict in (Verdict.REFUSED, Verdict.FALLBACK, Verdict.DECOMPOSED,
                                                       Verdict.LOAD):
                fail = True
            if any(g.outcome is Outcome.ERROR for g in v.gaps):
                fail = True
    if fail:
        return 1
    if unreadable or any(m.problems for m in models):
        return 2
    missing = [a for a in require if not any(i.live for c, i in eps.items() if c == a or i.base_alias == a)]
    if missing:
        return 3
    if eps and not any(i.live for i in eps.values()):
        return 3
    if any(not i.live and i.absence == "configuration" for i in eps.values()):
        return 3  # a misconfigured EP makes a run incomplete whatever its role (as check)
    for m in models:
        for v in m.eps:
            if v.ep in required_cols and any(g.outcome is None for g in v.gaps):
                return 3
        if m.used and all(g.outcome is None for v in m.eps for g in v.gaps) \
                and not any(v.passed for v in m.eps) and not any(v.whole for v in m.eps):
            return 3  # features used, and not one of them has an outcome on any EP
    return 0
