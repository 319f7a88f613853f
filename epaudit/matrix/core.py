"""Loading and validating the declared capability matrix (``capabilities.toml``).

The format is docs/matrix.md. Every problem is a :class:`MatrixError` that names
the file, the key path and the line, so the CLI can print one line and exit 2. Feature
keys may be globs (``[features."onnx.Resize.*"]``); how a cell is resolved between an
exact key and globs is :mod:`epaudit.matrix_globs` (``docs/matrix-globs-and-large-reports.md``).
"""

from __future__ import annotations

import datetime as _dt
import math
import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from .globs import Glob, GlobError, GlobTable, is_glob, resolve
from .onnxkey import VERSION as _ONNX_VERSION, installed_onnx, plausible as _plausible_onnx
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

SCHEMA_VERSION = 1
#: Larger matrix files are refused before reading (the shipped one is ~60 KiB).
MAX_BYTES = 8 * 1024 * 1024
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STATUSES = ("supported", "unsupported", "skip")
PARITY = ("any", "all")
#: Faults a provider may inject into its own worker (a test hook; see ``faults.py``).
FAULTS = ("ignore", "refuse", "fallback", "nan", "perturb", "unwritten", "kill", "hang")
#: No ``@``: fleet columns are ``ALIAS@LABEL``, and an alias holding one could land two
#: inputs in one column.
_ALIAS = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
#: Plugin EP device filter keys (the worker's ``DEVICE_KEYS``: fields of ``OrtEpDevice``).
DEVICE_KEYS = ("type", "vendor", "vendor_id", "device_id", "ep_vendor")


class MatrixError(Exception):
    """A matrix that cannot be used: names the file, the key path and the line.

    ``str(err)`` is the one-line message the CLI prints (``FILE:LINE: KEY: problem``).
    """

    def __init__(self, path: str, key: str, line: int | None, problem: str):
        self.path, self.key, self.line, self.problem = path, key, line, problem
        where = f"{path}:{line}" if line else path
        # Keys, file names and values may hold newlines (quoted TOML keys can): escape
        # every line break and control character so the message stays one line.
        super().__init__(_one_line(f"{where}: {key}: {problem}" if key else f"{where}: {problem}"))


def _one_line(text: str) -> str:
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x1c``, ``\\u2028``)."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


@dataclass(frozen=True)
class Gate:
    """The ``[gate]`` table.

    Attributes:
        reference: EP aliases that set the bar; only the live ones count.
        gated: EP aliases that must not lag the reference.
        require: EP aliases that must be live, else the run is incomplete (exit 3).
        parity: ``"any"`` (one live reference EP passing sets the bar) or ``"all"``.
        allow_absent: gated EP aliases that may be not live: the run is then not
            incomplete on their account, and the verdict line names them as not audited.
        issue_pattern: a regular expression an ``issue`` may match instead of being a
            URL (a tracker's ids, ``^PROJ-[0-9]+$``); ``""`` for URLs only.
    """

    reference: tuple[str, ...] = ()
    """Reference EP aliases."""
    gated: tuple[str, ...] = ()
    """Gated EP aliases."""
    require: tuple[str, ...] = ()
    """EP aliases that must be live."""
    parity: str = "any"
    """"any" or "all"."""
    allow_absent: tuple[str, ...] = ()
    """Gated EP aliases that may be not live."""
    issue_pattern: str = ""
    """Regex an issue may match instead of being a URL."""


