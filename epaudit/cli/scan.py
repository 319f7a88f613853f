"""`epaudit scan`: which of a model's nodes use a feature an EP refuses, drops or gets wrong."""

from __future__ import annotations

import sys

import click

from ..run.interrupt import stop_on_signals
from .app import main
from .common import _check_require, _load_matrix, _merged, _probe_cache, _providers
from .options import _cache_dir_opt, _fail, _matrix_opt, _no_cache_opt, _timeout_opt
from .output import _check_writable, write_report


@main.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=True))
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases to probe now (default: all in the matrix).")
@click.option("--results", "results", multiple=True, metavar="GLOB",
              help="take outcomes from saved JSON reports (repeatable; fleet files too) instead of probing.")
@click.option("--require", "require", multiple=True,
              help="EP alias that must be live and take every used feature (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@_timeout_opt
@_cache_dir_opt
@_no_cache_opt
def scan(models, matrix_path, eps, results, require, fmt, output, timeout, cache_dir, no_cache) -> None:
    """Which of MODELS' nodes use a feature an EP refuses, drops or gets wrong.

    \b
    Exit codes:
      0  every used feature runs as expected (or is a declared, loud gap)
      1  a used feature is silent (IGNORED, UNWRITTEN, NAN, MISMATCH) or crashes on an
         EP of the run, or is refused / falls back on an EP named with --require
      2  usage error, or a file that is not a readable ONNX model
      3  a required EP is not live

    \b
    Examples:
      epaudit scan model.onnx --ep CPU,WebGPU
      epaudit scan models/*.onnx --results 'reports/*.json' --format markdown
    """
    from ..scan import ModelError
    from ..scan import scan as run_scan
    from ..scan.format import FORMATS as SCAN_FORMATS

    matrix = _load_matrix(matrix_path)
    _check_require(matrix, require, fleet=bool(results))
    _check_writable(output, "--output")
    saved = None
    if results:
        if eps:
            _fail("--ep cannot be used with --results: saved results carry their EPs")
        saved = _merged(results, "--results", ())
    providers = None if results else _providers(matrix, eps)
    try:
        with stop_on_signals() as stop:
            result = run_scan(list(models), matrix, providers=providers, saved=saved, saved_from=results,
                              require=require, timeout=timeout, cache=_probe_cache(cache_dir, no_cache), stop=stop)
    except ModelError as exc:
        _fail(str(exc))
        raise  # unreachable
    text = SCAN_FORMATS[fmt](result)
    write_report(text, output, f"scan {fmt}")
    sys.exit(result.exit_code)
