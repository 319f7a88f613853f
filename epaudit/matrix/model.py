"""The declared capability matrix as data: gate, providers, declarations, conformance skips.

What :func:`epaudit.matrix.load.load` returns (docs/matrix.md): frozen dataclasses, the error
every matrix problem raises (:class:`MatrixError`, naming file, key and line), and the rules
for what counts as an owner link (:func:`is_issue_link`, :func:`governance_gap`).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import re
from dataclasses import dataclass, field
from typing import Mapping

from .globs import GlobTable, is_glob

SCHEMA_VERSION = 1

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

STATUSES = ("supported", "unsupported", "skip")

PARITY = ("any", "all")

#: Faults a provider may inject into its own worker (a test hook; see ``epaudit/run/faults.py``).
FAULTS = ("ignore", "refuse", "fallback", "nan", "perturb", "unwritten", "kill", "hang",
          "decompose", "fallback_wrong", "decompose_wrong")

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
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x1c``,
    ``\\u2028``) and no workflow command in it (:func:`epaudit.textenc.one_line`)."""
    from ..textenc import one_line

    return one_line(text)


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
            URL (a tracker's ids, ``^PROJ-[0-9]+$``); ``""`` for URLs only. RE2 syntax
            (:mod:`epaudit.matrix.pattern`).
        require_signed: ``check --results`` refuses results files without a valid
            HMAC-SHA256 signature of the results key (:mod:`epaudit.contract.signing`).
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
    require_signed: bool = False
    """Saved results must carry a valid signature to be gated."""


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
    profile: bool = False
    """Profile every session, so the placement evidence is what ran node by node even where
    the assignment info shows the node under test (a rewrite after assignment: the CPU EP's
    NCHWc transformer); ``False`` profiles only sessions whose assignment info does not show
    it. About 0.5 ms per session on the CPU EP."""


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
    if not pattern:
        return False
    from .pattern import fullmatch  # RE2: linear time, whatever the pattern (issue 24)

    return fullmatch(pattern, issue)


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


@dataclass(frozen=True, slots=True)
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
            or a glob declares, globs resolved per cell (:mod:`epaudit.matrix.globs`), in
            catalog order.
        feature_lines: feature id -> line of its exact table header, else of the most
            specific glob table matching it.
        skips: the ``[[conformance.skip]]`` entries (``epaudit conformance``), in file order.
        globs: the glob tables (``[features."onnx.Resize.*"]``), in file order, each with
            the catalog ids it matches.
        onnx: the top-level ``onnx`` key (the onnx version the ``onnx.*`` keys were
            written against), or ``""`` when absent (:mod:`epaudit.matrix.onnxkey`).
        onnx_installed: the installed onnx's version when ``onnx`` is set (``""`` when
            onnx is not installed or the key is absent).
        onnx_line: line of the ``onnx`` key.
        stale_generated: the ``onnx.*`` keys skipped because ``onnx`` differs from the
            installed version (an exact id the catalog lacks, a glob matching nothing),
            in file order.
        findings: files of saved sweep findings (``[catalog] findings``), as read.
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
    findings: tuple[str, ...] = ()
    """Files of saved sweep findings ``[catalog] findings`` names (their features joined the catalog)."""

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
