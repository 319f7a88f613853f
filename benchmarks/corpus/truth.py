#!/usr/bin/env python3
"""Whole-model truth for the real-model corpus (see model_corpus.py).

The recipe the team's corpus helper wrote (kept here so the corpus and its truth can be rebuilt;
no model file is committed). Interpreters: $EPAUDIT_TRUTH_CPU_PYTHON (onnx + onnxruntime),
$EPAUDIT_WEBGPU_PYTHON; output in $EPAUDIT_CORPUS (default ~/.cache/epaudit/corpus).

For every model in MANIFEST (default $EPAUDIT_CORPUS/models/manifest.json) this runs the
model whole, with seeded inputs, on

  cpu        CPU EP of onnxruntime-gpu 1.31.1                     (/work/snap/venv/bin/python)
  reference  onnx.reference.ReferenceEvaluator, float64 copy of the model where it converts,
             otherwise as is; 60 s cap                          (/work/snap/venv/bin/python)
  webgpu     WebGpuExecutionProvider, onnxruntime-webgpu 1.27.0, session.disable_cpu_ep_fallback=0
                                                                  (/work/envs/webgpu/python)
  webgpu_nofallback   the same with session.disable_cpu_ep_fallback=1 (does it even load?)
  cpu_1.27   CPU EP of that same onnxruntime-webgpu 1.27.0 build: a control that separates
             WebGPU disagreements from CPU-kernel drift between ORT 1.27 and 1.31

each in its own subprocess (crash / hang isolation), with ORT profiling on; nodes per EP are
counted from the profile (events cat == "Node" whose name ends in "_kernel_time": args.provider,
args.op_name).  Outputs are compared dtype-aware (see TOLERANCES).  Where WebGPU disagrees with
CPU, every intermediate top-level tensor is made a graph output of a copy of the model and both
runs are compared in topological order: the first node whose output diverges is recorded as
``first_divergent_node``.

Writes truth.json (full record) and truth.md (table) beside this file, or under --out.

Usage:  /work/snap/venv/bin/python truth.py [--manifest M] [--only GLOB ...] [--out DIR]
The same file is the worker run by each interpreter (``--worker``): worker mode needs only
onnxruntime and numpy.
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
import zlib

import numpy as np

HERE = os.environ.get("EPAUDIT_CORPUS") or os.path.join(os.path.expanduser("~"), ".cache", "epaudit", "corpus")
CPU_PY = os.environ.get("EPAUDIT_TRUTH_CPU_PYTHON", "/work/snap/venv/bin/python")
WEBGPU_PY = os.environ.get("EPAUDIT_WEBGPU_PYTHON", "/work/envs/webgpu/python")
SEED = 20261201

# Tolerance classes.  A float output passes when, elementwise,  (M = max|want| over the output)
# i.e. atol is relative to the output's largest magnitude; NaN must sit where NaN sits; +-inf
# must match exactly.  Integer / bool / string outputs must be equal.
#     |got - want| <= max(atol * M, floor) + rtol * |want|
# floor: an absolute level under which differences are noise (a sigmoid output of 1e-30 against
# 1e-7 is no disagreement); it matters only for outputs whose largest magnitude is tiny.
TOLERANCES = {
    "fp32": {"atol": 1e-4, "rtol": 1e-3, "floor": 1e-6},
    "fp16": {"atol": 1e-2, "rtol": 1e-2, "floor": 1e-3},
    # models with quantize steps computed at run time (dynamic activation quantization, int4/int8
    # weights with accuracy_level int8 activations...): one quantization step may round either way
    "quant": {"atol": 3e-2, "rtol": 3e-2, "floor": 1e-3},
}
QUANT_OPS = {"DynamicQuantizeLinear", "QuantizeLinear", "MatMulNBits", "ConvInteger", "MatMulInteger",
             "DynamicQuantizeLSTM", "QLinearConv", "QGemm", "QLinearMatMul", "QLinearAdd", "QLinearMul",
             "QLinearSigmoid", "QLinearSoftmax", "QLinearLeakyRelu", "QLinearAveragePool",
             "QLinearGlobalAveragePool", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}


# ============================================================================================
# worker (runs under any interpreter with onnxruntime + numpy)
def _to_array(v):
    """ORT / ReferenceEvaluator output -> numpy array (ZipMap's list of dicts -> dense [N, K])."""
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return v.astype(str)
        return v
    if isinstance(v, list):
        if v and isinstance(v[0], dict):
            keys = sorted(v[0].keys())
            return np.array([[d[k] for k in keys] for d in v], dtype=np.float32)
        if v and isinstance(v[0], np.ndarray):
            return np.stack(v)
        return np.array(v)
    if isinstance(v, dict):
        keys = sorted(v.keys())
        return np.array([v[k] for k in keys])
    return np.asarray(v)


def parse_profile(path):
    with open(path) as f:
        events = json.load(f)
    nodes = {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        a = e.get("args", {})
        name = e["name"][: -len("_kernel_time")]
        nodes[name] = (a.get("provider", "?"), a.get("op_name", "?"))
    per_ep, ops = {}, {}
    for name, (prov, op) in nodes.items():
        per_ep[prov] = per_ep.get(prov, 0) + 1
        ops.setdefault(prov, {})
        ops[prov][op] = ops[prov].get(op, 0) + 1
    return {"nodes_per_ep": per_ep, "ops_per_ep": ops,
            "placement": {n: p for n, (p, _) in sorted(nodes.items())}}


def worker_ort(spec):
    import onnxruntime as ort
    res = {"ort_version": ort.__version__}
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(spec["tmp"], "prof")
    so.log_severity_level = 3
    if spec.get("disable_opt"):
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for k, v in spec.get("config", {}).items():
        so.add_session_config_entry(k, v)
    feeds = dict(np.load(spec["inputs"], allow_pickle=False))
    t0 = time.perf_counter()
    try:
        sess = ort.InferenceSession(spec["model"], so, providers=spec["providers"])
    except Exception as e:
        res.update(status="load_failed", error=f"{type(e).__name__}: {str(e)[:1500]}",
                   load_s=round(time.perf_counter() - t0, 4))
        return res
    res["load_s"] = round(time.perf_counter() - t0, 4)
    res["session_providers"] = sess.get_providers()
    names = [o.name for o in sess.get_outputs()]
    in_names = {i.name for i in sess.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in in_names}
    try:
        t0 = time.perf_counter()
        outs = sess.run(None, feeds)
        res["run_s"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        outs2 = sess.run(None, feeds)
        res["run2_s"] = round(time.perf_counter() - t0, 4)
    except Exception as e:
        res.update(status="run_failed", error=f"{type(e).__name__}: {str(e)[:1500]}")
        try:
            res["profile"] = parse_profile(sess.end_profiling())
        except Exception:
            pass
        return res
    arrs = {n: _to_array(v) for n, v in zip(names, outs)}
    # record whether the second run gave the same bits
    rep = True
    for n, v2 in zip(names, outs2):
        a, b = arrs[n], _to_array(v2)
        rep &= bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    res["repeatable"] = rep
    np.savez(spec["outputs"], **{f"o{i}": arrs[n] for i, n in enumerate(names)})
    res["output_names"] = names
    res["profile"] = parse_profile(sess.end_profiling())
    res["status"] = "ran"
    return res


def worker_reference(spec):
    import onnx
    from onnx.reference import ReferenceEvaluator
    res = {"onnx_version": onnx.__version__}
    feeds = dict(np.load(spec["inputs"], allow_pickle=False))
    m = onnx.load(spec["model"])
    mode = "as_is"
    if spec.get("float64"):
        try:
            m64 = to_float64(m)
            mode = "float64"
        except Exception as e:
            res["float64_note"] = f"not converted: {e}"
            m64 = None
    t0 = time.perf_counter()
    outs = None
    if mode == "float64":
        try:
            ref = ReferenceEvaluator(m64)
            f64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
            f64 = {k: v for k, v in f64.items() if k in ref.input_names}
            outs = ref.run(None, f64)
        except Exception as e:
            res["float64_note"] = f"float64 copy failed: {type(e).__name__}: {str(e)[:300]}"
            mode = "as_is"
    if outs is None:
        try:
            ref = ReferenceEvaluator(m)
            outs = ref.run(None, {k: v for k, v in feeds.items() if k in ref.input_names})
        except Exception as e:
            res.update(status="run_failed", error=f"{type(e).__name__}: {str(e)[:800]}",
                       run_s=round(time.perf_counter() - t0, 3))
            return res
    res["run_s"] = round(time.perf_counter() - t0, 3)
    res["mode"] = mode
    names = list(ref.output_names)
    np.savez(spec["outputs"], **{f"o{i}": _to_array(v) for i, v in enumerate(outs)})
    res["output_names"] = names
    res["status"] = "ran"
    return res


def to_float64(model):
    """Copy of `model` computing in float64: float32 initializers, Constant/ConstantOfShape values,
    value types, Cast(to=FLOAT) and ml-domain float attributes stay as they are except tensors."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for g in _graphs(m.graph):
        for t in g.initializer:
            if t.data_type == TensorProto.FLOAT:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
            elif t.data_type == TensorProto.FLOAT16:
                raise ValueError("float16 initializer")
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.elem_type == TensorProto.FLOAT:
                tt.elem_type = TensorProto.DOUBLE
        for n in g.node:
            if n.domain not in ("", "ai.onnx", "ai.onnx.ml"):
                raise ValueError(f"domain {n.domain}")
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
                if n.op_type in ("Cast", "EyeLike", "RandomNormal", "RandomUniform") and a.name in ("to", "dtype") \
                        and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.DOUBLE
    return m


def _graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.g and a.g.ByteSize():
                yield from _graphs(a.g)
            for sg in a.graphs:
                yield from _graphs(sg)


def worker_reference_intermediate(spec):
    import onnx
    from onnx.reference import ReferenceEvaluator
    feeds = dict(np.load(spec["inputs"], allow_pickle=False))
    m = onnx.load(spec["model"])
    if spec.get("float64"):
        m = to_float64(m)
        feeds = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    ref = ReferenceEvaluator(m)
    allres = ref.run(None, {k: v for k, v in feeds.items() if k in ref.input_names}, intermediate=True)
    names = [n for n, v in allres.items() if isinstance(v, np.ndarray)]
    np.savez(spec["outputs"], **{f"o{i}": _to_array(allres[n]) for i, n in enumerate(names)})
    return {"status": "ran", "output_names": names}


def worker_main(spec_path):
    spec = json.load(open(spec_path))
    try:
        if spec["kind"] == "reference":
            res = worker_reference(spec)
        elif spec["kind"] == "reference_intermediate":
            res = worker_reference_intermediate(spec)
        else:
            res = worker_ort(spec)
    except Exception as e:  # pragma: no cover
        import traceback
        res = {"status": "worker_error", "error": traceback.format_exc()[-1500:]}
    json.dump(res, open(spec["result"], "w"))


# ============================================================================================
# driver (runs under /work/snap/venv/bin/python: onnx + onnxruntime-gpu 1.31.1)
def make_inputs(entry, rng):
    feeds = {}
    for inp in entry["inputs"]:
        f = inp.get("feed") or {}
        dt = np.dtype(inp["dtype"]) if inp["dtype"] not in (None, "string", "undefined") else np.dtype(np.float32)
        shape = f.get("shape")
        if shape is None:
            shape = []
            for d in inp["shape"] or []:
                if isinstance(d, int) and d > 0:
                    shape.append(d)
                elif isinstance(d, str) and ("seq" in d.lower() or "len" in d.lower()):
                    shape.append(8)
                else:
                    shape.append(1)
        kind = f.get("kind", "uniform" if dt.kind == "f" else "randint")
        if kind == "uniform":
            a = rng.uniform(f.get("low", 0.0), f.get("high", 1.0), size=shape)
        elif kind == "normal":
            a = rng.normal(0.0, f.get("scale", 1.0), size=shape)
        elif kind == "randint":
            a = rng.integers(f.get("low", 0), f.get("high", 10), size=shape)
        elif kind == "ones":
            a = np.ones(shape)
        elif kind == "zeros":
            a = np.zeros(shape)
        elif kind == "value":
            a = np.full(shape, f["value"])
        elif kind == "choice":
            a = rng.choice(np.array(f["values"]), size=shape)
        elif kind == "arange":
            a = np.broadcast_to(np.arange(shape[-1]), shape).copy()
        elif kind == "mixed_categorical":
            a = rng.normal(size=shape)
            for c in f["int_columns"]:
                a[:, c] = rng.integers(0, f["int_high"], size=shape[0])
        else:
            raise ValueError(kind)
        feeds[inp["name"]] = np.asarray(a).astype(dt)
    return feeds


def tol_class(entry):
    ops = {k.split("::")[1] for k in entry["op_histogram"]}
    if ops & QUANT_OPS:
        return "quant"
    dts = {i["dtype"] for i in entry["inputs"] + entry["outputs"]}
    if "float16" in dts or "fp16" in entry["id"] or "half" in entry["id"]:
        return "fp16"
    return "fp32"


def compare(got, want, cls):
    """Compare two arrays; returns dict with match, max_abs, max_rel, norm_err."""
    tol = TOLERANCES[cls]
    r = {"shape_got": list(got.shape), "shape_want": list(want.shape), "dtype_got": str(got.dtype),
         "dtype_want": str(want.dtype)}
    if got.shape != want.shape:
        r.update(match=False, reason="shape")
        return r
    if got.dtype.kind in "USO" or want.dtype.kind in "USO":
        eq = got.astype(str) == want.astype(str)
        r.update(match=bool(eq.all()), mismatched=int((~eq).sum()))
        return r
    if got.dtype.kind in "iub" and want.dtype.kind in "iub":
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        r.update(match=bool((d == 0).all()), max_abs=float(d.max()) if d.size else 0.0,
                 mismatched=int((d != 0).sum()), size=int(d.size))
        return r
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan_ok = bool((np.isnan(g) == np.isnan(w)).all())
    inf_ok = bool(((np.isinf(g) | np.isinf(w)) <= (g == w)).all())
    fin = np.isfinite(g) & np.isfinite(w)
    if fin.any():
        d = np.abs(g[fin] - w[fin])
        aw = np.abs(w[fin])
        M = float(aw.max()) or 1.0
        ok = d <= max(tol["atol"] * M, tol["floor"]) + tol["rtol"] * aw
        rel = d / np.maximum(aw, 1e-30)
        r.update(max_abs=float(d.max()), max_rel=float(rel.max()), norm_err=float(d.max() / M),
                 max_magnitude=M, mismatched=int((~ok).sum()), size=int(d.size))
        close = bool(ok.all())
    else:
        close = True
    r["nan_got"] = int(np.isnan(g).sum())
    r["nan_want"] = int(np.isnan(w).sum())
    r["match"] = bool(close and nan_ok and inf_ok)
    if not nan_ok:
        r["reason"] = "nan positions differ"
    elif not inf_ok:
        r["reason"] = "inf differs"
    return r


def compare_outputs(a_path, a_names, b_path, b_names, cls):
    A = np.load(a_path, allow_pickle=False)
    B = np.load(b_path, allow_pickle=False)
    out = {}
    for i, n in enumerate(a_names):
        if n not in b_names:
            out[n] = {"match": False, "reason": "missing"}
            continue
        out[n] = compare(A[f"o{i}"], B[f"o{b_names.index(n)}"], cls)
    return {"match": all(v["match"] for v in out.values()), "tolerance": cls, "outputs": out}


def run_worker(python, spec, timeout):
    tmp = spec["tmp"]
    spec["result"] = os.path.join(tmp, f"result_{spec['tag']}.json")
    sp = os.path.join(tmp, f"spec_{spec['tag']}.json")
    json.dump(spec, open(sp, "w"))
    t0 = time.time()
    try:
        p = subprocess.run([python, os.path.abspath(__file__), "--worker", sp], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result within {timeout} s", "wall_s": round(time.time() - t0, 2)}
    if not os.path.exists(spec["result"]):
        return {"status": "crashed", "returncode": p.returncode, "error": (p.stderr or p.stdout)[-1500:],
                "wall_s": round(time.time() - t0, 2)}
    res = json.load(open(spec["result"]))
    res["wall_s"] = round(time.time() - t0, 2)
    return res


EP_RUNS = {
    "cpu": (CPU_PY, ["CPUExecutionProvider"], {}),
    "webgpu": (WEBGPU_PY, ["WebGpuExecutionProvider", "CPUExecutionProvider"],
               {"session.disable_cpu_ep_fallback": "0"}),
    # naming the CPU EP as well is refused with fallback off ("Conflicting session configuration")
    "webgpu_nofallback": (WEBGPU_PY, ["WebGpuExecutionProvider"], {"session.disable_cpu_ep_fallback": "1"}),
    "cpu_1.27": (WEBGPU_PY, ["CPUExecutionProvider"], {}),
    # CPU EP with graph optimizations off: tells a WebGPU disagreement from a CPU-side fusion that
    # changes the numbers (e.g. DequantizeLinear+MatMul -> MatMulNBits with int8 activations)
    "cpu_noopt": (CPU_PY, ["CPUExecutionProvider"], {}),
}
NOOPT_RUNS = {"cpu_noopt"}

# Checks made by hand (scripts in checks/), attached to the records as notes.
NOTES = {
    "skl_svc_rbf": "CPU vs reference: ORT CPU matches scikit-learn's predict_proba (max |d| ~1e-7); "
                   "onnx 1.23.2 ReferenceEvaluator's SVMClassifier probabilities are off by up to 0.12 "
                   "(checks/svc_vs_sklearn.py). The reference is wrong here.",
    "rapidocr_cls_mobile_v2": "CPU vs reference: first divergence at BatchNormalization@0; numpy "
                              "(x-mean)/sqrt(var+eps)*scale+bias matches the CPU EP to 3e-7 and the "
                              "ReferenceEvaluator is off by 0.10 (checks/bn_vs_numpy.py). The reference is wrong.",
    "rapidocr_rec_ppocrv4": "CPU vs reference: first divergence at p2o.BatchNormalization.0, the same "
                            "ReferenceEvaluator BatchNormalization problem as rapidocr_cls_mobile_v2.",
    "genai_llama_int4_qdq_cpu": "WebGPU vs CPU: the CPU EP (1.31.1 and 1.27.0) fuses DequantizeLinear+MatMul "
                                "into MatMulNBits (accuracy level 4: int8 activations; session option "
                                "session.qdq_matmulnbits_accuracy_level); with that option 0, or with basic or "
                                "no graph optimization, CPU matches WebGPU to 3.8e-7. WebGPU runs DQ and MatMul "
                                "unfused. The CPU is the approximate side.",
}
for _k in ("silero_vad", "silero_vad_half", "silero_vad_16k_op15", "silero_vad_op18_ifless",
           "silero_vad_16k_sequence", "fasterwhisper_silero_vad_v6"):
    NOTES[_k] = ("WebGPU vs CPU: single-node repro (checks/conv_webgpu_repro.py): Conv kernel 3, pads 1, "
                 "spatial 4, with C_in in {9, 33, 63, 129} gives max|d|/max|cpu| 0.5-0.98 on WebGPU 1.27.0 / "
                 "lavapipe, C_in in {1, 3, 5, 7, 65, 127, 131, 257} matches (~1e-7); 1-D and 2-D alike. "
                 "The CPU EP agrees with the float64 reference on these models.")


def describe_node(model, idx, feeds_shapes):
    import onnx
    from onnx import helper
    n = model.graph.node[idx]
    attrs = {}
    for a in n.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        elif isinstance(v, onnx.TensorProto):
            v = f"<tensor {onnx.helper.tensor_dtype_to_np_dtype(v.data_type).name} {list(v.dims)}>"
        elif isinstance(v, onnx.GraphProto):
            v = f"<graph {v.name}, {len(v.node)} nodes>"
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else (str(x)[:80] if not isinstance(x, (int, float)) else x)
                 for x in v]
            if len(v) > 16:
                v = f"<list of {len(v)}: {v[:6]} ...>"
        attrs[a.name] = v
    return {"name": n.name, "op_type": n.op_type, "domain": n.domain or "ai.onnx", "index": idx,
            "attributes": attrs, "inputs": list(n.input), "outputs": list(n.output),
            "input_shapes_dtypes": {i: feeds_shapes.get(i) for i in n.input if i}}


def _ort_pair(model_path, inputs_path, tmp, tag, disable_opt=False, tags=("cpu", "webgpu")):
    runs = {}
    for ep in tags:
        py, prov, cfg = EP_RUNS[ep]
        spec = {"kind": "ort", "tag": f"{tag}_{ep}{'_noopt' if disable_opt else ''}", "tmp": tmp,
                "model": model_path, "inputs": inputs_path, "providers": prov, "config": cfg,
                "outputs": os.path.join(tmp, f"{tag}_{ep}.npz"), "disable_opt": disable_opt}
        r = run_worker(py, spec, 600)
        r["_out"] = spec["outputs"]
        runs[ep] = r
        if r["status"] != "ran":
            raise RuntimeError(f"{tag} on {ep}: {r['status']}: {r.get('error', '')[:600]}")
    return runs


def _lookup_placement(placement, name):
    if name in placement:
        return placement[name]
    hits = sorted({p for n, p in placement.items() if n.startswith(name + "_token_") or n.startswith(name + "_")})
    if hits:
        return "/".join(hits) + " (as a layout-transformed / renamed node)"
    return "not in profile (fused or rewritten away)"


def inline_ifs(model_path, inputs_path, tmp, max_depth=3):
    """Replace every top-level If whose condition is known (from a CPU run) by the nodes of the branch
    it takes, so that the divergence search can reach nodes inside If subgraphs. Returns
    (path of the inlined copy or model_path, list of {if, branch} taken)."""
    import onnx
    from onnx import helper
    taken = []
    origin = {}
    cur = model_path
    for depth in range(max_depth):
        m = onnx.load(cur)
        ifs = [n for n in m.graph.node if n.op_type == "If"]
        if not ifs:
            break
        probe = onnx.ModelProto()
        probe.CopyFrom(m)
        have = {o.name for o in probe.graph.output}
        for n in ifs:
            if n.input[0] not in have:
                vi = probe.graph.output.add()
                vi.name = n.input[0]
        ppath = os.path.join(tmp, f"ifprobe{depth}.onnx")
        onnx.save(probe, ppath)
        r = _ort_pair(ppath, inputs_path, tmp, f"ifprobe{depth}", tags=("cpu",))["cpu"]
        B = np.load(r["_out"])
        cond = {n: bool(np.asarray(B[f"o{i}"]).reshape(-1)[0]) for i, n in enumerate(r["output_names"])
                if n in {x.input[0] for x in ifs}}
        existing = {i.name for i in m.graph.initializer} | {o for n in m.graph.node for o in n.output} | \
            {i.name for i in m.graph.input}
        new_nodes = []
        for n in m.graph.node:
            if n.op_type != "If" or n.input[0] not in cond:
                new_nodes.append(n)
                continue
            br_name = "then_branch" if cond[n.input[0]] else "else_branch"
            br = [a.g for a in n.attribute if a.name == br_name][0]
            clash = ({o for bn in br.node for o in bn.output} | {i.name for i in br.initializer}) & existing
            if clash:
                raise RuntimeError(f"cannot inline {n.name}: names clash {sorted(clash)[:3]}")
            for init in br.initializer:
                m.graph.initializer.append(init)
            for bn in br.node:
                if not bn.name:
                    bn.name = f"{n.name}/{br_name}/{bn.op_type}_{len(new_nodes)}"
                origin[bn.name] = origin.get(n.name, []) + [f"{n.name}.{br_name}"]
                new_nodes.append(bn)
            for bo, io in zip(br.output, n.output):
                new_nodes.append(helper.make_node("Identity", [bo.name], [io], name=f"{n.name}/{br_name}/out:{io}"))
            taken.append({"if": n.name, "branch": br_name, "branch_nodes": len(br.node)})
        del m.graph.node[:]
        m.graph.node.extend(new_nodes)
        cur = os.path.join(tmp, f"inlined{depth}.onnx")
        onnx.save(m, cur)
    return cur, taken, origin


def _typed_vi(types, name):
    import onnx
    vi = onnx.ValueInfoProto()
    if name in types:
        vi.CopyFrom(types[name])
        vi.type.tensor_type.ClearField("shape")
    else:
        vi.name = name
    return vi


def _types(m):
    from onnx import shape_inference
    types = {}
    cands = []
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
        cands.append(SymbolicShapeInference.infer_shapes(m, auto_merge=True, guess_output_rank=True))
    except Exception:
        pass
    try:
        cands.append(shape_inference.infer_shapes(m, strict_mode=False))
    except Exception:
        pass
    for src in cands:
        for vi in list(src.graph.value_info) + list(src.graph.output):
            if vi.type.tensor_type.elem_type and vi.name not in types:
                types[vi.name] = vi
    return types


def _shapes_of(m, inputs_path, arrays):
    import onnx
    shapes = {}
    for k, v in dict(np.load(inputs_path)).items():
        shapes[k] = {"shape": list(v.shape), "dtype": str(v.dtype)}
    for n, a in arrays.items():
        shapes[n] = {"shape": list(a.shape), "dtype": str(a.dtype)}
    for init in m.graph.initializer:
        shapes[init.name] = {"shape": list(init.dims), "dtype": onnx.helper.tensor_dtype_to_np_dtype(
            init.data_type).name, "initializer": True}
    return shapes


def locate_divergence(entry, model_path, inputs_path, tmp, cls, disable_opt=False):
    """First node (topological order) whose output differs between WebGPU and CPU.

    Method 1 (exposure): every top-level node output of a copy (Ifs inlined) becomes a graph output.
    Exposing a tensor can block a fusion that causes the divergence, so when method 1 finds the
    final outputs agreeing, method 2 (truncation bisection) cuts the graph at ONE tensor at a time
    (that tensor the only output, so every fusion upstream of the cut is kept) and bisects over the
    ancestors of the diverging output in topological order."""
    import onnx
    res = {"graph_optimizations": "disabled" if disable_opt else "default"}
    try:
        src, taken, origin = inline_ifs(model_path, inputs_path, tmp)
    except Exception as e:
        src, taken, origin = model_path, [], {}
        res["if_inlining_error"] = str(e)[:300]
    res["if_inlined"] = taken
    m = onnx.load(src)
    types = _types(m)
    final = [o.name for o in m.graph.output]
    order = [(o, i) for i, n in enumerate(m.graph.node) for o in n.output if o]
    exp = onnx.ModelProto()
    exp.CopyFrom(m)
    have = set(final)
    for o, _ in order:
        if o not in have:
            exp.graph.output.append(_typed_vi(types, o))
    exp_path = os.path.join(tmp, "exposed.onnx")
    onnx.save(exp, exp_path)
    try:
        runs = _ort_pair(exp_path, inputs_path, tmp, "exp", disable_opt)
    except Exception as e:
        return {**res, "status": "failed", "error": str(e)[:800]}
    A = np.load(runs["webgpu"]["_out"])
    B = np.load(runs["cpu"]["_out"])
    an, bn = runs["webgpu"]["output_names"], runs["cpu"]["output_names"]
    arrays = {n: B[f"o{i}"] for i, n in enumerate(bn)}
    shapes = _shapes_of(m, inputs_path, arrays)

    def cmp(name):
        return compare(A[f"o{an.index(name)}"], B[f"o{bn.index(name)}"], cls)

    final_cmp = {n: cmp(n) for n in final if n in an and n in bn}
    res["final_outputs_disagree_in_exposed_copy"] = not all(v["match"] for v in final_cmp.values())
    first = None
    checked = 0
    for name, idx in order:
        if name not in an or name not in bn:
            continue
        checked += 1
        c = cmp(name)
        if not c["match"]:
            first = (name, idx, c, runs["webgpu"].get("profile", {}).get("placement", {}))
            break
    res.update(method="exposure", tensors_compared=checked)
    if first is None and not res["final_outputs_disagree_in_exposed_copy"]:
        try:
            first, info = bisect_divergence(m, src, order, types, inputs_path, tmp, cls, disable_opt, entry)
            res.update(method="truncation-bisection", **info)
        except Exception as e:
            res["bisection_error"] = f"{type(e).__name__}: {str(e)[:500]}"
    if first is None:
        return {**res, "status": "no_divergent_tensor"}
    name, idx, c, placement = first
    node = describe_node(m, idx, shapes)
    node["ran_on"] = _lookup_placement(placement, node["name"])
    node["diverging_output"] = name
    node["comparison"] = c
    if node["name"] in origin:
        node["inside_subgraph_of"] = origin[node["name"]]
    return {**res, "status": "ok", "node": node}


def bisect_divergence(m, src, order, types, inputs_path, tmp, cls, disable_opt, entry):
    import onnx
    producers = {o: i for o, i in order}
    # the diverging final output (from the whole-model comparison) and its ancestors
    nodes = m.graph.node
    target = None
    probes = {}

    def probe(name):
        if name in probes:
            return probes[name]
        t = onnx.ModelProto()
        t.CopyFrom(m)
        del t.graph.output[:]
        t.graph.output.append(_typed_vi(types, name))
        pth = os.path.join(tmp, "trunc.onnx")
        onnx.save(t, pth)
        runs = _ort_pair(pth, inputs_path, tmp, "trunc", disable_opt)
        a = np.load(runs["webgpu"]["_out"])["o0"]
        b = np.load(runs["cpu"]["_out"])["o0"]
        probes[name] = (compare(a, b, cls), runs["webgpu"].get("profile", {}))
        return probes[name]

    for o in [x.name for x in m.graph.output]:
        c, _ = probe(o)
        if not c["match"]:
            target = o
            break
    if target is None:
        return None, {"bisection": "no final output diverges when the graph is cut at it", "probes": len(probes)}
    anc = set()
    stack = [target]
    while stack:
        t = stack.pop()
        if t in producers and producers[t] not in anc:
            anc.add(producers[t])
            stack.extend(i for i in nodes[producers[t]].input if i)
    chain = [(o, i) for o, i in order if i in anc and nodes[i].op_type not in ("Constant",)]
    lo, hi = -1, len(chain) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c, _ = probe(chain[mid][0])
        if c["match"]:
            lo = mid
        else:
            hi = mid
    name, idx = chain[hi]
    c, prof = probe(name)
    ops = prof.get("ops_per_ep", {})
    return (name, idx, c, prof.get("placement", {})), {
        "probes": len(probes), "ancestors": len(chain), "diverging_final_output": target,
        "ops_per_ep_when_cut_there": ops,
        "bisection_note": "assumes divergence is monotonic along the ancestor chain (topological order)"}


def locate_reference_divergence(model_path, inputs_path, tmp, cls, float64):
    """First node whose output differs between the CPU EP and the ReferenceEvaluator."""
    import onnx
    m = onnx.load(model_path)
    types = _types(m)
    order = [(o, i) for i, n in enumerate(m.graph.node) for o in n.output if o]
    exp = onnx.ModelProto()
    exp.CopyFrom(m)
    have = {o.name for o in m.graph.output}
    for o, _ in order:
        if o not in have:
            exp.graph.output.append(_typed_vi(types, o))
    exp_path = os.path.join(tmp, "exposed_ref.onnx")
    onnx.save(exp, exp_path)
    try:
        cpu = _ort_pair(exp_path, inputs_path, tmp, "expref", tags=("cpu",))["cpu"]
    except Exception as e:
        return {"status": "failed", "error": str(e)[:500]}
    spec = {"kind": "reference_intermediate", "tag": "refint", "tmp": tmp, "model": model_path,
            "inputs": inputs_path, "float64": float64, "outputs": os.path.join(tmp, "refint.npz")}
    r = run_worker(CPU_PY, spec, 120)
    if r["status"] != "ran":
        return {"status": "failed", "error": r.get("error", r["status"])[:500]}
    A = np.load(cpu["_out"])
    R = np.load(spec["outputs"])
    an, rn = cpu["output_names"], r["output_names"]
    arrays = {n: A[f"o{i}"] for i, n in enumerate(an)}
    for name, idx in order:
        if name in an and name in rn:
            c = compare(A[f"o{an.index(name)}"], R[f"o{rn.index(name)}"], cls)
            if not c["match"]:
                node = describe_node(m, idx, _shapes_of(m, inputs_path, arrays))
                node["diverging_output"] = name
                node["comparison"] = c
                return {"status": "ok", "node": node}
    return {"status": "no_divergent_tensor"}


def process(entry, models_dir, work, do_ref=True):
    mid = entry["id"]
    tmp = os.path.join(work, mid)
    os.makedirs(tmp, exist_ok=True)
    model_path = os.path.join(models_dir, entry["file"])
    rng = np.random.default_rng(SEED + zlib.crc32(mid.encode()))
    feeds = make_inputs(entry, rng)
    inputs_path = os.path.join(tmp, "inputs.npz")
    np.savez(inputs_path, **feeds)
    cls = tol_class(entry)
    rec = {"id": mid, "source": entry["source"], "source_family": entry["source_family"],
           "node_count": entry["node_count"], "node_count_with_subgraphs": entry["node_count_with_subgraphs"],
           "opsets": entry["opsets"], "tolerance_class": cls, "tolerance": TOLERANCES[cls],
           "inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
           "runs": {}, "compare": {}}
    timeouts = {"cpu": 180, "webgpu": 420, "webgpu_nofallback": 420, "cpu_1.27": 180}
    timeouts["cpu_noopt"] = 180
    for tag, (py, prov, cfg) in EP_RUNS.items():
        spec = {"kind": "ort", "tag": tag, "tmp": tmp, "model": model_path, "inputs": inputs_path,
                "providers": prov, "config": cfg, "outputs": os.path.join(tmp, f"out_{tag}.npz"),
                "disable_opt": tag in NOOPT_RUNS}
        r = run_worker(py, spec, timeouts[tag])
        r["_out"] = spec["outputs"]
        rec["runs"][tag] = r
        print(f"  {mid:34s} {tag:18s} {r['status']:12s} {r.get('profile', {}).get('nodes_per_ep', '')} "
              f"{r.get('wall_s')}s", flush=True)
    if do_ref:
        spec = {"kind": "reference", "tag": "reference", "tmp": tmp, "model": model_path, "inputs": inputs_path,
                "float64": True, "outputs": os.path.join(tmp, "out_reference.npz")}
        r = run_worker(CPU_PY, spec, 60)
        r["_out"] = spec["outputs"]
        rec["runs"]["reference"] = r
        print(f"  {mid:34s} {'reference':18s} {r['status']:12s} {r.get('mode', '')} {r.get('wall_s')}s", flush=True)
    cpu = rec["runs"]["cpu"]
    if cpu["status"] == "ran":
        for other in ("webgpu", "webgpu_nofallback", "cpu_1.27", "cpu_noopt", "reference"):
            o = rec["runs"].get(other)
            if o and o["status"] == "ran":
                if other == "reference":
                    rcls = cls if o.get("mode") == "float64" or cls != "fp32" else "fp32"
                    rec["compare"]["cpu_vs_reference"] = compare_outputs(cpu["_out"], cpu["output_names"],
                                                                         o["_out"], o["output_names"], rcls)
                else:
                    rec["compare"][f"{other}_vs_cpu"] = compare_outputs(o["_out"], o["output_names"], cpu["_out"],
                                                                        cpu["output_names"], cls)
    wg = rec["compare"].get("webgpu_vs_cpu")
    nw, no = rec["runs"]["webgpu"], rec["runs"].get("cpu_noopt")
    if wg is not None and not wg["match"] and nw["status"] == "ran" and no and no["status"] == "ran":
        rec["compare"]["webgpu_vs_cpu_noopt"] = compare_outputs(nw["_out"], nw["output_names"], no["_out"],
                                                                no["output_names"], cls)
    if wg is not None:
        if wg["match"]:
            rec["webgpu_verdict"] = "agrees with CPU"
        elif rec["compare"].get("webgpu_vs_cpu_noopt", {}).get("match"):
            rec["webgpu_verdict"] = ("disagrees with CPU at default optimizations but agrees with CPU with graph "
                                     "optimizations off: a CPU-side rewrite changes the numbers")
        else:
            ref_ok = rec["compare"].get("cpu_vs_reference", {}).get("match")
            rec["webgpu_verdict"] = "WebGPU disagrees with CPU" + (
                " (and CPU agrees with the reference evaluator)" if ref_ok else "")
    if mid in NOTES:
        rec["notes"] = NOTES[mid]
    if wg is not None and not wg["match"]:
        t0 = time.time()
        d = locate_divergence(entry, model_path, inputs_path, tmp, cls)
        if d["status"] == "failed":
            d2 = locate_divergence(entry, model_path, inputs_path, tmp, cls, disable_opt=True)
            d2["default_optimizations_attempt"] = d
            d = d2
        d["seconds"] = round(time.time() - t0, 1)
        rec["first_divergent_node"] = d.get("node")
        rec["divergence_search"] = {k: v for k, v in d.items() if k != "node"}
        print(f"  {mid:34s} first divergent node: {d.get('node', {}).get('name')} "
              f"{d.get('node', {}).get('op_type')} ({d['status']})", flush=True)
    cr = rec["compare"].get("cpu_vs_reference")
    if cr is not None and not cr["match"]:
        d = locate_reference_divergence(model_path, inputs_path, tmp, cr["tolerance"],
                                        rec["runs"]["reference"].get("mode") == "float64")
        rec["first_divergent_node_cpu_vs_reference"] = d.get("node")
        rec["reference_divergence_search"] = {k: v for k, v in d.items() if k != "node"}
        print(f"  {mid:34s} CPU vs reference diverges first at: {d.get('node', {}).get('name')} "
              f"{d.get('node', {}).get('op_type')} ({d['status']})", flush=True)
    for tag, r in rec["runs"].items():
        r.pop("_out", None)
        if "profile" in r and not tag.startswith("webgpu"):
            r["profile"].pop("placement", None)
    return rec


def _why(run):
    import re
    e = run.get("error", "")
    m = re.search(r"No registered implementation for operator '(\w+)' and domain '([\w.]+)'", e) or \
        re.search(r"Unable to find a kernel for op_type=(\w+), domain=([\w.]+)", e)
    if m:
        return f" ({m.group(2)}::{m.group(1)})"
    m = re.search(r"(\w+Error|\w+Exception)", e)
    return f" ({m.group(1)})" if m else ""


def fmt_cmp(c, run):
    if run is None:
        return "-"
    if run["status"] != "ran":
        return run["status"].upper().replace("_", " ") + _why(run)
    if c is None:
        return "?"
    worst = max((v.get("norm_err", 0.0) or 0.0) for v in c["outputs"].values()) if c["outputs"] else 0.0
    bad = [n for n, v in c["outputs"].items() if not v["match"]]
    if c["match"]:
        return f"match ({worst:.1e})"
    return f"**MISMATCH** {len(bad)}/{len(c['outputs'])} out ({worst:.1e})"


def write_md(records, path, meta):
    lines = ["# Whole-model truth: CPU EP (ORT 1.31.1) vs reference vs WebGPU EP (ORT 1.27.0, lavapipe)", "",
             f"Generated by `{meta['command']}` on {meta['date']} ({meta['seconds']} s). "
             "Tolerances: " + "; ".join(f"{k}: |d| <= max({v['atol']}*max|ref|, {v['floor']}) + {v['rtol']}*|ref|"
                                        for k, v in TOLERANCES.items())
             + ". Integer/string outputs must be equal. The number in brackets is the worst "
               "max|d|/max|ref| over the outputs.", "",
             "| model | source | nodes | CPU vs reference | WebGPU vs CPU | nodes on WebGPU / on CPU "
             "| WebGPU, fallback off | CPU 1.27 vs CPU 1.31 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        cpu = r["runs"]["cpu"]
        wg = r["runs"]["webgpu"]
        ref = r["runs"].get("reference")
        refs = fmt_cmp(r["compare"].get("cpu_vs_reference"), ref)
        if ref and ref["status"] == "ran":
            refs += f" [{ref.get('mode')}]"
        if cpu["status"] != "ran":
            refs = "CPU " + cpu["status"]
        p = wg.get("profile", {}).get("nodes_per_ep", {})
        place = f"{p.get('WebGpuExecutionProvider', 0)} / {p.get('CPUExecutionProvider', 0)}" if p else "-"
        nf = r["runs"]["webgpu_nofallback"]
        nfs = ("loads, " + fmt_cmp(r["compare"].get("webgpu_nofallback_vs_cpu"), nf)) if nf["status"] == "ran" \
            else nf["status"].replace("_", " ")
        nodes = str(r["node_count"]) + (f" ({r['node_count_with_subgraphs']})"
                                        if r["node_count_with_subgraphs"] != r["node_count"] else "")
        lines.append(f"| {r['id']} | {r['source_family']} | {nodes} | {refs} | "
                     f"{fmt_cmp(r['compare'].get('webgpu_vs_cpu'), wg)} | {place} | {nfs} | "
                     f"{fmt_cmp(r['compare'].get('cpu_1.27_vs_cpu'), r['runs']['cpu_1.27'])} |")
    lines += ["", "nodes: top-level node count (with If/Loop subgraph nodes in brackets). Placement counts "
                  "are distinct node names in the profile (after ORT's graph rewrites: fused, layout-"
                  "transformed and Memcpy nodes included).", "", "## WebGPU disagreements", ""]
    for r in records:
        if r["compare"].get("webgpu_vs_cpu", {}).get("match", True):
            continue
        c = r["compare"]["webgpu_vs_cpu"]
        lines.append(f"### {r['id']}")
        lines.append(f"* verdict: {r.get('webgpu_verdict')}")
        for n, v in c["outputs"].items():
            if not v["match"]:
                lines.append(f"* output `{n}`: max abs {v.get('max_abs')}, max rel {v.get('max_rel')}, "
                             f"norm {v.get('norm_err')}, mismatched {v.get('mismatched')}/{v.get('size')} "
                             f"{v.get('reason', '')}")
        fd = r.get("first_divergent_node")
        ds = r.get("divergence_search", {})
        if fd:
            cc = fd["comparison"]
            lines.append(f"* first divergent node: `{fd['name']}` ({fd['domain']}::{fd['op_type']}), output "
                         f"`{fd['diverging_output']}`, ran on {fd['ran_on']}"
                         + (f", inside {fd['inside_subgraph_of']}" if fd.get('inside_subgraph_of') else "")
                         + f"; max abs "
                         f"{cc.get('max_abs')}, norm {cc.get('norm_err')}, mismatched {cc.get('mismatched')}/"
                         f"{cc.get('size')} {cc.get('reason', '')}; attributes {fd['attributes']}; inputs "
                         f"{fd['input_shapes_dtypes']} (search: {ds.get('method')}, {ds.get('graph_optimizations')} "
                         f"optimizations, {ds.get('tensors_compared')} tensors compared"
                         + (f", {ds.get('probes')} truncation probes" if ds.get('probes') else "") + ")")
        else:
            lines.append(f"* first divergent node not found: {ds}")
        if r.get("notes"):
            lines.append(f"* note (hand check): {r['notes']}")
        lines.append("")
    lines += ["## CPU vs reference disagreements", ""]
    for r in records:
        if r["compare"].get("cpu_vs_reference", {}).get("match", True):
            continue
        fd = r.get("first_divergent_node_cpu_vs_reference") or {}
        lines.append(f"* **{r['id']}**: first divergent node `{fd.get('name')}` ({fd.get('domain')}::"
                     f"{fd.get('op_type')}), norm {fd.get('comparison', {}).get('norm_err')}. "
                     + (f"Note: {r['notes']}" if r.get("notes") else ""))
    lines.append("")
    open(path, "w").write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=None)
    ap.add_argument("--manifest", default=os.path.join(HERE, "models", "manifest.json"))
    ap.add_argument("--only", action="append", default=None)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--work", default=None, help="scratch folder (default OUT/truth_work)")
    ap.add_argument("--no-reference", action="store_true")
    a = ap.parse_args(argv)
    if a.worker:
        worker_main(a.worker)
        return 0
    man = json.load(open(a.manifest))
    models_dir = os.path.dirname(os.path.abspath(a.manifest))
    work = a.work or os.path.join(a.out, "truth_work")
    os.makedirs(work, exist_ok=True)
    tpath = os.path.join(a.out, "truth.json")
    old = {}
    if a.only and os.path.exists(tpath):
        old = {r["id"]: r for r in json.load(open(tpath))["models"]}
    t0 = time.time()
    for e in man["models"]:
        if a.only and not any(fnmatch.fnmatch(e["id"], g) for g in a.only):
            continue
        t1 = time.time()
        rec = process(e, models_dir, work, do_ref=not a.no_reference)
        rec["seconds"] = round(time.time() - t1, 1)
        old[e["id"]] = rec
        records = sorted(old.values(), key=lambda r: r["id"])
        meta = {"command": "/work/snap/venv/bin/python " + " ".join([os.path.abspath(__file__)] + (argv or sys.argv[1:])),
                "date": time.strftime("%Y-%m-%d %H:%M"), "seconds": round(time.time() - t0)}
        doc = {"schema": "epaudit-whole-model-truth/1", "manifest": os.path.abspath(a.manifest),
               "tolerances": TOLERANCES, "seed": SEED, "interpreters": {"cpu": CPU_PY, "webgpu": WEBGPU_PY},
               "ep_runs": {k: {"python": v[0], "providers": v[1], "config": v[2]} for k, v in EP_RUNS.items()},
               "meta": meta, "models": records}
        json.dump(doc, open(tpath, "w"), indent=1)
        write_md(records, os.path.join(a.out, "truth.md"), meta)
    print(f"done in {time.time() - t0:.0f} s -> {tpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
