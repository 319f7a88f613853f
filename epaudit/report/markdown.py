"""The Markdown report (``--format markdown``): a job summary people read in a PR.

Verdict first, then a features × EPs table with one symbol per outcome (legend below
it), the EPs and machines, and each finding in its own ``<details>`` block with its
evidence. The whole text stays under :data:`MAX_BYTES` (1 MiB, GitHub's limit for one
step's summary, ``GITHUB_STEP_SUMMARY``): findings that would not fit are left out with
a note saying how many, and table rows likewise if even the table is too large; each
note says where the full report is (the run's JSON or JUnit file when the CLI writes
one). A run of more than :data:`~epaudit.report.summary.FULL_TABLE_MAX` features starts
with outcome counts per operator and EP and the rows that are not a pass; its full
table follows, folded in a ``<details>`` block.
"""

from __future__ import annotations

import html
import re
from typing import Any

from ..contract.outcomes import Outcome
from ..contract.results import Finding, RunResult
from ..surface.coverage import summary
from ..textenc import one_line
from .cells import Cell, Verdict, cells, evidence_text
from .summary import by_operator, large, notable

#: GitHub refuses step summaries over 1 MiB ("$GITHUB_STEP_SUMMARY upload aborted").
MAX_BYTES = 1024 * 1024
_EVIDENCE_CHARS = 8_000
_NOTE_RESERVE = 400

SYMBOL = {
    Outcome.PASS: "✅", Outcome.REJECTED: "⛔", Outcome.FALLBACK: "↪️", Outcome.DECOMPOSED: "🧩",
    Outcome.IGNORED: "🙈", Outcome.UNWRITTEN: "🕳️", Outcome.NAN: "🟥", Outcome.MISMATCH: "≠",
    Outcome.CRASH: "💥", Outcome.TIMEOUT: "⏱️", Outcome.UNAVAILABLE: "➖", Outcome.ERROR: "⚠️",
    Outcome.SKIPPED: "⏭️",
}
_VERDICT = {0: "✅", 1: "❌", 3: "⚠️"}


def _cell_text(cell: Cell) -> str:
    if cell.result is None:
        return "·"
    text = f"{SYMBOL[cell.result.outcome]} {cell.result.outcome.value}"
    if cell.verdict is Verdict.FAILED:
        return f"**{text} ({', '.join(dict.fromkeys(f.kind.value for f in cell.failing))})**"
    if cell.verdict is Verdict.DECLARED_GAP:
        return f"{text} (gap)"
    return text


