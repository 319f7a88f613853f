"""``epaudit scan MODEL...``: which of a model's nodes use a feature an EP refuses, drops
or gets wrong.

Pipeline: read each model without its weights (:mod:`.model`) -> map every node to the
catalog features it uses and list what no feature covers (:mod:`.match`) -> build
node-config probes for its attention nodes (:mod:`.nodeprobe`) -> probe the used
features now (:func:`epaudit.audit.run`, same runner, classifier and separation
self-check as ``check``) or take outcomes from saved results -> a verdict per model and
EP (:mod:`.join`) -> a report (:mod:`.format`).

May import: contract, classify, reference, catalog, matrix, run, audit.
Imported by: cli.
"""

from __future__ import annotations

from typing import Sequence

from .. import catalog as _catalog
from ..contract.probes import Feature
from ..contract.results import RunResult
from ..matrix.model import Matrix, Provider
from .join import SHOWN, ModelReport, ScanResult, Uncovered, exit_code, judge
from .match import match
from .model import Model, ModelError, read
from .nodeprobe import NodeProbes, plan

__all__ = ["ModelError", "ScanResult", "read_models", "scan"]


def read_models(paths: Sequence[str]) -> list[Model]:
    """Read every model. Raises :class:`ModelError` for the first unreadable one."""
    return [read(p) for p in paths]


def _uncovered(matches) -> tuple[Uncovered, ...]:
    groups: dict[tuple[str, str], list[str]] = {}
    for m in matches:
        if not m.probed:
            groups.setdefault((m.node.operator, "operator (no feature probes it)"), []).append(m.node.name)
        for item in m.uncovered:
            groups.setdefault((m.node.operator, item), []).append(m.node.name)
    return tuple(Uncovered(op, item, tuple(names[:SHOWN]), len(names)) for (op, item), names in groups.items())


def analyse(model: Model, features: Sequence[Feature], node_probes: bool = True):
    """(used feature id -> node names, node-config groups, uncovered) of one model."""
    matches = match(model.nodes, features)
    used: dict[str, list[str]] = {}
    for m in matches:
        for fid in m.features:
            used.setdefault(fid, []).append(m.node.name)
    groups: list[NodeProbes] = plan([m.node for m in matches]) if node_probes else []
    for g in groups:
        for f in g.features:
            used[f.id] = list(g.nodes)
    order = {f.id: i for i, f in enumerate(features)}
    used = dict(sorted(used.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    return used, groups, _uncovered(matches)


def _declared(matrix: Matrix, fid: str, alias: str) -> tuple[str, str]:
    if fid.startswith("node."):
        return "node config", ""
    d = matrix.declaration(fid, alias)
    if d is None:
        return "undeclared", ""
    words = d.status + (f" until {d.until.isoformat()}" if d.until else "")
    return words, d.issue


def scan(paths: Sequence[str], matrix: Matrix, *, providers: Sequence[Provider] | None = None,
         saved: RunResult | None = None, saved_from: Sequence[str] = (), require: Sequence[str] = (),
         timeout: float | None = None, cache=None, progress=None, stop=None,
         features: Sequence[Feature] | None = None) -> ScanResult:
    """Scan ``paths`` against live EPs (``providers``) or a merged saved run (``saved``).

    Args:
        paths: model files.
        matrix: declarations and providers.
        providers: the EPs to probe now (ignored when ``saved`` is given).
        saved: merged saved results (:func:`epaudit.saved.fleet.merge`); node-config probes
            cannot come from saved results and are then not run.
        require: EP aliases that must be live; their refusals and fallbacks fail.
        features: the catalog (default: :data:`epaudit.catalog.FEATURES`).

    Raises:
        ModelError: a file that is not a readable ONNX model.
    """
    catalog = list(_catalog.FEATURES if features is None else features)
    models = read_models(paths)
    analysed = [analyse(m, catalog, node_probes=saved is None) for m in models]
    notes: list[str] = []
    if saved is not None:
        result, source = saved, "saved results: " + ", ".join(saved_from)
        notes.append("node-config probes need live EPs: not run from saved results")
    else:
        from ..audit import run as run_audit
        from ..run.runner import DEFAULT_TIMEOUT

        wanted = {fid for used, _, _ in analysed for fid in used}
        by_id = {f.id: f for f in catalog}
        to_probe = [by_id[f] for f in by_id if f in wanted]
        seen = set()
        for _, groups, _ in analysed:
            for g in groups:
                for f in g.features:
                    if f.id not in seen:
                        seen.add(f.id)
                        to_probe.append(f)
        result = run_audit(matrix, providers=providers, features=to_probe, gate=False,
                           timeout=timeout or DEFAULT_TIMEOUT, cache=cache, progress=progress, stop=stop)
        source = "probed now"
        if result.incomplete:
            notes.append("interrupted: not every probe finished")
    reports = []
    for model, (used, groups, uncovered) in zip(models, analysed):
        verdicts = []
        for col, info in result.eps.items():
            base = info.base_alias
            declared = {fid: _declared(matrix, fid, base) for fid in used}
            verdicts.append(judge(used, col, info, result.results, declared))
        configs = {g.key: (g.nodes, tuple(f.id for f in g.features), g.skipped) for g in groups}
        reports.append(ModelReport(model.path, len(model.nodes), dict(model.opsets), model.external,
                                   {k: tuple(v) for k, v in used.items()}, configs, uncovered, tuple(verdicts)))
    code = exit_code(reports, result.eps, tuple(require))
    if code == 0 and result.incomplete:  # interrupted, or merged from an interrupted run
        code = 3
    return ScanResult(tuple(reports), dict(result.eps), source, tuple(require), code, tuple(notes))
