"""The command line: parse options, build the objects, call one function, map to an exit code.

Exit codes (DESIGN.md): 0 gate passed, 1 failing findings, 2 usage or matrix error (one
line naming file, key and line; no traceback), 3 incomplete (a required EP not live).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from . import __version__
from .audit import run as run_audit
from .catalog import FEATURES, select
from .interrupt import stop_on_signals
from .envs import DEFAULT_DIR as ENV_DIR
from .envs import KINDS as ENV_KINDS
from .matrix import Matrix, MatrixError, load
from .report import FORMATS, preload
from .runner import DEFAULT_TIMEOUT

EXIT_USAGE = 2


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
    """The EPs to probe: ``--ep`` aliases, else every provider; never none (a gate over no
    EP would pass without having checked anything)."""
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
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".epaudit-", delete=True):
            pass
    except OSError as exc:
        _fail(f"{option} {path}: cannot write there ({exc.strerror or exc})")


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename: never half-written.

    A path that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO)
    is written to as it is: renaming over it would replace the device with a file.

    Raises:
        OSError: the file cannot be written (the old one, if any, is left whole).
    """
    import stat
    import tempfile

    target = Path(path)
    try:
        special = not stat.S_ISREG(os.stat(target).st_mode)
    except OSError:
        special = False
    if special:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=".epaudit-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        # mkstemp makes the file 0600; a report is an ordinary file (CI uploads it).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class _NoProgress:
    """The progress bar when stderr is not a terminal: nothing, and no rich import."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _progress(total: int):
    if not sys.stderr.isatty():
        return _NoProgress(), lambda alias, fid: None
    # rich costs ~0.1 s to import: only for a terminal that shows the bar.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(file=sys.stderr), transient=True)
    task = progress.add_task("probing", total=total)

    def advance(alias: str, fid: str) -> None:
        progress.update(task, advance=1, description=f"probing {alias}: {fid}")

    return progress, advance


def _probe_cache(cache_dir: str | None, no_cache: bool):
    """The probe cache a run reads and writes (:mod:`epaudit.cache`), or ``None``."""
    if no_cache:
        return None
    if cache_dir is not None and not cache_dir.strip():
        _fail("--cache-dir: empty path (use --no-cache for no cache)")
    from .cache import ProbeCache, default_cache_dir, probe_key
    from .catalog import CATALOG_VERSION

    return ProbeCache(cache_dir if cache_dir is not None else default_cache_dir(),
                      probe_key(CATALOG_VERSION))


def _run(matrix: Matrix, providers, features, *, gate: bool, require=(), strict=False,
         timeout=DEFAULT_TIMEOUT, jobs=None, cache=None, formats=("table",)):
    preload(formats)  # imported while the workers start, ready when the report is due
    progress, advance = _progress(len(providers) * len(features))
    # Ctrl-C / SIGTERM stop the workers; the report is still written, marked incomplete.
    with stop_on_signals() as stop, progress:
        result = run_audit(matrix, providers=providers, features=features, gate=gate, require=require,
                           strict=strict, timeout=timeout, jobs=jobs, progress=advance, stop=stop,
                           cache=cache)
    if stop.signum is not None and result.incomplete:
        click.echo(f"epaudit: interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "the report covers the probes that finished", err=True)
    elif stop.signum is not None:
        click.echo(f"epaudit: {signal.Signals(stop.signum).name} arrived after every probe had "
                   "finished: the report is complete", err=True)
    return result


def _emit(result, fmt: str, output: str | None, details: bool = False) -> None:
    color = output is None and sys.stdout.isatty()
    text = FORMATS[fmt](result, color=color, details=details)
    try:
        if output:
            write_atomic(output, text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as exc:  # a full disk, /dev/full, a closed pipe: one line, exit 2
        _fail(f"{output or 'standard output'}: cannot write the {fmt} report ({exc.strerror or exc})")


#: Formats whose text a machine parses: when one goes to stdout, annotations go to stderr.
_MACHINE = {"json", "junit", "markdown", "github"}


def _report_specs(fmt: str, output: str | None, reports: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """``--format/--output`` plus every ``--report FORMAT:FILE`` (``-`` = stdout), checked
    before any probe runs: unknown formats, two reports to one file, unwritable paths."""
    specs: list[tuple[str, str | None]] = [(fmt, output)]
    for spec in reports:
        name, sep, path = spec.partition(":")
        if not sep or not path:
            _fail(f"--report {spec}: expected FORMAT:FILE, e.g. junit:epaudit.xml (FILE '-' is stdout)")
        if name not in FORMATS:
            _fail(f"--report {spec}: unknown format {name!r}; one of {', '.join(sorted(FORMATS))}")
        specs.append((name, None if path == "-" else path))
    # Compare where the files really are: o.json, ./o.json and $PWD/o.json are one file.
    targets = [os.path.realpath(p) if p is not None else "-" for _, p in specs]
    for t, (_, p) in zip(targets, specs):
        if targets.count(t) > 1:
            _fail(f"--report: {'stdout' if t == '-' else p} is the target of two reports")
    for name, path in specs[1:]:
        _check_writable(path, f"--report {name}:")
    _check_writable(output, "--output")
    return specs


def _publish(result, specs: list[tuple[str, str | None]], environ=os.environ) -> None:
    """Write every report; inside GitHub Actions also annotate and append the summary."""
    for fmt, path in specs:
        _emit(result, fmt, path)
    if environ.get("GITHUB_ACTIONS") == "true":
        machine_on_stdout = any(path is None and fmt in _MACHINE for fmt, path in specs)
        text = FORMATS["github"](result)
        (sys.stderr if machine_on_stdout else sys.stdout).write(text)
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:  # appending is the summary file's contract; other steps write to it too
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(FORMATS["markdown"](result))
        except OSError as exc:
            click.echo(f"epaudit: warning: GITHUB_STEP_SUMMARY {summary}: {exc.strerror or exc}", err=True)


def _stamp(result, label: str | None):
    """Record the machine (GPU, driver, label) in the run."""
    from .machine import collect, stamp

    try:
        return stamp(result, collect(label))
    except ValueError as exc:
        _fail(str(exc))
        raise  # unreachable


def _check_label(label: str | None) -> None:
    from .machine import check_label

    try:
        check_label(label)
    except ValueError as exc:
        _fail(str(exc))


def _load_saved(patterns: tuple[str, ...], option: str):
    """Expand globs (quoted in the shell, so CI needs no glue) and load each file."""
    from .saved import SavedError, load as load_saved

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
            out.append((path, load_saved(path)))
        except SavedError as exc:
            _fail(str(exc))
    return out


def _merged(patterns: tuple[str, ...], option: str, feature_patterns: tuple[str, ...]):
    from .fleet import FleetError, merge

    reports = _load_saved(patterns, option)
    ids = [f.id for f in _features(feature_patterns)] if feature_patterns else None
    try:
        return merge(reports, feature_ids=ids)
    except FleetError as exc:
        _fail(str(exc))
        raise  # unreachable


_matrix_opt = click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False),
                           help="capabilities.toml to use (default: the embedded one).")
class Seconds(click.ParamType):
    """A finite time limit in seconds, at least 0.1 (``nan`` and ``inf`` are refused: a limit
    that never expires would let a hung probe hang the gate)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0.1:
            self.fail(f"{value!r} must be a finite number of seconds, at least 0.1", param, ctx)
        return seconds


