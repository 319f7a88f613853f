"""Claims audited: registered x claimed x observed per probe cell, and the findings where
they disagree; plus the coverage of the run's EPs. Applied to every ``check``/``probe`` run.

The three finding kinds (:class:`~epaudit.contract.outcomes.FindingKind`) are warnings unless
``--strict``, and sit on top of the gate's own findings: an outcome is never changed, so
none of them can turn a non-pass into a pass.

* ``refused``: registered and claimed (the node placed on the EP), then ``REJECTED``: the
  seed defect (GQA ``attention_bias`` on CUDA, docs/outcomes-and-gates.md).
* ``unclaimed``: registered but not claimed: the node was placed elsewhere (ORT users
  report kernels listed but run on CPU, microsoft/onnxruntime#13781).
* ``unregistered``: claimed but not registered, where the EP has a kernel registry:
  kernels the registry does not document (microsoft/onnxruntime#24850).

Registries are read only for the EPs that were live in the run, after the probes, from
the surface cache (``epaudit/surface/kernels.py``): ~30 ms per EP when warm.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping, Sequence

from ..contract.outcomes import FindingKind, Outcome
from ..contract.probes import Feature
from ..contract.results import Classified, EPInfo, Finding, RunResult
from ..contract.cellstore import CellStore
from ..surface.coverage import claimed, coverage, layers, not_live
from ..surface.kernels import Registry, cache_dir, fetch_all

_NOT_RUN = (Outcome.UNAVAILABLE, Outcome.SKIPPED)


def cell_facts(cell: Classified) -> dict[str, Any]:
    """What :func:`attach` needs of a cell kept in a :class:`CellStore`, taken while its
    evidence is in memory: whether the EP took the probed node (``claimed``)."""
    return {"claimed": claimed(cell.evidence)} if isinstance(cell.evidence, Mapping) else {}


def findings(results: Mapping[tuple[str, str], Classified], eps: Mapping[str, EPInfo],
             declared: Mapping[tuple[str, str], str], *, strict: bool = False,
             line_of: Callable[[str, str], int | None] | None = None) -> list[Finding]:
    """The claim findings of a run, from each cell's ``evidence["layers"]`` (cells without
    layers, or of EPs that were not live, have none).

    Args:
        results: (feature id, alias) -> classified cell, layers in its evidence.
        eps: alias -> EP info (only live EPs are judged).
        declared: (feature id, alias) -> the declaration in words.
        strict: the findings fail the gate instead of warning.
        line_of: (feature id, alias) -> matrix line, for annotations.
    """
    out = []
    for (fid, alias), c in results.items():
        lay = c.evidence.get("layers") if isinstance(c.evidence, Mapping) else None
        info = eps.get(alias)
        if not lay or info is None or not info.live or c.outcome in _NOT_RUN:
            continue
        reg, took = lay.get("registered"), lay.get("claimed")
        what = f"{lay.get('operator')} opset {lay.get('opset')} {lay.get('dtype')}"
        if reg is True and took is True and c.outcome is Outcome.REJECTED:
            kind, msg = FindingKind.REFUSED, (f"{what}: a kernel is registered and the EP took the node, "
                                              f"then refused it: {c.summary}")
        elif reg is True and took is False:
            kind, msg = FindingKind.UNCLAIMED, (f"{what}: a kernel is registered but the EP did not take "
                                                f"the node ({c.outcome.value}: {c.summary})")
        elif reg is False and took is True:
            kind, msg = FindingKind.UNREGISTERED, (f"{what}: the EP took the node but registers no kernel "
                                                   f"for it ({c.outcome.value})")
        else:
            continue
        out.append(Finding(kind, fid, alias, strict, declared.get((fid, alias), "undeclared"), c.outcome,
                           msg, line_of(fid, alias) if line_of else None))
    return out


def attach(result: RunResult, providers: Sequence[Any], features: Sequence[Feature], *,
           strict: bool = False, cache_base: str | os.PathLike | None = None,
           line_of: Callable[[str, str], int | None] | None = None,
           registries: Mapping[str, Registry] | None = None) -> RunResult:
    """``result`` with layers in every catalog cell's evidence, the claim findings added to
    its gate (verdict recomputed; ``gate`` ``None`` stays ``None``) and ``coverage`` per EP.

    Args:
        result: the classified, gated run.
        providers: the run's :class:`~epaudit.matrix.core.Provider` objects.
        features: the run's features (cells of other ids keep their evidence as is).
        strict: claim findings fail the gate.
        cache_base: the probe cache folder (registries are cached under it), or ``None``.
        line_of: (feature id, alias) -> matrix line.
        registries: alias -> registry already read (tests); the rest are fetched.
    """
    from .rules import verdict

    live = [p for p in providers if p.alias in result.eps and result.eps[p.alias].live]
    regs = dict(registries or {})
    wanted = [p for p in live if p.alias not in regs]
    if wanted:
        regs.update(fetch_all(wanted, cache_dir(cache_base)))
    by_id = {f.id: f for f in features}
    if isinstance(result.results, CellStore):
        # Layers computed when a cell's evidence is read, from what the store keeps in memory:
        # nothing is rewritten and no evidence is read for it (a run of any size).
        registered: dict[tuple, bool | None] = {}

        def layered(key, c, facts):
            f = by_id.get(key[0])
            if f is None:
                return None
            reg = regs.get(key[1])
            probe = (key[1], f.domain, f.op_type, f.opset, f.dtype)
            if probe not in registered:
                registered[probe] = None if reg is None else reg.registers(f.domain, f.op_type, f.opset, f.dtype)
            took = facts["claimed"] if "claimed" in facts else claimed(c.evidence)
            return {"operator": f.operator, "opset": f.opset, "dtype": f.dtype,
                    "registered": registered[probe], "claimed": took, "observed": c.outcome.value}

        results = result.results.with_extra("layers", layered)
    else:
        results = {}
        for key, c in result.results.items():
            f = by_id.get(key[0])
            if f is None or not isinstance(c.evidence, Mapping):
                results[key] = c
                continue
            lay = layers(f, regs.get(key[1]), c.outcome, c.evidence)
            results[key] = dataclasses.replace(c, evidence={**c.evidence, "layers": lay})
    cov = {alias: coverage(regs[alias], features) if alias in regs else not_live(info.reason or "not live")
           for alias, info in result.eps.items()}
    gate = result.gate
    if gate is not None:
        extra = findings(results, result.eps, result.declared, strict=strict, line_of=line_of)
        if extra:
            gate = verdict(list(gate.findings) + extra)
    return dataclasses.replace(result, results=results, gate=gate, coverage=cov)
