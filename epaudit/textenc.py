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


# --- strings from outside ---------------------------------------------------------------
#
# Whatever a results file, a model, a matrix or ORT says reaches a terminal, a CI log, a
# Markdown summary or a GitHub annotation only through the helpers below (issue 24). A
# log line is never split by a string from a file (a forged ``verdict:`` line), an escape
# code never reaches a terminal, and GitHub Actions never reads a workflow command out of
# a string: its runner takes ``::command::`` from a line that starts with it after
# leading whitespace, and the legacy ``##[command]`` anywhere in a line
# (``actions/runner`` ``src/Runner.Common/ActionCommand.cs``, ``TryParseV2``/``TryParse``;
# ``stop-commands`` among them, which silences every later annotation of the step).

#: What stands for ``##[`` and a line-leading ``::`` in each kind of output: the text
#: still reads the same to a person (or a JSON/XML/HTML parser), never to the runner.
_DEFANG = {
    "text": ("#\\x23[", "\\x3a:"),
    "json": ("#\\u0023[", None),  # a JSON line never starts with "::" (strings are quoted)
    "markdown": ("#&#35;[", "&#58;:"),
    "xml": ("#&#35;[", "&#58;:"),
    "html": ("#&#35;[", "&#58;:"),
}


def one_line(text) -> str:
    """``text`` (anything: ``str()`` is taken) as one line safe for a terminal or a log.

    Control characters, line and paragraph separators, bidirectional and zero-width
    format characters become their escapes (``\\n``, ``\\x1b``, ``\\u2028``, ``\\u202e``);
    a ``::`` at the start or after a space (where a wrapped line could begin) becomes
    ``\\x3a:`` and ``##[`` becomes ``#\\x23[``, so no workflow command can be read out of
    it. Printable text, ``onnxruntime::Foo`` included, is unchanged. Idempotent.
    """
    text = str(text)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
                       for ch in text)
    if "##[" in text:
        text = text.replace("##[", "#\\x23[")
    if "::" in text:
        text = _leading_colons(text, "\\x3a:")
    return text


def _leading_colons(text: str, stand_in: str) -> str:
    """``::`` at the start of ``text`` or after whitespace replaced by ``stand_in``."""
    out, i = [], 0
    while True:
        j = text.find("::", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        out.append(stand_in if j == 0 or text[j - 1].isspace() else "::")
        i = j + 2


def defang(text: str, style: str = "text") -> str:
    """A whole report (``style``: text, json, markdown, xml or html) with no line GitHub
    Actions would run as a workflow command: ``##[`` anywhere and ``::`` starting a line
    (after whitespace) become :data:`_DEFANG`'s stand-ins, which JSON, XML, HTML and
    Markdown readers decode to the same characters. The last guard before stdout and
    stderr; ``--format github`` (whose lines are commands by design) never passes here."""
    legacy, leading = _DEFANG[style]
    if "##[" in text:
        text = text.replace("##[", legacy)
    if leading is not None and "::" in text:
        lines = text.split("\n")
        for n, line in enumerate(lines):
            stripped = line.lstrip()
            if stripped.startswith("::"):
                lines[n] = line[: len(line) - len(stripped)] + leading + stripped[2:]
        text = "\n".join(lines)
    return text
