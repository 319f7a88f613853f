"""The float64 reference of a one-node probe model, whatever its operator.

Where the reference comes from, in order:

1. **epaudit's own reference of a contrib operator**: every catalog module that exposes a
   module-level :class:`epaudit.catalog._contrib.Op` (operator, schema input and output
   names, ``reference(values, attrs)``) gives node probes to its operator; so do the
   adapters below for references written without one (``MatMulNBits``,
   ``GatherBlockQuantized``). A contrib family whose catalog module declares an ``Op``
   gains node probes with no change here.
2. **An override** of an ``onnx.reference`` implementation that is wrong
   (:data:`OVERRIDES`, each with the spec clause that decides).
3. **``onnx.reference.ReferenceEvaluator``** for ai.onnx and ai.onnx.ml, on a float64 twin
   of the model (every float16 / float32 tensor of the graph made double) where the
   evaluator accepts it, else on the model as it is (the node's dtype: the tolerance is
   then widened by :data:`NATIVE_WIDENING`, and the probe says so).

Operators whose evaluator implementation is known to be wrong and that have no override
are refused (:data:`KNOWN_WRONG`): no probe is better than a probe that fails a correct EP.
Each evaluation runs under a CPU-time limit (:data:`EVAL_SECONDS`, ``ITIMER_PROF``) where
the caller is the main thread.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable, Mapping

import numpy as np

#: CPU seconds one reference evaluation may take.
EVAL_SECONDS = 10.0
#: Tolerance factor when the evaluator computed in the node's own dtype.
NATIVE_WIDENING = 2.0

Reference = Callable[[Mapping[str, np.ndarray], Mapping[str, object]], Mapping[str, np.ndarray]]


class NoReference(Exception):
    """No trustworthy reference for this node; ``str()`` says why in a few words."""


class _Timeout(Exception):
    pass


def _batchnorm_inference(values, attrs):
    """BatchNormalization in inference mode (``training_mode`` 0, the only mode before
    opset 14): ``Y = (X - input_mean) / sqrt(input_var + epsilon) * scale + B``
    (onnx docs/Operators.md BatchNormalization). onnx 1.23's ``BatchNormalization_9``
    computes batch statistics whenever ``momentum`` is set (``_batchnorm_training_mode``),
    although opset 9-13 define no training mode: off by 0.1-0.4 on the corpus' PP-OCR models."""
    x = np.asarray(values["X"], np.float64)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    s, b, m, v = (np.asarray(values[k], np.float64).reshape(shape) for k in ("scale", "B", "input_mean", "input_var"))
    eps = float(attrs.get("epsilon", 1e-5))
    return {"Y": (x - m) / np.sqrt(v + eps) * s + b}


#: (op_type, since_version) -> the opset whose onnx.reference implementation computes the
#: same thing: onnx 1.23 implements DequantizeLinear / QuantizeLinear from version 19 only,
#: and version 19 adds the float8 types (and ``saturate``, which applies to float8 only) to
#: versions 10 and 13 (onnx docs/Changelog.md), nothing for the integer types.
STAND_IN = {("DequantizeLinear", 10): 19, ("DequantizeLinear", 13): 19, ("QuantizeLinear", 10): 19,
            ("QuantizeLinear", 13): 19}