@dataclass(frozen=True)
class Provider:
    """One ``[providers.ALIAS]`` table.

    Attributes:
        alias: the short name used in the matrix and reports (``CUDA``).
        name: the ORT provider name (``CUDAExecutionProvider``).
        options: provider options, as the strings ORT takes.
        python: interpreter for this EP's worker; ``None`` means the current one.
        unavailable: why the EP cannot be used before probing (``$VAR`` unset), or ``""``.
        env: environment variables set for this EP's worker only.
        inject_fault: test hook: a fault from :data:`FAULTS` the worker applies, or ``None``.
        line: line of the table header in the matrix file.
        library: plugin EP library, a path or ``module:function`` resolved inside the
            worker's interpreter (``onnxruntime_qnn:get_library_path``), or ``None`` for an
            EP built into onnxruntime.
        device: plugin EP device filters (keys :data:`DEVICE_KEYS`), e.g. ``{"type": "NPU"}``.
    """

    alias: str
    """Matrix alias."""
    name: str
    """ORT provider name."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Provider options (strings)."""
    python: str | None = None
    """Worker interpreter, or None for the current one."""
    unavailable: str = ""
    """Reason the EP is unusable before probing, or ""."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Worker-only environment variables."""
    inject_fault: str | None = None
    """Test hook: fault to inject, or None."""
    line: int | None = None
    """Line of the provider's table header."""
    library: str | None = None
    """Plugin EP library (path or module:function), or None."""
    device: Mapping[str, str] = field(default_factory=dict)
    """Plugin EP device filters."""
    if_unset: str = "error"
    """What a ``$VAR`` python/library that is not set means: ``"error"`` (a matrix
    error when the EP is about to be probed) or ``"unavailable"`` (the environment lacks
    the EP: it reads ``UNAVAILABLE``)."""
    unset_var: tuple[str, ...] = ()
    """``(key, VAR)`` of a ``$VAR`` value that is not set, or ``()``."""
    python_var: str = ""
    """The ``$VAR`` the interpreter came from, or ``""``."""
    key_lines: Mapping[str, int] = field(default_factory=dict)
    """Key (``name``, ``python``, ``library``) -> its line in the matrix file."""
    start_timeout: float | None = None
    """Seconds the worker may take to start and run the canary (``None``: the default)."""


#: What a governing ``issue`` must look like without a tracker pattern: an http(s) URL
#: with a host and a path (``https://github.com/microsoft/onnxruntime/issues/29506``).
_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?/\S+$")


#: Issue values that name no owner: an ``[gate] issue_pattern`` matching any is refused.
PLACEHOLDER_ISSUES = ("", " ", "TODO", "todo", "Todo", "TBD", "tbd", "FIXME", "fixme", "none", "None",
                      "n/a", "N/A", "na", "-", "?", "x", "X", "issue", "tracker", "later", "unknown")


def is_issue_link(issue: str, pattern: str = "") -> bool:
    """Does ``issue`` name an owner for a gap: a URL, or a match of the matrix's
    ``[gate] issue_pattern``? (``" "`` and ``"TODO"`` do not: issue 12.)"""
    issue = issue.strip()
    if not issue:
        return False
    if _URL.match(issue):
        return True
    return bool(pattern) and re.fullmatch(pattern, issue) is not None


def governance_gap(issue: str, until, pattern: str = "") -> str:
    """What a gap's governance lacks, in words (``""`` when it has an issue link and an
    until date): the ``ungoverned`` finding's message (gate rule 5)."""
    missing = []
    if not issue.strip():
        missing.append("no issue")
    elif not is_issue_link(issue, pattern):
        what = "a URL" + (f" or a match of [gate] issue_pattern {pattern!r}" if pattern else "")
        missing.append(f"issue {issue!r} that is not a link ({what})")
    if until is None:
        missing.append("no until date")
    return " and ".join(missing)


