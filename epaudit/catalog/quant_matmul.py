"""Probes for the com.microsoft quantized matrix products (version 1): ``QGemm``,
``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``, ``MatMulInteger16``, ``MatMulFpQ4`` and
``MatMulBnb4``. References: :mod:`epaudit.reference.qmatmul`.

A is fed; weights, scales, zero points and biases are constants (the CPU kernels prepack a
constant B). Float outputs are judged with ``tolerance_for("float32", K)`` (integer products
summed exactly, one float32 scaling), QGemm's quantized output within one step
(``_qgraph.STEP``: the float32 output scale ``alpha·a_scale·b_scale / y_scale`` may round a
tie the other way) and MatMulInteger16's int32 output exactly.

Controls: the operator itself bakes in B held at its zero point (or zero scales / absmax:
the product vanishes); an optional input is dropped, or a zero point set to 0; an attribute
is reset (``transA``/``transB`` on square operands, so that the control still runs).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.qlinear import RANGES
from ..reference.qmatmul import (
    bnb4_dequantize,
    bnb4_pack,
    dynamic_quantize_matmul,
    fpq4_dequantize,
    fpq4_pack,
    matmul_integer16,
    matmul_integer_to_float,
    qgemm,
)
from . import _contrib as c
from ._qgraph import STEP, QGraph, QOp, const, probe, u8s8_weights

M, K, N = 4, 64, 8
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_DIR = "onnxruntime/contrib_ops/cpu/quantization/"


def _f32(v) -> np.ndarray:
    return const(v, "float32")


def _ints(rng, dtype: str, shape) -> np.ndarray:
    lo, hi = RANGES[dtype]
    return rng.integers(lo, hi + 1, size=shape).astype(np.dtype(dtype))


def _weights(rng, at: str, bt: str, shape) -> np.ndarray:
    """B: 7-bit where uint8 activations meet int8 weights (:data:`._qgraph.U8S8_WEIGHTS`), else the type's range."""
    return u8s8_weights(rng, shape) if (at, bt) == ("uint8", "int8") else _ints(rng, bt, shape)


def _at_zp(g: QGraph, name: str, zp_name: str | None) -> QGraph:
    w = g.constants[name]
    zp = 0 if zp_name is None or zp_name not in g.constants else np.asarray(g.constants[zp_name])
    return g.baked(**{name: np.broadcast_to(zp, w.shape).astype(w.dtype).copy() if np.ndim(zp) == 0 else
                      np.broadcast_to(zp[None, :], w.shape).astype(w.dtype).copy()})


# --- QGemm ----------------------------------------------------------------------------

_QG_IN = ("A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point", "C", "y_scale", "y_zero_point")


def _qgemm_op(y_dtype: str | None) -> QOp:
    def ref(v, attrs):
        return {"Y": qgemm(v["A"], v["a_scale"], v["a_zero_point"], v["B"], v["b_scale"], v["b_zero_point"], v.get("C"),
                           v.get("y_scale"), v.get("y_zero_point"), alpha=float(attrs.get("alpha", 1.0)),
                           trans_a=int(attrs.get("transA", 0)), trans_b=int(attrs.get("transB", 0)), y_dtype=y_dtype)}
    return QOp("QGemm", "com.microsoft", 1, _QG_IN, ("Y",), ref)


def _qgemm_graph(seed: int, at: str = "uint8", bt: str = "uint8", *, quantized: bool = False, m=M, k=K, n=N,
                 attrs=None, per_column: bool = False, bias: bool = False) -> QGraph:
    rng = np.random.default_rng(seed)
    a_shape = (k, m) if (attrs or {}).get("transA") else (m, k)
    b_shape = (n, k) if (attrs or {}).get("transB") else (k, n)
    bzp = 0 if bt == "int8" else 131
    consts = {"a_scale": _f32(0.02), "a_zero_point": const(-5 if at == "int8" else 121, at), "B": _weights(rng, at, bt, b_shape),
              "b_scale": np.linspace(0.003, 0.006, n, dtype=np.float32) if per_column else _f32(0.004),
              "b_zero_point": (np.full(n, bzp) if per_column else np.asarray(bzp)).astype(np.dtype(bt))}
    if bias:
        consts["C"] = rng.integers(-40000, 40000, size=n).astype(np.int32)
    yt = at
    if quantized:
        consts["y_scale"] = _f32(0.25)
        consts["y_zero_point"] = const(-3 if yt == "int8" else 125, yt)
    return QGraph(dict(attrs or {}), {"A": _ints(rng, at, a_shape)}, {"Y": yt if quantized else "float32"}, consts)


