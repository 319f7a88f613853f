"""Auditing an ORT-style backend-test skip-list (``onnx_backend_test_series_filters.jsonc``).

The file is JSON with ``//`` and ``/* */`` comments: an object whose list-valued keys
hold skip entries, each a regex or an ``[opset_regex, test_regex]`` pair. The matching
rules are those of ORT's runner (``onnxruntime/test/python/onnx_backend_test_series.py``,
``apply_filters`` and ``_strip_device_suffix``): a trailing literal ``_cpu`` / ``_cuda``
is stripped from the regex, which is then ``re.search``-ed in each case name; a pair
applies only when ``re.match(opset_regex, "opset<N>")`` holds for N the installed onnx's
latest opset. The regexes run on RE2 (:mod:`epaudit.matrix.pattern`: linear time, so a
file's regex cannot hang the audit; a backreference or lookaround is a bad regex). A key ``current_failing_tests_<EP>`` skips on that EP (or platform) only;
every other key (``current_failing_tests``, ``unsupported_usages``, ...) on all EPs.

An entry's comment is its own trailing ``//`` comment plus the comment lines directly
above it. Findings (:class:`epaudit.contract.outcomes.FindingKind`): ``dead`` (matches no
generated case), ``overbroad`` (matches more than ``max_matches`` cases) and
``misscoped`` (skips on all EPs while its comment names one EP).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..contract.outcomes import FindingKind
from ..matrix.pattern import PatternError, compile_pattern

#: Default for ``--max-matches``: more matches than this make an entry ``overbroad``.
DEFAULT_MAX_MATCHES = 10
#: Keys that skip on one EP or platform: ``current_failing_tests_<scope>``.
EP_KEY_PREFIX = "current_failing_tests_"
#: EP names recognised in comments (word match, case-insensitive).
EP_WORDS = ("CPU", "CUDA", "TensorRT", "TRT", "WebGPU", "DML", "DirectML", "OpenVINO", "ROCm",
            "MIGraphX", "QNN", "CoreML", "NNAPI", "DNNL", "XNNPACK", "CANN", "JSEP", "WebNN",
            "VitisAI", "ACL", "ArmNN", "NGRAPH")
_EP_RE = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(EP_WORDS) + r")(?![A-Za-z0-9])", re.IGNORECASE)
#: Issue references: a GitHub issue/PR link, ``owner/repo#N``, ``onnx#N`` or ``#N``.
_ISSUE_RE = re.compile(r"https?://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+"
                       r"|(?:[\w.-]+/)?[\w.-]*#\d+")


class FilterFileError(Exception):
    """The filter file cannot be read or parsed; ``str(err)`` is ``FILE:LINE: problem``."""


@dataclass(frozen=True)
class FilterEntry:
    """One skip entry of the filter file, with what it matches.

    Attributes:
        key: the list it is in (``current_failing_tests_CUDA``).
        pattern: the test regex as written.
        opset: the opset regex of an ``[opset_regex, test_regex]`` pair, or ``None``.
        active: the pair's opset regex matches this onnx (plain entries always are).
        scope: ``"all EPs"``, or the EP / platform suffix of the key (``CUDA``).
        comment: its comment text (trailing, plus the lines directly above).
        issues: issue references found in the comment.
        matches: generated case names it skips (``_expanded`` ones included).
        line: 1-based line of the entry in the file.
    """

    key: str
    """List key."""
    pattern: str
    """Test regex."""
    opset: str | None
    """Opset regex of a pair, or None."""
    active: bool
    """Applies to this onnx."""
    scope: str
    """"all EPs" or the key's EP suffix."""
    comment: str
    """Comment text."""
    issues: tuple[str, ...]
    """Issue references in the comment."""
    matches: tuple[str, ...]
    """Matched case names."""
    line: int
    """Line in the file."""

    @property
    def eps_named(self) -> tuple[str, ...]:
        """EP names the comment mentions, as written, de-duplicated."""
        return tuple(dict.fromkeys(m.group(1) for m in _EP_RE.finditer(self.comment)))


@dataclass(frozen=True)
class FilterFinding:
    """A skip entry that breaks a skip-list rule.

    Attributes:
        kind: ``dead``, ``overbroad`` or ``misscoped``.
        entry: the entry.
        message: one line: what is wrong and what to do.
    """

    kind: FindingKind
    """Rule broken."""
    entry: FilterEntry
    """The entry."""
    message: str
    """Explanation."""


