"""Write ``epaudit/run/shard_costs.json`` from a saved run: the median seconds of one probe per operator.

    EPAUDIT_GENERATED=1 epaudit check --ep CPU --format json --output cpu.json
    python tools/shard_costs.py cpu.json [--into epaudit/run/shard_costs.json]

``--shard K/N`` balances shards by these costs (:mod:`epaudit.run.shard`). The table is part
of what a shard is: every job of one CI run must use the same epaudit (a merge refuses shards
whose cost tables differ). Cells that never ran (UNAVAILABLE, SKIPPED) are left out; an
operator the run lacks takes the table's default, the median over every probe.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def table(report: dict, measured: str) -> dict:
    """The cost table of a parsed JSON report (see the module docstring)."""
    sys.path.insert(0, str(ROOT))
    from epaudit.catalog import operator

    per_op: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    for r in report["results"]:
        if r["outcome"] in ("UNAVAILABLE", "SKIPPED") or not r.get("seconds"):
            continue
        ms = float(r["seconds"]) * 1e3
        per_op[operator(r["feature"])].append(ms)
        every.append(ms)
    if not every:
        raise SystemExit("no cell of the report ran: nothing to measure")
    return {"format": 1, "measured": measured, "unit": "ms per probe (subject and control), median",
            "default": round(statistics.median(every), 2),
            "operators": {op: round(statistics.median(v), 2) for op, v in sorted(per_op.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="a saved JSON report (epaudit check/probe --format json)")
    ap.add_argument("--into", default=str(ROOT / "epaudit" / "run" / "shard_costs.json"))
    ap.add_argument("--measured", default="", help="how the report was made (recorded in the table)")
    args = ap.parse_args()
    doc = json.loads(Path(args.report).read_text(encoding="utf-8"))
    out = table(doc, args.measured or f"{Path(args.report).name}: {len(doc['results'])} cells")
    Path(args.into).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{args.into}: {len(out['operators'])} operators, default {out['default']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
