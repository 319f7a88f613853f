"""Probes for the ``com.microsoft`` tensor and math operators (version 1): ``Pad``,
``GatherND``, ``ExpandDims``, ``Range``, ``Trilu``, ``Inverse``, ``CDist``, ``Unique``,
``UnfoldTensor`` and ``SampleOp``.

float32 unless a feature is a dtype (Range int32/int64, Trilu int64, Inverse float16/float64,
CDist float64). Data-movement outputs (Pad, GatherND, ExpandDims, Trilu, Unique, UnfoldTensor,
SampleOp) and integer outputs are compared exactly: a copy is right or wrong. References from
:mod:`epaudit.reference.tensor_math`.

Controls: the operator itself bakes in a neutral required input (Pad: zero pads; GatherND:
zero indices; ExpandDims: axis 0; Range: start 0; Trilu/UnfoldTensor/SampleOp/Unique: the
data as zeros; Inverse: the identity; CDist: B = 0); an optional input is dropped; an
attribute is reset to its default.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import tensor_math as ref
from . import _xcase as x

_MS = "com.microsoft"
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_K = "onnxruntime/contrib_ops/cpu/"
_ALL = frozenset({"output", "Y", "y", "idx", "counts"})


def _op(name, inputs, outputs, fn, in_dtypes=None, out_dtypes=None, exact=_ALL) -> x.XOp:
    return x.XOp(name, _MS, 1, inputs, outputs, fn, dict(in_dtypes or {}), dict(out_dtypes or {}),
                 frozenset(exact) & frozenset(outputs))


PAD = _op("Pad", ("data", "pads", "value"), ("output",),
          lambda v, a: {"output": ref.pad(v["data"], v["pads"], v.get("value"), a.get("mode", "constant"))},
          {"pads": "int64"})
GATHERND = _op("GatherND", ("data", "indices"), ("output",),
               lambda v, a: {"output": ref.gather_nd(v["data"], v["indices"])}, {"indices": "int64"})
GATHERND_I32 = _op("GatherND", ("data", "indices"), ("output",),
                   lambda v, a: {"output": ref.gather_nd(v["data"], v["indices"])}, {"indices": "int32"})
EXPANDDIMS = _op("ExpandDims", ("X", "axis"), ("Y",),
                 lambda v, a: {"Y": ref.expand_dims(v["X"], int(v["axis"]))}, {"axis": "int32"})


def _range_op(dtype: str | None) -> x.XOp:
    ins = {k: dtype for k in ("start", "limit", "delta")} if dtype else {}
    return _op("Range", ("start", "limit", "delta"), ("Y",),
               lambda v, a: {"Y": ref.range_(v["start"], v["limit"], v.get("delta"))}, ins,
               {"Y": dtype} if dtype else {}, exact=frozenset({"Y"}) if dtype else frozenset())


RANGE, RANGE_I64, RANGE_I32 = _range_op(None), _range_op("int64"), _range_op("int32")
TRILU = _op("Trilu", ("X", "k"), ("Y",), lambda v, a: {"Y": ref.trilu(v["X"], v.get("k"), int(a.get("upper", 1)))},
            {"k": "int64"})
TRILU_I64 = _op("Trilu", ("X", "k"), ("Y",),
                lambda v, a: {"Y": ref.trilu(v["X"], v.get("k"), int(a.get("upper", 1)))},
                {"X": "int64", "k": "int64"}, {"Y": "int64"})
INVERSE = _op("Inverse", ("X",), ("Y",), lambda v, a: {"Y": ref.inverse(v["X"])}, exact=frozenset())
CDIST = _op("CDist", ("A", "B"), ("C",), lambda v, a: {"C": ref.cdist(v["A"], v["B"], a.get("metric", "sqeuclidean"))},
            exact=frozenset())
UNIQUE = _op("Unique", ("x",), ("y", "idx", "counts"), lambda v, a: ref.unique(v["x"]),
             out_dtypes={"idx": "int64", "counts": "int64"})
UNFOLD = _op("UnfoldTensor", ("input",), ("output",),
             lambda v, a: {"output": ref.unfold_tensor(v["input"], int(a["size"]), int(a.get("step", 1)),
                                                       int(a.get("dim", -1)))})
SAMPLEOP = _op("SampleOp", ("X",), ("Y",), lambda v, a: {"Y": ref.sample_op(v["X"])})


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _zeros(g: x.Graph, name: str, value: float = 0.0) -> x.Graph:
    return g.baked(**{name: np.zeros_like(g.feeds[name]) + value})


def _probe(op: x.XOp, fid: str, g: x.Graph, control: x.Graph, length: int = 16) -> Probe:
    return x.probe(op, fid, g, control, length=length)


# --------------------------------------------------------------------------- Pad
def _pad_graph(seed: int, pads, attrs=None, value: float | None = None, pads_shape=None) -> x.Graph:
    p = np.array(pads, dtype=np.int64)
    feeds = {"data": x.normal(_rng(seed), (3, 4)), "pads": p.reshape(pads_shape) if pads_shape else p}
    if value is not None:
        feeds["value"] = np.array(value)
    return x.Graph("float32", dict(attrs or {}), feeds, ("output",))


def _pad_zero(fid: str, seed: int, pads, attrs=None, pads_shape=None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _pad_graph(seed, pads, attrs, pads_shape=pads_shape)
        return _probe(PAD, fid, g, _zeros(g, "pads"))
    return build


def _pad_value() -> Probe:
    g = _pad_graph(8002, [1, 0, 0, 2], value=2.5)
    return _probe(PAD, "pad.value", g, g.without("value"))


def _pad_mode(fid: str, seed: int, mode: str) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _pad_graph(seed, [2, 1, 1, 2], {"mode": mode})
        return _probe(PAD, fid, g, g.without(attrs=("mode",)))
    return build


# --------------------------------------------------------------------------- GatherND
def _gnd(fid: str, seed: int, indices, op: x.XOp = GATHERND) -> Callable[[], Probe]:
    def build() -> Probe:
        g = x.Graph("float32", {}, {"data": x.normal(_rng(seed), (3, 4, 5)),
                                    "indices": np.array(indices, dtype=np.int64)}, ("output",))
        return _probe(op, fid, g, _zeros(g, "indices"))
    return build


# --------------------------------------------------------------------------- Range
def _range(fid: str, op: x.XOp, dtype: str, start, limit, delta=None, drop_delta: bool = False) -> Callable[[], Probe]:
    def build() -> Probe:
        feeds = {"start": np.array(start, dtype=np.float64), "limit": np.array(limit, dtype=np.float64)}
        if delta is not None:
            feeds["delta"] = np.array(delta, dtype=np.float64)
        g = x.Graph(dtype if dtype.startswith("float") else "float32", {}, feeds, ("Y",))
        control = g.without("delta") if drop_delta else _zeros(g, "start")
        return _probe(op, fid, g, control)
    return build


# --------------------------------------------------------------------------- Trilu / Inverse / CDist
def _trilu(fid: str, seed: int, attrs=None, k: int | None = None, drop: str | None = None,
           op: x.XOp = TRILU) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = _rng(seed)
        data = rng.integers(-9, 10, (2, 4, 5)).astype(np.float64) if op is TRILU_I64 else x.normal(rng, (2, 4, 5))
        feeds = {"X": data}
        if k is not None:
            feeds["k"] = np.array(k, dtype=np.int64)
        g = x.Graph("float32", dict(attrs or {}), feeds, ("Y",))
        if drop == "k":
            control = g.without("k")
        elif drop:
            control = g.without(attrs=(drop,))
        else:
            control = _zeros(g, "X")
        return _probe(op, fid, g, control)
    return build


def _inverse(fid: str, seed: int, dtype: str) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = _rng(seed)
        m = np.eye(4) * 2.0 + 0.3 * rng.standard_normal((2, 4, 4))
        g = x.Graph(dtype, {}, {"X": x.rounded(m, dtype)}, ("Y",))
        return _probe(INVERSE, fid, g, g.baked(X=np.broadcast_to(np.eye(4), (2, 4, 4)).copy()))
    return build


def _cdist(fid: str, seed: int, attrs=None, dtype: str = "float32", n: int = 8, drop_metric: bool = False
           ) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = _rng(seed)
        g = x.Graph(dtype, dict(attrs or {}), {"A": x.normal(rng, (4, n), dtype), "B": x.normal(rng, (5, n), dtype)},
                    ("C",))
        return _probe(CDIST, fid, g, g.without(attrs=("metric",)) if drop_metric else _zeros(g, "B"), length=n)
    return build


# --------------------------------------------------------------------------- Unique / Unfold / SampleOp
def _unique() -> Probe:
    v = np.array([2.5, -1.0, -1.0, 3.25, 2.5, 0.5, 3.25, 3.25, 7.0, -1.0, 0.5, 9.5])
    g = x.Graph("float32", {}, {"x": v}, ("y", "idx", "counts"))
    return _probe(UNIQUE, "unique.basic", g, _zeros(g, "x"))


def _unfold(fid: str, seed: int, attrs: Mapping[str, object], drop: tuple[str, ...] = (),
            shape=(2, 3, 8)) -> Callable[[], Probe]:
    def build() -> Probe:
        g = x.Graph("float32", {"size": 3, **attrs}, {"input": x.normal(_rng(seed), shape)}, ("output",))
        return _probe(UNFOLD, fid, g, g.without(attrs=drop) if drop else _zeros(g, "input"))
    return build


def _sample() -> Probe:
    g = x.Graph("float32", {}, {"X": x.normal(_rng(8901), (2, 3, 4))}, ("Y",))
    return _probe(SAMPLEOP, "sampleop.basic", g, _zeros(g, "X"))


def _expand(fid: str, axis: int, constant: bool = False) -> Callable[[], Probe]:
    """The control bakes in X = 0 and keeps ``axis`` as the subject has it: a fed axis, or
    (``constant``) an initializer, which ORT's ExpandDims shape inference reads at load."""
    def build() -> Probe:
        g = x.Graph("float32", {}, {"X": x.normal(_rng(8301), (2, 3, 4))}, ("Y",),
                    {"axis": np.array(axis)} if constant else {})
        if not constant:
            g = x.Graph("float32", {}, {**g.feeds, "axis": np.array(axis)}, ("Y",))
        return _probe(EXPANDDIMS, fid, g, _zeros(g, "X"))
    return build


