"""What every command shares: loading the matrix, choosing EPs and features, options,
running a plan, writing reports (atomically), exit-code helpers.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from ..audit import run as run_audit
from ..catalog import select
from ..run.interrupt import stop_on_signals
from ..matrix.model import Matrix, MatrixError
from ..matrix.load import load
from ..matrix.onnxkey import note
from ..report import FORMATS, preload
from ..run.runner import DEFAULT_TIMEOUT

EXIT_USAGE = 2


def _fail(message: str) -> None:
    click.echo(f"epaudit: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


#: The matrix file found in the current directory when ``--matrix`` is not given.
LOCAL_MATRIX = "capabilities.toml"


def matrix_path(option: str | None) -> str | None:
    """The matrix every command uses, found the way tools find their configuration:
    ``--matrix``, else ``./capabilities.toml`` when it exists, else the packaged one
    (``None``). So after ``epaudit bless`` rewrites ``./capabilities.toml``, a plain
    ``epaudit check`` reads what it wrote."""
    if option is not None:
        return option
    # lexists: a dangling link is a matrix that cannot be read (exit 2), never "no matrix
    # here" and a silent fall back to the packaged one.
    return LOCAL_MATRIX if os.path.lexists(LOCAL_MATRIX) else None


def _load_matrix(path: str | None) -> Matrix:
    """Load the matrix (:func:`matrix_path`); every report names it (``matrix.path``:
    ``./capabilities.toml`` when found here, ``<embedded capabilities.toml>`` otherwise)."""
    path = matrix_path(path)
    try:
        matrix = load("./" + path if path == LOCAL_MATRIX else path)
    except MatrixError as exc:
        _fail(str(exc))
        raise  # unreachable
    # onnx.* keys of another onnx's corpus were skipped (epaudit/matrix_onnx.py): say so
    # once, unless --quiet (its callback has run: click parses options before the body).
    line = note(matrix)
    if line and not _TERM["quiet"]:
        click.echo(f"epaudit: note: {line}", err=True)
    return matrix


def _providers(matrix: Matrix, eps: str | None, start_timeout: float | None = None):
    """The EPs to probe: ``--ep`` aliases, else every provider; never none (a gate over no
    EP would pass without having checked anything). Their interpreters and libraries are
    checked first (:func:`epaudit.preflight.check_providers`: a mistake is exit 2), and
    ``start_timeout`` (``--start-timeout``) applies where the matrix sets none."""
    out = _chosen_providers(matrix, eps)
    from ..matrix.preflight import check_providers

    try:
        check_providers(matrix, out)
    except MatrixError as exc:
        _fail(str(exc))
    if start_timeout is not None:
        import dataclasses

        out = [p if p.start_timeout is not None else dataclasses.replace(p, start_timeout=start_timeout)
               for p in out]
    return out


def _chosen_providers(matrix: Matrix, eps: str | None):
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


def _check_require(matrix: Matrix, require, fleet: bool = False) -> None:
    """Every ``--require`` names a provider of the matrix; merging saved results
    (``fleet``), also one machine's column of it, ``ALIAS@LABEL``."""
    for name in require:
        alias, at, label = name.partition("@")
        if at and not fleet:
            _fail(f"--require {name}: ALIAS@LABEL names a fleet column; it needs --results")
        if alias not in matrix.providers or (at and not label):
            _fail(f"--require {name}: no provider {alias!r} in {matrix.path}")


def _check_allow_absent(matrix: Matrix, allow_absent) -> None:
    """Every ``--allow-absent`` names a gated EP of the matrix (others never make a run
    incomplete, so allowing them to be absent would be a no-op hiding a typo)."""
    for alias in allow_absent:
        if alias not in matrix.providers:
            _fail(f"--allow-absent {alias}: no provider {alias!r} in {matrix.path}")
        if alias not in matrix.gate.gated:
            _fail(f"--allow-absent {alias}: {alias} is not gated in {matrix.path} ([gate] gated = "
                  f"{list(matrix.gate.gated)}); only a gated EP makes a run incomplete when absent")


