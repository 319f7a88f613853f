"""Probes for ``com.microsoft.DecoderMaskedMultiHeadAttention`` (version 1), ids
``decodermaskedmultiheadattention.*``: B = 2 rows decoding one token each, N = 2 heads of
H = 16, shared KV buffers of M = 8 rows of which P = 5 hold the past (float32; the CPU kernel
registers float only). Everything is fed (``past_sequence_length`` and ``beam_width`` in CPU
memory, as the kernel registers them). Reference: :mod:`epaudit.reference.dmmha`.
``present_key``/``present_value`` are listed first where asked for; tolerance
``tolerance_for("float32", 16)``.

Controls: the operator itself bakes in a zero query (uniform attention over the T = 6 keys);
an optional input is dropped; ``cache_indirection`` is baked in as the identity (every beam
reads its own cache); an attribute is reset.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.dmmha import dmmha_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

B, N, H, M, P = 2, 2, 16, 8, 5
D = N * H
T = P + 1
_DOC = "ORT docs/ContribOperators.md#com.microsoft.DecoderMaskedMultiHeadAttention"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/decoder_masked_multihead_attention.cc"
_IN = ("query", "key", "value", "mask_index", "attention_bias", "past_key", "past_value", "past_sequence_length",
       "beam_width", "cache_indirection", "bias")
_OUT = ("output", "present_key", "present_value", "qk")
_ATTRS = ("num_heads", "scale", "mask_filter_value", "output_qk", "past_present_share_buffer")


def _ref(v, attrs):
    kw = {k: v[k] for k in _IN[3:] if k in v}
    return dmmha_reference(v["query"], v.get("key"), v.get("value"), **kw,
                           **{k: attrs[k] for k in _ATTRS if k in attrs})


#: T (float, float16); ``qk`` is QK, a type parameter of its own (float stays float).
OP = QOp("DecoderMaskedMultiHeadAttention", "com.microsoft", 1, _IN, _OUT, _ref,
         float_t=frozenset({"query", "key", "value", "attention_bias", "past_key", "past_value", "bias", "output",
                            "present_key", "present_value"}))
_PRESENTS = {"present_key": "float32", "present_value": "float32", "output": "float32"}


def _f32(a) -> np.ndarray:
    return np.asarray(a, np.float32)


def _self_graph(seed: int, *, rows: int = B, packed: bool = False, attrs=None) -> tuple[QGraph, np.random.Generator]:
    rng = np.random.default_rng(seed)
    feeds = {"query": _f32(2.0 * rng.standard_normal((rows, 1, 3 * D if packed else D)))}
    if not packed:
        feeds["key"] = _f32(rng.standard_normal((rows, 1, D)))
        feeds["value"] = _f32(rng.standard_normal((rows, 1, D)))
    feeds["past_key"] = _f32(rng.standard_normal((rows, N, M, H)))
    feeds["past_value"] = _f32(rng.standard_normal((rows, N, M, H)))
    feeds["past_sequence_length"] = np.array([P], np.int32)
    g = QGraph({"num_heads": N, "past_present_share_buffer": 1, **(attrs or {})}, feeds, dict(_PRESENTS))
    return g, rng


def _zero_query(g: QGraph) -> QGraph:
    q = np.array(g.feeds["query"])
    q[..., :D] = 0.0
    return g.baked(query=q)


def _probe(fid: str, subject: QGraph, control: QGraph) -> Probe:
    return probe(OP, fid, subject, control, tolerance_for("float32", H), "float32")


def _build(fid: str, seed: int, *, extra=None, control="query", attrs=None, reset=(), packed=False,
           outputs=None) -> Callable[[], Probe]:
    def build() -> Probe:
        g, rng = _self_graph(seed, packed=packed, attrs=attrs)
        feeds = dict(g.feeds)
        for name in extra or ():
            if name == "bias":
                feeds["bias"] = _f32(rng.standard_normal(3 * D))
            elif name == "mask_index":
                m = (rng.random((B, T)) >= 0.4).astype(np.int32)
                m[:, -1] = 1
                feeds["mask_index"] = m
            elif name == "attention_bias":
                feeds["attention_bias"] = _f32(2.0 * rng.standard_normal((B, N, 1, T)))
        g = QGraph(g.attrs, feeds, dict(outputs or g.outputs), g.constants)
        if control == "query":
            ctl = _zero_query(g)
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = g.without(control)
        return _probe(fid, g, ctl)
    return build


def _build_cross() -> Probe:
    rng = np.random.default_rng(7011)
    feeds = {"query": _f32(2.0 * rng.standard_normal((B, 1, D))), "key": _f32(rng.standard_normal((B, N, 7, H))),
             "value": _f32(rng.standard_normal((B, N, 7, H)))}
    g = QGraph({"num_heads": N}, feeds, {"output": "float32"})
    return _probe("decodermaskedmultiheadattention.cross_attention", g, _zero_query(g))


def _build_beams() -> Probe:
    """1 batch x 2 beams; beam 0 reads beam 1's cache at positions 1 and 3, beam 1 reads
    beam 0's at 0, 2, 4; control: the identity indirection."""
    g, rng = _self_graph(7012, rows=2)
    ind = np.zeros((1, 2, M), np.int32)
    ind[0, 0] = [0, 1, 0, 1, 0, 0, 0, 0]
    ind[0, 1] = [0, 1, 0, 1, 0, 1, 1, 1]
    ident = np.zeros_like(ind)
    ident[0, 1] = 1
    feeds = {**g.feeds, "beam_width": np.array([2], np.int32), "cache_indirection": ind}
    g = QGraph(g.attrs, feeds, g.outputs, g.constants)
    return _probe("decodermaskedmultiheadattention.beam_search", g, g.baked(cache_indirection=ident))


