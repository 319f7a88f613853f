"""`epaudit diff` and `epaudit bless`: compare saved runs; rewrite the matrix from observations."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .app import main
from .common import LOCAL_MATRIX, _features, _load_matrix, _merged, _probe_cache, _providers, _run
from .options import _cache_dir_opt, _fail, _feature_opt, _no_cache_opt, _results_key_opt, _say, _timeout_opt
from .output import _check_writable, say, write_atomic


@main.command()
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW",
              help="compare OLD's column with NEW's (repeatable or comma-separated), e.g. ORT127=ORT128; "
                   "unmapped columns pair by name, then by provider.")
@_results_key_opt
def diff(old, new, maps) -> None:
    """What changed per (feature, EP) between two saved JSON reports; exit 1 when a cell got worse.

    \b
    Exit codes:
      0  nothing got worse (at least one cell was compared)
      1  a cell got worse
      2  bad input, or nothing was comparable (no column paired, or no cell judged on
         both sides): the listing is printed, then one line saying so

    \b
    Example:
      epaudit diff ort127.json ort128.json --map ORT127=ORT128
    """
    from ..saved.diff import (
        Change,
        NothingComparable,
        compare,
        format_text,
        pair_columns,
        parse_map,
        require_comparable,
    )
    from ..saved.fleet import FleetError, check_comparable
    from ..saved.read import SavedError
    from ..saved.stream import load as load_saved

    from .options import results_key

    try:
        key = results_key()
        a, b = load_saved(old, key=key), load_saved(new, key=key)
    except SavedError as exc:
        _fail(str(exc))
    try:
        check_comparable(new, b, catalog_version=a.catalog_version, semantics=a.semantics)
    except FleetError as exc:
        _fail(f"{exc} (OLD {old} was made with catalog {a.catalog_version})")
    try:
        pairs = pair_columns(a, b, parse_map(maps))
    except ValueError as exc:
        _fail(f"diff {old} {new}: {exc}")
        raise  # unreachable
    changes = compare(a, b, pairs)
    say(format_text(changes, old, new, a, b, pairs))
    try:  # after the listing, so what could not be compared is still shown
        require_comparable(a, b, pairs)
    except NothingComparable as exc:
        sys.stdout.flush()
        _fail(f"diff {old} {new}: {exc}")
    sys.exit(1 if any(c.change is Change.WORSE for c in changes) else 0)


@main.command()
@click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False),
              help="the capabilities.toml to rewrite (default: ./capabilities.toml, the file check reads).")
@click.option("--from", "sources", multiple=True, metavar="GLOB",
              help="saved JSON reports to bless from (repeatable; default: probe now).")
@click.option("--ep", "eps", help="comma-separated EP aliases to probe when probing now.")
@_feature_opt
@click.option("--dry-run", is_flag=True, help="print the diff, write nothing.")
@_timeout_opt
@_cache_dir_opt
@_no_cache_opt
@_results_key_opt
def bless(matrix_path, sources, eps, feature_patterns, dry_run, timeout, cache_dir, no_cache) -> None:
    """Rewrite the matrix so declarations match what was observed (comments kept); print the diff.

    \b
    Exit codes:
      0  rewritten (or already matching; nothing written with --dry-run)
      2  usage or matrix error
      3  interrupted while probing: nothing written

    \b
    Example:
      epaudit bless --matrix capabilities.toml --from 'reports/*.json' --dry-run
    """
    from ..saved.bless import plan

    matrix_path = matrix_path or LOCAL_MATRIX
    if not os.path.exists(matrix_path):
        _fail(f"--matrix {matrix_path}: no such file; bless rewrites a matrix file (copy the packaged one "
              "there first, or name yours with --matrix)")
    matrix = _load_matrix(matrix_path)
    text = Path(matrix_path).read_text(encoding="utf-8")
    if sources:
        if eps:
            _fail("--ep cannot be used with --from: saved results carry their EPs")
        result = _merged(sources, "--from", feature_patterns, matrix)
    else:
        result = _run(matrix, _providers(matrix, eps), _features(feature_patterns), gate=False, timeout=timeout,
                      cache=_probe_cache(cache_dir, no_cache))
        if result.incomplete:  # Ctrl-C, SIGTERM, SIGHUP: a part of a run blesses nothing
            _say("error", f"bless interrupted: {matrix_path} left as it was")
            sys.exit(3)
    unknown = sorted({i.base_alias for i in result.eps.values()} - set(matrix.providers))
    if unknown:
        _fail(f"--from: EP {unknown[0]!r} is not a provider in {matrix.path}")
    if not dry_run:
        _check_writable(matrix_path, "--matrix")
    p = plan(matrix, text, result)
    say(p.diff(matrix_path) or (
        f"{matrix_path}: nothing to rewrite; {len(p.refused)} cell(s) cannot be blessed (below)\n" if p.refused
        else f"{matrix_path}: already matches what was observed\n"))
    for r in p.refused:
        _say("not blessed", f"{r.feature_id} on {r.alias} ({r.why}): a gap must refuse loudly; "
             "fix the EP (the gate keeps failing)")
    if p.edits and not dry_run:
        write_atomic(matrix_path, p.new_text)
        click.echo(f"epaudit: {len(p.edits)} cell(s) rewritten in {matrix_path}; new gaps need an issue and "
                   "an until date before the gate passes", err=True)
    sys.exit(0)
