"""`epaudit check` and `epaudit probe`: run the plan on live EPs (or merge saved results) and report."""

from __future__ import annotations

import sys

import click

from ..report import FORMATS, WRITERS
from .app import main
from .common import (
    _check_allow_absent,
    _check_label,
    _check_require,
    _features,
    _load_matrix,
    _merged,
    _probe_cache,
    _providers,
    _run,
    _sharded,
    _stamp,
)
from .options import (
    _allow_absent_opt,
    _cache_dir_opt,
    _color_opt,
    _fail,
    _feature_opt,
    _label_opt,
    _matrix_opt,
    _no_cache_opt,
    _quiet_opt,
    _report_opt,
    _results_key_opt,
    _shard_opt,
    _start_timeout_opt,
    _timeout_opt,
    results_key,
)
from .output import _check_writable, _emit, _publish, _report_specs, stream_report


@main.command()
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases to probe (default: all in the matrix).")
@_feature_opt
@click.option("--require", "require", multiple=True,
              help="EP alias that must be live, else exit 3 (repeatable; adds to [gate] require).")
@click.option("--strict", is_flag=True, help="undeclared cells fail the gate.")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout; without --format the extension picks it (.json, .xml = junit, .md, .html).")
@_timeout_opt
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="EPs probed at once (default: the number of cores).")
@_report_opt
@click.option("--results", "results", multiple=True, metavar="GLOB",
              help="merge saved JSON reports (repeatable; quote globs) and gate them without probing.")
@_label_opt
@_cache_dir_opt
@_no_cache_opt
@_allow_absent_opt
@_start_timeout_opt
@_results_key_opt
@click.option("--all", "all_rows", is_flag=True,
              help="table: a row per feature even in a large run (default: a summary, then what is not a pass).")
@_shard_opt
@_color_opt
@_quiet_opt
def check(matrix_path, eps, feature_patterns, require, strict, fmt, output, timeout, jobs,
          reports, results, label, cache_dir, no_cache, allow_absent, start_timeout, all_rows, shard) -> None:
    """Probe every live EP (or merge --results), apply the gate, report, exit with the verdict.

    \b
    Exit codes:
      0  the gate passed
      1  failing findings (a failing finding wins over incomplete)
      2  usage or matrix error (one line naming file, key and line)
      3  incomplete: a required or gated EP not live (unless --allow-absent), a
         misconfigured EP, or the run interrupted

    \b
    Examples:
      epaudit check --ep CPU --report html:epaudit.html
      epaudit check --allow-absent CUDA          (a machine without a GPU)
      epaudit check --results 'reports/*.json' --format junit --output epaudit.xml
      epaudit check --ep CPU --shard 2/4 --format json --output shard-2.json
    """
    matrix = _load_matrix(matrix_path)
    _check_require(matrix, require, fleet=bool(results))
    _check_allow_absent(matrix, allow_absent)
    _check_label(label)
    specs = _report_specs(fmt, output, reports, inputs=(matrix.path, *results))
    results_key()  # a results key that cannot be had fails now, before any probe runs
    if results:
        if eps or label:
            _fail(f"{'--ep' if eps else '--label'} cannot be used with --results: saved results carry "
                  "their EPs and machines")
        if shard is not None:
            _fail("--shard cannot be used with --results: the merge takes every shard's saved result")
        from ..saved.fleet import FleetError
        from ..saved.fleet import gate as fleet_gate

        try:
            result = fleet_gate(matrix, _merged(results, "--results", feature_patterns, matrix, expect=True),
                                require=require, strict=strict, allow_absent=allow_absent)
        except FleetError as exc:
            _fail(str(exc))
    else:
        providers = _providers(matrix, eps, start_timeout)
        features, part = _sharded(_features(feature_patterns), shard)
        result = _run(matrix, providers, features, gate=True, require=require, strict=strict,
                      timeout=timeout, jobs=jobs, cache=_probe_cache(cache_dir, no_cache),
                      formats=[f for f, _ in specs], allow_absent=allow_absent, shard=part)
        result = _stamp(result, label)
    _publish(result, specs, all_rows=all_rows)
    sys.exit(result.gate.exit_code)


@main.command()
@click.option("--ep", "ep", required=True, help="EP alias to probe, e.g. CUDA.")
@_matrix_opt
@_feature_opt
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="also write the JSON report here.")
@_timeout_opt
@_label_opt
@_cache_dir_opt
@_no_cache_opt
@_start_timeout_opt
@_results_key_opt
@click.option("--all", "all_rows", is_flag=True,
              help="a row and details for every feature even in a large run (default: what is not a pass).")
@_shard_opt
@_color_opt
@_quiet_opt
def probe(ep, matrix_path, feature_patterns, json_path, timeout, label, cache_dir, no_cache,
          start_timeout, all_rows, shard) -> None:
    """Run probes on one EP and show each outcome with its evidence (no gate).

    \b
    Exit codes:
      0  the probes ran (whatever their outcomes: no gate is applied)
      2  usage or matrix error
      3  interrupted: the report covers the probes that finished

    \b
    Example:
      epaudit probe --ep CUDA --feature 'gqa.*' --label h100 --json cuda-h100.json
      epaudit probe --ep CPU --shard 1/4 --json cpu-1.json      (one job of a CI matrix)
    """
    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, ep, start_timeout)
    features, part = _sharded(_features(feature_patterns), shard)
    _check_label(label)
    _check_writable(json_path, "--json")
    _report_specs("json", json_path, (), inputs=(matrix.path,))  # never over the matrix it reads
    results_key()  # a results key that cannot be had fails now, before any probe runs
    result = _stamp(_run(matrix, providers, features, gate=False, timeout=timeout,
                         cache=_probe_cache(cache_dir, no_cache),
                         formats=("table", "json") if json_path else ("table",), shard=part), label)
    if json_path:
        stream_report(lambda fh: WRITERS["json"](result, fh, key=results_key()), json_path, "json")
    _emit(result, "table", None, details=True, all_rows=all_rows, full_report=json_path)
    sys.exit(3 if result.incomplete else 0)  # 3: interrupted
