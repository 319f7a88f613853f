"""Validating a parsed matrix: the top level, ``[gate]`` and ``[conformance]``.

Providers are checked in :mod:`epaudit.matrix.providers`, feature cells in
:mod:`epaudit.matrix.cells`; :class:`Validator` joins the three. Every problem is a
:class:`~epaudit.matrix.model.MatrixError` with the key's line (:mod:`epaudit.matrix.lines`).
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterable

from .cells import CellChecks
from .lines import _dotted, _hint, _Lines, _tname
from .model import PARITY, PLACEHOLDER_ISSUES, SCHEMA_VERSION, ConformanceSkip, Gate, Matrix, MatrixError
from .onnxkey import VERSION as _ONNX_VERSION
from .onnxkey import installed_onnx
from .providers import ProviderChecks


class Validator(ProviderChecks, CellChecks):
    """Every check of one matrix text; :meth:`matrix` returns the :class:`Matrix`."""

    def __init__(self, name: str, lines: _Lines):
        self.name, self.lines = name, lines
        #: Cell values (issue, reason, status, date) already seen: equal ones share one object.
        self._same: dict = {}
        self.issue_pattern = ""
        #: onnx.* keys of another onnx's corpus may match nothing (matrix_onnx).
        self.onnx_lenient = False
        self.stale_generated: tuple[str, ...] = ()

    def fail(self, path: tuple[str, ...], problem: str) -> MatrixError:
        return MatrixError(self.name, _dotted(path), self.lines.find(path), problem)

    def table(self, value, path, allowed: Iterable[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a table, got {_tname(value)}")
        allowed = tuple(allowed)
        members = set(allowed)  # the [features] table allows its own thousands of keys: no O(n^2)
        for key in value:
            if key not in members:
                hint = _hint(key, allowed)
                raise self.fail(path + (key,), f"unknown key{hint}; allowed: {', '.join(allowed)}")
        return value

    def string(self, value, path) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {_tname(value)}")
        return value

    def aliases(self, value, path, providers) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise self.fail(path, f"must be a list of EP aliases, got {_tname(value)}")
        for alias in value:
            if alias not in providers:
                raise self.fail(path, f"unknown EP alias{_hint(alias, providers)}; "
                                      f"declared providers: {', '.join(providers) or 'none'}")
        return tuple(value)

    def matrix(self, data: dict, known_features: list[str], environ) -> Matrix:
        self.table(data, (), ("schema_version", "onnx", "catalog", "gate", "providers", "features", "conformance"))
        if "schema_version" not in data:
            raise self.fail(("schema_version",), f"missing; this epaudit reads schema_version = {SCHEMA_VERSION}")
        sv = data["schema_version"]
        if type(sv) is not int or sv != SCHEMA_VERSION:
            raise self.fail(("schema_version",), f"must be {SCHEMA_VERSION}, got {sv!r}")
        onnx, installed = "", ""
        if "onnx" in data:
            onnx = self.string(data["onnx"], ("onnx",))
            if not _ONNX_VERSION.match(onnx):
                raise self.fail(("onnx",), "must be the onnx version the onnx.* keys were written against, "
                                           f"like \"1.23.2\", got {onnx!r}")
            installed = installed_onnx() or ""
            self.onnx_lenient = onnx != installed
        findings = self.catalog(data.get("catalog", {}), known_features)
        providers = self.providers(data.get("providers", {}), environ)
        gate = self.gate(data.get("gate", {}), providers)
        features, feature_lines, globs = self.features(data.get("features", {}), known_features, providers)
        skips = self.conformance(data.get("conformance", {}), providers)
        return Matrix(self.name, gate, providers, features, feature_lines, skips, globs, onnx, installed,
                      self.lines.find(("onnx",)) if onnx else None, self.stale_generated, findings)

    def catalog(self, raw, known_features: list[str]) -> tuple[str, ...]:
        """``[catalog]``: ``findings``, files of saved sweep findings (relative to the
        matrix), each read (:func:`epaudit.catalog.found.load`) and its findings added to the
        catalog (:func:`epaudit.catalog.register`) and to ``known_features``, so feature
        cells may declare them (docs/matrix.md "Saved findings")."""
        import os

        from .. import catalog as _catalog
        from ..catalog.found import FindingsError, load

        path = ("catalog",)
        self.table(raw, path, ("findings",))
        files = raw.get("findings", [])
        if not isinstance(files, list) or not all(isinstance(f, str) and f.strip() for f in files):
            raise self.fail(path + ("findings",), f"must be a list of file paths, got {_tname(files)}")
        base = os.path.dirname(self.name) if not self.name.startswith("<") else ""
        out = []
        for f in files:
            full = f if os.path.isabs(f) else os.path.join(base, f)
            try:
                found = load(full)
                _catalog.register([x.feature(full) for x in found], full)
            except FindingsError as exc:
                raise self.fail(path + ("findings",), str(exc)) from None
            except ValueError as exc:
                raise self.fail(path + ("findings",), f"{full}: {exc}") from None
            known_features.extend(x.id for x in found if x.id not in known_features)
            out.append(full)
        return tuple(out)

    def conformance(self, raw, providers) -> tuple[ConformanceSkip, ...]:
        """``[conformance]`` with its ``[[conformance.skip]]`` entries (docs/conformance.md)."""
        path = ("conformance",)
        self.table(raw, path, ("skip",))
        entries = raw.get("skip", [])
        if not isinstance(entries, list):
            raise self.fail(path + ("skip",), f"must be an array of tables ([[conformance.skip]]), got {_tname(entries)}")
        out = []
        for i, entry in enumerate(entries):
            epath = path + ("skip", str(i))
            self.table(entry, epath, ("ep", "test", "max_matches", "issue", "until", "reason"))
            for key in ("ep", "test"):
                if key not in entry:
                    raise self.fail(epath, f"missing key {key!r}")
            ep = self.string(entry["ep"], epath + ("ep",))
            if ep not in providers:
                raise self.fail(epath + ("ep",), f"unknown EP alias{_hint(ep, providers)}; "
                                                 f"declared providers: {', '.join(providers) or 'none'}")
            test = self.string(entry["test"], epath + ("test",))
            if not test.strip():
                raise self.fail(epath + ("test",), "must name a test case or a glob")
            max_matches = entry.get("max_matches")
            if max_matches is not None and (type(max_matches) is not int or max_matches < 1):
                raise self.fail(epath + ("max_matches",), f"must be a positive integer, got {max_matches!r}")
            skip = ConformanceSkip(ep, test, max_matches, self.string(entry.get("issue", ""), epath + ("issue",)),
                                   None, self.string(entry.get("reason", ""), epath + ("reason",)),
                                   self.lines.find(epath))
            if skip.is_glob and max_matches is None:
                raise self.fail(epath + ("test",), f"glob {test!r} needs max_matches (the most cases it may match)")
            if not skip.is_glob and max_matches is not None:
                raise self.fail(epath + ("max_matches",), f"only a glob takes max_matches; {test!r} is an exact name")
            until = self.date(entry.get("until"), epath + ("until",))
            out.append(ConformanceSkip(skip.ep, skip.test, skip.max_matches, skip.issue, until, skip.reason, skip.line,
                                       self.issue_pattern))
        return tuple(out)

    def gate(self, raw, providers) -> Gate:
        path = ("gate",)
        self.table(raw, path, ("reference", "gated", "require", "parity", "allow_absent", "issue_pattern",
                               "require_signed"))
        require_signed = raw.get("require_signed", False)
        if not isinstance(require_signed, bool):
            raise self.fail(path + ("require_signed",), f"must be true or false, got {_tname(require_signed)} "
                                                        f"{require_signed!r}")
        parity = raw.get("parity", "any")
        if parity not in PARITY:
            raise self.fail(path + ("parity",), f"must be one of {', '.join(map(repr, PARITY))}, got {parity!r}")
        pattern = self.string(raw.get("issue_pattern", ""), path + ("issue_pattern",))
        if pattern:
            from .pattern import PatternError, compile_pattern

            try:
                compiled = compile_pattern(pattern)
            except PatternError as exc:
                raise self.fail(path + ("issue_pattern",), f"not a regular expression epaudit runs: {exc}") from None
            hit = next((p for p in PLACEHOLDER_ISSUES if compiled.fullmatch(p)), None)
            if hit is not None:
                raise self.fail(path + ("issue_pattern",), f"{pattern!r} matches the placeholder issue {hit!r}: "
                                                           "it must name a tracker's ids, e.g. '^PROJ-[0-9]+$'")
        self.issue_pattern = pattern
        gated = self.aliases(raw.get("gated", []), path + ("gated",), providers)
        allow_absent = self.aliases(raw.get("allow_absent", []), path + ("allow_absent",), providers)
        for alias in allow_absent:
            if alias not in gated:
                raise self.fail(path + ("allow_absent",), f"{alias!r} is not gated: only a gated EP can be "
                                                          "allowed to be absent (others never make a run incomplete)")
        return Gate(
            reference=self.aliases(raw.get("reference", []), path + ("reference",), providers),
            gated=gated,
            require=self.aliases(raw.get("require", []), path + ("require",), providers),
            parity=parity,
            allow_absent=allow_absent,
            issue_pattern=pattern,
            require_signed=require_signed,
        )

    def scalar(self, value, path):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.fail(path, f"must be a string or an integer, got {_tname(value)}")
        return value

    def date(self, value, path) -> _dt.date | None:
        """An ``until`` value: a TOML date (not a date-time), or absent."""
        if value is not None and (isinstance(value, _dt.datetime) or not isinstance(value, _dt.date)):
            raise self.fail(path, f"must be a TOML date like 2027-03-31, got {_tname(value)} {value!r}")
        return value

