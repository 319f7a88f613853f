"""Probes for ``com.microsoft.MultiHeadAttention`` (MHA), version 1.

Every probe is one MHA node (float32 unless the feature is a dtype) on tiny fixed shapes:
B = 2 batch rows, S = 4 query tokens attending to L = 6 new keys (cross-attention), N = 4
heads, H = 16. Inputs come from a seeded ``numpy.random.default_rng`` per feature and are
rounded to the probed dtype before the float64 reference
(:func:`epaudit.reference.mha.mha_reference`) sees them.

Controls follow ``catalog/gqa.py``: the feature's input dropped or its attribute reset, or,
for the operator itself and the KV cache, a neutral value baked into the graph (a zero
query: uniform attention; a zero cache). Features whose semantics EPs may legitimately
read differently are probed where every reading agrees: ``unidirectional`` only with
L = S (the CPU kernel leaves the last query row unmasked when L > S, see the reference).

Sources: ORT ``docs/ContribOperators.md`` (``com.microsoft.MultiHeadAttention``), the CPU
kernel ``onnxruntime/contrib_ops/cpu/bert/multihead_attention.cc`` with
``attention_cpu_base.h`` / ``attention_helper.h``; each feature's ``source`` names the part.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference.mha import mha_reference
from . import _contrib as c

B, S, L, N, H = 2, 4, 6, 4, 16
_DOC = "ORT docs/ContribOperators.md#com.microsoft.MultiHeadAttention"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/multihead_attention.cc"
_BASE = "onnxruntime/contrib_ops/cpu/bert/attention_cpu_base.h ApplyAttention"
_MASK = "onnxruntime/contrib_ops/cpu/bert/attention_helper.h PrepareMask"
_ALL_OUT = ("output", "present_key", "present_value")
#: The node's outputs in schema order (output 3, 'qk', only when asked for).
_NODE_OUT = _ALL_OUT + ("qk",)


def _reference(values: Mapping[str, np.ndarray], attrs: Mapping[str, object]) -> Mapping[str, np.ndarray]:
    kwargs = {k: v for k, v in values.items() if k not in ("query", "key", "value")}
    return mha_reference(values["query"], values.get("key"), values.get("value"), **kwargs,
                         **{k: v for k, v in attrs.items()})


OP = c.Op("MultiHeadAttention", "com.microsoft", 1,
          ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value",
           "past_sequence_length", "cache_indirection"),
          _NODE_OUT, {"key_padding_mask": "int32", "past_sequence_length": "int32", "cache_indirection": "int32"},
          {}, _reference)


def _graph(seed: int, dtype: str = "float32", *, seq: int = S, kv: int = L, past: int = 0,
           q_gain: float = 1.0, attrs: Mapping[str, object] | None = None,
           outputs: tuple[str, ...] = ("output",)) -> tuple[c.Graph, np.random.Generator]:
    """Q (B, seq, N·H) times ``q_gain``, K/V (B, kv, N·H) ~ N(0, 1), and a past of ``past``."""
    rng = np.random.default_rng(seed)
    feeds = {
        "query": c.rounded(q_gain * rng.standard_normal((B, seq, N * H)), dtype),
        "key": c.rounded(rng.standard_normal((B, kv, N * H)), dtype),
        "value": c.rounded(rng.standard_normal((B, kv, N * H)), dtype),
    }
    if past:
        feeds["past_key"] = c.rounded(rng.standard_normal((B, N, past, H)), dtype)
        feeds["past_value"] = c.rounded(rng.standard_normal((B, N, past, H)), dtype)
        outputs = _ALL_OUT
    return c.Graph(dtype, {"num_heads": N, **(attrs or {})}, feeds, outputs), rng


def _zero_query(g: c.Graph) -> c.Graph:
    return g.baked(query=np.zeros_like(g.feeds["query"]))


def _zero_cache(g: c.Graph) -> c.Graph:
    return g.baked(past_key=np.zeros_like(g.feeds["past_key"]), past_value=np.zeros_like(g.feeds["past_value"]))


def _probe(fid: str, subject: c.Graph, control: c.Graph) -> Probe:
    # present_key/present_value are copies of the cache and the new K/V: exact.
    return c.probe(OP, fid, subject, control, head=H, exact=frozenset({"present_key", "present_value"}))


def _pad_values(g: c.Graph, lengths: tuple[int, ...]) -> c.Graph:
    """V rows at or after each batch row's key length (no past) offset by +4: attending
    a padded key then moves the output by units."""
    v = g.feeds["value"].copy()
    for b, n in enumerate(lengths):
        v[b, n:] += 4.0
    return c.Graph(g.dtype, g.attrs, {**g.feeds, "value": c.rounded(v, g.dtype)}, g.outputs, g.constants)


def _raw_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int32 0/1 mask (1 = attend) with about 40 % padding and key 0 always kept."""
    m = (rng.random(shape) >= 0.4).astype(np.int32)
    m[..., 0] = 1
    return m


