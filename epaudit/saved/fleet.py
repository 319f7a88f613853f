"""Fleet audits: saved results from many machines merged into one run, then gated.

Each runner of a fleet probes the EPs it has (``epaudit probe --ep CUDA --label h100
--json cuda-h100.json``); a gate job merges the files (``epaudit check --results
'reports/*.json'``) and applies the gate of the current matrix without probing.

Column names: an EP alias seen on one machine keeps its alias (``CPU``); an alias seen
on several machines becomes one column per machine, ``ALIAS@LABEL`` (``CUDA@h100``,
``CUDA@t4``). Each column takes the declarations and ``[gate]`` role of its alias, so a
feature lags when any gated column lags, every live reference column can set the bar,
and ``require = ["CUDA"]`` asks every ``CUDA@…`` column to be live (or, with none in the
results, reports CUDA as not in this run). One declaration covers all columns of an
alias, so a declared gap is ``stale`` only when every live column of the alias passes:
while one machine still refuses, a passing machine's cell is a warning, not a failure
(otherwise no matrix could satisfy a fleet where only newer GPUs have the fix).

Results from another catalog version or reference semantics are refused: their
outcomes do not answer the same question.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from .. import __version__, catalog
from ..catalog import CATALOG_VERSION
from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import Classified, EPInfo, Finding, RunResult
from ..gate.claims import findings as claim_findings
from ..gate.rules import apply, describe
from ..gate.rules import verdict as gate_verdict
from ..matrix.model import Matrix
from ..reference import SEMANTICS


class FleetError(Exception):
    """Saved results that cannot be merged; ``str()`` is one line naming the file."""


def _label(path: str, result: RunResult, info: EPInfo) -> str:
    """The machine label of one column: recorded on the EP, else the report's only
    machine, else the file's stem (reports written before machines were recorded)."""
    if info.machine:
        return info.machine
    if len(result.machines) == 1:
        return next(iter(result.machines))
    return Path(path).stem


def check_comparable(path: str, result: RunResult, *, catalog_version: int = CATALOG_VERSION,
                     semantics: str = SEMANTICS) -> None:
    """Refuse results from another catalog version or reference semantics.

    Raises:
        FleetError: naming the file, what it was made with and what this epaudit has.
    """
    if result.catalog_version != catalog_version:
        raise FleetError(f"{path}: catalog_version {result.catalog_version}, but this epaudit's catalog is "
                         f"{catalog_version}: outcomes of other probes are not comparable; re-probe with "
                         f"epaudit {__version__}")
    if result.semantics != semantics:
        raise FleetError(f"{path}: semantics {result.semantics.split(':')[0]!r} differ from this epaudit's "
                         f"{semantics.split(':')[0]!r}: references of other rules are not comparable; re-probe")


