"""The self-test: every probe proves, on the CPU EP, that it catches every fault.

A release gate is only as good as its probes. :func:`run_selftest` runs the catalog (or a
selection) once on the clean CPU EP and once per fault of :data:`epaudit.run.faults.EXPECTED`,
each fault in its own worker with every feature (``runner.probe_ep`` with a
:class:`~epaudit.matrix.core.Provider` built here, no matrix), classifies every observation
exactly as ``epaudit check`` does, and compares each outcome with the one the fault must
produce. The result is a features x faults detection table.

Features the matrix declares ``skip`` on CPU (a known CPU deviation from the spec) are
not run: their faults are not applicable, and the table says why.

Applicability: a fault applies to a feature when the clean CPU run of that feature is
``PASS``. A feature the CPU EP refuses (``REJECTED``) or inlines (``DECOMPOSED``) has no
outputs to corrupt and no session to kill, so its faults are shown as not applicable
with the clean outcome. A clean outcome that is neither a pass nor a loud refusal
(silent, crash, timeout, error) is itself a miss: the probe or its reference is wrong.

``kill`` and ``hang`` count as detected only when the worker's stderr carries the fault's
marker (``epaudit.worker.faults.FAULT_MARKER``): the crash or timeout must be the injected one, reached
after session creation, not a slow start-up.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..classify.outcome import classify
from ..contract.outcomes import Outcome
from ..contract.probes import Feature
from ..contract.results import Classified
from ..matrix.model import Matrix, Provider
from ..worker.faults import FAULT_MARKER
from . import faults as _faults
from .probeset import ProbeSet
from .runner import DEFAULT_TIMEOUT, probe_ep

#: The faults, in table order, with the outcome each must produce.
FAULTS: tuple[str, ...] = tuple(_faults.EXPECTED)
#: Per-probe limit for the ``hang`` fault, seconds: the hang starts right after session
#: creation (milliseconds for these models) and replacement workers finish starting
#: before the clock runs (``workers._fresh_worker``), so a short limit is enough.
HANG_TIMEOUT = 0.5
#: Clean outcomes that mean "the CPU EP cannot run this feature", loudly: not a miss.
_LOUD = (Outcome.REJECTED, Outcome.DECOMPOSED, Outcome.FALLBACK)
#: Column name of the clean run in tables and misses.
CLEAN = "clean"


@dataclass(frozen=True, slots=True)
class Detection:
    """One (feature, fault) cell of the self-test.

    Attributes:
        feature_id: catalog id.
        fault: the injected fault (a key of :data:`epaudit.run.faults.EXPECTED`), or
            :data:`CLEAN` for the run without a fault.
        expected: the outcome the fault must produce (for ``clean``: ``PASS``).
        got: the outcome epaudit produced; ``None`` when the fault does not apply.
        detected: ``got`` is ``expected`` (and, for kill/hang, the fault's marker was
            seen); always ``True`` when the fault does not apply.
        summary: the classifier's one line, or why the fault does not apply.
    """

    feature_id: str
    """Catalog id."""
    fault: str
    """Fault name, or "clean"."""
    expected: Outcome
    """Outcome the fault must produce."""
    got: Outcome | None
    """Outcome produced; None when not applicable."""
    detected: bool
    """The fault was caught as it must be."""
    summary: str = ""
    """Classifier summary or why not applicable."""

    @property
    def applies(self) -> bool:
        """The fault was applied to this feature (its clean run passed)."""
        return self.got is not None


@dataclass(frozen=True)
class SelftestResult:
    """The features x faults detection table.

    Attributes:
        features: feature ids, catalog order.
        faults: fault names, table order.
        clean: feature id -> the clean CPU run's :class:`Detection` (fault ``clean``).
        cells: (feature id, fault) -> :class:`Detection`.
        interpreter: the Python that ran the workers.
    """

    features: tuple[str, ...]
    """Feature ids."""
    faults: tuple[str, ...]
    """Fault names."""
    clean: Mapping[str, Detection]
    """Clean run per feature."""
    cells: Mapping[tuple[str, str], Detection] = field(default_factory=dict)
    """Per (feature, fault)."""
    interpreter: str = ""
    """Worker interpreter."""

    @property
    def misses(self) -> tuple[Detection, ...]:
        """Every cell that failed: a clean run that is silently wrong or died, and every
        applicable fault that was not caught as it must be; catalog order."""
        out = []
        for fid in self.features:
            if not self.clean[fid].detected:
                out.append(self.clean[fid])
            out.extend(d for f in self.faults if not (d := self.cells[(fid, f)]).detected)
        return tuple(out)

    @property
    def exit_code(self) -> int:
        """0 when every fault was caught everywhere it applies, else 1; also 1 when no
        (feature, fault) pair applied at all: a self-test that proved nothing cannot pass."""
        applied = any(d.applies for d in self.cells.values())
        return 1 if self.misses or not applied else 0


def fault_provider(fault: str | None, python: str | None = None) -> Provider:
    """The CPU EP, clean (``fault`` None) or with ``fault`` injected, as a provider."""
    alias = "CPU" if fault is None else f"CPU+{fault}"
    return Provider(alias, "CPUExecutionProvider", python=python, inject_fault=fault)


def _clean_detection(fid: str, c: Classified) -> Detection:
    ok = c.outcome is Outcome.PASS or c.outcome in _LOUD
    return Detection(fid, CLEAN, Outcome.PASS, c.outcome, ok, c.summary)


def _fault_detection(fid: str, fault: str, clean: Classified, c: Classified, probe=None) -> Detection:
    expected = _faults.EXPECTED[fault]
    if clean.outcome is not Outcome.PASS:
        return Detection(fid, fault, expected, None, True,
                         f"not applicable: the clean CPU run is {clean.outcome.value}")
    why = _faults.not_applicable(fault, probe) if probe is not None else ""
    if why:
        return Detection(fid, fault, expected, None, True, why)
    if fault in ("decompose", "decompose_wrong") and (
            (c.outcome is Outcome.REJECTED and "(Decomposed" in str((c.evidence.get("error") or {}).get("message", "")))
            or (c.outcome is Outcome.CRASH and FAULT_MARKER not in str(c.evidence.get("stderr", "")))):
        # ORT could not load the node inside the function wrapper: its shape inference fails
        # there (UnfoldTensor in 1.31.1), or session creation segfaults (SimplifiedLayerNormalization
        # in 1.31.1, measured). The fault was never committed: no session ran the wrapper.
        verb = "refused" if c.outcome is Outcome.REJECTED else "crashed on"
        return Detection(fid, fault, expected, None, True,
                         f"not applicable: ORT {verb} the node wrapped in a function: {c.summary}")
    detected = c.outcome is expected
    summary = c.summary
    if fault == "refuse" and c.outcome is Outcome.DECOMPOSED and probe is not None:
        # ORT inlines an operator's function body when its kernel is refused (ReduceLogSumExp
        # in bfloat16): loud, never a pass, and what a refusing EP does to such an operator.
        detected, summary = True, f"caught as DECOMPOSED (function body inlined): {c.summary}"
    placed = _faults.PLACEMENT.get(fault)
    if detected and placed is not None:
        verdict = (c.evidence.get("placement_verdict") or {}).get("kind")
        if verdict != placed:
            # The outcome alone is not enough: a fallback that is also wrong must say both.
            detected = False
            summary = f"{c.outcome.value} with placement {verdict or 'unrecorded'}, not {placed}: {c.summary}"
    if detected and fault in ("kill", "hang"):
        marker = f"{FAULT_MARKER}{fault}"
        if marker not in str(c.evidence.get("stderr", "")):
            detected = False
            summary = f"{c.outcome.value} without the worker's '{marker}' marker: not the injected fault"
    return Detection(fid, fault, expected, c.outcome, detected, summary)


def cpu_skips(matrix: Matrix) -> dict[str, str]:
    """Feature id -> reason, for every cell the matrix declares ``skip`` on ``CPU``."""
    out = {}
    for fid in matrix.features:
        decl = matrix.declaration(fid, "CPU")
        if decl is not None and decl.status == "skip":
            out[fid] = f"declared skip on CPU ({decl.issue}): {decl.reason}"
    return out


def run_selftest(features: Sequence[Feature], *, faults: Sequence[str] = FAULTS,
                 timeout: float = DEFAULT_TIMEOUT, hang_timeout: float = HANG_TIMEOUT,
                 python: str | None = None, skip: Mapping[str, str] | None = None,
                 stop=None) -> SelftestResult:
    """Run ``features`` on the clean CPU EP and under every fault; classify; compare.

    Args:
        features: the features to test (catalog order is kept).
        faults: fault names (keys of :data:`epaudit.run.faults.EXPECTED`).
        timeout: per-probe limit for every run but ``hang``, seconds.
        hang_timeout: per-probe limit under the ``hang`` fault, seconds.
        python: worker interpreter (default: this one).
        skip: feature id -> reason, for features not to run (a known CPU deviation declared
            ``skip`` in the matrix, :func:`cpu_skips`): shown as skipped, faults not applicable.
        stop: interruption (:func:`epaudit.run.interrupt.stop_on_signals`): when set, every
            worker is killed at once and an empty result (no feature) is returned.

    Returns:
        The :class:`SelftestResult`; never raises for EP trouble.

    Raises:
        KeyError: an unknown fault name.
    """
    for f in faults:
        if f not in _faults.EXPECTED:
            raise KeyError(f"unknown fault {f!r}; one of {', '.join(_faults.EXPECTED)}")
    skip = dict(skip or {})
    probes = ProbeSet(features)
    providers = [fault_provider(None, python)] + [fault_provider(f, python) for f in faults]
    tally = _Tally(probes, skip, [p.inject_fault for p in providers[1:]])
    # One worker per fault, all at once: the threads mostly wait on their workers (the
    # hang column sleeps through its timeouts). Each observation is judged as it arrives
    # and only its detection is kept (the run's memory does not grow with the catalog).
    try:
        with ThreadPoolExecutor(max_workers=len(providers)) as pool:
            futures = [pool.submit(probe_ep, p, features, probes, skip=skip, stop=stop, observe=tally.observed,
                                   timeout=hang_timeout if p.inject_fault == "hang" else timeout)
                       for p in providers]
            for fut in futures:
                fut.result()
    finally:
        probes.close()
    if stop is not None and stop.is_set():  # a part of a self-test proves nothing
        return SelftestResult((), tuple(faults), {}, {}, python or sys.executable)
    clean, cells = tally.table([f.id for f in features], list(faults))
    return SelftestResult(tuple(f.id for f in features), tuple(faults), clean, cells,
                          python or sys.executable)


def _brief(c: Classified) -> Classified:
    """What a detection reads of a cell: outcome, summary and three bits of evidence."""
    ev = c.evidence
    keep: dict = {}
    message = (ev.get("error") or {}).get("message")
    if message:
        keep["error"] = {"message": str(message)[:1000]}
    kind = (ev.get("placement_verdict") or {}).get("kind")
    if kind:
        keep["placement_verdict"] = {"kind": kind}
    if ev.get("stderr"):
        keep["stderr"] = str(ev["stderr"])[-2000:]
    return Classified(c.feature_id, c.ep, c.outcome, c.summary[:500], keep, c.control, c.seconds)


class _Tally:
    """Detections made as observations arrive, from every fault's worker at once: a fault's
    cell is judged once the clean run of its feature is known; the clean cell is dropped
    once every fault of its feature is judged."""

    def __init__(self, probes: ProbeSet, skip: Mapping[str, str], faults: Sequence[str]):
        import threading

        self._probes, self._skip, self._faults = probes, skip, list(faults)
        self._lock = threading.Lock()
        self._base: dict[str, Classified] = {}
        self._waiting: dict[str, dict[str, Classified]] = {}
        self._left: dict[str, int] = {}
        self.clean: dict[str, Detection] = {}
        self.cells: dict[tuple[str, str], Detection] = {}

    def observed(self, alias: str, obs) -> None:
        fid = obs.feature_id
        built = self._probes[fid] if obs.status == "ran" else None
        c = _brief(classify(obs, None if isinstance(built, str) else built, "CPUExecutionProvider"))
        fault = alias.partition("+")[2] or None
        with self._lock:
            if fault is None:
                self._base[fid] = c
                self._left.setdefault(fid, len(self._faults))
                self.clean[fid] = (Detection(fid, CLEAN, Outcome.PASS, Outcome.SKIPPED, True, self._skip[fid])
                                   if fid in self._skip else _clean_detection(fid, c))
                pending = self._waiting.pop(fid, {})
            elif fid in self._base:
                pending = {fault: c}
            else:
                self._waiting.setdefault(fid, {})[fault] = c
                return
            base = self._base[fid]
        for name, fc in pending.items():
            probe = self._probes[fid] if base.outcome is Outcome.PASS else None
            d = _fault_detection(fid, name, base, fc, probe if not isinstance(probe, str) else None)
            with self._lock:
                self.cells[(fid, name)] = d
                self._left[fid] -= 1
                if self._left[fid] == 0:
                    del self._base[fid]

    def table(self, ids: Sequence[str], faults: Sequence[str]):
        """``(clean, cells)`` in catalog and fault order; a cell no worker answered (never
        expected) is a miss saying so."""
        lost = "no observation: the worker never answered for it"
        clean = {fid: self.clean.get(fid) or Detection(fid, CLEAN, Outcome.PASS, None, False, lost) for fid in ids}
        cells = {(fid, f): self.cells.get((fid, f)) or Detection(fid, f, _faults.EXPECTED[f], None, False, lost)
                 for fid in ids for f in faults}
        return clean, cells
