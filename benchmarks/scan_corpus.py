"""`epaudit scan` against the real-model corpus and its whole-model truth.

    python benchmarks/scan_corpus.py [--corpus DIR] [--ep CPU,WebGPU] [--only GLOB] [--no-whole]
                                     [--timeout 60] [--json out.json]

The corpus (48 models from 14 sources nobody on the team wrote: models shipped in PyPI
wheels, skl2onnx / onnxmltools / torch.onnx / ORT-optimizer / ORT-quantizer / GenAI
model-builder output from seeded random weights) is rebuilt by
``benchmarks/corpus/model_corpus.py`` into ``$EPAUDIT_CORPUS/models`` (default
``~/.cache/epaudit/corpus``; no model file is committed), its truth by
``benchmarks/corpus/truth.py`` (``truth.json``: each model run whole on the CPU EP, on
``onnx.reference`` and on the real WebGPU EP, with the first divergent node). With
``--corpus`` pointing at an existing build (``/work/research/corpus`` on the team's
machine) nothing is rebuilt.

For each model this runs ``epaudit scan MODEL --ep ... --whole --inputs <the truth's
inputs>`` (the inputs the truth used, rebuilt from the manifest's feed recipe when absent;
with ``--no-whole`` the same inputs still bind the node probes' shapes)
and prints, per (model, EP): scan's verdict, the truth, and whether they agree:

* **hit**: the truth says the EP computes the model wrongly and scan says "would be
  silently wrong";
* **miss**: the truth says wrong, scan does not;
* **false alarm**: the truth says right (or the difference is the reference's own
  optimised path, as the CPU EP's DequantizeLinear+MatMul fusion), scan says wrong;
* **agree**: both say right (scan may add "would fall back", "partly checked").

Also the node coverage per model (compute nodes probed in their own configuration) and
wall time. Numbers are printed, not asserted.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRONG = ("would be silently wrong", "would crash or hang")


def corpus_dir(arg: str | None) -> Path:
    for c in (arg, os.environ.get("EPAUDIT_CORPUS"), str(Path.home() / ".cache" / "epaudit" / "corpus"),
              "/work/research/corpus"):
        if c and (Path(c) / "models" / "manifest.json").is_file():
            return Path(c)
    sys.exit("no corpus: build it with benchmarks/corpus/model_corpus.py and benchmarks/corpus/truth.py "
             "(or pass --corpus DIR)")


def truth_of(entry: dict, ep: str) -> tuple[bool, str]:
    """(the EP computes the model wrongly, the truth in words)."""
    if ep.lower().startswith("webgpu"):
        verdict = entry.get("webgpu_verdict", "")
        wrong = verdict.startswith("WebGPU disagrees")
        return wrong, ("WebGPU wrong" if wrong else "CPU-side fusion (WebGPU right)" if "CPU-side" in verdict
                       else "WebGPU right")
    cmp = entry.get("compare", {}).get("cpu_vs_reference")
    return False, "CPU right" + (" (reference wrong)" if cmp and not cmp.get("match", True) else "")


def inputs_for(corpus: Path, entry: dict, work: Path) -> Path:
    saved = corpus / "truth_work" / entry["id"] / "inputs.npz"
    if saved.is_file():
        return saved
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))
    from truth import make_inputs  # noqa: E402

    path = work / f"{entry['id']}.npz"
    np.savez(path, **make_inputs(entry, np.random.default_rng(1234)))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus")
    ap.add_argument("--ep", default="CPU,WebGPU")
    ap.add_argument("--only", action="append")
    ap.add_argument("--no-whole", action="store_true")
    ap.add_argument("--timeout", default="60")
    ap.add_argument("--json")
    args = ap.parse_args()
    corpus = corpus_dir(args.corpus)
    manifest = json.loads((corpus / "models" / "manifest.json").read_text())
    truth = {m["id"]: m for m in json.loads((corpus / "truth.json").read_text())["models"]}
    exe = str(Path(sys.executable).with_name("epaudit"))
    rows, t_all = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="epaudit-scan-corpus-") as tmp:
        work = Path(tmp)
        for entry in manifest["models"]:
            if args.only and not any(fnmatch.fnmatch(entry["id"], g) for g in args.only):
                continue
            model = corpus / "models" / entry["file"]
            out = work / f"{entry['id']}.json"
            cmd = [exe, "scan", str(model), "--ep", args.ep, "--timeout", args.timeout, "--format", "json",
                   "--output", str(out)]
            cmd += ["--inputs", str(inputs_for(corpus, entry, work))]  # the truth's inputs bind the shapes
            if not args.no_whole:
                cmd.append("--whole")
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if not out.is_file():
                print(f"{entry['id']}: scan failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}", flush=True)
                continue
            doc = json.loads(out.read_text())
            (m,) = doc["models"]
            for e in m["eps"]:
                wrong, words = truth_of(truth.get(entry["id"], {}), e["ep"])
                said = e["verdict"] in WRONG
                kind = ("hit" if wrong and said else "miss" if wrong else "false alarm" if said else "agree")
                whole = (e.get("whole") or {}).get("status", "-")
                first = ((e.get("whole") or {}).get("first_wrong_node") or {}).get("node", "")
                rows.append({"model": entry["id"], "source": entry.get("source_family", ""), "ep": e["ep"],
                             "verdict": e["verdict_text"], "whole": whole, "first": first, "truth": words,
                             "agreement": kind, "compute": m["compute_nodes"], "probed": m["probed_nodes"],
                             "domains": sorted(m["domains"]), "wall_s": round(wall, 1),
                             "gaps": [g["feature"] + ":" + str(g["outcome"]) for g in e["gaps"]
                                      if g["verdict"] in WRONG][:5]})
            r = rows[-1]
            print(f"{entry['id']:32s} {r['probed']:4d}/{r['compute']:<4d} " + "  ".join(
                f"{x['ep']}: {x['verdict']} [whole {x['whole']}] truth {x['truth']} -> {x['agreement']}"
                for x in rows if x["model"] == entry["id"]) + f"  ({wall:.0f} s)", flush=True)
    print()
    print("| model | source | EP | scan verdict | whole model (scan) | truth | agreement | compute nodes probed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cov = f"{r['probed']}/{r['compute']} ({100 * r['probed'] / max(1, r['compute']):.0f} %)"
        print(f"| {r['model']} | {r['source']} | {r['ep']} | {r['verdict']} | {r['whole']} | {r['truth']} | "
              f"{r['agreement']} | {cov} |")
    from collections import Counter

    c = Counter(r["agreement"] for r in rows)
    onnx_only = [r for r in rows if r["ep"] == rows[0]["ep"] and set(r["domains"]) <= {"ai.onnx"}]
    low = [r["model"] for r in onnx_only if r["probed"] < 0.9 * r["compute"]]
    print(f"\n{len(rows)} (model, EP) pairs: {c['hit']} hit, {c['agree']} agree, {c['miss']} miss, "
          f"{c['false alarm']} false alarm; ai.onnx-only models under 90 % coverage: {low or 'none'}; "
          f"{time.perf_counter() - t_all:.0f} s on {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