@dataclass(frozen=True)
class Declaration:
    """One cell: what the matrix says about (feature, EP).

    Attributes:
        status: ``"supported"``, ``"unsupported"`` (a declared gap: the EP must refuse
            loudly) or ``"skip"`` (not probed).
        issue: link to the upstream issue governing a gap, or ``""``.
        until: the date the gap is allowed until, or ``None``.
        reason: free text.
        line: line of the cell in the matrix file.
        key: the ``[features.KEY]`` the cell was declared under: the feature id, or the
            glob that applied (not part of equality: one glob cell is one declaration).
    """

    status: str
    """supported / unsupported / skip."""
    issue: str = ""
    """Upstream issue link, or ""."""
    until: _dt.date | None = None
    """Date the gap is allowed until."""
    reason: str = ""
    """Free text."""
    line: int | None = None
    """Line of the cell."""
    issue_pattern: str = ""
    """The matrix's ``[gate] issue_pattern`` (what an issue may be besides a URL)."""
    key: str = field(default="", compare=False)
    """Matrix key declaring the cell (feature id or glob)."""

    @property
    def governed(self) -> bool:
        """A gap with an issue link (:func:`is_issue_link`) and an until date (gate rule 5)."""
        return is_issue_link(self.issue, self.issue_pattern) and self.until is not None

    @property
    def from_glob(self) -> bool:
        """Declared by a glob key rather than the feature's own id."""
        return is_glob(self.key)


@dataclass(frozen=True)
class ConformanceSkip:
    """One ``[[conformance.skip]]`` entry: an accountable, expiring expected failure.

    A skipped conformance case is still run on its EP: a pass is a ``stale`` finding
    (strict xfail), a failure an accounted gap. The entry hides the case on ``ep`` only.

    Attributes:
        ep: the EP alias the skip applies to (exactly one).
        test: an exact ONNX backend node test case name (``test_attention_4d_causal_fp16``)
            or a shell glob (``test_attention_*_bf16``) over case names.
        max_matches: for a glob, the most cases it may match (more is an ``overbroad``
            finding); ``None`` for an exact name (it matches one case).
        issue: link to the upstream issue governing the gap, or ``""``.
        until: the date the skip is allowed until, or ``None``.
        reason: free text.
        line: line of the entry's ``[[conformance.skip]]`` header in the matrix file.
    """

    ep: str
    """EP alias."""
    test: str
    """Exact case name or shell glob."""
    max_matches: int | None = None
    """Most cases a glob may match; None for an exact name."""
    issue: str = ""
    """Upstream issue link, or ""."""
    until: _dt.date | None = None
    """Date the skip is allowed until."""
    reason: str = ""
    """Free text."""
    line: int | None = None
    """Line of the entry."""
    issue_pattern: str = ""
    """The matrix's ``[gate] issue_pattern``."""

    @property
    def is_glob(self) -> bool:
        """``test`` holds a shell wildcard (``*``, ``?`` or ``[``)."""
        return any(ch in self.test for ch in "*?[")

    @property
    def governed(self) -> bool:
        """A skip with an issue link and an until date (gate rule 5)."""
        return is_issue_link(self.issue, self.issue_pattern) and self.until is not None

    def matches(self, case_name: str) -> bool:
        """Does this entry name ``case_name``? (exact, or ``fnmatch`` case-sensitively).

        A glob matches an ``_expanded`` case (the op's function body, another code path
        than the EP's kernel) only when the glob itself contains ``_expanded``.
        """
        if not self.is_glob:
            return case_name == self.test
        if case_name.endswith("_expanded") and "_expanded" not in self.test:
            return False
        return fnmatch.fnmatchcase(case_name, self.test)

    def describe(self) -> str:
        """The entry in words: ``xfail <issue> until <date>`` (what reports print)."""
        bits = ["xfail"]
        if self.issue:
            bits.append(self.issue)
        if self.until:
            bits.append(f"until {self.until.isoformat()}")
        return " ".join(bits)


