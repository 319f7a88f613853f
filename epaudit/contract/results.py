"""Result records shared by the runner, the classifier, the gate and the reports.

All frozen dataclasses; every field documented. Arrays never leave the runner and the
classifier: what reaches reports is numbers and text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from .outcomes import FindingKind, Outcome


#: Version of a run's saved form (the JSON report, ``epaudit/report/report.schema.json``).
#: 2: every cell whose session ran holds its comparisons and placement verdict, and FALLBACK
#: and DECOMPOSED cells are judged by their numbers too (docs/outcomes-and-gates.md); 1 is
#: refused on read, its cells meant something else. 3: a run id, the versions that made it
#: and, with a results key, a signature (issue 24); 2 is still read, without them.
REPORT_SCHEMA_VERSION = 3

@dataclass(frozen=True)
class EPInfo:
    """One EP as the run found it.

    Attributes:
        alias: matrix alias (``CUDA``).
        name: ORT provider name.
        live: the canary node ran on this EP and computed right.
        reason: why it is not live (ORT's words), or ``""``.
        python: interpreter of its worker.
        distribution: onnxruntime distribution and version seen by the worker
            (``onnxruntime-gpu 1.31.1``), or ``""`` when no worker started.
        ort_version: ``onnxruntime.__version__`` in the worker.
        devices: what ``onnxruntime.get_ep_devices()`` listed in the worker.
        options: provider options used.
        fault: the injected fault (test hook), or ``None``.
        build: what the worker's onnxruntime says about its own build: ``package``,
            ``version``, ``cuda_version``, ``cudnn_version`` (from
            ``onnxruntime.capi.build_and_package_info``, where the wheel has them) and
            ``build_info`` (``onnxruntime.get_build_info()``); keys absent when unknown.
        machine: label of the machine the EP ran on (``h100``; see ``epaudit/providers/machine.py``),
            or ``""`` when not recorded.
        matrix_alias: the matrix alias this column was probed as, when the column is
            named ``ALIAS@MACHINE`` in a merged fleet run (``epaudit/saved/fleet.py``); ``""``
            when the column is the matrix alias itself.
        library: the plugin EP library registered in the worker (resolved path), or ``""``
            for an EP built into onnxruntime.
        absence: ``"environment"``, ``"configuration"`` or ``""`` (see the field).
    """

    alias: str
    """Matrix alias."""
    name: str
    """ORT provider name."""
    live: bool
    """Canary placed on the EP and correct."""
    reason: str = ""
    """Why not live."""
    python: str = ""
    """Worker interpreter."""
    distribution: str = ""
    """onnxruntime distribution in the worker."""
    ort_version: str = ""
    """onnxruntime version in the worker."""
    devices: tuple[Mapping[str, Any], ...] = ()
    """Devices ORT found."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Provider options."""
    fault: str | None = None
    """Injected fault, if any."""
    build: Mapping[str, str] = field(default_factory=dict)
    """The worker's onnxruntime build facts (CUDA/cuDNN versions where exposed)."""
    machine: str = ""
    """Machine label, or ""."""
    matrix_alias: str = ""
    """Matrix alias of a fleet column ``ALIAS@MACHINE``, or "" when ``alias`` is it."""

    @property
    def base_alias(self) -> str:
        """The matrix alias whose declarations and ``[gate]`` roles apply to this column."""
        return self.matrix_alias or self.alias
    library: str = ""
    """Plugin EP library path registered, or ""."""
    absence: str = ""
    """Why a not-live EP is not live, in kind: ``"environment"`` (the machine lacks a
    device, driver or library, or an optional ``$VAR`` is unset), ``"configuration"`` (the
    interpreter is not a Python with onnxruntime and numpy, never answered, or its
    onnxruntime has no such provider: a setup mistake, which makes the run incomplete
    whatever the EP's role), or ``""`` (live, or not recorded)."""


@dataclass(frozen=True, slots=True)
class CaseRun:
    """What the worker did with one model (subject or control).

    Attributes:
        role: ``"subject"`` or ``"control"``.
        ok: the session was created and the run returned.
        stage: where it stopped: ``create``, ``run`` or ``done``.
        error: ORT's status as ``{stage, type, code, status, message}``, or ``None``.
        placement: ``[{ep, op_type, domain, name}]`` per node, or ``None`` if unknown: the
            nodes that ran (the profile) where ``placement_source`` is ``profiling``, else the
            nodes as assigned.
        placement_source: ``assignment_info`` or ``profiling`` (how placement was seen).
        assigned: the assignment info of a profiled session (``None``: none recorded, or
            ``placement`` is it); the two differ where ORT rewrote the graph after assigning.
        guard_refused: ORT refused the session because the fallback guard found nodes on CPU;
            the outputs (if any) are from the same model run with CPU fallback allowed.
        fallback_error: that run's own failure, when it could not be made.
        asked: the provider name the session asked for.
        outputs: output name -> array as the EP returned it.
        create_ms: session creation time, milliseconds.
        run_ms: one run's time, milliseconds.
        binding: how outputs were taken: pre-bound poisoned buffers (IOBinding, how many
            runs, which device) or a plain run and why; ``""`` when the run never started.
        poisoned: one ``{output: element count}`` per bound run: elements still holding
            that run's poison after it (0 everywhere for a kernel that wrote everything).
    """

    role: str
    """subject / control."""
    ok: bool
    """Created and ran."""
    stage: str
    """create / run / done."""
    error: Mapping[str, Any] | None
    """ORT status, or None."""
    placement: tuple[Mapping[str, str], ...] | None
    """Node placements."""
    placement_source: str | None
    """How placement was seen."""
    asked: str
    """Provider asked for."""
    outputs: Mapping[str, np.ndarray]
    """Raw outputs."""
    create_ms: float | None
    """Session creation, ms."""
    run_ms: float | None
    """One run, ms."""
    binding: str = ""
    """IOBinding (runs, device) or plain run and why."""
    poisoned: tuple[Mapping[str, int], ...] = ()
    """Per bound run: output -> elements still holding that run's poison."""
    assigned: tuple[Mapping[str, str], ...] | None = None
    """Assignment info of a profiled session."""
    guard_refused: bool = False
    """The fallback guard refused; outputs from a run with fallback allowed."""
    fallback_error: Mapping[str, Any] | None = None
    """Why the run with fallback allowed failed."""


@dataclass(frozen=True, slots=True)
class Observation:
    """What one probe did on one EP, before classification.

    Attributes:
        feature_id: catalog id.
        ep: EP alias.
        status: ``ran`` (cases below), ``crash``, ``timeout``, ``unavailable``, ``skip``
            or ``error`` (epaudit failed; ``detail`` holds the traceback).
        cases: role -> :class:`CaseRun` when ``status == "ran"``.
        detail: exit status / signal, timeout, reason or traceback.
        stderr: what the worker printed while running this probe (trimmed).
        seconds: wall time of the probe, seconds.
    """

    feature_id: str
    """Catalog id."""
    ep: str
    """EP alias."""
    status: str
    """ran / crash / timeout / unavailable / skip / error."""
    cases: Mapping[str, CaseRun] = field(default_factory=dict)
    """Role -> case run."""
    detail: str = ""
    """Why, for anything but ran."""
    stderr: str = ""
    """Worker stderr during the probe."""
    seconds: float = 0.0
    """Wall time, s."""


@dataclass(frozen=True, slots=True)
class Classified:
    """An outcome with the evidence that decided it.

    Attributes:
        feature_id: catalog id.
        ep: EP alias.
        outcome: the outcome class.
        summary: one line for humans (error text, worst error and where).
        evidence: numbers and text behind the outcome (max abs/rel error, output name,
            first bad index, ORT status, placement, signal), JSON-ready.
        control: outcome of the control model on the same EP, or ``None`` if not run.
        seconds: wall time of the probe, seconds.
    """

    feature_id: str
    """Catalog id."""
    ep: str
    """EP alias."""
    outcome: Outcome
    """Outcome class."""
    summary: str = ""
    """One-line explanation."""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """JSON-ready evidence."""
    control: Outcome | None = None
    """Control model's outcome."""
    seconds: float = 0.0
    """Wall time, s."""


@dataclass(frozen=True)
class Finding:
    """A gate rule broken by an outcome and a declaration together.

    Attributes:
        kind: the rule.
        feature_id: catalog id, or ``""`` for EP-level findings (incomplete).
        ep: EP alias.
        failing: ``True`` when it fails the gate (``undeclared`` is a warning unless strict).
        declared: the declaration in words (``supported``, ``unsupported (issue …)``,
            ``undeclared``).
        outcome: the outcome seen, or ``None`` for declaration-only findings.
        message: one line: what is wrong and what to do.
        line: matrix line of the cell (or feature table), for annotations.
    """

    kind: FindingKind
    """Rule broken."""
    feature_id: str
    """Catalog id or ""."""
    ep: str
    """EP alias."""
    failing: bool
    """Fails the gate."""
    declared: str
    """Declaration in words."""
    outcome: Outcome | None
    """Outcome seen."""
    message: str
    """Explanation."""
    line: int | None = None
    """Matrix line."""


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict over one run.

    Attributes:
        findings: every finding, failing ones first.
        exit_code: 0 passed, 1 failing findings, 3 incomplete (docs/outcomes-and-gates.md "Exit codes").
        verdict: one line for humans.
    """

    findings: tuple[Finding, ...]
    """All findings."""
    exit_code: int
    """0, 1 or 3."""
    verdict: str
    """One line."""


@dataclass(frozen=True)
class ConformanceInfo:
    """What a conformance run ran and how each EP fared (``epaudit conformance``).

    Attributes:
        ops: the operators whose ONNX backend node test cases ran (``("Attention",)``).
        onnx_version: the onnx package the cases were generated from.
        expanded: ``_expanded`` cases (function bodies, not the EP's kernel) were run.
        generated: how many cases onnx has for ``ops``, ``_expanded`` ones included
            (what skip entries are matched against).
        summary: alias -> counts: ``pass`` (PASS, not skipped), ``fail`` (a failing
            finding: unskipped failure, stale skip, crash…), ``gap`` (a skipped case that
            failed: accounted for), ``unavailable`` (the EP was not live).
        skips: one per ``[[conformance.skip]]`` entry of an EP in the run:
            ``{ep, test, issue, until, reason, line, matches}`` (matched case names).
    """

    ops: tuple[str, ...]
    """Operators."""
    onnx_version: str
    """onnx the cases came from."""
    expanded: bool
    """_expanded cases included."""
    generated: int
    """Cases onnx has for ops."""
    summary: Mapping[str, Mapping[str, int]]
    """Alias -> pass / fail / gap / unavailable counts."""
    skips: tuple[Mapping[str, Any], ...] = ()
    """Skip entries with their matches."""


@dataclass(frozen=True)
class RunResult:
    """Everything one run produced: the object every report is made from.

    Attributes:
        matrix_path: the matrix used.
        features: feature ids in catalog order.
        eps: alias -> :class:`EPInfo`, in plan order.
        results: (feature id, alias) -> :class:`Classified`.
        gate: the verdict, or ``None`` when no gate was applied (``probe``).
        environment: epaudit, onnx, numpy, Python, platform of the parent.
        semantics: the reference semantics version every reference follows.
        incomplete: the run was interrupted; not every probe finished.
        catalog_version: :data:`epaudit.catalog.CATALOG_VERSION` of the probes that ran.
        declared: (feature id, alias) -> the declaration in words (``supported``,
            ``unsupported <issue> until <date>``, ``skip …``); undeclared cells absent.
        machines: machine label -> facts (hostname, GPUs with name, compute capability,
            driver, CUDA driver version; see :func:`epaudit.providers.machine.collect`): one entry
            for a run on one machine, one per machine for a merged fleet run.
        conformance: for ``epaudit conformance``, what ran and the per-EP summary; the
            "features" are then backend test case names and a skipped case is declared
            ``xfail <issue> until <date>``.
        coverage: alias -> the probe coverage of that EP's surface, JSON-ready
            (:func:`epaudit.surface.coverage.coverage`; ``status`` says when there is none).
        shard: for a run of one shard (``--shard K/N``), ``{index, count, selected, digest,
            items}`` (:func:`epaudit.run.shard.info`); empty for a whole run.
    """

    matrix_path: str
    """Matrix used."""
    features: tuple[str, ...]
    """Feature ids."""
    eps: Mapping[str, EPInfo]
    """EPs in plan order."""
    results: Mapping[tuple[str, str], Classified]
    """Per cell."""
    gate: GateResult | None
    """Verdict."""
    environment: Mapping[str, Any]
    """Parent environment."""
    semantics: str
    """Reference semantics version."""
    incomplete: bool = False
    """Interrupted."""
    declared: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Declarations in words, per cell."""
    catalog_version: int = 0
    """Catalog version of the probes."""
    machines: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Machine label -> facts."""
    conformance: ConformanceInfo | None = None
    """Conformance-run details; None for check/probe runs."""
    coverage: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Alias -> surface coverage (docs/surface.md)."""
    shard: Mapping[str, Any] = field(default_factory=dict)
    """This run's shard of the selection, or empty."""


@dataclass(frozen=True)
class ProviderStatus:
    """One configured EP as ``epaudit providers`` finds it (no probe runs).

    Attributes:
        alias: matrix alias.
        name: ORT provider name.
        python: the worker's interpreter (as configured, or the one that ran).
        distribution: onnxruntime distribution and version in the worker, or ``""``.
        listed: what ORT says: ``"built in"`` (in ``get_available_providers()``),
            ``"plugin"`` (a library is configured), ``"not listed"``, or ``""`` when no
            worker started.
        library: the plugin library registered (resolved path), or ``""``.
        live: the canary node was placed on the EP and computed right.
        reason: why not live, in ORT's words, or ``""``.
        devices: this EP's devices: the plugin devices selected, else those
            ``get_ep_devices()`` lists for the provider name (none for most built-in EPs).
    """

    alias: str
    """Matrix alias."""
    name: str
    """ORT provider name."""
    python: str = ""
    """Worker interpreter."""
    distribution: str = ""
    """onnxruntime distribution."""
    listed: str = ""
    """built in / plugin / not listed."""
    library: str = ""
    """Plugin library path."""
    live: bool = False
    """Canary ran on the EP."""
    reason: str = ""
    """Why not live."""
    devices: tuple[str, ...] = ()
    """Devices ORT found."""
