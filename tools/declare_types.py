"""Matrix declarations for one EP's loud non-passes among the generated type variants.

    python tools/declare_types.py RUN.json --ep CPU --link URL [--silent]

Reads a saved ``epaudit check --format json`` run and prints ``[features."<glob>"]`` tables
(TOML, for the end of ``capabilities.toml``) declaring, for the EP, every type variant
(``<base id>.<type>``, docs/generated-catalog.md "Type variants") that the EP refused loudly
(``REJECTED``, ``FALLBACK``, ``DECOMPOSED``) while its base probe passed: the base's own
declaration already covers a variant whose base fails too (the matrix's inheritance rule,
docs/matrix-globs-and-large-reports.md). Grouping: an operator and type whose every such
variant refused -> ``onnx.<Op>.*.<type>``; otherwise the exact ids. The reason names the
outcomes counted and the first message ORT gave. ``--silent`` lists the silent non-passes
(``MISMATCH``, ``IGNORED``, ``NAN``, ...) instead: findings, triaged by hand, never declared here.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

LOUD = ("REJECTED", "FALLBACK", "DECOMPOSED")


def _base(fid: str) -> str | None:
    sys.path.insert(0, ".")
    from epaudit.contract.probes import type_variant_of

    return type_variant_of(fid)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--ep", required=True)
    ap.add_argument("--link", required=True)
    ap.add_argument("--until", default="2027-06-30")
    ap.add_argument("--silent", action="store_true")
    a = ap.parse_args(argv)
    doc = json.load(open(a.run, encoding="utf-8"))
    rows = [r for r in doc["results"] if r["ep"] == a.ep]
    outcome = {r["feature"]: r["outcome"] for r in rows}
    dist = doc.get("eps", {}).get(a.ep, {}).get("distribution", "") if isinstance(doc.get("eps"), dict) else ""
    groups: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for r in rows:
        base = _base(r["feature"])
        if base is None or outcome.get(base) != "PASS":
            continue
        op, t = r["feature"].split(".")[1], r["feature"].rsplit(".", 1)[1]
        groups[(op, t)].append(r)
    if a.silent:
        for (op, t), rs in sorted(groups.items()):
            for r in rs:
                if r["outcome"] not in LOUD + ("PASS", "SKIPPED"):
                    print(f"{r['outcome']}\t{r['feature']}\t{r['summary'][:200]}")
        return 0
    for (op, t), rs in sorted(groups.items()):
        loud = [r for r in rs if r["outcome"] in LOUD]
        if not loud:
            continue
        counts = collections.Counter(r["outcome"] for r in loud)
        said = " ".join(loud[0]["summary"].split())[:220].replace('"', "'").replace("\\", "/")
        reason = (f"{a.ep} ({dist or 'onnxruntime'}) in the measured run: {op} in {t}: "
                  + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f"; ORT said: {said}")
        keys = [f"onnx.{op}.*.{t}"] if len(loud) == len(rs) else [r["feature"] for r in loud]
        for key in keys:
            print(f'[features."{key}"]')
            print(f'{a.ep} = {{status = "unsupported", issue = "{a.link}", until = {a.until}, '
                  f'reason = "{reason}"}}')
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