@dataclass(frozen=True)
class Matrix:
    """A validated capability matrix.

    Attributes:
        path: where it was read from (``<embedded>`` for the packaged default).
        gate: the ``[gate]`` table.
        providers: alias -> provider, in file order.
        features: feature id -> (alias -> declaration) for every feature an exact key
            or a glob declares, globs resolved per cell (:mod:`epaudit.matrix_globs`), in
            catalog order.
        feature_lines: feature id -> line of its exact table header, else of the most
            specific glob table matching it.
        skips: the ``[[conformance.skip]]`` entries (``epaudit conformance``), in file order.
        globs: the glob tables (``[features."onnx.Resize.*"]``), in file order, each with
            the catalog ids it matches.
        onnx: the top-level ``onnx`` key (the onnx version the ``onnx.*`` keys were
            written against), or ``""`` when absent (:mod:`epaudit.matrix_onnx`).
        onnx_installed: the installed onnx's version when ``onnx`` is set (``""`` when
            onnx is not installed or the key is absent).
        onnx_line: line of the ``onnx`` key.
        stale_generated: the ``onnx.*`` keys skipped because ``onnx`` differs from the
            installed version (an exact id the catalog lacks, a glob matching nothing),
            in file order.
    """

    path: str
    """Source path."""
    gate: Gate
    """Gate settings."""
    providers: Mapping[str, Provider]
    """Alias -> provider, in file order."""
    features: Mapping[str, Mapping[str, Declaration]]
    """Feature id -> alias -> declaration."""
    feature_lines: Mapping[str, int] = field(default_factory=dict)
    """Feature id -> line of its table."""
    skips: tuple[ConformanceSkip, ...] = ()
    """``[[conformance.skip]]`` entries, in file order."""
    globs: tuple[GlobTable, ...] = ()
    """Glob tables, in file order."""
    onnx: str = ""
    """onnx version the ``onnx.*`` keys were written against, or ""."""
    onnx_installed: str = ""
    """Installed onnx version when ``onnx`` is set, else ""."""
    onnx_line: int | None = None
    """Line of the ``onnx`` key."""
    stale_generated: tuple[str, ...] = ()
    """``onnx.*`` keys skipped for another onnx's corpus, in file order."""

    def declaration(self, feature_id: str, alias: str) -> Declaration | None:
        """The cell for (feature, EP) after resolution (an exact key, else the most
        specific glob declaring the EP), or ``None`` when undeclared."""
        return self.features.get(feature_id, {}).get(alias)

    def line_of(self, feature_id: str, alias: str | None = None) -> int | None:
        """Line of the cell that applied (an exact key's or a glob's), or of the feature's
        table (exact, else the most specific matching glob) when the cell is undeclared."""
        decl = self.declaration(feature_id, alias) if alias else None
        if decl is not None and decl.line:
            return decl.line
        return self.feature_lines.get(feature_id)


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


# --------------------------------------------------------------------------- loading
def default_text() -> str:
    """The embedded default ``capabilities.toml`` (the repository's root copy, packaged)."""
    packaged = Path(__file__).resolve().parent.parent / "capabilities.toml"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Running from a source checkout: the wheel build copies the root file into the package.
    return (Path(__file__).resolve().parents[2] / "capabilities.toml").read_text(encoding="utf-8")


