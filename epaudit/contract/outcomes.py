"""Outcome classes of an observation and kinds of gate finding (docs/outcomes-and-gates.md tables)."""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    """What one probe did on one EP. Only ``PASS`` is a pass; see docs/outcomes-and-gates.md "Outcomes"."""

    PASS = "PASS"
    """The node ran on the EP and every output matched the reference within tolerance."""
    REJECTED = "REJECTED"
    """The EP refused loudly: session creation or run raised (ORT status kept)."""
    FALLBACK = "FALLBACK"
    """The EP did not take the node: ORT placed it (or would place it) on another EP."""
    DECOMPOSED = "DECOMPOSED"
    """ORT inlined the op's function body: primitives ran instead of the op's kernel."""
    IGNORED = "IGNORED"
    """The outputs equal the *control* reference: the input or attribute was ignored."""
    UNWRITTEN = "UNWRITTEN"
    """An output came back never written (missing, or still holding its poison)."""
    NAN = "NAN"
    """Non-finite values where the reference is finite."""
    MISMATCH = "MISMATCH"
    """Wrong numbers of any other kind."""
    CRASH = "CRASH"
    """The worker process died (signal, abort) during the probe."""
    TIMEOUT = "TIMEOUT"
    """The probe exceeded its time limit; the worker was killed."""
    UNAVAILABLE = "UNAVAILABLE"
    """The EP is not usable here (not installed, or it silently handed back a CPU session)."""
    ERROR = "ERROR"
    """The probe itself failed (an epaudit bug); the traceback is kept."""
    SKIPPED = "SKIPPED"
    """Not probed: the matrix declares the cell ``skip``."""

    @property
    def silent(self) -> bool:
        """Outcomes that compute something wrong instead of refusing (gate rule 2)."""
        return self in (Outcome.IGNORED, Outcome.UNWRITTEN, Outcome.NAN, Outcome.MISMATCH)


class FindingKind(str, Enum):
    """Gate rules (docs/outcomes-and-gates.md "Gate rules"), plus the process failures that never pass.

    ``stale``, ``ungoverned`` and ``expired`` also judge ``[[conformance.skip]]`` entries
    (docs/conformance.md); ``dead``, ``overbroad`` and ``misscoped`` are skip-list rules only.
    """

    REGRESSION = "regression"
    """Rule 1: declared supported, outcome anything but PASS."""
    SILENT = "silent"
    """Rule 2: IGNORED, UNWRITTEN, NAN or MISMATCH on any EP, whatever is declared."""
    LAG = "lag"
    """Rule 3: a live reference EP passes and a gated EP does not, without a governed gap."""
    STALE = "stale"
    """Rule 4: declared unsupported but the outcome is PASS (strict xfail)."""
    UNGOVERNED = "ungoverned"
    """Rule 5: an unsupported or skip cell without issue or until."""
    EXPIRED = "expired"
    """Rule 6: an unsupported or skip cell whose until date has passed."""
    UNDECLARED = "undeclared"
    """Rule 7: a probed cell the matrix does not mention (warning unless --strict)."""
    INCOMPLETE = "incomplete"
    """Rule 8: an EP named in require, or a gated EP of the run, is not live; or the run
    was interrupted (exit 3)."""
    NOT_AUDITED = "not-audited"
    """A gated EP that this verdict did not audit although it was allowed to: left out of
    the run (``--ep CPU``), or not live and named in ``[gate] allow_absent`` /
    ``--allow-absent``. Never failing; the verdict line names it."""
    CRASH = "crash"
    """The worker died on this cell, whatever is declared: a gap must refuse, not crash."""
    TIMEOUT = "timeout"
    """The probe hung past its limit, whatever is declared."""
    ERROR = "error"
    """epaudit itself failed on this cell; never a pass."""
    DEAD = "dead"
    """A skip-list entry (``[[conformance.skip]]``, or an ORT filter entry) that matches no
    generated test case: it hides nothing today and would hide a future case unseen."""
    OVERBROAD = "overbroad"
    """A skip-list pattern that matches more cases than it may (``max_matches``, or the
    audit's ``--max-matches``): one entry must not silence a family of cases."""
    MISSCOPED = "misscoped"
    """An ORT filter entry that skips a case on every EP while its comment names one EP."""
    REFUSED = "refused"
    """Claims audit: a kernel is registered for the node and the EP took it (placement),
    then refused it at run time (REJECTED). A warning unless ``--strict`` (docs/surface.md)."""
    UNCLAIMED = "unclaimed"
    """Claims audit: a kernel is registered for the node, but the EP did not take it
    (placed elsewhere, or inlined). A warning unless ``--strict``."""
    UNREGISTERED = "unregistered"
    """Claims audit: the EP took the node although it registers no kernel for its operator,
    opset and type (a kernel the registry does not document). A warning unless ``--strict``."""
