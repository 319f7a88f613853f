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


def _case_element(result: RunResult, cell: Cell) -> tuple[ET.Element, str, float]:
    """One cell's ``<testcase>``, the count it adds to, and its seconds."""
    seconds = cell.result.seconds if cell.result is not None else 0.0
    attrs = {"classname": cell.operator, "name": cell.feature_id, "file": result.matrix_path,
             "time": f"{seconds:.3f}"}
    line = next((f.line for f in cell.findings if f.line), None)
    if line:
        attrs["line"] = str(line)
    case = ET.Element("testcase", {k: _x(one_line(v)) for k, v in attrs.items()})
    counted = ""
    if cell.verdict is Verdict.FAILED:
        counted = "failures"
        for f in cell.failing:
            _el(case, "failure", {"type": f"epaudit.{f.kind.value}", "message": f.message},
                _evidence(cell, f))
    elif cell.verdict is Verdict.DECLARED_GAP:
        counted = "skipped"
        outcome = cell.result.outcome.value if cell.result else ""
        _skip(case, "epaudit.declared_gap", f"declared {cell.declared}; {outcome}: "
                                            f"{cell.result.summary if cell.result else ''}")
    elif cell.verdict is Verdict.UNAVAILABLE:
        counted = "skipped"
        info = result.eps[cell.ep]
        _skip(case, "epaudit.unavailable", info.reason or (cell.result.summary if cell.result else "not probed"))
    elif cell.verdict is Verdict.DECLARED_SKIP:
        counted = "skipped"
        _skip(case, "epaudit.declared_skip", f"declared {cell.declared}")
    elif cell.verdict is Verdict.NOT_PASSED:
        # Not a failing finding, and not a pass either: a pass must be earned.
        counted = "skipped"
        _skip(case, f"epaudit.{cell.result.outcome.value.lower()}", f"{cell.result.outcome.value}: "
                                                                     f"{cell.result.summary}")
    warnings = [f for f in cell.findings if not f.failing]
    if warnings:
        _el(case, "system-out", {}, "\n".join(f"warning {f.kind.value}: {one_line(f.message)}" for f in warnings))
    return case, counted, seconds


def _ep_case(result: RunResult, f: Finding) -> tuple[ET.Element, str]:
    name = f"{f.ep} is live" if f.ep else "the run is complete"
    attrs = {"classname": "epaudit.require", "name": name, "file": result.matrix_path}
    if f.line:
        attrs["line"] = str(f.line)
    case = ET.Element("testcase", {k: _x(one_line(v)) for k, v in attrs.items()})
    if f.kind is FindingKind.NOT_AUDITED:  # a gated EP this verdict did not audit: never a pass
        _skip(case, "epaudit.not_audited", f.message)
        return case, "skipped"
    _el(case, "failure", {"type": "epaudit.incomplete", "message": f.message}, one_line(f.message))
    return case, "failures"


def _texts(counts: dict[str, float]) -> dict[str, str]:
    return {k: f"{v:.3f}" if k == "time" else str(int(v)) for k, v in counts.items()}


def _open_tag(tag: str, attrs: dict[str, str]) -> str:
    """``<tag a="…">`` with the attributes one line each (:func:`epaudit.textenc.one_line`)
    and escaped as ElementTree escapes them."""
    el = ET.Element(tag, {k: _x(one_line(v)) for k, v in attrs.items()})
    el.text = "x"
    text = ET.tostring(el, encoding="unicode")
    return text[: text.index(">x<") + 1]


def write(result: RunResult, fh, **_: Any) -> None:
    """Write the run as JUnit XML to the text stream ``fh``, one testcase at a time (the
    same document as :func:`format`): a first pass over the cells counts each suite's
    tests, failures and skips (the suite's attributes come first), a second writes them."""
    all_cells = cells(result)
    by_suite: dict[str, list[int]] = {alias: [] for alias in result.eps}
    extra: dict[str, list[Finding]] = {}
    for i, cell in enumerate(all_cells):
        by_suite[cell.ep].append(i)
    for f in ep_findings(result):
        if f.kind in (FindingKind.INCOMPLETE, FindingKind.NOT_AUDITED):
            suite = f.ep or "run"  # an incomplete run (interrupted, nothing live) has no EP
            by_suite.setdefault(suite, [])
            extra.setdefault(suite, []).append(f)
    counts = {s: {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0} for s in by_suite}
    for suite, members in by_suite.items():
        c = counts[suite]
        for i in members:
            cell = all_cells[i]
            c["tests"] += 1
            c["time"] += cell.result.seconds if cell.result is not None else 0.0
            kind = _counted(cell)
            if kind:
                c[kind] += 1
        for f in extra.get(suite, ()):
            c["tests"] += 1
            c["skipped" if f.kind is FindingKind.NOT_AUDITED else "failures"] += 1
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for c in counts.values():
        for key, value in c.items():
            totals[key] += value
    fh.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    fh.write(_open_tag("testsuites", {"name": "epaudit", **_texts(totals)}))
    for suite, members in by_suite.items():
        info = result.eps.get(suite)
        fh.write("\n  " + _open_tag("testsuite", {"name": suite, **_texts(counts[suite])}))
        if info is not None:
            props = ET.Element("properties")
            for key, value in (("provider", info.name), ("live", "true" if info.live else "false"),
                               ("onnxruntime", info.distribution), ("machine", info.machine),
                               ("semantics", result.semantics), ("catalog_version", str(result.catalog_version))):
                _el(props, "property", {"name": key, "value": value or ""})
            _put(fh, props)
        for i in members:
            _put(fh, _case_element(result, all_cells[i])[0])
        for f in extra.get(suite, ()):
            _put(fh, _ep_case(result, f)[0])
        fh.write("\n  </testsuite>")
    fh.write("\n</testsuites>\n")


def _counted(cell: Cell) -> str:
    return {Verdict.FAILED: "failures", Verdict.DECLARED_GAP: "skipped", Verdict.UNAVAILABLE: "skipped",
            Verdict.DECLARED_SKIP: "skipped", Verdict.NOT_PASSED: "skipped"}.get(cell.verdict, "")


def _put(fh, el: ET.Element) -> None:
    """One element at the testcase depth (two levels in), indented as ``ET.indent`` would."""
    ET.indent(el, space="  ", level=2)
    fh.write("\n    " + ET.tostring(el, encoding="unicode"))


def format(result: RunResult, **_: Any) -> str:  # noqa: A001
    """Serialize the run as JUnit XML (UTF-8 declaration, ends with a newline)."""
    import io

    out = io.StringIO()
    write(result, out)
    return out.getvalue()