def _build_qgemm(fid: str, seed: int, at="uint8", bt="uint8", *, quantized=False, control="b", reset=(),
                 **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _qgemm_graph(seed, at, bt, quantized=quantized, **kw)
        if control == "drop":
            ctl = g.without("C")
        elif control == "per_tensor":
            ctl = g.baked(b_scale=_f32(float(g.constants["b_scale"][0])),
                          b_zero_point=np.asarray(g.constants["b_zero_point"][0]))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = _at_zp(g, "B", "b_zero_point")
        tol = STEP if quantized else tolerance_for("float32", K)
        return probe(_qgemm_op(at if quantized else None), fid, g, ctl, tol, at)
    return build


# --- DynamicQuantizeMatMul / MatMulIntegerToFloat / MatMulInteger16 ------------------

_DQMM_IN = ("A", "B", "b_scale", "b_zero_point", "bias")
_MITF_IN = ("A", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias")


def _dqmm_ref(v, attrs):
    return {"Y": dynamic_quantize_matmul(v["A"], v["B"], v["b_scale"], v.get("b_zero_point"), v.get("bias"))}


def _mitf_ref(v, attrs):
    return {"Y": matmul_integer_to_float(v["A"], v["B"], v["a_scale"], v["b_scale"], v.get("a_zero_point"),
                                         v.get("b_zero_point"), v.get("bias"))}


DQMM = QOp("DynamicQuantizeMatMul", "com.microsoft", 1, _DQMM_IN, ("Y",), _dqmm_ref)
MITF = QOp("MatMulIntegerToFloat", "com.microsoft", 1, _MITF_IN, ("Y",), _mitf_ref)
MI16 = QOp("MatMulInteger16", "com.microsoft", 1, ("A", "B"), ("Y",),
           lambda v, a: {"Y": matmul_integer16(v["A"], v["B"])})


def _grid_a(rng, shape) -> np.ndarray:
    """A on DynamicQuantizeLinear's uint8 grid: min -2 and max 255/64 - 2 present, so scale
    = 1/64 and zero point 128 exactly; every other value k/64 quantizes losslessly."""
    a = rng.integers(-128, 128, size=shape).astype(np.float64) / 64
    flat = a.reshape(-1)
    flat[0], flat[1] = -2.0, 127 / 64
    return a.astype(np.float32)


def _build_dqmm(fid: str, seed: int, bt="uint8", *, zp=True, per_column=False, bias=False, a_shape=(M, K),
                control="b") -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        zpv = 0 if bt == "int8" else 127
        consts = {"B": _weights(rng, "uint8", bt, (K, N)),  # A is quantized to uint8 at run time
                  "b_scale": np.linspace(0.01, 0.03, N, dtype=np.float32) if per_column else _f32(0.02)}
        if zp:
            consts["b_zero_point"] = (np.arange(N) % 5 + zpv - 2 if per_column else np.asarray(zpv + 3 if bt == "uint8" else 4)
                                      ).astype(np.dtype(bt))
        if bias:
            consts["bias"] = rng.standard_normal(N).astype(np.float32) * 4
        g = QGraph({}, {"A": _grid_a(rng, a_shape)}, {"Y": "float32"}, consts)
        if control == "zp":
            ctl = g.baked(b_zero_point=np.zeros_like(np.asarray(consts["b_zero_point"])))
        elif control == "bias":
            ctl = g.without("bias")
        elif control == "per_tensor":
            ctl = g.baked(b_scale=_f32(0.01), b_zero_point=np.asarray(consts["b_zero_point"][0]))
        else:
            ctl = _at_zp(g, "B", "b_zero_point" if zp else None)
        return probe(DQMM, fid, g, ctl, tolerance_for("float32", K), "float32")
    return build


def _build_mitf(fid: str, seed: int, at="uint8", bt="uint8", *, a_zp=True, b_zp=True, bias=False, per_column=False,
                a_shape=(M, K), control="b") -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        consts = {"B": _weights(rng, at, bt, (K, N)), "a_scale": _f32(0.02),
                  "b_scale": np.linspace(0.003, 0.006, N, dtype=np.float32) if per_column else _f32(0.004)}
        if a_zp:
            consts["a_zero_point"] = const(-6 if at == "int8" else 120, at)
        if b_zp:
            v = 3 if bt == "int8" else 133
            consts["b_zero_point"] = (np.full(N, v) if per_column else np.asarray(v)).astype(np.dtype(bt))
        if bias:
            consts["bias"] = rng.standard_normal(N).astype(np.float32) * 4
        g = QGraph({}, {"A": _ints(rng, at, a_shape)}, {"Y": "float32"}, consts)
        if control in ("a_zero_point", "b_zero_point"):
            ctl = g.baked(**{control: np.zeros_like(np.asarray(consts[control]))})
        elif control == "bias":
            ctl = g.without("bias")
        elif control == "per_tensor":
            ctl = g.baked(b_scale=_f32(0.003), b_zero_point=np.asarray(consts["b_zero_point"][0]))
        else:
            ctl = _at_zp(g, "B", "b_zero_point" if b_zp else None)
        return probe(MITF, fid, g, ctl, tolerance_for("float32", K), at)
    return build


def _build_mi16() -> Probe:
    rng = np.random.default_rng(6601)
    a = rng.integers(-300, 301, size=(M, K)).astype(np.int16)
    b = rng.integers(-300, 301, size=(K, N)).astype(np.int16)
    g = QGraph({}, {"A": a, "B": b}, {"Y": "int32"})
    return probe(MI16, "matmulinteger16.int16", g, g.baked(B=np.zeros_like(b)), STEP, "int16", exact=frozenset({"Y"}))


# --- MatMulFpQ4 / MatMulBnb4 ----------------------------------------------------------

def _fpq4_ref(v, attrs):
    k, n = (int(x) for x in np.asarray(v["B_shape"]).reshape(-1))
    return {"Y": np.asarray(v["A"], np.float64) @ fpq4_dequantize(v["B"], k, n, int(attrs.get("blk_quant_type", 1)))}


FPQ4 = QOp("MatMulFpQ4", "com.microsoft", 1, ("A", "B", "B_shape"), ("Y",), _fpq4_ref)
_BLK = {0: 32, 1: 32, 2: 64}


def _build_fpq4(fid: str, seed: int, qtype: int, a_shape=(M, 128)) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        k = a_shape[-1]
        blocks = k // _BLK[qtype]
        codes = rng.integers(0, 16, size=(k, N))
        scales = rng.uniform(0.02, 0.06, size=(N, blocks)).astype(np.float32)
        zps = rng.integers(3, 13, size=(N, blocks)) if qtype == 1 else None
        attrs = {} if qtype == 1 else {"blk_quant_type": qtype}
        consts = {"B": fpq4_pack(codes, scales, zps, qtype), "B_shape": np.array([k, N], np.int64)}
        g = QGraph(attrs, {"A": rng.standard_normal(a_shape).astype(np.float32)}, {"Y": "float32"}, consts)
        zero = g.baked(B=fpq4_pack(codes, np.zeros_like(scales), zps, qtype))
        return probe(FPQ4, fid, g, zero, tolerance_for("float32", k), "float32")
    return build


def _bnb4_ref(v, attrs):
    n, k = int(attrs["N"]), int(attrs["K"])
    w = bnb4_dequantize(v["B"], v["absmax"], n, k, int(attrs["block_size"]), int(attrs["quant_type"]))
    a = np.asarray(v["A"], np.float64)
    return {"Y": a @ (w.T if int(attrs.get("transB", 1)) else w)}


BNB4 = QOp("MatMulBnb4", "com.microsoft", 1, ("A", "B", "absmax"), ("Y",), _bnb4_ref,
           float_t=frozenset({"A", "absmax", "Y"}))  # T1 (float, float16, bfloat16); B is uint8


def _build_bnb4(fid: str, seed: int, quant_type: int = 1, *, block: int = 32, n: int = N, k: int = K,
                trans_b: int | None = None, a_shape=None, reset=()) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        codes = rng.integers(0, 16, size=(n, k))
        absmax = rng.uniform(0.5, 1.5, size=(n * k + block - 1) // block).astype(np.float32)
        attrs = {"N": n, "K": k, "block_size": block, "quant_type": quant_type}
        if trans_b is not None:
            attrs["transB"] = trans_b
        shape = a_shape or ((M, n) if trans_b == 0 else (M, k))
        g = QGraph(attrs, {"A": rng.standard_normal(shape).astype(np.float32)}, {"Y": "float32"},
                   {"B": bnb4_pack(codes), "absmax": absmax})
        ctl = g.without(attrs=reset) if reset else g.baked(absmax=np.zeros_like(absmax))
        return probe(BNB4, fid, g, ctl, tolerance_for("float32", k), "float32")
    return build


_f = c.feature
_QG, _QG_DOC = _qgemm_op(None), f"{_DOC}QGemm; {_DIR}quant_gemm.cc"
_DQ_DOC = f"{_DOC}DynamicQuantizeMatMul; {_DIR}dynamic_quantize_matmul.cc"
_MI_DOC = f"{_DOC}MatMulIntegerToFloat; {_DIR}matmul_integer_to_float.cc"
_FQ_DOC = f"{_DOC}MatMulFpQ4; onnxruntime/core/mlas/lib/q4common.h, q4_dq.cpp (blob layout)"
_BN_DOC = f"{_DOC}MatMulBnb4; {_DIR}matmul_bnb4.cc, blockwise_quant_block_bnb4.h"
_SQ = dict(m=16, k=16, n=16)

#: The quantized matrix-product features, in catalog order.
FEATURES = (
    _f(_QG, "qgemm.uint8", "uint8", "uint8 A (4,64) x uint8 B (64,8), float32 Y (no y_scale); control bakes in B "
       "at its zero point", _QG_DOC, _build_qgemm("qgemm.uint8", 6501)),
    _f(_QG, "qgemm.int8", "int8", "int8 A x int8 B, float32 Y; control bakes in B at its zero point", _QG_DOC,
       _build_qgemm("qgemm.int8", 6502, "int8", "int8")),
    _f(_QG, "qgemm.uint8_a_int8_b", "uint8", "uint8 A x int8 B (mixed kernel), float32 Y; control bakes in B at 0",
       _QG_DOC, _build_qgemm("qgemm.uint8_a_int8_b", 6503, "uint8", "int8"), Use(facts={"b_dtype": "int8"})),
    _f(_QG, "qgemm.y_scale", "uint8", "y_scale/y_zero_point given: uint8 Y requantized (within one step); control "
       "bakes in B at its zero point", f"{_QG_DOC}: inputs 'y_scale', 'y_zero_point'",
       _build_qgemm("qgemm.y_scale", 6504, quantized=True), Use(inputs=("y_scale", "y_zero_point"))),
    _f(_QG, "qgemm.y_scale.int8", "int8", "int8 Y requantized (y_zero_point int8); control bakes in B at 0",
       f"{_QG_DOC}: inputs 'y_scale', 'y_zero_point'", _build_qgemm("qgemm.y_scale.int8", 6505, "int8", "int8",
                                                                      quantized=True),
       Use(inputs=("y_scale", "y_zero_point"))),
    _f(_QG, "qgemm.c", "uint8", "int32 C (8) added to the accumulator; control drops it", f"{_QG_DOC}: input 'C'",
       _build_qgemm("qgemm.c", 6506, bias=True, control="drop"), Use(inputs=("C",))),
    _f(_QG, "qgemm.per_column", "uint8", "b_scale and b_zero_point per column (8); control bakes in the first per "
       "tensor", f"{_QG_DOC}: b_scale/b_zero_point (N)", _build_qgemm("qgemm.per_column", 6507, per_column=True,
                                                                        control="per_tensor"),
       Use(facts={"b_scale_rank": 1})),
    _f(_QG, "qgemm.alpha", "uint8", "alpha=2.5; control resets it (1)", f"{_QG_DOC}: attribute 'alpha'",
       _build_qgemm("qgemm.alpha", 6508, attrs={"alpha": 2.5}, control="attrs", reset=("alpha",)),
       Use(attributes={"alpha": NON_DEFAULT})),
    _f(_QG, "qgemm.transA", "uint8", "transA=1 on a square A (16,16); control resets it", f"{_QG_DOC}: attribute 'transA'",
       _build_qgemm("qgemm.transA", 6509, attrs={"transA": 1}, control="attrs", reset=("transA",), **_SQ),
       Use(attributes={"transA": 1})),
    _f(_QG, "qgemm.transB", "uint8", "transB=1 on a square B (16,16); control resets it", f"{_QG_DOC}: attribute 'transB'",
       _build_qgemm("qgemm.transB", 6510, attrs={"transB": 1}, control="attrs", reset=("transB",), **_SQ),
       Use(attributes={"transB": 1})),
    _f(DQMM, "dynamicquantizematmul.uint8", "float32", "float A (4,64) on the uint8 grid (scale 1/64, zero point 128) x "
       "uint8 B (zero point 130); control bakes in B at its zero point", _DQ_DOC, _build_dqmm("dynamicquantizematmul.uint8", 6521)),
    _f(DQMM, "dynamicquantizematmul.int8", "float32", "int8 B (zero point 4); control bakes in B at its zero point",
       _DQ_DOC, _build_dqmm("dynamicquantizematmul.int8", 6522, "int8"), Use(facts={"b_dtype": "int8"})),
    _f(DQMM, "dynamicquantizematmul.b_zero_point", "float32", "b_zero_point 130; control sets it to 0 (the default)",
       f"{_DQ_DOC}: input 'b_zero_point'", _build_dqmm("dynamicquantizematmul.b_zero_point", 6523, control="zp"),
       Use(inputs=("b_zero_point",))),
    _f(DQMM, "dynamicquantizematmul.bias", "float32", "bias (8) added; control drops it", f"{_DQ_DOC}: input 'bias'",
       _build_dqmm("dynamicquantizematmul.bias", 6524, bias=True, control="bias"), Use(inputs=("bias",))),
    _f(DQMM, "dynamicquantizematmul.per_column", "float32", "b_scale and b_zero_point per column (8); control bakes in "
       "one per tensor", f"{_DQ_DOC}: b_scale/b_zero_point (N)",
       _build_dqmm("dynamicquantizematmul.per_column", 6525, per_column=True, control="per_tensor"),
       Use(facts={"b_scale_rank": 1})),
    _f(DQMM, "dynamicquantizematmul.a_3d", "float32", "A (2,4,64) batched; control bakes in B at its zero point",
       _DQ_DOC, _build_dqmm("dynamicquantizematmul.a_3d", 6526, a_shape=(2, M, K)), Use(facts={"a_rank": 3})),
    _f(MITF, "matmulintegertofloat.uint8", "uint8", "uint8 A (4,64) x uint8 B, both zero points set; control bakes "
       "in B at its zero point", _MI_DOC, _build_mitf("matmulintegertofloat.uint8", 6541)),
    _f(MITF, "matmulintegertofloat.int8", "int8", "int8 A x int8 B; control bakes in B at its zero point", _MI_DOC,
       _build_mitf("matmulintegertofloat.int8", 6542, "int8", "int8")),
    _f(MITF, "matmulintegertofloat.uint8_a_int8_b", "uint8", "uint8 A x int8 B; control bakes in B at its zero point",
       _MI_DOC, _build_mitf("matmulintegertofloat.uint8_a_int8_b", 6543, "uint8", "int8"), Use(facts={"b_dtype": "int8"})),
    *(_f(MITF, f"matmulintegertofloat.{z}", "uint8", f"{z} set; control sets it to 0 (the default)",
         f"{_MI_DOC}: input '{z}'", _build_mitf(f"matmulintegertofloat.{z}", 6544 + i, control=z), Use(inputs=(z,)))
      for i, z in enumerate(("a_zero_point", "b_zero_point"))),
    _f(MITF, "matmulintegertofloat.bias", "uint8", "bias (8) added; control drops it", f"{_MI_DOC}: input 'bias'",
       _build_mitf("matmulintegertofloat.bias", 6546, bias=True, control="bias"), Use(inputs=("bias",))),
    _f(MITF, "matmulintegertofloat.per_column", "uint8", "b_scale and b_zero_point per column (8); control bakes in "
       "the first per tensor", f"{_MI_DOC}: b_scale/b_zero_point (N)",
       _build_mitf("matmulintegertofloat.per_column", 6547, per_column=True, control="per_tensor"),
       Use(facts={"b_scale_rank": 1})),
    _f(MITF, "matmulintegertofloat.a_3d", "uint8", "A (2,4,64) batched; control bakes in B at its zero point", _MI_DOC,
       _build_mitf("matmulintegertofloat.a_3d", 6548, a_shape=(2, M, K)), Use(facts={"a_rank": 3})),
    _f(MI16, "matmulinteger16.int16", "int16", "int16 A (4,64) x int16 B (64,8) -> int32, exact; control bakes in B = 0",
       f"{_DOC}MatMulInteger16; {_DIR}matmul_integer16.cc", _build_mi16),
    _f(FPQ4, "matmulfpq4.blk_quant_type.1", "float32", "A (4,128) x 4-bit B blob, type 1 (the default: blocks of 32, "
       "scale and zero point); control bakes in zero scales", _FQ_DOC, _build_fpq4("matmulfpq4.blk_quant_type.1", 6561, 1)),
    *(_f(FPQ4, f"matmulfpq4.blk_quant_type.{t}", "float32", f"blk_quant_type={t} ({what}); control bakes in zero "
         "scales", f"{_FQ_DOC}: attribute 'blk_quant_type'", _build_fpq4(f"matmulfpq4.blk_quant_type.{t}", 6561 + t, t),
         Use(attributes={"blk_quant_type": t})) for t, what in ((0, "blocks of 32, symmetric"), (2, "blocks of 64, symmetric"))),
    _f(FPQ4, "matmulfpq4.a_3d", "float32", "A (2,4,128) batched, type 1; control bakes in zero scales", _FQ_DOC,
       _build_fpq4("matmulfpq4.a_3d", 6564, 1, a_shape=(2, M, 128)), Use(facts={"a_rank": 3})),
    _f(BNB4, "matmulbnb4.nf4", "float32", "A (4,64) x NF4 B (N=8, K=64, blocks of 32, transB=1); control bakes in "
       "zero absmax", _BN_DOC, _build_bnb4("matmulbnb4.nf4", 6581), Use(attributes={"quant_type": 1})),
    _f(BNB4, "matmulbnb4.fp4", "float32", "FP4 table (quant_type=0); control bakes in zero absmax",
       f"{_BN_DOC}: attribute 'quant_type'", _build_bnb4("matmulbnb4.fp4", 6582, 0), Use(attributes={"quant_type": 0})),
    _f(BNB4, "matmulbnb4.block_size", "float32", "block_size=64 (one absmax per 64 weights); control bakes in zero "
       "absmax", f"{_BN_DOC}: attribute 'block_size'", _build_bnb4("matmulbnb4.block_size", 6583, block=64),
       Use(attributes={"block_size": NON_DEFAULT})),
    _f(BNB4, "matmulbnb4.transB", "float32", "transB=0 on N=K=32: Y = A @ dequant(B); control resets it (A @ B^T)",
       f"{_BN_DOC}: attribute 'transB'", _build_bnb4("matmulbnb4.transB", 6584, n=32, k=32, trans_b=0, reset=("transB",)),
       Use(attributes={"transB": 0})),
    _f(BNB4, "matmulbnb4.a_3d", "float32", "A (2,4,64) batched; control bakes in zero absmax", _BN_DOC,
       _build_bnb4("matmulbnb4.a_3d", 6585, a_shape=(2, M, K)), Use(facts={"a_rank": 3})),
)