_f = x.feature
_PAD = f"{_DOC}Pad; onnxruntime/core/providers/cpu/tensor/pad.cc (contrib Pad registration)"
_GND = f"{_DOC}GatherND; {_K}gather_nd.cc; ONNX GatherND (batch_dims 0)"
_RANGE = f"{_DOC}Range; {_K}range.cc"
_TRILU = f"{_DOC}Trilu; {_K}trilu.cc"
_INV = f"{_DOC}Inverse; {_K}inverse.cc"
_CDIST = f"{_DOC}CDist; {_K}cdist.h (sqeuclidean, euclidean)"
_UNFOLD = f"{_DOC}UnfoldTensor; {_K}tensor/unfold.cc"

#: Pad, GatherND, ExpandDims, Range, Trilu, Inverse, CDist, Unique, UnfoldTensor, SampleOp features.
FEATURES = (
    _f(PAD, "pad.basic", "float32", "constant pad [1,2,0,1] of data (3,4) (zeros); control bakes in pads = 0",
       _PAD, _pad_zero("pad.basic", 8001, [1, 2, 0, 1])),
    _f(PAD, "pad.value", "float32", "scalar value input 2.5 fills the padding; control drops value (0)",
       f"{_PAD}: input 'value'", _pad_value, Use(inputs=("value",))),
    _f(PAD, "pad.mode.reflect", "float32", "mode=reflect, pads [2,1,1,2]; control mode constant",
       f"{_PAD}: attribute 'mode'", _pad_mode("pad.mode.reflect", 8003, "reflect"), Use(attributes={"mode": "reflect"})),
    _f(PAD, "pad.mode.edge", "float32", "mode=edge, pads [2,1,1,2]; control mode constant",
       f"{_PAD}: attribute 'mode'", _pad_mode("pad.mode.edge", 8004, "edge"), Use(attributes={"mode": "edge"})),
    _f(PAD, "pad.negative", "float32", "pads [-1,1,0,-2] crop row 0 and the last 2 columns; control pads = 0",
       f"{_PAD}: negative pads remove", _pad_zero("pad.negative", 8005, [-1, 1, 0, -2])),
    _f(PAD, "pad.pads_2d", "float32", "pads given as a (1, 4) tensor; control bakes in pads = 0",
       f"{_PAD}: pads 'a 2D tensor of shape [1, 2 * input_rank]'",
       _pad_zero("pad.pads_2d", 8006, [1, 2, 0, 1], pads_shape=(1, 4)), Use(facts={"pads_rank": 2})),
    _f(GATHERND, "gathernd.basic", "float32", "data (3,4,5), int64 indices (2,2) gather 2 rows of 5; control indices 0",
       _GND, _gnd("gathernd.basic", 8101, [[2, 1], [0, 3]])),
    _f(GATHERND_I32, "gathernd.indices.int32", "float32", "gathernd.basic with int32 indices; control indices 0",
       f"{_GND}: type constraint Tind includes tensor(int32)",
       _gnd("gathernd.indices.int32", 8102, [[2, 1], [0, 3]], GATHERND_I32)),
    _f(GATHERND, "gathernd.scalars", "float32", "indices (3,3) of full rank gather 3 scalars; control indices 0",
       f"{_GND}: indices[-1] == rank", _gnd("gathernd.scalars", 8103, [[2, 1, 4], [0, 3, 1], [1, 0, 2]])),
    _f(GATHERND, "gathernd.slices", "float32", "indices (2,1,1) gather whole (4,5) slices; control indices 0",
       f"{_GND}: indices[-1] == 1", _gnd("gathernd.slices", 8104, [[[2]], [[1]]])),
    _f(GATHERND, "gathernd.negative", "float32", "negative indices [[-1,-2],[-3,0]] count from the end; control 0",
       f"{_GND}: negative indices", _gnd("gathernd.negative", 8105, [[-1, -2], [-3, 0]])),
    _f(EXPANDDIMS, "expanddims.basic", "float32", "fed axis=1 inserts a 1: (2,3,4) -> (2,1,3,4); control X = 0",
       f"{_DOC}ExpandDims; {_K}expand_dims.h", _expand("expanddims.basic", 1)),
    _f(EXPANDDIMS, "expanddims.negative_axis", "float32", "fed axis=-1 appends a 1: (2,3,4,1); control X = 0",
       f"{_DOC}ExpandDims; {_K}expand_dims.h (negative axis from the end)", _expand("expanddims.negative_axis", -1)),
    _f(EXPANDDIMS, "expanddims.constant_axis", "float32",
       "axis=-1 as an initializer (read by shape inference at load): (2,3,4,1); control X = 0",
       f"{_DOC}ExpandDims; contrib_defs.cc ExpandDims shape inference (onnxruntime PR #29448)",
       _expand("expanddims.constant_axis", -1, constant=True), Use(facts={"axis": "constant"})),
    _f(RANGE, "range.basic", "float32", "start 1.5, limit 7 (delta absent = 1): 6 values; control start 0",
       _RANGE, _range("range.basic", RANGE, "float32", 1.5, 7.0)),
    _f(RANGE, "range.delta", "float32", "delta 0.75 from 1.5 to 7: 8 values; control drops delta",
       f"{_RANGE}: input 'delta'", _range("range.delta", RANGE, "float32", 1.5, 7.0, 0.75, drop_delta=True),
       Use(inputs=("delta",))),
    _f(RANGE, "range.negative_delta", "float32", "start 5, limit -3, delta -1.5: 6 values; control start 0",
       f"{_RANGE}: negative delta", _range("range.negative_delta", RANGE, "float32", 5.0, -3.0, -1.5),
       Use(inputs=("delta",))),
    _f(RANGE_I64, "range.int64", "int64", "int64 start 3, limit 20, delta 4: 5 values; control start 0",
       f"{_RANGE}: type constraint T includes tensor(int64)", _range("range.int64", RANGE_I64, "int64", 3, 20, 4),
       Use(inputs=("delta",))),
    _f(RANGE_I32, "range.int32", "int32", "int32 start -4, limit 9 (delta absent): 13 values; control start 0",
       f"{_RANGE}: type constraint T includes tensor(int32)", _range("range.int32", RANGE_I32, "int32", -4, 9)),
    _f(TRILU, "trilu.basic", "float32", "upper triangle (default) of X (2,4,5); control bakes in X = 0",
       _TRILU, _trilu("trilu.basic", 8401)),
    _f(TRILU, "trilu.upper", "float32", "upper=0: lower triangle; control upper=1",
       f"{_TRILU}: attribute 'upper'", _trilu("trilu.upper", 8402, {"upper": 0}, drop="upper"),
       Use(attributes={"upper": NON_DEFAULT})),
    _f(TRILU, "trilu.k", "float32", "k=1 drops the main diagonal of the upper part; control drops k",
       f"{_TRILU}: input 'k'", _trilu("trilu.k", 8403, k=1, drop="k"), Use(inputs=("k",))),
    _f(TRILU, "trilu.k.negative", "float32", "k=-1 keeps one diagonal below; control drops k",
       f"{_TRILU}: input 'k' negative", _trilu("trilu.k.negative", 8404, k=-1, drop="k"), Use(inputs=("k",))),
    _f(TRILU, "trilu.k.lower", "float32", "upper=0 with k=-1 excludes the main diagonal; control drops k",
       f"{_TRILU}: 'k' with upper=0", _trilu("trilu.k.lower", 8405, {"upper": 0}, k=-1, drop="k"),
       Use(inputs=("k",), attributes={"upper": NON_DEFAULT})),
    _f(TRILU_I64, "trilu.int64", "int64", "upper triangle of an int64 X; control bakes in X = 0",
       f"{_TRILU}: type constraint T includes tensor(int64)", _trilu("trilu.int64", 8406, op=TRILU_I64)),
    _f(INVERSE, "inverse.basic", "float32", "inverse of 2 well-conditioned 4x4 matrices; control bakes in the identity",
       _INV, _inverse("inverse.basic", 8501, "float32")),
    _f(INVERSE, "inverse.dtype.float16", "float16", "inverse.basic in float16; control the identity",
       f"{_INV}: type constraint T includes tensor(float16)", _inverse("inverse.dtype.float16", 8502, "float16")),
    _f(INVERSE, "inverse.dtype.float64", "float64", "inverse.basic in float64; control the identity",
       f"{_INV}: type constraint T includes tensor(double)", _inverse("inverse.dtype.float64", 8503, "float64")),
    _f(CDIST, "cdist.basic", "float32", "sqeuclidean (default) distances of A (4,8), B (5,8); control bakes in B = 0",
       _CDIST, _cdist("cdist.basic", 8601)),
    _f(CDIST, "cdist.metric.euclidean", "float32", "metric=euclidean; control metric sqeuclidean",
       f"{_CDIST}: attribute 'metric'", _cdist("cdist.metric.euclidean", 8602, {"metric": "euclidean"},
                                                drop_metric=True), Use(attributes={"metric": "euclidean"})),
    _f(CDIST, "cdist.metric.cityblock", "float32",
       "metric=cityblock (in the schema's list); control metric sqeuclidean",
       f"{_DOC}CDist: attribute 'metric' lists cityblock; {_K}cdist.h implements only sqeuclidean/euclidean",
       _cdist("cdist.metric.cityblock", 8603, {"metric": "cityblock"}, drop_metric=True),
       Use(attributes={"metric": "cityblock"})),
    _f(CDIST, "cdist.short_rows", "float32", "rows of N=3 (< 8: the kernel's raw-loop path); control B = 0",
       f"{_CDIST} (Sqeuclidean<T> below 8 columns)", _cdist("cdist.short_rows", 8604, n=3), Use(facts={"n": 3})),
    _f(CDIST, "cdist.dtype.float64", "float64", "cdist.basic in float64; control B = 0",
       f"{_CDIST}: type constraint T includes tensor(double)", _cdist("cdist.dtype.float64", 8605, dtype="float64")),
    _f(UNIQUE, "unique.basic", "float32", "uniques, idx and counts of 12 floats with repeats; control bakes in x = 0",
       f"{_DOC}Unique; {_K}unique.cc", _unique),
    _f(UNFOLD, "unfoldtensor.basic", "float32", "size=3 windows of the last axis of (2,3,8) -> (2,3,6,3); control x = 0",
       _UNFOLD, _unfold("unfoldtensor.basic", 8801, {})),
    _f(UNFOLD, "unfoldtensor.step", "float32", "step=2: (2,3,3,3); control step 1",
       f"{_UNFOLD}: attribute 'step'", _unfold("unfoldtensor.step", 8802, {"step": 2}, ("step",)),
       Use(attributes={"step": NON_DEFAULT})),
    _f(UNFOLD, "unfoldtensor.dim", "float32", "dim=1 on (2,6,8): (2,4,8,3); control dim -1 (2,6,6,3)",
       f"{_UNFOLD}: attribute 'dim'", _unfold("unfoldtensor.dim", 8803, {"dim": 1}, ("dim",), (2, 6, 8)),
       Use(attributes={"dim": NON_DEFAULT})),
    _f(SAMPLEOP, "sampleop.basic", "float32", "copy of X (2,3,4); control bakes in X = 0",
       f"{_DOC}SampleOp; {_K}sample.h", _sample),
)
