"""Probes for the com.microsoft QLinear elementwise operators (version 1): ``QLinearAdd``,
``QLinearMul``, ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearSoftmax``, ``QLinearWhere``
and ``QLinearConcat``.

Data tensors ((2, 4, 8) unless a feature says otherwise) are fed; scales and zero points are
constants, as quantized models store them. References: :mod:`epaudit.reference.qlinear`
(dequantize, float64 operation, round half to even, saturate). The tolerance is one
quantization step (``_qgraph.STEP``) for every output here: the CPU kernels compute in float32
through lookup tables or fixed-point multipliers and may land one step from the exactly
rounded value (measured per operator in ``docs/contrib-qlinear-attention-moe.md``); the
separation self-check then asks subject and control to differ by 10 steps or more.

Controls: the operator itself bakes in a neutral operand (QLinearAdd/Mul: B held at its zero
point, so it contributes 0 / multiplies by 0; the unary ops and softmax: a zero input scale,
so every input dequantizes to 0; QLinearWhere: an all-true condition; QLinearConcat: the
second tensor held at its zero point); an optional zero point is dropped (documented
default 0); an attribute is reset to its default.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference.qlinear import (
    RANGES,
    qlinear_binary,
    qlinear_concat,
    qlinear_softmax,
    qlinear_unary,
    qlinear_where,
)
from . import _contrib as c
from ._qgraph import STEP, QGraph, QOp, const, probe

SHAPE = (2, 4, 8)
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_DIR = "onnxruntime/contrib_ops/cpu/quantization/"
#: Zero points per type: A, B, C (or X, Y).
_ZPS = {"uint8": (120, 135, 128), "int8": (-8, 7, 3)}


def _data(rng: np.random.Generator, dtype: str, shape=SHAPE) -> np.ndarray:
    lo, hi = RANGES[dtype]
    return rng.integers(lo, hi + 1, size=shape).astype(np.dtype(dtype))


def _zp(dtype: str, i: int) -> np.ndarray:
    return const(_ZPS[dtype][i], dtype)


def _f32(v: float) -> np.ndarray:
    return const(v, "float32")


def _opt(values, name):
    return values.get(name, 0)


# --- QLinearAdd / QLinearMul ----------------------------------------------------------

_BIN_IN = ("A", "A_scale", "A_zero_point", "B", "B_scale", "B_zero_point", "C_scale", "C_zero_point")


def _binary_op(name: str, kind: str, dtype: str) -> QOp:
    def ref(v, attrs):
        return {"C": qlinear_binary(kind, v["A"], v["A_scale"], _opt(v, "A_zero_point"), v["B"], v["B_scale"],
                                    _opt(v, "B_zero_point"), v["C_scale"], _opt(v, "C_zero_point"), dtype)}
    return QOp(name, "com.microsoft", 1, _BIN_IN, ("C",), ref)


#: Scales: Add keeps the sum inside the output range; Mul's C scale covers the product.
_BIN_SCALES = {"add": (0.05, 0.08, 0.1), "mul": (0.05, 0.08, 0.6)}


def _binary_graph(kind: str, dtype: str, seed: int, b_shape=SHAPE) -> QGraph:
    rng = np.random.default_rng(seed)
    sa, sb, sc = _BIN_SCALES[kind]
    consts = {"A_scale": _f32(sa), "A_zero_point": _zp(dtype, 0), "B_scale": _f32(sb), "B_zero_point": _zp(dtype, 1),
              "C_scale": _f32(sc), "C_zero_point": _zp(dtype, 2)}
    return QGraph({}, {"A": _data(rng, dtype), "B": _data(rng, dtype, b_shape)}, {"C": dtype}, consts)


def _b_at_zero(g: QGraph, dtype: str) -> QGraph:
    return g.baked(B=np.full(np.shape(g.feeds["B"]), _ZPS[dtype][1], dtype=np.dtype(dtype)))


def _build_binary(name: str, kind: str, fid: str, dtype: str, seed: int, *, drop: str | None = None,
                  b_shape=SHAPE) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _binary_graph(kind, dtype, seed, b_shape)
        control = g.baked(**{drop: const(0, dtype)}) if drop else _b_at_zero(g, dtype)
        return probe(_binary_op(name, kind, dtype), fid, g, control, STEP, dtype)
    return build


def _build_binary_omitted(name: str, kind: str, fid: str, zp: str, seed: int) -> Callable[[], Probe]:
    """``zp`` (a middle input) written as "" (documented default 0); control sets it. ORT's
    schema inference (``core/graph/contrib_ops/quantization_defs.cc``
    ``ValidateTypeAndShapeForScaleAndZP``) fails on an input slot that exists without a type."""
    def build() -> Probe:
        g = _binary_graph(kind, "uint8", seed)
        return probe(_binary_op(name, kind, "uint8"), fid, g.without(zp), g, STEP, "uint8")
    return build


def _binary_features(name: str, kind: str, seed: int) -> tuple:
    p = name.lower()
    op = _binary_op(name, kind, "uint8")
    doc, src = f"{_DOC}{name}", f"{_DIR}qlinear_binary_op.cc; core/mlas/lib/{'qladd' if kind == 'add' else 'qlmul'}.cpp"
    formula = ("C = (A_scale(A-A_zp) + B_scale(B-B_zp))/C_scale + C_zp" if kind == "add"
               else "C = (A-A_zp)(B-B_zp) A_scale B_scale/C_scale + C_zp")
    out = [_f(op, f"{p}.{d}", d, f"{formula}, {d} (2,4,8), every zero point set; control bakes in B at its zero point",
              f"{doc}; {src}", _build_binary(name, kind, f"{p}.{d}", d, seed + i)) for i, d in enumerate(("uint8", "int8"))]
    for i, (zp, what) in enumerate((("A_zero_point", "A"), ("B_zero_point", "B"), ("C_zero_point", "C"))):
        fid = f"{p}.{zp.lower()}"
        out.append(_f(op, fid, "uint8", f"{what}'s zero point {_ZPS['uint8'][i]} (uint8); control sets it to 0 "
                      "(the documented default)", f"{doc}: input '{zp}'; {src}",
                      _build_binary(name, kind, fid, "uint8", seed + 2 + i, drop=zp), Use(inputs=(zp,))))
    zp = "A_zero_point" if kind == "add" else "B_zero_point"
    out.append(_f(op, f"{p}.{zp.lower()}.omitted", "uint8",
                  f"{zp} left out (\"\": default 0), the other zero points set; control sets it",
                  f"{doc}: input '{zp}' optional; onnxruntime/core/graph/contrib_ops/quantization_defs.cc",
                  _build_binary_omitted(name, kind, f"{p}.{zp.lower()}.omitted", zp, seed + 7), Use(absent=(zp,))))
    out.append(_f(op, f"{p}.broadcast", "uint8", "B (8) broadcast over A (2,4,8); control bakes in B at its zero point",
                  f"{doc}: numpy-style broadcasting; {src} (BroadcastLooper)",
                  _build_binary(name, kind, f"{p}.broadcast", "uint8", seed + 5, b_shape=(8,)), Use(facts={"broadcast": True})))
    out.append(_f(op, f"{p}.scalar", "int8", "B of one element (1) against A (2,4,8) (the scalar-operand kernel path); "
                  "control bakes in B at its zero point", f"{doc}; {src} (ScalarInput1 path)",
                  _build_binary(name, kind, f"{p}.scalar", "int8", seed + 6, b_shape=(1,)), Use(facts={"broadcast": True})))
    return tuple(out)


# --- QLinearSigmoid / QLinearLeakyRelu -------------------------------------------------

_UN_IN = ("X", "X_scale", "X_zero_point", "Y_scale", "Y_zero_point")
#: (X scale, Y scale) per op: sigmoid's output lies in (0, 1).
_UN_SCALES = {"sigmoid": (0.04, 1.0 / 256), "leaky_relu": (0.05, 0.04)}


def _unary_op(name: str, kind: str, dtype: str) -> QOp:
    def ref(v, attrs):
        return {"Y": qlinear_unary(kind, v["X"], v["X_scale"], _opt(v, "X_zero_point"), v["Y_scale"],
                                   _opt(v, "Y_zero_point"), dtype, **attrs)}
    return QOp(name, "com.microsoft", 1, _UN_IN, ("Y",), ref)


def _unary_graph(kind: str, dtype: str, seed: int, attrs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    sx, sy = _UN_SCALES[kind]
    y_zp = {"sigmoid": {"uint8": 0, "int8": -128}, "leaky_relu": {"uint8": 100, "int8": -20}}[kind][dtype]
    consts = {"X_scale": _f32(sx), "X_zero_point": _zp(dtype, 0), "Y_scale": _f32(sy), "Y_zero_point": const(y_zp, dtype)}
    # Every input spelled out: an absent Y_zero_point is written as "" (see _build_omitted).
    return QGraph(dict(attrs or {}), {"X": _data(rng, dtype)}, {"Y": dtype}, consts, spell_out=True)


def _build_unary(name: str, kind: str, fid: str, dtype: str, seed: int, *, drop: str | None = None,
                 attrs=None, reset: tuple[str, ...] = ()) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _unary_graph(kind, dtype, seed, attrs)
        if reset:
            control = g.without(attrs=reset)
        elif drop:
            control = g.baked(**{drop: const(0, dtype)})
        else:
            control = g.baked(X_scale=_f32(0.0))
        return probe(_unary_op(name, kind, dtype), fid, g, control, STEP, dtype)
    return build


def _build_omitted(name: str, kind: str, fid: str, seed: int) -> Callable[[], Probe]:
    """Y_zero_point left off the end of the input list (4 inputs, not 5 with a ""): the
    documented default 0; control sets it. The CPU kernel's constructor reads
    ``InputDefs()[4]`` without checking the list's length (``qlinear_activations.cc``
    ``BuildLookupTableIfFixed``)."""
    dtype = "int8" if kind == "sigmoid" else "uint8"  # sigmoid's uint8 output zero point is 0 already

    def build() -> Probe:
        g = _unary_graph(kind, dtype, seed)
        subject = replace(g.without("Y_zero_point"), spell_out=False)
        return probe(_unary_op(name, kind, dtype), fid, subject, g, STEP, dtype)
    return build


def _unary_features(name: str, kind: str, seed: int) -> tuple:
    p = name.lower()
    op = _unary_op(name, kind, "uint8")
    doc, src = f"{_DOC}{name}", f"{_DIR}qlinear_activations.cc; {_DIR}qlinear_lookup_table.cc"
    f = "sigmoid" if kind == "sigmoid" else "leaky relu (alpha 0.01)"
    out = [_f(op, f"{p}.{d}", d, f"quantize({f}(dequantize(X))), {d} (2,4,8); control bakes in X_scale 0",
              f"{doc}; {src}", _build_unary(name, kind, f"{p}.{d}", d, seed + i)) for i, d in enumerate(("uint8", "int8"))]
    for i, zp in enumerate(("X_zero_point", "Y_zero_point")):
        fid = f"{p}.{zp.lower()}"
        d = "int8" if kind == "sigmoid" else "uint8"  # sigmoid's uint8 output zero point is 0 already
        out.append(_f(op, fid, d, f"{zp} set ({d}); control sets it to 0 (the documented default)",
                      f"{doc}: input '{zp}'; {src}",
                      _build_unary(name, kind, fid, d, seed + 2 + i, drop=zp), Use(inputs=(zp,))))
    out.append(_f(op, f"{p}.y_zero_point.omitted", "int8" if kind == "sigmoid" else "uint8",
                  "Y_zero_point left off the end of the input list (4 inputs: default 0); control sets it",
                  f"{doc}: input 'Y_zero_point' optional; {_DIR}qlinear_activations.cc BuildLookupTableIfFixed",
                  _build_omitted(name, kind, f"{p}.y_zero_point.omitted", seed + 4), Use(absent=("Y_zero_point",))))
    return tuple(out)


# --- QLinearSoftmax -------------------------------------------------------------------

_SM_IN = ("X", "X_scale", "x_zero_point", "y_scale", "y_zero_point")


def _softmax_op(dtype: str) -> QOp:
    def ref(v, attrs):
        return {"Y": qlinear_softmax(v["X"], v["X_scale"], _opt(v, "x_zero_point"), v["y_scale"], v["y_zero_point"],
                                     dtype, opset=int(attrs["opset"]), axis=attrs.get("axis"))}
    return QOp("QLinearSoftmax", "com.microsoft", 1, _SM_IN, ("Y",), ref)


def _softmax_graph(dtype: str, seed: int, attrs) -> QGraph:
    # x_scale 0.02 over 256 codes: logits spread over ~5, no row's largest share reaches 1
    # (an int8 share of 255.5/256 would need saturation at 127).
    rng = np.random.default_rng(seed)
    consts = {"X_scale": _f32(0.02), "x_zero_point": _zp(dtype, 0), "y_scale": _f32(1.0 / 256),
              "y_zero_point": const(0 if dtype == "uint8" else -128, dtype)}
    return QGraph(dict(attrs), {"X": _data(rng, dtype)}, {"Y": dtype}, consts)


def _build_softmax(fid: str, dtype: str, seed: int, attrs, control_attrs=None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _softmax_graph(dtype, seed, attrs)
        # Control of the operator itself: X_scale 2^-12 (logits within 0.06: rows ~uniform, 32
        # of 256 each); a zero scale would send the kernel's exp table to infinity.
        control = g.with_attrs(**control_attrs) if control_attrs else g.baked(X_scale=_f32(2.0 ** -12))
        if control_attrs and "axis" in control_attrs and control_attrs["axis"] is None:
            control = g.without(attrs=("axis",))
        return probe(_softmax_op(dtype), fid, g, control, STEP, dtype)
    return build


# --- QLinearWhere ---------------------------------------------------------------------

_WH_IN = ("condition", "X", "x_scale", "x_zero_point", "Y", "y_scale", "y_zero_point", "z_scale", "z_zero_point")


def _where_op(dtype: str) -> QOp:
    def ref(v, attrs):
        return {"Z": qlinear_where(v["condition"], v["X"], v["x_scale"], v["x_zero_point"], v["Y"], v["y_scale"],
                                   v["y_zero_point"], v["z_scale"], v["z_zero_point"], dtype)}
    return QOp("QLinearWhere", "com.microsoft", 1, _WH_IN, ("Z",), ref)


def _build_where(fid: str, dtype: str, seed: int, cond_shape=SHAPE, y_shape=SHAPE) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        a, b, z = _ZPS[dtype]
        consts = {"x_scale": _f32(0.05), "x_zero_point": const(a, dtype), "y_scale": _f32(0.1),
                  "y_zero_point": const(b, dtype), "z_scale": _f32(0.08), "z_zero_point": const(z, dtype)}
        cond = rng.random(cond_shape) < 0.5
        feeds = {"condition": cond, "X": _data(rng, dtype), "Y": _data(rng, dtype, y_shape)}
        g = QGraph({}, feeds, {"Z": dtype}, consts)
        return probe(_where_op(dtype), fid, g, g.baked(condition=np.ones_like(cond)), STEP, dtype)
    return build


# --- QLinearConcat --------------------------------------------------------------------

_CC_IN = ("Y_scale", "Y_zero_point", "X0", "X0_scale", "X0_zero_point", "X1", "X1_scale", "X1_zero_point")


def _concat_op(dtype: str) -> QOp:
    def ref(v, attrs):
        triples = [(v[f"X{i}"], v[f"X{i}_scale"], v[f"X{i}_zero_point"]) for i in (0, 1)]
        return {"Y": qlinear_concat(v["Y_scale"], v["Y_zero_point"], triples, int(attrs["axis"]), dtype)}
    return QOp("QLinearConcat", "com.microsoft", 1, _CC_IN, ("Y",), ref)


def _build_concat(fid: str, dtype: str, seed: int, *, axis: int = 1, same_scales: bool = False,
                  control_axis: int | None = None) -> Callable[[], Probe]:
    """X0 (2,4,8) and X1 (2,4,8) concatenated; input scales/zero points differ from Y's
    (every value requantized) unless ``same_scales``."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        a, b, z = _ZPS[dtype]
        consts = {"Y_scale": _f32(0.1), "Y_zero_point": const(z, dtype), "X0_scale": _f32(0.05),
                  "X0_zero_point": const(a, dtype), "X1_scale": _f32(0.15), "X1_zero_point": const(b, dtype)}
        g = QGraph({"axis": axis}, {"X0": _data(rng, dtype), "X1": _data(rng, dtype)}, {"Y": dtype}, consts)
        if same_scales:
            control = g.baked(X0_scale=_f32(0.1), X0_zero_point=const(z, dtype), X1_scale=_f32(0.1),
                              X1_zero_point=const(z, dtype))
        elif control_axis is not None:
            control = g.with_attrs(axis=control_axis)
        else:
            control = g.baked(X1=np.full(SHAPE, b, dtype=np.dtype(dtype)))
        return probe(_concat_op(dtype), fid, g, control, STEP, dtype)
    return build


