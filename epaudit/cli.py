"""The command line: parse options, build the objects, call one function, map to an exit code.

Exit codes (DESIGN.md): 0 gate passed, 1 failing findings, 2 usage or matrix error (one
line naming file, key and line; no traceback), 3 incomplete (a required EP not live).
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .audit import run as run_audit
from .catalog import BY_ID, FEATURES, select
from .interrupt import stop_on_signals
from .matrix import Matrix, MatrixError, load
from .report import FORMATS
from .runner import DEFAULT_TIMEOUT

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad option value: printed as one line, exit 2."""


def _fail(message: str) -> None:
    click.echo(f"epaudit: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _load_matrix(path: str | None) -> Matrix:
    try:
        return load(path)
    except MatrixError as exc:
        _fail(str(exc))
        raise  # unreachable


def _providers(matrix: Matrix, eps: str | None):
    if not eps:
        return list(matrix.providers.values())
    out = []
    for alias in [a.strip() for a in eps.split(",") if a.strip()]:
        if alias not in matrix.providers:
            _fail(f"--ep {alias}: no provider {alias!r} in {matrix.path} "
                  f"(declared: {', '.join(matrix.providers) or 'none'})")
        out.append(matrix.providers[alias])
    return out


def _features(patterns: tuple[str, ...]):
    chosen = select(list(patterns))
    if patterns and not chosen:
        _fail(f"--feature {' '.join(patterns)}: matches no feature (see `epaudit features`)")
    return chosen


def _check_writable(path: str | None, option: str) -> None:
    """Fail before any probe runs when a report path cannot be written."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        _fail(f"{option} {path}: is a directory")
    directory = target.parent if str(target.parent) else Path(".")
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".epaudit-", delete=True):
            pass
    except OSError as exc:
        _fail(f"{option} {path}: cannot write there ({exc.strerror or exc})")


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename: never half-written."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=".epaudit-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _progress(total: int):
    progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(file=sys.stderr), transient=True,
                        disable=not sys.stderr.isatty())
    task = progress.add_task("probing", total=total)

    def advance(alias: str, fid: str) -> None:
        progress.update(task, advance=1, description=f"probing {alias}: {fid}")

    return progress, advance


def _run(matrix: Matrix, providers, features, *, gate: bool, require=(), strict=False,
         timeout=DEFAULT_TIMEOUT, jobs=None):
    progress, advance = _progress(len(providers) * len(features))
    # Ctrl-C / SIGTERM stop the workers; the report is still written, marked incomplete.
    with stop_on_signals() as stop, progress:
        result = run_audit(matrix, providers=providers, features=features, gate=gate, require=require,
                           strict=strict, timeout=timeout, jobs=jobs, progress=advance, stop=stop)
    if stop.signum is not None:
        click.echo(f"epaudit: interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "the report covers the probes that finished", err=True)
    return result


def _emit(result, fmt: str, output: str | None, details: bool = False) -> None:
    color = output is None and sys.stdout.isatty()
    text = FORMATS[fmt](result, color=color, details=details)
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)


_matrix_opt = click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False),
                           help="capabilities.toml to use (default: the embedded one).")
_timeout_opt = click.option("--timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT,
                            show_default=True, help="per-probe limit, seconds.")
_feature_opt = click.option("--feature", "feature_patterns", multiple=True,
                            help="feature id or glob (repeatable), e.g. 'gqa.*'.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="epaudit")
def main() -> None:
    """Audit ONNX Runtime execution providers for feature parity."""


@main.command()
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases to probe (default: all in the matrix).")
@_feature_opt
@click.option("--require", "require", multiple=True,
              help="EP alias that must be live, else exit 3 (repeatable; adds to [gate] require).")
@click.option("--strict", is_flag=True, help="undeclared cells fail the gate.")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@_timeout_opt
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="EPs probed at once (default: the number of cores).")
def check(matrix_path, eps, feature_patterns, require, strict, fmt, output, timeout, jobs) -> None:
    """Probe every live EP, apply the gate, print the matrix, exit with the verdict."""
    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, eps)
    features = _features(feature_patterns)
    for alias in require:
        if alias not in matrix.providers:
            _fail(f"--require {alias}: no provider {alias!r} in {matrix.path}")
    _check_writable(output, "--output")
    result = _run(matrix, providers, features, gate=True, require=require, strict=strict,
                  timeout=timeout, jobs=jobs)
    _emit(result, fmt, output)
    sys.exit(result.gate.exit_code)


@main.command()
@click.option("--ep", "ep", required=True, help="EP alias to probe, e.g. CUDA.")
@_matrix_opt
@_feature_opt
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="also write the JSON report here.")
@_timeout_opt
def probe(ep, matrix_path, feature_patterns, json_path, timeout) -> None:
    """Run probes on one EP and show each outcome with its evidence (no gate)."""
    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, ep)
    features = _features(feature_patterns)
    _check_writable(json_path, "--json")
    result = _run(matrix, providers, features, gate=False, timeout=timeout)
    if json_path:
        write_atomic(json_path, FORMATS["json"](result))
    _emit(result, "table", None, details=True)
    sys.exit(3 if result.incomplete else 0)  # 3: interrupted


@main.command()
def features() -> None:
    """List the probe catalog: id, operator, opset, dtype and what the probe changes."""
    table = Table(title=f"epaudit catalog ({len(FEATURES)} features)", title_justify="left")
    table.add_column("feature", no_wrap=True)
    for col in ("operator", "opset", "dtype", "subject vs control"):
        table.add_column(col, overflow="fold")
    for f in FEATURES:
        table.add_row(f.id, f.operator, str(f.opset), f.dtype, f.changes)
    Console(width=max(120, Console().width)).print(table)


@main.command()
@_matrix_opt
def providers(matrix_path) -> None:
    """Show what this machine has: ORT build, EPs compiled in, EPs that really start."""
    from .runner import Worker, canary_request

    matrix = _load_matrix(matrix_path)
    table = Table(title="execution providers", title_justify="left")
    for col in ("alias", "provider", "interpreter / onnxruntime", "compiled in", "canary", "devices / reason"):
        table.add_column(col, overflow="fold")
    for p in matrix.providers.values():
        if p.unavailable:
            table.add_row(p.alias, p.name, "—", "—", "[dim]UNAVAILABLE[/]", p.unavailable)
            continue
        python = p.python or sys.executable
        try:
            w = Worker(python, p.env)
        except OSError as exc:
            table.add_row(p.alias, p.name, python, "—", "[dim]UNAVAILABLE[/]", str(exc))
            continue
        try:
            facts = w.request({"op": "hello"}, 120)
            verdict = w.request(canary_request(p), 120)
            compiled = "yes" if p.name in facts["providers"] else "no"
            devs = ", ".join(f"{d.get('ep')}:{d.get('type')}" for d in facts["devices"]) or "none"
            live = "[green]live[/]" if verdict["live"] else "[dim]UNAVAILABLE[/]"
            table.add_row(p.alias, p.name, f"{facts['python']}\n{facts['distribution']}", compiled, live,
                          f"devices: {devs}" if verdict["live"] else verdict["reason"][:400])
        except Exception as exc:  # noqa: BLE001 - a broken environment is a row, not a traceback
            table.add_row(p.alias, p.name, python, "?", "[dim]UNAVAILABLE[/]", f"worker failed: {exc}"[:400])
        finally:
            w.close()
    Console(width=max(120, Console().width)).print(table)


if __name__ == "__main__":  # pragma: no cover
    main()