def _conv(values, attrs):
    """Conv (ai.onnx Conv-1/11/22; the three differ in types only) by sliding windows and one
    einsum per group, float64: ``Y[n, g*Mg + m, o] = sum_{c, k} X_pad[n, g*Cg + c, o*s + k*d]
    * W[g*Mg + m, c, k] + B[g*Mg + m]`` (onnx docs/Operators.md Conv; ``auto_pad`` SAME_UPPER
    puts the odd padding at the end, SAME_LOWER at the start). onnx.reference's loops take
    seconds on a 416x416 image; this is checked against it (tests/test_scan_probes.py)."""
    from numpy.lib.stride_tricks import sliding_window_view

    x = np.asarray(values["X"], np.float64)
    w = np.asarray(values["W"], np.float64)
    nd = x.ndim - 2
    group = int(attrs.get("group", 1) or 1)
    k = list(w.shape[2:])
    strides = list(attrs.get("strides") or [1] * nd)
    dil = list(attrs.get("dilations") or [1] * nd)
    pads = list(attrs.get("pads") or [0] * (2 * nd))
    auto = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            out = -(-x.shape[2 + i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 - x.shape[2 + i])
            small, large = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, large) if auto == "SAME_UPPER" else (large, small)
    elif auto == "VALID":
        pads = [0] * (2 * nd)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    span = [(k[i] - 1) * dil[i] + 1 for i in range(nd)]
    win = sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, strides[i]) for i in range(nd))
              + tuple(slice(None, None, dil[i]) for i in range(nd))]
    n, c = x.shape[:2]
    m = w.shape[0]
    outs = win.shape[2:2 + nd]
    win = win.reshape((n, group, c // group) + outs + tuple(k))
    wg = w.reshape((group, m // group, c // group) + tuple(k))
    letters = "ABCDEF"[:nd]
    kern = "uvwxyz"[:nd]
    y = np.einsum(f"ngc{letters}{kern},gmc{kern}->ngm{letters}", win, wg, optimize=True)
    y = y.reshape((n, m) + outs)
    if values.get("B") is not None:
        y = y + np.asarray(values["B"], np.float64).reshape((1, m) + (1,) * nd)
    return {"Y": y}


def _global_max_pool(values, attrs):
    """GlobalMaxPool: ``Y[n, c, 1, ...] = max over every spatial axis of X[n, c, ...]``
    (onnx docs/Operators.md GlobalMaxPool). onnx 1.23's ``_global_max_pool`` reduces axes
    ``(ndim - 2, ndim - 1)``, right for 4-D inputs only: a 3-D input loses its channels
    (``(2, 3, 5) -> (2, 1)``), a 5-D one keeps a spatial axis."""
    x = np.asarray(values["X"], np.float64)
    return {"Y": x.max(axis=tuple(range(2, x.ndim)), keepdims=True)}


def _max_pool(values, attrs):
    """MaxPool with one output, no ``ceil_mode`` and no ``auto_pad``: the maximum over each
    (dilated) window, padding counted as -inf (onnx docs/Operators.md MaxPool). By sliding
    windows; onnx.reference's loops take seconds on a large feature map. Anything else
    raises, and the evaluator is used instead."""
    from numpy.lib.stride_tricks import sliding_window_view

    if int(attrs.get("ceil_mode", 0) or 0) or (attrs.get("auto_pad") or "NOTSET") != "NOTSET" \
            or int(attrs.get("storage_order", 0) or 0):
        raise NotImplementedError("the evaluator handles this MaxPool")
    x = np.asarray(values["X"], np.float64)
    nd = x.ndim - 2
    k = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1] * nd)
    dil = list(attrs.get("dilations") or [1] * nd)
    pads = list(attrs.get("pads") or [0] * (2 * nd))
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)], constant_values=-np.inf)
    span = [(k[i] - 1) * dil[i] + 1 for i in range(nd)]
    win = sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, strides[i]) for i in range(nd))
              + tuple(slice(None, None, dil[i]) for i in range(nd))]
    return {"Y": win.max(axis=tuple(range(2 + nd, 2 + 2 * nd)))}


_CONV = (("X", "W", "B"), ("Y",))
#: (domain, op_type, since_version) -> an own implementation for speed, checked against
#: onnx.reference in the tests (same entries as :data:`OVERRIDES`).
FAST = {**{("", "Conv", v): (_conv, *_CONV) for v in (1, 11, 22)},
        **{("", "MaxPool", v): (_max_pool, ("X",), ("Y", "Indices")) for v in (8, 10, 11, 12, 22)}}

_BN = (("X", "scale", "B", "input_mean", "input_var"), ("Y",))
#: (domain, op_type, since_version) -> (own reference, input names, output names), by position.
OVERRIDES: dict[tuple[str, str, int], tuple[Reference, tuple[str, ...], tuple[str, ...]]] = {
    ("", "BatchNormalization", 9): (_batchnorm_inference, *_BN),
    ("", "BatchNormalization", 7): (_batchnorm_inference, *_BN),
    ("", "GlobalMaxPool", 1): (_global_max_pool, ("X",), ("Y",)),
    **FAST,
}
#: (domain, op_type) -> why the evaluator cannot be trusted (no override exists).
KNOWN_WRONG: dict[tuple[str, str], str] = {
    ("ai.onnx.ml", "SVMClassifier"): "onnx.reference's SVMClassifier probabilities differ from the spec's "
                                     "Platt scaling by up to 0.12 (corpus skl_svc_rbf; scikit-learn and ORT CPU agree)",
    ("ai.onnx.ml", "ZipMap"): "a map output: no tensor to compare",
    ("com.microsoft", "DynamicQuantizeLSTM"): "epaudit's reference does not model the kernel's on-the-fly uint8 "
                                              "quantization of X and H (epaudit/reference/lstm.py): its error grows "
                                              "with the node's own sizes; the catalog's probes bound it at theirs",
}


