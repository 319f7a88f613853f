"""Glob keys in the matrix: ``[features."onnx.Resize.*"]`` declares many features at once.

A ``[features.KEY]`` table whose key is not a catalog id and holds a shell wildcard
(``*``, ``?`` or ``[...]``, matched case-sensitively as :func:`fnmatch.fnmatchcase`
does) declares its cells for every catalog feature the key matches. Cells are resolved
one (feature, EP) cell at a time (``docs/matrix-globs-and-large-reports.md``):

1. an exact ``[features."<id>"]`` table that declares the EP wins over every glob;
2. otherwise, among the glob tables that match the id *and declare that EP*, the most
   specific wins: the one with more **literal characters** (characters outside ``*``,
   ``?`` and ``[...]``; for one id this is the same as fewer characters matched by
   wildcards, since ``?`` and ``[...]`` match one character each and ``*`` the rest);
   between equal counts, the longer **literal prefix** (the characters before the first
   wildcard: ``attention.mask.*`` beats ``attention.*.bool`` on ``attention.mask.bool``);
3. two globs equal on both counts that declare the same cell are a tie: a matrix
   error naming both lines (declare the feature exactly, or make one glob narrower).

A glob that matches no feature of the catalog is a matrix error naming its line, with a
did-you-mean where a one-segment correction matches something. A key that *is* a
catalog id is exact even if it holds a wildcard character.
"""

from __future__ import annotations

import bisect
import difflib
import fnmatch
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..contract.probes import WILDCARDS, is_glob  # noqa: F401 - the feature-id rule, here for matrix keys


def _literals(pattern: str) -> tuple[int, str]:
    """(literal character count, literal prefix) of a shell pattern, tokenized the way
    :func:`fnmatch.translate` reads it: an unclosed ``[`` is a literal character."""
    count, prefix, seen_wild = 0, [], False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c in "*?":
            seen_wild = True
            continue
        if c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j < n:  # a closed [...]: one wildcard character
                seen_wild = True
                i = j + 1
                continue
        count += 1
        if not seen_wild:
            prefix.append(c)
    return count, "".join(prefix)


@dataclass(frozen=True)
class Glob:
    """One glob key, compiled.

    Attributes:
        key: the key as written (``onnx.Resize.*``).
        literal: characters outside wildcards (rule 2 above).
        prefix: the literal characters before the first wildcard.
        regex: the compiled :func:`fnmatch.translate` of ``key``.
    """

    key: str
    """Key as written."""
    literal: int
    """Literal characters."""
    prefix: str
    """Literal prefix."""
    regex: re.Pattern
    """Compiled pattern."""

    @classmethod
    def compile(cls, key: str) -> "Glob":
        """Compile ``key`` (any string; invalid brackets read as fnmatch reads them)."""
        literal, prefix = _literals(key)
        return cls(key, literal, prefix, re.compile(fnmatch.translate(key)))

    @property
    def specificity(self) -> tuple[int, int]:
        """``(literal characters, literal prefix length)``: larger is more specific."""
        return self.literal, len(self.prefix)

    def matches(self, feature_id: str) -> bool:
        """Case-sensitive :func:`fnmatch.fnmatchcase` of ``feature_id``."""
        return self.regex.match(feature_id) is not None


@dataclass(frozen=True)
class GlobTable:
    """A ``[features."<glob>"]`` table of the matrix.

    Attributes:
        glob: the compiled key.
        line: line of its table header.
        cells: alias -> declaration (validated like an exact table's cells).
        matched: the catalog ids it matches, in catalog order (its cells may still be
            overridden per EP by an exact key or a more specific glob).
    """

    glob: Glob
    """Compiled key."""
    line: int | None
    """Line of the table header."""
    cells: Mapping[str, object]
    """Alias -> Declaration."""
    matched: tuple[str, ...] = ()
    """Catalog ids matched."""


class GlobError(Exception):
    """A glob key that cannot be used; ``key`` is the key to blame, ``problem`` one line."""

    def __init__(self, key: str, problem: str):
        super().__init__(problem)
        self.key, self.problem = key, problem