def _esc(text: str) -> str:
    """Text safe inside a table cell or a heading: no pipes, no newlines, no raw HTML, no
    control character or workflow command (:func:`epaudit.textenc.one_line`)."""
    return html.escape(one_line(str(text).replace("\n", " ")), quote=False).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code: entities do not render inside backticks, so no HTML escaping; a
    backtick inside would end the span, so it becomes a quote."""
    return "`" + one_line(str(text).replace("`", "'").replace("\n", " ")) + "`"


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _details(f: Finding, cell: Cell | None) -> str:
    tag = "FAIL" if f.failing else "warn"
    where = f"{f.feature_id} on {f.ep}" if f.feature_id else f.ep
    line = f" (matrix line {f.line})" if f.line else ""
    body = [f"**{tag} {f.kind.value}** — {_esc(f.message)}", "", f"declared: {_code(f.declared)}"]
    if cell is not None and cell.result is not None:
        body += ["", f"outcome: {SYMBOL[cell.result.outcome]} {cell.result.outcome.value} — "
                     f"{_esc(cell.result.summary)}"]
        evidence = evidence_text(cell, _EVIDENCE_CHARS)
        if evidence:
            body += ["", _fence(evidence, "json")]
    return (f"<details><summary>{tag} <b>{f.kind.value}</b> {_esc(where)}{line}</summary>\n\n"
            + "\n".join(body) + "\n\n</details>\n")


def _where(full_report: str | None) -> str:
    """Where a reader finds what a cut left out."""
    if full_report:
        return f"the full report is {_code(full_report)}"
    return "the JSON and JUnit reports (`--report json:FILE`) have all of it"


def _summary(result: RunResult) -> list[str]:
    """Outcome counts per operator and EP as a Markdown table."""
    out = ["| operator | features | " + " | ".join(_esc(a) for a in result.eps) + " | findings |",
           "|---|---:|" + "---|" * len(result.eps) + "---|"]
    for r in by_operator(result):
        counts = [" ".join(f"{SYMBOL[o]} {n}" for o, n in r.counts[a].items()) or "·" for a in result.eps]
        found = ", ".join(([f"**{r.failing} failing**"] if r.failing else [])
                          + ([f"{r.warnings} warning"] if r.warnings else [])) or "—"
        out.append(f"| {_code(r.operator)} | {r.features} | " + " | ".join(counts) + f" | {found} |")
    return out


def format(result: RunResult, *, limit: int = MAX_BYTES, full_report: str | None = None,  # noqa: A001
           **_: Any) -> str:
    """Render the run as GitHub-flavoured Markdown of at most ``limit`` UTF-8 bytes.

    Args:
        result: the run.
        limit: the size bound in bytes (default :data:`MAX_BYTES`).
        full_report: the path of the run's JSON or JUnit report, named by the notes on
            what a cut left out; ``None`` names the ``--report`` option instead.
    """
    all_cells = cells(result)
    by_key = {(c.feature_id, c.ep): c for c in all_cells}
    head = []
    if result.gate is not None:
        head.append(f"## {_VERDICT[result.gate.exit_code]} epaudit: {_esc(result.gate.verdict)} "
                    f"(exit {result.gate.exit_code})")
    else:
        head.append("## epaudit: probe results (no gate applied)")
    head.append("")
    head.append(f"{len(result.features)} feature(s) × {len(result.eps)} EP column(s); matrix "
                f"{_code(result.matrix_path)}; catalog {result.catalog_version}; "
                f"semantics {_code(result.semantics.split(':')[0])}")
    if result.incomplete:
        head += ["", "**Run interrupted: results are incomplete.**"]
    table_head = ["| feature | " + " | ".join(_esc(a) for a in result.eps) + " |",
                  "|---|" + "---|" * len(result.eps)]

    def row(fid: str) -> str:
        return "| " + _code(fid) + " | " + " | ".join(_cell_text(by_key[(fid, a)]) for a in result.eps) + " |"

    rows = [row(fid) for fid in result.features]
    close: list[str] = []
    if large(result):
        shown = notable(result)
        head += ["", f"### Summary: {len(result.features)} features by operator (cells per outcome)", ""]
        head += _summary(result)
        head += ["", f"### Not a pass, or a failing finding: {len(shown)} of {len(result.features)} feature rows", ""]
        head += table_head + [row(fid) for fid in shown] if shown else ["None."]
        head += ["", f"<details><summary>All {len(result.features)} feature rows</summary>", ""] + table_head
        close = ["", "</details>"]
    else:
        head += [""] + table_head
    tail = close + ["", "Legend: " + ", ".join(f"{s} {o.value}" for o, s in SYMBOL.items())
            + "; **bold** = failing finding (rule in brackets); (gap) = a declared, governed gap that refused.", ""]
    for alias, info in result.eps.items():
        where = f"{info.distribution or 'onnxruntime ?'}" + (f" on {info.machine}" if info.machine else "")
        tail.append(f"* **{_esc(alias)}**: " + (f"live ({_esc(info.name)}; {_esc(where)})" if info.live
                                                  else f"not live — {_esc(info.reason[:300])}"))
    for label, facts in result.machines.items():
        gpus = ", ".join(f"{g.get('name', '?')} (sm {g.get('compute_capability', '?')}, driver "
                         f"{g.get('driver', '?')})" for g in facts.get("gpus", [])) or "no NVIDIA GPU"
        tail.append(f"* machine {_code(label)}: {_esc(str(facts.get('hostname', '')))}; {_esc(gpus)}"
                    + (f"; CUDA driver {_esc(str(facts['cuda_driver']))}" if facts.get("cuda_driver") else ""))
    tail += [f"* coverage {_esc(summary(alias, cov)[:600])}" for alias, cov in result.coverage.items()]
    tail.append("")

    budget = limit - _NOTE_RESERVE
    size = lambda parts: len("\n".join(parts).encode("utf-8")) + 1  # noqa: E731
    used = size(head + tail)
    kept_rows = []
    for text in rows:  # one size per row: a thousand rows must not cost a join each
        n = len(text.encode("utf-8")) + 1
        if used + n > budget:
            break
        kept_rows.append(text)
        used += n
    out = head + kept_rows
    if len(kept_rows) < len(rows):
        out.append(f"| … {len(rows) - len(kept_rows)} more feature row(s) left out to stay under "
                   f"{limit} bytes (GitHub's step-summary limit); {_where(full_report)} |" + " |" * len(result.eps))
    out += tail
    findings = list(result.gate.findings) if result.gate else []
    if findings:
        out += [f"### Findings ({sum(f.failing for f in findings)} failing, "
                f"{sum(not f.failing for f in findings)} warning)", ""]
    used = size(out)
    left = 0
    for i, f in enumerate(findings):
        block = _details(f, by_key.get((f.feature_id, f.ep)))
        n = len(block.encode("utf-8")) + 1
        if used + n > budget:
            left = len(findings) - i
            break
        out.append(block)
        used += n
    if left:
        out.append(f"_… {left} more finding(s) left out to stay under {limit} bytes (GitHub's step-summary "
                   f"limit); {_where(full_report)}._")
    text = "\n".join(out) + "\n"
    data = text.encode("utf-8")
    if len(data) > limit:  # only when even the head is too large: cut it, say so
        note = f"\n\n_… cut at {limit} bytes (GitHub's step-summary limit); {_where(full_report)}._\n".encode("utf-8")
        text = data[:max(0, limit - len(note))].decode("utf-8", "ignore") + note.decode("utf-8")
    return text
