"""``epaudit sweep``: seeded configuration sweeps around the catalog's probes, with shrinking.

The catalog is as wide as the ONNX backend corpus: one shape, one set of values and a few
attribute values per case. Kernels choose code paths by shape, vector width and value, so
a sweep varies them within the schema (:mod:`.space`, :mod:`.families`, :mod:`.values`),
builds each configuration into a probe of the usual contract with a float64 reference
(:mod:`.build`, :mod:`.contrib`), runs them with the runner and classifier every ``check``
uses (:mod:`.engine`), shrinks each failure to a minimal configuration that still fails
the same way (:mod:`.shrink`), writes it as a standalone repro (:func:`epaudit.repro.write`,
the one repro writer) and can save it as a catalog feature (:func:`save`,
:mod:`epaudit.catalog.found`). Reports: :mod:`.report`. Its own proof: :mod:`.selftest`.
Docs: docs/sweep.md.

May import: contract, classify, reference, catalog, matrix, run, repro.
Imported by: cli.
"""

from __future__ import annotations

import datetime as _dt
import os

from ..run.runner import IN_CASE
from .engine import DEFAULT_BUDGET, Failure, SweepResult, sweep

__all__ = ["DEFAULT_BUDGET", "Failure", "SweepResult", "sweep", "write_repros", "findings", "save"]


#: The words a crash or hang in a probe's control case carries (:data:`epaudit.run.runner.IN_CASE`).
CONTROL_CRASH = IN_CASE.format("control")


def write_repros(result: SweepResult, directory: str | os.PathLike, options=None) -> None:
    """Write every failure of ``result`` as a repro directory ``<directory>/<id>-<EP alias>``
    (:func:`epaudit.repro.write`) and record its path in :attr:`Failure.repro`; a worker that
    died in the control case is reproduced by the control's model and feeds.

    Raises:
        OSError, FileExistsError: the directory cannot be written.
    """
    from ..repro import Repro, write
    from .report import _difference

    for f in result.failures:
        info = result.eps.get(f.ep)
        p = f.built.probe
        title = f"{f.config.domain or 'ai.onnx'}.{f.config.op} on {f.ep}: {f.outcome.value} ({f.config.describe()})"
        details = {"id": f.id, "outcome": f.outcome.value, "ep": f.ep,
                   "provider": info.name if info else "", "onnxruntime": info.ort_version if info else "",
                   "config": f.config.describe(), "summary": f.result.summary,
                   "difference": _difference((f.result.evidence or {}).get("comparison")),
                   "failing_configurations": f.count, "first_found": f.original.describe(), "shrink": f.shrink,
                   "seed": result.seed, "budget": result.budget}
        # A worker that died in the control case (its input baked in as a constant) is
        # reproduced by the control model: the subject alone does not crash.
        case = p.subject
        if p.control is not None and CONTROL_CRASH in (f.result.summary or ""):
            case = p.control
            title += " in the control case (the first data input baked in as a constant)"
        repro = Repro(model=case.model, feeds=case.feeds, reference=case.reference,
                      provider=info.name if info else "CPUExecutionProvider",
                      options=dict((options or {}).get(f.ep, {})), atol=p.tolerance.atol, rtol=p.tolerance.rtol,
                      title=title, details=details,
                      control=p.control.reference if p.control is not None and case is p.subject else None)
        f.repro = str(write(repro, os.path.join(str(directory), f"{f.id}-{f.ep}")))


def findings(result: SweepResult) -> list:
    """The failures of ``result`` as saved findings (:class:`epaudit.catalog.found.Finding`),
    one per minimal configuration (failing on several EPs: recorded once, every EP named)."""
    from ..catalog.found import Finding

    out: dict[str, Finding] = {}
    today = _dt.date.today().isoformat()
    for f in result.failures:
        info = result.eps.get(f.ep)
        where = (f"{f.outcome.value} on {f.ep} ({info.name}, onnxruntime {info.ort_version})"
                 if info else f"{f.outcome.value} on {f.ep}")
        if f.id in out:
            old = out[f.id]
            out[f.id] = Finding(old.id, old.op_type, old.domain, old.opset, old.dtype, old.config, old.probe,
                                old.attributes, old.outcome, f"{old.found}; {where}", old.key)
            continue
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in f.config.attributes}
        out[f.id] = Finding(f.id, f.config.op, f.config.domain, f.config.opset, f.config.dtype,
                            f.config.describe(), f.built.probe, attrs, f.outcome.value,
                            f"{where}, epaudit sweep --seed {result.seed} --budget {result.budget}, {today}",
                            f.config.key)
    return list(out.values())


def save(result: SweepResult, path: str) -> int:
    """Add ``result``'s findings to the findings file ``path`` (created when absent; an id
    already there is replaced), written atomically; returns how many it now holds.

    Raises:
        epaudit.catalog.found.FindingsError: the existing file cannot be read.
        OSError: it cannot be written.
    """
    from ..catalog.found import dumps, load, merge

    old = load(path) if os.path.exists(path) else []
    merged = merge(old, findings(result))
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(dumps(merged, path))
    os.replace(tmp, path)
    return len(merged)
