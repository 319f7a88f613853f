"""Saved findings: minimal failing configurations of ``epaudit sweep`` as catalog features.

``epaudit sweep --save found.toml`` (or ``.json``) writes each minimal failing configuration
as a *finding*: its stable id (``sweep.<Op>.<10 hex>``, the hash of the configuration), the
operator, opset and dtype, the configuration in words, how and where it failed, and the
probe itself (the one-node model, its feeds and float64 reference, the control when there
is one, the tolerance), so the file alone rebuilds it, without onnx's evaluator and on any
machine. A matrix names such files under ``[catalog] findings`` (docs/matrix.md); each
finding is then a feature of the catalog like a built-in one (:func:`register`): ``check``,
``probe``, ``selftest``, ``scan`` and the fleet see it, the gate checks it on every later
release, and a fix reads ``stale`` under an ``unsupported`` declaration.

The file format (``format = "epaudit-findings/1"``): a TOML array of tables ``[[finding]]``
(or a JSON object ``{"format": ..., "finding": [...]}``) with the keys of :data:`KEYS`; the
blobs are base64 (``model``: a serialized ``ModelProto``; ``feeds`` and ``reference``: an
``.npz`` archive, read without pickles). A problem is a :class:`FindingsError` naming the
file, the key (``finding[2].model``) and its line.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..contract.probes import Case, Feature, Probe, Tolerance, Use

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMAT = "epaudit-findings/1"
#: A finding's id: ``sweep.`` then dotted words (the sweep makes ``sweep.Conv.1a2b3c4d5e``).
ID = re.compile(r"^sweep\.[A-Za-z0-9_.-]+$")
#: Larger findings files are refused before reading.
MAX_BYTES = 64 * 1024 * 1024
#: key -> (type, required).
KEYS = {
    "id": (str, True), "op_type": (str, True), "domain": (str, True), "opset": (int, True),
    "dtype": (str, True), "config": (str, True), "attributes": (str, False), "outcome": (str, False),
    "found": (str, False), "atol": (float, True), "rtol": (float, True), "outputs": (list, True),
    "exact": (list, False), "model": (str, True), "feeds": (str, True), "reference": (str, True),
    "control_model": (str, False), "control_feeds": (str, False), "control_reference": (str, False),
    "key": (str, False),
}


class FindingsError(Exception):
    """A findings file that cannot be used: ``FILE:LINE: KEY: problem`` (one line)."""

    def __init__(self, path: str, key: str, line: int | None, problem: str):
        self.path, self.key, self.line, self.problem = path, key, line, problem
        where = f"{path}:{line}" if line else path
        text = f"{where}: {key}: {problem}" if key else f"{where}: {problem}"
        super().__init__("".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
                                 for ch in text))


@dataclass(frozen=True)
class Finding:
    """One saved finding (see the module docstring)."""

    id: str
    op_type: str
    domain: str
    opset: int
    dtype: str
    config: str
    probe: Probe
    attributes: Mapping[str, object]
    outcome: str = ""
    found: str = ""
    key: str = ""

    def feature(self, source: str) -> Feature:
        """This finding as a catalog :class:`Feature` (``source`` names its file)."""
        probe = self.probe
        return Feature(id=self.id, op_type=self.op_type, domain=self.domain, opset=self.opset, dtype=self.dtype,
                       changes=f"sweep finding: {self.config}",
                       source=f"epaudit sweep finding saved in {source}" + (f" ({self.found})" if self.found else ""),
                       build=lambda: probe,
                       uses=Use(attributes={k: (tuple(v) if isinstance(v, list) else v)
                                            for k, v in self.attributes.items()}))


# --------------------------------------------------------------------------- blobs
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _npz(arrays: Mapping[str, np.ndarray]) -> str:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return _b64(buf.getvalue())


def _unnpz(text: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def record(f: Finding) -> dict:
    """The JSON/TOML record of ``f`` (the keys of :data:`KEYS`)."""
    p = f.probe
    out = {"id": f.id, "op_type": f.op_type, "domain": f.domain, "opset": f.opset, "dtype": f.dtype,
           "config": f.config, "attributes": json.dumps(f.attributes, sort_keys=True, default=list),
           "outcome": f.outcome, "found": f.found, "atol": float(p.tolerance.atol), "rtol": float(p.tolerance.rtol),
           "outputs": list(p.subject.outputs), "exact": sorted(p.subject.exact), "model": _b64(p.subject.model),
           "feeds": _npz(p.subject.feeds), "reference": _npz(p.subject.reference), "key": f.key}
    if p.control is not None:
        out.update(control_model=_b64(p.control.model), control_feeds=_npz(p.control.feeds),
                   control_reference=_npz(p.control.reference))
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def dumps(findings: Sequence[Finding], path: str) -> str:
    """The text of a findings file (TOML, or JSON when ``path`` ends in ``.json``)."""
    records = [record(f) for f in findings]
    if path.endswith(".json"):
        return json.dumps({"format": FORMAT, "finding": records}, indent=1, allow_nan=False) + "\n"
    lines = ["# Findings of `epaudit sweep --save`: minimal failing configurations as catalog features.",
             "# Name this file under [catalog] findings in a matrix (docs/sweep.md).",
             f"format = {json.dumps(FORMAT)}", ""]
    for r in records:
        lines.append("[[finding]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in r.items()]
        lines.append("")
    return "\n".join(lines)


def merge(old: Sequence[Finding], new: Sequence[Finding]) -> list[Finding]:
    """``old`` with ``new`` added: a finding of an id already there replaces it, in place."""
    out = {f.id: f for f in old}
    for f in new:
        out[f.id] = f
    return list(out.values())


# --------------------------------------------------------------------------- reading
def _line_of(text: str, index: int, key: str | None, is_toml: bool) -> int | None:
    if not is_toml:
        return None
    headers = [i for i, line in enumerate(text.splitlines(), 1) if line.strip() == "[[finding]]"]
    if index >= len(headers):
        return None
    start = headers[index]
    if key is None:
        return start
    end = headers[index + 1] if index + 1 < len(headers) else len(text.splitlines()) + 1
    for i, line in enumerate(text.splitlines()[start:end - 1], start + 1):
        if line.split("=", 1)[0].strip() == key:
            return i
    return start


def load(path: str | os.PathLike) -> list[Finding]:
    """The findings of the file at ``path`` (TOML, or JSON by its ``.json`` extension).

    Raises:
        FindingsError: an unreadable file, a syntax error, a missing or mistyped key, an
            id that is not ``sweep.*`` or appears twice, a blob that does not decode, a
            reference that lacks an output.
    """
    name = str(path)
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise FindingsError(name, "", None, f"over the {MAX_BYTES // (1024 * 1024)} MiB a findings file may be")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FindingsError:
        raise
    except OSError as exc:
        raise FindingsError(name, "", None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise FindingsError(name, "", None, f"not UTF-8 text ({exc.reason})") from None
    is_toml = not name.endswith(".json")
    try:
        doc = tomllib.loads(text) if is_toml else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise FindingsError(name, "", int(m.group(1)) if m else None,
                            f"{'TOML' if is_toml else 'JSON'} syntax: {str(exc).split(' (at line')[0]}") from None
    if not isinstance(doc, dict):
        raise FindingsError(name, "", None, "must be a table with format and finding")
    if doc.get("format") != FORMAT:
        raise FindingsError(name, "format", None, f"must be {FORMAT!r}, got {doc.get('format')!r}")
    unknown = sorted(set(doc) - {"format", "finding"})
    if unknown:
        raise FindingsError(name, unknown[0], None, "unknown key; allowed: format, finding")
    entries = doc.get("finding", [])
    if not isinstance(entries, list):
        raise FindingsError(name, "finding", None, "must be an array of tables ([[finding]])")
    out, seen = [], set()
    for i, entry in enumerate(entries):
        out.append(_finding(name, text, i, entry, is_toml))
        if out[-1].id in seen:
            raise FindingsError(name, f"finding[{i}].id", _line_of(text, i, "id", is_toml),
                                f"{out[-1].id!r} appears twice")
        seen.add(out[-1].id)
    return out


def _finding(name: str, text: str, i: int, entry, is_toml: bool) -> Finding:
    def fail(key: str | None, problem: str) -> FindingsError:
        return FindingsError(name, f"finding[{i}]" + (f".{key}" if key else ""), _line_of(text, i, key, is_toml),
                             problem)

    if not isinstance(entry, dict):
        raise fail(None, "must be a table")
    for key in entry:
        if key not in KEYS:
            raise fail(key, f"unknown key; allowed: {', '.join(KEYS)}")
    for key, (typ, required) in KEYS.items():
        if key not in entry:
            if required:
                raise fail(None, f"missing key {key!r}")
            continue
        v = entry[key]
        ok = isinstance(v, typ) and not isinstance(v, bool) if typ is not float else \
            isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok:
            raise fail(key, f"must be {typ.__name__}, got {type(v).__name__}")
    if not ID.match(entry["id"]):
        raise fail("id", f"{entry['id']!r} is not a sweep finding id (sweep.<Op>.<hash>)")
    if not all(isinstance(o, str) and o for o in entry["outputs"]) or not entry["outputs"]:
        raise fail("outputs", "must be a non-empty list of output names")
    cases = {}
    for prefix in ("", "control_"):
        if prefix and f"{prefix}model" not in entry:
            continue
        try:
            model = base64.b64decode(entry[f"{prefix}model"], validate=True)
        except (ValueError, TypeError):
            raise fail(f"{prefix}model", "not base64") from None
        blobs = {}
        for part in ("feeds", "reference"):
            key = f"{prefix}{part}"
            if key not in entry:
                raise fail(None, f"missing key {key!r}")
            try:
                blobs[part] = _unnpz(entry[key])
            except Exception as exc:  # noqa: BLE001 - any decoding trouble is the file's
                raise fail(key, f"not a base64 .npz archive ({type(exc).__name__})") from None
        missing = [o for o in entry["outputs"] if o not in blobs["reference"]]
        if missing:
            raise fail(f"{prefix}reference", f"has no output {missing[0]!r}")
        ref = {o: np.asarray(blobs["reference"][o], dtype=np.float64) for o in entry["outputs"]}
        cases[prefix] = Case(model, blobs["feeds"], tuple(entry["outputs"]), ref,
                             frozenset(entry.get("exact", ())))
    if not cases[""].model:
        raise fail("model", "is empty")
    try:
        attributes = json.loads(entry.get("attributes") or "{}")
    except json.JSONDecodeError:
        raise fail("attributes", "not a JSON object") from None
    if not isinstance(attributes, dict):
        raise fail("attributes", "not a JSON object")
    atol, rtol = float(entry["atol"]), float(entry["rtol"])
    if not (np.isfinite(atol) and np.isfinite(rtol) and atol >= 0 and rtol >= 0):
        raise fail("atol", "atol and rtol must be finite and >= 0")
    probe = Probe(entry["id"], cases[""], cases.get("control_"), Tolerance(atol, rtol), entry["dtype"])
    return Finding(entry["id"], entry["op_type"], entry["domain"], int(entry["opset"]), entry["dtype"],
                   entry["config"], probe, attributes, entry.get("outcome", ""), entry.get("found", ""),
                   entry.get("key", ""))
