"""What every command shares: loading the matrix, choosing EPs and features, running a plan,
reading saved results; options are in :mod:`.options`, output in :mod:`.output`.
"""

from __future__ import annotations

import os
import signal

import click

from ..audit import run as run_audit
from ..catalog import select
from ..matrix.load import load
from ..matrix.model import Matrix, MatrixError
from ..matrix.onnxkey import note
from ..report import preload
from ..run.interrupt import stop_on_signals
from ..run.runner import DEFAULT_TIMEOUT
from .options import _TERM, _fail
from .output import _progress

#: The matrix file found in the current directory when ``--matrix`` is not given.
LOCAL_MATRIX = "capabilities.toml"


def matrix_path(option: str | None) -> str | None:
    """The matrix every command uses, found the way tools find their configuration:
    ``--matrix``, else ``./capabilities.toml`` when it exists, else the packaged one
    (``None``). So after ``epaudit bless`` rewrites ``./capabilities.toml``, a plain
    ``epaudit check`` reads what it wrote."""
    if option is not None:
        return option
    # lexists: a dangling link is a matrix that cannot be read (exit 2), never "no matrix
    # here" and a silent fall back to the packaged one.
    return LOCAL_MATRIX if os.path.lexists(LOCAL_MATRIX) else None


def _load_matrix(path: str | None) -> Matrix:
    """Load the matrix (:func:`matrix_path`); every report names it (``matrix.path``:
    ``./capabilities.toml`` when found here, ``<embedded capabilities.toml>`` otherwise)."""
    path = matrix_path(path)
    try:
        matrix = load("./" + path if path == LOCAL_MATRIX else path)
    except MatrixError as exc:
        _fail(str(exc))
        raise  # unreachable
    # onnx.* keys of another onnx's corpus were skipped (epaudit/matrix/onnxkey.py): say so
    # once, unless --quiet (its callback has run: click parses options before the body).
    line = note(matrix)
    if line and not _TERM["quiet"]:
        from .options import _say

        _say("note", line)
    return matrix


def _providers(matrix: Matrix, eps: str | None, start_timeout: float | None = None):
    """The EPs to probe: ``--ep`` aliases, else every provider; never none (a gate over no
    EP would pass without having checked anything). Their interpreters and libraries are
    checked first (:func:`epaudit.matrix.preflight.check_providers`: a mistake is exit 2), and
    ``start_timeout`` (``--start-timeout``) applies where the matrix sets none."""
    out = _chosen_providers(matrix, eps)
    from ..matrix.preflight import check_providers

    try:
        check_providers(matrix, out)
    except MatrixError as exc:
        _fail(str(exc))
    if start_timeout is not None:
        import dataclasses

        out = [p if p.start_timeout is not None else dataclasses.replace(p, start_timeout=start_timeout)
               for p in out]
    return out


def _chosen_providers(matrix: Matrix, eps: str | None):
    if eps is None:
        out = list(matrix.providers.values())
        if not out:
            _fail(f"{matrix.path}: declares no [providers.ALIAS]: nothing to probe")
        return out
    aliases = [a.strip() for a in eps.split(",") if a.strip()]
    if not aliases:
        _fail(f"--ep {eps!r}: names no EP (declared: {', '.join(matrix.providers) or 'none'})")
    out = []
    for alias in aliases:
        if alias not in matrix.providers:
            _fail(f"--ep {alias}: no provider {alias!r} in {matrix.path} "
                  f"(declared: {', '.join(matrix.providers) or 'none'})")
        out.append(matrix.providers[alias])
    return out


def _check_require(matrix: Matrix, require, fleet: bool = False) -> None:
    """Every ``--require`` names a provider of the matrix; merging saved results
    (``fleet``), also one machine's column of it, ``ALIAS@LABEL``."""
    for name in require:
        alias, at, label = name.partition("@")
        if at and not fleet:
            _fail(f"--require {name}: ALIAS@LABEL names a fleet column; it needs --results")
        if alias not in matrix.providers or (at and not label):
            _fail(f"--require {name}: no provider {alias!r} in {matrix.path}")


def _check_allow_absent(matrix: Matrix, allow_absent) -> None:
    """Every ``--allow-absent`` names a gated EP of the matrix (others never make a run
    incomplete, so allowing them to be absent would be a no-op hiding a typo)."""
    for alias in allow_absent:
        if alias not in matrix.providers:
            _fail(f"--allow-absent {alias}: no provider {alias!r} in {matrix.path}")
        if alias not in matrix.gate.gated:
            _fail(f"--allow-absent {alias}: {alias} is not gated in {matrix.path} ([gate] gated = "
                  f"{list(matrix.gate.gated)}); only a gated EP makes a run incomplete when absent")


def _features(patterns: tuple[str, ...]):
    """The features ``--feature`` selects; every pattern must match at least one (a typo
    would otherwise narrow the run silently and the gate would pass over less)."""
    import fnmatch

    from ..catalog import BY_ID

    for p in patterns:
        if p in BY_ID:
            continue  # an exact id (a glob matching itself also matches, so this is the same rule)
        if not any(fnmatch.fnmatchcase(fid, p) for fid in BY_ID):
            import difflib

            close = difflib.get_close_matches(p, list(BY_ID), n=1, cutoff=0.6)
            _fail(f"--feature {p}: matches no feature" + (f"; did you mean {close[0]!r}?" if close else "")
                  + " (see `epaudit features`)")
    return select(list(patterns))