def _features(patterns: tuple[str, ...]):
    """The features ``--feature`` selects; every pattern must match at least one (a typo
    would otherwise narrow the run silently and the gate would pass over less)."""
    import fnmatch

    from ..catalog import BY_ID

    for p in patterns:
        if not any(fnmatch.fnmatchcase(fid, p) for fid in BY_ID):
            import difflib

            close = difflib.get_close_matches(p, list(BY_ID), n=1, cutoff=0.6)
            _fail(f"--feature {p}: matches no feature" + (f"; did you mean {close[0]!r}?" if close else "")
                  + " (see `epaudit features`)")
    return select(list(patterns))


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

    A path that exists and is not a regular file (``/dev/null``, a FIFO), and anything
    under ``/dev`` or ``/proc`` (``/dev/stdout`` is a link to the process's descriptor,
    which may be a regular file), is written to as it is: renaming over it would replace
    the device or the link with a file. A symbolic link is followed: its target is
    replaced, the link stays (found by a fresh user: ``--output /dev/stdout`` replaced the
    system's ``/dev/stdout`` link; a linked matrix lost its link on ``bless``).

    Raises:
        OSError: the file cannot be written (the old one, if any, is left whole).
    """
    import stat
    import tempfile

    absolute = os.path.abspath(path)
    special = absolute.startswith(("/dev/", "/proc/"))
    target = Path(os.path.realpath(path))
    try:
        special = special or not stat.S_ISREG(os.stat(target).st_mode)
    except OSError:
        pass
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


#: Terminal settings from --color / --quiet (epaudit/terminal.py), read by _emit.
_TERM = {"color": "auto", "quiet": False}


def _set_term(key: str):
    def callback(ctx, param, value):
        if value is not None and value is not False:
            _TERM[key] = value
        return value
    return callback


_color_opt = click.option("--color", type=click.Choice(["auto", "always", "never"]), default=None,
                          expose_value=False, is_eager=True, callback=_set_term("color"),
                          help="colour the terminal report: auto (a terminal, unless NO_COLOR is set), "
                               "always, never.")
_quiet_opt = click.option("--quiet", "-q", is_flag=True, default=None, expose_value=False,
                          callback=_set_term("quiet"),
                          help="print only the failing findings and the verdict (reports written in full).")


def _print_table(table) -> None:
    """Print a rich table to stdout: at the terminal's (or COLUMNS') width; in a pipe at
    its natural width, so no cell folds (one row, one line; epaudit/terminal.py)."""
    from rich.console import Console

    from ..terminal import width

    color = _color_out()
    cols = width(sys.stdout)
    if cols is None:
        cols = Console(width=100_000).measure(table).maximum
    Console(width=cols, force_terminal=color, no_color=not color, highlight=False).print(table)


def _color_out() -> bool:
    """Colour for what goes to stdout (--color, NO_COLOR, a terminal)."""
    from ..terminal import color_enabled

    return color_enabled(_TERM["color"], sys.stdout)


def _progress(total: int):
    if not sys.stderr.isatty():
        # A CI log: a plain line every few seconds, so a long run shows it is alive.
        from ..terminal import LineProgress

        lines = LineProgress(total)
        return lines, lines.advance
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
    from ..cache.probecache import ProbeCache, default_cache_dir, probe_key
    from ..catalog import CATALOG_VERSION

    return ProbeCache(cache_dir if cache_dir is not None else default_cache_dir(),
                      probe_key(CATALOG_VERSION))


def _run(matrix: Matrix, providers, features, *, gate: bool, require=(), strict=False,
         timeout=DEFAULT_TIMEOUT, jobs=None, cache=None, formats=("table",), allow_absent=()):
    import datetime as _dt
    import time as _time

    preload(formats)  # imported while the workers start, ready when the report is due
    started, t0 = _dt.datetime.now(_dt.timezone.utc), _time.monotonic()
    progress, advance = _progress(len(providers) * len(features))
    # Ctrl-C / SIGTERM stop the workers; the report is still written, marked incomplete.
    with stop_on_signals() as stop, progress:
        result = run_audit(matrix, providers=providers, features=features, gate=gate, require=require,
                           strict=strict, timeout=timeout, jobs=jobs, progress=advance, stop=stop,
                           cache=cache, allow_absent=allow_absent)
    # When the run started (UTC) and how long it took: the JSON report's started / duration_s.
    import dataclasses as _dc

    result = _dc.replace(result, environment={**result.environment,
                                              "started": started.isoformat(timespec="seconds"),
                                              "duration_s": round(_time.monotonic() - t0, 3)})
    if stop.signum is not None and result.incomplete:
        click.echo(f"epaudit: interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "the report covers the probes that finished", err=True)
    elif stop.signum is not None:
        click.echo(f"epaudit: {signal.Signals(stop.signum).name} arrived after every probe had "
                   "finished: the report is complete", err=True)
    return result


def _emit(result, fmt: str, output: str | None, details: bool = False, all_rows: bool = False,
          full_report: str | None = None) -> None:
    from ..terminal import width

    color = output is None and _color_out()
    text = FORMATS[fmt](result, color=color, details=details and not _TERM["quiet"], all_rows=all_rows,
                        full_report=full_report, width=width(sys.stdout) if output is None else None,
                        quiet=bool(_TERM["quiet"]) and output is None)
    write_report(text, output, fmt)


def write_report(text: str, output: str | None, what: str) -> None:
    """Write a report to ``output`` (atomically, :func:`write_atomic`) or to stdout; a full
    disk, ``/dev/full`` or a closed pipe is one line naming the target, exit 2."""
    try:
        if output:
            write_atomic(output, text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as exc:
        _fail(f"{output or 'standard output'}: cannot write the {what} report ({exc.strerror or exc})")


#: Formats whose text a machine parses: when one goes to stdout, annotations go to stderr.
_MACHINE = {"json", "junit", "markdown", "github"}


#: ``--output`` extension -> report format, used when ``--format`` is not given.
_BY_SUFFIX = {".json": "json", ".xml": "junit", ".md": "markdown", ".html": "html", ".htm": "html"}


def _defaulted(param: str) -> bool:
    """Whether the running click command's ``param`` took its default (not given)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    from click.core import ParameterSource

    return ctx.get_parameter_source(param) is ParameterSource.DEFAULT


