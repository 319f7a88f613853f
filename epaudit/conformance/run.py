"""One conformance run, end to end: cases -> workers -> classification -> skip gate -> RunResult.

The cases run through the same runner as probes (one worker per EP, canary first,
CPU fallback disabled for non-CPU EPs, placement checked, crashes and hangs contained),
each case as a probe subject without a control, and are classified by the same
classifier with the case's own tolerance. The CLI's ``conformance`` command calls
:func:`run`; tests call it too.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import threading
from typing import Iterable, Sequence

from ..audit import environment
from ..catalog.corpus.cases import BackendCase, ConformanceError, load_cases, onnx_version
from ..classify.outcome import classify
from ..contract.cellstore import CellStore
from ..contract.results import ConformanceInfo, RunResult
from ..matrix.model import Matrix, Provider
from ..run.runner import DEFAULT_TIMEOUT, ProgressFn, run_plan
from . import gate as _gate

#: The operators run when ``--op`` is not given.
DEFAULT_OPS = ("Attention",)


def select(cases: Sequence[BackendCase], *, expanded: bool = False,
           patterns: Iterable[str] = ()) -> list[BackendCase]:
    """The cases to run: ``_expanded`` ones only when asked; names matching any glob in ``patterns``."""
    patterns = list(patterns)
    return [c for c in cases if (expanded or not c.expanded)
            and (not patterns or any(fnmatch.fnmatchcase(c.id, p) for p in patterns))]


def run(matrix: Matrix, *, ops: Sequence[str] = DEFAULT_OPS, providers: Sequence[Provider] | None = None,
        expanded: bool = False, patterns: Iterable[str] = (), timeout: float = DEFAULT_TIMEOUT,
        jobs: int | None = None, require: Iterable[str] = (), today: _dt.date | None = None,
        progress: ProgressFn | None = None, stop: threading.Event | None = None,
        cache_dir=None, cases: Sequence[BackendCase] | None = None,
        allow_absent: Iterable[str] = (), only: Iterable[str] | None = None) -> RunResult:
    """Run the ONNX backend node test cases of ``ops`` on every provider and gate them.

    Args:
        matrix: providers, ``[gate] require`` and the ``[[conformance.skip]]`` entries.
        ops: operators whose cases run (``collect_testcases(op_type=...)``).
        providers: EPs to run on (default: every provider of the matrix).
        expanded: also run the ``_expanded`` (function-body) cases.
        patterns: shell globs restricting which cases run (skip entries are still judged
            against every generated case).
        allow_absent: gated EPs that may be not live (``--allow-absent``).
        timeout: per-case limit, seconds.
        cache_dir: where generated cases are cached (default: see :mod:`.cases`).
        cases: already loaded cases of ``ops`` (tests share one generation).
        only: run just these case names of the selection (one shard, ``--shard K/N``); skip
            entries are still judged against every generated case.

    Returns:
        The :class:`RunResult` every report is made from; ``conformance`` holds the
        per-EP pass / fail / gap summary.

    Raises:
        ConformanceError: cases cannot be generated or loaded, ``patterns`` match no case,
            or a provider injects ``ignore`` (a fault that needs a control model).
    """
    providers = list(matrix.providers.values()) if providers is None else list(providers)
    for p in providers:
        if p.inject_fault == "ignore":
            raise ConformanceError(f"providers.{p.alias}.inject_fault = \"ignore\": conformance cases have no "
                                   "control model to run instead; use another fault")
    all_cases = list(load_cases(ops, cache_dir) if cases is None else cases)
    chosen = select(all_cases, expanded=expanded, patterns=patterns)
    if not chosen:
        raise ConformanceError(f"--case {' '.join(patterns)}: matches no {'/'.join(ops)} case"
                               + ("" if expanded else " (add --expanded for the _expanded ones)"))
    if only is not None:
        keep = set(only)
        chosen = [c for c in chosen if c.id in keep]
    probes = {c.id: (c.probe if c.probe is not None else c.error) for c in chosen}
    names = {p.alias: p.name for p in providers}
    # Classified as each case's observation arrives; only outcome and evidence are kept, the
    # evidence on disk (the run's memory does not grow with the number of cases).
    results = CellStore()

    def observed(alias: str, obs) -> None:
        built = probes[obs.feature_id] if obs.status == "ran" else None
        results.put(classify(obs, built if not isinstance(built, str) else None, names[alias]))

    runs = run_plan(providers, chosen, timeout=timeout, jobs=jobs, progress=progress, stop=stop, probes=probes,
                    observe=observed)
    order = [(c.id, alias) for alias in runs for c in chosen]
    unfinished = sum(1 for key in order if key not in results)
    results.reorder(order)
    incomplete = unfinished > 0
    eps = {alias: r.info for alias, r in runs.items()}
    ids = tuple(c.id for c in chosen)
    verdict, summary, skips = _gate.apply(matrix, eps, results, ids, [c.id for c in all_cases],
                                          require=require, today=today, allow_absent=allow_absent)
    if unfinished:  # Ctrl-C / SIGTERM: what finished is reported, the verdict is incomplete
        from ..contract.outcomes import FindingKind
        from ..contract.results import Finding
        from ..gate.rules import verdict as gate_verdict

        verdict = gate_verdict(verdict.findings + (Finding(
            FindingKind.INCOMPLETE, "", "", True, "", None, f"run interrupted: {unfinished} case(s) did not finish"),))
    declared = {}
    for case in ids:
        for alias in eps:
            skip = _gate.skip_for(matrix, case, alias)
            declared[(case, alias)] = skip.describe() if skip else "supported"
    version = onnx_version()
    info = ConformanceInfo(tuple(dict.fromkeys(ops)), version, expanded, len(all_cases), summary, skips)
    return RunResult(matrix_path=matrix.path, features=ids, eps=eps, results=results, gate=verdict,
                     environment=environment(), semantics=f"onnx-backend-node-tests/onnx-{version}",
                     incomplete=incomplete, declared=declared, catalog_version=0, conformance=info)
