"""The self-test report: features x faults detection table, misses, verdict (rich; pure)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ..contract.outcomes import Outcome
from ..run.faults import EXPECTED
from ..run.selftest import SelftestResult
from .table import STYLE, _console, esc


def format(result: SelftestResult, *, color: bool = False,  # noqa: A001
           width: int | None = None, **_: Any) -> str:
    """Render the detection table: one row per feature, the clean CPU run, then one column
    per fault with the outcome produced (``✓`` caught as it must be, ``✗`` missed,
    ``n/a`` when the fault does not apply); then every miss and the verdict."""
    from rich.table import Table

    con, buf = _console(color, width)
    con.print(f"[bold]epaudit selftest[/]: {len(result.features)} feature(s) x {len(result.faults)} "
              f"fault(s) on the CPU EP ({esc(str(result.interpreter))})")
    table = Table()
    table.add_column("feature", no_wrap=True)
    table.add_column("clean", no_wrap=True)
    for fault in result.faults:
        table.add_column(f"{fault}\n→ {EXPECTED[fault].value}", no_wrap=True)
    for fid in result.features:
        clean = result.clean[fid]
        row: list[Text | str] = [fid, Text(clean.got.value if clean.got else "—",
                                           style=STYLE.get(clean.got, "") if clean.detected else "bold red")]
        for fault in result.faults:
            d = result.cells[(fid, fault)]
            if clean.got is Outcome.SKIPPED:
                row.append(Text("skip", style="dim"))
                continue
            if not d.applies:
                row.append(Text("n/a", style="dim"))
            elif d.detected:
                row.append(Text(f"✓ {d.got.value}", style="green"))
            else:
                row.append(Text(f"✗ {d.got.value}", style="bold red"))
        table.add_row(*row)
    if width is None:
        # A pipe or a file (a CI log): the table at its natural width, so a long generated
        # id does not squeeze every fault column to "✓ …" (one row, one line).
        from rich.console import Console

        con.width = max(con.width, Console(width=100_000).measure(table).maximum)
    con.print(table)
    for fid in result.features:
        if result.clean[fid].got is Outcome.SKIPPED:
            con.print(f"[dim]skipped[/] {esc(fid)}: {esc(result.clean[fid].summary)}")
    misses = result.misses
    for d in misses:
        what = "clean run" if d.fault == "clean" else f"fault {d.fault}"
        got = d.got.value if d.got else "nothing"
        con.print(f"[bold red]MISS[/] {esc(d.feature_id)} × {what}: expected {d.expected.value}, got {got} "
                  f"— {esc(d.summary)}")
    applied = sum(1 for d in result.cells.values() if d.applies)
    caught = sum(1 for d in result.cells.values() if d.applies and d.detected)
    verdict = "FAIL" if misses else ("NOTHING PROVEN" if not applied else "PASS")
    style = "bold green" if verdict == "PASS" else "bold red"
    con.print(f"[{style}]selftest: {verdict}[/]: {caught} of {applied} applicable "
              f"(feature, fault) pair(s) caught; {len(misses)} miss(es) (exit {result.exit_code})")
    return buf.getvalue()
