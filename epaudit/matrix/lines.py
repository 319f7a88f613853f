"""Where a key of the matrix text is: the line a dotted key path was written on.

``tomllib`` keeps no positions, so every :class:`~epaudit.matrix.model.MatrixError` finds its
line here, from the text itself: table headers, array-of-table headers and dotted keys; and
the words a problem is told with (:func:`_tname`, :func:`_hint`).
"""

from __future__ import annotations

import re
from typing import Iterable

# --------------------------------------------------------------------------- line lookup
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")

_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$")

_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_@-]+)"""

_KEY = re.compile(rf"""^\s*({_PART}(?:\s*\.\s*{_PART})*)\s*=""")


def _split_key(text: str) -> tuple[str, ...]:
    """Split a TOML dotted key (``features."gqa.x"``) into its parts."""
    parts, buf, quote = [], "", None
    for ch in text.strip():
        if quote:
            if ch == quote:
                quote = None
            else:
                buf += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(buf.strip())
            buf = ""
        else:
            buf += ch
    parts.append(buf.strip())
    return tuple(parts)


class _Lines:
    """Finds the line of a key path in TOML text (tomllib keeps no positions).

    An array-of-tables entry (``[[conformance.skip]]``) is indexed by its position:
    the third entry's keys live under ``("conformance", "skip", "2", key)``.
    """

    def __init__(self, text: str):
        self.index: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        arrays: dict[tuple[str, ...], int] = {}
        for no, line in enumerate(text.splitlines(), start=1):
            a = _ARRAY_HEADER.match(line)
            if a:
                name = _split_key(a.group(1))
                arrays[name] = arrays.get(name, -1) + 1
                table = name + (str(arrays[name]),)
                self.index.setdefault(name, no)
                self.index.setdefault(table, no)
                continue
            m = _HEADER.match(line)
            if m and not line.lstrip().startswith("[["):
                table = _split_key(m.group(1))
                self.index.setdefault(table, no)
                continue
            k = _KEY.match(line)
            if k:
                parts = _split_key(k.group(1))
                for i in range(1, len(parts) + 1):  # a dotted key defines its parents here too
                    self.index.setdefault(table + parts[:i], no)

    def find(self, path: tuple[str, ...]) -> int | None:
        """Line of ``path`` or of its nearest recorded ancestor."""
        while path:
            if path in self.index:
                return self.index[path]
            path = path[:-1]
        return None


def _dotted(path: tuple[str, ...]) -> str:
    """``features."gqa.x".CPU``; array-of-tables positions read ``conformance.skip[2].ep``."""
    out = ""
    for p in path:
        if p.isdigit():
            out += f"[{p}]"
        else:
            out += ("." if out else "") + (f'"{p}"' if "." in p else p)
    return out


def _tname(value) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a float"}.get(type(value), type(value).__name__)


def _hint(word: str, choices: Iterable[str]) -> str:
    import difflib  # only for a typo's hint

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" {word!r}, did you mean {close[0]!r}?" if close else f" {word!r}"
