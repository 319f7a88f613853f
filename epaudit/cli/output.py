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
    _Staged(path, fill).commit()


class _Staged:
    """A report written to a temp file beside its target (``fill(fh)`` writes it as it is
    made, one cell at a time), renamed into place by :meth:`commit` (or removed by
    :meth:`abort`): every report of a run is staged before any is committed, so a report
    that cannot be written leaves none half-done and the verdict line is printed only once
    every file is in place (issue 24).

    Raises:
        OSError: (constructor) the temp file cannot be written; any exception from
            ``fill`` (the temp file is removed).
    """

    def __init__(self, path: str, fill):
        import stat
        import tempfile

        self.tmp = None
        absolute = os.path.abspath(path)
        special = absolute.startswith(("/dev/", "/proc/"))
        self.target = Path(os.path.realpath(path))
        try:
            special = special or not stat.S_ISREG(os.stat(self.target).st_mode)
        except OSError:
            pass
        self.special = special
        if special:  # a device or FIFO cannot be staged: written now, before any rename
            with open(self.target, "w", encoding="utf-8") as fh:
                fill(fh)
            return
        fd, tmp = tempfile.mkstemp(dir=self.target.parent if str(self.target.parent) else ".", prefix=".epaudit-")
        self.tmp = tmp
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fill(fh)
            # mkstemp makes the file 0600; a report is an ordinary file (CI uploads it).
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        except BaseException:
            self.abort()
            raise

    def commit(self) -> None:
        """Put the report in place (a rename; a device or FIFO was written already).

        Raises:
            OSError: the rename failed (the temp file is removed).
        """
        if self.special:
            return
        try:
            os.replace(self.tmp, self.target)
            self.tmp = None
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Remove the temp file; the target is untouched."""
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


class _Defanged:
    """A text stream that writes to ``out`` what :func:`epaudit.textenc.defang` makes of the
    text written to it, a whole line at a time (a line is the unit ``defang`` judges, so
    the text that reaches ``out`` is exactly ``defang`` of all of it, however the writes
    were cut); :meth:`close` writes the last, unfinished line. Only the line being written
    is held (in pieces, joined once: a long line written in many pieces, as the HTML data
    block is, costs linear time)."""

    def __init__(self, out, style: str):
        self._out, self._style, self._pending = out, style, []

    def write(self, text: str) -> int:
        from ..textenc import defang

        cut = text.rfind("\n") + 1
        if not cut:
            if text:
                self._pending.append(text)
            return len(text)
        whole = "".join(self._pending) + text[:cut]
        self._pending = [text[cut:]] if cut < len(text) else []
        self._out.write(defang(whole, self._style))
        return len(text)

    def close(self) -> None:
        from ..textenc import defang

        rest, self._pending = "".join(self._pending), []
        if rest:
            self._out.write(defang(rest, self._style))

    def flush(self) -> None:
        self._out.flush()


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


#: Report format -> how :func:`epaudit.textenc.defang` neutralises workflow commands in it;
#: ``None``: not at all (``github``'s lines are workflow commands by design, each part of
#: them escaped by :mod:`epaudit.report.github` itself).
STYLE = {"table": "text", "json": "json", "markdown": "markdown", "junit": "xml", "html": "html", "github": None}


def _fill(result, fmt: str, output: str | None, details: bool = False, all_rows: bool = False,
          full_report: str | None = None):
    """``fill(fh)`` writing one report as it is made (:data:`epaudit.report.WRITERS`;
    ``output`` ``None``: for stdout, coloured and as wide as it is); the JSON report is
    signed with the results key when there is one."""
    from ..report import WRITERS
    from ..terminal import width

    from .options import results_key

    color = output is None and _color_out()
    opts = dict(color=color, details=details and not _TERM["quiet"], all_rows=all_rows,
                full_report=full_report, width=width(sys.stdout) if output is None else None,
                quiet=bool(_TERM["quiet"]) and output is None)
    if fmt == "json":
        opts["key"] = results_key()
    writer = WRITERS[fmt]
    return lambda fh: writer(result, fh, **opts)


def _emit(result, fmt: str, output: str | None, details: bool = False, all_rows: bool = False,
          full_report: str | None = None) -> None:
    stream_report(_fill(result, fmt, output, details, all_rows, full_report), output, fmt)


def say(text: str, style: str = "text", stream=None) -> None:
    """Write ``text`` to stdout (or ``stream``) with no line GitHub Actions would run as a
    workflow command (:func:`epaudit.textenc.defang`; ``style`` one of its styles)."""
    from ..textenc import defang

    (stream or sys.stdout).write(defang(text, style))


def write_report(text: str, output: str | None, what: str) -> None:
    """Write a report to ``output`` (atomically, :func:`write_atomic`) or to stdout; a full
    disk, ``/dev/full`` or a closed pipe is one line naming the target, exit 2. On stdout
    no line of it is a workflow command (``what``'s last word names the format: ``json``,
    ``markdown``, ``junit``, ``html``; anything else is text)."""
    stream_report(lambda fh: fh.write(text), output, what)


def stream_report(fill, output: str | None, what: str) -> None:
    """A report written by ``fill(fh)`` as it is made: to ``output`` through a temp file
    renamed at the end (:func:`write_atomic_stream`), or to stdout, where no line of it is
    a workflow command (:class:`_Defanged`, in the style ``what``'s last word names); a
    full disk, ``/dev/full`` or a closed pipe is one line naming the target, exit 2."""
    try:
        if output:
            write_atomic_stream(output, fill)
        else:
            style = STYLE.get(what.split()[-1] if what.split() else "", "text")
            out = _Defanged(sys.stdout, style) if style is not None else sys.stdout
            fill(out)
            if out is not sys.stdout:
                out.close()
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
    A Markdown report cut to GitHub's size limit names the JSON or JUnit file of the run.

    Order (issue 24): every file report is staged, then all are renamed into place, then
    the step summary and the annotations, and only then what goes to stdout (the table
    with its verdict line): a report that cannot be written is one line, exit 2, with no
    report renamed and no verdict printed, so the verdict's ``(exit N)`` is always the
    process's exit status."""
    full = next((p for f, p in specs if f in ("json", "junit") and p), None)
    staged: list[_Staged] = []
    try:
        for fmt, path in specs:
            if path is None:
                continue
            try:  # each file written as it is made, one cell at a time, into its temp file
                staged.append(_Staged(path, _fill(result, fmt, path, all_rows=all_rows, full_report=full)))
            except OSError as exc:
                _fail(f"{path}: cannot write the {fmt} report ({exc.strerror or exc}); no report was written")
    except BaseException:  # a failed or interrupted report: none of the run's is renamed
        for st in staged:
            st.abort()
        raise
    for n, st in enumerate(staged):
        try:
            st.commit()
        except OSError as exc:
            for rest in staged[n + 1:]:
                rest.abort()
            _fail(f"{st.target}: cannot write the report ({exc.strerror or exc})")
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:  # appending is the summary file's contract; other steps write to it too
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(FORMATS["markdown"](result, full_report=full))
        except OSError as exc:
            from .options import _say

            _say("warning", f"GITHUB_STEP_SUMMARY {summary}: {exc.strerror or exc}")
    if environ.get("GITHUB_ACTIONS") == "true":
        machine_on_stdout = any(path is None and fmt in _MACHINE for fmt, path in specs)
        try:
            (sys.stderr if machine_on_stdout else sys.stdout).write(FORMATS["github"](result))
        except OSError as exc:
            _fail(f"standard {'error' if machine_on_stdout else 'output'}: cannot write the annotations "
                  f"({exc.strerror or exc})")
    for fmt, path in specs:
        if path is None:
            _emit(result, fmt, None, all_rows=all_rows, full_report=full)
