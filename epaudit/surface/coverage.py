"""Probe coverage of an EP's surface, and the three layers of every probe cell.

Coverage (``epaudit/surface/kernels.py`` defines the items): a feature covers, on an EP, the
items its :class:`~epaudit.contract.probes.Use` names for its operator (domain, op type) at the
schema version in effect at its opset, provided the EP registers a kernel for that
operator, opset and the feature's dtype (a probe the EP has no kernel for exercises no
kernel of it): the type item of its dtype (and of ``uses.facts["data_type"]`` when the
feature names its first input's type, as GatherBlockQuantized's data is not its float
type), and each optional input in ``uses.inputs`` and attribute in ``uses.attributes``
the schema has. An operator is *probed* on an EP
when at least one feature covers something of it. Only Feature fields are read
(``op_type``, ``domain``, ``opset``, ``dtype``, ``uses``), so any catalog source counts.

Layers (docs/outcomes-and-gates.md "Outcomes" says what is observed; this adds what was registered and
claimed): *registered*, a kernel for the feature's operator, opset and dtype exists on
the EP (``None``: the registry is not known or the EP compiles); *claimed*, the EP took
the probed node (its placement is the provider the session asked for; ``None`` when no
placement was recorded); *observed*, the outcome. They never change an outcome.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..contract.outcomes import Outcome
from ..contract.probes import PROBE_NODE_NAME, Feature
from .kernels import OPEN, Registry, onnx_type, operator_name, serves

#: Domains on the surface: ONNX, its ML domain (issue 28) and the contrib operators.
SURFACE_DOMAINS = ("", "ai.onnx.ml", "com.microsoft")
#: Operators listed as "largest uncovered" in the one-line summaries.
TOP = 5


def surface_items(registry: Registry) -> dict[tuple[str, str], dict[int, list[tuple[str, str]]]]:
    """The EP's surface: (domain, op_type) -> schema ``since`` -> items ``(kind, name)``,
    kinds ``type`` (tensor types only: ``tensor(float)``), ``input`` (optional inputs),
    ``attribute``.

    A schema version is on the surface when a kernel serves it by ORT's rule
    (:func:`epaudit.surface.kernels.serves`: an open-ended kernel serves its first version only);
    its type items are the serving kernels' types for the schema's named parameter that the
    schema version allows (a kernel registered over versions 6-8 lists types only a later
    version allows: no valid node of version 6 has them). Kernels of
    operators without a schema in these domains are left out. Empty unless the registry
    status is ``kernels``.
    """
    out: dict[tuple[str, str], dict[int, list[tuple[str, str]]]] = {}
    if registry.status != "kernels":
        return out
    if "items" in registry._index:  # one registry object serves every run of a process
        return registry._index["items"]
    registry._index["items"] = out
    for dom, op in sorted({(k[0], k[1]) for k in registry.kernels if k[0] in SURFACE_DOMAINS}):
        versions = registry.versions(dom, op)
        kernels = registry.kernels_of(dom, op)
        for s in versions:
            lo = s[2]
            serving = [k for k in kernels if serves(k, lo)]
            if not serving:
                continue
            # Tensor types only: a probe's dtype names a tensor element type; sequence and
            # optional types (Identity, If) are not something a Feature can name.
            # A kernel registration spans versions (Cast's 6-8 kernel lists float8 and int4):
            # a type the schema version does not allow is no valid node's, so not an item.
            allowed = set(s[7]) if len(s) > 7 and s[7] else None
            types = sorted({t for k in serving for t in registry.types(k, s[4]) if t.startswith("tensor(")
                            and (allowed is None or t in allowed)})
            items = [("type", t) for t in types] + [("input", n) for n in s[5]] \
                + [("attribute", a) for a in s[6]]
            out.setdefault((dom, op), {})[lo] = items
    return out


def coverage(registry: Registry, features: Iterable[Feature], *, covered_by: bool = False) -> dict[str, Any]:
    """Items covered / items on the surface for one EP, overall and per operator (JSON-ready).

    Returns ``{status, reason, method, distribution, kernels, items, covered, operators,
    probed, by_operator: [{operator, opsets, types, items, covered, features, uncovered}]}``;
    ``by_operator`` is sorted by uncovered items, most first; ``uncovered`` lists items as
    ``"<since>:<kind>:<name>"``. With ``covered_by``, each operator also maps covered items
    to the features covering them. Without a ``kernels`` registry only the status part.
    """
    head = {"status": registry.status, "reason": registry.reason, "method": registry.method,
            "distribution": registry.distribution, "kernels": len(registry.kernels),
            "seconds": round(registry.seconds, 3), "cached": registry.cached}
    items = surface_items(registry)
    if registry.status != "kernels":
        return head
    hits: dict[tuple[str, str], dict[tuple[int, str, str], list[str]]] = {}
    for f in features:
        dom = "" if f.domain in ("", "ai.onnx") else f.domain
        versions = items.get((dom, f.op_type))
        if not versions or not registry.registers(dom, f.op_type, f.opset, f.dtype):
            continue
        schema = registry.schema_at(dom, f.op_type, f.opset)
        if schema is None or schema[2] not in versions:
            continue
        since = schema[2]
        on = set(versions[since])
        named = [("type", onnx_type(f.dtype))] + [("input", n) for n in f.uses.inputs] \
            + [("attribute", a) for a in f.uses.attributes]
        data_type = f.uses.facts.get("data_type")
        if isinstance(data_type, str):
            # The first input's type when it is not the feature's float type: the data of a
            # GatherBlockQuantized probe (uint8, int4, float8e4m3fn, ...), named by the feature.
            named.append(("type", onnx_type(data_type)))
        bucket = hits.setdefault((dom, f.op_type), {})
        for item in named:
            if item in on:
                bucket.setdefault((since, *item), []).append(f.id)
    rows = []
    for (dom, op), versions in items.items():
        got = hits.get((dom, op), {})
        every = [(since, kind, name) for since, its in versions.items() for kind, name in its]
        row = {"operator": operator_name(dom, op), "opsets": sorted(versions),
               "types": sorted({n for its in versions.values() for k, n in its if k == "type"}),
               "items": len(every), "covered": len(got),
               "features": sorted({fid for fids in got.values() for fid in fids}),
               "uncovered": [f"{s}:{k}:{n}" for s, k, n in every if (s, k, n) not in got]}
        if covered_by:
            row["covered_by"] = {f"{s}:{k}:{n}": fids for (s, k, n), fids in sorted(got.items())}
        rows.append(row)
    rows.sort(key=lambda r: (-(r["items"] - r["covered"]), r["operator"]))
    total = sum(r["items"] for r in rows)
    return {**head, "items": total, "covered": sum(r["covered"] for r in rows), "operators": len(rows),
            "probed": sum(1 for r in rows if r["covered"]), "unserved": unserved(registry), "by_operator": rows}


def unserved(registry: Registry) -> list[str]:
    """Operators whose kernel is listed open-ended ("since N", N..INT_MAX, shown ``N+`` in
    ORT's OperatorKernels.md) while a newer schema version exists that no kernel serves:
    the registry reads wider than what ORT runs (:func:`epaudit.surface.kernels.serves`;
    microsoft/onnxruntime#23452). ``"ai.onnx.Attention: listed 24+, schema 25 not served"``."""
    out = []
    for dom, op in sorted({(k[0], k[1]) for k in registry.kernels if k[0] in SURFACE_DOMAINS}):
        kernels = registry.kernels_of(dom, op)
        versions = [s[2] for s in registry.versions(dom, op)]
        for k in kernels:
            newest = versions[-1] if versions else None
            if k[3] == OPEN and newest is not None and newest > k[2] \
                    and not any(serves(o, newest) for o in kernels):
                out.append(f"{operator_name(dom, op)}: listed {k[2]}+, schema {newest} not served")
                break
    return out


def not_live(reason: str) -> dict[str, Any]:
    """The coverage entry of an EP that was not live in the run (no registry read); the
    reason is the EP's own, kept short (reports print it in full with the EP)."""
    return {"status": "not_live", "reason": reason if len(reason) <= 160 else reason[:159] + "…"}


def summary(alias: str, cov: Mapping[str, Any], top: int = TOP) -> str:
    """One line: ``CPU: 40/5969 surface items covered (0.7%), 2/290 operators probed; most
    uncovered: ai.onnx.Resize (120), …``, or the EP's status and reason."""
    status = cov.get("status")
    if status != "kernels":
        what = {"none": "registers no kernels (a compiling EP: no kernel surface)",
                "not_live": "not live, surface not read", "unknown": "registry not readable"}.get(status, status)
        return f"{alias}: {what}" + (f" — {cov['reason']}" if cov.get("reason") else "")
    items, covered = cov["items"], cov["covered"]
    pct = 100.0 * covered / items if items else 0.0
    worst = [r for r in cov.get("by_operator", ()) if r["items"] > r["covered"]][:top]
    tail = ", ".join(f"{r['operator']} ({r['items'] - r['covered']})" for r in worst)
    return (f"{alias}: {covered}/{items} surface items covered ({pct:.1f}%), {cov['probed']}/"
            f"{cov['operators']} operators probed ({cov['kernels']} kernels, {cov.get('distribution') or '?'})"
            + (f"; most uncovered: {tail}" if tail else ""))


def claimed(evidence: Mapping[str, Any], node_name: str | None = PROBE_NODE_NAME) -> bool | None:
    """Did the EP take the probed node? From the cell's placement evidence: the node placed
    on the provider the session asked for. ``None`` when no placement was recorded (the
    session was never created, the worker died); ``False`` when the node is missing
    (its function body was inlined) or on another EP."""
    placement = evidence.get("placement")
    asked = evidence.get("asked")
    if not placement or not asked:
        return None
    if node_name is None:
        return all(p.get("ep") == asked for p in placement)
    nodes = [p for p in placement if isinstance(p, dict) and p.get("name") == node_name]
    return bool(nodes) and nodes[0].get("ep") == asked


def layers(feature: Feature, registry: Registry | None, outcome: Outcome,
           evidence: Mapping[str, Any]) -> dict[str, Any]:
    """The three layers of one probe cell (JSON-ready), with what the feature probes."""
    registered = None if registry is None else registry.registers(
        feature.domain, feature.op_type, feature.opset, feature.dtype)
    return {"operator": feature.operator, "opset": feature.opset, "dtype": feature.dtype,
            "registered": registered, "claimed": claimed(evidence), "observed": outcome.value}


def survey(providers: Iterable[Any], features: Iterable[Feature], cache_base=None) -> dict[str, Any]:
    """``epaudit surface``: every provider's registry and coverage, JSON-ready.

    Returns ``{features, seconds, eps: {alias: {provider, python, **coverage}}}`` with
    ``covered_by`` per operator; ``seconds`` is the wall time of the whole survey.
    """
    import time

    from .kernels import cache_dir, fetch_all

    t0 = time.perf_counter()
    providers = list(providers)
    features = list(features)
    regs = fetch_all(providers, cache_dir(cache_base))
    eps = {p.alias: {"provider": p.name, "python": p.python or "", **coverage(regs[p.alias], features,
                                                                            covered_by=True)}
           for p in providers}
    return {"features": len(features), "seconds": round(time.perf_counter() - t0, 3), "eps": eps}


def observed(reports: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The observed support page's data from saved runs (``(path, RunResult)`` pairs):
    per EP column and operator, what was registered (the run's coverage), probed (cells
    that ran: not UNAVAILABLE or SKIPPED), claimed (the EP took the node) and passed.

    Returns ``{sources, eps: {column: {provider, distribution, live, summary, operators:
    [{operator, registered, opsets, types, probed, claimed, passed, outcomes, failed}]}}}``;
    ``registered`` is ``None`` when the report has no kernel surface for the EP. Operators
    probed come first, then those registered and never probed.
    """
    from ..catalog import operator as catalog_operator

    out: dict[str, Any] = {"sources": [], "eps": {}}
    for path, result in reports:
        out["sources"].append(path)
        for alias, info in result.eps.items():
            cov = result.coverage.get(alias) or {}
            reg = {r["operator"]: r for r in cov.get("by_operator", ())}
            ops: dict[str, dict[str, Any]] = {}
            for (fid, ep), c in result.results.items():
                if ep != alias or c.outcome in _NOT_RUN:
                    continue
                lay = c.evidence.get("layers") or {}
                op = lay.get("operator") or catalog_operator(fid)
                row = ops.setdefault(op, {"operator": op, "probed": 0, "claimed": 0, "passed": 0,
                                          "outcomes": {}, "failed": [], "by_type": {}})
                _count_type(row["by_type"], lay, c.outcome)
                row["probed"] += 1
                row["claimed"] += lay.get("claimed") is True
                row["passed"] += c.outcome is Outcome.PASS
                row["outcomes"][c.outcome.value] = row["outcomes"].get(c.outcome.value, 0) + 1
                if c.outcome is not Outcome.PASS:
                    row["failed"].append(fid)
            rows = sorted(ops.values(), key=lambda r: r["operator"])
            rows += [{"operator": op, "probed": 0, "claimed": 0, "passed": 0, "outcomes": {}, "failed": [],
                      "by_type": {}} for op in sorted(reg) if op not in ops]
            for row in rows:
                r = reg.get(row["operator"])
                known = cov.get("status") == "kernels"
                row["registered"] = (r is not None) if known else None
                row["opsets"] = r["opsets"] if r else []
                row["types"] = [t[len("tensor("):-1] for t in r["types"]] if r else []
            out["eps"][alias] = {"provider": info.name, "distribution": info.distribution, "live": info.live,
                                 "summary": summary(alias, cov) if cov else f"{alias}: no surface in this report",
                                 "operators": rows}
    return out


_NOT_RUN = (Outcome.UNAVAILABLE, Outcome.SKIPPED)


def _count_type(by_type: dict, lay: Mapping[str, Any], outcome: Outcome) -> None:
    """Per probed type of one operator: registered (any cell's layer says so: ``True`` if a
    kernel is listed at some probed opset, ``None`` when unknown), probed, passed, outcomes.
    The claimed-vs-working picture of PyTorch's OpInfo ``test_dtypes``: a type registered
    and never passing is a claim that does not hold; one passing and not registered ran
    through something else (ORT's inserted casts, a fallback the classifier allowed)."""
    t = lay.get("dtype") or "?"
    row = by_type.setdefault(t, {"registered": lay.get("registered"), "probed": 0, "passed": 0, "outcomes": {}})
    if lay.get("registered") is True or row["registered"] is None:
        row["registered"] = lay.get("registered") if row["registered"] is not True else True
    row["probed"] += 1
    row["passed"] += outcome is Outcome.PASS
    row["outcomes"][outcome.value] = row["outcomes"].get(outcome.value, 0) + 1


def type_picture(by_type: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """``{"working", "registered_not_working", "working_not_registered", "not_working"}``:
    type names, from one operator's ``by_type`` (:func:`_count_type`)."""
    out: dict[str, list[str]] = {"working": [], "registered_not_working": [], "working_not_registered": [],
                                 "not_working": []}
    for t, r in sorted(by_type.items()):
        works = r["passed"] > 0
        if works:
            out["working"].append(t)
            if r["registered"] is False:
                out["working_not_registered"].append(t)
        else:
            out["not_working"].append(t)
            if r["registered"] is True:
                out["registered_not_working"].append(t)
    return out
