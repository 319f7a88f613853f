"""Saved results: a JSON report read back into a :class:`~epaudit.contract.results.RunResult`.

``epaudit check --results``, ``epaudit diff`` and ``epaudit bless --from`` work from
files other runs wrote (``epaudit probe --json``, ``check --format json``). A file is
trusted only after it passes the JSON Schema shipped with the package
(``epaudit/report/report.schema.json``, the one the JSON formatter is tested against)
and the cross-checks a schema cannot express (each result's EP and feature are listed,
no cell twice, a PASS carries the placement that earned it). Anything else is a
:class:`SavedError` whose text is one line naming the file and the JSON path: the CLI
prints it and exits 2.

Strict JSON only (issue 24): a key given twice in one object (readers disagree on which
one counts: Python's ``json`` took the last, so ``"outcome": "IGNORED", "outcome": "PASS"``
read as a pass), a number outside a double (``1e999`` read as infinity) or an integer
outside 64 bits, and ``NaN``/``Infinity`` are refused. With a results key
(:mod:`epaudit.contract.signing`) a signed file whose signature does not match is refused,
and with ``require_signed`` so is an unsigned one.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..contract import signing
from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import REPORT_SCHEMA_VERSION, Classified, EPInfo, Finding, GateResult, RunResult

#: Larger files are refused before reading: a full-catalog report of one EP is ~50 KiB.
MAX_BYTES = 32 * 1024 * 1024
#: The report schema this epaudit writes (:data:`epaudit.contract.results.REPORT_SCHEMA_VERSION`).
SCHEMA_VERSION = REPORT_SCHEMA_VERSION
#: The report schemas it reads: 3, and 2 (issue 23's evidence, before issue 24's run id,
#: versions and signature): a schema-2 report's versions are those its environment and
#: EPs record, and it is never signed (a gate with ``require_signed`` refuses it as
#: unsigned). Schema 1 is refused: its cells cannot be read as this epaudit's.
READ_VERSIONS = (2, 3)
#: Integers beyond this magnitude are refused: no report field needs more than 64 bits.
MAX_INT = 2 ** 63
_MAX_SHOWN = 160


class SavedError(Exception):
    """A results file that cannot be used; ``str()`` is one line: ``FILE: PATH: problem``."""

    def __init__(self, path: str, where: str, problem: str):
        from ..textenc import one_line

        self.path, self.where, self.problem = path, where, problem
        super().__init__(one_line(f"{path}: {where}: {problem}" if where else f"{path}: {problem}"))


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


class _NotStrict(ValueError):
    """JSON that parses but is not strict: a duplicate key, a number no double holds."""


def _strict_constant(name: str):
    raise _NotStrict(f"{name} is not strict JSON")


def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotStrict(f"number {text[:40]} is beyond what a double holds (it would read as {value})")
    return value


def _strict_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise _NotStrict(f"integer {text[:40]}{'…' if len(text) > 40 else ''} is outside 64 bits")
    value = int(text)
    if abs(value) > MAX_INT:
        raise _NotStrict(f"integer {text} is outside 64 bits")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _NotStrict(f"key {k!r} given twice in one object (JSON readers disagree on which counts)")
        out[k] = v
    return out


def loads_strict(text: str) -> Any:
    """Parse strict JSON: no duplicate keys, no ``NaN``/``Infinity``, no number beyond a
    double or an integer beyond 64 bits.

    Raises:
        json.JSONDecodeError: not JSON. ``ValueError``: JSON, but not strict (the message
            says what). ``RecursionError``: nested absurdly deep.
    """
    return json.loads(text, parse_constant=_strict_constant, parse_float=_strict_float, parse_int=_strict_int,
                      object_pairs_hook=_unique_keys)


def _read_bytes(p: Path, name: str) -> bytes:
    """The file's bytes, opened without blocking (a FIFO swapped in after a check must not hang the gate)."""
    import stat

    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SavedError(name, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SavedError(name, "", "not a regular file")
        if st.st_size > MAX_BYTES:
            raise SavedError(name, "", f"{st.st_size} bytes, over the {MAX_BYTES // (1024 * 1024)} MiB a results "
                                       "file may be")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SavedError(name, "", f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise SavedError(name, "", f"over the {MAX_BYTES // (1024 * 1024)} MiB a results file may be")
    return raw


def read(path: str | Path, *, key: bytes | None = None, require_signed: bool = False) -> dict:
    """Read and validate one report file; the parsed document.

    Args:
        path: the file.
        key: the results key (:func:`epaudit.contract.signing.load_key`): a signed file
            must verify under it.
        require_signed: refuse a file without a signature that verifies under ``key``
            (``[gate] require_signed``; ``key`` must then be given).

    Raises:
        SavedError: missing, unreadable, over :data:`MAX_BYTES`, not UTF-8, not strict
            JSON (with the line, or what is not strict), nested absurdly deep, not
            matching the schema (with the JSON path of the first problem), or a
            signature that is missing (when required) or does not verify.
    """
    name = str(path)
    raw = _read_bytes(Path(path), name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SavedError(name, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        doc = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise SavedError(name, f"line {exc.lineno}", f"not valid JSON ({exc.msg}); truncated or not a report?") from None
    except ValueError as exc:
        raise SavedError(name, "", f"not strict JSON: {exc}") from None
    except RecursionError:
        raise SavedError(name, "", "JSON nested too deeply to be a report") from None
    validate(doc, name)
    _check_signature(doc, name, key, require_signed)
    return doc


def _check_signature(doc: dict, name: str, key: bytes | None, require_signed: bool) -> None:
    signed = signing.FIELD in doc
    if key is None:
        if require_signed:
            raise SavedError(name, "signature", "signatures are required, but no results key was given "
                                                f"(${signing.ENV} or --results-key-file) to verify them")
        return
    if not signed:
        if require_signed:
            raise SavedError(name, "signature", "unsigned, and the matrix sets [gate] require_signed = true: "
                                                f"sign results where they are made (${signing.ENV})")
        return
    problem = signing.verify(doc, key)
    if problem:
        raise SavedError(name, "signature", problem)


def validate(doc: Any, name: str = "<report>") -> None:
    """Check a parsed document against the shipped schema and the cross-references.

    Raises:
        SavedError: the first problem, with its JSON path.
    """
    import jsonschema

    if not isinstance(doc, dict):
        raise SavedError(name, "", f"not an epaudit JSON report (top level is {type(doc).__name__}, not an object)")
    version = doc.get("schema_version")
    if version == 1:
        raise SavedError(name, "schema_version",
                         "1: written by an epaudit whose FALLBACK and DECOMPOSED cells were never compared with "
                         "their references (docs/outcomes-and-gates.md \"Outcomes\"); its cells cannot be read "
                         f"as this epaudit's: re-run it (this epaudit reads schema_version "
                         f"{' and '.join(map(str, READ_VERSIONS))})")
    if version not in READ_VERSIONS:
        raise SavedError(name, "schema_version",
                         f"{version!r}: this epaudit reads JSON reports of schema_version "
                         f"{' and '.join(map(str, READ_VERSIONS))}")
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
    """A saved cell is believed only when its own evidence earns its outcome (issue 24).

    * Its outcome is re-derived from its evidence with the decision ``epaudit check`` uses
      (:func:`epaudit.classify.outcome.decide`: placement verdict, ORT's error, poisoned
      counts, comparisons with the reference and the control and their bounds): a stored
      outcome the evidence does not decide is refused, naming the cell (``"outcome":
      "MISMATCH"`` edited to ``"PASS"``, its comparison left saying 1024 of 1024 elements
      bad, read as a pass).
    * The placement verdict it rests on is recomputed from the placement it records
      (:func:`epaudit.classify.placement.judge`), so an edited verdict cannot earn a pass.
    * A PASS comes from a session that asked for the EP the report names, whatever its
      ``fault`` field says (a CPU run relabelled as CUDA), with its numbers within tolerance.
    * A not-live EP has only not-run cells, a live one never ``UNAVAILABLE``.

    Raises:
        SavedError: naming the file, the cell and what its evidence says instead.
    """
    from ..classify.outcome import decide

    ep = next(e for e in doc["eps"] if e["alias"] == r["ep"])
    cell = f"{where} ({r['feature']} on {r['ep']})"
    if not ep["live"] and r["outcome"] not in _NOT_RUN:
        raise SavedError(name, f"{where}.outcome", f"{r['outcome']} on {r['ep']}, which the report "
                                                   "says was not live")
    if ep["live"] and r["outcome"] == "UNAVAILABLE":  # a failing cell edited to "not run" (issue 24)
        raise SavedError(name, f"{where}.outcome", f"UNAVAILABLE on {r['ep']}, which the report says was live: "
                                                   "a live EP's probes run (only a declared skip is not run)")
    ev = _numbers_back(r["evidence"])
    try:
        derived, why = decide(ev)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise SavedError(name, f"{where}.evidence", f"{cell}: not the evidence of a cell ({type(exc).__name__}: "
                                                    f"{str(exc)[:80]}): its {r['outcome']} cannot be re-derived") from None
    if derived.value != r["outcome"]:
        raise SavedError(name, f"{where}.outcome", f"{cell}: says {r['outcome']}, but its evidence decides "
                                                   f"{derived.value} ({why[:200]})")
    _check_placement(ev, r, cell, where, name)
    if r["outcome"] != "PASS":
        return
    asked = ev.get("asked")
    # Whatever the fault field says: a run with a fault injected is never evidence a gate
    # passes on (the fleet reads it as incomplete), and it never excuses a session that
    # asked another EP.
    if asked != ep["name"]:
        raise SavedError(name, f"{where}.evidence.asked", f"PASS on {r['ep']} ({ep['name']}) from a session "
                                                          f"that asked for {asked!r}")
    _check_numbers(ev, where, name)


#: The numbers of a comparison (:func:`epaudit.classify.compare.compare`) that may be
#: non-finite: an EP's finite value against a ``-inf`` reference is an infinite error.
_COMPARISON_NUMBERS = ("max_abs", "max_rel", "max_ratio", "ref_at_worst", "actual_at_worst")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _numbers_back(ev: Any) -> Any:
    """The evidence as :func:`epaudit.classify.outcome.decide` reads it: the JSON report
    writes a comparison's non-finite numbers as the strings ``"inf"``, ``"-inf"``, ``"nan"``
    (:mod:`epaudit.report.json`), and they are floats again here. Before, a saved cell with
    an infinite error (QNN's Attention ``qk_matmul_output``, finite where the reference is
    ``-inf``) could not be re-derived and its whole report was refused. Only those keys of
    ``comparison`` and ``control_comparison`` entries are read back; anything else stays."""
    if not isinstance(ev, dict):
        return ev
    out = dict(ev)
    for key in ("comparison", "control_comparison"):
        cmp = ev.get(key)
        if isinstance(cmp, dict):
            out[key] = {name: ({k: (_NONFINITE[v] if k in _COMPARISON_NUMBERS and isinstance(v, str)
                                    and v in _NONFINITE else v) for k, v in c.items()}
                               if isinstance(c, dict) else c)
                        for name, c in cmp.items()}
    return out


def _check_placement(ev: dict, r: dict, cell: str, where: str, name: str) -> None:
    """The stored placement verdict is the one its placement gives (``judge`` as
    :func:`epaudit.classify.outcome.measure_case` calls it; the node under test is
    ``probe``, or the whole graph for an ``_expanded`` conformance case)."""
    pv = ev.get("placement_verdict")
    if pv is None:
        if r["outcome"] == "PASS":
            raise SavedError(name, f"{where}.evidence.placement_verdict", f"{cell}: PASS without the placement "
                                                                          "that earned it")
        return
    from ..classify.placement import judge
    from ..contract.probes import PROBE_NODE_NAME

    placement, source = ev.get("placement"), ev.get("placement_source")
    for key in ("placement", "assigned"):
        nodes = ev.get(key)
        if nodes is not None and (not isinstance(nodes, list) or not all(isinstance(p, dict) for p in nodes)):
            raise SavedError(name, f"{where}.evidence.{key}", f"{cell}: a placement entry that is not an object "
                                                              "(no node, no EP)")
    executed = placement if source == "profiling" else None
    assigned = ev["assigned"] if "assigned" in ev else (placement if source != "profiling" else None)
    node = None if r["feature"].endswith("_expanded") else PROBE_NODE_NAME
    try:
        kind = judge(assigned, executed, str(ev.get("asked")), node)["kind"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SavedError(name, f"{where}.evidence.placement", f"{cell}: a placement that cannot be judged "
                                                              f"({type(exc).__name__})") from None
    if not isinstance(pv, dict) or pv.get("kind") != kind:
        shown = pv.get("kind") if isinstance(pv, dict) else pv
        raise SavedError(name, f"{where}.evidence.placement_verdict", f"{cell}: says {shown!r}, but its placement "
                                                                      f"gives {kind!r}")


def _check_numbers(ev: dict, where: str, name: str) -> None:
    """A PASS holds the comparison that earned it: at least one output, every one within
    tolerance (what :func:`epaudit.classify.outcome.decide` found; a PASS whose
    comparisons were deleted would otherwise decide "all 0 outputs within tolerance")."""
    cmp = ev.get("comparison")
    if not isinstance(cmp, dict) or not cmp:
        raise SavedError(name, f"{where}.evidence.comparison", "PASS without the comparison with the reference "
                                                               "that earned it")
    for out, c in cmp.items():
        if not isinstance(c, dict) or c.get("match") is not True or c.get("nonfinite") or c.get("bad"):
            raise SavedError(name, f"{where}.evidence.comparison.{out}",
                             "PASS, but the comparison with the reference says the output is out of tolerance")


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
                     gate=gate, environment={**doc["environment"], "run_id": doc.get("run_id"),
                                             "versions": dict(doc.get("versions") or _versions_of(doc)),
                                             "signed": signing.FIELD in doc},
                     semantics=doc["semantics"],
                     incomplete=doc["incomplete"], declared=declared, catalog_version=doc["catalog_version"],
                     machines={label: dict(m) for label, m in doc.get("machines", {}).items()},
                     coverage={alias: dict(c) for alias, c in doc.get("coverage", {}).items()},
                     shard=dict(doc.get("shard") or {}))


def _versions_of(doc: dict) -> dict:
    """The ``versions`` of a schema-1 report, from what it recorded elsewhere."""
    env = doc.get("environment") or {}
    return {"epaudit": str(doc.get("epaudit") or env.get("epaudit") or ""), "onnx": str(env.get("onnx") or ""),
            "onnxruntime": sorted({e["ort_version"] for e in doc["eps"] if e.get("ort_version")})}


def load(path: str | Path, *, key: bytes | None = None, require_signed: bool = False) -> RunResult:
    """Read, validate and convert one report file (``key``, ``require_signed``: see
    :func:`read`); its ``environment`` holds ``run_id``, ``versions`` and ``signed``.

    Raises:
        SavedError: see :func:`read`.
    """
    return from_dict(read(path, key=key, require_signed=require_signed))
