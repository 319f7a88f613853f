"""Terminal conventions: colour, width, progress lines for logs.

* Colour: ``--color always|never|auto``; ``auto`` colours a terminal unless ``NO_COLOR``
  is set to anything non-empty (https://no-color.org); ``FORCE_COLOR`` is not read.
* Width: a terminal's own width, or ``COLUMNS`` when set (a pipe too); in a pipe
  without ``COLUMNS`` nothing is wrapped at all (:func:`width` returns ``None`` and the
  table formatter writes long lines whole): a CI log or ``grep`` gets each finding on
  one line.
* Progress: on a terminal a rich bar (epaudit/cli/common.py); elsewhere (CI logs) :class:`LineProgress`
  writes one plain line to stderr at most every :data:`PROGRESS_EVERY` seconds and a
  last one when the run ends, so a long run shows it is alive.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import IO, Callable, Mapping

#: Seconds between two progress lines when stderr is not a terminal (``EPAUDIT_PROGRESS_EVERY``).
PROGRESS_EVERY = 5.0


def color_enabled(choice: str, stream: IO[str], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to colour output going to ``stream`` (``choice``: always, never, auto)."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return bool(stream.isatty()) and not environ.get("NO_COLOR")


def width(stream: IO[str], environ: Mapping[str, str] = os.environ) -> int | None:
    """Columns to lay out for: ``COLUMNS`` when set to a positive number, else the
    terminal's width when ``stream`` is one, else ``None`` (do not wrap)."""
    cols = environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    try:
        if stream.isatty():
            return shutil.get_terminal_size((120, 24)).columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


class LineProgress:
    """Progress for a log: ``epaudit: probing 12/60 (CPU: gqa.rotary), 5 s`` on stderr.

    A context manager whose :meth:`advance` is the runner's progress callback (called
    from worker threads: it only compares clocks and writes one line).
    """

    def __init__(self, total: int, what: str = "probing", every: float | None = None,
                 stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic):
        self.total, self.what, self.done = total, what, 0
        env = os.environ.get("EPAUDIT_PROGRESS_EVERY", "")
        self.every = every if every is not None else (float(env) if env.replace(".", "", 1).isdigit() else PROGRESS_EVERY)
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.start = self.last = clock()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        now = self.clock()
        if self.done and now - self.start >= self.every:
            self._line("done", now)

    def _line(self, detail: str, now: float) -> None:
        try:
            self.stream.write(f"epaudit: {self.what} {self.done}/{self.total} ({detail}), "
                              f"{now - self.start:.0f} s\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not stop the audit
            pass

    def advance(self, alias: str, fid: str) -> None:
        """One probe finished (``alias``: the EP column, ``fid``: the feature)."""
        self.done += 1
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._line(f"{alias}: {fid}", now)