@dataclass(frozen=True)
class FilterAudit:
    """The audit of one filter file against the generated cases.

    Attributes:
        path: the file audited.
        ops: operators whose cases were generated.
        onnx_version: the onnx they came from; ``opset`` its latest opset (``opset23``).
        generated: how many cases were generated (``_expanded`` ones included).
        max_matches: the ``overbroad`` bound.
        entries: every entry, in file order.
        findings: the rule breaks, in file order.
    """

    path: str
    """File audited."""
    ops: tuple[str, ...]
    """Operators."""
    onnx_version: str
    """onnx version."""
    opset: str
    """``opset<N>``, what pair entries are matched against."""
    generated: int
    """Cases generated."""
    max_matches: int
    """overbroad bound."""
    entries: tuple[FilterEntry, ...]
    """Entries."""
    findings: tuple[FilterFinding, ...]
    """Findings."""

    @property
    def exit_code(self) -> int:
        """1 when there is a finding, else 0."""
        return 1 if self.findings else 0


# --------------------------------------------------------------------------- JSONC
@dataclass
class _Tok:
    kind: str  # "{", "}", "[", "]", ":", ",", "str", "lit", "comment"
    text: str
    line: int


def _tokens(text: str, name: str) -> list[_Tok]:
    out, i, line, n = [], 0, 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(_Tok("comment", text[i + 2:j].strip(), line))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise FilterFileError(f"{name}:{line}: unterminated /* comment")
            body = text[i + 2:j]
            out.append(_Tok("comment", " ".join(body.split()), line))
            line += body.count("\n")
            i = j + 2
        elif ch in "{}[]:,":
            out.append(_Tok(ch, ch, line))
            i += 1
        elif ch == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                    continue
                if text[j] == "\n":
                    raise FilterFileError(f"{name}:{line}: string not closed on its line")
                buf.append(text[j])
                j += 1
            if j >= n:
                raise FilterFileError(f"{name}:{line}: string not closed")
            import json

            try:
                value = json.loads('"' + "".join(buf) + '"')
            except ValueError as exc:
                raise FilterFileError(f"{name}:{line}: bad string escape ({exc})") from None
            out.append(_Tok("str", value, line))
            i = j + 1
        else:
            m = re.compile(r"[-+0-9.eE]+|true|false|null").match(text, i)
            if not m:
                raise FilterFileError(f"{name}:{line}: unexpected character {ch!r}")
            out.append(_Tok("lit", m.group(0), line))
            i = m.end()
    return out


@dataclass(frozen=True)
class _Literal:
    """A JSON number, ``true``, ``false`` or ``null`` (never a skip entry)."""

    text: str


class _Parser:
    """A JSON-with-comments parser that keeps each list item's line and comment."""

    def __init__(self, toks: list[_Tok], name: str):
        self.toks, self.name, self.pos = toks, name, 0
        self.pending: list[str] = []  # comment lines seen since the last value

    def _skip_comments(self) -> None:
        while self.pos < len(self.toks) and self.toks[self.pos].kind == "comment":
            self.pending.append(self.toks[self.pos].text)
            self.pos += 1

    def peek(self) -> _Tok | None:
        self._skip_comments()
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, kind: str) -> _Tok:
        tok = self.peek()
        if tok is None or tok.kind != kind:
            where = tok.line if tok else (self.toks[-1].line if self.toks else 1)
            got = "end of file" if tok is None else repr(tok.text)
            raise FilterFileError(f"{self.name}:{where}: expected {kind!r}, got {got}")
        self.pos += 1
        return tok

    def trailing_comment(self, line: int) -> str:
        """A comment on ``line`` right after the value (and its comma)."""
        j = self.pos
        if j < len(self.toks) and self.toks[j].kind == "," and self.toks[j].line == line:
            j += 1
        if j < len(self.toks) and self.toks[j].kind == "comment" and self.toks[j].line == line:
            return self.toks[j].text
        return ""

    def value(self):
        tok = self.peek()
        if tok is None:
            raise FilterFileError(f"{self.name}: unexpected end of file")
        if tok.kind == "{":
            return self.obj()
        if tok.kind == "[":
            return self.arr()
        if tok.kind == "str":
            self.pos += 1
            return tok.text
        if tok.kind == "lit":
            self.pos += 1
            return _Literal(tok.text)
        raise FilterFileError(f"{self.name}:{tok.line}: unexpected {tok.text!r}")

    def obj(self) -> dict:
        self.take("{")
        out = {}
        while True:
            tok = self.peek()
            if tok is not None and tok.kind == "}":
                self.pos += 1
                return out
            key = self.take("str")
            self.take(":")
            self.pending = []
            out[key.text] = (key.line, self.value())
            tok = self.peek()
            if tok is not None and tok.kind == ",":
                self.pos += 1

    def arr(self) -> list:
        """A list of ``(value, line, comment)``."""
        self.take("[")
        out = []
        while True:
            tok = self.peek()
            if tok is not None and tok.kind == "]":
                self.pos += 1
                self.pending = []
                return out
            above, self.pending = list(self.pending), []
            line = tok.line if tok else 0
            val = self.value()
            trailing = self.trailing_comment(line)
            out.append((val, line, " ".join(x for x in above + [trailing] if x)))
            tok = self.peek()
            if tok is not None and tok.kind == ",":
                self.pos += 1
                if trailing:  # consumed by peek() into pending: it belongs to this entry
                    self._skip_comments()
                    if self.pending and self.pending[0] == trailing:
                        self.pending.pop(0)


