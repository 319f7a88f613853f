"""The oracle report: one line per ONNX Attention case, disagreements with their clauses (pure)."""

from __future__ import annotations

from typing import Any, Sequence

from rich.markup import escape as esc
from rich.table import Table
from rich.text import Text

from ..reference.oracle import OracleRow, Verdict, exit_code
from .table import _console

_STYLE = {Verdict.AGREE: "green", Verdict.KNOWN: "yellow", Verdict.NEW: "bold red",
          Verdict.RESOLVED: "bold red", Verdict.ERROR: "bold red"}


def format(rows: Sequence[OracleRow], *, semantics: str = "", color: bool = False,  # noqa: A001
           width: int | None = None, onnx_version: str = "", **_: Any) -> str:
    """Render the cross-check: a feature x role table, every disagreement with the clause
    each side follows, which semantics the gate uses, and the verdict. ``onnx_version``:
    the onnx whose ReferenceEvaluator was checked (its disagreements change with it)."""
    con, buf = _console(color, width)
    con.print("[bold]epaudit oracle[/]: epaudit's float64 reference vs onnx.reference.ReferenceEvaluator"
              + (f" of onnx {esc(onnx_version)}" if onnx_version else "")
              + f" on {len(rows)} ONNX Attention case(s)")
    table = Table()
    for col in ("feature", "role", "verdict"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        table.add_row(r.feature_id, r.role, Text(r.verdict.value, style=_STYLE[r.verdict]))
    con.print(table)
    for r in rows:
        if r.verdict is not Verdict.AGREE:
            con.print(f"[bold]{r.verdict.value}[/] {esc(r.feature_id)} ({r.role}): {esc(r.detail)}")
    if semantics:
        con.print(f"The gate uses epaudit's reference: {esc(semantics)}")
    code = exit_code(rows)
    agree = sum(r.verdict is Verdict.AGREE for r in rows)
    known = sum(r.verdict is Verdict.KNOWN for r in rows)
    gone = sum(r.verdict is Verdict.RESOLVED for r in rows)
    if gone:
        con.print(f"[bold red]{gone} listed disagreement(s) no longer occur[/]"
                  + (f" with onnx {esc(onnx_version)}" if onnx_version else "")
                  + ": remove them from KNOWN in epaudit/reference/oracle.py")
    con.print(f"[{'bold red' if code else 'bold green'}]oracle: {'FAIL' if code else 'PASS'}[/]: "
              f"{agree} agree, {known} listed disagreement(s), {len(rows) - agree - known} other (exit {code})")
    return buf.getvalue()