def _report_specs(fmt: str, output: str | None, reports: tuple[str, ...],
                  inputs: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """``--format/--output`` plus every ``--report FORMAT:FILE`` (``-`` = stdout), checked
    before any probe runs: unknown formats, two reports to one file (``/dev/stdout`` is
    stdout), a report over one of ``inputs`` (the matrix, saved results), unwritable paths."""
    if output and _defaulted("fmt"):
        # --output epaudit.json with no --format wrote the terminal table into a .json file
        # (a fresh user's finding): the extension says which report is wanted.
        fmt = _BY_SUFFIX.get(os.path.splitext(output)[1].lower(), fmt)
    specs: list[tuple[str, str | None]] = [(fmt, output)]
    for spec in reports:
        name, sep, path = spec.partition(":")
        if not sep or not path:
            _fail(f"--report {spec}: expected FORMAT:FILE, e.g. junit:epaudit.xml (FILE '-' is stdout)")
        if name not in FORMATS:
            _fail(f"--report {spec}: unknown format {name!r}; one of {', '.join(sorted(FORMATS))}")
        specs.append((name, None if path == "-" else path))
    # Compare where the files really are: o.json, ./o.json and $PWD/o.json are one file.
    def where(p: str | None) -> str:
        if p is None or os.path.abspath(p) in ("/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
            return "-"
        return os.path.realpath(p)

    targets = [where(p) for _, p in specs]
    for t, (_, p) in zip(targets, specs):
        if targets.count(t) > 1:
            _fail(f"--report: {'stdout' if t == '-' else p} is the target of two reports")
    read = {os.path.realpath(i): i for i in inputs if i and not i.startswith("<")}
    for t, (_, p) in zip(targets, specs):
        if t in read:
            _fail(f"{p}: is {read[t]}, which this run reads: a report would overwrite it")
    for name, path in specs[1:]:
        _check_writable(path, f"--report {name}:")
    _check_writable(output, "--output")
    return specs


def _publish(result, specs: list[tuple[str, str | None]], environ=os.environ, all_rows: bool = False) -> None:
    """Write every report; inside GitHub Actions also annotate and append the summary.
    A Markdown report cut to GitHub's size limit names the JSON or JUnit file of the run."""
    full = next((p for f, p in specs if f in ("json", "junit") and p), None)
    for fmt, path in specs:
        _emit(result, fmt, path, all_rows=all_rows, full_report=full)
    if environ.get("GITHUB_ACTIONS") == "true":
        machine_on_stdout = any(path is None and fmt in _MACHINE for fmt, path in specs)
        text = FORMATS["github"](result)
        (sys.stderr if machine_on_stdout else sys.stdout).write(text)
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:  # appending is the summary file's contract; other steps write to it too
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(FORMATS["markdown"](result, full_report=full))
        except OSError as exc:
            click.echo(f"epaudit: warning: GITHUB_STEP_SUMMARY {summary}: {exc.strerror or exc}", err=True)


def _stamp(result, label: str | None):
    """Record the machine (GPU, driver, label) in the run."""
    from ..providers.machine import collect, stamp

    try:
        return stamp(result, collect(label))
    except ValueError as exc:
        _fail(str(exc))
        raise  # unreachable


def _check_label(label: str | None) -> None:
    from ..providers.machine import check_label

    try:
        check_label(label)
    except ValueError as exc:
        _fail(str(exc))


def _load_saved(patterns: tuple[str, ...], option: str):
    """Expand globs (quoted in the shell, so CI needs no glue) and load each file."""
    from ..saved.read import SavedError, load as load_saved

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
    from ..saved.fleet import FleetError, merge

    reports = _load_saved(patterns, option)
    ids = [f.id for f in _features(feature_patterns)] if feature_patterns else None
    try:
        return merge(reports, feature_ids=ids)
    except FleetError as exc:
        _fail(str(exc))
        raise  # unreachable


_matrix_opt = click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False),
                           help="capabilities.toml to use (default: ./capabilities.toml if there is one, "
                                "else the packaged one).")