def _matmulnbits(values, attrs):
    from ..reference.matmulnbits import matmulnbits_reference

    y = matmulnbits_reference(values["A"], values["B"], values["scales"], k=int(attrs["K"]), n=int(attrs["N"]),
                              bits=int(attrs.get("bits", 4)), block_size=int(attrs["block_size"]),
                              zero_points=values.get("zero_points"), g_idx=values.get("g_idx"),
                              bias=values.get("bias"))
    return {"Y": y}


def _gather_block_quantized(values, attrs):
    from ..reference.gatherblockquantized import default_zero_point, gather_block_quantized_reference

    data = values["data"]
    kind = {np.dtype(np.uint8): "uint8"}.get(np.asarray(data).dtype, "int4")
    bits = int(attrs.get("bits", 4))
    y = gather_block_quantized_reference(data, values["indices"], values["scales"],
                                         gather_axis=int(attrs.get("gather_axis", 0)),
                                         quantize_axis=int(attrs.get("quantize_axis", 1)),
                                         block_size=int(attrs.get("block_size", 128)),
                                         zero_points=values.get("zero_points"),
                                         default_zp=default_zero_point(kind, bits))
    return {"output": y}


#: Contrib operators with a reference written without a catalog ``Op``: (reference,
#: input names, output names), by position.
ADAPTERS: dict[tuple[str, str], tuple[Reference, tuple[str, ...], tuple[str, ...]]] = {
    ("com.microsoft", "MatMulNBits"): (_matmulnbits, ("A", "B", "scales", "zero_points", "g_idx", "bias"), ("Y",)),
    ("com.microsoft", "GatherBlockQuantized"): (_gather_block_quantized, ("data", "indices", "scales", "zero_points"),
                                                ("output",)),
}


def _operator_like(value) -> bool:
    """A catalog's operator declaration: ``_contrib.Op``, ``_xcase.XOp``, ``_qgraph.QOp`` or
    any object with the same five fields (op_type, domain, inputs, outputs, reference)."""
    return all(hasattr(value, k) for k in ("op_type", "domain", "inputs", "outputs", "reference")) \
        and callable(getattr(value, "reference")) and isinstance(getattr(value, "inputs"), tuple)


def contrib_references() -> dict[tuple[str, str], tuple[Reference, tuple[str, ...], tuple[str, ...]]]:
    """(domain, op_type) -> (reference, schema input names, output names) of every contrib
    operator epaudit has a reference for: the operator declarations of the catalog modules
    (module-level ``Op`` / ``XOp`` / ``QOp`` objects, or any with their fields, also inside
    module-level tuples, lists and dicts), then :data:`ADAPTERS`. A contrib family whose
    catalog module declares its operator this way gains node probes with no change here."""
    global _CONTRIB
    if _CONTRIB is not None:
        return _CONTRIB
    import importlib
    import pkgutil

    from .. import catalog

    out: dict = {}
    for info in pkgutil.iter_modules(catalog.__path__):
        if info.ispkg or info.name.endswith("_graph") or info.name in ("models", "quantmodels"):
            continue
        try:
            mod = importlib.import_module(f"{catalog.__name__}.{info.name}")
        except Exception:  # noqa: BLE001 - a broken family module gives no references
            continue
        for value in vars(mod).values():
            for v in (value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list))
                      else (value,)):
                if _operator_like(v):
                    domain = "" if v.domain in ("", "ai.onnx") else v.domain
                    out.setdefault((domain, v.op_type), (v.reference, tuple(v.inputs), tuple(v.outputs)))
    for key, entry in ADAPTERS.items():
        out.setdefault(key, entry)
    _CONTRIB = out
    return out


_CONTRIB: dict | None = None


def positional(entry: tuple[Reference, tuple[str, ...], tuple[str, ...]], inputs: tuple[str | None, ...],
               outputs: tuple[str | None, ...]) -> Reference:
    """``entry``'s reference taking the probe's inputs and giving its outputs by position
    (the probe names them by the node's schema, which may not be the reference's)."""
    ref, names_in, names_out = entry

    def call(values, attrs):
        v = {names_in[i]: values[k] for i, k in enumerate(inputs) if k and k in values and i < len(names_in)}
        got = ref(v, attrs)
        return {outputs[i]: got[n] for i, n in enumerate(names_out) if i < len(outputs) and outputs[i] and n in got}
    return call