def resolve(exact: Mapping[str, Mapping[str, object]], exact_lines: Mapping[str, int | None],
            tables: Sequence[GlobTable], known: Sequence[str]
            ) -> tuple[dict[str, dict[str, object]], dict[str, int | None], tuple[GlobTable, ...]]:
    """Every catalog feature's cells, exact keys and globs resolved (module docstring).

    Args:
        exact: exact feature id -> alias -> declaration, in file order.
        exact_lines: exact feature id -> line of its table.
        tables: the glob tables, in file order.
        known: the catalog ids, in catalog order.

    Returns:
        ``(features, feature_lines, tables)``: feature id -> alias -> declaration for every
        feature an exact key or a glob names (catalog order, exact keys not in ``known``
        last); feature id -> line of its exact table, else of the most specific glob
        table matching it; the glob tables with ``matched`` filled in.

    Raises:
        GlobError: a glob matching no feature (with a did-you-mean), or two equally
            specific globs declaring the same cell.

    Cost: one bisect per glob into the sorted ids, then a regex match per id that
    shares the glob's literal prefix.
    """
    ids = sorted(known)
    hits: dict[str, list[GlobTable]] = {}
    done = []
    for table in tables:
        prefix, suffix = table.glob.prefix, _suffix(table.glob.key)
        lo = bisect.bisect_left(ids, prefix)
        hi = _end_of_prefix(ids, prefix, lo)
        match = table.glob.regex.match
        span = ids[lo:hi]
        if suffix:  # a literal tail: a cheap test first, the regex for those that pass
            span = [fid for fid in span if fid.endswith(suffix)]
        matched = [fid for fid in span if match(fid) is not None]
        if not matched:
            hint = suggest(table.glob.key, known)
            raise GlobError(table.glob.key, "glob matches no feature of the catalog"
                            + (f", did you mean {hint!r}?" if hint else "") + " (see `epaudit features`)")
        table = GlobTable(table.glob, table.line, table.cells, tuple(matched))
        done.append(table)
        for fid in matched:
            hits.setdefault(fid, []).append(table)
    order = {fid: n for n, fid in enumerate(known)}
    named = sorted(set(exact) | set(hits), key=lambda f: (order.get(f, len(order)), f))
    features: dict[str, dict[str, object]] = {}
    lines: dict[str, int | None] = {}
    for fid in named:
        found = hits.get(fid, ())
        # One source of cells: its dict is the row, shared (rows are never changed), not
        # copied (a row per feature at 16x the catalog was most of the matrix's memory).
        if not found:
            features[fid], lines[fid] = exact[fid], exact_lines.get(fid)
            continue
        if fid not in exact and len(found) == 1:
            features[fid], lines[fid] = found[0].cells, found[0].line
            continue
        row = dict(exact.get(fid, {}))
        # Stable sort: among equally specific globs, file order (the tie check names both).
        cands = sorted(found, key=lambda t: t.glob.specificity, reverse=True)
        for table in cands:
            for alias, decl in table.cells.items():
                if alias in row:
                    continue
                rival = next((t for t in cands if t is not table and alias in t.cells
                              and t.glob.specificity == table.glob.specificity), None)
                if rival is not None:
                    first, second = sorted((table, rival), key=lambda t: t.line or 0)
                    raise GlobError(second.glob.key, f"ties with features.{_quote(first.glob.key)} "
                                    f"(line {first.line}) on {fid} for {alias}: both have "
                                    f"{table.glob.literal} literal character(s) and a literal prefix of "
                                    f"{len(table.glob.prefix)}; declare {fid!r} exactly or make one glob narrower")
                row[alias] = decl
        features[fid] = row
        lines[fid] = exact_lines.get(fid) if fid in exact else cands[0].line
    _inherit(features, lines, exact, exact_lines, hits, known)
    return features, lines, tuple(done)


#: Specificity of an exact key: above every glob's.
_EXACT = (1 << 30, 1 << 30)


def _winners(fid: str, exact: Mapping[str, Mapping[str, object]], hits: Mapping[str, list]) -> dict:
    """alias -> (specificity, declaration, line or None) of the key that decides ``fid``'s cell."""
    out = {alias: (_EXACT, decl, None) for alias, decl in exact.get(fid, {}).items()}
    for table in hits.get(fid, ()):
        for alias, decl in table.cells.items():
            if alias not in out or table.glob.specificity > out[alias][0]:
                out[alias] = (table.glob.specificity, decl, table.line)
    return out


