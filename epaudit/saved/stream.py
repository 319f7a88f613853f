"""Saved results read one cell at a time: a JSON report of any size, in bounded memory.

:func:`epaudit.saved.read.load` parses a whole file and validates it in one piece (files up
to 32 MiB). A run of the whole catalog on one EP is ~5 MB today and grows with the catalog
(16x: ~80 MB); a fleet merge reads many of them. :func:`load` reads a report as it is
written: the keys around ``results`` parsed whole (they are small), the ``results`` array one
element at a time, each cell validated against the schema's ``result`` definition and the
report's cross-checks (its EP and feature listed, no cell twice, a PASS carrying the evidence
that earned it: :func:`epaudit.saved.read._check_earned`) and put in a
:class:`~epaudit.contract.cellstore.CellStore`, whose evidence waits on disk. The keys around
``results`` pass :func:`epaudit.saved.read.validate` as a report without cells, so every rule
of a whole-file read applies.

A file cut short anywhere, or whose JSON breaks, is refused with one line naming the file and
the line (:class:`~epaudit.saved.read.SavedError`, exit 2): never a partial set of cells
served as a whole run. The JSON is as strict as a whole-file read's
(:func:`epaudit.saved.read.loads_strict`: no key twice in one object, the report's own keys
included, no ``NaN``, no number beyond a double or an integer beyond 64 bits), and so is the
signature (:mod:`epaudit.contract.signing`): with a results key a signed file must verify, and
with ``require_signed`` an unsigned one is refused. The signature covers the canonical JSON
of the whole report, whose ``results`` sit between keys the file gives after them, so each
cell's canonical bytes are spooled to an unlinked temp file as it is read and fed to the HMAC
(:class:`~epaudit.contract.signing.StreamSigner`) once the rest of the report is known. Files up to :data:`MAX_BYTES` are read; a single JSON value (a cell, the
feature list) may be up to :data:`MAX_VALUE` characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..contract import signing
from ..contract.cellstore import CellStore
from ..contract.outcomes import Outcome
from ..contract.results import Classified, RunResult
from .read import (
    SavedError,
    _check_earned,
    _check_signature,
    _NotStrict,
    _strict_constant,
    _strict_float,
    _strict_int,
    _unique_keys,
    _where,
    from_dict,
    schema,
    validate,
)

#: Largest saved file read this way (memory does not grow with it: cells wait on disk).
MAX_BYTES = 8 * 1024 * 1024 * 1024
#: Largest single JSON value read (a cell's evidence, the feature list), characters.
MAX_VALUE = 256 * 1024 * 1024
_CHUNK = 1 << 20
_WS = " \t\n\r"


class _Broken(Exception):
    """Not JSON where it should be: ``line`` and what was wrong."""

    def __init__(self, line: int, problem: str):
        super().__init__(problem)
        self.line, self.problem = line, problem


class _Tokens:
    """JSON read from a text stream piece by piece (one value at a time)."""

    def __init__(self, fh):
        self._fh = fh
        self._buf = ""
        self._pos = 0
        self._line = 1  # line of the first character of the buffer
        self._eof = False
        self._decoder = json.JSONDecoder(parse_constant=_strict_constant, parse_float=_strict_float,
                                         parse_int=_strict_int, object_pairs_hook=_unique_keys)

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._fh.read(_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._line += self._buf.count("\n", 0, self._pos)
        self._buf = self._buf[self._pos:] + chunk
        self._pos = 0
        return True

    def line(self) -> int:
        return self._line + self._buf.count("\n", 0, self._pos)

    def peek(self) -> str:
        """The next character that is not whitespace (not consumed); ``""`` at the end."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in _WS:
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return ""

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            what = "the end of the file" if not c else repr(c)
            raise _Broken(self.line(), f"expected {' or '.join(repr(x) for x in chars)}, found {what}")
        self._pos += 1
        return c

    def value(self) -> Any:
        """One whole JSON value."""
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                # Maybe only cut by the buffer's end: read on and try again; at the end of
                # the file (or past the largest value) it is broken JSON.
                if len(self._buf) - self._pos > MAX_VALUE:
                    raise _Broken(self.line(), f"a value over {MAX_VALUE} characters, or not JSON ({exc.msg})") from None
                if self._fill():
                    continue
                raise _Broken(self._line + exc.doc.count("\n", 0, exc.pos), exc.msg) from None
            if end == len(self._buf) and not self._eof:
                # A number may go on in the next chunk: decode it again with more text.
                if self._fill():
                    continue
            self._pos = end
            return value