_timeout_opt = click.option("--timeout", type=Seconds(), default=DEFAULT_TIMEOUT,
                            show_default=True, help="per-probe limit, seconds.")
_feature_opt = click.option("--feature", "feature_patterns", multiple=True,
                            help="feature id or glob (repeatable), e.g. 'gqa.*'.")
_report_opt = click.option("--report", "reports", multiple=True, metavar="FORMAT:FILE",
                           help=f"also write FORMAT ({', '.join(sorted(FORMATS))}) to FILE ('-' = stdout); "
                                "repeatable.")
_cache_dir_opt = click.option("--cache-dir", type=click.Path(file_okay=False),
                              help="where built probes are cached (default: $EPAUDIT_CACHE_DIR, "
                                   "$XDG_CACHE_HOME/epaudit or ~/.cache/epaudit).")
_no_cache_opt = click.option("--no-cache", is_flag=True,
                             help="build every probe now; read and write no probe cache.")
_label_opt = click.option("--label", default=None,
                          help="machine label recorded in the report (default: from the GPU name, else 'cpu'); "
                               "fleet columns are ALIAS@LABEL.")


class _OneLineErrors(click.Group):
    """click's usage errors as one line (``epaudit: error: …``, exit 2), like every other
    bad input, instead of click's four-line usage block; Ctrl-C before a run starts is
    exit 3 without a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to report
            click.echo("epaudit: error: standard output is closed", err=True)
            sys.exit(EXIT_USAGE)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `epaudit` alone: the help text
                click.echo(exc.format_message(), err=True)
            else:
                click.echo(f"epaudit: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("epaudit: interrupted before the run started", err=True)
            sys.exit(3)
        except OSError as exc:  # writing stdout failed (`> /dev/full`, a closed pipe)
            try:
                click.echo(f"epaudit: error: {exc.strerror or exc}", err=True)
            except OSError:
                pass
            sys.exit(EXIT_USAGE)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
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
@_report_opt
@click.option("--results", "results", multiple=True, metavar="GLOB",
              help="merge saved JSON reports (repeatable; quote globs) and gate them without probing.")
@_label_opt
@_cache_dir_opt
@_no_cache_opt
def check(matrix_path, eps, feature_patterns, require, strict, fmt, output, timeout, jobs,
          reports, results, label, cache_dir, no_cache) -> None:
    """Probe every live EP (or merge --results), apply the gate, report, exit with the verdict."""
    matrix = _load_matrix(matrix_path)
    for alias in require:
        if alias not in matrix.providers:
            _fail(f"--require {alias}: no provider {alias!r} in {matrix.path}")
    _check_label(label)
    specs = _report_specs(fmt, output, reports)
    if results:
        if eps or label:
            _fail(f"{'--ep' if eps else '--label'} cannot be used with --results: saved results carry "
                  "their EPs and machines")
        from .fleet import FleetError, gate as fleet_gate

        try:
            result = fleet_gate(matrix, _merged(results, "--results", feature_patterns),
                                require=require, strict=strict)
        except FleetError as exc:
            _fail(str(exc))
    else:
        providers = _providers(matrix, eps)
        features = _features(feature_patterns)
        result = _run(matrix, providers, features, gate=True, require=require, strict=strict,
                      timeout=timeout, jobs=jobs, cache=_probe_cache(cache_dir, no_cache),
                      formats=[f for f, _ in specs])
        result = _stamp(result, label)
    _publish(result, specs)
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
def probe(ep, matrix_path, feature_patterns, json_path, timeout, label, cache_dir, no_cache) -> None:
    """Run probes on one EP and show each outcome with its evidence (no gate)."""
    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, ep)
    features = _features(feature_patterns)
    _check_label(label)
    _check_writable(json_path, "--json")
    result = _stamp(_run(matrix, providers, features, gate=False, timeout=timeout,
                         cache=_probe_cache(cache_dir, no_cache),
                         formats=("table", "json") if json_path else ("table",)), label)
    if json_path:
        write_atomic(json_path, FORMATS["json"](result))
    _emit(result, "table", None, details=True)
    sys.exit(3 if result.incomplete else 0)  # 3: interrupted


@main.command()
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
def diff(old, new) -> None:
    """What changed per (feature, EP) between two saved JSON reports; exit 1 when a cell got worse."""
    from .diff import Change, compare, format_text
    from .fleet import FleetError, check_comparable

    from .saved import SavedError, load as load_saved

    try:
        a, b = load_saved(old), load_saved(new)
    except SavedError as exc:
        _fail(str(exc))
    try:
        check_comparable(new, b, catalog_version=a.catalog_version, semantics=a.semantics)
    except FleetError as exc:
        _fail(f"{exc} (OLD {old} was made with catalog {a.catalog_version})")
    changes = compare(a, b)
    sys.stdout.write(format_text(changes, old, new, a, b))
    sys.exit(1 if any(c.change is Change.WORSE for c in changes) else 0)


@main.command()
@click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False), default="capabilities.toml",
              show_default=True, help="the capabilities.toml to rewrite.")
@click.option("--from", "sources", multiple=True, metavar="GLOB",
              help="saved JSON reports to bless from (repeatable; default: probe now).")
@click.option("--ep", "eps", help="comma-separated EP aliases to probe when probing now.")
@_feature_opt
@click.option("--dry-run", is_flag=True, help="print the diff, write nothing.")
@_timeout_opt
@_cache_dir_opt
@_no_cache_opt
def bless(matrix_path, sources, eps, feature_patterns, dry_run, timeout, cache_dir, no_cache) -> None:
    """Rewrite the matrix so declarations match what was observed (comments kept); print the diff."""
    from .bless import plan

    matrix = _load_matrix(matrix_path)
    text = Path(matrix_path).read_text(encoding="utf-8")
    if sources:
        if eps:
            _fail("--ep cannot be used with --from: saved results carry their EPs")
        result = _merged(sources, "--from", feature_patterns)
    else:
        result = _run(matrix, _providers(matrix, eps), _features(feature_patterns), gate=False, timeout=timeout,
                      cache=_probe_cache(cache_dir, no_cache))
    unknown = sorted({i.base_alias for i in result.eps.values()} - set(matrix.providers))
    if unknown:
        _fail(f"--from: EP {unknown[0]!r} is not a provider in {matrix.path}")
    if not dry_run:
        _check_writable(matrix_path, "--matrix")
    p = plan(matrix, text, result)
    sys.stdout.write(p.diff(matrix_path) or f"{matrix_path}: already matches what was observed\n")
    for r in p.refused:
        click.echo(f"epaudit: not blessed: {r.feature_id} on {r.alias} ({r.why}): a gap must refuse loudly; "
                   "fix the EP (the gate keeps failing)", err=True)
    if p.edits and not dry_run:
        write_atomic(matrix_path, p.new_text)
        click.echo(f"epaudit: {len(p.edits)} cell(s) rewritten in {matrix_path}; new gaps need an issue and "
                   "an until date before the gate passes", err=True)
    sys.exit(0)


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
def conformance(matrix_path, ops, eps, case_patterns, expanded, require, fmt, output, cache_dir, timeout,
                jobs) -> None:
    """Run the ONNX backend node tests per EP through the matrix's governed skip-list."""
    from .conformance.cases import ConformanceError, load_cases
    from .conformance.run import DEFAULT_OPS, run as run_conformance, select as select_cases

    matrix = _load_matrix(matrix_path)
    providers = _providers(matrix, eps)
    for alias in require:
        if alias not in matrix.providers:
            _fail(f"--require {alias}: no provider {alias!r} in {matrix.path}")
    _check_writable(output, "--output")
    ops = ops or DEFAULT_OPS
    try:
        cases = load_cases(ops, cache_dir)
        total = len(select_cases(cases, expanded=expanded, patterns=case_patterns)) * len(providers)
        progress, advance = _progress(total)
        with progress:
            result = run_conformance(matrix, ops=ops, providers=providers, expanded=expanded,
                                     patterns=case_patterns, timeout=timeout, jobs=jobs, require=require,
                                     progress=advance, cases=cases)
    except ConformanceError as exc:
        _fail(str(exc))
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
    """Audit an ORT-style onnx_backend_test_series_filters.jsonc: what each entry skips, and findings."""
    import onnx.defs

    from .conformance import filters
    from .conformance.cases import ConformanceError, load_cases, onnx_version
    from .conformance.run import DEFAULT_OPS
    from .report.skiplist import FORMATS as SKIP_FORMATS

    _check_writable(output, "--output")
    ops = ops or DEFAULT_OPS
    try:
        names = [c.id for c in load_cases(ops, cache_dir)]
        result = filters.audit(file, names, ops=ops, onnx_version=onnx_version(),
                               opset=onnx.defs.onnx_opset_version(),
                               max_matches=max_matches or filters.DEFAULT_MAX_MATCHES)
    except (ConformanceError, filters.FilterFileError) as exc:
        _fail(str(exc))
    text = SKIP_FORMATS[fmt](result, color=output is None and sys.stdout.isatty())
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)
    sys.exit(result.exit_code)


