"""Probes for the com.microsoft quantized pooling and convolution operators (version 1):
``QLinearAveragePool``, ``QLinearGlobalAveragePool`` and ``QLinearConv``.

X is fed; weights, biases, scales and zero points are constants. References:
:mod:`epaudit.reference.qlinear` (dequantize, float64 average pool, requantize) and
:mod:`epaudit.reference.qconv` (exact integer accumulation, float64 requantization). Every
output is judged within one quantization step (``_qgraph.STEP``): the kernels requantize in
float32 (pooling divides a float32 sum; QLinearConv multiplies by the float32 product
``x_scale · w_scale / y_scale``), which may land one step from the exactly rounded value.

Controls: the operator itself bakes in a zero input scale (pools: every input dequantizes to 0)
or weights held at their zero point (QLinearConv: y = y_zp + bias); an optional input is
dropped or, for a zero point, set to its documented default 0; an attribute is reset to its
default. Geometry attributes (strides, pads, ceil_mode, dilations, auto_pad, channels_last)
change the output shape, so their control can never be mistaken for the subject.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference.qconv import qlinear_conv
from ..reference.qlinear import RANGES, qlinear_average_pool, qlinear_global_average_pool
from . import _contrib as c
from ._qgraph import STEP, QGraph, QOp, const, probe, u8s8_weights

_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_DIR = "onnxruntime/contrib_ops/cpu/quantization/"
_ZP = {"uint8": (118, 131), "int8": (-7, 9)}


def _f32(v) -> np.ndarray:
    return const(v, "float32")


def _data(rng, dtype: str, shape) -> np.ndarray:
    lo, hi = RANGES[dtype]
    return rng.integers(lo, hi + 1, size=shape).astype(np.dtype(dtype))


# --- QLinearAveragePool / QLinearGlobalAveragePool ------------------------------------

_POOL_IN = ("X", "x_scale", "x_zero_point", "y_scale", "y_zero_point")
_POOL_ATTRS = ("kernel_shape", "strides", "pads", "count_include_pad", "ceil_mode", "auto_pad", "channels_last")


def _pool_op(dtype: str) -> QOp:
    def ref(v, attrs):
        pool = {k: attrs[k] for k in _POOL_ATTRS if k in attrs}
        return {"Y": qlinear_average_pool(v["X"], v["x_scale"], v.get("x_zero_point", 0), v["y_scale"],
                                          v.get("y_zero_point", 0), dtype, **pool)}
    return QOp("QLinearAveragePool", "com.microsoft", 1, _POOL_IN, ("Y",), ref)


def _gap_op(dtype: str) -> QOp:
    def ref(v, attrs):
        return {"Y": qlinear_global_average_pool(v["X"], v["x_scale"], v["x_zero_point"], v["y_scale"],
                                                 v["y_zero_point"], dtype, **attrs)}
    return QOp("QLinearGlobalAveragePool", "com.microsoft", 1, _POOL_IN, ("Y",), ref)


def _pool_graph(dtype: str, seed: int, shape, attrs: Mapping[str, object]) -> QGraph:
    rng = np.random.default_rng(seed)
    zx, zy = _ZP[dtype]
    consts = {"x_scale": _f32(0.05), "x_zero_point": const(zx, dtype), "y_scale": _f32(0.03),
              "y_zero_point": const(zy, dtype)}
    return QGraph(dict(attrs), {"X": _data(rng, dtype, shape)}, {"Y": dtype}, consts)


def _build_pool(fid: str, dtype: str, seed: int, attrs, *, shape=(1, 3, 6, 6), reset: tuple[str, ...] = (),
                zero: str | None = None, gap: bool = False) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _pool_graph(dtype, seed, shape, attrs)
        if reset:
            control = g.without(attrs=reset)
        elif zero:
            control = g.baked(**{zero: const(0, dtype)})
        else:
            # Every input ~0 after dequantization. QLinearGlobalAveragePool refuses a zero
            # scale ("parameter out of computation range"): 1e-4 keeps |mean| < 0.02 steps.
            control = g.baked(x_scale=_f32(1e-4 if gap else 0.0))
        return probe(_gap_op(dtype) if gap else _pool_op(dtype), fid, g, control, STEP, dtype)
    return build


# --- QLinearConv ----------------------------------------------------------------------

_CONV_IN = ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B")
_CONV_ATTRS = ("strides", "pads", "dilations", "group", "auto_pad", "kernel_shape", "channels_last")


def _conv_op(dtype: str) -> QOp:
    def ref(v, attrs):
        kw = {k: attrs[k] for k in _CONV_ATTRS if k in attrs}
        return {"y": qlinear_conv(v["x"], v["x_scale"], v["x_zero_point"], v["w"], v["w_scale"], v["w_zero_point"],
                                  v["y_scale"], v["y_zero_point"], v.get("B"), dtype=dtype, **kw)}
    return QOp("QLinearConv", "com.microsoft", 1, _CONV_IN, ("y",), ref)


def _conv_graph(seed: int, xt: str = "uint8", wt: str = "uint8", *, group: int = 1, attrs=None,
                per_channel: bool = False, bias: bool = False, x_shape=(1, 4, 6, 6)) -> QGraph:
    """x (1,4,6,6), w (6, 4/group, 3, 3); scales chosen so y spans its range."""
    rng = np.random.default_rng(seed)
    m, ch = 6, x_shape[1] if not (attrs or {}).get("channels_last") else x_shape[-1]
    w = u8s8_weights(rng, (m, ch // group, 3, 3)) if (xt, wt) == ("uint8", "int8") else _data(rng, wt, (m, ch // group, 3, 3))
    zx = _ZP[xt][0]
    zw = _ZP[wt][1] if wt == "uint8" else 0  # int8 weights: symmetric, as quantizers write them
    ws = np.array([0.004, 0.006, 0.003, 0.005, 0.0045, 0.0035], np.float32) if per_channel else _f32(0.004)
    consts = {"x_scale": _f32(0.02), "x_zero_point": const(zx, xt), "w": w, "w_scale": ws,
              "w_zero_point": const(zw, wt), "y_scale": _f32(0.05 / group), "y_zero_point": const(_ZP[xt][1], xt)}
    if bias:
        consts["B"] = rng.integers(-30000, 30000, size=m).astype(np.int32)
    a = {"group": group} if group != 1 else {}
    return QGraph({**a, **(attrs or {})}, {"x": _data(rng, xt, x_shape)}, {"y": xt}, consts)


def _w_at_zero(g: QGraph) -> QGraph:
    w = g.constants["w"]
    return g.baked(w=np.full(w.shape, np.asarray(g.constants["w_zero_point"]), dtype=w.dtype))


def _build_conv(fid: str, seed: int, xt: str = "uint8", wt: str = "uint8", *, control: str = "w", reset=(),
                **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _conv_graph(seed, xt, wt, **kw)
        if control == "bias":
            ctl = g.without("B")
        elif control == "per_tensor":
            ctl = g.baked(w_scale=_f32(float(g.constants["w_scale"][0])))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = _w_at_zero(g)
        return probe(_conv_op(xt), fid, g, ctl, STEP, xt)
    return build


_f = c.feature
_AP, _AP_DOC = _pool_op("uint8"), f"{_DOC}QLinearAveragePool; {_DIR}qlinear_pool.cc"
_GAP, _GAP_DOC = _gap_op("uint8"), (f"{_DOC}QLinearGlobalAveragePool; {_DIR}qlinear_global_average_pool.cc")
_CV = _conv_op("uint8")
_CV_DOC = ("ONNX QLinearConv (the com.microsoft schema repeats its inputs and attributes, with no text); "
           "onnxruntime/core/providers/cpu/quantization/qlinearconv.cc")
_K3 = {"kernel_shape": [3, 3]}


def _attr(fid: str, what: str, attrs, reset, seed: int, shape=(1, 3, 6, 6), extra=None) -> object:
    use = Use(attributes={k: NON_DEFAULT for k in reset})
    return _f(_AP, fid, "uint8", what, f"{_AP_DOC}: attribute(s) {', '.join(reset)}",
              _build_pool(fid, "uint8", seed, {**_K3, **attrs}, shape=shape, reset=reset), use)


#: The quantized pooling and convolution features, in catalog order.
FEATURES = (
    *(_f(_AP, f"qlinearaveragepool.{d}", d, f"3x3 average pool, stride 1, of {d} X (1,3,6,6); control bakes in "
         "x_scale 0", _AP_DOC, _build_pool(f"qlinearaveragepool.{d}", d, 6301 + i, _K3)) for i, d in enumerate(("uint8", "int8"))),
    _f(_AP, "qlinearaveragepool.1d", "uint8", "1-D pool (kernel 3) over X (1,3,8); control bakes in x_scale 0",
       f"{_AP_DOC} (QLinearPool1DTask)", _build_pool("qlinearaveragepool.1d", "uint8", 6303, {"kernel_shape": [3]},
                                                    shape=(1, 3, 8)), Use(facts={"input_rank": 3})),
    *(_f(_AP, f"qlinearaveragepool.{z.lower()}", "uint8", f"{z} set; control sets it to 0 (the documented default)",
         f"{_AP_DOC}: input '{z}'", _build_pool(f"qlinearaveragepool.{z.lower()}", "uint8", 6304 + i, _K3, zero=z),
         Use(inputs=(z,))) for i, z in enumerate(("x_zero_point", "y_zero_point"))),
    _attr("qlinearaveragepool.strides", "strides (2,2): output (1,3,2,2); control strides 1", {"strides": [2, 2]},
          ("strides",), 6306),
    _attr("qlinearaveragepool.pads", "pads 1 on every side: output (1,3,6,6), edge windows average fewer inputs; "
          "control no pads", {"pads": [1, 1, 1, 1]}, ("pads",), 6307),
    _f(_AP, "qlinearaveragepool.count_include_pad", "uint8",
       "count_include_pad=1 with pads 1: edge windows divide by 9; control count_include_pad=0 (same pads)",
       f"{_AP_DOC}: attribute 'count_include_pad'",
       _build_pool("qlinearaveragepool.count_include_pad", "uint8", 6308,
                   {**_K3, "pads": [1, 1, 1, 1], "count_include_pad": 1}, reset=("count_include_pad",)),
       Use(attributes={"count_include_pad": 1})),
    _attr("qlinearaveragepool.ceil_mode", "ceil_mode=1, stride 2 on 6x6: output (1,3,3,3) (a clipped last window); "
          "control floor (2x2)", {"strides": [2, 2], "ceil_mode": 1}, ("ceil_mode",), 6309),
    _attr("qlinearaveragepool.auto_pad", "auto_pad=SAME_UPPER: output (1,3,6,6); control NOTSET (4x4)",
          {"auto_pad": "SAME_UPPER"}, ("auto_pad",), 6310),
    _attr("qlinearaveragepool.channels_last", "channels_last=1: X read as (N,H,W,C) = (1,6,6,3); control "
          "channels_last=0 reads (N,C,H,W) (1,6,6,3)", {"channels_last": 1}, ("channels_last",), 6311,
          shape=(1, 6, 6, 3)),
    *(_f(_GAP, f"qlinearglobalaveragepool.{d}", d, f"mean over H, W of {d} X (1,4,5,5); control bakes in x_scale 1e-4",
         _GAP_DOC, _build_pool(f"qlinearglobalaveragepool.{d}", d, 6321 + i, {}, shape=(1, 4, 5, 5), gap=True))
      for i, d in enumerate(("uint8", "int8"))),
    _f(_GAP, "qlinearglobalaveragepool.channels_last", "uint8",
       "channels_last=1: X (1,5,5,4) averaged over the middle axes to (1,1,1,4); control channels_last=0 ((1,5,1,1))",
       f"{_GAP_DOC}: attribute 'channels_last'",
       _build_pool("qlinearglobalaveragepool.channels_last", "uint8", 6323, {"channels_last": 1}, shape=(1, 5, 5, 4),
                   reset=("channels_last",), gap=True), Use(attributes={"channels_last": 1})),
    _f(_CV, "qlinearconv.uint8", "uint8", "3x3 conv of uint8 x (1,4,6,6) by uint8 w (6,4,3,3), zero points 118/131; "
       "control bakes in w at its zero point", _CV_DOC, _build_conv("qlinearconv.uint8", 6401)),
    _f(_CV, "qlinearconv.int8", "int8", "3x3 conv, int8 x and symmetric int8 w (zero point 0); control bakes in w at 0",
       _CV_DOC, _build_conv("qlinearconv.int8", 6402, "int8", "int8")),
    _f(_CV, "qlinearconv.uint8_x_int8_w", "uint8", "uint8 x with int8 w (the mixed kernel); control bakes in w at 0",
       f"{_CV_DOC} (T1 uint8, T2 int8 registration)", _build_conv("qlinearconv.uint8_x_int8_w", 6403, "uint8", "int8"),
       Use(facts={"w_dtype": "int8"})),
    _f(_CV, "qlinearconv.bias", "uint8", "int32 bias B (6) in x_scale*w_scale units; control drops it",
       f"{_CV_DOC}: input 'B'", _build_conv("qlinearconv.bias", 6404, bias=True, control="bias"), Use(inputs=("B",))),
    _f(_CV, "qlinearconv.per_channel", "uint8", "per-output-channel w_scale (6), one shared w zero point; control "
       "bakes in the first scale per tensor", f"{_CV_DOC}: w_scale (M)",
       _build_conv("qlinearconv.per_channel", 6405, "uint8", "int8", per_channel=True, control="per_tensor"),
       Use(facts={"w_scale_rank": 1})),
    _f(_CV, "qlinearconv.group", "uint8", "group=2 (w (6,2,3,3)); control bakes in w at its zero point",
       f"{_CV_DOC}: attribute 'group'", _build_conv("qlinearconv.group", 6406, group=2),
       Use(attributes={"group": NON_DEFAULT})),
    *(_f(_CV, f"qlinearconv.{name}", "uint8", what, f"{_CV_DOC}: attribute '{name}'",
         _build_conv(f"qlinearconv.{name}", 6407 + i, attrs=attrs, control="attrs", reset=(name,)),
         Use(attributes={name: NON_DEFAULT}))
      for i, (name, attrs, what) in enumerate((
          ("strides", {"strides": [2, 2]}, "strides (2,2): y (1,6,2,2); control strides 1 (4x4)"),
          ("pads", {"pads": [1, 1, 1, 1]}, "pads 1 (x zero point padding): y (1,6,6,6); control no pads (4x4)"),
          ("dilations", {"dilations": [2, 2]}, "dilations (2,2): y (1,6,2,2); control dilations 1 (4x4)"),
          ("auto_pad", {"auto_pad": "SAME_UPPER"}, "auto_pad=SAME_UPPER: y (1,6,6,6); control NOTSET (4x4)")))),
    _f(_CV, "qlinearconv.channels_last", "uint8", "channels_last=1: x (1,6,6,4) NHWC, y (1,4,4,6); control bakes in "
       "w at its zero point", f"{_CV_DOC}: attribute 'channels_last' (ORT's NHWC form)",
       _build_conv("qlinearconv.channels_last", 6411, attrs={"channels_last": 1}, x_shape=(1, 6, 6, 4)),
       Use(attributes={"channels_last": 1})),
)
