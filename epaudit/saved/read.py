"""Saved results: a JSON report read back into a :class:`~epaudit.contract.results.RunResult`.

``epaudit check --results``, ``epaudit diff`` and ``epaudit bless --from`` work from
files other runs wrote (``epaudit probe --json``, ``check --format json``). A file is
trusted only after it passes the JSON Schema shipped with the package
(``epaudit/report/report.schema.json``, the one the JSON formatter is tested against)
and the cross-checks a schema cannot express (each result's EP and feature are listed,
no cell twice). Anything else is a :class:`SavedError` whose text is one line naming
the file and the JSON path: the CLI prints it and exits 2.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import REPORT_SCHEMA_VERSION, Classified, EPInfo, Finding, GateResult, RunResult

#: Larger files are refused before reading: a full-catalog report of one EP is ~50 KiB.
MAX_BYTES = 32 * 1024 * 1024
_MAX_SHOWN = 160


class SavedError(Exception):
    """A results file that cannot be used; ``str()`` is one line: ``FILE: PATH: problem``."""

    def __init__(self, path: str, where: str, problem: str):
        self.path, self.where, self.problem = path, where, problem
        super().__init__(f"{path}: {where}: {problem}" if where else f"{path}: {problem}")


@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON report's schema (draft 2020-12), as shipped in the package."""
    text = resources.files("epaudit.report").joinpath("report.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _strict_constant(name: str):
    raise ValueError(f"{name} is not strict JSON")


def read(path: str | Path) -> dict:
    """Read and validate one report file; the parsed document.

    Raises:
        SavedError: missing, unreadable, over :data:`MAX_BYTES`, not UTF-8, not strict
            JSON (with the line), nested absurdly deep, or not matching the schema (with
            the JSON path of the first problem).
    """
    name = str(path)
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise SavedError(name, "", "not a regular file")
        if size > MAX_BYTES:
            raise SavedError(name, "", f"{size} bytes, over the {MAX_BYTES // (1024 * 1024)} MiB a results file may be")
        raw = p.read_bytes()
    except OSError as exc:
        raise SavedError(name, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SavedError(name, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_strict_constant)
    except json.JSONDecodeError as exc:
        raise SavedError(name, f"line {exc.lineno}", f"not valid JSON ({exc.msg}); truncated or not a report?") from None
    except ValueError as exc:
        raise SavedError(name, "", str(exc)) from None
    except RecursionError:
        raise SavedError(name, "", "JSON nested too deeply to be a report") from None
    validate(doc, name)
    return doc


def validate(doc: Any, name: str = "<report>") -> None:
    """Check a parsed document against the shipped schema and the cross-references.

    Raises:
        SavedError: the first problem, with its JSON path.
    """
    import jsonschema

    if not isinstance(doc, dict):
        raise SavedError(name, "", f"not an epaudit JSON report (top level is {type(doc).__name__}, not an object)")
    if doc.get("schema_version") == 1:
        raise SavedError(name, "schema_version",
                         "1: written by an epaudit whose FALLBACK and DECOMPOSED cells were never compared with "
                         "their references (docs/outcomes-and-gates.md \"Outcomes\"); its cells cannot be read "
                         f"as this epaudit's: re-run it (this epaudit reads schema_version {REPORT_SCHEMA_VERSION})")
    if doc.get("schema_version") != REPORT_SCHEMA_VERSION:
        raise SavedError(name, "schema_version",
                         f"{doc.get('schema_version')!r}: this epaudit reads JSON reports of schema_version "
                         f"{REPORT_SCHEMA_VERSION}")
    validator = jsonschema.Draft202012Validator(schema())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    except RecursionError:
        raise SavedError(name, "", "JSON nested too deeply to be a report") from None
    if error is not None:
        message = error.message if len(error.message) <= _MAX_SHOWN else error.message[:_MAX_SHOWN] + "…"
        raise SavedError(name, _where(error.absolute_path) or "(top level)", message)
    aliases = [e["alias"] for e in doc["eps"]]
    if len(set(aliases)) != len(aliases):
        raise SavedError(name, "eps", f"EP {next(a for a in aliases if aliases.count(a) > 1)!r} listed twice")
    features = set(doc["features"])
    seen = set()
    for i, r in enumerate(doc["results"]):
        if r["ep"] not in aliases:
            raise SavedError(name, f"results[{i}].ep", f"{r['ep']!r} is not one of the report's eps")
        if r["feature"] not in features:
            raise SavedError(name, f"results[{i}].feature", f"{r['feature']!r} is not one of the report's features")
        if (r["feature"], r["ep"]) in seen:
            raise SavedError(name, f"results[{i}]", f"cell ({r['feature']}, {r['ep']}) given twice")
        seen.add((r["feature"], r["ep"]))
        _check_earned(doc, r, f"results[{i}]", name)


_NOT_RUN = {"UNAVAILABLE", "SKIPPED"}


def _check_earned(doc: dict, r: dict, where: str, name: str) -> None:
    """A saved PASS must carry the evidence a live one has: an EP that was live, a session
    that asked for that EP, and the probed node placed on it (or, for a whole-graph
    conformance case, every node). A report edited into a pass, or relabelled from another
    EP, is refused rather than gated."""
    ep = next(e for e in doc["eps"] if e["alias"] == r["ep"])
    if not ep["live"] and r["outcome"] not in _NOT_RUN:
        raise SavedError(name, f"{where}.outcome", f"{r['outcome']} on {r['ep']}, which the report "
                                                   "says was not live")
    if r["outcome"] != "PASS":
        return
    ev = r.get("evidence") or {}
    asked, placement = ev.get("asked"), ev.get("placement")
    if asked != ep["name"] and not ep.get("fault"):
        raise SavedError(name, f"{where}.evidence.asked", f"PASS on {r['ep']} ({ep['name']}) from a session "
                                                          f"that asked for {asked!r}")
    if not isinstance(placement, list) or not placement:
        raise SavedError(name, f"{where}.evidence.placement", "PASS without the placement that earned it")
    if not all(isinstance(p, dict) for p in placement):
        raise SavedError(name, f"{where}.evidence.placement", "PASS with a placement entry that is not "
                                                              "an object (no node, no EP)")
    probed = [p for p in placement if p.get("name") == "probe"] or placement
    off = sorted({str(p.get("ep")) for p in probed if p.get("ep") != asked})
    if off:
        raise SavedError(name, f"{where}.evidence.placement", f"PASS on {r['ep']} but the node ran on "
                                                              f"{', '.join(off)}")


def from_dict(doc: dict) -> RunResult:
    """A validated report document (see :func:`validate`) as a :class:`RunResult`."""
    eps = {}
    for e in doc["eps"]:
        eps[e["alias"]] = EPInfo(
            alias=e["alias"], name=e["name"], live=e["live"], reason=e["reason"], python=e["python"],
            distribution=e["distribution"], ort_version=e["ort_version"], devices=tuple(e["devices"]),
            options=dict(e["options"]), fault=e["fault"], build=dict(e.get("build", {})),
            machine=e.get("machine", ""), matrix_alias=e.get("matrix_alias", ""),
            library=e.get("library", ""), absence=e.get("absence", ""))
    results = {}
    declared = {}
    for r in doc["results"]:
        key = (r["feature"], r["ep"])
        results[key] = Classified(r["feature"], r["ep"], Outcome(r["outcome"]), r["summary"], dict(r["evidence"]),
                                  Outcome(r["control"]) if r["control"] else None, float(r["seconds"]))
        if r["declared"] != "undeclared":
            declared[key] = r["declared"]
    gate = None
    if doc["verdict"] is not None and doc["exit_code"] is not None:
        findings = tuple(Finding(FindingKind(f["kind"]), f["feature_id"], f["ep"], f["failing"], f["declared"],
                                 Outcome(f["outcome"]) if f["outcome"] else None, f["message"], f["line"])
                         for f in doc["findings"])
        gate = GateResult(findings, doc["exit_code"], doc["verdict"])
    return RunResult(matrix_path=doc["matrix"], features=tuple(doc["features"]), eps=eps, results=results,
                     gate=gate, environment=dict(doc["environment"]), semantics=doc["semantics"],
                     incomplete=doc["incomplete"], declared=declared, catalog_version=doc["catalog_version"],
                     machines={label: dict(m) for label, m in doc.get("machines", {}).items()},
                     coverage={alias: dict(c) for alias, c in doc.get("coverage", {}).items()},
                     shard=dict(doc.get("shard") or {}))


def load(path: str | Path) -> RunResult:
    """Read, validate and convert one report file. Raises :class:`SavedError`."""
    return from_dict(read(path))
