"""Every string a model supplies is escaped before a terminal, Markdown or HTML sees it.

A model is untrusted input: node names, op types, domains, tensor and file names can hold
newlines (a forged ``verdict:`` line), terminal escape codes (``\\x1b[2J``), bidirectional
overrides, or bytes that are not UTF-8 (protobuf hands those over as ``bytes``). Here:

* :func:`esc` — one line of plain text: C0 and C1 control characters, DEL, the Unicode line
  and paragraph separators and the bidi controls become ``\\xNN`` / ``\\uNNNN``; bytes are
  decoded with backslash escapes; a text that starts with ``::`` (a GitHub Actions workflow
  command such as ``::stop-commands::``) gets its first colon escaped.
* :func:`md` — :func:`esc`, then the characters Markdown gives a meaning to backslashed.
* :func:`html` — :func:`esc`, then :func:`html.escape`.
* :func:`lines` — the last guard on a whole report: no line may begin (after blanks) with
  ``::``.
"""

from __future__ import annotations

import html as _html
import re

_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)) | {0x200E, 0x200F, 0x061C}
_MD = re.compile(r"([\\`*_\[\]<>|#!~&])")


def _char(ch: str) -> str:
    o = ord(ch)
    if o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F:
        return f"\\x{o:02x}"
    if o in (0x2028, 0x2029, 0xFEFF) or o in _BIDI:
        return f"\\u{o:04x}"
    return ch


def esc(value: object) -> str:
    """``value`` as one safe line of text (module doc)."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "backslashreplace")
    text = str(value)
    if text.isprintable() and not text.lstrip().startswith("::"):
        return text
    out = "".join(_char(c) for c in text)
    stripped = out.lstrip()
    if stripped.startswith("::"):
        cut = len(out) - len(stripped)
        out = out[:cut] + "\\x3a" + stripped[1:]
    return out


def md(value: object) -> str:
    """``value`` escaped for a Markdown table cell or paragraph."""
    return _MD.sub(r"\\\1", esc(value))


def html(value: object) -> str:
    """``value`` escaped for HTML text or an attribute value."""
    return _html.escape(esc(value), quote=True)


def lines(text: str) -> str:
    """``text`` with every line that would start with ``::`` (a workflow command) escaped."""
    if "::" not in text:
        return text
    out = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            line = line[:len(line) - len(stripped)] + "\\x3a" + stripped[1:]
        out.append(line)
    return "\n".join(out)
