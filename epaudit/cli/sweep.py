"""`epaudit sweep`: seeded configurations around the catalog's probes, failures shrunk and saved."""

from __future__ import annotations

import sys

import click

from .app import main
from .common import _load_matrix, _providers
from .options import _fail, _matrix_opt, _quiet_opt, _start_timeout_opt, _timeout_opt
from .output import _check_writable, write_report


def _groups(ops: tuple[str, ...], patterns: tuple[str, ...]):
    """operator -> its catalog features: those of ``--op`` (``Conv``, ``ai.onnx.Conv``,
    ``com.microsoft.RotaryEmbedding``) and those ``--feature`` selects, by operator."""
    from .. import catalog
    from .common import _features

    chosen: dict = {}
    for op in ops:
        name = op.strip()
        domain, _, op_type = name.rpartition(".")
        domain = "" if domain in ("", "ai.onnx") else domain
        hits = [f for f in catalog.FEATURES if f.op_type == op_type and f.domain == domain]
        if not hits:
            known = sorted({f.op_type for f in catalog.FEATURES})
            import difflib

            close = difflib.get_close_matches(op_type, known, n=1)
            _fail(f"--op {op}: no catalog feature probes this operator"
                  + (f"; did you mean {close[0]!r}?" if close else "") + " (see `epaudit features`)")
        for f in hits:
            chosen.setdefault(f.operator, {})[f.id] = f
    if patterns:
        for f in _features(patterns):
            chosen.setdefault(f.operator, {})[f.id] = f
    return {op: list(fs.values()) for op, fs in chosen.items()}


@main.command()
@click.option("--op", "ops", multiple=True, help="operator to sweep (repeatable): Conv, ai.onnx.Resize, "
                                                 "com.microsoft.RotaryEmbedding.")
@click.option("--feature", "feature_patterns", multiple=True,
              help="sweep around these features (id or glob, repeatable), e.g. 'onnx.Resize.*'.")
@click.option("--all-operators", "all_ops", is_flag=True, help="every operator the catalog probes.")
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases (default: all in the matrix).")
@click.option("--budget", type=click.IntRange(min=1, max=100_000), default=None,
              help="configurations per operator (default 100).")
@click.option("--seed", type=click.IntRange(min=0, max=2**31 - 1), default=0, show_default=True,
              help="the generator's seed: the same seed, budget, catalog and onnx give the same configurations.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@click.option("--repro", "repro_dir", type=click.Path(file_okay=False), default="sweep-repros", show_default=True,
              help="where each failure's standalone repro is written (<dir>/<id>-<EP>).")
@click.option("--save", "save_path", type=click.Path(dir_okay=False),
              help="add the minimal failing configurations to this findings file (.toml, or .json) as features.")
@click.option("--no-shrink", is_flag=True, help="report failures as found, unshrunk.")
@click.option("--shrink-limit", type=click.IntRange(min=1), default=400, show_default=True,
              help="the most configurations the shrinker runs per failure (fewer for a slow EP).")
@click.option("--selftest", is_flag=True,
              help="prove the sweep: each fault of `epaudit selftest` injected into the CPU EP must be found and "
                   "shrunk (default --op Conv, --budget 12); exit 1 when one is not.")
@_timeout_opt
@_start_timeout_opt
@_quiet_opt
def sweep(ops, feature_patterns, all_ops, matrix_path, eps, budget, seed, fmt, output, repro_dir, save_path,
          no_shrink, shrink_limit, selftest, timeout, start_timeout) -> None:
    """Sweep configurations around the catalog's probes of an operator; shrink what fails.

    \b
    Exit codes:
      0  no failing configuration
      1  a failing configuration (silent, crash or timeout), each shrunk, with a repro
      2  usage or matrix error (one line)
      3  incomplete: interrupted (what was found so far is reported), an EP not live,
         or a configuration that could not be judged

    \b
    Examples:
      epaudit sweep --op Conv --ep CPU --budget 500 --seed 7
      epaudit sweep --feature 'onnx.Resize.*' --ep WebGPU --save found.toml
    """
    from ..run.interrupt import stop_on_signals
    from ..sweep import DEFAULT_BUDGET, save, write_repros
    from ..sweep import sweep as run_sweep
    from ..sweep.report import to_json, to_table

    if selftest:
        _load_matrix(matrix_path)  # saved findings a matrix names are features too
        from ..sweep.selftest import format_rows
        from ..sweep.selftest import run as run_selftest

        rows, clean = run_selftest(_groups(ops or ("Conv",), feature_patterns), budget=budget or 12, seed=seed,
                                   timeout=timeout)
        write_report(format_rows(rows, clean), output, "sweep selftest")
        sys.exit(0 if all(r.ok for r in rows) and clean == 0 else 1)
    if not (ops or feature_patterns or all_ops):
        _fail("sweep: name what to sweep: --op OP, --feature PATTERN or --all-operators")
    matrix = _load_matrix(matrix_path)
    _check_writable(output, "--output")
    if save_path is not None:
        if not save_path.endswith((".toml", ".json")):
            _fail(f"--save {save_path}: must end in .toml or .json")
        _check_writable(save_path, "--save")
    providers = _providers(matrix, eps, start_timeout)
    if all_ops:
        from .. import catalog

        groups: dict = {}
        for f in catalog.FEATURES:
            groups.setdefault(f.operator, []).append(f)
    else:
        groups = _groups(ops, feature_patterns)
    progress = _Progress()
    with stop_on_signals() as stop:
        result = run_sweep(groups, providers, budget=budget or DEFAULT_BUDGET, seed=seed, timeout=timeout,
                           stop=stop, progress=progress, shrink=not no_shrink, shrink_limit=shrink_limit)
    progress.close()
    if stop.signum is not None:
        click.echo("epaudit: sweep interrupted: reporting what finished", err=True)
        result.incomplete = True
    try:
        write_repros(result, repro_dir, {p.alias: dict(p.options) for p in providers})
    except OSError as exc:
        _fail(f"--repro {repro_dir}: cannot write there ({getattr(exc, 'strerror', None) or exc})")
    if save_path is not None and result.failures:
        from ..catalog.found import FindingsError

        try:
            n = save(result, save_path)
        except (FindingsError, OSError) as exc:
            _fail(f"--save {save_path}: {exc}")
        click.echo(f"epaudit: {len(result.failures)} finding(s) saved to {save_path} ({n} in the file); "
                   f"name it under [catalog] findings in the matrix to gate them", err=True)
    write_report(to_json(result) if fmt == "json" else to_table(result), output, f"sweep {fmt}")
    sys.exit(result.exit_code)


class _Progress:
    """Progress on a terminal (one line, rewritten), nothing elsewhere."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.shown = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.tty:
            return
        sys.stderr.write(f"\r\x1b[Kepaudit sweep: {phase} {done}/{total}")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
