"""Running a model file on one EP in its own interpreter, and comparing outputs (``--whole``).

Shared by :mod:`.whole` (the whole model against its reference) and :mod:`.locate` (the
exposed and cut copies of the divergence search). A run is a child process of the EP's
interpreter executing :mod:`.whole_child` by path (it needs onnxruntime and numpy only), so
an EP that crashes takes the child down, never the scan.

Whole-model tolerances (:data:`CLASSES`, the corpus truth's, measured on 48 models): an
element is close when ``|a - e| <= max(atol_frac * max|e|, floor) + rtol * |e|``; integer
and bool outputs must be equal.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from .model import Model

#: Largest model (with its external data) a divergence search loads and rewrites.
MAX_SEARCH_BYTES = 1900 * 2**20
CHILD = Path(__file__).with_name("whole_child.py")
#: (atol as a fraction of max|reference|, floor, rtol) per tolerance class (the corpus
#: truth's: /work/research/corpus/truth.py, measured on 48 models).
CLASSES = {"fp32": (1e-4, 1e-6, 1e-3), "fp16": (1e-2, 1e-3, 1e-2), "quant": (3e-2, 1e-3, 3e-2)}
_QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulNBits", "MatMulInteger",
              "ConvInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLSTM", "GatherBlockQuantized",
              "QGemm", "QLinearAdd", "QLinearMul", "QAttention", "DynamicQuantizeMatMul"}


def tolerance(model: Model) -> str:
    """The tolerance class of a model: ``quant`` when it holds quantized operators,
    ``fp16`` when any node computes in float16 / bfloat16, else ``fp32``."""
    if any(n.op_type in _QUANT_OPS for n in model.nodes):
        return "quant"
    if any(n.dtype in ("float16", "bfloat16") for n in model.nodes):
        return "fp16"
    return "fp32"


def compare(actual: np.ndarray, expected: np.ndarray, cls: str) -> dict:
    """One output against its reference: ``{match, max_abs, max_rel, bad, size}`` (or a
    ``shape`` mismatch)."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return {"match": False, "shape": [list(a.shape), list(e.shape)], "max_abs": math.inf, "bad": -1,
                "size": int(e.size)}
    if e.dtype.kind not in "fc" or a.dtype.kind not in "fc":
        bad = int(np.count_nonzero(a != e)) if a.dtype.kind not in "OUS" else int(sum(x != y for x, y in
                                                                                       zip(a.flat, e.flat)))
        return {"match": bad == 0, "max_abs": float(bad > 0), "bad": bad, "size": int(e.size), "exact": True}
    frac, floor, rtol = CLASSES[cls]
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    finite = np.isfinite(e64)
    scale = float(np.abs(e64[finite]).max()) if finite.any() else 0.0
    bound = max(frac * scale, floor) + rtol * np.abs(e64)
    with np.errstate(invalid="ignore"):
        d = np.abs(a64 - e64)
        ok = (finite & (d <= bound)) | (~finite & ((a64 == e64) | (np.isnan(a64) & np.isnan(e64))))
    d = np.where(np.isfinite(d), d, np.where(ok, 0.0, math.inf))
    bad = int(e64.size - np.count_nonzero(ok))
    return {"match": bad == 0, "max_abs": float(d.max()) if d.size else 0.0,
            "max_rel": float(d.max() / scale) if d.size and scale else 0.0, "bad": bad, "size": int(e.size)}


@dataclass
class Target:
    """Where a whole model runs: provider name, options, interpreter, environment.

    ``fault`` (tests only) names a node whose output the run scales by 1.5: a real
    session on a deliberately wrong model, so the divergence search has a known answer.
    """

    alias: str
    name: str
    python: str
    env: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)
    library: str | None = None
    fault: str | None = None


def run_child(target: Target, model_path: str, feeds_path: str, work: str, *, outputs=None, opt: str = "default",
              profile: bool = False, timeout: float = 600.0) -> tuple[dict, dict[str, np.ndarray]]:
    """Run a model file once on ``target`` (module doc); ``(result, outputs by name)``."""
    if target.fault:
        model_path = _faulty(model_path, target.fault, work)
    fd, spec_path = tempfile.mkstemp(suffix=".json", dir=work)
    out_path = spec_path[:-5] + ".npz"
    with os.fdopen(fd, "w") as fh:
        json.dump({"model": model_path, "feeds": feeds_path, "provider": target.name, "options": dict(target.options),
                   "library": target.library, "opt": opt, "outputs": outputs, "out": out_path,
                   "profile": profile, "fallback": True}, fh)
    env = dict(os.environ, **dict(target.env))
    try:
        proc = subprocess.run([target.python, str(CHILD), spec_path], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"ok": False, "stage": "timeout", "error": f"no answer within {timeout:g} s"}, {}
    except OSError as exc:
        return {"ok": False, "stage": "start", "error": f"cannot start {target.python}: {exc.strerror or exc}"}, {}
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    try:
        result = json.loads(last)
    except ValueError:
        tail = " ".join(proc.stderr.split())[-300:]
        return {"ok": False, "stage": "crash", "error": f"the process died (exit {proc.returncode}): {tail}"}, {}
    arrays = {}
    if result.get("ok"):
        with np.load(out_path, allow_pickle=False) as z:
            arrays = {n: z[f"o{i}"] for i, n in enumerate(result["output_names"])}
        os.unlink(out_path)
    os.unlink(spec_path)
    return result, arrays


def _faulty(model_path: str, node: str, work: str) -> str:
    """A copy of the model whose node ``node`` (by name, else the first of that op type)
    has its first output scaled by 1.5 (:attr:`Target.fault`)."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(model_path)
    target = next((n for n in m.graph.node if n.name == node), None) or \
        next((n for n in m.graph.node if n.op_type == node), None)
    if target is None:
        return model_path
    out = target.output[0]
    renamed = out + "__epaudit_unfaulted"
    target.output[0] = renamed
    m.graph.initializer.append(numpy_helper.from_array(np.array(1.5, dtype=np.float32), "__epaudit_fault_scale"))
    at = list(m.graph.node).index(target)
    m.graph.node.insert(at + 1, helper.make_node("Mul", [renamed, "__epaudit_fault_scale"], [out],
                                                 name=f"{target.name}/__epaudit_fault"))
    path = os.path.join(work, f"fault-{len(os.listdir(work))}.onnx")
    onnx.save(m, path)
    return path


def write_feeds(feeds: Mapping[str, np.ndarray], work: str) -> str:
    """The feeds as an ``.npz`` in ``work``; its path."""
    path = os.path.join(work, "feeds.npz")
    np.savez(path, **{k: np.asarray(v) for k, v in feeds.items()})
    return path