_f = c.feature
_SM = _softmax_op("uint8")
_SM_DOC = f"{_DOC}QLinearSoftmax; {_DIR}qlinear_softmax.cc"
_WH = _where_op("uint8")
_WH_DOC = f"{_DOC}QLinearWhere; {_DIR}qlinear_where.cc"
_CC = _concat_op("uint8")
_CC_DOC = f"{_DOC}QLinearConcat; {_DIR}qlinear_concat.cc"

#: The QLinear elementwise features, in catalog order.
FEATURES = (
    *_binary_features("QLinearAdd", "add", 6201),
    *_binary_features("QLinearMul", "mul", 6221),
    *_unary_features("QLinearSigmoid", "sigmoid", 6241),
    *_unary_features("QLinearLeakyRelu", "leaky_relu", 6251),
    _f(_unary_op("QLinearLeakyRelu", "leaky_relu", "uint8"), "qlinearleakyrelu.alpha", "uint8",
       "alpha=0.5 (default 0.01) on negative inputs; control resets alpha",
       f"{_DOC}QLinearLeakyRelu: attribute 'alpha'; {_DIR}qlinear_activations.cc",
       _build_unary("QLinearLeakyRelu", "leaky_relu", "qlinearleakyrelu.alpha", "uint8", 6256, attrs={"alpha": 0.5},
                    reset=("alpha",)), Use(attributes={"alpha": NON_DEFAULT})),
    *(_f(_SM, f"qlinearsoftmax.{d}", d, f"softmax over the last axis (opset=13), {d} (2,4,8), y_scale 1/256; "
         "control bakes in X_scale 2^-12 (near-uniform rows)", _SM_DOC,
         _build_softmax(f"qlinearsoftmax.{d}", d, 6261 + i, {"opset": 13})) for i, d in enumerate(("uint8", "int8"))),
    _f(_SM, "qlinearsoftmax.axis", "uint8", "axis=1 (opset=13: along axis 1 only); control leaves axis unset (-1)",
       f"{_SM_DOC}: attribute 'axis' (opset >= 13)", _build_softmax("qlinearsoftmax.axis", "uint8", 6263,
                                                                    {"opset": 13, "axis": 1}, {"axis": None}),
       Use(attributes={"axis": NON_DEFAULT})),
    _f(_SM, "qlinearsoftmax.opset12", "uint8",
       "opset=12, axis=1: the input coerced to (2, 32) and each row of 32 normalized; control opset=13 (axis 1 only)",
       f"{_SM_DOC}: attribute 'opset' (< 13: coerced to NxD)", _build_softmax("qlinearsoftmax.opset12", "uint8", 6264,
                                                                              {"opset": 12, "axis": 1}, {"opset": 13}),
       Use(attributes={"opset": 12})),
    *(_f(_WH, f"qlinearwhere.{d}", d, f"where(condition, X, Y) requantized to Z, {d} (2,4,8), three scales; "
         "control bakes in an all-true condition", _WH_DOC, _build_where(f"qlinearwhere.{d}", d, 6271 + i))
      for i, d in enumerate(("uint8", "int8"))),
    _f(_WH, "qlinearwhere.broadcast", "uint8", "condition (4,8) and Y (8) broadcast to (2,4,8); control bakes in an "
       "all-true condition", f"{_WH_DOC} (broadcasting)",
       _build_where("qlinearwhere.broadcast", "uint8", 6273, cond_shape=(4, 8), y_shape=(8,)),
       Use(facts={"broadcast": True})),
    *(_f(_CC, f"qlinearconcat.{d}", d, f"two {d} (2,4,8) inputs with their own scales/zero points, axis=1, "
         "requantized to Y; control bakes in the second at its zero point", _CC_DOC,
         _build_concat(f"qlinearconcat.{d}", d, 6281 + i)) for i, d in enumerate(("uint8", "int8"))),
    _f(_CC, "qlinearconcat.requantize", "uint8", "input scales/zero points differ from Y's (each requantized); "
       "control gives both inputs Y's scale and zero point (a plain copy)", f"{_CC_DOC} (per-input lookup table)",
       _build_concat("qlinearconcat.requantize", "uint8", 6283, same_scales=True)),
    _f(_CC, "qlinearconcat.axis", "uint8", "axis=-1 (along the last axis, (2,4,16)); control axis=1 ((2,8,8))",
       f"{_CC_DOC}: attribute 'axis'", _build_concat("qlinearconcat.axis", "uint8", 6284, axis=-1, control_axis=1),
       Use(attributes={"axis": NON_DEFAULT})),
)
