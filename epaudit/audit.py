"""One audit run, end to end: plan -> workers -> classification -> gate -> RunResult.

The CLI calls :func:`run`; tests call it too, with small matrices and faulty providers.
"""

from __future__ import annotations

import datetime as _dt
import platform
import sys
import threading
from typing import Iterable, Sequence

from . import __version__, catalog
from .cache.probecache import ProbeCache
from .catalog import CATALOG_VERSION
from .classify.outcome import classify
from .contract.cellstore import CellStore
from .contract.probes import Feature
from .contract.results import RunResult
from .gate.claims import attach, cell_facts
from .gate.rules import apply, describe
from .matrix.model import Matrix, Provider
from .reference import SEMANTICS
from .run.probeset import ProbeSet
from .run.runner import DEFAULT_TIMEOUT, ProgressFn, run_plan


def environment() -> dict:
    """The parent's environment: epaudit, onnx, numpy, Python, platform, and the run's id
    (``run_id``: 32 random hex digits, the same in every report of the run; a fleet merge
    refuses one run under two names) (JSON-ready)."""
    import uuid

    import numpy

    from .cache.probecache import onnx_version

    return {"epaudit": __version__, "onnx": onnx_version(), "numpy": numpy.__version__,
            "python": sys.version.split()[0], "platform": platform.platform(), "run_id": uuid.uuid4().hex}


def run(matrix: Matrix, *, providers: Sequence[Provider] | None = None,
        features: Sequence[Feature] | None = None, timeout: float = DEFAULT_TIMEOUT,
        jobs: int | None = None, gate: bool = True, require: Iterable[str] = (),
        strict: bool = False, today: _dt.date | None = None, progress: ProgressFn | None = None,
        stop: threading.Event | None = None, cache: ProbeCache | None = None,
        allow_absent: Iterable[str] = ()) -> RunResult:
    """Probe ``features`` on ``providers`` (default: every provider of the matrix).

    Cells declared ``skip`` are not probed. Returns the :class:`RunResult` every report
    is made from; ``gate=False`` (``epaudit probe``) leaves ``gate`` as ``None``.

    ``allow_absent`` names gated EPs that may be not live (``--allow-absent``): the
    verdict then names them as not audited instead of being incomplete.

    ``stop`` (set by a signal handler, see :mod:`epaudit.run.interrupt`) interrupts the run:
    workers are killed, the probes that finished are kept, the result is marked
    ``incomplete`` and the gate exits 3 unless a failing finding is already known.
    """
    providers = list(matrix.providers.values()) if providers is None else list(providers)
    features = list(catalog.FEATURES if features is None else features)
    skips = {p.alias: [f.id for f in features
                       if (d := matrix.declaration(f.id, p.alias)) is not None and d.status == "skip"]
             for p in providers}
    probes = ProbeSet(features, cache)  # built in the background while the workers start
    names = {p.alias: p.name for p in providers}
    # Each observation is classified on its EP's thread as it arrives (while the worker runs
    # the next probe) and only its outcome and evidence are kept, the evidence on disk
    # (:class:`CellStore`): the run's memory does not grow with the catalog.
    store = CellStore()

    def observed(alias: str, obs) -> None:
        built = probes[obs.feature_id] if obs.status == "ran" else None  # never waits for the others
        c = classify(obs, None if isinstance(built, str) else built, names[alias])
        store.put(c, facts=cell_facts(c))

    try:
        runs = run_plan(providers, features, timeout=timeout, skips=skips, jobs=jobs,
                        progress=progress, stop=stop, probes=probes, observe=observed)
        order = [(f.id, alias) for alias in runs for f in features]
        missing = sum(1 for key in order if key not in store)  # interrupted before they finished
        store.reorder(order)
        if missing == 0:  # every probe was built (an interrupted run may have stopped building)
            probes.save()
    finally:
        probes.close()
    results = store
    eps = {alias: r.info for alias, r in runs.items()}
    ids = tuple(f.id for f in features)
    verdict = apply(matrix, eps, results, ids, require=require, strict=strict, today=today,
                    unfinished=missing, allow_absent=allow_absent) if gate else None
    declared = {(f, a): describe(d) for f in ids for a in eps
                if (d := matrix.declaration(f, a)) is not None}
    result = RunResult(matrix_path=matrix.path, features=ids, eps=eps, results=results, gate=verdict,
                       environment=environment(), semantics=SEMANTICS, incomplete=missing > 0,
                       declared=declared, catalog_version=CATALOG_VERSION)
    # Registered x claimed x observed per cell, claim findings, coverage (docs/surface.md).
    return attach(result, providers, features, strict=strict, line_of=matrix.line_of,
                  cache_base=cache.directory if cache is not None else None)