@main.command()
@_matrix_opt
@_feature_opt
@_timeout_opt
@click.option("--hang-timeout", type=Seconds(), default=None,
              help="per-probe limit under the hang fault, seconds (default 0.5).")
def selftest(matrix_path, feature_patterns, timeout, hang_timeout) -> None:
    """Prove every probe catches every fault: the catalog on the CPU EP under each fault.

    Prints the features x faults detection table; exits 1 naming each feature and fault
    that was not caught as it must be. Features the matrix declares skip on CPU are not run.
    """
    from .report.selftest import format as format_selftest
    from .selftest import HANG_TIMEOUT, cpu_skips, run_selftest

    matrix = _load_matrix(matrix_path)
    features = _features(feature_patterns)
    result = run_selftest(features, timeout=timeout, skip=cpu_skips(matrix),
                          hang_timeout=HANG_TIMEOUT if hang_timeout is None else hang_timeout)
    sys.stdout.write(format_selftest(result, color=sys.stdout.isatty()))
    sys.exit(result.exit_code)


@main.command()
@_feature_opt
def oracle(feature_patterns) -> None:
    """Cross-check our reference with onnx's ReferenceEvaluator on every ONNX Attention probe.

    Exits 1 on a disagreement that is not listed (with its clauses) in epaudit/oracle.py,
    or on a listed one that went away.
    """
    from .oracle import cross_check, exit_code
    from .reference import SEMANTICS
    from .report.oracle import format as format_oracle

    features = _features(feature_patterns)
    if not any(f.op_type == "Attention" and not f.domain for f in features):
        _fail("oracle: the selection has no ONNX Attention feature: nothing to cross-check "
              "(onnx.reference implements ai.onnx Attention only)")
    rows = cross_check(features)
    sys.stdout.write(format_oracle(rows, semantics=SEMANTICS, color=sys.stdout.isatty()))
    sys.exit(exit_code(rows))


@main.command()
@_feature_opt
def features(feature_patterns) -> None:
    """List the probe catalog: id, operator, opset, dtype and what the probe changes."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    chosen = _features(feature_patterns) if feature_patterns else FEATURES
    table = Table(title=f"epaudit catalog ({len(chosen)} of {len(FEATURES)} features)", title_justify="left")
    table.add_column("feature", no_wrap=True)
    for col in ("operator", "opset", "dtype", "subject vs control"):
        table.add_column(col, overflow="fold")
    for f in chosen:
        table.add_row(f.id, f.operator, str(f.opset), f.dtype, Text(f.changes))
    # Generated ids run to ~110 characters: leave the other columns room beside them.
    longest = max((len(f.id) for f in chosen), default=0)
    Console(width=max(120, Console().width, longest + 90)).print(table)


@main.command()
@_matrix_opt
def providers(matrix_path) -> None:
    """Each configured EP: where it lives, what ORT says about it, whether the canary runs on it."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

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
        # Text, not str: paths, reasons and names are never read as rich markup.
        table.add_row(Text(p.alias), Text(p.name), Text(where), Text(listed), canary, Text(detail))
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
