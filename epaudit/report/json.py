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
"""

from __future__ import annotations

import dataclasses
import enum
import json as _json
import math
from typing import Any

from ..contract.results import REPORT_SCHEMA_VERSION, RunResult


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


def _cell(result: RunResult, c) -> dict:
    return {"feature": c.feature_id, "ep": c.ep, "outcome": c.outcome, "summary": c.summary,
            "declared": result.declared.get((c.feature_id, c.ep), "undeclared"),
            "control": c.control, "seconds": c.seconds, "evidence": dict(c.evidence)}


def _parts(result: RunResult) -> tuple[dict, dict]:
    """The report's keys before ``results`` and after it (both in report order)."""
    head = {
        "schema_version": REPORT_SCHEMA_VERSION,
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


def write(result: RunResult, fh, **_: Any) -> None:
    """Write the run to the text stream ``fh`` one cell at a time: the same text as
    :func:`format` (indented strict JSON ending with a newline), without ever holding the
    whole report (a run's cells are read from its store one by one)."""
    head, tail = _parts(result)
    fh.write("{\n" + ",\n".join(_member(k, v) for k, v in head.items()) + ',\n  "results": [')
    first = True
    for c in result.results.values():
        text = _json.dumps(_clean(_cell(result, c)), indent=2, allow_nan=False).replace("\n", "\n    ")
        fh.write(("\n    " if first else ",\n    ") + text)
        first = False
    fh.write("\n  ]" if not first else "]")
    for k, v in tail.items():
        fh.write(",\n" + _member(k, v))
    fh.write("\n}\n")


def format(result: RunResult, **_: Any) -> str:  # noqa: A001
    """Serialize the run as indented strict JSON (ends with a newline)."""
    import io

    out = io.StringIO()
    write(result, out)
    return out.getvalue()