# --- builders -------------------------------------------------------------------------

def _build_base(fid: str, dtype: str, seed: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g, _ = _graph(seed, dtype, q_gain=2.0)
        return _probe(fid, g, _zero_query(g))
    return build


def _build_packed(fid: str, seed: int, kv_only: bool) -> Callable[[], Probe]:
    """Packed QKV (B, S, N, 3, H) in query (S = L), or packed KV (B, L, N, 2, H) in key."""
    def build() -> Probe:
        g, _ = _graph(seed, seq=S if kv_only else L, q_gain=2.0)
        q, k, v = (g.feeds[n].reshape(B, -1, N, H) for n in ("query", "key", "value"))
        if kv_only:
            feeds = {"query": g.feeds["query"], "key": np.stack([k, v], axis=3)}
            subject = c.Graph("float32", g.attrs, feeds, g.outputs)
            return _probe(fid, subject, _zero_query(subject))
        packed = np.stack([q, k, v], axis=3)
        subject = c.Graph("float32", g.attrs, {"query": packed}, g.outputs)
        neutral = packed.copy()
        neutral[:, :, :, 0] = 0.0
        return _probe(fid, subject, subject.baked(query=neutral))
    return build


def _build_bias() -> Probe:
    g, rng = _graph(3003)
    subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "bias": c.rounded(rng.standard_normal(3 * N * H), "float32")},
                      g.outputs)
    return _probe("mha.bias", subject, subject.without("bias"))


def _build_mask(fid: str, seed: int, form: str) -> Callable[[], Probe]:
    """``key_padding_mask`` in one documented form; the control drops the mask."""
    def build() -> Probe:
        past = 3 if form == "raw_total" else 0
        g, rng = _graph(seed, q_gain=2.0, past=past)
        total = past + L
        if form == "key_len":
            mask = np.array([3, 5], dtype=np.int32)
            g = _pad_values(g, (3, 5))
        elif form == "key_len_start":
            # (3B + 2): key lengths, then cumulative query and key offsets (CUDA's layout).
            mask = np.array([3, 5, 0, S, 2 * S, 0, L, 2 * L], dtype=np.int32)
            g = _pad_values(g, (3, 5))
        elif form == "raw_3d":
            mask = _raw_mask(rng, (B, S, total))
        else:
            mask = _raw_mask(rng, (B, total))
        subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "key_padding_mask": mask}, g.outputs)
        return _probe(fid, subject, subject.without("key_padding_mask"))
    return build


def _build_attention_bias(fid: str, seed: int, lead: tuple[int, int], with_mask: bool = False) -> Callable[[], Probe]:
    def build() -> Probe:
        g, rng = _graph(seed)
        feeds = {**g.feeds, "attention_bias": c.rounded(2.0 * rng.standard_normal(lead + (S, L)), "float32")}
        if with_mask:
            feeds["key_padding_mask"] = _raw_mask(rng, (B, L))
        subject = c.Graph(g.dtype, g.attrs, feeds, g.outputs)
        dropped = "key_padding_mask" if with_mask else "attention_bias"
        return _probe(fid, subject, subject.without(dropped))
    return build


