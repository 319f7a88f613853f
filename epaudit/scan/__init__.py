"""``epaudit scan MODEL...``: will each model be right on each EP, and which node is not.

Pipeline: the files to read (:mod:`.paths`: directories, GenAI folders, each file once) ->
read each model without its weights (:mod:`.model`, constant folding and shape inference
:mod:`.fold`) -> map every node to the catalog features it uses by the operator version in
force, and list what no feature covers (:mod:`.match`) -> build node-config probes for
every distinct node configuration (:mod:`.nodeprobe`; generic :mod:`.nodeconfig` /
:mod:`.nodegeneric` with references :mod:`.noderef`) -> probe now (:func:`epaudit.audit.run`,
the runner, classifier and separation self-check of ``check``; the CPU EP always checks
that it accepts every rebuilt node) or take outcomes from saved results -> optionally run
the whole model on each EP and find the first wrong node (:mod:`.whole`, :mod:`.locate`)
-> a verdict per model and EP (:mod:`.join`) -> a report (:mod:`.format`, :mod:`.html`).

May import: contract, classify, reference, catalog, matrix, run, audit, report, repro.
Imported by: cli.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from .. import catalog as _catalog
from ..contract.outcomes import Outcome
from ..contract.probes import Feature
from ..contract.results import RunResult
from ..matrix.model import Matrix, Provider
from .join import SHOWN, ModelReport, NodeConfig, ScanResult, Uncovered, Whole, exit_code, judge
from .match import match
from .model import Model, ModelError, read
from .nodeconfig import is_compute
from .nodeprobe import NodeProbes, plan

__all__ = ["ModelError", "ScanResult", "read_models", "scan", "analyse"]

#: Outcomes of a node probe on the CPU EP that mean the rebuilt node is not what the model
#: holds (the model runs on CPU, so CPU must accept its nodes): the probe is dropped.
_REBUILD_FAILED = (Outcome.REJECTED, Outcome.ERROR, Outcome.CRASH, Outcome.TIMEOUT)


def read_models(paths: Sequence[str], dims: Mapping[str, int] | None = None) -> list[Model]:
    """Read every model. Raises :class:`ModelError` for the first unreadable one."""
    return [read(p, dims) for p in paths]


def _uncovered(matches, groups: Sequence[NodeProbes]) -> tuple[Uncovered, ...]:
    groups_by_node = {n: g for g in groups for n in g.nodes}
    items: dict[tuple[str, str], list[str]] = {}
    for m in matches:
        if not is_compute(m.node):
            continue  # folded, a constant, metadata or control flow: nothing an EP computes
        g = groups_by_node.get(m.node.name)
        own = g is not None and g.probed
        if not m.probed and not own:
            items.setdefault((m.node.operator, "operator (no feature probes it)"), []).append(m.node.name)
        for item in m.uncovered:
            if own and not item.startswith("not used at"):
                continue  # a node-config probe exercises the node's own inputs, attributes, dtype, version
            items.setdefault((m.node.operator, item), []).append(m.node.name)
    compute = {m.node.name for m in matches if is_compute(m.node)}
    for g in groups:
        if not g.probed and g.skipped and any(n in compute for n in g.nodes):
            items.setdefault((g.operator, f"not probed in its own configuration: {g.skipped[0]}"),
                             []).extend(g.nodes)
    return tuple(Uncovered(op, item, tuple(names[:SHOWN]), len(names)) for (op, item), names in items.items())


def analyse(model: Model, features: Sequence[Feature], node_probes: bool = True,
            dims: Mapping[str, int] | None = None, progress=None):
    """(used feature id -> node names, node-config groups, uncovered) of one model."""
    matches = match(model.nodes, features)
    used: dict[str, list[str]] = {}
    for m in matches:
        for fid in m.features:
            used.setdefault(fid, []).append(m.node.name)
    groups: list[NodeProbes] = plan([m.node for m in matches], dims, model.opsets, progress=progress) \
        if node_probes else []
    for g in groups:
        for f in g.features:
            used[f.id] = list(g.nodes)
    order = {f.id: i for i, f in enumerate(features)}
    used = dict(sorted(used.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    return used, groups, _uncovered(matches, groups)


def _declared(matrix: Matrix, fid: str, alias: str) -> tuple[str, str]:
    if fid.startswith("node."):
        return "node config", ""
    d = matrix.declaration(fid, alias)
    if d is None:
        return "undeclared", ""
    words = d.status + (f" until {d.until.isoformat()}" if d.until else "")
    return words, d.issue


def _coverage(model: Model, groups: Sequence[NodeProbes]) -> tuple[int, int, dict]:
    probed_nodes = {n for g in groups if g.probed for n in g.nodes}
    domains: dict[str, list[int]] = {}
    compute = probed = 0
    for n in model.nodes:
        d = domains.setdefault(n.domain or "ai.onnx", [0, 0, 0])
        d[0] += 1
        if is_compute(n):
            d[1] += 1
            compute += 1
            if n.name in probed_nodes:
                d[2] += 1
                probed += 1
    return probed, compute, {k: tuple(v) for k, v in domains.items()}


def _drop_rebuild_failures(analysed, result: RunResult, cpu_col: str | None) -> None:
    """Node probes the CPU EP refuses are our rebuild's fault: removed from ``used`` and
    noted on their configuration as not exercised (in place)."""
    if cpu_col is None:
        return
    for used, groups, _ in analysed:
        for i, g in enumerate(groups):
            bad = {f.id: result.results[(f.id, cpu_col)] for f in g.features if (f.id, cpu_col) in result.results
                   and result.results[(f.id, cpu_col)].outcome in _REBUILD_FAILED}
            if not bad:
                continue
            for fid in bad:
                used.pop(fid, None)
            keep = tuple(f for f in g.features if f.id not in bad)
            skipped = tuple(g.skipped) + tuple(f"{g.parts[f]}: ORT's CPU EP refuses the rebuilt node "
                                              f"({c.outcome.value}: {' '.join(c.summary.split())[:140]})"
                                              for f, c in bad.items())
            parts = {f: p for f, p in g.parts.items() if f not in bad}
            from dataclasses import replace

            groups[i] = replace(g, features=keep, parts=parts, skipped=skipped)


def _cpu_provider(matrix: Matrix, providers: Sequence[Provider]) -> tuple[Provider, bool]:
    """The CPU provider the node probes are validated on, and whether the user asked it."""
    for p in providers:
        if p.name == "CPUExecutionProvider" and not p.inject_fault:
            return p, True
    for p in matrix.providers.values():
        if p.name == "CPUExecutionProvider" and not p.inject_fault and not p.python:
            return p, False
    return Provider(alias="CPU", name="CPUExecutionProvider"), False


def scan(paths: Sequence[str], matrix: Matrix, *, providers: Sequence[Provider] | None = None,
         saved: RunResult | None = None, saved_from: Sequence[str] = (), require: Sequence[str] = (),
         timeout: float | None = None, cache=None, progress=None, stop=None,
         features: Sequence[Feature] | None = None, dims: Mapping[str, int] | None = None,
         whole: bool = False, inputs: str | None = None, repro: str | None = None,
         node_probes: bool = True, say: Callable[[str], None] | None = None) -> ScanResult:
    """Scan ``paths`` (files, directories, GenAI folders) against live EPs (``providers``)
    or a merged saved run (``saved``).

    Args:
        paths: model files or directories.
        matrix: declarations and providers.
        providers: the EPs to probe now (ignored when ``saved`` is given).
        saved: merged saved results (:func:`epaudit.saved.fleet.merge`); node-config probes
            and ``whole`` need live EPs and are then not run.
        require: EP aliases that must be live; their refusals and fallbacks fail.
        features: the catalog (default: :data:`epaudit.catalog.FEATURES`).
        dims: symbolic dimension name -> value (``--dim``).
        whole: run each whole model on each EP (``--whole``).
        inputs: an ``.npz`` of whole-model inputs (``--inputs``); its shapes bind the
            graph inputs for the node probes too.
        repro: a directory for the one-node reproduction of each first wrong node.
        node_probes: build node-config probes (default).
        say: progress lines (stderr).

    Raises:
        ModelError: every file given is unreadable (one line each, joined).
        WholeError: ``--inputs`` does not fit a model.
    """
    from .paths import expand

    note = say or (lambda _msg: None)
    catalog = list(_catalog.FEATURES if features is None else features)
    files, unreadable = expand(paths)
    input_shapes = input_values = None
    if inputs:
        import numpy as np

        try:
            with np.load(inputs, allow_pickle=False) as z:
                input_shapes = {k: tuple(z[k].shape) for k in z.files}
                input_values = {k: np.asarray(z[k]) for k in z.files if z[k].size <= 16}
        except (OSError, ValueError) as exc:
            from .whole import WholeError

            raise WholeError(f"--inputs {inputs}: not a readable .npz ({type(exc).__name__})") from None
    models: list[Model] = []
    for i, f in enumerate(files):
        note(f"scan: reading {i + 1}/{len(files)}: {f}")
        try:
            models.append(read(f, dims, input_shapes, input_values))
        except ModelError as exc:
            unreadable.append(str(exc))
    if not models:
        raise ModelError("\n".join(unreadable) or "no model given")
    feeds: dict[str, dict] = {}
    if whole and saved is None:
        from .whole import given, seeded

        for m in models:  # raises WholeError: inputs that do not fit, or too large to seed, are bad input
            if not m.problems:
                feeds[m.path] = given(m, inputs) if inputs else seeded(m, dims or {})
    live = saved is None
    analysed = []
    for m in models:
        note(f"scan: building node probes for {m.path}")
        analysed.append(analyse(m, catalog, node_probes=live and node_probes, dims=dims))
    notes: list[str] = []
    asked = list(providers if providers is not None else matrix.providers.values())
    cpu_col = None
    if saved is not None:
        result, source = saved, "saved results: " + ", ".join(saved_from)
        notes.append("node-config probes need live EPs: not run from saved results")
        if whole:
            notes.append("--whole needs live EPs: not run from saved results")
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
        cpu, cpu_asked = _cpu_provider(matrix, asked)
        run_providers = asked if cpu_asked or not seen else asked + [cpu]
        cpu_col = cpu.alias
        note(f"scan: probing {len(to_probe)} feature(s) on {', '.join(p.alias for p in run_providers)}")
        result = run_audit(matrix, providers=run_providers, features=to_probe, gate=False,
                           timeout=timeout or DEFAULT_TIMEOUT, cache=cache, progress=progress, stop=stop)
        source = "probed now"
        if result.incomplete:
            notes.append("interrupted: not every probe finished")
        if not cpu_asked and seen:
            notes.append(f"node-config probes checked on {cpu.alias} first: a rebuilt node ORT's CPU EP refuses "
                         "is not a finding")
        _drop_rebuild_failures(analysed, result, cpu_col if cpu_col in result.eps and result.eps[cpu_col].live
                               else None)
    columns = {c: i for c, i in result.eps.items()
               if saved is not None or c in {p.alias for p in asked}}
    wholes = _wholes(models, analysed, asked, result, feeds, timeout, repro, note) if whole and saved is None else {}
    reports = []
    for model, (used, groups, uncovered) in zip(models, analysed):
        probed, compute, domains = _coverage(model, groups)
        verdicts = []
        for col, info in columns.items():
            base = info.base_alias
            declared = {fid: _declared(matrix, fid, base) for fid in used}
            verdicts.append(judge(used, col, info, result.results, declared, (probed, compute),
                                  wholes.get((model.path, col)), not model.problems))
        configs = tuple(NodeConfig(g.key, g.operator, g.nodes, tuple(f.id for f in g.features), dict(g.parts),
                                   g.skipped, g.probed, sum(1 for n in model.nodes if n.name in set(g.nodes)
                                                            and is_compute(n))) for g in groups)
        reports.append(ModelReport(model.path, len(model.nodes), dict(model.opsets), model.external,
                                   {k: tuple(v) for k, v in used.items()}, configs, uncovered, tuple(verdicts),
                                   domains, model.problems, compute, probed))
    code = exit_code(reports, columns, tuple(require), unreadable)
    if code == 0 and result.incomplete:  # interrupted, or merged from an interrupted run
        code = 3
    return ScanResult(tuple(reports), dict(columns), source, tuple(require), code, tuple(notes), tuple(unreadable))


def _wholes(models, analysed, asked, result: RunResult, feeds: Mapping[str, dict], timeout, repro, note):
    """(model path, EP column) -> :class:`Whole` for every live EP asked."""
    import sys
    from pathlib import Path

    from .whole import Target
    from .whole import run as run_whole

    out: dict[tuple[str, str], Whole] = {}
    targets = [Target(p.alias, p.name, p.python or sys.executable, dict(p.env), dict(p.options),
                      p.library if p.library and "/" in p.library else None)
               for p in asked if p.alias in result.eps and result.eps[p.alias].live]
    reference = Target("CPU", "CPUExecutionProvider", sys.executable, {}, {})
    for model, (used, groups, _) in zip(models, analysed):
        by_node = {n: g for g in groups for n in g.nodes}

        def outcome(node: str, ep: str, by_node=by_node):
            g = by_node.get(node)
            if g is None or not g.features:
                return None
            worst = [(result.results[(f.id, ep)].outcome.value, g.parts.get(f.id, f.id))
                     for f in g.features if (f.id, ep) in result.results]
            bad = [w for w in worst if w[0] != "PASS"]
            return (bad or worst or [None])[0]

        sub = None
        if repro:
            sub = str(Path(repro) / Path(model.path).stem) if len(models) > 1 else repro
        note(f"scan: running the whole model {model.path}")
        for w in run_whole(model, targets, reference, feeds.get(model.path, {}),
                           timeout=max(60.0, (timeout or 20.0) * 10),
                           repro=sub, node_outcomes=outcome, progress=note):
            out[(model.path, w.ep)] = w
    return out
