"""Output on terminals and pipes whose encoding cannot show epaudit's symbols.

With ``PYTHONIOENCODING=ascii`` (or latin-1, or a C locale) writing ``×``, ``—``, box
drawing or ``≥`` raised ``UnicodeEncodeError``: a traceback and exit 1 from every report
command (issue 12). :func:`degrade_streams` makes stdout and stderr write such
characters as ASCII look-alikes (``x``, ``-``, ``|``, ``>=``) and anything else as ``?``:
the text degrades, the exit code never changes. Files epaudit writes (``--output``) are
always UTF-8 and unaffected.
"""

from __future__ import annotations

import codecs
import sys

#: Characters epaudit prints, and what they become where the stream cannot encode them.
ASCII = {
    "×": "x", "—": "-", "–": "-", "→": "->", "←": "<-", "≥": ">=", "≤": "<=", "≈": "~",
    "±": "+/-", "…": "...", "·": ".", "•": "*", "✓": "ok", "✗": "x", "✔": "ok", "✘": "x",
    "“": '"', "”": '"', "‘": "'", "’": "'", "µ": "u", "²": "^2", "√": "sqrt", "∞": "inf",
    "━": "-", "─": "-", "┃": "|", "│": "|", "┏": "+", "┓": "+", "┗": "+", "┛": "+",
    "┌": "+", "┐": "+", "└": "+", "┘": "+", "┳": "+", "┻": "+", "╇": "+", "┡": "+",
    "┩": "+", "┼": "+", "├": "+", "┤": "+", "┬": "+", "┴": "+", "═": "=", "║": "|",
    "▶": ">", "▼": "v", "█": "#", "░": ".", "⚠": "!",
}

HANDLER = "epaudit-ascii"


def _replace(exc: UnicodeError):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start:exc.end]
    return "".join(ASCII.get(ch, "?") for ch in text), exc.end


codecs.register_error(HANDLER, _replace)


def degrade_streams(streams=None) -> None:
    """Reconfigure text streams (default stdout, stderr) to degrade what they cannot
    encode through :data:`ASCII` instead of raising. UTF-8 streams are left alone."""
    for stream in streams if streams is not None else (sys.stdout, sys.stderr):
        if stream is None:
            continue
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding in ("utf-8", "utf8"):
            continue
        try:
            stream.reconfigure(errors=HANDLER)
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's capture)
            pass