def load(path: str | Path, *, key: bytes | None = None, require_signed: bool = False) -> RunResult:
    """Read, validate and convert one report file, cells one at a time (see the module
    docstring); ``key`` and ``require_signed`` as :func:`epaudit.saved.read.read` takes them.
    Its ``environment`` holds ``run_id``, ``versions`` and ``signed``.

    Raises:
        SavedError: missing, unreadable, over :data:`MAX_BYTES`, not UTF-8, not strict JSON
            or cut short (with the line), not matching the schema or the cross-checks (with
            the JSON path of the first problem), or a signature that is missing (when
            required) or does not verify.
    """
    import jsonschema

    name = str(path)
    p = Path(path)
    try:
        if not p.is_file():
            raise SavedError(name, "", "not a regular file" if p.exists() else "cannot read: No such file or directory")
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise SavedError(name, "", f"{size} bytes, over the {MAX_BYTES // (1024 ** 3)} GiB a results file may be")
        fh = open(p, encoding="utf-8", newline="")
    except OSError as exc:
        raise SavedError(name, "", f"cannot read: {exc.strerror or exc}") from None
    cell_schema = jsonschema.Draft202012Validator(
        {"$schema": schema().get("$schema"), "$defs": schema()["$defs"], "$ref": "#/$defs/result"})
    ctx = _Context(name, cell_schema, spool=key is not None)
    try:
        _read_into(ctx, fh, name)
        if "results" not in ctx.head:
            ctx.head["results"] = []  # absent: the head's validation names it
        validate(ctx.head, name)
        for i, cell_key in ctx.deferred:
            ctx.cross(i, ctx.brief(cell_key))
        _verify(ctx, name, key, require_signed)
    finally:
        ctx.close()
    result = from_dict(ctx.head)
    import dataclasses

    return dataclasses.replace(result, results=ctx.store, declared=ctx.declared)


def _read_into(ctx: "_Context", fh, name: str) -> None:
    """Parse the report from ``fh`` into ``ctx``: its keys around ``results`` whole, its cells one by one."""
    try:
        with fh:
            tokens = _Tokens(fh)
            if tokens.peek() != "{":
                if tokens.peek() == "":
                    raise _Broken(1, "empty file")
                doc = tokens.value()  # not an object: say what it is, as a whole read would
                validate(doc, name)
            tokens.expect("{")
            while tokens.peek() != "}":
                member = tokens.value()
                if not isinstance(member, str):
                    raise _Broken(tokens.line(), "expected a key")
                tokens.expect(":")
                if member == "results" and "results" in ctx.head:
                    raise SavedError(name, "results", "given twice")
                if member in ctx.head:
                    raise _NotStrict(f"key {member!r} given twice in one object (JSON readers disagree on "
                                     "which counts)")
                if member != "results":
                    ctx.head[member] = tokens.value()
                else:
                    ctx.head["results"] = []
                    tokens.expect("[")
                    while tokens.peek() != "]":
                        ctx.cell(tokens.value())
                        if tokens.peek() != "]":
                            tokens.expect(",")
                    tokens.expect("]")
                if tokens.peek() != "}":
                    tokens.expect(",")
            tokens.expect("}")
            if tokens.peek() != "":
                raise _Broken(tokens.line(), "extra data after the report")
    except _Broken as exc:
        raise SavedError(name, f"line {exc.line}", f"not valid JSON ({exc.problem}); truncated or not a report?") from None
    except UnicodeDecodeError as exc:
        raise SavedError(name, "", f"not UTF-8 text ({exc.reason})") from None
    except _NotStrict as exc:  # a key twice, NaN or Infinity, a number beyond a double or 64 bits
        raise SavedError(name, "", f"not strict JSON: {exc}") from None
    except ValueError as exc:
        raise SavedError(name, "", str(exc)) from None
    except RecursionError:
        raise SavedError(name, "", "JSON nested too deeply to be a report") from None
    except OSError as exc:
        raise SavedError(name, "", f"cannot read: {exc.strerror or exc}") from None


