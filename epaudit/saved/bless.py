"""``epaudit bless``: rewrite ``capabilities.toml`` so declarations match what was observed.

The matrix is edited in place with tomlkit, so comments, key order, blank lines and
the style of untouched cells survive; only the cells that change are rewritten. Per
(feature, matrix alias), over every live column of that alias (several in a fleet
run: ``CUDA@h100``, ``CUDA@t4``):

* every column ``PASS`` -> ``"supported"`` (a stale gap or an undeclared cell);
* some column refused loudly (``REJECTED``, ``FALLBACK``, ``DECOMPOSED``) and none did
  worse -> a declared gap ``{ status = "unsupported", issue = "", until = <today>,
  reason = "<outcome>: <summary>" }`` for a cell declared ``supported`` or undeclared.
  ``issue = ""`` keeps the gate failing as ``ungoverned`` until a person links the
  upstream issue and sets a real ``until`` (the placeholder date also expires
  tomorrow); a comment on the line says so;
* a silent outcome or a process failure (``IGNORED``, ``NAN``, ``CRASH``, …) is never
  blessed: a gap must refuse, so the cell is left alone and reported;
* cells already right, ``skip`` cells and EPs that were not live are left alone.

A cell declared by a glob (``[features."onnx.Resize.*"]``, :mod:`epaudit.matrix.globs`)
that the observations contradict gets an exact-id cell (``[features."<id>"]``, added at
the end of the ``features`` tables when the id has none), which wins over the glob for
that feature and EP only; the glob stays as it is for every other feature it matches.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import re
from dataclasses import dataclass

import tomlkit
from tomlkit.items import Item

from ..contract.outcomes import Outcome
from ..contract.results import Classified, RunResult
from ..gate.rules import describe
from ..matrix.model import Matrix
from .diff import RANK

#: The comment bless leaves on each gap it adds.
TODO = "epaudit bless: link the upstream issue and set a real until date"
_REASON_CHARS = 160


@dataclass(frozen=True)
class Edit:
    """One cell bless rewrites.

    Attributes:
        feature_id: catalog id.
        alias: matrix alias.
        before: the declaration in words (``undeclared`` when absent).
        after: ``supported`` or ``unsupported`` (a new, ungoverned gap).
        why: the outcomes seen, per column.
    """

    feature_id: str
    """Catalog id."""
    alias: str
    """Matrix alias."""
    before: str
    """Old declaration in words."""
    after: str
    """New status."""
    why: str
    """Outcomes seen."""


@dataclass(frozen=True)
class Refusal:
    """A cell bless will not touch because an EP did worse than refuse.

    Attributes:
        feature_id: catalog id.
        alias: matrix alias.
        why: the outcomes seen, per column.
    """

    feature_id: str
    """Catalog id."""
    alias: str
    """Matrix alias."""
    why: str
    """Outcomes seen."""


@dataclass(frozen=True)
class Plan:
    """What bless does to one matrix file.

    Attributes:
        old_text: the file as read.
        new_text: the file as it would be written.
        edits: the cells rewritten.
        refused: the cells left alone because they cannot be declared away.
    """

    old_text: str
    """Before."""
    new_text: str
    """After."""
    edits: tuple[Edit, ...]
    """Cells rewritten."""
    refused: tuple[Refusal, ...]
    """Cells not blessable."""

    def diff(self, name: str) -> str:
        """A unified diff of the file (``""`` when nothing changes); ``a/``, ``b/`` prefixes
        as git writes them for a relative path."""
        a, b = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
        return "".join(difflib.unified_diff(self.old_text.splitlines(keepends=True),
                                            self.new_text.splitlines(keepends=True), fromfile=a, tofile=b))


def _seen(cells: list[tuple[str, Classified]]) -> str:
    return ", ".join(f"{col}: {c.outcome.value}" for col, c in cells)


def _comment(old: Item | None, add: str | None) -> str | None:
    """The comment the rewritten cell carries: a person's comment is kept, ours appended."""
    mine = (old.trivia.comment.lstrip("#").strip() if old is not None and old.trivia.comment else "")
    if add:
        return f"{mine} — {add}" if mine else add
    return mine or None


