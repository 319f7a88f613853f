"""The JSON report: the whole run, machine-readable (``--format json``).

Top-level keys: ``schema_version`` (of this report), ``epaudit``, ``semantics`` (the
reference rules followed), ``catalog_version``, ``environment``, ``machines`` (label ->
GPU, driver and host facts; ``epaudit/providers/machine.py``), ``matrix``, ``features``, ``eps``
(availability, reason, interpreter, onnxruntime distribution and build, devices,
machine label), ``results`` (one per (feature, EP):
outcome, summary, declaration, evidence), ``findings``, ``verdict``, ``exit_code``,
``incomplete``, ``started`` (ISO 8601, UTC) and ``duration_s`` (seconds) when the run
recorded them (``check`` and ``probe`` do; reports from before have neither); a conformance run adds ``conformance`` (operators, onnx version, per-EP
pass / fail / gap summary, skip entries with their matches). The shape is pinned by
``report.schema.json`` next to this module (JSON Schema draft 2020-12);
``epaudit/saved/read.py`` reads it back. Non-finite floats are written as the strings
``"inf"``, ``"-inf"``, ``"nan"`` so the file stays strict JSON.

Schema version 3 (issue 24) adds ``run_id`` (32 hex digits, one per run: every report of
the run carries the same; a merge refuses one run under two names), ``versions``
(``epaudit``, ``onnx``, and the ``onnxruntime`` versions the run's EPs ran) and, when a
results key is set (:mod:`epaudit.contract.signing`), ``signature``. ``##[`` inside a
string is written ``#\u0023[`` (the same string to every JSON reader; never a GitHub
Actions command when the report goes to a CI log).
"""

from __future__ import annotations

import dataclasses
import enum
import json as _json
import math
from typing import Any

from ..contract import signing
from ..contract.results import REPORT_SCHEMA_VERSION, RunResult
from ..textenc import defang


def _clean(x: Any) -> Any:
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "isoformat"):
        return x.isoformat()
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return _clean(x.item())
    return x


def run_id(result: RunResult) -> str:
    """The run's id: ``environment["run_id"]`` (set when the run starts, :func:`epaudit.audit.environment`),
    else one derived from the run's content (a result made by hand, in a test), so every
    report of one result carries the same id."""
    rid = result.environment.get("run_id")
    if isinstance(rid, str) and len(rid) == 32:
        return rid
    import hashlib

    seed = repr((result.matrix_path, result.features, sorted(result.eps), sorted(
        (k, c.outcome.value, c.seconds) for k, c in result.results.items()), result.environment.get("started")))
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def versions(result: RunResult) -> dict:
    """``{"epaudit", "onnx", "onnxruntime": [the distinct onnxruntime versions of the run's EPs]}``."""
    env = result.environment
    ort = sorted({i.ort_version for i in result.eps.values() if i.ort_version})
    return {"epaudit": str(env.get("epaudit") or ""), "onnx": str(env.get("onnx") or ""), "onnxruntime": ort}


def _cell(result: RunResult, c) -> dict:
    return {"feature": c.feature_id, "ep": c.ep, "outcome": c.outcome, "summary": c.summary,
            "declared": result.declared.get((c.feature_id, c.ep), "undeclared"),
            "control": c.control, "seconds": c.seconds, "evidence": dict(c.evidence)}


def _parts(result: RunResult) -> tuple[dict, dict]:
    """The report's keys before ``results`` and after it (both in report order)."""
    head = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "run_id": run_id(result),
        "versions": versions(result),
        "epaudit": result.environment.get("epaudit"),
        "semantics": result.semantics,
        "catalog_version": result.catalog_version,
        "environment": dict(result.environment),
        "machines": {label: dict(facts) for label, facts in result.machines.items()},
        "matrix": result.matrix_path,
        "features": list(result.features),
        "eps": [dataclasses.asdict(info) for info in result.eps.values()],
    }
    tail = {
        "findings": [dataclasses.asdict(f) for f in result.gate.findings] if result.gate else [],
        "verdict": result.gate.verdict if result.gate else None,
        "exit_code": result.gate.exit_code if result.gate else None,
        "incomplete": result.incomplete,
        **{k: result.environment[k] for k in ("started", "duration_s") if k in result.environment},
        **({"conformance": dataclasses.asdict(result.conformance)} if result.conformance else {}),
        **({"coverage": {alias: dict(c) for alias, c in result.coverage.items()}} if result.coverage else {}),
        **({"shard": dict(result.shard)} if getattr(result, "shard", None) else {}),
    }
    return head, tail


def to_dict(result: RunResult) -> dict:
    """The report as plain data (what :func:`format` serializes)."""
    head, tail = _parts(result)
    return _clean({**head, "results": [_cell(result, c) for c in result.results.values()], **tail})


def _member(key: str, value: Any, depth: int = 1) -> str:
    pad = "  " * depth
    text = _json.dumps(_clean(value), indent=2, allow_nan=False).replace("\n", "\n" + pad)
    return f"{pad}{_json.dumps(key)}: {text}"


def write(result: RunResult, fh, *, key: bytes | None = None, **_: Any) -> None:
    """Write the run to the text stream ``fh`` one cell at a time: the same text as
    :func:`format` (indented strict JSON ending with a newline, ``##[`` defanged), without
    ever holding the whole report (a run's cells are read from its store one by one).

    With ``key`` (the results key, :func:`epaudit.contract.signing.load_key`) the report ends
    with its ``signature``: the HMAC of :func:`epaudit.contract.signing.canonical` of the
    whole report, computed as the cells are written
    (:class:`epaudit.contract.signing.StreamSigner`), so it is the signature
    :func:`epaudit.contract.signing.sign` gives the whole document and what
    :mod:`epaudit.saved.read` verifies.
    """
    head, tail = _parts(result)
    head, tail = _clean(head), _clean(tail)
    signer = signing.StreamSigner({**head, **tail}, "results", key) if key is not None else None
    # Each piece is whole JSON members or values, cut outside any string: ``##[`` (only ever
    # inside a string) cannot straddle two pieces, so defanging each is defanging the whole.
    fh.write(defang("{\n" + ",\n".join(_member(k, v) for k, v in head.items()) + ',\n  "results": [', "json"))
    first = True
    for c in result.results.values():
        cell = _clean(_cell(result, c))
        if signer is not None:
            signer.add(cell)
        text = _json.dumps(cell, indent=2, allow_nan=False).replace("\n", "\n    ")
        fh.write(defang(("\n    " if first else ",\n    ") + text, "json"))
        first = False
    fh.write("\n  ]" if not first else "]")
    if signer is not None:
        tail = {**tail, signing.FIELD: signer.signature()}
    for k, v in tail.items():
        fh.write(defang(",\n" + _member(k, v), "json"))
    fh.write("\n}\n")


def format(result: RunResult, *, key: bytes | None = None, **_: Any) -> str:  # noqa: A001
    """Serialize the run as indented strict JSON (ends with a newline), signed with ``key``
    (the results key, :func:`epaudit.contract.signing.load_key`) when one is given: the
    text of :func:`write` (the same bytes as ``json.dumps(signing.sign(to_dict(result), key),
    indent=2)``, defanged)."""
    import io

    out = io.StringIO()
    write(result, out, key=key)
    return out.getvalue()