def _sharded(items, shard, *, ident=lambda f: f.id, operator=lambda f: f.operator, what: str = "feature"):
    """``(items of shard, shard info)`` (:func:`epaudit.run.shard.select`); every item and
    ``{}`` without ``--shard``. A shard left with nothing to run (more shards than items)
    is one line, exit 2: a shard that checks nothing must not pass."""
    if shard is None:
        return list(items), {}
    from ..run.shard import select

    chosen, info = select(items, shard, ident=ident, operator=operator)
    if not chosen:
        _fail(f"--shard {shard}: the selection has only {info['selected']} {what}(s), so shard {shard.index} "
              f"of {shard.count} would run none; use at most {info['selected']} shards")
    if not _TERM["quiet"]:
        click.echo(f"epaudit: shard {shard}: {len(chosen)} of {info['selected']} {what}(s)", err=True)
    return chosen, info


def _probe_cache(cache_dir: str | None, no_cache: bool):
    """The probe cache a run reads and writes (:mod:`epaudit.cache`), or ``None``."""
    if no_cache:
        return None
    if cache_dir is not None and not cache_dir.strip():
        _fail("--cache-dir: empty path (use --no-cache for no cache)")
    from ..cache.probecache import ProbeCache, default_cache_dir, probe_key
    from ..catalog import CATALOG_VERSION

    return ProbeCache(cache_dir if cache_dir is not None else default_cache_dir(),
                      probe_key(CATALOG_VERSION))


def _run(matrix: Matrix, providers, features, *, gate: bool, require=(), strict=False,
         timeout=DEFAULT_TIMEOUT, jobs=None, cache=None, formats=("table",), allow_absent=(), shard=None):
    import datetime as _dt
    import time as _time

    preload(formats)  # imported while the workers start, ready when the report is due
    started, t0 = _dt.datetime.now(_dt.timezone.utc), _time.monotonic()
    progress, advance = _progress(len(providers) * len(features))
    # Ctrl-C / SIGTERM stop the workers; the report is still written, marked incomplete.
    with stop_on_signals() as stop, progress:
        result = run_audit(matrix, providers=providers, features=features, gate=gate, require=require,
                           strict=strict, timeout=timeout, jobs=jobs, progress=advance, stop=stop,
                           cache=cache, allow_absent=allow_absent)
    # When the run started (UTC) and how long it took: the JSON report's started / duration_s.
    import dataclasses as _dc

    result = _dc.replace(result, environment={**result.environment,
                                              "started": started.isoformat(timespec="seconds"),
                                              "duration_s": round(_time.monotonic() - t0, 3)},
                         shard=dict(shard or {}))
    if stop.signum is not None and result.incomplete:
        click.echo(f"epaudit: interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "the report covers the probes that finished", err=True)
    elif stop.signum is not None:
        click.echo(f"epaudit: {signal.Signals(stop.signum).name} arrived after every probe had "
                   "finished: the report is complete", err=True)
    return result


def _stamp(result, label: str | None):
    """Record the machine (GPU, driver, label) in the run."""
    from ..providers.machine import collect, stamp

    try:
        return stamp(result, collect(label))
    except ValueError as exc:
        _fail(str(exc))
        raise  # unreachable


def _check_label(label: str | None) -> None:
    from ..providers.machine import check_label

    try:
        check_label(label)
    except ValueError as exc:
        _fail(str(exc))


def _load_saved(patterns: tuple[str, ...], option: str, matrix: Matrix | None = None):
    """Expand globs (quoted in the shell, so CI needs no glue) and load each file, one cell
    at a time (:mod:`epaudit.saved.stream`: the cells' evidence waits on disk); verified
    with the results key when there is one, and refused unsigned when ``matrix`` says
    ``[gate] require_signed = true``."""
    from ..saved.read import SavedError
    from ..saved.stream import load as load_saved
    from .options import results_key

    key = results_key()
    require_signed = bool(matrix is not None and matrix.gate.require_signed)
    if require_signed and key is None:
        _fail(f"{matrix.path}: [gate] require_signed = true, but no results key: set $EPAUDIT_RESULTS_KEY (from "
              "the CI system's secret store) or give --results-key-file")
    paths: list[str] = []
    for pattern in patterns:
        import glob

        found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not found:
            _fail(f"{option} {pattern}: matches no file")
        paths += [p for p in found if p not in paths]
    out = []
    for path in paths:
        try:
            out.append((path, load_saved(path, key=key, require_signed=require_signed)))
        except SavedError as exc:
            _fail(str(exc))
    return out


def _merged(patterns: tuple[str, ...], option: str, feature_patterns: tuple[str, ...],
            matrix: Matrix | None = None, expect: bool = False):
    """The saved results merged (:func:`epaudit.saved.fleet.merge`), the shards of one run
    put back together first (:func:`epaudit.saved.shards.combine`); ``expect``: for a gate,
    every selected feature is expected (a missing one is missing evidence). Versions that
    differ between the files are one note on stderr (unless ``--quiet``)."""
    from ..saved.fleet import FleetError, merge, version_note
    from ..saved.shards import combine
    from .options import _say

    reports = _load_saved(patterns, option, matrix)
    ids = [f.id for f in _features(feature_patterns)] if feature_patterns or expect else None
    try:
        merged = merge(combine(reports), feature_ids=ids, expect=expect)
    except FleetError as exc:
        _fail(str(exc))
        raise  # unreachable
    note_line = version_note(reports)
    if note_line and not _TERM["quiet"]:
        _say("note", note_line)
    return merged
