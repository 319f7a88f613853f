"""Shards of one run put back together before a fleet merge (``check --results``).

A CI matrix runs ``epaudit probe --shard K/N`` in N jobs (:mod:`epaudit.run.shard`); each
saved result records its shard: index, count, the size and digest of the whole selection.
:func:`combine` groups the shards of one run (same selection digest and count, same EPs, same
machine label), checks that every shard 1..N is there exactly once and that together they
hold each feature of the selection once, and gives one result per group, as the unsharded
run would have been: its cells the union of the shards' (nothing copied: the cells keep
their evidence where each file's store has it), each EP live only if it was live in every
shard (a shard whose EP was absent audited nothing: the column is not live, with that
shard's reason), incomplete if any shard was. Results without a shard pass through as they
are. Then :func:`epaudit.saved.fleet.merge` merges and gates them as usual.

Refused, with one line naming the files (:class:`~epaudit.saved.fleet.FleetError`, exit 2):
a shard missing (``shard 3/4 of … is missing``), a shard given twice, shards of one group
that disagree on catalog or semantics, or whose features overlap or do not add up to the
selection.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..contract.cellstore import CellStore
from ..contract.results import EPInfo, RunResult
from .fleet import FleetError, _label


def _group_key(path: str, r: RunResult) -> tuple:
    s = r.shard
    columns = tuple(sorted((info.base_alias, _label(path, r, info)) for info in r.eps.values()))
    return (s["digest"], int(s["count"]), int(s["selected"]), columns)


def _describe(key: tuple) -> str:
    columns = ", ".join(f"{a} on {m}" for a, m in key[3]) or "no EP"
    return f"the run of {key[2]} feature(s) on {columns} (selection {key[0][:12]})"


def combine(reports: Sequence[tuple[str, RunResult]]) -> list[tuple[str, RunResult]]:
    """Every group of shards as one result (named by its first file); other results as they are.

    Raises:
        FleetError: a shard missing or given twice, or a group whose shards disagree
            (see the module docstring).
    """
    out: list[tuple] = []
    groups: dict[tuple, list[tuple[str, RunResult]]] = {}
    for path, r in reports:
        if not r.shard:
            out.append((path, r))
            continue
        key = _group_key(path, r)
        if key not in groups:
            groups[key] = []
            out.append(("\0group", key))
        groups[key].append((path, r))
    result: list[tuple[str, RunResult]] = []
    for item in out:
        if item[0] != "\0group":
            result.append(item)
            continue
        key = item[1]
        result.append(_one(key, groups[key]))
    return result


def _one(key: tuple, shards: list[tuple[str, RunResult]]) -> tuple[str, RunResult]:
    count = key[1]
    by_index: dict[int, str] = {}
    for path, r in shards:
        k = int(r.shard["index"])
        if not 1 <= k <= count:
            raise FleetError(f"{path}: shard {k}/{count}: K must be from 1 to {count}")
        if k in by_index:
            raise FleetError(f"{path}: shard {k}/{count} of {_describe(key)} is also {by_index[k]}: "
                             "give each shard's result once")
        by_index[k] = path
    missing = [k for k in range(1, count + 1) if k not in by_index]
    if missing:
        have = ", ".join(f"{k}/{count} {by_index[k]}" for k in sorted(by_index))
        raise FleetError(f"shard(s) {', '.join(f'{k}/{count}' for k in missing)} of {_describe(key)} "
                         f"missing (given: {have}): a merge of part of the shards would gate less than "
                         "was selected")
    shards = sorted(shards, key=lambda pr: int(pr[1].shard["index"]))
    first_path, first = shards[0]
    features: list[str] = []
    owner: dict[str, str] = {}
    for path, r in shards:
        if (r.catalog_version, r.semantics) != (first.catalog_version, first.semantics):
            raise FleetError(f"{path}: catalog {r.catalog_version} / semantics {r.semantics.split(':')[0]!r}, but "
                             f"{first_path} (another shard of the same run) has catalog {first.catalog_version} / "
                             f"{first.semantics.split(':')[0]!r}: every shard must come from one epaudit")
        if int(r.shard["items"]) != len(r.features):
            raise FleetError(f"{path}: shard {r.shard['index']}/{count} says it holds {r.shard['items']} "
                             f"feature(s) but lists {len(r.features)}")
        for fid in r.features:
            if fid in owner:
                raise FleetError(f"{path}: feature {fid!r} is also in {owner[fid]}: shards of one run never "
                                 "share a feature (were they cut from different selections?)")
            owner[fid] = path
            features.append(fid)
    if len(features) != key[2]:
        raise FleetError(f"{first_path}: the {count} shard(s) of {_describe(key)} hold {len(features)} "
                         f"feature(s), not the {key[2]} selected")
    store = CellStore()
    eps: dict[str, EPInfo] = {}
    for path, r in shards:
        for alias, info in r.eps.items():
            have = eps.get(alias)
            if have is None or (have.live and not info.live):
                # Not live in one shard: that shard audited nothing on it, and neither did the run.
                eps[alias] = info if info.live or have is None else dataclasses.replace(
                    info, reason=f"shard {r.shard['index']}/{count} ({path}): {info.reason or 'not live'}")
        for c in r.results.values():
            store.adopt(c)
    features.sort(key=_catalog_order())
    store.reorder([(f, alias) for alias in eps for f in features])
    machines: dict = {}
    coverage: dict = {}
    for path, r in shards:
        for label, facts in r.machines.items():
            if label in machines and machines[label] != facts:
                label = f"{label} ({facts.get('hostname', path)})"
            machines.setdefault(label, dict(facts))
        for alias, cov in r.coverage.items():
            coverage.setdefault(alias, cov)
    environment = {**first.environment, "shards_from": [p for p, _ in shards]}
    merged = dataclasses.replace(
        first, features=tuple(features), eps=eps, results=store, gate=None, environment=environment,
        incomplete=any(r.incomplete for _, r in shards),
        declared={k: v for _, r in shards for k, v in r.declared.items()},
        machines=machines, coverage=coverage, shard={})
    return first_path, merged


def _catalog_order():
    from .. import catalog

    index = {f.id: i for i, f in enumerate(catalog.FEATURES)}
    return lambda fid: (index.get(fid, len(index)), fid)
