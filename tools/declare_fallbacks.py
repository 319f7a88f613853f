"""Matrix declarations for a saved run's cells that fell back to the CPU EP and computed wrongly.

    python tools/declare_fallbacks.py RUN.json --ep WebGPU --link URL --why TEXT [--into capabilities.toml]

Since numbers are checked whatever the placement (docs/outcomes-and-gates.md), a node an EP
does not take runs on the CPU EP bundled with that EP's onnxruntime, and a CPU kernel's own
deviation shows in the EP's column as ``MISMATCH``/``NAN``/``IGNORED``/``UNWRITTEN`` with
placement ``fallback``. Such a cell is a real finding about what users of that EP get, and it
is the CPU kernel's: this tool declares each one ``skip`` with the CPU's own declared reason
and link where the shipped matrix declares the CPU cell ``skip`` (the same deviation in the
CPU EP of onnxruntime-gpu), else with ``--link`` and ``--why`` (what the bundled CPU kernel
does, and where it is fixed). Silent cells that ran on the EP itself (placement ``on_ep`` or
``rewritten``) are never declared here: they are the EP's own findings, triaged by hand.

Cells are written as exact feature ids (an exact key wins over any glob); the matrix is
edited as text with tomlkit, so comments and layout stay; written atomically.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile

SILENT = ("MISMATCH", "NAN", "IGNORED", "UNWRITTEN")


def fallback_silent(results: list[dict], ep: str) -> list[dict]:
    """The ``ep`` results that are silent with placement verdict ``fallback``."""
    return [r for r in results if r.get("ep") == ep and r.get("outcome") in SILENT
            and ((r.get("evidence") or {}).get("placement_verdict") or {}).get("kind") == "fallback"]


def main(argv: list[str] | None = None) -> int:
    import tomlkit

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from epaudit.matrix.load import load
    from epaudit.matrix.model import is_issue_link

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a saved JSON report (epaudit check --format json)")
    ap.add_argument("--ep", required=True, help="matrix alias")
    ap.add_argument("--link", required=True, help="what documents the bundled CPU kernel's deviation")
    ap.add_argument("--why", required=True, help="one sentence: what the bundled CPU kernel does (and where it is fixed)")
    ap.add_argument("--until", default="2027-06-30", help="review date (YYYY-MM-DD)")
    ap.add_argument("--into", metavar="MATRIX", default="capabilities.toml", help="the matrix to edit")
    args = ap.parse_args(argv)

    def fail(message: str) -> int:
        print(f"declare_fallbacks: error: {message}", file=sys.stderr)
        return 2

    if not is_issue_link(args.link):
        return fail(f"--link {args.link!r}: not a link the gate accepts")
    try:
        until = datetime.date.fromisoformat(args.until)
    except ValueError:
        return fail(f"--until {args.until!r}: not a date like 2027-06-30")
    try:
        with open(args.run, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows = fallback_silent(doc["results"], args.ep)
        version = next((e.get("ort_version") for e in doc.get("eps", []) if e.get("alias") == args.ep), "?")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return fail(f"{args.run}: not a readable epaudit JSON report ({exc})")
    try:
        matrix = load(args.into, environ={})
        with open(args.into, encoding="utf-8") as fh:
            doc_toml = tomlkit.parse(fh.read())
    except Exception as exc:  # noqa: BLE001 - MatrixError, OSError, a TOML error: one line
        return fail(str(exc))
    features = doc_toml.setdefault("features", tomlkit.table(is_super_table=True))
    written = 0
    for r in rows:
        fid = r["feature"]
        cpu = matrix.declaration(fid, "CPU")
        if cpu is not None and cpu.status == "skip":
            issue = cpu.issue
            reason = (f"skip: {args.ep} (onnxruntime {version}) does not take this node; the CPU EP it falls back "
                      f"to computes it wrongly ({r['outcome']}), the CPU EP's own known deviation: {cpu.reason}")
        else:
            issue = args.link
            reason = (f"skip: {args.ep} (onnxruntime {version}) does not take this node; the CPU EP bundled with it "
                      f"computes it wrongly ({r['outcome']}: {r['summary'].split(' [placement')[0][:160]}): {args.why}")
        cell = tomlkit.inline_table()
        cell.update({"status": "skip", "issue": issue, "until": until, "reason": reason})
        if fid not in features:
            features[fid] = tomlkit.table()
        features[fid][args.ep] = cell
        written += 1
    text = tomlkit.dumps(doc_toml)
    fd, tmp = tempfile.mkstemp(prefix=".matrix-", dir=os.path.dirname(os.path.abspath(args.into)))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    try:
        load(tmp, environ={})  # never replace a matrix with one that does not load
    except Exception as exc:  # noqa: BLE001
        os.unlink(tmp)
        return fail(f"the edited matrix would not load: {exc}")
    os.replace(tmp, args.into)
    print(f"{written} cell(s) declared skip in {args.into}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
