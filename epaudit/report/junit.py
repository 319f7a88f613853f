"""The JUnit XML report (``--format junit``): what CI test dashboards read.

One ``<testsuite>`` per EP column, one ``<testcase>`` per feature with
``classname`` = the operator, ``name`` = the feature id and ``file`` = the matrix path
(``line`` = the matrix line of the cell, where known). A cell that earned ``PASS`` is a
plain testcase; every failing finding on it is a ``<failure type="epaudit.<rule>">``
whose text is the evidence; a governed gap that refused loudly is
``<skipped type="epaudit.declared_gap">`` with the issue and reason; an EP that is not
live is ``<skipped type="epaudit.unavailable">`` with ORT's words. A required EP that is
not live is one more failing testcase, ``<EP> is live``, in its suite.

Element order and attributes follow the common JUnit schema (Jenkins'/Ant's
``junit-4.xsd`` as pytest and GitLab read it, plus ``skipped@type``/``message`` and
``testcase@file``/``line``); ``tests/junit.xsd`` is the copy the tests validate against.
Standard library only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ..contract.outcomes import FindingKind
from ..contract.results import Finding, RunResult
from ..textenc import one_line
from .cells import Cell, Verdict, cells, ep_findings, evidence_text

_EVIDENCE_CHARS = 20_000
#: Characters XML 1.0 cannot carry at all (ORT messages may hold control bytes).
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    """Text made XML-safe: characters XML 1.0 forbids become U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _el(parent: ET.Element, tag: str, attrs: dict[str, str], text: str | None = None) -> ET.Element:
    """A child element; attribute values one line each (:func:`epaudit.textenc.one_line`),
    the text as given (callers make each line of it from one-line parts)."""
    el = ET.SubElement(parent, tag, {k: _x(one_line(v)) for k, v in attrs.items()})
    if text is not None:
        el.text = _x(text)
    return el


def _evidence(cell: Cell, finding: Finding) -> str:
    """The failure's text: the finding, the outcome summary and the evidence as JSON."""
    lines = [f"{finding.kind.value}: {one_line(finding.message)}", f"declared: {one_line(finding.declared)}"]
    if cell.result is not None:
        lines.append(f"outcome: {cell.result.outcome.value} — {one_line(cell.result.summary)}")
        if cell.result.control is not None:
            lines.append(f"control model: {cell.result.control.value}")
        evidence = evidence_text(cell, _EVIDENCE_CHARS)
        if evidence:
            lines.append("evidence: " + evidence)
    return "\n".join(lines)


def _skip(case: ET.Element, type_: str, message: str) -> None:
    _el(case, "skipped", {"type": type_, "message": message}, one_line(message))


def format(result: RunResult, **_: Any) -> str:  # noqa: A001
    """Serialize the run as JUnit XML (UTF-8 declaration, ends with a newline)."""
    root = ET.Element("testsuites", {"name": "epaudit"})
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, float]] = {}
    for alias, info in result.eps.items():
        suites[alias] = ET.SubElement(root, "testsuite", {"name": alias})
        counts[alias] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
        props = ET.SubElement(suites[alias], "properties")
        for key, value in (("provider", info.name), ("live", "true" if info.live else "false"),
                           ("onnxruntime", info.distribution), ("machine", info.machine),
                           ("semantics", result.semantics), ("catalog_version", str(result.catalog_version))):
            _el(props, "property", {"name": key, "value": value or ""})
    for cell in cells(result):
        seconds = cell.result.seconds if cell.result is not None else 0.0
        attrs = {"classname": cell.operator, "name": cell.feature_id, "file": result.matrix_path,
                 "time": f"{seconds:.3f}"}
        line = next((f.line for f in cell.findings if f.line), None)
        if line:
            attrs["line"] = str(line)
        case = _el(suites[cell.ep], "testcase", attrs)
        c = counts[cell.ep]
        c["tests"] += 1
        c["time"] += seconds
        if cell.verdict is Verdict.FAILED:
            c["failures"] += 1
            for f in cell.failing:
                _el(case, "failure", {"type": f"epaudit.{f.kind.value}", "message": f.message},
                    _evidence(cell, f))
        elif cell.verdict is Verdict.DECLARED_GAP:
            c["skipped"] += 1
            outcome = cell.result.outcome.value if cell.result else ""
            _skip(case, "epaudit.declared_gap", f"declared {cell.declared}; {outcome}: "
                                                f"{cell.result.summary if cell.result else ''}")
        elif cell.verdict is Verdict.UNAVAILABLE:
            c["skipped"] += 1
            info = result.eps[cell.ep]
            _skip(case, "epaudit.unavailable", info.reason or (cell.result.summary if cell.result else "not probed"))
        elif cell.verdict is Verdict.DECLARED_SKIP:
            c["skipped"] += 1
            _skip(case, "epaudit.declared_skip", f"declared {cell.declared}")
        elif cell.verdict is Verdict.NOT_PASSED:
            # Not a failing finding, and not a pass either: a pass must be earned.
            c["skipped"] += 1
            _skip(case, f"epaudit.{cell.result.outcome.value.lower()}", f"{cell.result.outcome.value}: "
                                                                         f"{cell.result.summary}")
        warnings = [f for f in cell.findings if not f.failing]
        if warnings:
            _el(case, "system-out", {}, "\n".join(f"warning {f.kind.value}: {one_line(f.message)}" for f in warnings))
    for f in ep_findings(result):
        if f.kind not in (FindingKind.INCOMPLETE, FindingKind.NOT_AUDITED):
            continue
        suite = f.ep or "run"  # an incomplete run (interrupted, nothing live) has no EP
        if suite not in suites:
            suites[suite] = ET.SubElement(root, "testsuite", {"name": suite})
            counts[suite] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
        name = f"{f.ep} is live" if f.ep else "the run is complete"
        attrs = {"classname": "epaudit.require", "name": name, "file": result.matrix_path}
        if f.line:
            attrs["line"] = str(f.line)
        case = _el(suites[suite], "testcase", attrs)
        counts[suite]["tests"] += 1
        if f.kind is FindingKind.NOT_AUDITED:  # a gated EP this verdict did not audit: never a pass
            _skip(case, "epaudit.not_audited", f.message)
            counts[suite]["skipped"] += 1
        else:
            _el(case, "failure", {"type": "epaudit.incomplete", "message": f.message}, one_line(f.message))
            counts[suite]["failures"] += 1
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for alias, suite in suites.items():
        for key, value in counts[alias].items():
            suite.set(key, f"{value:.3f}" if key == "time" else str(int(value)))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, f"{value:.3f}" if key == "time" else str(int(value)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
