"""`epaudit conformance` and `epaudit skips audit`: the ONNX backend tests through a governed skip-list."""

from __future__ import annotations

import signal
import sys

import click

from ..report import FORMATS
from ..run.interrupt import stop_on_signals
from .app import main
from .common import _check_allow_absent, _check_require, _load_matrix, _providers, _sharded
from .options import _allow_absent_opt, _fail, _matrix_opt, _shard_opt, _start_timeout_opt, _timeout_opt
from .output import _check_writable, _color_out, _emit, _progress, write_report


@main.command()
@_matrix_opt
@click.option("--op", "ops", multiple=True,
              help="operator whose ONNX backend node test cases run (repeatable; default: Attention).")
@click.option("--ep", "eps", help="comma-separated EP aliases to run on (default: all in the matrix).")
@click.option("--case", "case_patterns", multiple=True, help="run only cases matching this glob (repeatable).")
@click.option("--expanded", is_flag=True,
              help="also run the _expanded cases (the op's function body, not the EP's kernel).")
@click.option("--require", "require", multiple=True,
              help="EP alias that must be live, else exit 3 (repeatable; adds to [gate] require).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="where generated cases are cached (default: $EPAUDIT_CACHE_DIR, $XDG_CACHE_HOME/epaudit "
                   "or ~/.cache/epaudit).")
@_timeout_opt
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="EPs run at once (default: the number of cores).")
@_allow_absent_opt
@_start_timeout_opt
@_shard_opt
def conformance(matrix_path, ops, eps, case_patterns, expanded, require, fmt, output, cache_dir, timeout,
                jobs, allow_absent, start_timeout, shard) -> None:
    """Run the ONNX backend node tests per EP through the matrix's governed skip-list.

    \b
    Exit codes:
      0  every case passed or is a governed skip that still fails
      1  failing findings (an unskipped failure, a stale or expired skip, a crash)
      2  usage or matrix error
      3  incomplete: a required EP not live

    \b
    Examples:
      epaudit conformance --ep CPU --op Attention --format junit --output conformance.xml
      epaudit conformance --ep CPU --op Attention --shard 2/3   (one job of a CI matrix)
    """
    from ..catalog.corpus.cases import ConformanceError, load_cases
    from ..conformance.run import DEFAULT_OPS
    from ..conformance.run import run as run_conformance
    from ..conformance.run import select as select_cases

    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, eps, start_timeout)
    _check_require(matrix, require)
    _check_allow_absent(matrix, allow_absent)
    _check_writable(output, "--output")
    ops = ops or DEFAULT_OPS
    try:
        cases = load_cases(ops, cache_dir)
        for pattern in case_patterns:  # a typo'd --case would narrow the run silently
            if not select_cases(cases, expanded=True, patterns=[pattern]):
                _fail(f"--case {pattern}: matches none of the {len(cases)} case(s) of {', '.join(ops)}")
        chosen, part = _sharded(select_cases(cases, expanded=expanded, patterns=case_patterns), shard,
                                operator=lambda c: f"ai.onnx.{c.op_type}", what="case")
        progress, advance = _progress(len(chosen) * len(providers))
        # Ctrl-C / SIGTERM stop the workers at once, as in check; the report covers what finished.
        with stop_on_signals() as stop, progress:
            result = run_conformance(matrix, ops=ops, providers=providers, expanded=expanded,
                                     patterns=case_patterns, timeout=timeout, jobs=jobs, require=require,
                                     progress=advance, cases=cases, allow_absent=allow_absent, stop=stop,
                                     only=[c.id for c in chosen] if shard is not None else None)
            if part:
                import dataclasses

                result = dataclasses.replace(result, shard=part)
    except ConformanceError as exc:
        _fail(str(exc))
    if stop.signum is not None:
        click.echo(f"epaudit: interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "the report covers the cases that finished", err=True)
    _emit(result, fmt, output)
    sys.exit(result.gate.exit_code)


@main.group()
def skips() -> None:
    """Skip-list tools."""


@skips.command("audit")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--op", "ops", multiple=True, help="operator whose cases entries are matched against "
                                                 "(repeatable; default: Attention).")
@click.option("--max-matches", type=click.IntRange(min=1), default=None,
              help="an entry matching more cases than this is overbroad (default: 10).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="where generated cases are cached.")
def skips_audit(file, ops, max_matches, fmt, output, cache_dir) -> None:
    """Audit an ORT-style onnx_backend_test_series_filters.jsonc: what each entry skips, and findings.

    \b
    Exit codes:
      0  no failing finding
      1  failing findings (dead, overbroad, misscoped, ungoverned entries)
      2  the file cannot be read or parsed (one line naming it)

    \b
    Example:
      epaudit skips audit onnx_backend_test_series_filters.jsonc --op Attention
    """
    import onnx.defs

    from ..catalog.corpus.cases import ConformanceError, load_cases, onnx_version
    from ..conformance import filters
    from ..conformance.run import DEFAULT_OPS
    from ..report.skiplist import FORMATS as SKIP_FORMATS

    _check_writable(output, "--output")
    ops = ops or DEFAULT_OPS
    try:
        names = [c.id for c in load_cases(ops, cache_dir)]
        result = filters.audit(file, names, ops=ops, onnx_version=onnx_version(),
                               opset=onnx.defs.onnx_opset_version(),
                               max_matches=max_matches or filters.DEFAULT_MAX_MATCHES)
    except (ConformanceError, filters.FilterFileError) as exc:
        _fail(str(exc))
    text = SKIP_FORMATS[fmt](result, color=output is None and _color_out())
    write_report(text, output, f"skips audit {fmt}")
    sys.exit(result.exit_code)
