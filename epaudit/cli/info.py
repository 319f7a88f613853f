"""`epaudit features`, `epaudit providers` and `epaudit env create`: the catalog, the EPs, their environments."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import catalog
from ..providers.envs import DEFAULT_DIR as ENV_DIR
from ..providers.envs import KINDS as ENV_KINDS
from .app import main
from .common import _features, _load_matrix
from .options import _fail, _feature_opt, _matrix_opt
from .output import _print_table, say


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json: one object per feature (id, operator, opset, dtype, changes, source, uses).")
@_feature_opt
def features(fmt, feature_patterns) -> None:
    """List the probe catalog: id, operator, opset, dtype and what the probe changes.

    \b
    Exit codes:
      0  always

    \b
    Example:
      epaudit features --format json | python -m json.tool
    """
    from rich.table import Table
    from rich.text import Text

    chosen = _features(feature_patterns) if feature_patterns else catalog.FEATURES
    if fmt == "json":
        from ..report.features import format as format_features

        say(format_features(chosen))
        return
    table = Table(title=f"epaudit catalog ({len(chosen)} of {len(catalog.FEATURES)} features)", title_justify="left")
    # In a terminal narrower than the table, a generated id (~100 characters) folds rather
    # than squeezing the other columns to nothing (a fresh user's 120-column terminal).
    table.add_column("feature", overflow="fold")
    for col, least in (("operator", 10), ("opset", 5), ("dtype", 7), ("subject vs control", 24)):
        table.add_column(col, overflow="fold", min_width=least)
    for f in chosen:
        table.add_row(f.id, f.operator, str(f.opset), f.dtype, Text(f.changes))
    _print_table(table)


@main.command()
@_matrix_opt
def providers(matrix_path) -> None:
    """Each configured EP: where it lives, what ORT says about it, whether the canary runs on it.

    \b
    Exit codes:
      0  always (an EP that does not start is a row with ORT's reason, not an error)
      2  matrix error

    \b
    Example:
      epaudit providers --matrix capabilities.toml
    """
    from rich.table import Table
    from rich.text import Text

    from ..run.canary import inspect_provider

    matrix = _load_matrix(matrix_path)
    table = Table(title="execution providers", title_justify="left")
    for col in ("alias", "provider", "interpreter / onnxruntime", "ORT lists it", "canary", "devices / reason"):
        table.add_column(col, overflow="fold")
    for p in matrix.providers.values():
        st = inspect_provider(p)
        where = f"{st.python}\n{st.distribution}" if st.distribution else (st.python or "—")
        listed = f"plugin: {st.library}" if st.library else (st.listed or "—")
        canary = "[green]live[/]" if st.live else "[dim]UNAVAILABLE[/]"
        # The whole reason: CUDA's last words ("Require cuDNN 9.* and CUDA 13.*") come last.
        detail = f"devices: {'; '.join(st.devices) or 'none listed'}" if st.live else st.reason
        # Text, not str: paths, reasons and names are never read as rich markup.
        table.add_row(Text(p.alias), Text(p.name), Text(where), Text(listed), canary, Text(detail))
    _print_table(table)


@main.group()
def env() -> None:
    """Provider environments: one virtual environment per real non-CPU EP."""


@env.command("create")
@click.argument("kind", type=click.Choice(sorted([*ENV_KINDS, "ort"])))
@click.option("--dir", "directory", default=ENV_DIR, show_default=True, type=click.Path(file_okay=False),
              help="parent folder of the environments (and of their download cache).")
@click.option("--package", help="pip requirement instead of the pinned one, e.g. onnxruntime-webgpu==1.27.0; "
                                "for KIND ort, the release to install, e.g. onnxruntime==1.27.0.")
def env_create(kind, directory, package) -> None:
    """Create (or reuse) the environment for KIND and print how to point epaudit at it.

    KIND ort is any onnxruntime release (1.16 and later) as a CPU column
    (docs/release-to-release.md).

    \b
    Exit codes:
      0  the canary runs on the EP
      1  the environment was made but the EP does not start (ORT's reason printed)
      2  a step failed (the step and why), or bad --package

    \b
    Example:
      epaudit env create ort --package onnxruntime==1.27.0
    """
    from ..providers.envs import EnvError, create

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
    if kind == "ort":
        from ..providers.releases import matrix_lines

        click.echo("# as a column of a matrix of your own:")
        for line in matrix_lines(result):
            click.echo(f"#   {line}")
    if result.worker_env:
        click.echo("# in a matrix of your own, instead of the wrapper:")
        click.echo(f"#   python = \"{Path(result.python).parent / 'venv' / 'bin' / 'python'}\"")
        pairs = ", ".join(f'{k} = "{v}"' for k, v in result.worker_env.items())
        click.echo(f"#   env = {{ {pairs} }}")
    if not result.live:
        click.echo(f"epaudit: error: env create {kind}: the environment is there but the EP does not "
                   f"start: {result.reason}", err=True)
        sys.exit(1)