def parse_filters(text: str, name: str = "<filters>") -> list[tuple[str, str, str | None, str, int]]:
    """The skip entries of a filter file: ``(key, test_regex, opset_regex or None, comment, line)``.

    Raises:
        FilterFileError: not JSON-with-comments, not an object at the top, an entry that
            is neither a string nor a ``[opset_regex, test_regex]`` pair, or a bad regex.
    """
    parser = _Parser(_tokens(text, name), name)
    top = parser.peek()
    if top is None or top.kind != "{":
        raise FilterFileError(f"{name}:{top.line if top else 1}: the file must hold one JSON object")
    data = parser.obj()
    rest = parser.peek()
    if rest is not None:
        raise FilterFileError(f"{name}:{rest.line}: text after the top-level object")
    out = []
    for key, (kline, value) in data.items():
        if not isinstance(value, list):
            if key.startswith("current_failing_tests"):  # a skip-list by name: must be one
                raise FilterFileError(f"{name}:{kline}: {key}: must be a list of test regexes")
            continue  # e.g. a tolerance table: not a skip-list
        for item, line, comment in value:
            if isinstance(item, str):
                test, opset = item, None
            elif isinstance(item, list) and len(item) == 2 and all(isinstance(x[0], str) for x in item):
                opset, test = item[0][0], item[1][0]
            else:
                raise FilterFileError(f"{name}:{line}: {key}: an entry must be a regex string or an "
                                      "[opset_regex, test_regex] pair")
            for rx in (test, opset):
                if rx is not None:
                    try:
                        compile_pattern(_strip_device_suffix(rx) if rx is test else rx)
                    except PatternError as exc:
                        raise FilterFileError(f"{name}:{line}: {key}: bad regex {rx!r} ({exc})") from None
            out.append((key, test, opset, comment, line))
    return out


def _strip_device_suffix(pattern: str) -> str:
    """ORT's runner drops a trailing ``_cpu`` / ``_cuda`` before matching (see module docstring)."""
    for suffix in ("_cpu", "_cuda"):
        if pattern.endswith(suffix):
            return pattern[: -len(suffix)]
    return pattern


def audit(path: str, case_names: Sequence[str], *, ops: Sequence[str], onnx_version: str, opset: int,
          max_matches: int = DEFAULT_MAX_MATCHES) -> FilterAudit:
    """Audit the filter file at ``path`` against ``case_names``.

    Args:
        path: the ``.jsonc`` file.
        case_names: every generated case name (``_expanded`` ones included).
        ops, onnx_version: recorded in the result.
        opset: the installed onnx's latest ai.onnx opset (pair entries match ``opset<N>``).
        max_matches: an entry matching more cases than this is ``overbroad``.

    Raises:
        FilterFileError: the file cannot be read or parsed (see :func:`parse_filters`).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FilterFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise FilterFileError(f"{path}: not UTF-8 text ({exc.reason})") from None
    opset_name = f"opset{opset}"
    entries, findings = [], []
    for key, test, opset_rx, comment, line in parse_filters(text, str(path)):
        # RE2, linear time: a file's regex cannot hang the audit (epaudit/matrix/pattern.py).
        active = opset_rx is None or compile_pattern(opset_rx).match(opset_name) is not None
        rx = compile_pattern(_strip_device_suffix(test))
        matches = tuple(n for n in case_names if rx.search(n)) if active else ()
        scope = key[len(EP_KEY_PREFIX):] if key.startswith(EP_KEY_PREFIX) else "all EPs"
        entry = FilterEntry(key, test, opset_rx, active, scope, comment,
                            tuple(dict.fromkeys(_ISSUE_RE.findall(comment))), matches, line)
        entries.append(entry)
        if active and not matches:
            findings.append(FilterFinding(FindingKind.DEAD, entry, f"matches none of the {len(case_names)} "
                                          f"generated {'/'.join(ops)} case(s)"))
        elif len(matches) > max_matches:
            findings.append(FilterFinding(FindingKind.OVERBROAD, entry, f"matches {len(matches)} cases, more "
                                          f"than {max_matches}: {', '.join(matches[:4])}, …"))
        if scope == "all EPs" and entry.eps_named:
            findings.append(FilterFinding(FindingKind.MISSCOPED, entry, f"skips on every EP, but its comment "
                                          f"names {', '.join(entry.eps_named)}: move it to "
                                          f"{EP_KEY_PREFIX}{entry.eps_named[0].upper()}"))
    return FilterAudit(str(path), tuple(ops), onnx_version, opset_name, len(case_names), max_matches,
                       tuple(entries), tuple(findings))
