"""Probes for the ``com.microsoft`` activation operators (version 1): ``Gelu``, ``BiasGelu``,
``FastGelu``, ``QuickGelu``, ``ScaledSiLU`` and ``GatedAdd``.

Every probe is one float32 node on X of shape (2, 4, 32) drawn from N(0, 1.5²) (the range
where GELU, its tanh approximation and SiLU differ from the identity and from each other);
references from :mod:`epaudit.reference.activations`.

Controls: the operator itself bakes in its input as zeros (every one of these maps 0 to 0,
so an EP that does not compute returns the control); ``BiasGelu`` bakes in a zero bias;
``FastGelu``'s ``bias`` and ``ScaledSiLU``'s ``scale`` are dropped; ``alpha`` is reset to the
schema default (QuickGelu 1.702, ScaledSiLU 1); ``GatedAdd`` bakes in a zero gate.

Sources: ORT ``docs/ContribOperators.md`` (the schema text of onnxruntime 1.31.1) and the
CPU kernels ``onnxruntime/contrib_ops/cpu/activations.h``, ``bert/bias_gelu.cc``,
``bert/fast_gelu.cc``, ``bert/scaled_silu.cc``, ``bert/gated_add.cc``.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import activations as ref
from . import _xcase as x

SHAPE = (2, 4, 32)
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_MS = "com.microsoft"


def _op(name: str, inputs: tuple[str, ...], outputs: tuple[str, ...], fn) -> x.XOp:
    return x.XOp(name, _MS, 1, inputs, outputs, fn)


GELU = _op("Gelu", ("X",), ("Y",), lambda v, a: {"Y": ref.gelu(v["X"])})
BIASGELU = _op("BiasGelu", ("A", "B"), ("C",), lambda v, a: {"C": ref.bias_gelu(v["A"], v["B"])})
FASTGELU = _op("FastGelu", ("X", "bias"), ("Y",), lambda v, a: {"Y": ref.fast_gelu(v["X"], v.get("bias"))})
QUICKGELU = _op("QuickGelu", ("X",), ("Y",),
                lambda v, a: {"Y": ref.quick_gelu(v["X"], float(a.get("alpha", ref.QUICK_GELU_ALPHA)))})
SCALEDSILU = _op("ScaledSiLU", ("X", "scale"), ("Y",),
                 lambda v, a: {"Y": ref.scaled_silu(v["X"], v.get("scale"), float(a.get("alpha", 1.0)))})
GATEDADD = _op("GatedAdd", ("X", "Y", "gate"), ("output",),
               lambda v, a: {"output": ref.gated_add(v["X"], v["Y"], v["gate"])})


def _x(seed: int, shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return x.normal(np.random.default_rng(seed), shape, scale=1.5)


def _zeros_in(g: x.Graph, name: str) -> x.Graph:
    return g.baked(**{name: np.zeros_like(g.feeds[name])})


def _itself(op: x.XOp, fid: str, seed: int, attrs: Mapping[str, object] | None = None,
            extra: Mapping[str, Callable[[np.random.Generator], np.ndarray]] | None = None,
            zero: str = "X") -> Callable[[], Probe]:
    """The operator itself: the control bakes in ``zero`` as zeros."""
    def build() -> Probe:
        rng = np.random.default_rng(seed + 1)
        feeds = {op.inputs[0]: _x(seed)}
        feeds.update({k: f(rng) for k, f in (extra or {}).items()})
        g = x.Graph("float32", dict(attrs or {}), feeds, op.outputs[:1])
        return x.probe(op, fid, g, _zeros_in(g, zero))
    return build


def _drop(op: x.XOp, fid: str, seed: int, name: str, make: Callable[[np.random.Generator], np.ndarray],
          attrs: Mapping[str, object] | None = None) -> Callable[[], Probe]:
    """An optional input's feature: the control drops it."""
    def build() -> Probe:
        feeds = {op.inputs[0]: _x(seed), name: make(np.random.default_rng(seed + 1))}
        g = x.Graph("float32", dict(attrs or {}), feeds, op.outputs[:1])
        return x.probe(op, fid, g, g.without(name))
    return build


def _attr(op: x.XOp, fid: str, seed: int, attrs: Mapping[str, object]) -> Callable[[], Probe]:
    """An attribute's feature: the control resets it to the schema default."""
    def build() -> Probe:
        g = x.Graph("float32", dict(attrs), {op.inputs[0]: _x(seed)}, op.outputs[:1])
        return x.probe(op, fid, g, g.without(attrs=tuple(attrs)))
    return build


def _bias(rng: np.random.Generator) -> np.ndarray:
    return x.normal(rng, (SHAPE[-1],))


def _scalar(value: float) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: np.array(value, dtype=np.float64)


