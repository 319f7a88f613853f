"""The ``epaudit`` entry point: start a worker first, then import the CLI; leave quickly.

``check`` and ``probe`` need a worker under this interpreter for the CPU EP (and any EP of
this environment); starting it before the CLI's imports lets it import onnxruntime while
the parent imports numpy, click and the rest (see :mod:`epaudit.run.spawn`).

When the command is done, the process ends with :func:`os._exit` after flushing the
standard streams and running the ``atexit`` handlers (which stop any worker nobody
took): the interpreter's own teardown, freeing every module one by one, costs about
0.1 s on a 2-core machine (``python -c "import epaudit.cli"`` with and without it) and
does nothing for a finished run. Every file epaudit writes is closed (and renamed into
place) before the command returns.
"""

from __future__ import annotations

import atexit
import os
import sys

from .run import spawn


def _exit_status(code) -> int:
    """What ``sys.exit(code)`` makes the exit status: ``None`` is 0, an int is itself,
    anything else is printed to stderr and is 1 (as the interpreter does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:  # noqa: BLE001 - nowhere left to say it
        pass
    return 1


def _leave(status: int) -> None:
    """Flush stdout and stderr, run the atexit handlers, end the process with ``status``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe (``| head``): nothing more to write
            if stream is sys.stdout and status == 0:
                status = 1
    atexit._run_exitfuncs()
    os._exit(status)


def workers_wanted(argv: list[str]) -> int:
    """How many workers to prestart for the command line ``argv`` (without the program).

    ``check`` and ``probe`` (not ``check --results``): one per EP named with ``--ep``
    (``probe`` names one), else two, since the shipped matrix runs CPU and CUDA under this
    interpreter; at most the number of cores. A guess made before the matrix is read: a
    worker nobody takes is killed at exit, and a missing one is started when needed.
    """
    if not argv or argv[0] not in ("check", "probe") or "--results" in argv:
        return 0
    eps = None
    for i, arg in enumerate(argv):
        if arg == "--ep" and i + 1 < len(argv):
            eps = argv[i + 1]
        elif arg.startswith("--ep="):
            eps = arg[len("--ep="):]
    n = 2 if eps is None else len([a for a in eps.split(",") if a.strip()])
    return max(0, min(n, os.cpu_count() or 1))


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _term_is_interrupt() -> None:
    """SIGTERM and SIGHUP outside a run act as Ctrl-C does: exit 3 through the
    interpreter's exit, so the atexit handlers stop and remove the prestarted workers
    (their default action would leave the temp directories, and print nothing). During a
    run, the runner's own handlers take over (:mod:`epaudit.run.interrupt`). Installed
    after the prestart: the signal module's import (enum, ~8 ms) is then off the worker's
    start."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        try:
            signal.signal(getattr(signal, name), _raise_interrupt)
        except (AttributeError, ValueError, OSError):  # not the main thread, or no such signal here
            pass


def _standard_streams() -> None:
    """Give a closed standard descriptor somewhere to go before anything opens a file.

    Started with ``2>&-``, Python has no ``sys.stderr`` (every warning line raised, and
    ``check`` exited 1 printing nothing, issue 24) and the next file opened gets
    descriptor 2, so whatever a child writes to its stderr lands in it. A closed stderr
    becomes a copy of stdout (its lines still reach the user or the log), or ``/dev/null``
    when stdout is closed too; a closed stdin becomes ``/dev/null``. A closed stdout is
    left closed: the CLI refuses to run without it (one line on stderr, exit 2).
    """
    def is_open(fd: int) -> bool:
        try:
            os.fstat(fd)
            return True
        except OSError:
            return False

    try:
        if not is_open(0):
            fd = os.open(os.devnull, os.O_RDONLY)
            if fd != 0:
                os.dup2(fd, 0)
                os.close(fd)
        if not is_open(2):
            if is_open(1):
                os.dup2(1, 2)
            else:
                fd = os.open(os.devnull, os.O_WRONLY)
                if fd != 2:
                    os.dup2(fd, 2)
                    os.close(fd)
            if sys.stderr is None:
                import io

                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                              encoding=getattr(sys.stdout, "encoding", None) or "utf-8",
                                              errors="backslashreplace")
    except OSError:  # nothing can be done: carry on as before
        pass


def main() -> None:
    """Console-script entry: prestart workers for ``check``/``probe``, then run the CLI."""
    _standard_streams()
    try:
        for _ in range(workers_wanted(sys.argv[1:])):
            spawn.prestart()
        _term_is_interrupt()
        from .cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while importing: nothing ran, nothing to report
        sys.stderr.write("epaudit: interrupted: nothing was reported\n")
        sys.exit(3)
    try:
        cli_main()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    _leave(status)
