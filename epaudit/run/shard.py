"""Shards: one run's work split into N stable parts, one per CI job (``--shard K/N``).

The CI system is the distributed engine: a matrix of N jobs each runs ``epaudit probe
--shard K/N`` (or ``check``, ``selftest``, ``conformance``), each writes a normal saved
result, and one job merges them (``epaudit check --results``); epaudit schedules nothing
itself. A shard is a pure function of the selection, ``N`` and the cost table shipped with
this epaudit, never of the machine or the time, so N jobs on N machines agree on who runs
what without talking to each other.

Partition: the items (features, or conformance cases) of the whole selection, each with a
cost in milliseconds (:func:`cost_ms`: the measured median of its operator,
``shard_costs.json``, else the table's default), go to the shard with the least cost so far,
most costly first, ties to the lower index by catalog order (LPT, greedy longest processing
time first; within 4/3 of the best possible balance). Each shard runs its items in catalog
order. Every shard records :func:`info` (its index, the count, the size of the whole
selection and a digest of it, the cost table's digest), so that a merge can refuse shards of
different selections and name a shard that is missing or given twice
(:mod:`epaudit.saved.shards`).
"""

from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based: ``--shard 1/4`` is the first of four)."""

    index: int
    """1 .. count."""
    count: int
    """How many shards the work is split into."""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


#: The largest shard count taken (a CI matrix beyond this is a typo, and the digest is per shard).
MAX_SHARDS = 10_000


def parse(spec: str) -> Shard:
    """``"K/N"`` as a :class:`Shard`.

    Raises:
        ValueError: ``spec`` is not ``K/N`` with whole numbers ``1 <= K <= N`` (<=
            :data:`MAX_SHARDS`); the message is one line naming what is wrong.
    """
    text = str(spec).strip()
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        raise ValueError(f"{spec!r} is not K/N, two whole numbers with 1 <= K <= N (e.g. 2/4)")
    index, count = int(k), int(n)
    if count < 1 or count > MAX_SHARDS:
        raise ValueError(f"{spec!r}: the shard count N must be from 1 to {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise ValueError(f"{spec!r}: the shard K must be from 1 to N ({count})")
    return Shard(index, count)


@lru_cache(maxsize=1)
def costs() -> dict[str, Any]:
    """The shipped cost table: ``{format, measured, unit, default, operators: {operator: ms}}``."""
    text = resources.files("epaudit.run").joinpath("shard_costs.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def costs_digest() -> str:
    """SHA-256 of the cost table's text (a shard of another table partitions differently)."""
    text = resources.files("epaudit.run").joinpath("shard_costs.json").read_bytes()
    return hashlib.sha256(text).hexdigest()


def cost_ms(operator: str) -> float:
    """The measured cost of one probe of ``operator`` (``ai.onnx.Resize``), milliseconds:
    the table's median for it, else its default (an operator the table has not measured)."""
    table = costs()
    return float(table["operators"].get(operator, table["default"]))


def partition(costs_ms: Sequence[float], count: int) -> list[list[int]]:
    """Indices of ``costs_ms`` per shard (``count`` lists, each in ascending order):
    most costly first to the shard with the least cost so far, ties by lower index."""
    heap = [(0.0, s) for s in range(count)]
    out: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(costs_ms)), key=lambda i: (-costs_ms[i], i)):
        load, s = heapq.heappop(heap)
        out[s].append(i)
        heapq.heappush(heap, (load + costs_ms[i], s))
    for members in out:
        members.sort()
    return out


def digest(ids: Sequence[str]) -> str:
    """SHA-256 over the ordered ids of the whole selection and the cost table's digest."""
    h = hashlib.sha256(f"epaudit shards 1\n{costs_digest()}\n".encode())
    for i in ids:
        h.update(i.encode() + b"\n")
    return h.hexdigest()


def select(items: Sequence[T], shard: Shard | None, *, ident: Callable[[T], str],
           operator: Callable[[T], str]) -> tuple[list[T], dict[str, Any]]:
    """The items of ``shard`` (in their order) and its :func:`info`; every item and ``{}``
    when ``shard`` is ``None``."""
    items = list(items)
    if shard is None:
        return items, {}
    parts = partition([cost_ms(operator(x)) for x in items], shard.count)
    chosen = [items[i] for i in parts[shard.index - 1]]
    return chosen, info(shard, [ident(x) for x in items], len(chosen))


def info(shard: Shard, ids: Sequence[str], size: int) -> dict[str, Any]:
    """What a shard's saved result records: ``{index, count, selected, digest, items}``
    (``selected``: items of the whole selection; ``items``: of this shard)."""
    return {"index": shard.index, "count": shard.count, "selected": len(ids), "digest": digest(ids),
            "items": size}
