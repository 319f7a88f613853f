"""Probes for the ai.onnx operators onnx dropped that ORT's CPU EP still registers for old
models: ``Affine``, ``ScaledTanh``, ``ParametricSoftplus``, ``Scale``, ``ImageScaler``,
``Crop``, ``DynamicSlice`` (ORT keeps their version-1 schemas, "1+"; version 10 only marks
them deprecated, so a model must import ai.onnx <= 9), plus ``GlobalLpPool``-2 and
``MaxRoiPool``-1, which onnx still has. Every probe model imports ai.onnx 9.

onnx 1.23.2 has no schema for the seven dropped operators, so ``onnx.checker`` refuses
their models; ORT loads them from its own schemas. float32 (the only type the CPU kernels
register) except ``DynamicSlice``, whose kernel is the Slice kernel and registers every
tensor type: float16 and float64 features too. Data-movement outputs (Crop, DynamicSlice,
MaxRoiPool) are compared exactly. References from :mod:`epaudit.reference.experimental`.

Controls: an attribute back to its default (Affine, Scale, ImageScaler ``scale``, GlobalLpPool
``p``, MaxRoiPool ``spatial_scale``, Crop ``scale``), or to 1 where the schema has no default
and the kernel refuses a node without it (ScaledTanh, ParametricSoftplus); neutral values of
an input or a list attribute (ImageScaler bias 0, Crop border 0, DynamicSlice starts 0,
MaxRoiPool ROIs 0); an optional input dropped (DynamicSlice ``axes``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Case, Probe, Use
from ..reference import experimental as ref
from . import _xcase as x
from .models import set_lowest_ir_version

#: The ai.onnx opset every probe imports: version 1 of the dropped operators (deprecated at
#: 10), GlobalLpPool-2 (until 22) and MaxRoiPool-1 (until 22) are all in force there.
OPSET = 9
_K = "onnxruntime/contrib_ops/cpu/"
_SCHEMA = "ORT schema (get_all_operator_schema, onnxruntime 1.31.1)"
_REF = "reference epaudit/reference/experimental.py"
_ALL = frozenset({"output", "Y"})


def _op(name: str, inputs, outputs, fn, in_dtypes: Mapping[str, str] | None = None, exact=frozenset()) -> x.XOp:
    return x.XOp(name, "", OPSET, tuple(inputs), tuple(outputs), fn, dict(in_dtypes or {}), {},
                 frozenset(exact) & frozenset(outputs))


AFFINE = _op("Affine", ("X",), ("Y",),
             lambda v, a: {"Y": ref.affine(v["X"], a.get("alpha", 1.0), a.get("beta", 0.0))})
SCALEDTANH = _op("ScaledTanh", ("input",), ("output",),
                 lambda v, a: {"output": ref.scaled_tanh(v["input"], a["alpha"], a["beta"])})
SOFTPLUS = _op("ParametricSoftplus", ("X",), ("Y",),
               lambda v, a: {"Y": ref.parametric_softplus(v["X"], a["alpha"], a["beta"])})
SCALE = _op("Scale", ("input",), ("output",), lambda v, a: {"output": ref.scale(v["input"], a.get("scale", 1.0))})
IMAGESCALER = _op("ImageScaler", ("input",), ("output",),
                  lambda v, a: {"output": ref.image_scaler(v["input"], a["bias"], a.get("scale", 1.0))})
CROP = _op("Crop", ("input",), ("output",),
           lambda v, a: {"output": ref.crop(v["input"], a["border"], a.get("scale"))}, exact=_ALL)
DYNAMICSLICE = _op("DynamicSlice", ("data", "starts", "ends", "axes"), ("output",),
                   lambda v, a: {"output": ref.dynamic_slice(v["data"], v["starts"], v["ends"], v.get("axes"))},
                   {"starts": "int64", "ends": "int64", "axes": "int64"}, exact=_ALL)
GLOBALLPPOOL = _op("GlobalLpPool", ("X",), ("Y",), lambda v, a: {"Y": ref.global_lp_pool(v["X"], a.get("p", 2))})
MAXROIPOOL = _op("MaxRoiPool", ("X", "rois"), ("Y",),
                 lambda v, a: {"Y": ref.max_roi_pool(v["X"], v["rois"], a["pooled_shape"],
                                                      a.get("spatial_scale", 1.0))}, exact=_ALL)


def _at_opset(case: Case) -> Case:
    """``case`` with its model importing ai.onnx :data:`OPSET` only (the shared builder
    writes 21, where the dropped operators are deprecated) at the lowest IR that carries it."""
    import onnx
    from onnx import helper

    model = onnx.load_from_string(case.model)
    del model.opset_import[:]
    model.opset_import.extend([helper.make_opsetid("", OPSET)])
    set_lowest_ir_version(model)
    return replace(case, model=model.SerializeToString())


def _probe(op: x.XOp, fid: str, g: x.Graph, control: x.Graph, length: int = 16) -> Probe:
    p = x.probe(op, fid, g, control, length=length)
    return replace(p, subject=_at_opset(p.subject), control=_at_opset(p.control))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _g(seed: int, name: str, shape, attrs, out: str, dtype: str = "float32", scale: float = 1.0) -> x.Graph:
    return x.Graph(dtype, dict(attrs), {name: x.normal(_rng(seed), shape, dtype, scale)}, (out,))


# --------------------------------------------------------------------------- elementwise
def _elementwise(op: x.XOp, fid: str, seed: int, attrs, reset: Mapping[str, object] | None = None,
                 drop: tuple[str, ...] = (), shape=(2, 3, 5)) -> Callable[[], Probe]:
    """``op`` on N(0, 2) values with ``attrs``; the control drops ``drop`` (back to the
    default) and sets ``reset`` (an attribute without a default, at 1)."""
    def build() -> Probe:
        g = _g(seed, op.inputs[0], shape, attrs, op.outputs[0], scale=2.0)
        control = g.without(attrs=drop).with_attrs(**dict(reset or {}))
        return _probe(op, fid, g, control)
    return build


def _image_scaler(fid: str, seed: int, drop_scale: bool) -> Callable[[], Probe]:
    bias = [0.75, -1.5, 2.25]

    def build() -> Probe:
        g = _g(seed, "input", (2, 3, 4, 5), {"scale": 0.5, "bias": bias} if drop_scale else {"bias": bias}, "output")
        control = g.without(attrs=("scale",)) if drop_scale else g.with_attrs(bias=[0.0, 0.0, 0.0])
        return _probe(IMAGESCALER, fid, g, control)
    return build


def _crop(fid: str, seed: int, border, scale=None) -> Callable[[], Probe]:
    def build() -> Probe:
        attrs = {"border": list(border), **({"scale": list(scale)} if scale else {})}
        g = _g(seed, "input", (2, 3, 6, 7), attrs, "output")
        control = g.without(attrs=("scale",)) if scale else g.with_attrs(border=[0, 0, 0, 0])
        return _probe(CROP, fid, g, control)
    return build


def _dynamic_slice(fid: str, seed: int, starts, ends, axes=None, dtype: str = "float32",
                   drop_axes: bool = False) -> Callable[[], Probe]:
    """Slice of data (3, 4, 6) with every index fed at run time; the control drops ``axes``
    or bakes in ``starts`` = 0."""
    def build() -> Probe:
        feeds = {"data": x.normal(_rng(seed), (3, 4, 6), dtype), "starts": np.array(starts, dtype=np.int64),
                 "ends": np.array(ends, dtype=np.int64)}
        if axes is not None:
            feeds["axes"] = np.array(axes, dtype=np.int64)
        g = x.Graph(dtype, {}, feeds, ("output",))
        control = g.without("axes") if drop_axes else g.baked(starts=np.zeros(len(starts), dtype=np.int64))
        return _probe(DYNAMICSLICE, fid, g, control)
    return build


def _lp_pool(fid: str, seed: int, p: int | None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _g(seed, "X", (2, 3, 4, 5), {"p": p} if p is not None else {}, "Y")
        control = g.without(attrs=("p",)) if p is not None else g.baked(X=np.zeros((2, 3, 4, 5)))
        return _probe(GLOBALLPPOOL, fid, g, control, length=20)
    return build


def _roi_pool(fid: str, seed: int, spatial_scale: float | None) -> Callable[[], Probe]:
    """X (2, 3, 8, 8) of positive values (the kernel's bins start at FLT_MIN, reference
    module docstring); ROIs in image coordinates, or doubled with ``spatial_scale`` 0.5.
    The control resets ``spatial_scale`` to 1, or bakes in all-zero ROIs (one 1x1 region)."""
    def build() -> Probe:
        rng = _rng(seed)
        data = x.rounded(0.1 + np.abs(rng.standard_normal((2, 3, 8, 8))), "float32")
        rois = np.array([[0, 1, 1, 5, 6], [1, 0, 2, 4, 7], [1, 3, 0, 7, 3]], dtype=np.float64)
        attrs: dict[str, object] = {"pooled_shape": [2, 2]}
        if spatial_scale is not None:
            attrs["spatial_scale"] = spatial_scale
            rois[:, 1:] /= spatial_scale
        g = x.Graph("float32", attrs, {"X": data, "rois": rois}, ("Y",))
        control = g.without(attrs=("spatial_scale",)) if spatial_scale is not None \
            else g.baked(rois=np.zeros_like(rois))
        return _probe(MAXROIPOOL, fid, g, control)
    return build


def _f(op: x.XOp, fid: str, dtype: str, changes: str, source: str, build, uses: Use | None = None):
    return x.feature(op, fid, dtype, changes, f"{source}; {_SCHEMA}; {_REF}", build, uses)


_E = "experimental."
_ELEM = f"{_K}element_wise_ops.cc"
_ACT = f"{_K}activations.h"
_ALPHA_BETA = {"alpha": NON_DEFAULT, "beta": NON_DEFAULT}
_DS = "onnxruntime/core/providers/cpu/tensor/slice.cc (DynamicSlice, the Slice kernel); schema doc examples"

#: The experimental-operator features, one or more per operator.
FEATURES = (
    _f(AFFINE, _E + "affine.alpha_beta", "float32", "alpha=2, beta=0.5 on X (2,3,5); control alpha/beta default 1, 0",
       f"Affine-1: y = alpha * x + beta; {_ELEM}",
       _elementwise(AFFINE, _E + "affine.alpha_beta", 9101, {"alpha": 2.0, "beta": 0.5}, drop=("alpha", "beta")),
       Use(attributes=_ALPHA_BETA)),
    _f(SCALEDTANH, _E + "scaledtanh.alpha", "float32", "alpha=1.7, beta=0.6; control alpha=1 (no default)",
       f"ScaledTanh-1: y = alpha * tanh(beta * x); {_ACT}",
       _elementwise(SCALEDTANH, _E + "scaledtanh.alpha", 9201, {"alpha": 1.7, "beta": 0.6}, {"alpha": 1.0}),
       Use(attributes=_ALPHA_BETA)),
    _f(SCALEDTANH, _E + "scaledtanh.beta", "float32", "alpha=1.7, beta=0.6; control beta=1 (no default)",
       f"ScaledTanh-1: y = alpha * tanh(beta * x); {_ACT}",
       _elementwise(SCALEDTANH, _E + "scaledtanh.beta", 9202, {"alpha": 1.7, "beta": 0.6}, {"beta": 1.0}),
       Use(attributes=_ALPHA_BETA)),
    _f(SOFTPLUS, _E + "parametricsoftplus.alpha", "float32", "alpha=1.7, beta=0.6; control alpha=1 (no default)",
       f"ParametricSoftplus-1: y = alpha * ln(exp(beta * x) + 1); {_ACT}",
       _elementwise(SOFTPLUS, _E + "parametricsoftplus.alpha", 9301, {"alpha": 1.7, "beta": 0.6}, {"alpha": 1.0}),
       Use(attributes=_ALPHA_BETA)),
    _f(SOFTPLUS, _E + "parametricsoftplus.beta", "float32", "alpha=1.7, beta=0.6; control beta=1 (no default)",
       f"ParametricSoftplus-1: y = alpha * ln(exp(beta * x) + 1); {_ACT}",
       _elementwise(SOFTPLUS, _E + "parametricsoftplus.beta", 9302, {"alpha": 1.7, "beta": 0.6}, {"beta": 1.0}),
       Use(attributes=_ALPHA_BETA)),
    _f(SCALE, _E + "scale.scale", "float32", "scale=3 on input (2,3,5); control scale default 1",
       f"Scale-1: input scaled elementwise; {_ELEM}",
       _elementwise(SCALE, _E + "scale.scale", 9401, {"scale": 3.0}, drop=("scale",)),
       Use(attributes={"scale": NON_DEFAULT})),
    _f(IMAGESCALER, _E + "imagescaler.bias", "float32", "bias [0.75,-1.5,2.25] per channel of (2,3,4,5); control bias 0",
       f"ImageScaler-1: bias per channel; {_K}image_scaler.h", _image_scaler(_E + "imagescaler.bias", 9501, False),
       Use(attributes={"bias": NON_DEFAULT})),
    _f(IMAGESCALER, _E + "imagescaler.scale", "float32", "scale=0.5 with the bias; control scale default 1",
       f"ImageScaler-1: scale * x + bias; {_K}image_scaler.h", _image_scaler(_E + "imagescaler.scale", 9502, True),
       Use(attributes={"scale": NON_DEFAULT, "bias": NON_DEFAULT})),
    _f(CROP, _E + "crop.border", "float32", "border (l,t,r,b)=[1,2,0,1] of (2,3,6,7) -> (2,3,3,6); control border 0",
       f"Crop-1: 'crop the borders as provided'; {_K}crop.h", _crop(_E + "crop.border", 9601, [1, 2, 0, 1]),
       Use(attributes={"border": NON_DEFAULT})),
    _f(CROP, _E + "crop.scale", "float32", "border [2,1,0,0] with scale (h,w)=(3,4) -> (2,3,3,4); control drops scale",
       f"Crop-1: 'If scale is given, start the crop offset by the left/top border'; {_K}crop.h",
       _crop(_E + "crop.scale", 9602, [2, 1, 0, 0], [3, 4]), Use(attributes={"border": NON_DEFAULT,
                                                                            "scale": NON_DEFAULT})),
    _f(DYNAMICSLICE, _E + "dynamicslice.starts", "float32",
       "fed starts [1,2], ends [3,5] slice axes 0,1 of (3,4,6); control starts 0",
       _DS, _dynamic_slice(_E + "dynamicslice.starts", 9701, [1, 2], [3, 5])),
    _f(DYNAMICSLICE, _E + "dynamicslice.axes", "float32",
       "fed axes [2,1]: starts [1,0], ends [5,-1] on axes 2, 1; control drops axes (axes 0, 1)",
       f"{_DS}: input 'axes'", _dynamic_slice(_E + "dynamicslice.axes", 9702, [1, 0], [5, -1], [2, 1], drop_axes=True),
       Use(inputs=("axes",))),
    _f(DYNAMICSLICE, _E + "dynamicslice.negative", "float32",
       "negative starts [-4] and ends [-1] on axis -1, ends past the end clamp elsewhere; control starts 0",
       f"{_DS}: negative and out-of-range indices",
       _dynamic_slice(_E + "dynamicslice.negative", 9703, [-4, 1], [-1, 1000], [-1, 1]), Use(inputs=("axes",))),
    _f(DYNAMICSLICE, _E + "dynamicslice.dtype.float16", "float16", "dynamicslice.starts in float16; control starts 0",
       f"{_DS}: T includes tensor(float16)",
       _dynamic_slice(_E + "dynamicslice.dtype.float16", 9704, [1, 2], [3, 5], dtype="float16")),
    _f(DYNAMICSLICE, _E + "dynamicslice.dtype.float64", "float64", "dynamicslice.starts in float64; control starts 0",
       f"{_DS}: T includes tensor(double)",
       _dynamic_slice(_E + "dynamicslice.dtype.float64", 9705, [1, 2], [3, 5], dtype="float64")),
    _f(GLOBALLPPOOL, _E + "globallppool.p", "float32", "p=3 over the 4x5 spatial axes of (2,3,4,5); control p default 2",
       "GlobalLpPool-2 (int p); onnxruntime/core/providers/cpu/nn/pool.cc",
       _lp_pool(_E + "globallppool.p", 9801, 3), Use(attributes={"p": NON_DEFAULT})),
    _f(GLOBALLPPOOL, _E + "globallppool.default_p", "float32",
       "p absent (2): the L2 norm of each channel; control bakes in X = 0",
       "GlobalLpPool-2 (p default 2); onnxruntime/core/providers/cpu/nn/pool.cc",
       _lp_pool(_E + "globallppool.default_p", 9802, None)),
    _f(MAXROIPOOL, _E + "maxroipool.spatial_scale", "float32",
       "spatial_scale=0.5 on doubled ROI coordinates, pooled_shape (2,2); control spatial_scale default 1",
       "MaxRoiPool-1: attribute 'spatial_scale'; onnxruntime/core/providers/cpu/nn/roi_pool.cc",
       _roi_pool(_E + "maxroipool.spatial_scale", 9901, 0.5), Use(attributes={"spatial_scale": NON_DEFAULT})),
    _f(MAXROIPOOL, _E + "maxroipool.rois", "float32",
       "3 ROIs over 2 images of (2,3,8,8), pooled_shape (2,2); control bakes in ROIs 0 (one 1x1 region)",
       "MaxRoiPool-1: input 'rois' [batch_id, x1, y1, x2, y2]; onnxruntime/core/providers/cpu/nn/roi_pool.cc",
       _roi_pool(_E + "maxroipool.rois", 9902, None), Use(attributes={"pooled_shape": NON_DEFAULT})),
)