def _inherit(features: dict, lines: dict, exact, exact_lines, hits, known: Sequence[str]) -> None:
    """Type variants (``<base>.<type>``, :func:`epaudit.contract.probes.type_variant_of`)
    take their base feature's cell for an EP unless a key naming the variant decides it at
    least as specifically as the key deciding the base: ``onnx.*.opset28`` (IR 14 refused)
    reaches ``….opset28.float16``, ``onnx.*.float16`` beats ``onnx.*`` but not an exact base
    key (docs/matrix-globs-and-large-reports.md "Type variants"). The float16 variants of
    hand-written features (``fastgelu.basic.float16``) inherit the same way, named by the
    catalog's registry (:func:`epaudit.catalog.variants.variant_base`), never by id shape."""
    from ..catalog.variants import variant_base

    have = set(known)
    for fid in known:
        base = variant_base(fid)
        if base is None or base not in have:
            continue
        mine, theirs = _winners(fid, exact, hits), _winners(base, exact, hits)
        take = {a: w for a, w in theirs.items() if a not in mine or w[0] > mine[a][0]}
        if not take:
            continue
        row = dict(features.get(fid, {}))
        for alias, (_, decl, _line) in take.items():
            row[alias] = decl
        features[fid] = row
        if fid not in lines or lines[fid] is None:
            lines[fid] = lines.get(base, exact_lines.get(base))


def _end_of_prefix(ids: Sequence[str], prefix: str, lo: int) -> int:
    """The end of the run of sorted ``ids`` from ``lo`` on that start with ``prefix``: the
    first id not below the prefix's successor (its last character one higher)."""
    if not prefix:
        return len(ids)
    last = ord(prefix[-1])
    if last >= 0x10FFFF:  # pragma: no cover - no successor character: walk
        hi = lo
        while hi < len(ids) and ids[hi].startswith(prefix):
            hi += 1
        return hi
    return bisect.bisect_left(ids, prefix[:-1] + chr(last + 1), lo)


def _suffix(pattern: str) -> str:
    """The characters after the last ``*``, ``?``, ``[`` or ``]`` of a shell pattern
    (``""`` when it ends in one, or has none): literal whichever way fnmatch reads the
    brackets, so every id the pattern matches ends with them."""
    i = max(pattern.rfind(c) for c in "*?[]")
    tail = pattern[i + 1:]
    return tail if i >= 0 else ""


def _quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def suggest(key: str, known: Iterable[str]) -> str | None:
    """A glob close to ``key`` that matches some of ``known``, or ``None``.

    Tries, in order: each wildcard-free dot segment replaced by the closest segment
    the catalog has at that position (``onnx.Resise.*`` -> ``onnx.Resize.*``), all such
    segments at once, then the literal prefix replaced by the closest prefix of a known
    id of about the same length (two characters either way).
    """
    known = list(known)
    segs = key.split(".")
    columns: list[set[str]] = [set() for _ in segs]
    for fid in known:
        for i, s in enumerate(fid.split(".")[:len(segs)]):
            columns[i].add(s)
    fixes = {}
    for i, s in enumerate(segs):
        if not is_glob(s) and s not in columns[i]:
            close = difflib.get_close_matches(s, sorted(columns[i]), n=1, cutoff=0.6)
            if close:
                fixes[i] = close[0]
    tries = [[fixes[i] if j == i else s for j, s in enumerate(segs)] for i in fixes]
    if len(fixes) > 1:
        tries.append([fixes.get(j, s) for j, s in enumerate(segs)])
    candidates = [".".join(t) for t in tries]
    _, prefix = _literals(key)
    if prefix:
        # Known prefixes a couple of characters shorter or longer too: a dropped or
        # doubled letter shifts the length ('gqa.sofcap*' -> 'gqa.softcap*').
        near = {f[:len(prefix) + d] for f in known for d in range(-2, 3) if len(prefix) + d > 0}
        close = difflib.get_close_matches(prefix, sorted(near), n=1, cutoff=0.6)
        if close:
            candidates.append(close[0] + key[len(prefix):])
    for cand in candidates:
        g = Glob.compile(cand)
        if cand != key and any(g.matches(f) for f in known):
            return cand
    return None


__all__ = ["Glob", "GlobError", "GlobTable", "WILDCARDS", "is_glob", "resolve", "suggest"]
