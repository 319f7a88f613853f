"""Interruption: Ctrl-C, SIGTERM and SIGHUP turn into a ``stop`` event, not a traceback.

Workers run in their own process sessions (``workers.Worker``), so a terminal's Ctrl-C
reaches only the parent. While :func:`stop_on_signals` is active, SIGINT, SIGTERM and
SIGHUP (a closed terminal or SSH session, ``kill -HUP``: a stop like SIGTERM, issue 24) set
a :class:`threading.Event` instead of raising; the runner watches it, kills every worker
at once and keeps the probes that finished, the audit marks the result ``incomplete``,
and the CLI still writes its report (exit 3, or 1 when a failing finding is already
known; docs/outcomes-and-gates.md "Exit codes").
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

#: The signals that interrupt a run.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Stop(threading.Event):
    """A stop event that remembers which signal set it.

    Attributes:
        signum: the number of the first signal received, or ``None``.
    """

    signum: int | None = None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """Within the block, SIGINT, SIGTERM and SIGHUP set the yielded :class:`Stop` event.

    The previous handlers are restored on exit. Outside the main thread (where Python
    cannot install handlers) the event is yielded without handlers.
    """
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, _frame) -> None:
        if stop.signum is None:
            stop.signum = signum
        stop.set()

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