_f = c.feature
_QK = {"qk": "float32", "output": "float32", "present_key": "float32", "present_value": "float32"}

#: The DecoderMaskedMultiHeadAttention features, in catalog order.
FEATURES = (
    _f(OP, "decodermaskedmultiheadattention.self", "float32", "one token attends to P=5 cached rows of shared (B,N,8,H) "
       "buffers plus itself; presents listed first; control bakes in a zero query",
       f"{_DOC}; {_KERNEL} (self-attention path, past_present_share_buffer)", _build("decodermaskedmultiheadattention.self", 7001),
       Use(inputs=("key", "value", "past_key", "past_value", "past_sequence_length"),
           attributes={"past_present_share_buffer": 1})),
    _f(OP, "decodermaskedmultiheadattention.packed_qkv", "float32", "packed QKV (B,1,3D) in query, key/value absent; "
       "control zeroes the packed Q part", f"{_DOC}: packed QKV query; {_KERNEL} (is_packed_qkv)",
       _build("decodermaskedmultiheadattention.packed_qkv", 7002, packed=True), Use(absent=("key", "value"))),
    _f(OP, "decodermaskedmultiheadattention.bias", "float32", "projection bias (3D) added to Q, K, V; control drops it",
       f"{_DOC}: input 'bias'; {_KERNEL} MaybeTransposeToBNSHAndAddBias",
       _build("decodermaskedmultiheadattention.bias", 7003, extra=("bias",), control="bias"), Use(inputs=("bias",))),
    _f(OP, "decodermaskedmultiheadattention.mask_index", "float32", "raw (B,T) key padding mask, ~40% masked; control "
       "drops it", f"{_DOC}: input 'mask_index' (batch_size, total_sequence_length)",
       _build("decodermaskedmultiheadattention.mask_index", 7004, extra=("mask_index",), control="mask_index"),
       Use(inputs=("mask_index",))),
    _f(OP, "decodermaskedmultiheadattention.attention_bias", "float32", "attention_bias (B,N,1,T) std 2; control drops it",
       f"{_DOC}: input 'attention_bias'", _build("decodermaskedmultiheadattention.attention_bias", 7005,
                                                 extra=("attention_bias",), control="attention_bias"),
       Use(inputs=("attention_bias",))),
    _f(OP, "decodermaskedmultiheadattention.output_qk", "float32", "output_qk=1: qk (B,N,1,T) listed first (scores with "
       "attention_bias, before softmax); control bakes in a zero query", f"{_DOC}: attribute 'output_qk', output 'qk'",
       _build("decodermaskedmultiheadattention.output_qk", 7006, extra=("attention_bias",), attrs={"output_qk": 1},
              outputs=_QK), Use(inputs=("attention_bias",), attributes={"output_qk": 1})),
    _f(OP, "decodermaskedmultiheadattention.scale", "float32", "scale=1.0 (default 1/sqrt(16)); control leaves it unset",
       f"{_DOC}: attribute 'scale'", _build("decodermaskedmultiheadattention.scale", 7007, control="attrs",
                                            attrs={"scale": 1.0}, reset=("scale",)),
       Use(attributes={"scale": NON_DEFAULT})),
    _f(OP, "decodermaskedmultiheadattention.mask_filter_value", "float32", "mask_filter_value=-1 with a (B,T) mask; "
       "control resets it (-10000)", f"{_DOC}: attribute 'mask_filter_value'",
       _build("decodermaskedmultiheadattention.mask_filter_value", 7008, extra=("mask_index",), control="attrs",
              attrs={"mask_filter_value": -1.0}, reset=("mask_filter_value",)),
       Use(inputs=("mask_index",), attributes={"mask_filter_value": NON_DEFAULT})),
    _f(OP, "decodermaskedmultiheadattention.cross_attention", "float32", "cross-attention: key/value are (B,N,7,H) "
       "caches, no past; control bakes in a zero query", f"{_DOC}: key/value as past_key/past_value (cross attention); "
       f"{_KERNEL} (is_cross_attention)", _build_cross, Use(absent=("past_key", "past_value"), facts={"key_rank": 4})),
    _f(OP, "decodermaskedmultiheadattention.beam_search", "float32", "beam_width=2 with cache_indirection (1,2,8): "
       "each beam reads past rows of the other beam; control bakes in the identity indirection",
       f"{_DOC}: inputs 'beam_width', 'cache_indirection'; {_KERNEL} ApplyAttentionWithBeams", _build_beams,
       Use(inputs=("beam_width", "cache_indirection"))),
)