def _alarm(signum, frame):  # pragma: no cover - fires inside the evaluator
    raise _Timeout()


def _limited(fn, *args):
    main = threading.current_thread() is threading.main_thread()
    if main:
        old = signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_PROF, EVAL_SECONDS)
    try:
        return fn(*args)
    except _Timeout:
        raise NoReference(f"the reference took over {EVAL_SECONDS:g} s of CPU") from None
    finally:
        if main:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, old)


_FLOATS = (1, 10)  # FLOAT, FLOAT16: made DOUBLE in the twin


def _twin(model):
    """A float64 copy of a one-node ``model`` (ModelProto), or ``None`` when it has no
    float32/float16 tensor to widen."""
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    changed = False
    for vi in list(m.graph.input) + list(m.graph.output):
        tt = vi.type.tensor_type
        if tt.elem_type in _FLOATS:
            tt.elem_type = 11
            changed = True
    for i, init in enumerate(m.graph.initializer):
        if init.data_type in _FLOATS:
            arr = numpy_helper.to_array(init).astype(np.float64)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, init.name))
            changed = True
    return m if changed else None


def evaluate(model, feeds: Mapping[str, np.ndarray], ref: Reference | None = None,
             attrs: Mapping[str, object] | None = None, since: int | None = None
             ) -> tuple[dict[str, np.ndarray], bool]:
    """Outputs of a one-node ``model`` (ModelProto) on ``feeds``, float64 where float, and
    whether they were computed in float64 (``False``: in the node's own dtype).

    The probe model names its graph inputs and outputs by the operator's schema names, so
    ``ref`` (a contrib reference or an override, ``(values, attrs) -> outputs``) takes the
    feeds and initializers by those names.

    Raises:
        NoReference: the reference refused the configuration, the evaluator raised or timed
            out, or an output is not a tensor.
    """
    from onnx import numpy_helper

    if ref is not None:
        values = {k: np.asarray(v) for k, v in feeds.items()}
        for init in model.graph.initializer:
            values[init.name] = numpy_helper.to_array(init)
        values = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in values.items()}
        try:
            got = _limited(ref, values, dict(attrs or {}))
        except NoReference:
            raise
        except Exception as exc:  # noqa: BLE001 - the reference refuses the configuration
            raise NoReference(f"epaudit's reference refused it ({type(exc).__name__}: {str(exc)[:120]})") from None
        wanted = {vi.name for vi in model.graph.output}
        return _tensors({k: v for k, v in got.items() if k in wanted}), True
    from onnx.reference import ReferenceEvaluator

    def run(m, f):
        try:
            got = ReferenceEvaluator(m).run(None, dict(f))
        except RuntimeError as exc:
            node = m.graph.node[-1]
            stand_in = STAND_IN.get((node.op_type, since))
            if "No implementation" not in str(exc) or stand_in is None:
                raise
            import onnx

            m2 = onnx.ModelProto()
            m2.CopyFrom(m)
            for o in m2.opset_import:
                if o.domain in ("", "ai.onnx"):
                    o.version = stand_in
            got = ReferenceEvaluator(m2).run(None, dict(f))
        return {vi.name: v for vi, v in zip(m.graph.output, got)}

    twin = _twin(model)
    if twin is not None:
        f64 = {k: (np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v) for k, v in feeds.items()}
        try:
            got = _limited(run, twin, f64)
            return _tensors(got), True
        except NoReference:
            raise
        except Exception:  # noqa: BLE001 - the float64 twin is refused: the node's own dtype
            pass
    try:
        got = _limited(run, model, feeds)
    except NoReference:
        raise
    except Exception as exc:  # noqa: BLE001 - the evaluator's failure is the reason
        raise NoReference(f"onnx.reference raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}") from None
    return _tensors(got), twin is None and _all_float64(model)


def _all_float64(model) -> bool:
    return not any(vi.type.tensor_type.elem_type in (1, 10, 16) for vi in list(model.graph.input)
                   + list(model.graph.output))


def _tensors(got: Mapping[str, object]) -> dict[str, np.ndarray]:
    out = {}
    for name, v in got.items():
        if isinstance(v, (list, dict)) or v is None:
            raise NoReference("an output is a sequence or a map, not a tensor")
        a = np.asarray(v)
        if a.dtype == object or a.dtype.kind in "USO":
            raise NoReference("a string output")
        out[name] = a.astype(np.float64) if a.dtype.kind == "f" else a
    return out