def _build_past(fid: str, seed: int, seq: int, past: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g, _ = _graph(seed, seq=seq, kv=seq, past=past, q_gain=2.0)
        return _probe(fid, g, _zero_cache(g))
    return build


def _build_present_outputs() -> Probe:
    # present_key first in the graph: the unwritten fault then leaves it unwritten.
    g, _ = _graph(3014, q_gain=2.0, outputs=("present_key", "present_value", "output"))
    return _probe("mha.present_outputs", g, _zero_query(g))


def _build_output_qk() -> Probe:
    # qk first in the graph (the unwritten fault leaves it unwritten); an attention_bias of
    # std 2 shows whether the bias is in it. No key_padding_mask: a -10000 mask value would
    # dominate the output's tolerance.
    g, rng = _graph(3024, outputs=("qk", "output"))
    subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "attention_bias": c.rounded(2.0 * rng.standard_normal(
        (B, N, S, L)), "float32")}, g.outputs)
    return _probe("mha.output_qk", subject, _zero_query(subject))


def _build_unidirectional(fid: str, seed: int, past: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g, _ = _graph(seed, seq=S if past else L, kv=S if past else L, past=past, q_gain=2.0,
                      attrs={"unidirectional": 1})
        return _probe(fid, g, g.without(attrs=("unidirectional",)))
    return build


def _build_scale() -> Probe:
    g, _ = _graph(3017, attrs={"scale": 1.0})  # 4x the default 1/sqrt(16), exact in float16 too
    return _probe("mha.scale", g, g.without(attrs=("scale",)))


def _build_mask_filter_value() -> Probe:
    # -1 instead of -10000: masked keys keep weight exp(score - 1), a visible share.
    g, rng = _graph(3018, attrs={"mask_filter_value": -1.0})
    subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "key_padding_mask": _raw_mask(rng, (B, L))}, g.outputs)
    return _probe("mha.mask_filter_value", subject, subject.without(attrs=("mask_filter_value",)))


def _build_mask_with_unidirectional() -> Probe:
    g, rng = _graph(3019, seq=L, kv=L, q_gain=2.0, attrs={"unidirectional": 1})
    subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "key_padding_mask": _raw_mask(rng, (B, L))}, g.outputs)
    return _probe("mha.key_padding_mask.with_unidirectional", subject, subject.without("key_padding_mask"))