def _gated_add() -> Probe:
    rng = np.random.default_rng(6101)
    g = x.Graph("float32", {}, {"X": x.normal(rng, SHAPE), "Y": x.normal(rng, SHAPE),
                                "gate": x.normal(rng, SHAPE[:-1] + (1,), loc=0.5)}, ("output",))
    return x.probe(GATEDADD, "gatedadd.basic", g, _zeros_in(g, "gate"))


def _gated_add_rank2() -> Probe:
    rng = np.random.default_rng(6102)
    g = x.Graph("float32", {}, {"X": x.normal(rng, (8, 32)), "Y": x.normal(rng, (8, 32)),
                                "gate": x.normal(rng, (8, 1), loc=0.5)}, ("output",))
    return x.probe(GATEDADD, "gatedadd.rank2", g, _zeros_in(g, "gate"))


_f = x.feature
_K = "onnxruntime/contrib_ops/cpu/"

#: Gelu, BiasGelu, FastGelu, QuickGelu, ScaledSiLU, GatedAdd features.
FEATURES = (
    _f(GELU, "gelu.basic", "float32", "exact GELU of X (2,4,32) ~ N(0, 1.5²); control bakes in X = 0",
       f"{_DOC}Gelu; {_K}activations.h Gelu (MlasComputeErf)", _itself(GELU, "gelu.basic", 6001)),
    _f(BIASGELU, "biasgelu.basic", "float32", "GELU of A (2,4,32) + B (32); control bakes in B = 0",
       f"{_DOC}BiasGelu; {_K}bert/bias_gelu.cc AddBiasGelu",
       _itself(BIASGELU, "biasgelu.basic", 6011, extra={"B": _bias}, zero="B")),
    _f(FASTGELU, "fastgelu.basic", "float32", "tanh-approximated GELU of X (2,4,32); control bakes in X = 0",
       f"{_DOC}FastGelu; {_K}bert/bias_gelu.cc BiasGelu<float, true> (no bias)",
       _itself(FASTGELU, "fastgelu.basic", 6021)),
    _f(FASTGELU, "fastgelu.bias", "float32", "bias (32) added to X before the approximation; control drops it",
       f"{_DOC}FastGelu: input 'bias'; {_K}bert/bias_gelu.cc AddBiasGelu (use_approximation)",
       _drop(FASTGELU, "fastgelu.bias", 6022, "bias", _bias), Use(inputs=("bias",))),
    _f(QUICKGELU, "quickgelu.basic", "float32",
       "X · sigmoid(1.702 X) (default alpha) of X (2,4,32); control bakes in X = 0",
       f"{_DOC}QuickGelu; ORT schema (contrib_defs.cc QuickGelu)", _itself(QUICKGELU, "quickgelu.basic", 6031)),
    _f(QUICKGELU, "quickgelu.alpha", "float32", "alpha=0.25 (X · sigmoid(0.25 X)); control resets alpha to 1.702",
       f"{_DOC}QuickGelu: attribute 'alpha'", _attr(QUICKGELU, "quickgelu.alpha", 6032, {"alpha": 0.25}),
       Use(attributes={"alpha": NON_DEFAULT})),
    _f(SCALEDSILU, "scaledsilu.basic", "float32", "SiLU of X (2,4,32) (alpha 1, no scale); control bakes in X = 0",
       f"{_DOC}ScaledSiLU; {_K}bert/scaled_silu.cc", _itself(SCALEDSILU, "scaledsilu.basic", 6041)),
    _f(SCALEDSILU, "scaledsilu.alpha", "float32", "alpha=2.5 (Z = 2.5 X); control resets alpha to 1",
       f"{_DOC}ScaledSiLU: attribute 'alpha'; {_K}bert/scaled_silu.cc",
       _attr(SCALEDSILU, "scaledsilu.alpha", 6042, {"alpha": 2.5}), Use(attributes={"alpha": NON_DEFAULT})),
    _f(SCALEDSILU, "scaledsilu.scale", "float32",
       "scalar scale input 0.5 overriding alpha=2.5; control drops scale (alpha 2.5 applies)",
       f"{_DOC}ScaledSiLU: input 'scale' overrides alpha; {_K}bert/scaled_silu.cc (LoadFloat(*scale))",
       _drop(SCALEDSILU, "scaledsilu.scale", 6043, "scale", _scalar(0.5), attrs={"alpha": 2.5}),
       Use(inputs=("scale",))),
    _f(GATEDADD, "gatedadd.basic", "float32",
       "X + Y · gate, X/Y (2,4,32), gate (2,4,1) ~ N(0.5, 1); control bakes in gate = 0",
       f"{_DOC}GatedAdd; {_K}bert/gated_add.cc GatedAddValue", _gated_add),
    _f(GATEDADD, "gatedadd.rank2", "float32", "GatedAdd on 2-D X/Y (8,32), gate (8,1); control bakes in gate = 0",
       f"{_DOC}GatedAdd: X (..., C), gate (..., 1); {_K}bert/gated_add.cc", _gated_add_rank2,
       Use(facts={"input_rank": 2})),
)
