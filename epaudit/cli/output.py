"""Where a command's result goes: the terminal (rich), report files written atomically
(a temp file, then a rename), ``--report FORMAT:FILE`` and ``--format``/``--output``, progress.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..report import FORMATS
from .options import _TERM, _fail


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
    write_atomic_stream(path, lambda fh: fh.write(text))


def write_atomic_stream(path: str, fill) -> None:
    """:func:`write_atomic` for a report written as it is made: ``fill(fh)`` writes to the
    temp file's text stream (UTF-8), which is renamed into place only when ``fill``
    returned; an exception from ``fill`` removes the temp file and is raised (the old file,
    if any, is left whole).

    Raises:
        OSError: the file cannot be written.
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
            fill(fh)
        return
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=".epaudit-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fill(fh)
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


def _emit(result, fmt: str, output: str | None, details: bool = False, all_rows: bool = False,
          full_report: str | None = None) -> None:
    from ..report import WRITERS
    from ..terminal import width

    color = output is None and _color_out()
    opts = dict(color=color, details=details and not _TERM["quiet"], all_rows=all_rows,
                full_report=full_report, width=width(sys.stdout) if output is None else None,
                quiet=bool(_TERM["quiet"]) and output is None)
    writer = WRITERS[fmt]
    stream_report(lambda fh: writer(result, fh, **opts), output, fmt)


def write_report(text: str, output: str | None, what: str) -> None:
    """Write a report to ``output`` (atomically, :func:`write_atomic`) or to stdout; a full
    disk, ``/dev/full`` or a closed pipe is one line naming the target, exit 2."""
    stream_report(lambda fh: fh.write(text), output, what)


def stream_report(fill, output: str | None, what: str) -> None:
    """A report written by ``fill(fh)`` as it is made: to ``output`` through a temp file
    renamed at the end (:func:`write_atomic_stream`), or to stdout; a full disk,
    ``/dev/full`` or a closed pipe is one line naming the target, exit 2."""
    try:
        if output:
            write_atomic_stream(output, fill)
        else:
            fill(sys.stdout)
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
