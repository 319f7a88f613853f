"""Probes for ``com.microsoft.PagedAttention`` (version 1; float16: the schema types T as float16
or bfloat16, and only the CUDA EP registers a kernel). Two packed sequences, N = 4 query heads
over N_kv = 2 key/value heads of H = 64, caches of 4 blocks of 16 slots: sequence 0 is a
3-token prompt written into block 2, sequence 1 adds 2 tokens after a 5-token past held in
block 0 (``.decode``: one token each after pasts of 5 and 9). Everything is fed. Reference:
:mod:`epaudit.reference.paged_attention` (hand-checked only: no CPU kernel exists); tolerance
``tolerance_for("float16", 64)``. On the CPU EP every probe is refused (no kernel).

Controls: the operator itself bakes in a zero query (uniform causal attention); an optional
input is dropped; attributes are reset; ``slot_mapping`` is dropped (every new token written).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.paged_attention import paged_attention_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

N, NKV, H, NB, BS = 4, 2, 64, 4, 16
_DOC = "ORT docs/ContribOperators.md#com.microsoft.PagedAttention"
_KERNEL = "onnxruntime/contrib_ops/cuda/bert/paged_attention.cc (CUDA only)"
_IN = ("query", "key", "value", "key_cache", "value_cache", "cumulative_sequence_length", "past_seqlens", "block_table",
       "cos_cache", "sin_cache", "slot_mapping", "head_sink")
_ATTRS = ("num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "is_causal", "do_rotary",
          "rotary_interleaved")


def _ref(v, attrs):
    return paged_attention_reference(*[v.get(n) for n in _IN], **{k: attrs[k] for k in _ATTRS if k in attrs})


OP = QOp("PagedAttention", "com.microsoft", 1, _IN, ("output", "key_cache_out", "value_cache_out"), _ref)


def _h(a) -> np.ndarray:
    return np.asarray(a, np.float16)


def _graph(seed: int, *, decode: bool = False, rotary: bool = False, sink: bool = False, slots: bool = False,
           attrs=None, outputs=("output",), q_gain: float = 1.0) -> QGraph:
    rng = np.random.default_rng(seed)
    lens, past = ([1, 1], [5, 9]) if decode else ([3, 2], [0, 5])
    tokens = sum(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    feeds = {"query": _h(q_gain * rng.standard_normal((tokens, N * H))),
             "key": _h(rng.standard_normal((tokens, NKV * H))), "value": _h(rng.standard_normal((tokens, NKV * H))),
             "key_cache": _h(rng.standard_normal((NB, BS, NKV, H))),
             "value_cache": _h(rng.standard_normal((NB, BS, NKV, H))),
             "cumulative_sequence_length": cu, "past_seqlens": np.array(past, np.int32),
             "block_table": np.array([[2, 3], [0, 1]], np.int32)}
    a = {"num_heads": N, "kv_num_heads": NKV, **(attrs or {})}
    if rotary:
        inv = 10000.0 ** (-np.arange(0, H, 2) / H)
        ang = np.arange(32)[:, None] * inv[None, :]
        feeds["cos_cache"], feeds["sin_cache"] = _h(np.cos(ang)), _h(np.sin(ang))
        a["do_rotary"] = 1
    if slots:
        # sequence 1's first new token (position 5 of block 0) is a prefix-cache hit: not written
        feeds["slot_mapping"] = np.array([2 * BS, 2 * BS + 1, 2 * BS + 2, -1, 6], np.int32)
    if sink:
        feeds["head_sink"] = _h(rng.uniform(0.5, 2.0, size=N))
    return QGraph(a, feeds, {o: "float16" for o in outputs})


def _build(fid: str, seed: int, *, control="query", reset=(), **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, **kw)
        if control == "query":
            ctl = g.baked(query=np.zeros_like(g.feeds["query"]))
        elif control == "rotary":
            ctl = g.without("cos_cache", "sin_cache", attrs=("do_rotary",))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = g.without(control)
        return probe(OP, fid, g, ctl, tolerance_for("float16", H), "float16")
    return build


_f = c.feature
_CACHES = ("key_cache_out", "value_cache_out", "output")

#: The PagedAttention features, in catalog order.
FEATURES = (
    _f(OP, "pagedattention.basic", "float16", "two packed sequences (a 3-token prompt; 2 tokens after a 5-token past) "
       "through a block table, N=4 over N_kv=2; control bakes in a zero query", f"{_DOC}; {_KERNEL}",
       _build("pagedattention.basic", 7701)),
    _f(OP, "pagedattention.cache_outputs", "float16", "key_cache_out/value_cache_out (the caches with the new keys "
       "written) listed first; control bakes in a zero query", f"{_DOC}: outputs 'key_cache_out', 'value_cache_out'",
       _build("pagedattention.cache_outputs", 7702, outputs=_CACHES),
       Use(facts={"outputs": ("output", "key_cache_out", "value_cache_out")})),
    _f(OP, "pagedattention.decode", "float16", "one token per sequence after pasts of 5 and 9; control bakes in a zero "
       "query", f"{_DOC}: token generation", _build("pagedattention.decode", 7703, decode=True),
       Use(facts={"sequence_length": 1})),
    _f(OP, "pagedattention.local_window_size", "float16", "local_window_size=3 (the 3 most recent positions); control "
       "resets it (-1)", f"{_DOC}: attribute 'local_window_size'",
       _build("pagedattention.local_window_size", 7704, attrs={"local_window_size": 3}, control="attrs",
              reset=("local_window_size",)), Use(attributes={"local_window_size": NON_DEFAULT})),
    _f(OP, "pagedattention.softcap", "float16", "softcap=1.0 on scores of a query scaled by 3; control resets it",
       f"{_DOC}: attribute 'softcap'", _build("pagedattention.softcap", 7705, attrs={"softcap": 1.0}, q_gain=3.0,
                                              control="attrs", reset=("softcap",)),
       Use(attributes={"softcap": NON_DEFAULT})),
    _f(OP, "pagedattention.scale", "float16", "scale=0.5 (default 1/sqrt(64)); control leaves it unset",
       f"{_DOC}: attribute 'scale'", _build("pagedattention.scale", 7706, attrs={"scale": 0.5}, control="attrs",
                                            reset=("scale",)), Use(attributes={"scale": NON_DEFAULT})),
    _f(OP, "pagedattention.is_causal", "float16", "is_causal=0 (prompt tokens see each other both ways); control "
       "resets it (1)", f"{_DOC}: attribute 'is_causal'", _build("pagedattention.is_causal", 7707,
                                                                 attrs={"is_causal": 0}, control="attrs",
                                                                 reset=("is_causal",)),
       Use(attributes={"is_causal": 0})),
    _f(OP, "pagedattention.head_sink", "float16", "head_sink (N) logits in the softmax denominator; control drops it",
       f"{_DOC}: input 'head_sink'", _build("pagedattention.head_sink", 7708, sink=True, control="head_sink"),
       Use(inputs=("head_sink",))),
    _f(OP, "pagedattention.do_rotary", "float16", "do_rotary=1 with cos/sin caches (halves) at each token's position; "
       "control resets it and drops the caches", f"{_DOC}: attribute 'do_rotary', inputs 'cos_cache', 'sin_cache'",
       _build("pagedattention.do_rotary", 7709, rotary=True, control="rotary"),
       Use(inputs=("cos_cache", "sin_cache"), attributes={"do_rotary": 1})),
    _f(OP, "pagedattention.slot_mapping", "float16", "slot_mapping with -1 for a prefix-cache hit (that key stays the "
       "cached one); control drops slot_mapping (every key written)", f"{_DOC}: input 'slot_mapping'",
       _build("pagedattention.slot_mapping", 7710, slots=True, outputs=_CACHES, control="slot_mapping"),
       Use(inputs=("slot_mapping",))),
)
