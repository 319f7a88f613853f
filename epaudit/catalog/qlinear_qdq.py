"""Probes for ``com.microsoft.QuantizeLinear`` and ``com.microsoft.DequantizeLinear`` (version 1).

x is a (4, 4, 8) tensor fed at run time; scales and zero points are constants. Scales are
powers of two (0.25, 0.5, 0.125) and x is on a grid of scale / 4, so ``x / scale`` is
exact in float32 and every tie (``k + 0.5``) is there on purpose: a kernel that rounds half
away from zero instead of to even is off by one step at a tie, and each probe holds ties.
QuantizeLinear outputs are therefore compared exactly. DequantizeLinear outputs are float32
(``(q − zp)·scale`` with q and scale exact: exact in float32 too, judged with the float32
tolerance). The ranges saturate: some inputs land outside the type's range.

Controls: the operator itself bakes in a scale so large (QuantizeLinear: 2^20) that every
value quantizes to the zero point, or (DequantizeLinear) an x held at its zero point; the
zero-point features drop ``y_zero_point`` / ``x_zero_point`` (documented default 0, uint8
output for QuantizeLinear); per-channel features bake in the per-tensor scale (first entry)
and drop ``axis``; the ``axis`` features set the other axis of the same length.

int4/uint4: QuantizeLinear's 4-bit output has no numpy type, so a ``Cast`` to int8/uint8
follows the node (``cast_out``); DequantizeLinear's 4-bit x is a constant (packed by onnx) and
its scale is fed, so the node is never constant-folded.

Sources: the schema text (``docs/ContribOperators.md#com.microsoft.QuantizeLinear``,
``#com.microsoft.DequantizeLinear``), ``onnxruntime/contrib_ops/cpu/quantization/quantize_ops.cc``
(MS-domain registrations of ``core/providers/cpu/quantization/quantize_linear.cc``).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.qlinear import RANGES, dequantize, quantize
from . import _contrib as c
from ._qgraph import STEP, QGraph, QOp, const, probe
from .quantmodels import SubByte

SHAPE = (4, 4, 8)
_Q_DOC = "ORT docs/ContribOperators.md#com.microsoft.QuantizeLinear"
_DQ_DOC = "ORT docs/ContribOperators.md#com.microsoft.DequantizeLinear"
_REG = "onnxruntime/contrib_ops/cpu/quantization/quantize_ops.cc"
_KERNEL = "onnxruntime/core/providers/cpu/quantization/quantize_linear.cc"


def _axis(values: Mapping[str, np.ndarray], attrs: Mapping[str, object], name: str) -> int | None:
    """The per-channel axis when the scale is 1-D with more than one entry, else None."""
    return int(attrs["axis"]) if np.size(values[name]) > 1 else None


def _dq_ref(values, attrs):
    zp = values.get("x_zero_point", 0)
    return {"y": dequantize(values["x"], values["x_scale"], zp, _axis(values, attrs, "x_scale"))}


def _quantize_ref(dtype: str):
    def ref(values, attrs):
        zp = values.get("y_zero_point", 0)
        return {"y": quantize(values["x"], values["y_scale"], zp, dtype, _axis(values, attrs, "y_scale"))}
    return ref


def _qop(dtype: str) -> QOp:
    return QOp("QuantizeLinear", "com.microsoft", 1, ("x", "y_scale", "y_zero_point"), ("y",), _quantize_ref(dtype))


DQ = QOp("DequantizeLinear", "com.microsoft", 1, ("x", "x_scale", "x_zero_point"), ("y",), _dq_ref)

_ZP = {"uint8": 128, "int8": -3, "uint16": 30000, "int16": -1000, "uint4": 2, "int4": -6}
_SCALE = {"uint8": 0.25, "int8": 0.25, "uint16": 0.125, "int16": 0.125, "uint4": 0.5, "int4": 0.5,
          "int32": 2.0 ** -10}
_WIRE = {"uint4": "uint8", "int4": "int8"}


def _x(seed: int, dtype: str, scale: float, zp: int) -> np.ndarray:
    """x on a grid of scale/4 covering 1.4x the type's range around the zero point (ties and
    saturation included)."""
    rng = np.random.default_rng(seed)
    lo, hi = RANGES[dtype]
    span = 1.4 * (hi - lo) / 2
    mid = (lo + hi) / 2 - zp
    steps = rng.integers(int(4 * (mid - span)), int(4 * (mid + span)) + 1, size=SHAPE)
    steps.reshape(-1)[:8] = np.array([2, 6, -2, -6, 10, -10, 14, -14])  # ±0.5, ±1.5, ±2.5, ±3.5 steps
    return (steps * (scale / 4)).astype(np.float32)


def _zp_const(dtype: str, value) -> object:
    if dtype in ("int4", "uint4"):
        return SubByte(dtype, np.asarray(value, dtype=np.int64))
    return const(value, dtype)


def _q_graph(seed: int, dtype: str, *, zp: bool = True, scale=None, axis: int | None = None) -> QGraph:
    s = _SCALE[dtype] if scale is None else scale
    x = _x(seed, dtype, float(np.max(s)), _ZP[dtype] if zp else 0)
    consts: dict[str, object] = {"y_scale": const(s, "float32")}
    if zp:
        zps = np.full(np.shape(s), _ZP[dtype]) if np.ndim(s) else _ZP[dtype]
        consts["y_zero_point"] = _zp_const(dtype, zps)
    attrs = {} if axis is None else {"axis": axis}
    cast = {"y": _WIRE[dtype]} if dtype in _WIRE else {}
    return QGraph(attrs, {"x": x}, {"y": dtype}, consts, cast)


def _q_probe(fid: str, dtype: str, subject: QGraph, control: QGraph) -> Probe:
    return probe(_qop(dtype), fid, subject, control, STEP, dtype, exact=frozenset({"y"}))


def _build_q(fid: str, dtype: str, seed: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _q_graph(seed, dtype)
        return _q_probe(fid, dtype, g, g.baked(y_scale=const(2.0 ** 20, "float32")))
    return build


def _build_q_no_zp() -> Probe:
    g = _q_graph(6003, "uint8")
    return _q_probe("quantizelinear.y_zero_point", "uint8", g, g.without("y_zero_point"))


def _per_channel_scale(dtype: str, n: int) -> np.ndarray:
    base = _SCALE[dtype]
    return np.array([base, base * 2, base / 2, base * 4][:n], dtype=np.float32)


def _build_q_per_channel(fid: str, dtype: str, seed: int, axis: int) -> Callable[[], Probe]:
    """Per-channel scales (4 along ``axis``); control: the first scale per tensor, no axis."""
    def build() -> Probe:
        g = _q_graph(seed, dtype, scale=_per_channel_scale(dtype, SHAPE[axis]), axis=axis)
        control = g.without(attrs=("axis",)).baked(y_scale=const(_SCALE[dtype], "float32"),
                                                   y_zero_point=_zp_const(dtype, _ZP[dtype]))
        return _q_probe(fid, dtype, g, control)
    return build


def _build_q_axis() -> Probe:
    """axis=0 against axis=1 (both of length 4) with the same per-channel scales."""
    g = _q_graph(6011, "int8", scale=_per_channel_scale("int8", 4), axis=0)
    return _q_probe("quantizelinear.axis", "int8", g, g.with_attrs(axis=1))


# --- DequantizeLinear -----------------------------------------------------------------

def _q_values(seed: int, dtype: str) -> np.ndarray:
    lo, hi = RANGES[dtype]
    return np.random.default_rng(seed).integers(lo, hi + 1, size=SHAPE)


def _dq_graph(seed: int, dtype: str, *, zp: bool = True, scale=None, axis: int | None = None) -> QGraph:
    s = _SCALE[dtype] if scale is None else scale
    q = _q_values(seed, dtype)
    zps = np.full(np.shape(s), _ZP.get(dtype, 0)) if np.ndim(s) else _ZP.get(dtype, 0)
    attrs = {} if axis is None else {"axis": axis}
    if dtype in ("int4", "uint4"):
        # 4-bit x is a constant; the scale is fed so that the node is not constant-folded.
        consts: dict[str, object] = {"x": SubByte(dtype, q)}
        if zp:
            consts["x_zero_point"] = SubByte(dtype, np.asarray(zps))
        return QGraph(attrs, {"x_scale": const(s, "float32")}, {"y": "float32"}, consts)
    consts = {"x_scale": const(s, "float32")}
    if zp and dtype != "int32":
        consts["x_zero_point"] = const(zps, dtype)
    return QGraph(attrs, {"x": q.astype(np.dtype(dtype))}, {"y": "float32"}, consts)


def _dq_probe(fid: str, dtype: str, subject: QGraph, control: QGraph) -> Probe:
    return probe(DQ, fid, subject, control, tolerance_for("float32"), dtype)


def _neutral(g: QGraph, dtype: str) -> QGraph:
    """The control of the operator itself: y = 0 everywhere. x stays fed where it is fed (a
    node whose inputs are all constants is folded away): a zero scale; a 4-bit x (a
    constant, scale fed) is held at its zero point instead."""
    if dtype in _WIRE:
        return g.baked(x=SubByte(dtype, np.full(SHAPE, _ZP[dtype])))
    return g.baked(x_scale=const(np.zeros_like(np.asarray(g.values["x_scale"])), "float32"))


def _build_dq(fid: str, dtype: str, seed: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _dq_graph(seed, dtype)
        return _dq_probe(fid, dtype, g, _neutral(g, dtype))
    return build


def _build_dq_no_zp(fid: str, dtype: str, seed: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _dq_graph(seed, dtype)
        return _dq_probe(fid, dtype, g, g.without("x_zero_point"))
    return build


def _build_dq_per_channel(fid: str, dtype: str, seed: int, axis: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _dq_graph(seed, dtype, scale=_per_channel_scale(dtype, SHAPE[axis]), axis=axis)
        control = g.without(attrs=("axis",)).baked(x_scale=const(_SCALE[dtype], "float32"),
                                                   x_zero_point=const(_ZP[dtype], dtype))
        return _dq_probe(fid, dtype, g, control)
    return build


def _build_dq_axis() -> Probe:
    g = _dq_graph(6111, "int8", scale=_per_channel_scale("int8", 4), axis=0)
    return _dq_probe("dequantizelinear.axis", "int8", g, g.with_attrs(axis=1))


_f = c.feature
_QS = f"{_Q_DOC}; {_REG}; {_KERNEL}"
_DQS = f"{_DQ_DOC}; {_REG}; {_KERNEL}"
_Q = _qop("uint8")


def _q_feature(dtype: str, seed: int) -> object:
    fid = f"quantizelinear.{dtype}"
    wire = f" (a Cast to {_WIRE[dtype]} follows: no numpy {dtype})" if dtype in _WIRE else ""
    return _f(_Q, fid, dtype, f"x (4,4,8) float32 -> {dtype}, scale {_SCALE[dtype]}, zero point {_ZP[dtype]}, ties and "
              f"saturation, compared exactly{wire}; control bakes in scale 2^20 (all at the zero point)",
              f"{_QS} (saturate(round_half_even(x / y_scale) + y_zero_point))", _build_q(fid, dtype, seed))


def _dq_feature(dtype: str, seed: int) -> object:
    fid = f"dequantizelinear.{dtype}"
    how = " (x a 4-bit constant, x_scale fed)" if dtype in _WIRE else ""
    zp = "no zero point (int32)" if dtype == "int32" else f"zero point {_ZP[dtype]}"
    return _f(DQ, fid, dtype, f"{dtype} x (4,4,8) -> float32, scale {_SCALE.get(dtype, 0.25)}, {zp}{how}; "
              "control bakes in a zero scale", f"{_DQS} ((x - x_zero_point) * x_scale)", _build_dq(fid, dtype, seed))


#: The QuantizeLinear and DequantizeLinear features, in catalog order.
FEATURES = (
    *(_q_feature(d, 6001 + i) for i, d in enumerate(("uint8", "int8", "uint16", "int16", "int4", "uint4"))),
    _f(_Q, "quantizelinear.y_zero_point", "uint8",
       "y_zero_point 128 (uint8); control drops it (documented default: uint8, zero point 0)",
       f"{_QS}: input 'y_zero_point'", _build_q_no_zp, Use(inputs=("y_zero_point",))),
    _f(_Q, "quantizelinear.per_channel", "uint8",
       "per-channel scales/zero points (4) along axis=1; control bakes in the first scale per tensor, no axis",
       f"{_QS}: 1-D y_scale per 'axis'", _build_q_per_channel("quantizelinear.per_channel", "uint8", 6012, 1),
       Use(attributes={"axis": NON_DEFAULT})),
    _f(_Q, "quantizelinear.per_channel.int16", "int16",
       "per-channel int16 scales/zero points (4) along axis=0; control bakes in the first scale per tensor, no axis",
       f"{_QS}: 1-D y_scale per 'axis'", _build_q_per_channel("quantizelinear.per_channel.int16", "int16", 6013, 0),
       Use(attributes={"axis": NON_DEFAULT})),
    _f(_Q, "quantizelinear.axis", "int8",
       "per-channel scales along axis=0; control sets axis=1 (same length 4)",
       f"{_QS}: attribute 'axis'", _build_q_axis, Use(attributes={"axis": NON_DEFAULT})),
    *(_dq_feature(d, 6101 + i) for i, d in enumerate(("uint8", "int8", "uint16", "int16", "int32", "int4", "uint4"))),
    _f(DQ, "dequantizelinear.x_zero_point", "uint8", "x_zero_point 128; control drops it (default 0)",
       f"{_DQS}: input 'x_zero_point'", _build_dq_no_zp("dequantizelinear.x_zero_point", "uint8", 6108),
       Use(inputs=("x_zero_point",))),
    _f(DQ, "dequantizelinear.x_zero_point.int4", "int4", "int4 x_zero_point -6 (x a 4-bit constant); control drops it",
       f"{_DQS}: input 'x_zero_point'", _build_dq_no_zp("dequantizelinear.x_zero_point.int4", "int4", 6109),
       Use(inputs=("x_zero_point",))),
    _f(DQ, "dequantizelinear.per_channel", "int8",
       "per-channel scales/zero points (4) along axis=1; control bakes in the first scale per tensor, no axis",
       f"{_DQS}: 1-D x_scale per 'axis'", _build_dq_per_channel("dequantizelinear.per_channel", "int8", 6110, 1),
       Use(attributes={"axis": NON_DEFAULT})),
    _f(DQ, "dequantizelinear.axis", "int8", "per-channel scales along axis=0; control sets axis=1 (same length 4)",
       f"{_DQS}: attribute 'axis'", _build_dq_axis, Use(attributes={"axis": NON_DEFAULT})),
)
