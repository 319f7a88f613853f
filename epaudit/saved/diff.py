"""What changed per (feature, EP) between two saved runs (``epaudit diff OLD NEW``).

Typical use: the same fleet before and after an onnxruntime upgrade, or one release
against the previous one (``docs/release-to-release.md``). Cells are matched by feature
id and a pairing of columns (:func:`pair_columns`): ``--map OLD=NEW`` first, then equal
column names (``CUDA``, ``CUDA@h100``), then the one remaining column of each run with the
same provider name (``ORT127`` and ``ORT128``, both ``CPUExecutionProvider``). A diff in
which no cell is comparable (no column paired, or every paired cell ``UNAVAILABLE``) is
refused (:class:`NothingComparable`, exit 2): "0 worse" must never mean "nothing looked
at". Outcomes are ranked by how bad
they are for a release, and a cell whose rank rises **got worse** (exit 1):

====  =====================================================  ===========================
rank  outcomes                                               why
====  =====================================================  ===========================
0     ``PASS``                                               earned
1     ``REJECTED``, ``FALLBACK``, ``DECOMPOSED``             refuses or routes around, loudly
2     ``CRASH``, ``TIMEOUT``, ``ERROR``                      dies: fails any gate
3     ``IGNORED``, ``UNWRITTEN``, ``NAN``, ``MISMATCH``      wrong numbers, silently
====  =====================================================  ===========================

``UNAVAILABLE`` and ``SKIPPED`` (and a cell only one run has) say nothing about the EP:
such changes are listed as *not comparable*, never as worse or better, because a
runner without its GPU must not read as a regression (nor as a fix).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..contract.outcomes import Outcome
from ..contract.results import Classified, RunResult

RANK = {
    Outcome.PASS: 0,
    Outcome.REJECTED: 1, Outcome.FALLBACK: 1, Outcome.DECOMPOSED: 1,
    Outcome.CRASH: 2, Outcome.TIMEOUT: 2, Outcome.ERROR: 2,
    Outcome.IGNORED: 3, Outcome.UNWRITTEN: 3, Outcome.NAN: 3, Outcome.MISMATCH: 3,
}
"""Badness of a judged outcome; UNAVAILABLE and SKIPPED are not judged."""


class Change(str, Enum):
    """How one cell moved between the two runs, in report order."""

    WORSE = "worse"
    """Its rank rose (newly broken): exit 1."""
    BETTER = "better"
    """Its rank fell (fixed)."""
    CHANGED = "changed"
    """Another outcome of the same rank (``REJECTED`` -> ``FALLBACK``)."""
    NOT_COMPARABLE = "not comparable"
    """One side is ``UNAVAILABLE``/``SKIPPED`` or missing: nothing to say about the EP."""


class NothingComparable(Exception):
    """No cell of the two runs could be compared; ``str()`` is one line saying why and how to pair."""


@dataclass(frozen=True)
class ColumnPair:
    """One OLD column compared with one NEW column.

    Attributes:
        old: column name in OLD.
        new: column name in NEW.
        how: ``map`` (``--map``), ``name`` (same column name) or ``provider`` (the only
            unpaired column of each run with that ORT provider name).
    """

    old: str
    """OLD column."""
    new: str
    """NEW column."""
    how: str
    """map / name / provider."""


def parse_map(specs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``("ORT127=ORT128", "A=B,C=D")`` -> ``{"ORT127": "ORT128", …}``.

    Raises:
        ValueError: an entry is not ``OLD=NEW`` or names a column twice (message names it).
    """
    out: dict[str, str] = {}
    for spec in specs:
        for item in filter(None, (x.strip() for x in spec.split(","))):
            old, sep, new = (p.strip() for p in item.partition("="))
            if not sep or not old or not new:
                raise ValueError(f"--map {item!r}: expected OLD=NEW, e.g. --map ORT127=ORT128")
            if old in out or new in out.values():
                raise ValueError(f"--map {item!r}: {old if old in out else new} is paired twice")
            out[old] = new
    return out


def pair_columns(old: RunResult, new: RunResult, mapping: dict[str, str] | None = None) -> list[ColumnPair]:
    """Pair OLD's columns with NEW's: ``mapping`` first, then equal names, then by provider.

    Raises:
        ValueError: ``mapping`` names a column a run does not have (message lists theirs).
    """
    mapping = mapping or {}
    for o, n in mapping.items():
        if o not in old.eps:
            raise ValueError(f"--map {o}={n}: OLD has no column {o!r} (it has {', '.join(old.eps) or 'none'})")
        if n not in new.eps:
            raise ValueError(f"--map {o}={n}: NEW has no column {n!r} (it has {', '.join(new.eps) or 'none'})")
    pairs = [ColumnPair(o, n, "map") for o, n in mapping.items()]
    left_old = [c for c in old.eps if c not in mapping]
    left_new = [c for c in new.eps if c not in mapping.values()]
    for c in list(left_old):
        if c in left_new:
            pairs.append(ColumnPair(c, c, "name"))
            left_old.remove(c)
            left_new.remove(c)
    for c in list(left_old):
        provider = old.eps[c].name
        same_old = [x for x in left_old if old.eps[x].name == provider]
        same_new = [x for x in left_new if new.eps[x].name == provider]
        if len(same_old) == 1 and len(same_new) == 1:
            pairs.append(ColumnPair(c, same_new[0], "provider"))
            left_old.remove(c)
            left_new.remove(same_new[0])
    return pairs


