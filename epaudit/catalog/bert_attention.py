"""Probes for com.microsoft ``Attention`` (ids ``ms_attention.*``: ``attention.*`` is ONNX's
own Attention) and ``QAttention``, version 1.

One node on B = 2, S = 4 tokens of D_in = 32 features, N = 2 heads of H = 16 (float32; QAttention
takes uint8 input and uint8/int8 weights). ``input`` is fed; weights, bias, scales and zero
points are constants; masks, past and attention_bias are fed. References:
:mod:`epaudit.reference.bert_attention` (projection, then ``mha_reference``). Tolerance
``tolerance_for("float32", 16)`` (the head size).

Controls: the operator itself bakes in weights whose Q part is zero (every row attends
uniformly); an optional input is dropped (or, for ``bias``, set to zeros: the CPU kernel
reads ``bias`` unconditionally, see ``ms_attention.bias.omitted``); ``past`` is baked in as
zeros; an attribute is reset.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.bert_attention import attention_ms_reference, qattention_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, const, probe, u8s8_weights

B, S, DIN, N, H = 2, 4, 32, 2, 16
D = N * H
P = 3
_MS_DOC = "ORT docs/ContribOperators.md#com.microsoft.Attention"
_MS_KERNEL = "onnxruntime/contrib_ops/cpu/bert/attention.cc; attention_cpu_base.h ApplyAttention"
_Q_DOC = "ORT docs/ContribOperators.md#com.microsoft.QAttention"
_Q_KERNEL = "onnxruntime/contrib_ops/cpu/quantization/attention_quant.cc"
_TOL = tolerance_for("float32", H)

_MS_IN = ("input", "weights", "bias", "mask_index", "past", "attention_bias", "past_sequence_length")
_ATTRS = ("num_heads", "qkv_hidden_sizes", "unidirectional", "scale", "mask_filter_value")


def _ms_ref(v, attrs):
    kw = {k: attrs[k] for k in _ATTRS if k in attrs}
    return attention_ms_reference(v["input"], v["weights"], v.get("bias"), v.get("mask_index"), v.get("past"),
                                  v.get("attention_bias"), **kw)


MS = QOp("Attention", "com.microsoft", 1, _MS_IN, ("output", "present"), _ms_ref,
         float_t=frozenset({"input", "weights", "bias", "past", "attention_bias", "output", "present"}))


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _ms_graph(seed: int, *, sizes=(D, D, D), attrs=None, past: bool = False, outputs=("output",)) -> tuple[QGraph, np.random.Generator]:
    rng = np.random.default_rng(seed)
    width = sum(sizes)
    x = _f32(rng.standard_normal((B, S, DIN)))
    w = _f32(rng.standard_normal((DIN, width)) * 0.35)
    feeds = {"input": x}
    if past:
        feeds["past"] = _f32(rng.standard_normal((2, B, N, P, H)))
        outputs = ("present", "output")
    outs = {o: "float32" for o in outputs}
    consts = {"weights": w, "bias": _f32(rng.standard_normal(width) * 0.5)}
    return QGraph({"num_heads": N, **(attrs or {})}, feeds, outs, consts), rng


def _zero_query(g: QGraph, q_width: int = D) -> QGraph:
    w = np.array(g.constants["weights"])
    w[:, :q_width] = 0.0
    b = np.array(g.constants["bias"])
    b[:q_width] = 0.0
    return g.baked(weights=w, bias=b)


def _ms_probe(fid: str, subject: QGraph, control: QGraph) -> Probe:
    return probe(MS, fid, subject, control, _TOL, "float32")


def _build_ms(fid: str, seed: int, *, control: str = "zero_query", mask=None, attrs=None, past=False,
              attention_bias=False, sizes=(D, D, D), reset=()) -> Callable[[], Probe]:
    def build() -> Probe:
        g, rng = _ms_graph(seed, sizes=sizes, attrs=attrs, past=past)
        feeds = dict(g.feeds)
        total = S + (P if past else 0)
        if mask is not None:
            feeds["mask_index"] = mask(rng, total)
        if attention_bias:
            feeds["attention_bias"] = _f32(2.0 * rng.standard_normal((B, N, S, total)))
        g = QGraph(g.attrs, feeds, g.outputs, g.constants)
        if control == "zero_query":
            ctl = _zero_query(g, sizes[0])
        elif control == "zero_bias":
            ctl = g.baked(bias=np.zeros_like(g.constants["bias"]))
        elif control == "zero_past":
            ctl = g.baked(past=np.zeros_like(g.feeds["past"]))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = g.without(control)
        return _ms_probe(fid, g, ctl)
    return build


def _build_bias_omitted() -> Probe:
    """bias left out (the schema marks it optional: default 0); control sets it."""
    g, _ = _ms_graph(6711)
    return _ms_probe("ms_attention.bias.omitted", g.without("bias"), g)


def _raw(rng, total, three_d=False):
    shape = (B, S, total) if three_d else (B, total)
    m = (rng.random(shape) >= 0.4).astype(np.int32)
    m[..., 0] = 1
    return m


_MASKS = {
    "key_len": (lambda rng, t: np.array([2, 3], np.int32), "mask_index (B) = key lengths [2,3] of 4 (right padding)",
                "(batch_size): actual lengths"),
    "key_len_start": (lambda rng, t: np.array([3, 4, 1, 0], np.int32),
                      "mask_index (2B) = exclusive ends [3,4] then inclusive starts [1,0] (left padding)",
                      "(2 * batch_size): end positions, then start positions"),
    "raw_2d": (lambda rng, t: _raw(rng, t), "raw mask_index (B,T) of 0/1, ~40% masked", "(batch_size, total_sequence_length)"),
    "raw_3d": (lambda rng, t: _raw(rng, t, True), "raw mask_index (B,S,T), one mask row per query",
               "(batch_size, sequence_length, total_sequence_length)"),
}


# --- QAttention -----------------------------------------------------------------------

_Q_IN = ("input", "weight", "bias", "input_scale", "weight_scale", "mask_index", "input_zero_point",
         "weight_zero_point", "past")


def _q_ref(v, attrs):
    kw = {k: attrs[k] for k in ("num_heads", "unidirectional", "scale", "mask_filter_value") if k in attrs}
    return qattention_reference(v["input"], v["weight"], v["bias"], v["input_scale"], v["weight_scale"],
                                v.get("mask_index"), v.get("input_zero_point", 0), v.get("weight_zero_point", 0),
                                v.get("past"), **kw)


QA = QOp("QAttention", "com.microsoft", 1, _Q_IN, ("output", "present"), _q_ref)


def _build_q(fid: str, seed: int, wt: str = "int8", *, control: str = "zero_query", per_column=False, mask=False,
             past=False, attrs=None, reset=()) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        # uint8 input: int8 weights in 7 bits (_qgraph.U8S8_WEIGHTS)
        w = u8s8_weights(rng, (DIN, 3 * D)) if wt == "int8" else rng.integers(0, 256, size=(DIN, 3 * D)).astype(np.uint8)
        wzp = 0 if wt == "int8" else 128
        consts = {"weight": w, "bias": _f32(rng.standard_normal(3 * D) * 0.5), "input_scale": _f32(0.02),
                  "weight_scale": (np.linspace(0.002, 0.004, 3 * D, dtype=np.float32) if per_column else _f32(0.003)),
                  "input_zero_point": const(125, "uint8"),
                  "weight_zero_point": (np.full(3 * D, wzp) if per_column else np.asarray(wzp + (0 if wt == "int8" else 5))
                                        ).astype(np.dtype(wt))}
        feeds = {"input": rng.integers(0, 256, size=(B, S, DIN)).astype(np.uint8)}
        outputs = {"output": "float32"}
        if mask:
            feeds["mask_index"] = np.array([2, 3], np.int32)
        if past:
            feeds["past"] = _f32(rng.standard_normal((2, B, N, P, H)))
            outputs = {"present": "float32", "output": "float32"}
        g = QGraph({"num_heads": N, **(attrs or {})}, feeds, outputs, consts)
        if control == "zero_query":
            wq = np.array(w)
            wq[:, :D] = np.asarray(consts["weight_zero_point"]).reshape(-1)[:D] if per_column else np.asarray(consts["weight_zero_point"])
            bq = np.array(consts["bias"])
            bq[:D] = 0
            ctl = g.baked(weight=wq, bias=bq)
        elif control == "zp":
            ctl = g.baked(**{reset[0]: np.zeros_like(np.asarray(consts[reset[0]]))})
        elif control == "per_tensor":
            ctl = g.baked(weight_scale=_f32(0.002), weight_zero_point=np.asarray(consts["weight_zero_point"][0]))
        elif control == "zero_past":
            ctl = g.baked(past=np.zeros_like(feeds["past"]))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = g.without(control)
        return probe(QA, fid, g, ctl, _TOL, "uint8")
    return build


_f = c.feature

#: The com.microsoft Attention and QAttention features, in catalog order.
FEATURES = (
    _f(MS, "ms_attention.basic", "float32", "input (2,4,32) projected by weights (32,96) + bias, N=2, H=16; control "
       "bakes in zero Q weights (uniform attention)", f"{_MS_DOC}; {_MS_KERNEL}", _build_ms("ms_attention.basic", 6701)),
    _f(MS, "ms_attention.bias", "float32", "projection bias (96); control bakes in zeros",
       f"{_MS_DOC}: input 'bias'; {_MS_KERNEL} (bias broadcast per head)",
       _build_ms("ms_attention.bias", 6702, control="zero_bias"), Use(inputs=("bias",))),
    _f(MS, "ms_attention.bias.omitted", "float32", "bias left out (optional in the schema: default 0); control sets it",
       f"{_MS_DOC}: input 'bias' optional; {_MS_KERNEL} (Compute reads bias->Shape())", _build_bias_omitted,
       Use(absent=("bias",))),
    *(_f(MS, f"ms_attention.mask_index.{k}", "float32", f"{what}; control drops the mask",
         f"{_MS_DOC}: mask_index {shape}; {_MS_KERNEL}", _build_ms(f"ms_attention.mask_index.{k}", 6703 + i,
                                                                     control="mask_index", mask=fn),
         Use(inputs=("mask_index",), facts={"mask_index_form": k}))
      for i, (k, (fn, what, shape)) in enumerate(_MASKS.items())),
    _f(MS, "ms_attention.past", "float32", "past (2,B,N,3,H) before 4 new tokens, present (2,B,N,7,H) listed first; "
       "control bakes in a zero past", f"{_MS_DOC}: input 'past', output 'present'; {_MS_KERNEL}",
       _build_ms("ms_attention.past", 6707, control="zero_past", past=True), Use(inputs=("past",))),
    _f(MS, "ms_attention.attention_bias", "float32", "attention_bias (B,N,S,T) std 2; control drops it",
       f"{_MS_DOC}: input 'attention_bias'; {_MS_KERNEL}",
       _build_ms("ms_attention.attention_bias", 6708, control="attention_bias", attention_bias=True),
       Use(inputs=("attention_bias",))),
    _f(MS, "ms_attention.unidirectional", "float32", "unidirectional=1 (causal); control resets it",
       f"{_MS_DOC}: attribute 'unidirectional'; {_MS_KERNEL}",
       _build_ms("ms_attention.unidirectional", 6709, control="attrs", attrs={"unidirectional": 1},
                 reset=("unidirectional",)), Use(attributes={"unidirectional": 1})),
    _f(MS, "ms_attention.unidirectional.with_past", "float32", "unidirectional=1 with a 3-token past (row s sees keys "
       "<= 3+s); control resets it", f"{_MS_DOC}: attribute 'unidirectional' with 'past'; {_MS_KERNEL}",
       _build_ms("ms_attention.unidirectional.with_past", 6710, control="attrs", attrs={"unidirectional": 1},
                 past=True, reset=("unidirectional",)), Use(inputs=("past",), attributes={"unidirectional": 1})),
    _f(MS, "ms_attention.scale", "float32", "scale=1.0 (default 1/sqrt(16)); control leaves it unset",
       f"{_MS_DOC}: attribute 'scale'", _build_ms("ms_attention.scale", 6712, control="attrs", attrs={"scale": 1.0},
                                                  reset=("scale",)), Use(attributes={"scale": NON_DEFAULT})),
    _f(MS, "ms_attention.mask_filter_value", "float32", "mask_filter_value=-1 with a raw (B,T) mask: masked keys keep "
       "weight; control resets it (-10000)", f"{_MS_DOC}: attribute 'mask_filter_value'",
       _build_ms("ms_attention.mask_filter_value", 6713, control="attrs", attrs={"mask_filter_value": -1.0},
                 mask=_MASKS["raw_2d"][0], reset=("mask_filter_value",)),
       Use(inputs=("mask_index",), attributes={"mask_filter_value": NON_DEFAULT})),
    _f(MS, "ms_attention.qkv_hidden_sizes", "float32", "qkv_hidden_sizes=[32,32,64]: V heads of 32, output (2,4,64); "
       "control bakes in zero Q weights", f"{_MS_DOC}: attribute 'qkv_hidden_sizes'",
       _build_ms("ms_attention.qkv_hidden_sizes", 6714, attrs={"qkv_hidden_sizes": [D, D, 2 * D]}, sizes=(D, D, 2 * D)),
       Use(attributes={"qkv_hidden_sizes": NON_DEFAULT})),
    _f(QA, "qattention.uint8_int8", "uint8", "uint8 input (2,4,32) x int8 weight (32,96), per-tensor scales, input "
       "zero point 125; control bakes in Q weights at their zero point", f"{_Q_DOC}; {_Q_KERNEL}",
       _build_q("qattention.uint8_int8", 6751)),
    _f(QA, "qattention.uint8_uint8", "uint8", "uint8 weight with zero point 133; control bakes in Q weights at it",
       f"{_Q_DOC}; {_Q_KERNEL} (T2 uint8)", _build_q("qattention.uint8_uint8", 6752, "uint8"),
       Use(facts={"weight_dtype": "uint8"})),
    *(_f(QA, f"qattention.{z}", "uint8", f"{z} set; control sets it to 0 (the default)", f"{_Q_DOC}: input '{z}'",
         _build_q(f"qattention.{z}", 6753 + i, "uint8", control="zp", reset=(z,)), Use(inputs=(z,)))
      for i, z in enumerate(("input_zero_point", "weight_zero_point"))),
    _f(QA, "qattention.per_column", "uint8", "weight_scale per column (96); control bakes in one scale per tensor",
       f"{_Q_DOC}: weight_scale (3 * hidden_size)", _build_q("qattention.per_column", 6755, per_column=True,
                                                              control="per_tensor"), Use(facts={"weight_scale_rank": 1})),
    _f(QA, "qattention.mask_index", "uint8", "mask_index (B) = key lengths [2,3]; control drops it",
       f"{_Q_DOC}: input 'mask_index'", _build_q("qattention.mask_index", 6756, mask=True, control="mask_index"),
       Use(inputs=("mask_index",))),
    _f(QA, "qattention.past", "uint8", "past (2,B,N,3,H), present listed first; control bakes in a zero past",
       f"{_Q_DOC}: input 'past', output 'present'", _build_q("qattention.past", 6757, past=True, control="zero_past"),
       Use(inputs=("past",))),
    _f(QA, "qattention.unidirectional", "uint8", "unidirectional=1; control resets it",
       f"{_Q_DOC}: attribute 'unidirectional'", _build_q("qattention.unidirectional", 6758, control="attrs",
                                                          attrs={"unidirectional": 1}, reset=("unidirectional",)),
       Use(attributes={"unidirectional": 1})),
    _f(QA, "qattention.scale", "uint8", "scale=1.0; control leaves it unset", f"{_Q_DOC}: attribute 'scale'",
       _build_q("qattention.scale", 6759, control="attrs", attrs={"scale": 1.0}, reset=("scale",)),
       Use(attributes={"scale": NON_DEFAULT})),
)
