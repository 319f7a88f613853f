"""Per-type outcomes of one EP's generated probes, from a saved run (for docs tables).

    python tools/type_outcomes.py RUN.json --ep WebGPU [--silent]

Reads a saved ``epaudit check --format json`` run and prints a Markdown table: one row per
tensor type (the base probes, named by the type their node is typed by, and each type
variant ``<base id>.<type>``, docs/generated-catalog.md "Type variants"), the count of each
outcome in that row, and the silent ones (any outcome that is not PASS, a loud refusal or
SKIPPED) named. ``--silent`` lists those cells instead, one per line (outcome, id, the
report's summary): the findings to triage by hand. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

LOUD = ("REJECTED", "FALLBACK", "DECOMPOSED")
COLUMNS = ("PASS", "FALLBACK", "REJECTED", "DECOMPOSED", "SKIPPED")


def rows(results: list[dict], ep: str) -> dict[str, collections.Counter]:
    """Type (``base`` for base probes) -> outcome counts for ``ep``'s ``onnx.*`` cells."""
    sys.path.insert(0, ".")
    from epaudit.contract.probes import type_variant_of

    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        if r.get("ep") != ep or not str(r.get("feature", "")).startswith("onnx."):
            continue
        t = r["feature"].rpartition(".")[2] if type_variant_of(r["feature"]) else "base"
        out[t][r["outcome"]] += 1
    return out


def table(counts: dict[str, collections.Counter]) -> str:
    """The Markdown table of :func:`rows`."""
    head = "| type | probes | " + " | ".join(COLUMNS) + " | silent |"
    lines = [head, "|---|" + "---:|" * (len(COLUMNS) + 1) + "---|"]
    order = sorted(counts, key=lambda t: (t != "base", -sum(counts[t].values()), t))
    for t in order:
        c = counts[t]
        silent = ", ".join(f"{n} {o}" for o, n in sorted(c.items()) if o not in COLUMNS) or "none"
        lines.append(f"| {t} | {sum(c.values())} | " + " | ".join(f"{c.get(o, 0)}" for o in COLUMNS)
                     + f" | {silent} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--ep", required=True)
    ap.add_argument("--silent", action="store_true", help="list the silent cells instead")
    a = ap.parse_args(argv)
    try:
        with open(a.run, encoding="utf-8") as fh:
            results = json.load(fh)["results"]
    except OSError as exc:
        print(f"type_outcomes: error: {a.run}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError):
        print(f"type_outcomes: error: {a.run}: not an epaudit JSON report", file=sys.stderr)
        return 2
    if a.silent:
        for r in results:
            if r.get("ep") == a.ep and r["feature"].startswith("onnx.") and r["outcome"] not in COLUMNS:
                print(f"{r['outcome']}\t{r['feature']}\t{' '.join(str(r.get('summary', '')).split())[:240]}")
        return 0
    print(table(rows(results, a.ep)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
