"""Validating ``[features]``: feature keys (ids and globs) and their cells.

A mixin of :class:`~epaudit.matrix.validate.Validator`. A key is an exact catalog id or a
glob (:mod:`epaudit.matrix.globs`); a cell is ``"supported"`` or a table with ``status``,
``issue``, ``until`` and ``reason`` (docs/matrix.md).
"""

from __future__ import annotations

from .globs import Glob, GlobError, GlobTable, is_glob, resolve
from .lines import _hint, _tname
from .model import STATUSES, Declaration
from .onnxkey import plausible as _plausible_onnx


class CellChecks:
    """``[features]``: declarations per feature key and EP alias."""

    def features(self, raw, known: list[str], providers):
        """``[features.KEY]`` tables, exact ids and globs, resolved per cell."""
        self.table(raw, ("features",), raw.keys() if isinstance(raw, dict) else ())
        known_set = set(known)
        out, lines, globs = {}, {}, []
        # A catalog without the generated source (EPAUDIT_GENERATED=0, or it could not be
        # had) does not check the matrix's onnx.* keys: they are not an error then.
        generated = any(k.startswith("onnx.") for k in known)
        # With `onnx = "<version>"` other than the installed onnx, an onnx.* key of that
        # version's corpus the catalog lacks is skipped and recorded, not an error.
        lenient = generated and self.onnx_lenient
        onnx_known = [k for k in known if k.startswith("onnx.")] if lenient else []
        stale = []
        for fid, cells in raw.items():
            path = ("features", fid)
            if fid.startswith("onnx.") and not generated:
                continue
            glob = fid not in known_set and is_glob(fid)
            may_be_stale = lenient and _plausible_onnx(fid)
            if not glob and fid not in known_set and not may_be_stale:
                raise self.fail(path, f"unknown feature id{_hint(fid, known)} (see `epaudit features`)")
            if not isinstance(cells, dict):
                raise self.fail(path, f"must be a table of EP cells, got {_tname(cells)}")
            decls = {}
            for alias, cell in cells.items():
                cpath = path + (alias,)
                if alias not in providers:
                    raise self.fail(cpath, f"unknown EP alias{_hint(alias, providers)}; "
                                           f"declared providers: {', '.join(providers) or 'none'}")
                decls[alias] = self.cell(cell, cpath, fid)
            if glob:
                table = GlobTable(Glob.compile(fid), self.lines.find(path), decls)
                if may_be_stale and not any(table.glob.matches(k) for k in onnx_known):
                    stale.append(fid)
                else:
                    globs.append(table)
            elif fid not in known_set:
                stale.append(fid)  # cells validated above: a typo in them is still an error
            else:
                out[fid] = decls
                lines[fid] = self.lines.find(path)
        self.stale_generated = tuple(stale)
        try:
            return resolve(out, lines, globs, known)
        except GlobError as exc:
            raise self.fail(("features", exc.key), exc.problem) from None

    def cell(self, cell, path, key: str = "") -> Declaration:
        line = self.lines.find(path)
        if isinstance(cell, str):
            if cell != "supported":
                raise self.fail(path, f"a plain cell must be \"supported\"; got {cell!r} "
                                      "(gaps are tables: { status = \"unsupported\", issue = \"…\", until = 2027-03-31 })")
            return Declaration("supported", line=line, key=key)
        self.table(cell, path, ("status", "issue", "until", "reason"))
        status = cell.get("status")
        if status not in STATUSES:
            raise self.fail(path + ("status",), f"must be one of {', '.join(map(repr, STATUSES))}, got {status!r}")
        issue = self.string(cell.get("issue", ""), path + ("issue",))
        reason = self.string(cell.get("reason", ""), path + ("reason",))
        until = self.date(cell.get("until"), path + ("until",))
        # Equal values share one object: a large matrix repeats the same issue, reason and
        # date over thousands of cells, each a string or date of its own as parsed.
        status, issue, until, reason = (self._same.setdefault(x, x) for x in (status, issue, until, reason))
        return Declaration(status, issue, until, reason, line, self.issue_pattern, key)