def merge(reports: Sequence[tuple[str, RunResult]], *, feature_ids: Iterable[str] | None = None) -> RunResult:
    """Merge saved runs of one or more machines into one ungated run.

    Args:
        reports: (file name, loaded result) pairs, e.g. from :func:`epaudit.saved.read.load`.
        feature_ids: keep only these features (``--feature``); default all.

    Returns:
        A :class:`RunResult` with ``gate=None``, columns named as in the module doc,
        ``machines`` the union of the reports' machines, features in catalog order.

    Raises:
        FleetError: no reports, another catalog or semantics, a feature this catalog
            does not know, or the same EP from the same machine label in two files.
    """
    if not reports:
        raise FleetError("no results to merge")
    owners: dict[tuple[str, str], str] = {}
    for path, result in reports:
        check_comparable(path, result)
        unknown = [f for f in result.features if f not in catalog.BY_ID]
        if unknown:
            raise FleetError(f"{path}: feature {unknown[0]!r} is not in this epaudit's catalog")
        for info in result.eps.values():
            if "@" in info.base_alias:
                raise FleetError(f"{path}: EP alias {info.base_alias!r} contains '@', which fleet columns "
                                 "(ALIAS@LABEL) reserve: rename the provider and re-probe")
            key = (info.base_alias, _label(path, result, info))
            if key in owners:
                raise FleetError(f"{path}: {key[0]} from machine {key[1]!r} is also in {owners[key]}: give each "
                                 "runner its own --label (or merge each machine's results once)")
            owners[key] = path
    per_alias = Counter(alias for alias, _ in owners)
    wanted = set(feature_ids) if feature_ids is not None else None
    present = {f for _, r in reports for f in r.features}
    features = tuple(f.id for f in catalog.FEATURES if f.id in present and (wanted is None or f.id in wanted))

    eps: dict[str, EPInfo] = {}
    sources: dict[str, str] = {}
    results: dict[tuple[str, str], Classified] = {}
    machines: dict[str, dict] = {}
    coverage: dict[str, dict] = {}
    for path, result in reports:
        for label, facts in result.machines.items():
            key = label if machines.get(label, facts) == facts else f"{label} ({facts.get('hostname', path)})"
            machines[key] = dict(facts)
        for old, info in result.eps.items():
            base, label = info.base_alias, _label(path, result, info)
            column = f"{base}@{label}" if per_alias[base] > 1 else base
            if column in eps:  # never two inputs in one column: the verdict would depend on order
                raise FleetError(f"{path}: its EP {base!r} from machine {label!r} lands in column {column!r}, "
                                 f"which {sources[column]} already fills")
            sources[column] = path
            eps[column] = dataclasses.replace(info, alias=column, machine=label,
                                              matrix_alias=base if column != base else "")
            for fid in features:
                c = result.results.get((fid, old))
                if c is not None:
                    results[(fid, column)] = dataclasses.replace(c, ep=column)
            if old in result.coverage:
                coverage[column] = result.coverage[old]
    if not features:
        raise FleetError(f"{', '.join(p for p, _ in reports)}: no feature of the selection was probed in "
                         "these results: nothing to gate")
    environment = {"epaudit": __version__, "merged_from": [path for path, _ in reports],
                   # Runs cut short (Ctrl-C, SIGTERM, a CI kill) are named: their gate is incomplete.
                   "incomplete_from": [path for path, r in reports if r.incomplete],
                   "column_from": dict(sources)}
    return RunResult(matrix_path="", features=features, eps=eps, results=results, gate=None,
                     environment=environment, semantics=SEMANTICS,
                     incomplete=any(r.incomplete for _, r in reports), declared={},
                     catalog_version=CATALOG_VERSION, machines=machines, coverage=coverage)


def expand(matrix: Matrix, eps: dict[str, EPInfo], source: str = "results") -> Matrix:
    """The matrix seen through fleet columns: each ``ALIAS@LABEL`` column gets its alias's
    provider, declarations and ``[gate]`` roles (reference, gated, require).

    Raises:
        FleetError: a column whose alias the matrix does not declare as a provider.
    """
    columns: dict[str, list[str]] = {}
    for column, info in eps.items():
        if info.base_alias not in matrix.providers:
            raise FleetError(f"{source}: EP {info.base_alias!r} is not a provider in {matrix.path} "
                             f"(declared: {', '.join(matrix.providers) or 'none'})")
        columns.setdefault(info.base_alias, []).append(column)

    def roles(aliases: Iterable[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for a in aliases for c in columns.get(a, [a])))

    providers = dict(matrix.providers)
    for column, info in eps.items():
        if column != info.base_alias:
            providers[column] = dataclasses.replace(matrix.providers[info.base_alias], alias=column)
    features = {}
    for fid, cells in matrix.features.items():
        row = dict(cells)
        for column, info in eps.items():
            if info.base_alias in cells:
                row[column] = cells[info.base_alias]
        features[fid] = row
    g = matrix.gate
    gate = dataclasses.replace(g, reference=roles(g.reference), gated=roles(g.gated), require=roles(g.require),
                               allow_absent=roles(g.allow_absent))
    return dataclasses.replace(matrix, gate=gate, providers=providers, features=features)


def _fleet_stale(findings, merged: RunResult) -> list[Finding]:
    """A stale finding fails only when every live column of the alias passes."""
    out = []
    for f in findings:
        if f.kind is FindingKind.STALE and f.ep in merged.eps:
            base = merged.eps[f.ep].base_alias
            holding = [c for c, i in merged.eps.items() if i.base_alias == base and i.live
                       and (r := merged.results.get((f.feature_id, c))) is not None
                       and r.outcome not in (Outcome.PASS, Outcome.UNAVAILABLE, Outcome.SKIPPED)]
            if holding:
                f = dataclasses.replace(f, failing=False, message=f"PASS on {f.ep}, but the gap still holds on "
                                                                  f"{', '.join(holding)}: keep the declaration "
                                                                  "until every machine passes")
        out.append(f)
    return out