def load(path: str | os.PathLike | None = None, *, feature_ids: Iterable[str] | None = None,
         environ: Mapping[str, str] | None = None) -> Matrix:
    """Read and validate a matrix.

    Args:
        path: the TOML file; ``None`` loads the embedded default.
        feature_ids: the catalog's ids (unknown feature keys are errors); defaults to
            the whole catalog.
        environ: where ``$VAR`` in ``python`` is resolved (default ``os.environ``).

    Raises:
        MatrixError: unreadable file, TOML syntax, unknown keys, feature ids or EP
            aliases, wrong types, bad dates.
    """
    if path is None:
        name, text = "<embedded capabilities.toml>", default_text()
    else:
        name = str(path)
        try:
            p = Path(path)
            if not p.is_file():
                raise MatrixError(name, "", None, "not a regular file" if p.exists() else "cannot read: No such file or directory")
            if p.stat().st_size > MAX_BYTES:
                raise MatrixError(name, "", None, f"{p.stat().st_size} bytes: over the {MAX_BYTES // (1024 * 1024)} MiB "
                                                  "a matrix may be")
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise MatrixError(name, "", None, f"cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise MatrixError(name, "", None, f"not UTF-8 text ({exc.reason})") from None
    return parse(text, name, feature_ids=feature_ids, environ=environ)


def parse(text: str, name: str = "<matrix>", *, feature_ids: Iterable[str] | None = None,
          environ: Mapping[str, str] | None = None) -> Matrix:
    """Validate matrix text; see :func:`load`."""
    if feature_ids is None:
        from ..catalog import BY_ID

        feature_ids = BY_ID.keys()
    known_features = list(feature_ids)
    environ = os.environ if environ is None else environ
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        raise MatrixError(name, "", line, f"TOML syntax: {re.sub(r' [(]at line.*', '', msg)}") from None
    except RecursionError:  # tomllib recurses per nesting level: [[[[…]]]] exhausts the stack
        raise MatrixError(name, "", None, "TOML syntax: arrays or tables nested too deeply") from None
    v = _Validator(name, _Lines(text))
    return v.matrix(data, known_features, environ)


class _Validator:
    def __init__(self, name: str, lines: _Lines):
        self.name, self.lines = name, lines
        self.issue_pattern = ""
        #: onnx.* keys of another onnx's corpus may match nothing (matrix_onnx).
        self.onnx_lenient = False
        self.stale_generated: tuple[str, ...] = ()

    def fail(self, path: tuple[str, ...], problem: str) -> MatrixError:
        return MatrixError(self.name, _dotted(path), self.lines.find(path), problem)

    def table(self, value, path, allowed: Iterable[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a table, got {_tname(value)}")
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                hint = _hint(key, allowed)
                raise self.fail(path + (key,), f"unknown key{hint}; allowed: {', '.join(allowed)}")
        return value

    def string(self, value, path) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {_tname(value)}")
        return value

    def aliases(self, value, path, providers) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise self.fail(path, f"must be a list of EP aliases, got {_tname(value)}")
        for alias in value:
            if alias not in providers:
                raise self.fail(path, f"unknown EP alias{_hint(alias, providers)}; "
                                      f"declared providers: {', '.join(providers) or 'none'}")
        return tuple(value)

    def matrix(self, data: dict, known_features: list[str], environ) -> Matrix:
        self.table(data, (), ("schema_version", "onnx", "gate", "providers", "features", "conformance"))
        if "schema_version" not in data:
            raise self.fail(("schema_version",), f"missing; this epaudit reads schema_version = {SCHEMA_VERSION}")
        sv = data["schema_version"]
        if type(sv) is not int or sv != SCHEMA_VERSION:
            raise self.fail(("schema_version",), f"must be {SCHEMA_VERSION}, got {sv!r}")
        onnx, installed = "", ""
        if "onnx" in data:
            onnx = self.string(data["onnx"], ("onnx",))
            if not _ONNX_VERSION.match(onnx):
                raise self.fail(("onnx",), "must be the onnx version the onnx.* keys were written against, "
                                           f"like \"1.23.2\", got {onnx!r}")
            installed = installed_onnx() or ""
            self.onnx_lenient = onnx != installed
        providers = self.providers(data.get("providers", {}), environ)
        gate = self.gate(data.get("gate", {}), providers)
        features, feature_lines, globs = self.features(data.get("features", {}), known_features, providers)
        skips = self.conformance(data.get("conformance", {}), providers)
        return Matrix(self.name, gate, providers, features, feature_lines, skips, globs, onnx, installed,
                      self.lines.find(("onnx",)) if onnx else None, self.stale_generated)

    def conformance(self, raw, providers) -> tuple[ConformanceSkip, ...]:
        """``[conformance]`` with its ``[[conformance.skip]]`` entries (docs/conformance.md)."""
        path = ("conformance",)
        self.table(raw, path, ("skip",))
        entries = raw.get("skip", [])
        if not isinstance(entries, list):
            raise self.fail(path + ("skip",), f"must be an array of tables ([[conformance.skip]]), got {_tname(entries)}")
        out = []
        for i, entry in enumerate(entries):
            epath = path + ("skip", str(i))
            self.table(entry, epath, ("ep", "test", "max_matches", "issue", "until", "reason"))
            for key in ("ep", "test"):
                if key not in entry:
                    raise self.fail(epath, f"missing key {key!r}")
            ep = self.string(entry["ep"], epath + ("ep",))
            if ep not in providers:
                raise self.fail(epath + ("ep",), f"unknown EP alias{_hint(ep, providers)}; "
                                                 f"declared providers: {', '.join(providers) or 'none'}")
            test = self.string(entry["test"], epath + ("test",))
            if not test.strip():
                raise self.fail(epath + ("test",), "must name a test case or a glob")
            max_matches = entry.get("max_matches")
            if max_matches is not None and (type(max_matches) is not int or max_matches < 1):
                raise self.fail(epath + ("max_matches",), f"must be a positive integer, got {max_matches!r}")
            skip = ConformanceSkip(ep, test, max_matches, self.string(entry.get("issue", ""), epath + ("issue",)),
                                   None, self.string(entry.get("reason", ""), epath + ("reason",)),
                                   self.lines.find(epath))
            if skip.is_glob and max_matches is None:
                raise self.fail(epath + ("test",), f"glob {test!r} needs max_matches (the most cases it may match)")
            if not skip.is_glob and max_matches is not None:
                raise self.fail(epath + ("max_matches",), f"only a glob takes max_matches; {test!r} is an exact name")
            until = self.date(entry.get("until"), epath + ("until",))
            out.append(ConformanceSkip(skip.ep, skip.test, skip.max_matches, skip.issue, until, skip.reason, skip.line,
                                       self.issue_pattern))
        return tuple(out)

    def gate(self, raw, providers) -> Gate:
        path = ("gate",)
        self.table(raw, path, ("reference", "gated", "require", "parity", "allow_absent", "issue_pattern"))
        parity = raw.get("parity", "any")
        if parity not in PARITY:
            raise self.fail(path + ("parity",), f"must be one of {', '.join(map(repr, PARITY))}, got {parity!r}")
        pattern = self.string(raw.get("issue_pattern", ""), path + ("issue_pattern",))
        if pattern:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise self.fail(path + ("issue_pattern",), f"not a regular expression: {exc}") from None
            hit = next((p for p in PLACEHOLDER_ISSUES if compiled.fullmatch(p)), None)
            if hit is not None:
                raise self.fail(path + ("issue_pattern",), f"{pattern!r} matches the placeholder issue {hit!r}: "
                                                           "it must name a tracker's ids, e.g. '^PROJ-[0-9]+$'")
        self.issue_pattern = pattern
        gated = self.aliases(raw.get("gated", []), path + ("gated",), providers)
        allow_absent = self.aliases(raw.get("allow_absent", []), path + ("allow_absent",), providers)
        for alias in allow_absent:
            if alias not in gated:
                raise self.fail(path + ("allow_absent",), f"{alias!r} is not gated: only a gated EP can be "
                                                          "allowed to be absent (others never make a run incomplete)")
        return Gate(
            reference=self.aliases(raw.get("reference", []), path + ("reference",), providers),
            gated=gated,
            require=self.aliases(raw.get("require", []), path + ("require",), providers),
            parity=parity,
            allow_absent=allow_absent,
            issue_pattern=pattern,
        )

    def providers(self, raw, environ) -> dict[str, Provider]:
        self.table(raw, ("providers",), raw.keys() if isinstance(raw, dict) else ())
        out = {}
        for alias, body in raw.items():
            path = ("providers", alias)
            if not _ALIAS.match(alias):
                raise self.fail(path, "EP alias must start with a letter and use letters, digits, _ . - "
                                      "('@' is reserved for fleet columns ALIAS@LABEL)")
            self.table(body, path, ("name", "options", "python", "env", "inject_fault", "library",
                                    "device", "if_unset", "start_timeout"))
            if "name" not in body:
                raise self.fail(path, "missing key 'name' (the ORT provider name, e.g. CUDAExecutionProvider)")
            pname = self.string(body["name"], path + ("name",))
            from .preflight import IF_UNSET, name_problem

            why = name_problem(pname, plugin="library" in body)
            if why:
                raise self.fail(path + ("name",), why)
            if_unset = body.get("if_unset", "error")
            if if_unset not in IF_UNSET:
                raise self.fail(path + ("if_unset",), f"must be one of {', '.join(map(repr, IF_UNSET))}, "
                                                      f"got {if_unset!r}")
            start_timeout = body.get("start_timeout")
            if start_timeout is not None and (isinstance(start_timeout, bool)
                                              or not isinstance(start_timeout, (int, float))
                                              or not 1 <= start_timeout <= 3600):
                raise self.fail(path + ("start_timeout",), f"must be a number of seconds from 1 to 3600, "
                                                           f"got {start_timeout!r}")
            options = body.get("options", {})
            if not isinstance(options, dict):
                raise self.fail(path + ("options",), f"must be a table, got {_tname(options)}")
            opts = {}
            for k, val in options.items():
                if isinstance(val, bool):
                    opts[k] = "1" if val else "0"
                elif isinstance(val, float) and not math.isfinite(val):
                    raise self.fail(path + ("options", k), f"must be a finite number, got {val!r}")
                elif isinstance(val, (str, int, float)):
                    if "\0" in str(val):
                        raise self.fail(path + ("options", k), "must not contain a NUL character")
                    opts[k] = str(val)
                else:
                    raise self.fail(path + ("options", k), f"must be a string, number or boolean, got {_tname(val)}")
            env = body.get("env", {})
            if not isinstance(env, dict):
                raise self.fail(path + ("env",), f"must be a table, got {_tname(env)}")
            for k, val in env.items():
                self.string(val, path + ("env", k))
                if not _ENV_NAME.fullmatch(k):
                    raise self.fail(path + ("env", k), "not an environment variable name "
                                                       "(letters, digits and _, not starting with a digit)")
                if "\0" in val:
                    raise self.fail(path + ("env", k), "must not contain a NUL character")
            python, unavailable, unset, python_var = None, "", (), ""
            if "python" in body:
                python, unavailable = self.expand(body["python"], path + ("python",), environ)
                if isinstance(body["python"], str) and body["python"].startswith("$"):
                    python_var = body["python"][1:]
                    if python is None:
                        unset = ("python", python_var)
            library = None
            if "library" in body:
                library, missing = self.expand(body["library"], path + ("library",), environ)
                if missing and not unset:
                    unset = ("library", body["library"][1:])
                unavailable = unavailable or missing
            if unset and if_unset == "unavailable":
                unavailable += " (the matrix marks it optional: if_unset = \"unavailable\")"
            device = body.get("device", {})
            self.table(device, path + ("device",), DEVICE_KEYS)
            device = {k: str(self.scalar(v, path + ("device", k))) for k, v in device.items()}
            if device and "library" not in body:
                raise self.fail(path + ("device",), "device filters select a plugin EP's devices; "
                                                    "name its library too (library = \"module:function\" or a path)")
            fault = body.get("inject_fault")
            if fault is not None and fault not in FAULTS:
                raise self.fail(path + ("inject_fault",), f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
            key_lines = {k: line for k in ("name", "python", "library")
                         if k in body and (line := self.lines.find(path + (k,))) is not None}
            out[alias] = Provider(alias, pname, opts, python, unavailable, dict(env), fault,
                                  self.lines.find(path), library, device, if_unset, unset, python_var,
                                  key_lines, None if start_timeout is None else float(start_timeout))
        return out

    def expand(self, value, path, environ) -> tuple[str | None, str]:
        """A string that may be ``$VAR``: ``(value, "")``, or ``(None, why)`` when VAR is unset."""
        value = self.string(value, path)
        if value.startswith("$"):
            var = value[1:]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise self.fail(path, f"{value!r} is not a valid $VARIABLE")
            if not environ.get(var):
                return None, f"${var} is not set ({path[-1]} = \"${var}\" in the matrix)"
            return environ[var], ""
        if not value:
            raise self.fail(path, "must not be empty")
        if "\0" in value:
            raise self.fail(path, "must not contain a NUL character")
        return value, ""

    def scalar(self, value, path):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.fail(path, f"must be a string or an integer, got {_tname(value)}")
        return value

    def features(self, raw, known: list[str], providers):
        """``[features.KEY]`` tables, exact ids and globs, resolved per cell."""
        self.table(raw, ("features",), raw.keys() if isinstance(raw, dict) else ())
        known_set = set(known)
        out, lines, globs = {}, {}, []
        # A catalog without the generated source (EPAUDIT_GENERATED=0, or it could not be
        # had) does not check the matrix's onnx.* keys: they are not an error then.
        generated = any(k.startswith("onnx.") for k in known)
        # With `onnx = "<version>"` other than the installed onnx, an onnx.* key of that
        # version's corpus the catalog lacks is skipped and recorded, not an error.
        lenient = generated and self.onnx_lenient
        onnx_known = [k for k in known if k.startswith("onnx.")] if lenient else []
        stale = []
        for fid, cells in raw.items():
            path = ("features", fid)
            if fid.startswith("onnx.") and not generated:
                continue
            glob = fid not in known_set and is_glob(fid)
            may_be_stale = lenient and _plausible_onnx(fid)
            if not glob and fid not in known_set and not may_be_stale:
                raise self.fail(path, f"unknown feature id{_hint(fid, known)} (see `epaudit features`)")
            if not isinstance(cells, dict):
                raise self.fail(path, f"must be a table of EP cells, got {_tname(cells)}")
            decls = {}
            for alias, cell in cells.items():
                cpath = path + (alias,)
                if alias not in providers:
                    raise self.fail(cpath, f"unknown EP alias{_hint(alias, providers)}; "
                                           f"declared providers: {', '.join(providers) or 'none'}")
                decls[alias] = self.cell(cell, cpath, fid)
            if glob:
                table = GlobTable(Glob.compile(fid), self.lines.find(path), decls)
                if may_be_stale and not any(table.glob.matches(k) for k in onnx_known):
                    stale.append(fid)
                else:
                    globs.append(table)
            elif fid not in known_set:
                stale.append(fid)  # cells validated above: a typo in them is still an error
            else:
                out[fid] = decls
                lines[fid] = self.lines.find(path)
        self.stale_generated = tuple(stale)
        try:
            return resolve(out, lines, globs, known)
        except GlobError as exc:
            raise self.fail(("features", exc.key), exc.problem) from None

    def cell(self, cell, path, key: str = "") -> Declaration:
        line = self.lines.find(path)
        if isinstance(cell, str):
            if cell != "supported":
                raise self.fail(path, f"a plain cell must be \"supported\"; got {cell!r} "
                                      "(gaps are tables: { status = \"unsupported\", issue = \"…\", until = 2027-03-31 })")
            return Declaration("supported", line=line, key=key)
        self.table(cell, path, ("status", "issue", "until", "reason"))
        status = cell.get("status")
        if status not in STATUSES:
            raise self.fail(path + ("status",), f"must be one of {', '.join(map(repr, STATUSES))}, got {status!r}")
        issue = self.string(cell.get("issue", ""), path + ("issue",))
        reason = self.string(cell.get("reason", ""), path + ("reason",))
        until = self.date(cell.get("until"), path + ("until",))
        return Declaration(status, issue, until, reason, line, self.issue_pattern, key)

    def date(self, value, path) -> _dt.date | None:
        """An ``until`` value: a TOML date (not a date-time), or absent."""
        if value is not None and (isinstance(value, _dt.datetime) or not isinstance(value, _dt.date)):
            raise self.fail(path, f"must be a TOML date like 2027-03-31, got {_tname(value)} {value!r}")
        return value


def _tname(value) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a float"}.get(type(value), type(value).__name__)


def _hint(word: str, choices: Iterable[str]) -> str:
    import difflib  # only for a typo's hint

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" {word!r}, did you mean {close[0]!r}?" if close else f" {word!r}"