@dataclass(frozen=True)
class CellChange:
    """One (feature, column) whose outcome differs.

    Attributes:
        feature_id: catalog id.
        ep: column name.
        change: how it moved.
        old: outcome in OLD, or ``None`` when OLD has no such cell.
        new: outcome in NEW, or ``None``.
        summary: NEW's one-line explanation (OLD's when NEW has none).
    """

    feature_id: str
    """Catalog id."""
    ep: str
    """Column."""
    change: Change
    """Direction."""
    old: Outcome | None
    """Outcome before."""
    new: Outcome | None
    """Outcome after."""
    summary: str
    """Why, in one line."""
    old_ep: str = ""
    """OLD's column when it is named differently from ``ep`` (a mapped pair), else ""."""


def _direction(old: Classified | None, new: Classified | None) -> Change:
    if old is None or new is None or old.outcome not in RANK or new.outcome not in RANK:
        return Change.NOT_COMPARABLE
    a, b = RANK[old.outcome], RANK[new.outcome]
    return Change.WORSE if b > a else Change.BETTER if b < a else Change.CHANGED


def compare(old: RunResult, new: RunResult, pairs: list[ColumnPair] | None = None) -> list[CellChange]:
    """Every cell whose outcome differs, worse first, then better, changed, not comparable;
    within each, in NEW's feature and column order.

    ``pairs`` (default :func:`pair_columns` without a mapping) says which columns answer
    for each other; a column left unpaired has its cells listed as not comparable.
    """
    pairs = pair_columns(old, new) if pairs is None else pairs
    features = list(dict.fromkeys(list(new.features) + list(old.features)))
    columns = ([(p.old, p.new) for p in pairs]
               + [(c, "") for c in old.eps if c not in {p.old for p in pairs}]
               + [("", c) for c in new.eps if c not in {p.new for p in pairs}])
    columns.sort(key=lambda oc: list(new.eps).index(oc[1]) if oc[1] else len(new.eps))
    out = []
    for fid in features:
        for o, n in columns:
            a, b = old.results.get((fid, o)) if o else None, new.results.get((fid, n)) if n else None
            if a is None and b is None:
                continue
            if a is not None and b is not None and a.outcome is b.outcome:
                continue
            summary = (b or a).summary
            out.append(CellChange(fid, n or o, _direction(a, b), a.outcome if a else None,
                                  b.outcome if b else None, summary, old_ep=o if o and n and o != n else ""))
    order = list(Change)
    return sorted(out, key=lambda c: order.index(c.change))  # stable: keeps feature order


def comparable(old: RunResult, new: RunResult, pairs: list[ColumnPair]) -> int:
    """How many (feature, pair) cells both runs judged (outcomes other than UNAVAILABLE/SKIPPED)."""
    return sum(1 for p in pairs for fid in new.features
               if (a := old.results.get((fid, p.old))) is not None and a.outcome in RANK
               and (b := new.results.get((fid, p.new))) is not None and b.outcome in RANK)


def require_comparable(old: RunResult, new: RunResult, pairs: list[ColumnPair]) -> int:
    """The number of comparable cells, at least one.

    Raises:
        NothingComparable: no column paired, or no paired cell judged by both runs.
    """
    n = comparable(old, new, pairs)
    if n:
        return n
    if not pairs:
        raise NothingComparable(
            f"nothing comparable: no column of OLD ({', '.join(old.eps) or 'none'}) pairs with one of NEW "
            f"({', '.join(new.eps) or 'none'}) by name or provider; pair them with --map OLD=NEW")
    raise NothingComparable(
        "nothing comparable: " + ", ".join(f"{p.old}->{p.new}" for p in pairs)
        + " paired, but no feature was judged on both sides (UNAVAILABLE, SKIPPED or absent)")


def format_text(changes: list[CellChange], old_name: str, new_name: str, old: RunResult, new: RunResult,
                pairs: list[ColumnPair] | None = None) -> str:
    """The diff for a terminal: a header naming both runs' onnxruntime and the column
    pairs, one line per cell, and the count of cells compared."""
    def versions(r: RunResult) -> str:
        seen = dict.fromkeys(f"{a}={i.distribution or '?'}" for a, i in r.eps.items())
        return ", ".join(seen) or "no EPs"

    lines = [f"--- {old_name} ({versions(old)})", f"+++ {new_name} ({versions(new)})"]
    # Said when the pairing is not the obvious one (same names on both sides).
    if pairs is not None and (any(p.how != "name" for p in pairs)
                              or len(pairs) != len(old.eps) or len(pairs) != len(new.eps)):
        lines.append("columns: " + ("; ".join(f"{p.old} -> {p.new}" + ("" if p.how == "name" else f" (by {p.how})")
                                              for p in pairs) or "none paired")
                     + f"; {comparable(old, new, pairs)} cell(s) compared")
    if not changes:
        lines.append("no cell changed")
    for c in changes:
        before = c.old.value if c.old else "(absent)"
        after = c.new.value if c.new else "(absent)"
        where = f"{c.old_ep}->{c.ep}" if c.old_ep else c.ep
        lines.append(f"{c.change.value.upper():<15} {c.feature_id} on {where}: {before} -> {after}"
                     + (f" — {c.summary[:200]}" if c.summary else ""))
    worse = sum(c.change is Change.WORSE for c in changes)
    better = sum(c.change is Change.BETTER for c in changes)
    lines.append(f"{worse} worse, {better} better, {len(changes) - worse - better} other change(s)")
    from ..textenc import one_line  # names and summaries come from files: one line each, no command

    return "\n".join(one_line(line) for line in lines) + "\n"
