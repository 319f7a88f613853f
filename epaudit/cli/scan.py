"""`epaudit scan`: will each model be right on each EP, and which node is not."""

from __future__ import annotations

import sys

import click

from ..run.interrupt import stop_on_signals
from .app import main
from .common import _check_require, _load_matrix, _merged, _probe_cache, _providers
from .options import _cache_dir_opt, _fail, _matrix_opt, _no_cache_opt, _timeout_opt
from .output import _check_writable, write_report

#: Largest value ``--dim`` takes (a probe or input over the memory bounds is refused anyway).
MAX_DIM = 1 << 20


def _dims(values) -> dict[str, int]:
    out = {}
    for v in values:
        name, sep, num = v.partition("=")
        if not sep or not name or not num.strip().isdigit():
            _fail(f"--dim {v!r}: expected NAME=VALUE with a whole number (--dim batch=1)")
        value = int(num)
        if value > MAX_DIM:
            _fail(f"--dim {v!r}: {value} is over {MAX_DIM}")
        out[name] = value
    return out


class _Say:
    """Progress lines on stderr for long runs: none in the first :data:`QUIET` seconds (a
    quick scan prints only its report), then at most one every :data:`QUIET` seconds."""

    QUIET = 3.0

    def __init__(self):
        import time

        self.clock = time.monotonic
        self.last = self.clock()

    def __call__(self, msg: str) -> None:
        from ..scan.safe import esc

        now = self.clock()
        if now - self.last >= self.QUIET:
            self.last = now
            click.echo(esc(msg), err=True)


@main.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=True))
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases to probe now (default: all in the matrix).")
@click.option("--results", "results", multiple=True, metavar="GLOB",
              help="take outcomes from saved JSON reports (repeatable; fleet files too) instead of probing.")
@click.option("--require", "require", multiple=True,
              help="EP alias that must be live and take every used feature (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "html"]), default="table",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
              help="bind a symbolic dimension (repeatable; default: batch-like 1, others 4).")
@click.option("--whole", is_flag=True, help="also run each whole model on each EP and find the first wrong node.")
@click.option("--inputs", "inputs", type=click.Path(dir_okay=False),
              help="an .npz of the model's inputs (for --whole, and to bind the node probes' shapes).")
@click.option("--repro", "repro", type=click.Path(file_okay=False),
              help="write a one-node reproduction of each first wrong node under this directory (--whole).")
@click.option("--no-node-probes", is_flag=True, help="map to catalog features only (no probes of the nodes' own "
              "configurations).")
@_timeout_opt
@_cache_dir_opt
@_no_cache_opt
def scan(models, matrix_path, eps, results, require, fmt, output, dims, whole, inputs, repro, no_node_probes,
         timeout, cache_dir, no_cache) -> None:
    """Will MODELS be right on each EP, and which node is not.

    Every node is probed in its own configuration (shapes, attributes, dtype, opset;
    seeded inputs, never the weights) and mapped to the catalog features it uses;
    --whole also runs each whole model on each EP against a reference. MODELS may be
    files or directories (every .onnx under it; GenAI output folders).

    \b
    Exit codes:
      0  no model is silently wrong, crashes or hangs on an EP checked
      1  a model is silently wrong (IGNORED, UNWRITTEN, NAN, MISMATCH, or a whole model
         that differs) or crashes on an EP of the run, or is refused / falls back on an
         EP named with --require
      2  usage error, a file that is not a readable ONNX model, or a model that cannot
         be loaded (the readable ones are still scanned and reported)
      3  a required EP is not live

    \b
    Examples:
      epaudit scan model.onnx --ep CPU,WebGPU
      epaudit scan exported/ --ep CPU,WebGPU --whole --repro repro/
      epaudit scan models/*.onnx --results 'reports/*.json' --format markdown
    """
    from ..scan import ModelError
    from ..scan import scan as run_scan
    from ..scan.format import FORMATS as SCAN_FORMATS
    from ..scan.safe import esc
    from ..scan.whole import WholeError

    bound = _dims(dims)
    if repro and not whole:
        _fail("--repro needs --whole")
    matrix = _load_matrix(matrix_path)
    _check_require(matrix, require, fleet=bool(results))
    _check_writable(output, "--output")
    saved = None
    if results:
        if eps:
            _fail("--ep cannot be used with --results: saved results carry their EPs")
        saved = _merged(results, "--results", ())
    providers = None if results else _providers(matrix, eps)
    say = _Say()
    try:
        with stop_on_signals() as stop:
            result = run_scan(list(models), matrix, providers=providers, saved=saved, saved_from=results,
                              require=require, timeout=timeout, cache=_probe_cache(cache_dir, no_cache), stop=stop,
                              dims=bound, whole=whole, inputs=inputs, repro=repro, node_probes=not no_node_probes,
                              say=say, progress=lambda alias, fid: say(f"scan: probing {alias}: {fid}"))
    except (ModelError, WholeError) as exc:
        for line in str(exc).splitlines() or [""]:
            click.echo(f"epaudit: error: {esc(line)}", err=True)
        sys.exit(2)
    text = SCAN_FORMATS[fmt](result)
    write_report(text, output, f"scan {fmt}")
    sys.exit(result.exit_code)