def columns(merged: RunResult, name: str) -> list[str]:
    """The columns ``name`` means: every column of an alias (``CUDA``), or the one column
    of an alias on one machine (``CUDA@t4``, whether it is shown as ``CUDA@t4`` or, being
    the alias's only machine, as ``CUDA``); ``[name]`` itself when nothing matches, so a
    required column that no runner uploaded reads as not in this run."""
    base, at, label = name.partition("@")
    if at:
        return [k for k, i in merged.eps.items() if i.base_alias == base and i.machine == label] or [name]
    return [k for k, i in merged.eps.items() if i.base_alias == name] or [name]


def _same_providers(matrix: Matrix, merged: RunResult) -> None:
    """A saved column is judged by the matrix's declarations for its alias only when it
    ran the provider the matrix declares for that alias: a runner whose matrix said
    ``[providers.CUDA] name = "CPUExecutionProvider"`` probed the CPU EP, and its PASS
    says nothing about CUDA.

    Raises:
        FleetError: naming the file, the column and both provider names.
    """
    sources = merged.environment.get("column_from", {})
    for column, info in merged.eps.items():
        declared = matrix.providers.get(info.base_alias)
        if declared is not None and info.name != declared.name:
            raise FleetError(f"{sources.get(column, 'results')}: its {info.base_alias} ran {info.name}, but "
                             f"{matrix.path} declares {info.base_alias} as {declared.name}: re-probe with this "
                             "matrix, or merge with the matrix the runner used")


def _unprobed(view: Matrix, merged: RunResult, required: Iterable[str]) -> list[Finding]:
    """Incomplete findings for what a merge lacks evidence of: a saved run that was cut
    short, and a live gated or required column with features of the run it never probed
    (a missing cell is never a pass)."""
    out = []
    for path in merged.environment.get("incomplete_from", []):
        out.append(Finding(FindingKind.INCOMPLETE, "", "", True, "", None,
                           f"saved run {path} was interrupted: its results are incomplete"))
    must = set(view.gate.gated) | set(required) | set(view.gate.require)
    for column, info in merged.eps.items():
        if column not in must or not info.live:
            continue
        # Never probed, or skipped by the runner's matrix where this one declares no skip.
        missing = [f for f in merged.features if (f, column) not in merged.results
                   or (merged.results[(f, column)].outcome is Outcome.SKIPPED
                       and getattr(view.declaration(f, column), "status", None) != "skip")]
        if missing:
            out.append(Finding(FindingKind.INCOMPLETE, "", "", True, "gated or required", None,
                               f"{column}: {len(missing)} feature(s) of this merge were never probed on it "
                               f"(first: {missing[0]}): a missing cell is not a pass"))
    return out


def gate(matrix: Matrix, merged: RunResult, *, require: Iterable[str] = (), strict: bool = False,
         today: _dt.date | None = None, allow_absent: Iterable[str] = ()) -> RunResult:
    """Apply the current matrix's gate to a merged run (no probing).

    Args:
        matrix: the declarations and ``[gate]`` settings to judge by.
        merged: the output of :func:`merge`.
        require: EP aliases or fleet columns (``CUDA@t4``) that must be live
            (``--require``), on top of ``[gate] require``.
        strict: undeclared cells fail.
        allow_absent: gated aliases (or columns) that may be not live.
        today: the date ``until`` is compared with.

    Returns:
        The merged run with its gate, declarations and matrix path filled in.

    Raises:
        FleetError: an EP the matrix does not know, or a saved EP that ran another
            provider than the matrix declares for its alias.
    """
    _same_providers(matrix, merged)
    view = expand(matrix, dict(merged.eps))
    req = tuple(dict.fromkeys(c for a in require for c in columns(merged, a)))
    allowed = tuple(dict.fromkeys(c for a in allow_absent for c in columns(merged, a)))
    verdict = apply(view, merged.eps, merged.results, merged.features, require=req, strict=strict, today=today,
                    allow_absent=allowed)
    declared = {(f, a): describe(d) for f in merged.features for a in merged.eps
                if (d := view.declaration(f, a)) is not None}
    # The claims audit from each saved cell's layers (docs/surface.md), warnings unless strict.
    verdict = gate_verdict(_fleet_stale(verdict.findings, merged)
                           + claim_findings(merged.results, merged.eps, declared, strict=strict, line_of=view.line_of)
                           + _unprobed(view, merged, req))
    return dataclasses.replace(merged, matrix_path=matrix.path, gate=verdict, declared=declared)
