"""The command line: parse options, build the objects, call one function, map to an exit code.

Exit codes (DESIGN.md): 0 gate passed, 1 failing findings, 2 usage or matrix error (one
line naming file, key and line; no traceback), 3 incomplete (a required EP not live).
"""

from __future__ import annotations

import os
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
from .envs import DEFAULT_DIR as ENV_DIR
from .envs import KINDS as ENV_KINDS
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
    with progress:
        return run_audit(matrix, providers=providers, features=features, gate=gate, require=require,
                         strict=strict, timeout=timeout, jobs=jobs, progress=advance)


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
    sys.exit(0)


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
    """Each configured EP: where it lives, what ORT says about it, whether the canary runs on it."""
    from .runner import inspect_provider

    matrix = _load_matrix(matrix_path)
    table = Table(title="execution providers", title_justify="left")
    for col in ("alias", "provider", "interpreter / onnxruntime", "ORT lists it", "canary", "devices / reason"):
        table.add_column(col, overflow="fold")
    for p in matrix.providers.values():
        st = inspect_provider(p)
        where = f"{st.python}\n{st.distribution}" if st.distribution else (st.python or "—")
        listed = f"plugin: {st.library}" if st.library else (st.listed or "—")
        canary = "[green]live[/]" if st.live else "[dim]UNAVAILABLE[/]"
        detail = f"devices: {'; '.join(st.devices) or 'none listed'}" if st.live else st.reason[:600]
        table.add_row(p.alias, p.name, where, listed, canary, detail)
    Console(width=max(120, Console().width)).print(table)


@main.group()
def env() -> None:
    """Provider environments: one virtual environment per real non-CPU EP."""


@env.command("create")
@click.argument("kind", type=click.Choice(sorted(ENV_KINDS)))
@click.option("--dir", "directory", default=ENV_DIR, show_default=True, type=click.Path(file_okay=False),
              help="parent folder of the environments (and of their download cache).")
@click.option("--package", help="pip requirement instead of the pinned one, e.g. onnxruntime-webgpu==1.27.0.")
def env_create(kind, directory, package) -> None:
    """Create (or reuse) the environment for KIND and print how to point epaudit at it.

    Exit 0 when the canary runs on the EP, 1 when the environment was made but the EP does
    not start (ORT's reason printed), 2 when a step failed (the step and why).
    """
    from .envs import EnvError, create

    try:
        result = create(kind, directory, package=package,
                        say=lambda line: click.echo(f"epaudit env: {line}", err=True))
    except EnvError as exc:
        _fail(f"env create {kind}: {exc}")
        raise  # unreachable
    click.echo(f"# {kind}: {result.distribution or 'onnxruntime ?'}; canary "
               f"{'live' if result.live else 'NOT live'}")
    click.echo(f"export {result.variable}='{result.python}'")
    click.echo(f"# or: . {result.export_file}")
    if result.worker_env:
        click.echo("# in a matrix of your own, instead of the wrapper:")
        click.echo(f"#   python = \"{Path(result.python).parent / 'venv' / 'bin' / 'python'}\"")
        pairs = ", ".join(f'{k} = "{v}"' for k, v in result.worker_env.items())
        click.echo(f"#   env = {{ {pairs} }}")
    if not result.live:
        click.echo(f"epaudit: error: env create {kind}: the environment is there but the EP does not "
                   f"start: {result.reason}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