def _build_num_heads() -> Probe:
    # The same arrays read as 4 heads of 16 and (control) as 2 heads of 32.
    g, _ = _graph(3030, q_gain=2.0)
    return _probe("mha.num_heads", g, g.with_attrs(num_heads=N // 2))


#: Buffer-sharing decode: a past buffer of _MAX rows of which the first _VALID are the past;
#: the new token fills the last row, so every row of the presents is specified.
_MAX, _VALID = 6, 5


def _shared_buffer(seed: int, batch: int = B) -> tuple[c.Graph, np.random.Generator]:
    """Decode S = L = 1 with past buffers (batch, N, 6, H) whose row 5 is not the past
    (offset by +4, so reading it moves the output by units) and past_sequence_length [5];
    the presents are requested (the CPU EP requires both with a shared buffer)."""
    rng = np.random.default_rng(seed)
    feeds = {name: c.rounded(2.0 * rng.standard_normal((batch, 1, N * H)) if name == "query"
                             else rng.standard_normal((batch, 1, N * H)), "float32")
             for name in ("query", "key", "value")}
    for name in ("past_key", "past_value"):
        buf = rng.standard_normal((batch, N, _MAX, H))
        buf[:, :, _VALID:] += 4.0
        feeds[name] = c.rounded(buf, "float32")
    feeds["past_sequence_length"] = np.array([_VALID], dtype=np.int32)
    return c.Graph("float32", {"num_heads": N}, feeds, _ALL_OUT), rng


def _build_past_sequence_length() -> Probe:
    g, _ = _shared_buffer(3031)
    return _probe("mha.past_sequence_length", g, g.without("past_sequence_length"))


def _build_cache_indirection() -> Probe:
    # Batch 1 x beam 2 (query rows 0 and 1): each past position is read from the beam the
    # indirection names; the control drops it (each beam reads its own past).
    g, _ = _shared_buffer(3032)
    ci = np.array([[[1, 0, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]]], dtype=np.int32)
    subject = c.Graph(g.dtype, g.attrs, {**g.feeds, "cache_indirection": ci}, g.outputs)
    return _probe("mha.cache_indirection", subject, subject.without("cache_indirection"))


_PADDING = "input 'key_padding_mask'"
_f = c.feature

#: The MultiHeadAttention features, in catalog order.
FEATURES = (
    _f(OP, "mha.basic", "float32", "separate Q (B,4,N*H) and K/V (B,6,N*H), N=4, H=16; control bakes in a zero query",
       f"{_DOC}; {_KERNEL}; {_BASE}", _build_base("mha.basic", "float32", 3001)),
    _f(OP, "mha.packed_qkv", "float32",
       "packed QKV (B,S,N,3,H) in query, key/value omitted; control zeroes the packed Q part",
       f"{_DOC}: input 'query' packed QKV; {_KERNEL} (CPU: NOT_IMPLEMENTED 'Packed QKV ... not implemented for CPU')",
       _build_packed("mha.packed_qkv", 3002, kv_only=False), Use(absent=("key", "value"), facts={"query_rank": 5})),
    _f(OP, "mha.packed_kv", "float32", "packed KV (B,L,N,2,H) in key, value omitted; control bakes in a zero query",
       f"{_DOC}: input 'key' packed KV; {_KERNEL} (CPU: NOT_IMPLEMENTED 'Packed KV not implemented for CPU')",
       _build_packed("mha.packed_kv", 3020, kv_only=True), Use(absent=("value",), facts={"key_rank": 5})),
    _f(OP, "mha.bias", "float32", "projection bias (3*N*H) added to Q, K and V; control drops it",
       f"{_DOC}: input 'bias'; {_KERNEL} MaybeTransposeToBNSHAndAddBias (offsets 0, D, 2D)",
       _build_bias, Use(inputs=("bias",))),
    _f(OP, "mha.key_padding_mask.key_len", "float32",
       "key_padding_mask (B) = key lengths [3,5] of 6 (padded V offset by +4); control drops the mask",
       f"{_DOC}: {_PADDING} shape (batch_size); {_MASK} (keys at or after the length get mask_filter_value)",
       _build_mask("mha.key_padding_mask.key_len", 3004, "key_len"), Use(inputs=("key_padding_mask",),
       facts={"key_padding_mask_rank": 1})),
    _f(OP, "mha.key_padding_mask.key_len_start", "float32",
       "key_padding_mask (3B+2): key lengths [3,5] then cumulative offsets; control drops the mask",
       f"{_DOC}: {_PADDING} shape (3 * batch_size + 2)",
       _build_mask("mha.key_padding_mask.key_len_start", 3005, "key_len_start"),
       Use(inputs=("key_padding_mask",), facts={"key_padding_mask_rank": 1})),
    _f(OP, "mha.key_padding_mask.raw_kv", "float32",
       "key_padding_mask (B,L) of 0/1, ~40% padding; control drops the mask",
       f"{_DOC}: {_PADDING} shape (batch_size, kv_sequence_length); {_MASK} (raw mask: 0 -> mask_filter_value)",
       _build_mask("mha.key_padding_mask.raw_kv", 3006, "raw_kv"),
       Use(inputs=("key_padding_mask",), facts={"key_padding_mask_rank": 2})),
    _f(OP, "mha.key_padding_mask.raw_total", "float32",
       "key_padding_mask (B,T) over 3 past + 6 new keys, with past_key/past_value; control drops the mask",
       f"{_DOC}: {_PADDING} shape (batch_size, total_sequence_length); {_MASK}",
       _build_mask("mha.key_padding_mask.raw_total", 3007, "raw_total"),
       Use(inputs=("key_padding_mask", "past_key"), facts={"key_padding_mask_rank": 2})),
    _f(OP, "mha.key_padding_mask.raw_3d", "float32",
       "key_padding_mask (B,S,T) of 0/1, one mask row per query; control drops the mask",
       f"{_DOC}: {_PADDING} shape (batch_size, sequence_length, total_sequence_length); {_MASK}",
       _build_mask("mha.key_padding_mask.raw_3d", 3008, "raw_3d"),
       Use(inputs=("key_padding_mask",), facts={"key_padding_mask_rank": 3})),
    _f(OP, "mha.attention_bias", "float32", "attention_bias (B,N,S,T) std 2; control drops it",
       f"{_DOC}: input 'attention_bias'; {_BASE} ComputeAttentionProbs (added to the scaled scores)",
       _build_attention_bias("mha.attention_bias", 3009, (B, N)), Use(inputs=("attention_bias",))),
    _f(OP, "mha.attention_bias.broadcast", "float32", "attention_bias (1,1,S,T) over batch and heads; control drops it",
       f"{_DOC}: attention_bias (batch_size or 1, num_heads or 1, S, T); {_BASE}",
       _build_attention_bias("mha.attention_bias.broadcast", 3010, (1, 1)), Use(inputs=("attention_bias",))),
    _f(OP, "mha.attention_bias.broadcast_batch", "float32",
       "attention_bias (1,N,S,T) broadcast over batch; control drops it",
       f"{_DOC}: attention_bias (batch_size or 1, num_heads or 1, S, T); {_BASE}",
       _build_attention_bias("mha.attention_bias.broadcast_batch", 3011, (1, N)), Use(inputs=("attention_bias",))),
    _f(OP, "mha.attention_bias.broadcast_heads", "float32",
       "attention_bias (B,1,S,T) broadcast over heads; control drops it",
       f"{_DOC}: attention_bias (batch_size or 1, num_heads or 1, S, T); {_BASE}",
       _build_attention_bias("mha.attention_bias.broadcast_heads", 3012, (B, 1)), Use(inputs=("attention_bias",))),
    _f(OP, "mha.key_padding_mask.with_attention_bias", "float32",
       "key_padding_mask (B,L) together with attention_bias (B,N,S,T); control drops the mask",
       f"{_DOC}: inputs 'key_padding_mask' and 'attention_bias'; {_BASE} (bias copied, then the mask added)",
       _build_attention_bias("mha.key_padding_mask.with_attention_bias", 3021, (B, N), with_mask=True),
       Use(inputs=("key_padding_mask", "attention_bias"))),
    _f(OP, "mha.past", "float32",
       "past_key/past_value (P=3) before 4 new tokens (S=L=4), presents compared exactly; control bakes in a zero cache",
       f"{_DOC}: inputs past_key/past_value, outputs present_key/present_value; {_BASE} ConcatStateChunk",
       _build_past("mha.past", 3013, S, 3), Use(inputs=("past_key", "past_value"))),
    _f(OP, "mha.decode", "float32",
       "token generation S=L=1 after a 7-token past_key/past_value cache; control bakes in a zero cache",
       f"{_DOC}: past_key/past_value with sequence_length 1; {_BASE}",
       _build_past("mha.decode", 3022, 1, 7), Use(inputs=("past_key", "past_value"))),
    _f(OP, "mha.present_outputs", "float32",
       "present_key/present_value requested without a past (exact copies of K/V in BNSH), listed first; "
       "control bakes in a zero query",
       f"{_DOC}: outputs present_key/present_value (B,N,T,H); {_KERNEL} (presents allocated when asked for)",
       _build_present_outputs, Use(facts={"outputs": ("output", "present_key", "present_value")})),
    _f(OP, "mha.output_qk", "float32",
       "optional output 3 'qk' (B,N,S,T), listed first, with attention_bias: the scores after scale and bias, "
       "before softmax; control bakes in a zero query",
       f"{_DOC}: output 'qk'; {_BASE} ComputeAttentionProbs (output_qk copies the pre-softmax buffer)",
       _build_output_qk, Use(inputs=("attention_bias",), facts={"outputs": ("output", "qk")})),
    _f(OP, "mha.unidirectional", "float32", "unidirectional=1 in self-attention (S=L=6); control resets it",
       f"{_DOC}: attribute 'unidirectional'; {_MASK} (causal part adds -10000)",
       _build_unidirectional("mha.unidirectional", 3015, 0), Use(attributes={"unidirectional": 1})),
    _f(OP, "mha.unidirectional.with_past", "float32",
       "unidirectional=1 with 3 past + 4 new tokens: row s sees keys <= 3+s; control resets it",
       f"{_DOC}: attribute 'unidirectional' with past_key/past_value; {_MASK}",
       _build_unidirectional("mha.unidirectional.with_past", 3016, 3),
       Use(inputs=("past_key", "past_value"), attributes={"unidirectional": 1})),
    _f(OP, "mha.key_padding_mask.with_unidirectional", "float32",
       "key_padding_mask (B,L) with unidirectional=1 (S=L=6); control drops the mask",
       f"{_DOC}: {_PADDING} with attribute 'unidirectional'; {_MASK} (padding and causal masks add up)",
       _build_mask_with_unidirectional, Use(inputs=("key_padding_mask",), attributes={"unidirectional": 1})),
    _f(OP, "mha.scale", "float32", "scale=1.0 (default 1/sqrt(16) = 0.25); control leaves it unset",
       f"{_DOC}: attribute 'scale'; {_BASE} (scale_ == 0 -> 1/sqrt(H))",
       _build_scale, Use(attributes={"scale": NON_DEFAULT})),
    _f(OP, "mha.mask_filter_value", "float32",
       "mask_filter_value=-1 with a (B,L) key_padding_mask: padded keys keep weight; control resets it (-10000)",
       f"{_DOC}: attribute 'mask_filter_value'; {_MASK} (added at padded keys)",
       _build_mask_filter_value, Use(inputs=("key_padding_mask",), attributes={"mask_filter_value": NON_DEFAULT})),
    _f(OP, "mha.dtype.float16", "float16", "mha.basic in float16; control bakes in a zero query",
       f"{_DOC}: type constraint T includes tensor(float16)", _build_base("mha.dtype.float16", "float16", 3023)),
    _f(OP, "mha.num_heads", "float32",
       "the same Q/K/V read as num_heads=4 (H=16); control reads them as num_heads=2 (H=32)",
       f"{_DOC}: attribute 'num_heads' (required; head size = hidden / num_heads); {_KERNEL}",
       _build_num_heads, Use(inputs=("key", "value"), attributes={"num_heads": NON_DEFAULT})),
    _f(OP, "mha.past_sequence_length", "float32",
       "buffer sharing: past buffers of 6 rows, past_sequence_length [5] (row 5, offset +4, is not the past), "
       "decode S=1, presents = the updated buffers; control drops past_sequence_length (6 past rows)",
       f"{_DOC}: inputs past_key/past_value '(batch_size, num_heads, max_sequence_length, head_size) when buffer "
       f"sharing is used', input 8 past_sequence_length; {_KERNEL}",
       _build_past_sequence_length, Use(inputs=("past_key", "past_value", "past_sequence_length"))),
    _f(OP, "mha.cache_indirection", "float32",
       "beam search: batch 1 x beam 2, cache_indirection (1, 2, 6) picks each past position's beam, with "
       "past_sequence_length [5]; control drops cache_indirection",
       f"{_DOC}: input 9 cache_indirection ('which beam the k-th token came from for the j-th beam for batch i'); "
       f"{_KERNEL}",
       _build_cache_indirection,
       Use(inputs=("past_key", "past_value", "past_sequence_length", "cache_indirection"))),
)
