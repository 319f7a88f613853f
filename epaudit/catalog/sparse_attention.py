"""Probes for ``com.microsoft.SparseAttention`` (version 1): B = 2, N = 4 query heads over
N_kv = 2 key/value heads of H = 16, blocks of 16 tokens, two layouts (heads 0, 2 dense
causal; heads 1, 3 block-sparse). A prompt of S = 32 tokens (2 blocks, buffers of 32) or one
decoded token after a past of 40 (``.ragged``: pasts of 40 and 36; 4 blocks, buffers of 64).
Everything is fed.
Reference: :mod:`epaudit.reference.sparse_attention`; tolerance ``tolerance_for(dtype, 16)``;
presents are exact copies (past rows and new K/V) unless ``do_rotary`` rotates the new keys.

Controls: the operator itself bakes in a zero query (uniform causal attention); the block
mask feature bakes in all-dense layouts (an EP that ignores the sparsity); ``do_rotary`` is
reset with the caches dropped; other attributes are reset.

The CPU kernel insists that ``present_key``/``present_value`` be the very buffers of
``past_key``/``past_value`` (``sparse_attention.cc``: ``ORT_ENFORCE(past_key->DataRaw() ==
present_key->DataRaw() ...)``) and declares no in-place reuse, so only a caller that binds one
buffer to both (IOBinding) can run it; ``tests/test_contrib_qlinear_attention_moe.py`` does that
to check this reference against the CPU EP.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.sparse_attention import sparse_attention_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

B, N, NKV, H, BS = 2, 4, 2, 16, 16
#: Total key lengths of the decode probes; RAGGED gives the two rows different pasts.
TOTALS, RAGGED = [41, 41], [41, 37]
_DOC = "ORT docs/ContribOperators.md#com.microsoft.SparseAttention"
_KERNEL = "onnxruntime/contrib_ops/cpu/sparse/sparse_attention_base.h ComputeAttentionProbs; sparse_attention.cc"
_IN = ("query", "key", "value", "past_key", "past_value", "block_row_indices", "block_col_indices",
       "total_sequence_length", "key_total_sequence_lengths", "cos_cache", "sin_cache")
_ATTRS = ("num_heads", "kv_num_heads", "sparse_block_size", "scale", "do_rotary", "rotary_interleaved")


def _ref(v, attrs):
    args = [v.get(n) for n in _IN]
    return sparse_attention_reference(*args, **{k: attrs[k] for k in _ATTRS if k in attrs})


OP = QOp("SparseAttention", "com.microsoft", 1, _IN, ("output", "present_key", "present_value"), _ref,
         float_t=frozenset({"query", "key", "value", "past_key", "past_value", "cos_cache", "sin_cache", "output",
                            "present_key", "present_value"}))

#: CSR of two 2x2 layouts: dense lower triangle; block row 1 without block 0.
PROMPT_LAYOUT = (np.array([[0, 1, 3], [0, 1, 2]], np.int32), np.array([[0, 0, 1], [0, 1, -1]], np.int32))
#: CSR of two 4x4 layouts: dense; a local band with block 0 kept on the last row.
DECODE_LAYOUT = (np.array([[0, 1, 3, 6, 10], [0, 1, 3, 5, 8]], np.int32),
                 np.array([[0, 0, 1, 0, 1, 2, 0, 1, 2, 3], [0, 0, 1, 1, 2, 0, 2, 3, -1, -1]], np.int32))


def _dense(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dense_r, dense_c = rows[0], cols[0]
    return np.stack([dense_r] * rows.shape[0]), np.stack([dense_c] * cols.shape[0])


def _graph(seed: int, dtype: str = "float32", *, decode: bool = False, packed: bool = False, rotary: bool = False,
           attrs=None, ragged: bool = False) -> QGraph:
    rng = np.random.default_rng(seed)
    seq, m = (1, 64) if decode else (32, 32)
    totals = np.array((RAGGED if ragged else TOTALS) if decode else [32, 32], np.int32)
    rows, cols = DECODE_LAYOUT if decode else PROMPT_LAYOUT
    qw, kw = N * H, NKV * H
    feeds: dict[str, np.ndarray] = {}
    if packed:
        feeds["query"] = (1.5 * rng.standard_normal((B, seq, qw + 2 * kw))).astype(dtype)
    else:
        feeds["query"] = (1.5 * rng.standard_normal((B, seq, qw))).astype(dtype)
        feeds["key"] = rng.standard_normal((B, seq, kw)).astype(dtype)
        feeds["value"] = rng.standard_normal((B, seq, kw)).astype(dtype)
    past = rng.standard_normal((B, NKV, m, H)) if decode else np.zeros((B, NKV, m, H))
    feeds["past_key"] = past.astype(dtype)
    feeds["past_value"] = (rng.standard_normal((B, NKV, m, H)) if decode else np.zeros((B, NKV, m, H))).astype(dtype)
    feeds.update(block_row_indices=rows, block_col_indices=cols,
                 total_sequence_length=np.array(int(totals.max()) if decode else seq, np.int32),
                 key_total_sequence_lengths=totals)
    a = {"num_heads": N, "kv_num_heads": NKV, "sparse_block_size": BS, **(attrs or {})}
    if rotary:
        inv = 10000.0 ** (-np.arange(0, H, 2) / H)
        ang = np.arange(64)[:, None] * inv[None, :]
        feeds["cos_cache"], feeds["sin_cache"] = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        a["do_rotary"] = 1
    outs = {"output": dtype, "present_key": dtype, "present_value": dtype}
    return QGraph(a, feeds, outs)


def _zero_query(g: QGraph) -> QGraph:
    q = np.array(g.feeds["query"])
    q[..., :N * H] = 0
    return g.baked(query=q)


def _build(fid: str, seed: int, dtype: str = "float32", *, control="query", decode=False, packed=False, rotary=False,
           attrs=None, reset=(), ragged=False) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, dtype, decode=decode, packed=packed, rotary=rotary, attrs=attrs, ragged=ragged)
        if control == "dense":
            r, cc = _dense(g.feeds["block_row_indices"], g.feeds["block_col_indices"])
            ctl = g.baked(block_row_indices=r, block_col_indices=cc)
        elif control == "rotary":
            ctl = g.without("cos_cache", "sin_cache", attrs=("do_rotary",) + tuple(reset))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        else:
            ctl = _zero_query(g)
        exact = frozenset() if rotary else frozenset({"present_key", "present_value"})
        return probe(OP, fid, g, ctl, tolerance_for(dtype, H), dtype, exact=exact)
    return build


_f = c.feature

#: The SparseAttention features, in catalog order.
FEATURES = (
    _f(OP, "sparseattention.basic", "float32", "prompt S=32, N=4/N_kv=2, blocks of 16, a dense and a sparse layout; "
       "control bakes in a zero query", f"{_DOC}; {_KERNEL}", _build("sparseattention.basic", 7201),
       Use(inputs=("key", "value"))),
    _f(OP, "sparseattention.block_mask", "float32", "heads 1, 3 skip block 0 in block row 1; control bakes in dense "
       "layouts for every head", f"{_DOC}: inputs 'block_row_indices', 'block_col_indices' (CSR)",
       _build("sparseattention.block_mask", 7202, control="dense"), Use(facts={"sparse_layouts": 2})),
    _f(OP, "sparseattention.decode", "float32", "one token after a past of 40 in buffers of 64 (4 block rows); "
       "control bakes in a zero query", f"{_DOC}: token generation; {_KERNEL}",
       _build("sparseattention.decode", 7203, decode=True), Use(facts={"sequence_length": 1})),
    _f(OP, "sparseattention.decode.ragged", "float32", "decode with key_total_sequence_lengths [41, 37] (pasts of 40 "
       "and 36 in one batch); control bakes in a zero query", f"{_DOC}: key_total_sequence_lengths (batch_size); "
       f"{_KERNEL}", _build("sparseattention.decode.ragged", 7210, decode=True, ragged=True),
       Use(facts={"sequence_length": 1, "ragged": True})),
    _f(OP, "sparseattention.decode.block_mask", "float32", "decode where the sparse layout keeps blocks {1,2} or "
       "{0,2,3}; control bakes in dense layouts", f"{_DOC}: block mask while decoding",
       _build("sparseattention.decode.block_mask", 7204, control="dense", decode=True),
       Use(facts={"sequence_length": 1, "sparse_layouts": 2})),
    _f(OP, "sparseattention.packed_qkv", "float32", "packed QKV (B,S,(N+2N_kv)H), key/value absent; control zeroes the "
       "Q part", f"{_DOC}: packed QKV query", _build("sparseattention.packed_qkv", 7205, packed=True),
       Use(absent=("key", "value"))),
    _f(OP, "sparseattention.do_rotary", "float32", "do_rotary=1 with cos/sin caches (halves) on Q and new K; control "
       "resets it and drops the caches", f"{_DOC}: attribute 'do_rotary', inputs 'cos_cache', 'sin_cache'",
       _build("sparseattention.do_rotary", 7206, rotary=True, control="rotary"),
       Use(inputs=("cos_cache", "sin_cache"), attributes={"do_rotary": 1})),
    _f(OP, "sparseattention.rotary_interleaved", "float32", "rotary_interleaved=1 while decoding; control resets it",
       f"{_DOC}: attribute 'rotary_interleaved'",
       _build("sparseattention.rotary_interleaved", 7207, rotary=True, decode=True, attrs={"rotary_interleaved": 1},
              control="attrs", reset=("rotary_interleaved",)),
       Use(inputs=("cos_cache", "sin_cache"), attributes={"do_rotary": 1, "rotary_interleaved": 1})),
    _f(OP, "sparseattention.scale", "float32", "scale=0.5 (default 1/sqrt(16) = 0.25); control leaves it unset",
       f"{_DOC}: attribute 'scale'", _build("sparseattention.scale", 7208, attrs={"scale": 0.5}, control="attrs",
                                            reset=("scale",)), Use(attributes={"scale": NON_DEFAULT})),
    _f(OP, "sparseattention.dtype.float16", "float16", "sparseattention.basic in float16; control bakes in a zero query",
       f"{_DOC}: type constraint T includes tensor(float16)", _build("sparseattention.dtype.float16", 7209, "float16")),
)
