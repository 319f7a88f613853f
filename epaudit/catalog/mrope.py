"""Probes for ``com.microsoft.MRotaryEmbedding`` (version 1): B = 2, S = 4 tokens, N = 2 heads
of H = 16, caches of 32 positions (RoPE angles p · 10000^(−2i/R)); the three position streams
differ per token (a vision patch grid), so which stream feeds which column shows. Reference:
:mod:`epaudit.reference.mrope`; tolerance ``tolerance_for(dtype)``.

Controls: the operator itself bakes in identity caches (cos = 1, sin = 0); ``mrope_section``
is set to all-temporal (every column reads T); other attributes are reset.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.mrope import mrope_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

B, S, N, H, MAXP = 2, 4, 2, 16, 32
_DOC = "ORT docs/ContribOperators.md#com.microsoft.MRotaryEmbedding"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/mrotary_embedding.cc RunMRotaryEmbedding"
_ATTRS = ("mrope_section", "num_heads", "rotary_embedding_dim", "interleaved", "mrope_layout")


def _ref(v, attrs):
    return mrope_reference(v["input"], v["position_ids"], v["cos_cache"], v["sin_cache"],
                           **{k: attrs[k] for k in _ATTRS if k in attrs})


OP = QOp("MRotaryEmbedding", "com.microsoft", 1, ("input", "position_ids", "cos_cache", "sin_cache"), ("output",),
         _ref,
         float_t=frozenset({"input", "cos_cache", "sin_cache", "output"}))

#: (3, B, S) positions: T increases per token, H and W walk a 2x2 patch grid at another offset.
POSITIONS = np.array([[[3, 4, 5, 6], [10, 11, 12, 13]],
                      [[3, 3, 9, 9], [10, 10, 20, 20]],
                      [[3, 8, 3, 8], [10, 17, 10, 17]]], np.int64)


def _caches(rot: int, dtype: str):
    inv = 10000.0 ** (-np.arange(0, rot, 2) / rot)
    ang = np.arange(MAXP)[:, None] * inv[None, :]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def _graph(seed: int, dtype: str = "float32", *, layout="bnsh", rot: int = H, attrs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    shape = (B, N, S, H) if layout == "bnsh" else (B, S, N * H)
    cos, sin = _caches(rot, dtype)
    section = {"mrope_section": [2, 3, 3] if rot == H else [2, 1, 1]}
    feeds = {"input": rng.standard_normal(shape).astype(dtype), "position_ids": POSITIONS, "cos_cache": cos,
             "sin_cache": sin}
    return QGraph({**section, **(attrs or {})}, feeds, {"output": dtype})


def _identity(g: QGraph) -> QGraph:
    return g.baked(cos_cache=np.ones_like(g.feeds["cos_cache"]), sin_cache=np.zeros_like(g.feeds["sin_cache"]))


def _build(fid: str, seed: int, dtype: str = "float32", *, layout="bnsh", rot=H, attrs=None, control="identity",
           reset=()) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, dtype, layout=layout, rot=rot, attrs=attrs)
        if control == "identity":
            ctl = _identity(g)
        elif control == "all_t":
            ctl = g.with_attrs(mrope_section=[sum(g.attrs["mrope_section"]), 0, 0])
        else:
            ctl = g.without(attrs=reset)
        return probe(OP, fid, g, ctl, tolerance_for(dtype), dtype)
    return build


_f = c.feature

#: The MRotaryEmbedding features, in catalog order.
FEATURES = (
    _f(OP, "mrotaryembedding.basic", "float32", "4-D (B,N,S,H) input, mrope_section [2,3,3], three distinct position "
       "streams; control bakes in cos=1, sin=0", f"{_DOC}; {_KERNEL}", _build("mrotaryembedding.basic", 7101)),
    _f(OP, "mrotaryembedding.mrope_section", "float32", "sections [2,3,3] (T, H, W columns); control [8,0,0] (every "
       "column reads the temporal position)", f"{_DOC}: attribute 'mrope_section'",
       _build("mrotaryembedding.mrope_section", 7102, control="all_t"), Use(attributes={"mrope_section": NON_DEFAULT})),
    _f(OP, "mrotaryembedding.mrope_layout", "float32", "mrope_layout=1 (interleaved T/H/W columns, Qwen3-VL); control "
       "resets it (sectioned)", f"{_DOC}: attribute 'mrope_layout'",
       _build("mrotaryembedding.mrope_layout", 7103, attrs={"mrope_layout": 1}, control="attrs", reset=("mrope_layout",)),
       Use(attributes={"mrope_layout": 1})),
    _f(OP, "mrotaryembedding.interleaved", "float32", "interleaved=1 (pairs 2i, 2i+1); control resets it (halves)",
       f"{_DOC}: attribute 'interleaved'", _build("mrotaryembedding.interleaved", 7104, attrs={"interleaved": 1},
                                                  control="attrs", reset=("interleaved",)),
       Use(attributes={"interleaved": 1})),
    _f(OP, "mrotaryembedding.input_3d", "float32", "3-D (B,S,N*H) input with num_heads=2; control bakes in cos=1, sin=0",
       f"{_DOC}: input (batch_size, sequence_length, hidden_size)",
       _build("mrotaryembedding.input_3d", 7105, layout="bsd", attrs={"num_heads": N}),
       Use(attributes={"num_heads": NON_DEFAULT})),
    _f(OP, "mrotaryembedding.rotary_embedding_dim", "float32", "rotary_embedding_dim=8 of H=16 (sections [2,1,1]), "
       "features 8..15 copied; control bakes in cos=1, sin=0", f"{_DOC}: attribute 'rotary_embedding_dim'; {_KERNEL} (memcpy of [R, H))",
       _build("mrotaryembedding.rotary_embedding_dim", 7106, layout="bsd", rot=8,
              attrs={"num_heads": N, "rotary_embedding_dim": 8}),
       Use(attributes={"rotary_embedding_dim": NON_DEFAULT, "num_heads": NON_DEFAULT})),
    _f(OP, "mrotaryembedding.dtype.float16", "float16", "mrotaryembedding.basic in float16; control bakes in cos=1, sin=0",
       f"{_DOC}: type constraint T includes tensor(float16)", _build("mrotaryembedding.dtype.float16", 7107, "float16")),
)
