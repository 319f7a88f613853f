"""Probes for ``com.microsoft.MoE`` and ``com.microsoft.QMoE`` (version 1): T = 6 tokens of
D = 16 features routed among E = 4 experts with I = 32 hidden units. ``input`` and
``router_probs`` (logits, std 2: no ties between the picks) are fed; expert weights, biases,
scales and zero points are constants. Reference: :mod:`epaudit.reference.moe`; tolerance
``tolerance_for(dtype, 32)`` (the longest dot product).

Controls: the operator itself bakes in zero FC2 weights (every expert outputs its FC2 bias or
0); an optional input is dropped (QMoE zero points: the implicit 2^(bits−1)); an attribute
is reset (``k`` to 1, the activation to relu, ...). QMoE probes set
``normalize_routing_weights = 1``: the CPU kernel renormalizes over the picks whatever the
attribute says (``qmoe.normalize_routing_weights.off`` is that finding).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.moe import dequantize_experts, moe_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

T, D, I, E = 6, 16, 32, 4
_DOC = "ORT docs/ContribOperators.md#com.microsoft.MoE"
_KERNEL = "onnxruntime/contrib_ops/cpu/moe/moe_cpu.cc, moe_utils.cc"
_QDOC = "ORT docs/ContribOperators.md#com.microsoft.QMoE"
_QKERNEL = "onnxruntime/contrib_ops/cpu/moe/moe_quantization_cpu.cc"
_ROUTE = ("k", "normalize_routing_weights", "activation_type", "activation_alpha", "activation_beta", "swiglu_limit",
          "swiglu_fusion")
_MOE_IN = ("input", "router_probs", "fc1_experts_weights", "fc1_experts_bias", "fc2_experts_weights",
           "fc2_experts_bias", "fc3_experts_weights", "fc3_experts_bias")


def _moe_ref(v, attrs):
    return {"output": moe_reference(v["input"], v["router_probs"], v["fc1_experts_weights"], v["fc2_experts_weights"],
                                    v.get("fc1_experts_bias"), v.get("fc2_experts_bias"),
                                    w3=v.get("fc3_experts_weights"), b3=v.get("fc3_experts_bias"),
                                    **{k: attrs[k] for k in _ROUTE if k in attrs})}


MOE = QOp("MoE", "com.microsoft", 1, _MOE_IN, ("output",), _moe_ref, float_t=frozenset({*_MOE_IN, "output"}))


def _f32(a) -> np.ndarray:
    return np.asarray(a, np.float32)


def _feeds(rng, shape=(T, D)):
    return {"input": _f32(rng.standard_normal(shape)), "router_probs": _f32(2.0 * rng.standard_normal((T, E)))}


def _moe_graph(seed: int, *, attrs=None, bias=(), fc1_rows: int = I, shape=(T, D)) -> QGraph:
    rng = np.random.default_rng(seed)
    consts = {"fc1_experts_weights": _f32(0.3 * rng.standard_normal((E, fc1_rows, D))),
              "fc2_experts_weights": _f32(0.2 * rng.standard_normal((E, D, I)))}
    if "fc1" in bias:
        consts["fc1_experts_bias"] = _f32(0.5 * rng.standard_normal((E, fc1_rows)))
    if "fc2" in bias:
        consts["fc2_experts_bias"] = _f32(0.5 * rng.standard_normal((E, D)))
    if "fc3" in bias:
        consts["fc3_experts_weights"] = _f32(0.3 * rng.standard_normal((E, I, D)))
    return QGraph(dict(attrs or {}), _feeds(rng, shape), {"output": "float32"}, consts)


def _build_moe(fid: str, seed: int, *, attrs=None, bias=(), control="fc2", reset=(), fc1_rows=I, shape=(T, D),
               control_attrs=None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _moe_graph(seed, attrs=attrs, bias=bias, fc1_rows=fc1_rows, shape=shape)
        if control == "fc2":
            ctl = g.baked(fc2_experts_weights=np.zeros_like(g.constants["fc2_experts_weights"]))
        elif control == "attrs":
            ctl = g.without(attrs=reset).with_attrs(**(control_attrs or {}))
        elif control == "zero_fc3":
            ctl = g.baked(fc3_experts_weights=np.zeros_like(g.constants["fc3_experts_weights"]))
        else:
            ctl = g.without(control)
        return probe(MOE, fid, g, ctl, tolerance_for("float32", I), "float32")
    return build


# --- QMoE -----------------------------------------------------------------------------

_QMOE_IN = ("input", "router_probs", "fc1_experts_weights", "fc1_scales", "fc1_experts_bias", "fc2_experts_weights",
            "fc2_scales", "fc2_experts_bias", "fc3_experts_weights", "fc3_scales", "fc3_experts_bias",
            "fc1_zero_points", "fc2_zero_points", "fc3_zero_points", "router_weights")


def _qmoe_ref(v, attrs):
    bits = int(attrs.get("expert_weight_bits", 4))
    block = int(attrs.get("block_size", 0))
    w1 = dequantize_experts(v["fc1_experts_weights"], v["fc1_scales"], bits, D, block, v.get("fc1_zero_points"))
    w2 = dequantize_experts(v["fc2_experts_weights"], v["fc2_scales"], bits, I, block, v.get("fc2_zero_points"))
    return {"output": moe_reference(v["input"], v["router_probs"], w1, w2, v.get("fc1_experts_bias"),
                                    v.get("fc2_experts_bias"), router_weights=v.get("router_weights"),
                                    **{k: attrs[k] for k in _ROUTE if k in attrs})}


QMOE = QOp("QMoE", "com.microsoft", 1, _QMOE_IN, ("output",), _qmoe_ref)


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    per = 8 // bits
    c2 = codes.reshape(*codes.shape[:-1], -1, per).astype(np.uint16)
    return sum(c2[..., i] << (bits * i) for i in range(per)).astype(np.uint8)


def _qweights(rng, n: int, k: int, bits: int, block: int, zp: bool):
    codes = rng.integers(0, 1 << bits, size=(E, n, k))
    groups = k // block if block else 1
    scales = _f32(rng.uniform(0.02, 0.05, size=(E, n, groups) if block else (E, n)))
    out = {"w": _pack(codes, bits), "s": scales}
    if zp:
        mid = 1 << (bits - 1)
        zcodes = rng.integers(mid - 3, mid + 4, size=(E, n, groups) if block else (E, n))
        out["z"] = _pack(zcodes, bits)  # per row: packed along N; per block: along the blocks
    return out


def _qmoe_graph(seed: int, dtype: str = "float32", *, bits: int = 4, block: int = 0, zp: bool = False, bias=(),
                router_weights: bool = False, attrs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    f1, f2 = _qweights(rng, I, D, bits, block, zp), _qweights(rng, D, I, bits, block, zp)
    consts: dict[str, object] = {"fc1_experts_weights": f1["w"], "fc1_scales": f1["s"].astype(dtype),
                                 "fc2_experts_weights": f2["w"], "fc2_scales": f2["s"].astype(dtype)}
    if zp:
        consts["fc1_zero_points"], consts["fc2_zero_points"] = f1["z"], f2["z"]
    if "fc1" in bias:
        consts["fc1_experts_bias"] = (0.5 * rng.standard_normal((E, I))).astype(dtype)
    feeds = {k: v.astype(dtype) for k, v in _feeds(rng).items()}
    if router_weights:
        feeds["router_weights"] = rng.uniform(0.2, 1.5, size=(T, E)).astype(dtype)
    # normalize_routing_weights=1 throughout: the CPU kernel renormalizes whatever the
    # attribute says (qmoe.normalize_routing_weights.off pins that).
    a = {"expert_weight_bits": bits, "normalize_routing_weights": 1, **({"block_size": block} if block else {}),
         **(attrs or {})}
    return QGraph(a, feeds, {"output": dtype}, consts)


def _build_qmoe(fid: str, seed: int, dtype: str = "float32", *, control="fc2", reset=(), **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _qmoe_graph(seed, dtype, **kw)
        if control == "fc2":
            ctl = g.baked(fc2_scales=np.zeros_like(g.constants["fc2_scales"]))
        elif control == "zp":
            ctl = g.without("fc1_zero_points", "fc2_zero_points")
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        elif control == "normalized":
            ctl = g.with_attrs(normalize_routing_weights=1)
        else:
            ctl = g.without(control)
        return probe(QMOE, fid, g, ctl, tolerance_for(dtype, I), dtype)
    return build


_f = c.feature
_SW = {"activation_type": "swiglu", "swiglu_fusion": 1, "activation_alpha": 1.702, "activation_beta": 1.0}

#: The MoE and QMoE features, in catalog order.
FEATURES = (
    _f(MOE, "moe.basic", "float32", "6 tokens, 4 experts of FC1 (32x16) relu FC2 (16x32), top-1 of softmax(router); "
       "control bakes in zero FC2 weights", f"{_DOC}; {_KERNEL}", _build_moe("moe.basic", 7301)),
    _f(MOE, "moe.k", "float32", "k=2: two experts per token, weighted by their probabilities; control k=1",
       f"{_DOC}: attribute 'k'", _build_moe("moe.k", 7302, attrs={"k": 2}, control="attrs", reset=("k",)),
       Use(attributes={"k": NON_DEFAULT})),
    _f(MOE, "moe.normalize_routing_weights", "float32", "normalize_routing_weights=1 with k=2 (weights renormalized "
       "over the picks); control resets it", f"{_DOC}: attribute 'normalize_routing_weights'",
       _build_moe("moe.normalize_routing_weights", 7303, attrs={"k": 2, "normalize_routing_weights": 1},
                  control="attrs", reset=("normalize_routing_weights",)),
       Use(attributes={"normalize_routing_weights": 1})),
    *(_f(MOE, f"moe.{b}_experts_bias", "float32", f"{b.upper()} bias per expert; control drops it",
         f"{_DOC}: input '{b}_experts_bias'", _build_moe(f"moe.{b}_experts_bias", 7304 + i, bias=(b,),
                                                         control=f"{b}_experts_bias"),
         Use(inputs=(f"{b}_experts_bias",))) for i, b in enumerate(("fc1", "fc2"))),
    *(_f(MOE, f"moe.activation_type.{a}", "float32", f"activation_type={a}; control relu (the default)",
         f"{_DOC}: attribute 'activation_type'; {_KERNEL} ApplyActivation",
         _build_moe(f"moe.activation_type.{a}", 7306 + i, attrs={"activation_type": a}, control="attrs",
                    reset=("activation_type",)), Use(attributes={"activation_type": a}))
      for i, a in enumerate(("gelu", "silu", "identity"))),
    _f(MOE, "moe.swiglu", "float32", "SwiGLU, swiglu_fusion=1 (g, l interleaved rows of a (64,16) FC1), alpha 1.702, "
       "beta 1; control bakes in zero FC2 weights",
       f"{_DOC}: activation_type 'swiglu', attributes 'swiglu_fusion', 'activation_alpha', 'activation_beta'",
       _build_moe("moe.swiglu", 7309, attrs=_SW, fc1_rows=2 * I),
       Use(attributes={"activation_type": "swiglu", "swiglu_fusion": 1, "activation_alpha": NON_DEFAULT,
                       "activation_beta": NON_DEFAULT})),
    _f(MOE, "moe.swiglu_limit", "float32", "swiglu_limit=0.5 clamps g and l; control drops the limit",
       f"{_DOC}: attribute 'swiglu_limit'", _build_moe("moe.swiglu_limit", 7310, attrs={**_SW, "swiglu_limit": 0.5},
                                                       fc1_rows=2 * I, control="attrs", reset=("swiglu_limit",)),
       Use(attributes={"swiglu_limit": NON_DEFAULT})),
    _f(MOE, "moe.fc3", "float32", "FC3 weights (the linear half l of a non-fused SwiGLU, swiglu_fusion=0); control "
       "bakes in zero FC3 weights (l = 0)",
       f"{_DOC}: input 'fc3_experts_weights'; {_KERNEL} ('FC3 is not implemented for CPU MoE')",
       _build_moe("moe.fc3", 7311, attrs={**_SW, "swiglu_fusion": 0}, bias=("fc3",), control="zero_fc3"),
       Use(inputs=("fc3_experts_weights",))),
    _f(MOE, "moe.input_3d", "float32", "input (2,3,16) (dense form); control bakes in zero FC2 weights",
       f"{_DOC}: input (batch_size, sequence_length, hidden_size)", _build_moe("moe.input_3d", 7312, shape=(2, 3, D)),
       Use(facts={"input_rank": 3})),
    _f(QMOE, "qmoe.bits.4", "float32", "4-bit experts (the default), per-row scales, implicit zero point 8; control "
       "bakes in zero FC2 scales", f"{_QDOC}; {_QKERNEL}", _build_qmoe("qmoe.bits.4", 7401),
       Use(inputs=("fc1_scales", "fc2_scales"))),
    _f(QMOE, "qmoe.bits.8", "float32", "expert_weight_bits=8, implicit zero point 128; control bakes in zero FC2 scales",
       f"{_QDOC}: attribute 'expert_weight_bits'", _build_qmoe("qmoe.bits.8", 7402, bits=8),
       Use(attributes={"expert_weight_bits": 8})),
    _f(QMOE, "qmoe.block_size", "float32", "block_size=16: scales per block of 16 along K; control bakes in zero FC2 "
       "scales", f"{_QDOC}: attribute 'block_size'", _build_qmoe("qmoe.block_size", 7403, block=16),
       Use(attributes={"block_size": NON_DEFAULT})),
    _f(QMOE, "qmoe.zero_points", "float32", "fc1/fc2 zero points (packed 4-bit, 5..11); control drops them (implicit 8)",
       f"{_QDOC}: inputs 'fc1_zero_points', 'fc2_zero_points'", _build_qmoe("qmoe.zero_points", 7404, zp=True,
                                                                              control="zp"),
       Use(inputs=("fc1_zero_points", "fc2_zero_points"))),
    _f(QMOE, "qmoe.fc1_experts_bias", "float32", "FC1 bias per expert; control drops it",
       f"{_QDOC}: input 'fc1_experts_bias'", _build_qmoe("qmoe.fc1_experts_bias", 7405, bias=("fc1",),
                                                         control="fc1_experts_bias"), Use(inputs=("fc1_experts_bias",))),
    _f(QMOE, "qmoe.k", "float32", "k=2 (renormalized routing weights); control k=1", f"{_QDOC}: attribute 'k'",
       _build_qmoe("qmoe.k", 7406, attrs={"k": 2}, control="attrs", reset=("k",)),
       Use(attributes={"k": NON_DEFAULT})),
    _f(QMOE, "qmoe.normalize_routing_weights.off", "float32", "normalize_routing_weights=0 (the schema default) with "
       "k=2: the picks weighted by their softmax probabilities; control sets it to 1 (renormalized)",
       f"{_QDOC}: attribute 'normalize_routing_weights'; {_QKERNEL}",
       _build_qmoe("qmoe.normalize_routing_weights.off", 7409, attrs={"k": 2, "normalize_routing_weights": 0},
                   control="normalized"), Use(attributes={"k": NON_DEFAULT})),
    _f(QMOE, "qmoe.router_weights", "float32", "router_weights (6,4) mix the top-2 outputs (router_probs only pick; "
       "renormalized over the picks); control drops it", f"{_QDOC}: input 'router_weights'",
       _build_qmoe("qmoe.router_weights", 7407, router_weights=True, attrs={"k": 2}, control="router_weights"),
       Use(inputs=("router_weights",))),
    _f(QMOE, "qmoe.dtype.float16", "float16", "qmoe.bits.4 with float16 activations and scales; control bakes in zero "
       "FC2 scales", f"{_QDOC}: type constraint T includes tensor(float16)", _build_qmoe("qmoe.dtype.float16", 7408,
                                                                                          "float16")),
)