def plan(matrix: Matrix, text: str, result: RunResult, *, today: _dt.date | None = None) -> Plan:
    """Work out the rewrite of ``text`` (the matrix file ``matrix`` was loaded from).

    Args:
        matrix: the validated matrix (declarations and providers).
        text: its TOML text, edited with tomlkit.
        result: observations: a run, or saved results merged by :mod:`epaudit.saved.fleet`.
        today: the placeholder ``until`` of new gaps (default: today).

    Returns:
        The :class:`Plan`; nothing is written.
    """
    today = today or _dt.date.today()
    doc = tomlkit.parse(text)
    columns: dict[str, list[str]] = {}
    for column, info in result.eps.items():
        if info.live and info.base_alias in matrix.providers:
            columns.setdefault(info.base_alias, []).append(column)
    edits, refused = [], []
    for fid in result.features:
        for alias, cols in columns.items():
            seen = [(col, c) for col in cols if (c := result.results.get((fid, col))) is not None
                    and c.outcome in RANK]
            if not seen:
                continue
            decl = matrix.declaration(fid, alias)
            status = decl.status if decl is not None else None
            if status == "skip":
                continue
            worst = max(RANK[c.outcome] for _, c in seen)
            if worst >= 2:
                refused.append(Refusal(fid, alias, _seen(seen)))
                continue
            if worst == 0:
                if status == "supported":
                    continue
                value, add, after = "supported", None, "supported"
            else:
                if status == "unsupported":
                    continue
                first = next(c for _, c in seen if c.outcome is not Outcome.PASS)
                reason = f"{first.outcome.value}: {first.summary}"
                if len(cols) > 1:
                    reason = f"{_seen(seen)}; {reason}"
                value = _gap(today, reason)
                add, after = TODO, "unsupported"
            features = doc.setdefault("features", tomlkit.table(is_super_table=True))
            if fid not in features:
                features[fid] = tomlkit.table()
            row = features[fid]
            old = row.get(alias) if alias in row else None
            row[alias] = value
            comment = _comment(old, add)
            if comment:
                row[alias].comment(comment)
            before = describe(decl) + (f" (glob {decl.key!r}, line {decl.line})" if decl is not None
                                       and decl.from_glob else "")
            edits.append(Edit(fid, alias, before, after, _seen(seen)))
    return Plan(text, _keep_untouched(text, tomlkit.dumps(doc)), tuple(edits), tuple(refused))


def _gap(today: _dt.date, reason: str) -> Item:
    """A new gap cell in the matrix's own style (``{ key = value, … }``): parsed from
    TOML text so tomlkit keeps the spacing, with tomlkit quoting the reason."""
    if len(reason) > _REASON_CHARS:
        reason = reason[:_REASON_CHARS - 1].rstrip() + "…"
    text = (f'cell = {{ status = "unsupported", issue = "", until = {today.isoformat()}, '
            f"reason = {tomlkit.string(reason).as_string()} }}")
    return tomlkit.parse(text)["cell"]


def _keep_untouched(old: str, new: str) -> str:
    """Undo whitespace-only changes tomlkit makes to lines bless did not edit.

    tomlkit 0.15 drops the space before ``}`` when an inline table ends with a date
    (``until = 2099-01-01 }`` -> ``until = 2099-01-01}``); a line whose only difference
    is whitespace is restored byte for byte, so untouched cells keep their layout. Lines
    are matched with whitespace squashed, so a line next to an added table (an exact-id
    cell bless writes under a glob) is restored too. The text ends with a newline when
    the old one did.
    """
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    squash = lambda line: re.sub(r"\s+", "", line)  # noqa: E731
    out = []
    matcher = difflib.SequenceMatcher(a=[squash(x) for x in a], b=[squash(x) for x in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out += a[i1:i2] if tag == "equal" else b[j1:j2]
    text = "".join(out)
    if old.endswith("\n") and not text.endswith("\n"):
        text += "\n"
    return text