#: The longest time limit any option takes, seconds: ``1e300`` is finite but never ends,
#: so a hung probe would hang the gate as ``inf`` would.
MAX_SECONDS = 3600.0


class Seconds(click.ParamType):
    """A time limit in seconds, from 0.1 to :data:`MAX_SECONDS` (``nan``, ``inf`` and
    ``1e300`` are refused: a limit that never expires would let a hung probe hang the gate)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0.1 <= seconds <= MAX_SECONDS:
            self.fail(f"{value!r} must be a number of seconds from 0.1 to {MAX_SECONDS:.0f}", param, ctx)
        return seconds


_timeout_opt = click.option("--timeout", type=Seconds(), default=DEFAULT_TIMEOUT,
                            show_default=True, help="per-probe limit, seconds.")
_start_timeout_opt = click.option("--start-timeout", type=Seconds(), default=None,
                                  help="seconds a worker may take to start and run the canary (default 120, "
                                       "or the provider's start_timeout); past it the EP is misconfigured.")
_allow_absent_opt = click.option("--allow-absent", "allow_absent", multiple=True, metavar="EP",
                                 help="a gated EP that may be not live here (repeatable; adds to [gate] "
                                      "allow_absent): the verdict names it as not audited instead of "
                                      "being INCOMPLETE.")
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
