"""What `check` alone and `check` plus `sweep` flag on onnxruntime CPU releases 1.16-1.28.

The ground truth is /work/research/old-defects/ (README.md, defects.json): 12 since-fixed
defects in non-attention CPU operators, each with its upstream link, broken releases and
first fixed release. For each release 1.16.3 ... 1.28.0 (the environments of
/work/envs/ort-X.Y.Z, `epaudit env create ort --package onnxruntime==X.Y.Z`):

* check: the catalog's features of the defects' operators on every release (plus the
  fixed ones); a defect is flagged on release R when a feature of its operator is non-PASS
  with the defect's kind on R (silent: IGNORED/UNWRITTEN/NAN/MISMATCH; crash: CRASH) and
  PASS on the defect's fixed release;
* sweep: `epaudit sweep` of the same operators on every release at once (seed, budget);
  a minimal failure of release R is the defect's when it has the defect's signature
  (operator, opset range, attributes, dtype, values; :data:`SIGNATURES`), its kind, and the
  same minimal configuration PASSES on the defect's fixed release (so the failure is the
  one the fix removed, not another).

Usage (the phases can be run apart; each writes JSON under --out):
  python benchmarks/sweep_releases.py --out /tmp/rel --budget 150 --seed 7 [--phase check|sweep|verify|table]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENVS = Path(os.environ.get("EPAUDIT_ENVS", "/work/envs"))
RELEASES = ["1.16.3", "1.17.3", "1.18.1", "1.19.2", "1.20.1", "1.21.1", "1.22.1", "1.23.2", "1.24.4", "1.25.1",
            "1.26.0", "1.27.0", "1.28.0"]
FIXED_ONLY = ["1.29.0", "1.30.0", "1.31.1", "1.32.0"]
OPS = ["Resize", "AveragePool", "MaxPool", "Max", "Min", "QuantizeLinear", "Pad", "ReduceL1", "ReduceL2",
       "ReduceLogSum", "ReduceSumSquare", "ReduceMax", "ReduceProd", "ReduceSum", "ReduceMean"]
SILENT = {"IGNORED", "UNWRITTEN", "NAN", "MISMATCH"}


def alias(v: str) -> str:
    return "ORT" + v.replace(".", "")


def between(v: str, lo: str, hi: str) -> bool:
    t = lambda s: tuple(int(x) for x in s.split("."))  # noqa: E731
    return t(lo) <= t(v) <= t(hi)


#: defect id -> (number, operators, broken (first, last), fixed, kind, upstream, signature(config, release)).
def _a(c):
    return c.attrs


SIGNATURES = {
    "resize-nearest-halfpixel-round-prefer-ceil-tie": (
        1, ["Resize"], ("1.16.3", "1.26.0"), "1.27.0", "silent",
        "issue #28291, PR #28757",
        lambda c, r: c.op == "Resize" and _a(c).get("mode", "nearest") == "nearest"
        and _a(c).get("nearest_mode", "round_prefer_floor") in ("round_prefer_floor", "round_prefer_ceil")),
    "averagepool-v19-count-include-pad-asymmetric-end-pads": (
        2, ["AveragePool"], ("1.21.1", "1.24.4"), "1.25.1", "silent",
        "issues #26708, #24681; PR #27375",
        lambda c, r: c.op == "AveragePool" and c.opset >= 19 and _a(c).get("count_include_pad") == 1
        and not _a(c).get("ceil_mode")),
    "averagepool-v7-18-ceil-count-include-pad-mlas": (
        3, ["AveragePool"], ("1.16.3", "1.28.0"), "1.29.0", "silent", "issue #16203; PR #29629",
        lambda c, r: c.op == "AveragePool" and c.opset < 19 and _a(c).get("ceil_mode") == 1
        and _a(c).get("count_include_pad") == 1),
    "averagepool-v19-ceil-count-include-pad-last-window": (
        4, ["AveragePool"], ("1.16.3", "1.20.1"), "1.21.1", "silent", "issue #16203; PR #16752; onnx PR #6650",
        lambda c, r: c.op == "AveragePool" and c.opset >= 19 and _a(c).get("ceil_mode") == 1
        and _a(c).get("count_include_pad") == 1),
    "maxpool-ceil-window-starting-in-end-pad": (
        5, ["MaxPool"], ("1.16.3", "1.20.1"), "1.21.1", "silent",
        "onnx issue #5711, onnx PR #5741; issue #15446; PR #16752",
        lambda c, r: c.op == "MaxPool" and _a(c).get("ceil_mode") == 1),
    "averagepool-nchwc-ceil-count-include-pad-channels-multiple-of-16": (
        6, ["AveragePool"], ("1.25.1", "1.28.0"), "1.29.0", "silent", "PR #29629 (its review)",
        lambda c, r: c.op == "AveragePool" and c.opset >= 19 and _a(c).get("ceil_mode") == 1
        and _a(c).get("count_include_pad") == 1 and c.inputs[0].shape[1] % 8 == 0),
    "max-min-nan-propagation-float32": (
        7, ["Max", "Min"], ("1.16.3", "1.18.1"), "1.19.2", "silent", "issue #21455; PR #21492",
        lambda c, r: c.op in ("Max", "Min") and c.dtype in ("float32", "float64") and c.values == "special"),
    "max-min-nan-propagation-float16": (
        8, ["Max", "Min"], ("1.16.3", "1.19.2"), "1.20.1", "silent", "PR #22161",
        lambda c, r: c.op in ("Max", "Min") and c.dtype == "float16" and c.values == "special"),
    "quantizelinear-float16-input-truncates": (
        9, ["QuantizeLinear"], ("1.16.3", "1.29.0"), "1.30.0", "silent", "issue #18576; PR #32452",
        lambda c, r: c.op == "QuantizeLinear" and c.dtype == "float16"),
    "pad-reflect-pads-not-smaller-than-extent": (
        10, ["Pad"], ("1.16.3", "1.24.4"), "1.25.1", "silent", "issues #8265, #20801, #23878; PRs #22798, #27652",
        lambda c, r: c.op == "Pad" and _a(c).get("mode") == "reflect"),
    "reduce-noop-with-empty-axes-elementwise": (
        11, ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceSumSquare"], ("1.16.3", "1.23.2"), "1.24.4", "silent",
        "issue #26288; PR #26436; onnx PR #7394",
        lambda c, r: c.op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceSumSquare")
        and _a(c).get("noop_with_empty_axes") == 1),
    "reduce-empty-input-omitted-axes-crash": (
        12, [o for o in OPS if o.startswith("Reduce")], ("1.17.3", "1.29.0"), "1.30.0", "crash", "PR #28353 (thread)",
        lambda c, r: c.op.startswith("Reduce")),
}


#: What the fixed release reads for the minimal configuration of a failure that is the defect:
#: PASS, except where the fix was to refuse the configuration (Pad reflect with pads past
#: the axis: since 1.25 INVALID_ARGUMENT "Pad reflect: pre-pad (2) exceeds maximum allowed
#: (1)", PR #27652; ONNX leaves such pads undefined, onnx.reference reflects again).
FIXED_READS = {"pad-reflect-pads-not-smaller-than-extent": ("PASS", "REJECTED")}


def matrix(releases) -> str:
    lines = ["schema_version = 1", "[gate]", "reference = []", "gated = []"]
    for v in releases:
        lines += [f"[providers.{alias(v)}]", 'name = "CPUExecutionProvider"',
                  f'python = "{ENVS}/ort-{v}/venv/bin/python"', "start_timeout = 300"]
    return "\n".join(lines) + "\n"


def phase_check(out: Path) -> None:
    from epaudit import catalog
    from epaudit.audit import run
    from epaudit.matrix.load import parse

    m = parse(matrix(RELEASES + FIXED_ONLY), "releases.toml")
    feats = [f for f in catalog.FEATURES if f.op_type in OPS and f.domain == ""]
    t = time.perf_counter()
    r = run(m, features=feats, gate=False, jobs=2, timeout=60)
    cells = [{"feature": fid, "ep": a, "outcome": c.outcome.value, "summary": c.summary[:200]}
             for (fid, a), c in r.results.items()]
    (out / "check.json").write_text(json.dumps({"seconds": time.perf_counter() - t, "features": len(feats),
                                                "cells": cells}))
    print(f"check: {len(feats)} features x {len(RELEASES + FIXED_ONLY)} releases, {time.perf_counter() - t:.0f} s")


def phase_sweep(out: Path, budget: int, seed: int, ops=None, tag: str = "") -> None:
    from epaudit import catalog
    from epaudit.matrix.load import parse
    from epaudit.sweep import sweep
    from epaudit.sweep.report import to_dict

    m = parse(matrix(RELEASES), "releases.toml")
    groups = {}
    for f in catalog.FEATURES:
        if f.op_type in (ops or OPS) and f.domain == "":
            groups.setdefault(f.operator, []).append(f)
    t = time.perf_counter()
    r = sweep(groups, list(m.providers.values()), budget=budget, seed=seed, timeout=60)
    doc = to_dict(r)
    doc["wall_s"] = time.perf_counter() - t
    (out / f"sweep{'-' + tag if tag else ''}.json").write_text(json.dumps(doc, default=str))
    print(f"sweep: {len(r.failures)} failures, {doc['wall_s']:.0f} s, shrink {r.shrink}")


def phase_verify(out: Path) -> None:
    """Each failure that has a defect's signature, run again on that defect's fixed release."""
    from epaudit.matrix.load import parse
    from epaudit.sweep.build import Built, build
    from epaudit.sweep.config import from_key
    from epaudit.sweep.engine import Sessions

    failures = {}
    for path in sorted(out.glob("sweep*.json")):  # a later run of an operator replaces an earlier one's
        doc = json.loads(path.read_text())
        ops = {o["operator"] for o in doc["operators"]}
        failures = {k: v for k, v in failures.items() if v["operator"] not in ops}
        failures.update({(f["ep"], f["id"]): f for f in doc["failures"]})
    todo: dict[str, list] = {}
    rows = []
    for f in failures.values():
        rel = next(v for v in RELEASES if alias(v) == f["ep"])
        cfg = from_key(json.dumps(f["config"]))
        for did, (num, ops, (lo, hi), fixed, kind, link, sig) in SIGNATURES.items():
            if cfg.op not in ops or not between(rel, lo, hi) or not sig(cfg, rel):
                continue
            right = (kind == "silent" and f["outcome"] in SILENT) or (kind == "crash" and f["outcome"] == "CRASH")
            rows.append({"defect": did, "release": rel, "failure": f["id"], "outcome": f["outcome"], "kind_ok": right,
                         "fixed": fixed, "config": f["description"]})
            todo.setdefault(fixed, []).append(cfg)
    m = parse(matrix(sorted(todo)), "fixed.toml")
    verdict = {}
    for fixed, cfgs in todo.items():
        builts = [b for b in (build(c) for c in cfgs) if isinstance(b, Built)]
        s = Sessions([m.providers[alias(fixed)]])
        try:
            res = s.run(builts, [alias(fixed)], 60)
        finally:
            s.close()
        for b in builts:
            c, _ = res[(b.probe.feature_id, alias(fixed))]
            verdict[(fixed, b.config.key)] = c.outcome.value
    from epaudit.sweep.config import finding_id
    for row in rows:
        key = next(cfg.key for cfg in todo[row["fixed"]] if finding_id(cfg) == row["failure"])
        row["on_fixed"] = verdict.get((row["fixed"], key), "not built")
    (out / "verify.json").write_text(json.dumps(rows, indent=1))
    print(f"verify: {len(rows)} signature matches, {sum(r['on_fixed'] == 'PASS' and r['kind_ok'] for r in rows)} "
          "confirmed")


def phase_table(out: Path) -> None:
    import fnmatch

    from epaudit.sweep.engine import CANNOT_LOAD

    check = json.loads((out / "check.json").read_text())["cells"]
    cells = {(c["feature"], c["ep"]): c for c in check}
    feats = sorted({c["feature"] for c in check})
    verify = json.loads((out / "verify.json").read_text()) if (out / "verify.json").exists() else []
    table = {}
    for did, (num, ops, (lo, hi), fixed, kind, link, sig) in SIGNATURES.items():
        fs = [f for f in feats if any(fnmatch.fnmatchcase(f, f"onnx.{o}.*") for o in ops)]
        # A check cell is the defect's (old-defects/epaudit/analyze.py's rule): PASS on the
        # fixed release, and non-PASS of the defect's kind on every broken release that can
        # load it (REJECTED for the model's opset or IR version, UNAVAILABLE: cannot load).
        broken = [r for r in RELEASES + FIXED_ONLY if between(r, lo, hi)]
        ok = lambda o: (kind == "silent" and o in SILENT) or (kind == "crash" and o == "CRASH")  # noqa: E731
        caught: dict[str, list] = {}
        for f in fs:
            fx = cells.get((f, alias(fixed)))
            if fx is None or fx["outcome"] != "PASS":
                continue
            loads = [r for r in broken if (c := cells.get((f, alias(r)))) is not None and c["outcome"] != "UNAVAILABLE"
                     and not (c["outcome"] == "REJECTED" and CANNOT_LOAD.search(c["summary"]))]
            if loads and all(ok(cells[(f, alias(r))]["outcome"]) for r in loads):
                for r in loads:
                    caught.setdefault(r, []).append(f)
        for rel in RELEASES:
            if not between(rel, lo, hi):
                continue
            by_check = caught.get(rel, [])
            by_sweep = [v["failure"] for v in verify if v["defect"] == did and v["release"] == rel
                        and v["kind_ok"] and v["on_fixed"] in FIXED_READS.get(did, ("PASS",))]
            table.setdefault(did, {})[rel] = {"check": by_check[:3], "n_check": len(by_check), "sweep": by_sweep[:3],
                                              "n_sweep": len(by_sweep)}
    (out / "table.json").write_text(json.dumps(table, indent=1))
    print("| # | defect | upstream | broken -> fixed | kind | " + " | ".join(RELEASES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(RELEASES))
    for did, (num, ops, (lo, hi), fixed, kind, link, sig) in SIGNATURES.items():
        marks = []
        for rel in RELEASES:
            if rel not in table.get(did, {}):
                marks.append("")
                continue
            t = table[did][rel]
            marks.append(("C" if t["n_check"] else "") + ("S" if t["n_sweep"] else "") or "-")
        print(f"| {num} | {did} | {link} | {lo}-{hi} -> {fixed} | {kind} | " + " | ".join(marks) + " |")
    for who in ("check", "sweep"):
        for rel in RELEASES:
            n = sum(1 for did in table if rel in table[did] and (table[did][rel]["n_check"] or (
                who == "sweep" and table[did][rel]["n_sweep"])))
            total = sum(1 for did in table if rel in table[did])
            print(f"{'check + sweep' if who == 'sweep' else who} on {rel}: {n} of {total}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=int, default=150)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--phase", choices=["check", "sweep", "verify", "table", "all"], default="all")
    p.add_argument("--ops", help="comma-separated operators to sweep (default: all of OPS)")
    p.add_argument("--tag", default="", help="name of this sweep's result file: sweep-TAG.json")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.phase in ("check", "all"):
        phase_check(out)
    if a.phase in ("sweep", "all"):
        phase_sweep(out, a.budget, a.seed, a.ops.split(",") if a.ops else None, a.tag)
    if a.phase in ("verify", "all"):
        phase_verify(out)
    if a.phase in ("table", "all"):
        phase_table(out)


if __name__ == "__main__":
    main()