def _verify(ctx: "_Context", name: str, key: bytes | None, require_signed: bool) -> None:
    """The signature rules of :func:`epaudit.saved.read.read`, the HMAC fed the spooled cells."""
    head = ctx.head
    if key is None or signing.FIELD not in head:
        _check_signature(head, name, key, require_signed)  # no key, or unsigned: no HMAC to compute
        return
    signer = signing.StreamSigner(head, "results", key)
    ctx.spool.seek(0)
    while chunk := ctx.spool.read(_CHUNK):
        signer.update_raw(chunk)
    problem = signing.verify(head, key, signer=signer)
    if problem:
        raise SavedError(name, "signature", problem)


class _Context:
    """One file being read: its keys around ``results``, its cells so far (with ``spool``,
    their canonical JSON too, for the signature)."""

    def __init__(self, name: str, cell_schema, spool: bool = False):
        import tempfile

        self.spool = tempfile.TemporaryFile() if spool else None
        self.name, self.cell_schema = name, cell_schema
        self.head: dict[str, Any] = {}
        self.store = CellStore()
        self.declared: dict[tuple[str, str], str] = {}
        #: Cells read before the report's eps and features: (index, key); their evidence waits
        #: in the store, read back one cell at a time for the cross-checks.
        self.deferred: list[tuple[int, tuple[str, str]]] = []
        self.count = 0
        self._features: tuple[Any, set] | None = None

    def cell(self, r: Any) -> None:
        """Validate results[i] on its own and keep it."""
        import jsonschema

        i, name = self.count, self.name
        self.count += 1
        where = f"results[{i}]"
        try:
            error = jsonschema.exceptions.best_match(self.cell_schema.iter_errors(r))
        except RecursionError:
            raise SavedError(name, where, "JSON nested too deeply to be a report") from None
        if error is not None:
            message = error.message if len(error.message) <= 160 else error.message[:160] + "…"
            raise SavedError(name, where + (("." + _where(error.absolute_path)) if error.absolute_path else ""),
                             message)
        if self.spool is not None:
            self.spool.write((b"," if i else b"") + signing.canonical_value(r))
        key = (r["feature"], r["ep"])
        if key in self.store:
            raise SavedError(name, where, f"cell ({r['feature']}, {r['ep']}) given twice")
        if "eps" in self.head and "features" in self.head:
            self.cross(i, r)
        else:
            self.deferred.append((i, key))
        if r["declared"] != "undeclared":
            self.declared[key] = r["declared"]
        self.store.put(Classified(r["feature"], r["ep"], Outcome(r["outcome"]), r["summary"], r["evidence"],
                                  Outcome(r["control"]) if r["control"] else None, float(r["seconds"])))

    def brief(self, key: tuple[str, str]) -> dict:
        """What the cross-checks read of a stored cell: feature, EP, outcome and evidence (from disk)."""
        c = self.store[key]
        return {"feature": c.feature_id, "ep": c.ep, "outcome": c.outcome.value, "evidence": c.evidence}

    def close(self) -> None:
        """Remove the spool (never raises)."""
        spool, self.spool = self.spool, None
        if spool is not None:
            try:
                spool.close()
            except OSError:
                pass

    def cross(self, i: int, r: dict) -> None:
        """The cross-checks of :func:`epaudit.saved.read.validate` for one cell."""
        name, eps = self.name, self.head.get("eps")
        if not isinstance(eps, list):
            return  # the head's own validation says what is wrong with it
        if r["ep"] not in {e.get("alias") for e in eps if isinstance(e, dict) and isinstance(e.get("alias"), str)}:
            raise SavedError(name, f"results[{i}].ep", f"{r['ep']!r} is not one of the report's eps")
        features = self.head.get("features")
        if isinstance(features, list):
            if self._features is None or self._features[0] is not features:
                self._features = (features, {f for f in features if isinstance(f, str)})
            if r["feature"] not in self._features[1]:
                raise SavedError(name, f"results[{i}].feature", f"{r['feature']!r} is not one of the report's features")
        if all(isinstance(e, dict) and "alias" in e and "live" in e and "name" in e for e in eps):
            _check_earned(self.head, r, f"results[{i}]", name)
