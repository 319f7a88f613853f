"""Probes for the fused and layout contrib kernels (``com.microsoft``, version 1):
``FusedConv``, ``FusedGemm``, ``FusedMatMul``, ``TransposeMatMul``,
``ConvTransposeWithDynamicPads`` and ``NhwcMaxPool``.

Shapes: FusedConv X (1, 4, 6, 6), W (6, 4, 3, 3) ~ N(0, 0.3²) (conv outputs of both signs,
std ~1.8, so every activation is decisive); FusedGemm A (4, 16) @ B (16, 8) (square 16x16
operands where a transpose is the feature); FusedMatMul A (2, 4, 16) @ B (2, 16, 8);
ConvTranspose X (1, 2, 4, 4), W (2, 3, 3, 3); NhwcMaxPool x (1, 6, 6, 4) uint8 codes.
References from :mod:`epaudit.reference.fused`.

Controls: the operator itself bakes in a zero weight (``W`` / ``B`` = 0; NhwcMaxPool its input
= 0); an activation feature drops ``activation`` and its parameters (identity); an optional
input is dropped; an attribute is reset to its default (a ``pads``/``strides``/``dilations``
control has another output shape: infinitely separated); ``group`` keeps its grouped weight
and bakes it in as zeros.

Sources: ORT ``docs/ContribOperators.md``, ``onnxruntime/contrib_ops/cpu/fused_conv.cc``,
``fused_activation.cc``, ``fused_gemm.cc``, ``fused_matmul.cc``,
``conv_transpose_with_dynamic_pads.h``, ``nhwc_max_pool.cc``; the ONNX Conv, Gemm,
ConvTranspose and MaxPool specifications for the shared attributes.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import fused as ref
from . import _xcase as x

_MS = "com.microsoft"
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_K = "onnxruntime/contrib_ops/cpu/"


def _conv_ref(v, a):
    attrs = dict(a)
    act = attrs.pop("activation", None)
    params = attrs.pop("activation_params", ())
    return {"Y": ref.fused_conv(v["X"], v["W"], v.get("B"), v.get("Z"), activation=act, activation_params=params,
                                **attrs)}


def _gemm_ref(v, a):
    return {"Y": ref.fused_gemm(v["A"], v["B"], v.get("C"), **dict(a))}


def _matmul_ref(v, a):
    return {"Y": ref.fused_matmul(v["A"], v["B"], **dict(a))}


def _ctdp_ref(v, a):
    attrs = {k: a[k] for k in ("strides", "dilations", "output_padding", "group") if k in a}
    return {"Y": ref.conv_transpose(v["X"], v["W"], v.get("B"), v.get("Pads"), **attrs)}


def _pool_ref(v, a):
    return {"y": ref.nhwc_max_pool(v["x"], **dict(a))}


FUSEDCONV = x.XOp("FusedConv", _MS, 1, ("X", "W", "B", "Z"), ("Y",), _conv_ref)
FUSEDGEMM = x.XOp("FusedGemm", _MS, 1, ("A", "B", "C"), ("Y",), _gemm_ref)
FUSEDMATMUL = x.XOp("FusedMatMul", _MS, 1, ("A", "B"), ("Y",), _matmul_ref)
TRANSPOSEMATMUL = x.XOp("TransposeMatMul", _MS, 1, ("A", "B"), ("Y",), _matmul_ref)
CTDP = x.XOp("ConvTransposeWithDynamicPads", _MS, 1, ("X", "W", "Pads", "B"), ("Y",), _ctdp_ref,
             input_dtypes={"Pads": "int64"})
NHWC_U8 = x.XOp("NhwcMaxPool", _MS, 1, ("x",), ("y",), _pool_ref, {"x": "uint8"}, {"y": "uint8"}, frozenset({"y"}))
NHWC_I8 = x.XOp("NhwcMaxPool", _MS, 1, ("x",), ("y",), _pool_ref, {"x": "int8"}, {"y": "int8"}, frozenset({"y"}))


# --------------------------------------------------------------------------- FusedConv
def _conv_graph(seed: int, attrs: Mapping[str, object], *, extra: tuple[str, ...] = (), c: int = 4,
                w_shape: tuple[int, ...] = (6, 4, 3, 3), hw: int = 6) -> x.Graph:
    rng = np.random.default_rng(seed)
    feeds = {"X": x.normal(rng, (1, c, hw, hw)), "W": x.normal(rng, w_shape, scale=0.3)}
    if "B" in extra:
        feeds["B"] = x.normal(rng, (w_shape[0],))
    g = x.Graph("float32", dict(attrs), feeds, ("Y",))
    if "Z" in extra:
        shape = ref.fused_conv(g.feeds["X"], g.feeds["W"], **{k: v for k, v in attrs.items()
                                                             if not k.startswith("activation")}).shape
        g = x.Graph("float32", dict(attrs), {**g.feeds, "Z": x.normal(rng, shape)}, ("Y",))
    return g


def _conv_zero_w(fid: str, seed: int, attrs: Mapping[str, object] | None = None, **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _conv_graph(seed, attrs or {}, **kw)
        return x.probe(FUSEDCONV, fid, g, g.baked(W=np.zeros_like(g.feeds["W"])), length=36)
    return build


def _conv_activation(fid: str, seed: int, act: str, params: tuple[float, ...] = ()) -> Callable[[], Probe]:
    def build() -> Probe:
        attrs: dict[str, object] = {"activation": act, "pads": [1, 1, 1, 1]}
        if params:
            attrs["activation_params"] = list(params)
        g = _conv_graph(seed, attrs)
        return x.probe(FUSEDCONV, fid, g, g.without(attrs=("activation", "activation_params")), length=36)
    return build


def _conv_drop(fid: str, seed: int, name: str, attrs: Mapping[str, object] | None = None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _conv_graph(seed, {"pads": [1, 1, 1, 1], **(attrs or {})}, extra=("B", "Z") if name == "Z" else (name,))
        return x.probe(FUSEDCONV, fid, g, g.without(name), length=36)
    return build


def _conv_attr(fid: str, seed: int, attrs: Mapping[str, object], hw: int = 6) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _conv_graph(seed, attrs, hw=hw)
        return x.probe(FUSEDCONV, fid, g, g.without(attrs=tuple(attrs)), length=36)
    return build


# --------------------------------------------------------------------------- FusedGemm
def _gemm_graph(seed: int, attrs: Mapping[str, object], *, m: int = 4, k: int = 16, n: int = 8,
                c: bool = False) -> x.Graph:
    rng = np.random.default_rng(seed)
    a_shape = (k, m) if attrs.get("transA") else (m, k)
    b_shape = (n, k) if attrs.get("transB") else (k, n)
    feeds = {"A": x.normal(rng, a_shape), "B": x.normal(rng, b_shape, scale=0.4)}
    if c:
        feeds["C"] = x.normal(rng, (n,))
    return x.Graph("float32", dict(attrs), feeds, ("Y",))


#: The identity the CPU kernel accepts: FusedGemm without an activation is refused ("unknown
#: kernel type", ``ElementWiseRangedTransform::Create`` has no identity), LeakyRelu(alpha=1) is x.
IDENTITY = {"activation": "LeakyRelu", "activation_alpha": 1.0}
#: The activation of the non-activation features (what GemmActivationFusion produces most).
_BASE_ACT = {"activation": "Relu"}


def _gemm_zero_b(fid: str, seed: int, attrs: Mapping[str, object]) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _gemm_graph(seed, attrs)
        return x.probe(FUSEDGEMM, fid, g, g.baked(B=np.zeros_like(g.feeds["B"])))
    return build


def _gemm_activation(fid: str, seed: int, act: str, **params: float) -> Callable[[], Probe]:
    """The control replaces the activation by the identity :data:`IDENTITY`."""
    def build() -> Probe:
        g = _gemm_graph(seed, {"activation": act, **params})
        return x.probe(FUSEDGEMM, fid, g, g.without(attrs=("activation",) + tuple(params)).with_attrs(**IDENTITY))
    return build


def _gemm_attr(fid: str, seed: int, attrs: Mapping[str, object], *, square: bool = False,
               c: bool = False) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _gemm_graph(seed, {**_BASE_ACT, **attrs}, m=16 if square else 4, n=16 if square else 8, c=c)
        return x.probe(FUSEDGEMM, fid, g, g.without(attrs=tuple(attrs)))
    return build


def _gemm_c() -> Probe:
    g = _gemm_graph(7120, dict(_BASE_ACT), c=True)
    return x.probe(FUSEDGEMM, "fusedgemm.C", g, g.without("C"))


# --------------------------------------------------------------------------- MatMul
def _mm_graph(op_seed: int, attrs: Mapping[str, object], a_shape, b_shape) -> x.Graph:
    rng = np.random.default_rng(op_seed)
    return x.Graph("float32", dict(attrs), {"A": x.normal(rng, a_shape), "B": x.normal(rng, b_shape, scale=0.4)},
                   ("Y",))


def _mm_zero(op: x.XOp, fid: str, seed: int, dtype: str = "float32") -> Callable[[], Probe]:
    def build() -> Probe:
        g = _mm_graph(seed, {}, (2, 4, 16), (2, 16, 8))
        if dtype != "float32":
            g = x.Graph(dtype, {}, dict(g.feeds), ("Y",))
        return x.probe(op, fid, g, g.baked(B=np.zeros_like(g.feeds["B"])))
    return build


def _mm_attr(op: x.XOp, fid: str, seed: int, attrs: Mapping[str, object], a_shape, b_shape) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _mm_graph(seed, attrs, a_shape, b_shape)
        return x.probe(op, fid, g, g.without(attrs=tuple(attrs)))
    return build


# --------------------------------------------------------------------------- ConvTranspose
def _ct_graph(seed: int, attrs: Mapping[str, object], *, pads: list[int] | None = (0, 0, 0, 0), bias: bool = False,
              w_shape: tuple[int, ...] = (2, 3, 3, 3), c: int = 2) -> x.Graph:
    """``Pads`` is fed (zeros unless the feature sets it): the CPU kernel refuses a node
    without it ("Dynamic pads tensor is required."), although the schema makes it optional."""
    rng = np.random.default_rng(seed)
    feeds = {"X": x.normal(rng, (1, c, 4, 4)), "W": x.normal(rng, w_shape, scale=0.5)}
    if pads is not None:
        feeds["Pads"] = np.array(pads, dtype=np.int64)
    if bias:
        feeds["B"] = x.normal(rng, (w_shape[1] * int(attrs.get("group", 1)),))
    return x.Graph("float32", dict(attrs), feeds, ("Y",))


def _ct_zero_w(fid: str, seed: int, attrs: Mapping[str, object] | None = None, **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _ct_graph(seed, attrs or {}, **kw)
        return x.probe(CTDP, fid, g, g.baked(W=np.zeros_like(g.feeds["W"])), length=18)
    return build


def _ct_pads() -> Probe:
    g = _ct_graph(7402, {}, pads=[1, 0, 1, 0])
    return x.probe(CTDP, "convtransposewithdynamicpads.Pads", g, g.baked(Pads=np.zeros(4, dtype=np.int64)),
                   length=18)


def _ct_bias() -> Probe:
    g = _ct_graph(7403, {}, bias=True)
    return x.probe(CTDP, "convtransposewithdynamicpads.B", g, g.without("B"), length=18)


def _ct_attr(fid: str, seed: int, attrs: Mapping[str, object], drop: tuple[str, ...]) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _ct_graph(seed, attrs)
        return x.probe(CTDP, fid, g, g.without(attrs=drop), length=18)
    return build


# --------------------------------------------------------------------------- NhwcMaxPool
def _pool_graph(seed: int, op: x.XOp, attrs: Mapping[str, object]) -> x.Graph:
    rng = np.random.default_rng(seed)
    lo, hi = (0, 256) if op is NHWC_U8 else (-128, 128)
    return x.Graph("float32", {"kernel_shape": [2, 2], **attrs},
                   {"x": rng.integers(lo, hi, (1, 6, 6, 4)).astype(np.float64)}, ("y",))


def _pool_itself(fid: str, seed: int, op: x.XOp) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _pool_graph(seed, op, {})
        return x.probe(op, fid, g, g.baked(x=np.zeros_like(g.feeds["x"]) + (0 if op is NHWC_U8 else -128)))
    return build


def _pool_attr(fid: str, seed: int, attrs: Mapping[str, object], drop: tuple[str, ...] | None = None
               ) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _pool_graph(seed, NHWC_U8, attrs)
        return x.probe(NHWC_U8, fid, g, g.without(attrs=drop or tuple(attrs)))
    return build


_f = x.feature
_CONV_SRC = f"{_DOC}FusedConv; {_K}fused_conv.cc, fused_activation.cc GetFusedActivationAttr; core/providers/cpu/nn/conv.cc"
_GEMM_SRC = f"{_DOC}FusedGemm; {_K}fused_gemm.cc (Gemm<float> + ElementWiseRangedTransform)"
_MM_SRC = f"{_DOC}FusedMatMul; {_K}fused_matmul.cc; contrib_defs.cc FusedMatMulShapeInference"
_TMM_SRC = f"{_DOC}TransposeMatMul; {_K}fused_matmul.cc (MatMul<float>)"
_CT_SRC = f"{_DOC}ConvTransposeWithDynamicPads; {_K}conv_transpose_with_dynamic_pads.h; ONNX ConvTranspose"
_POOL_SRC = f"{_DOC}NhwcMaxPool; {_K}nhwc_max_pool.cc; ONNX MaxPool"
_ACTS = (("Relu", ()), ("Tanh", ()), ("Sigmoid", ()), ("LeakyRelu", (0.1,)), ("Clip", (-0.5, 0.75)),
         ("HardSigmoid", (0.3, 0.4)))
_GEMM_ACTS = (("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {"activation_alpha": 0.1}),
              ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
              ("Selu", {"activation_alpha": 1.5, "activation_gamma": 1.2}), ("Elu", {"activation_alpha": 0.7}))
_SQ = (2, 16, 16)

#: FusedConv, FusedGemm, FusedMatMul, TransposeMatMul, ConvTransposeWithDynamicPads, NhwcMaxPool features.
FEATURES = (
    _f(FUSEDCONV, "fusedconv.basic", "float32", "3x3 conv X (1,4,6,6) * W (6,4,3,3), no activation; control bakes in W = 0",
       _CONV_SRC, _conv_zero_w("fusedconv.basic", 7001)),
    *[_f(FUSEDCONV, f"fusedconv.activation.{a}", "float32",
         f"activation={a}{' params ' + str(list(p)) if p else ''} on a padded 3x3 conv; control drops the activation",
         _CONV_SRC, _conv_activation(f"fusedconv.activation.{a}", 7010 + i, a, p),
         Use(attributes={"activation": a, **({"activation_params": NON_DEFAULT} if p else {})}))
      for i, (a, p) in enumerate(_ACTS)],
    _f(FUSEDCONV, "fusedconv.B", "float32", "bias B (6) added per output channel; control drops B",
       f"{_CONV_SRC} (MlasConv bias)", _conv_drop("fusedconv.B", 7020, "B"), Use(inputs=("B",))),
    _f(FUSEDCONV, "fusedconv.Z", "float32", "sum input Z (1,6,6,6) added to conv + B (no activation); control drops Z",
       f"{_CONV_SRC} (Sum copied into Y, Beta = 1)", _conv_drop("fusedconv.Z", 7021, "Z"), Use(inputs=("Z",))),
    _f(FUSEDCONV, "fusedconv.Z.with_activation", "float32",
       "Relu(conv + B + Z): Z is added before the activation; control drops Z",
       f"{_CONV_SRC} (MlasConv applies the activation after the Beta = 1 accumulation)",
       _conv_drop("fusedconv.Z.with_activation", 7022, "Z", {"activation": "Relu"}),
       Use(inputs=("Z",), attributes={"activation": "Relu"})),
    _f(FUSEDCONV, "fusedconv.pads", "float32", "pads [1,2,0,1] (asymmetric); control no pads (5x4 vs 4x4 output)",
       f"{_CONV_SRC}; ONNX Conv 'pads'", _conv_attr("fusedconv.pads", 7030, {"pads": [1, 2, 0, 1]}),
       Use(attributes={"pads": NON_DEFAULT})),
    _f(FUSEDCONV, "fusedconv.strides", "float32", "strides [2,2] on a 7x7 input; control stride 1",
       f"{_CONV_SRC}; ONNX Conv 'strides'", _conv_attr("fusedconv.strides", 7031, {"strides": [2, 2]}, hw=7),
       Use(attributes={"strides": NON_DEFAULT})),
    _f(FUSEDCONV, "fusedconv.dilations", "float32", "dilations [2,2] on a 7x7 input; control dilation 1",
       f"{_CONV_SRC}; ONNX Conv 'dilations'", _conv_attr("fusedconv.dilations", 7032, {"dilations": [2, 2]}, hw=7),
       Use(attributes={"dilations": NON_DEFAULT})),
    _f(FUSEDCONV, "fusedconv.auto_pad", "float32", "auto_pad=SAME_UPPER with strides 2 on 7x7 (4x4 out); control NOTSET",
       f"{_CONV_SRC}; ONNX Conv 'auto_pad'",
       _conv_attr("fusedconv.auto_pad", 7033, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, hw=7),
       Use(attributes={"auto_pad": NON_DEFAULT})),
    _f(FUSEDCONV, "fusedconv.group", "float32", "group=2 (W (6,2,3,3)) with activation Tanh; control bakes in W = 0",
       f"{_CONV_SRC}; ONNX Conv 'group'",
       _conv_zero_w("fusedconv.group", 7034, {"group": 2, "activation": "Tanh"}, w_shape=(6, 2, 3, 3)),
       Use(attributes={"group": NON_DEFAULT})),
    _f(FUSEDGEMM, "fusedgemm.basic", "float32", "Relu(A (4,16) @ B (16,8)); control bakes in B = 0",
       _GEMM_SRC, _gemm_zero_b("fusedgemm.basic", 7101, _BASE_ACT), Use(attributes={"activation": "Relu"})),
    _f(FUSEDGEMM, "fusedgemm.no_activation", "float32",
       "A @ B with no activation attribute (the schema default \"\"); control bakes in B = 0",
       f"{_GEMM_SRC}: attribute 'activation' optional in the schema",
       _gemm_zero_b("fusedgemm.no_activation", 7102, {})),
    *[_f(FUSEDGEMM, f"fusedgemm.activation.{a}", "float32",
         f"activation={a}{' ' + str(p) if p else ''} on A @ B; control: the identity LeakyRelu(alpha=1)",
         _GEMM_SRC, _gemm_activation(f"fusedgemm.activation.{a}", 7110 + i, a, **p),
         Use(attributes={"activation": a, **{k: NON_DEFAULT for k in p}}))
      for i, (a, p) in enumerate(_GEMM_ACTS)],
    _f(FUSEDGEMM, "fusedgemm.C", "float32", "C (8) broadcast over the rows, beta 1; control drops C",
       f"{_GEMM_SRC}; ONNX Gemm 'C'", _gemm_c, Use(inputs=("C",))),
    _f(FUSEDGEMM, "fusedgemm.alpha", "float32", "alpha=0.5; control resets alpha to 1",
       f"{_GEMM_SRC}; ONNX Gemm 'alpha'", _gemm_attr("fusedgemm.alpha", 7121, {"alpha": 0.5}),
       Use(attributes={"alpha": NON_DEFAULT})),
    _f(FUSEDGEMM, "fusedgemm.beta", "float32", "beta=-2 on a fed C; control resets beta to 1",
       f"{_GEMM_SRC}; ONNX Gemm 'beta'", _gemm_attr("fusedgemm.beta", 7122, {"beta": -2.0}, c=True),
       Use(inputs=("C",), attributes={"beta": NON_DEFAULT})),
    _f(FUSEDGEMM, "fusedgemm.transA", "float32", "transA=1 on a square A (16,16); control transA=0",
       f"{_GEMM_SRC}; ONNX Gemm 'transA'", _gemm_attr("fusedgemm.transA", 7123, {"transA": 1}, square=True),
       Use(attributes={"transA": NON_DEFAULT})),
    _f(FUSEDGEMM, "fusedgemm.transB", "float32", "transB=1 on a square B (16,16); control transB=0",
       f"{_GEMM_SRC}; ONNX Gemm 'transB'", _gemm_attr("fusedgemm.transB", 7124, {"transB": 1}, square=True),
       Use(attributes={"transB": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.basic", "float32", "batched A (2,4,16) @ B (2,16,8); control bakes in B = 0",
       _MM_SRC, _mm_zero(FUSEDMATMUL, "fusedmatmul.basic", 7201)),
    _f(FUSEDMATMUL, "fusedmatmul.dtype.float64", "float64", "fusedmatmul.basic in float64; control bakes in B = 0",
       f"{_MM_SRC} (MatMul<double>)", _mm_zero(FUSEDMATMUL, "fusedmatmul.dtype.float64", 7202, "float64")),
    _f(FUSEDMATMUL, "fusedmatmul.alpha", "float32", "alpha=-0.5; control resets alpha to 1",
       f"{_MM_SRC}: attribute 'alpha'", _mm_attr(FUSEDMATMUL, "fusedmatmul.alpha", 7203, {"alpha": -0.5},
                                                  (2, 4, 16), (2, 16, 8)), Use(attributes={"alpha": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.transA", "float32", "transA=1 on A (2,16,16); control transA=0",
       f"{_MM_SRC}: attribute 'transA'", _mm_attr(FUSEDMATMUL, "fusedmatmul.transA", 7204, {"transA": 1}, _SQ, _SQ),
       Use(attributes={"transA": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.transB", "float32", "transB=1 on B (2,16,16); control transB=0",
       f"{_MM_SRC}: attribute 'transB'", _mm_attr(FUSEDMATMUL, "fusedmatmul.transB", 7205, {"transB": 1}, _SQ, _SQ),
       Use(attributes={"transB": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.transBatchA", "float32",
       "transBatchA=1: A (4,4,16) read as batch = axis 1, rows = axis 0; control transBatchA=0",
       f"{_MM_SRC}: attribute 'transBatchA'",
       _mm_attr(FUSEDMATMUL, "fusedmatmul.transBatchA", 7206, {"transBatchA": 1}, (4, 4, 16), (4, 16, 8)),
       Use(attributes={"transBatchA": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.transBatchB", "float32",
       "transBatchB=1: B (16,16,8) read as batch = axis 1, rows = axis 0; control transBatchB=0",
       f"{_MM_SRC}: attribute 'transBatchB'",
       _mm_attr(FUSEDMATMUL, "fusedmatmul.transBatchB", 7207, {"transBatchB": 1}, (16, 4, 16), (16, 16, 8)),
       Use(attributes={"transBatchB": NON_DEFAULT})),
    _f(FUSEDMATMUL, "fusedmatmul.transBatchA.transA", "float32",
       "transBatchA=1 with transA=1 on A (16,16,16): rows = axis 2, K = axis 0; control transBatchA=0",
       f"{_MM_SRC}: 'transBatchA' with 'transA'",
       _mm_attr(FUSEDMATMUL, "fusedmatmul.transBatchA.transA", 7208, {"transBatchA": 1, "transA": 1},
                (16, 16, 16), (16, 16, 8)),
       Use(attributes={"transBatchA": NON_DEFAULT, "transA": NON_DEFAULT})),
    _f(TRANSPOSEMATMUL, "transposematmul.basic", "float32", "batched A (2,4,16) @ B (2,16,8); control bakes in B = 0",
       _TMM_SRC, _mm_zero(TRANSPOSEMATMUL, "transposematmul.basic", 7301)),
    _f(TRANSPOSEMATMUL, "transposematmul.alpha", "float32", "alpha=-0.5; control resets alpha to 1",
       f"{_TMM_SRC}: attribute 'alpha'",
       _mm_attr(TRANSPOSEMATMUL, "transposematmul.alpha", 7302, {"alpha": -0.5}, (2, 4, 16), (2, 16, 8)),
       Use(attributes={"alpha": NON_DEFAULT})),
    _f(TRANSPOSEMATMUL, "transposematmul.transA", "float32", "transA=1 on A (2,16,16); control transA=0",
       f"{_TMM_SRC}: attribute 'transA'",
       _mm_attr(TRANSPOSEMATMUL, "transposematmul.transA", 7303, {"transA": 1}, _SQ, _SQ),
       Use(attributes={"transA": NON_DEFAULT})),
    _f(TRANSPOSEMATMUL, "transposematmul.transB", "float32", "transB=1 on B (2,16,16); control transB=0",
       f"{_TMM_SRC}: attribute 'transB'",
       _mm_attr(TRANSPOSEMATMUL, "transposematmul.transB", 7304, {"transB": 1}, _SQ, _SQ),
       Use(attributes={"transB": NON_DEFAULT})),
    _f(CTDP, "convtransposewithdynamicpads.basic", "float32",
       "transposed 3x3 conv X (1,2,4,4), W (2,3,3,3), Pads [0,0,0,0]; control bakes in W = 0",
       _CT_SRC, _ct_zero_w("convtransposewithdynamicpads.basic", 7401)),
    _f(CTDP, "convtransposewithdynamicpads.no_pads", "float32",
       "the node without its optional Pads input (zero pads); control bakes in W = 0",
       f"{_CT_SRC}: input 'Pads' optional in the schema",
       _ct_zero_w("convtransposewithdynamicpads.no_pads", 7408, pads=None), Use(absent=("Pads",))),
    _f(CTDP, "convtransposewithdynamicpads.Pads", "float32",
       "Pads input [1,0,1,0] (int64) crops the 6x6 result to 4x6; control bakes in Pads = 0",
       f"{_CT_SRC}: input 'Pads'", _ct_pads, Use(inputs=("Pads",))),
    _f(CTDP, "convtransposewithdynamicpads.B", "float32", "bias B (3); control drops B",
       f"{_CT_SRC}: input 'B' (input 3)", _ct_bias, Use(inputs=("B",))),
    _f(CTDP, "convtransposewithdynamicpads.strides", "float32", "strides [2,2] (9x9 output); control stride 1",
       f"{_CT_SRC}: attribute 'strides'",
       _ct_attr("convtransposewithdynamicpads.strides", 7404, {"strides": [2, 2]}, ("strides",)),
       Use(attributes={"strides": NON_DEFAULT})),
    _f(CTDP, "convtransposewithdynamicpads.output_padding", "float32",
       "output_padding [1,1] with strides 2 (10x10 output); control drops output_padding",
       f"{_CT_SRC}: attribute 'output_padding'",
       _ct_attr("convtransposewithdynamicpads.output_padding", 7405, {"strides": [2, 2], "output_padding": [1, 1]},
                ("output_padding",)), Use(attributes={"output_padding": NON_DEFAULT})),
    _f(CTDP, "convtransposewithdynamicpads.dilations", "float32", "dilations [2,2] (8x8 output); control dilation 1",
       f"{_CT_SRC}: attribute 'dilations'",
       _ct_attr("convtransposewithdynamicpads.dilations", 7406, {"dilations": [2, 2]}, ("dilations",)),
       Use(attributes={"dilations": NON_DEFAULT})),
    _f(CTDP, "convtransposewithdynamicpads.group", "float32",
       "group=2 (X (1,4,4,4), W (4,2,3,3), 4 output channels); control bakes in W = 0",
       f"{_CT_SRC}: attribute 'group'",
       _ct_zero_w("convtransposewithdynamicpads.group", 7407, {"group": 2}, w_shape=(4, 2, 3, 3), c=4),
       Use(attributes={"group": NON_DEFAULT})),
    _f(NHWC_U8, "nhwcmaxpool.basic", "uint8", "2x2 max pool of uint8 x (1,6,6,4) NHWC; control bakes in x = 0",
       _POOL_SRC, _pool_itself("nhwcmaxpool.basic", 7501, NHWC_U8)),
    _f(NHWC_I8, "nhwcmaxpool.int8", "int8", "2x2 max pool of int8 x (1,6,6,4) NHWC; control bakes in x = -128",
       f"{_POOL_SRC}: type constraint T includes tensor(int8)", _pool_itself("nhwcmaxpool.int8", 7502, NHWC_I8)),
    _f(NHWC_U8, "nhwcmaxpool.strides", "uint8", "strides [2,2] (3x3 output); control stride 1 (5x5)",
       f"{_POOL_SRC}: attribute 'strides'", _pool_attr("nhwcmaxpool.strides", 7503, {"strides": [2, 2]}),
       Use(attributes={"strides": NON_DEFAULT})),
    _f(NHWC_U8, "nhwcmaxpool.pads", "uint8", "pads [1,1,0,0] (6x6 output, padding never wins); control no pads",
       f"{_POOL_SRC}: attribute 'pads'", _pool_attr("nhwcmaxpool.pads", 7504, {"pads": [1, 1, 0, 0]}),
       Use(attributes={"pads": NON_DEFAULT})),
    _f(NHWC_U8, "nhwcmaxpool.dilations", "uint8", "dilations [2,2] (4x4 output); control dilation 1",
       f"{_POOL_SRC}: attribute 'dilations'", _pool_attr("nhwcmaxpool.dilations", 7505, {"dilations": [2, 2]}),
       Use(attributes={"dilations": NON_DEFAULT})),
    _f(NHWC_U8, "nhwcmaxpool.ceil_mode", "uint8", "ceil_mode=1 with a 3x3 kernel, stride 2 on 6x6 (3x3 vs 2x2 output); control ceil_mode=0",
       f"{_POOL_SRC}: attribute 'ceil_mode'",
       _pool_attr("nhwcmaxpool.ceil_mode", 7506, {"ceil_mode": 1, "strides": [2, 2], "kernel_shape": [3, 3]},
                  ("ceil_mode",)), Use(attributes={"ceil_mode": NON_DEFAULT})),
    _f(NHWC_U8, "nhwcmaxpool.auto_pad", "uint8", "auto_pad=SAME_UPPER (6x6 output); control NOTSET (5x5)",
       f"{_POOL_SRC}: attribute 'auto_pad'", _pool_attr("nhwcmaxpool.auto_pad", 7507, {"auto_pad": "SAME_UPPER"}),
       Use(attributes={"auto_pad": NON_DEFAULT})),
)
