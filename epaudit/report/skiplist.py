"""The report of ``epaudit skips audit``: one row per filter-file entry, then the findings.

Pure formatters (:class:`epaudit.conformance.filters.FilterAudit` in, text out):
:func:`table` for the terminal, :func:`json` for machines.
"""

from __future__ import annotations

import dataclasses
import json as _json
from typing import Any

from rich.table import Table
from rich.text import Text

from ..conformance.filters import FilterAudit
from ..textenc import one_line
from .json import _clean
from .table import _console, esc


def table(audit: FilterAudit, *, color: bool = False, width: int | None = None, **_: Any) -> str:
    """Entries (key, line, pattern, scope, matches, issue refs), findings, verdict."""
    con, buf = _console(color, width)
    con.print(f"[bold]skip-list audit[/] of {esc(str(audit.path))}: {len(audit.entries)} entr(y/ies) against "
              f"{audit.generated} {'/'.join(audit.ops)} case(s) from onnx {audit.onnx_version} ({audit.opset})")
    t = Table()
    for col in ("line", "key", "pattern", "scope", "matches", "issue", "comment"):
        t.add_column(col, overflow="fold")
    for e in audit.entries:
        shown = ", ".join(e.matches[:3]) + (f", … ({len(e.matches)})" if len(e.matches) > 3 else "")
        matches = Text(f"{len(e.matches)}" + (f": {shown}" if e.matches else ""),
                       style="" if e.matches else "bold red")
        if not e.active:
            matches = Text(f"inactive ({e.opset} ≠ {audit.opset})", style="dim")
        pattern = e.pattern if e.opset is None else f"[{e.opset}] {e.pattern}"
        # Text, not str: a key or pattern from the file is never read as rich markup.
        t.add_row(str(e.line), Text(one_line(e.key)), Text(one_line(pattern)), Text(one_line(e.scope)), matches,
                  Text(one_line(", ".join(e.issues))) if e.issues else Text("none", style="yellow"),
                  Text(one_line(e.comment)))
    con.print(t)
    if audit.findings:
        con.print("[bold]Findings[/]")
    for f in audit.findings:
        con.print(f"[bold red]FAIL[/] [bold]{f.kind.value}[/] line {f.entry.line} {esc(f.entry.key)}: "
                  f"{esc(repr(f.entry.pattern))}: {esc(f.message)}")
    con.print()
    verdict = (f"FAIL: {len(audit.findings)} finding(s) ({', '.join(sorted({f.kind.value for f in audit.findings}))})"
               if audit.findings else "PASS")
    con.print(f"[{'bold red' if audit.findings else 'bold green'}]verdict: {verdict}[/] (exit {audit.exit_code})")
    return buf.getvalue()


def json(audit: FilterAudit, **_: Any) -> str:  # noqa: A001 - the format's name
    """The audit as indented strict JSON: entries, findings (kind, line, pattern, message), exit code."""
    data = dataclasses.asdict(audit)
    data["findings"] = [{"kind": f.kind, "line": f.entry.line, "key": f.entry.key, "pattern": f.entry.pattern,
                         "message": f.message} for f in audit.findings]
    data["exit_code"] = audit.exit_code
    return _json.dumps(_clean(data), indent=2, allow_nan=False) + "\n"


#: Format name -> formatter, for ``skips audit --format``.
FORMATS = {"table": table, "json": json}
