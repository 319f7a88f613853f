"""Probes for ``com.microsoft.GroupQueryAttention`` (GQA), version 1.

Every probe is one GQA node (float16 unless the feature is a dtype) on tiny fixed shapes:
B = 2 batch rows, S = 8 query tokens, N = 4 query heads sharing Nkv = 2 key/value heads,
H = 16 (a multiple of 8, and of 16 as rotary needs). Inputs come from a seeded
``numpy.random.default_rng`` per feature and are rounded to the probed dtype *before*
the float64 reference (:func:`epaudit.reference.gqa.gqa_reference`) sees them, so only
the kernel's own arithmetic separates it from the reference.

Subject and control share one graph except for the feature: the control drops the
feature's input or resets its attribute; for the operator itself (prompt, packed QKV,
dtypes) and for the KV cache (decode) the control bakes a neutral value into the graph
as a constant (zero query: uniform attention over the causal window; zero past cache).
So the control's feeds are always a subset of the subject's, with the same arrays, and
running the control graph on the subject's feeds is exactly the "input ignored" fault.

Sources: ORT ``docs/ContribOperators.md`` (``com.microsoft.GroupQueryAttention``) and the
CPU kernel ``onnxruntime/contrib_ops/cpu/bert/gqa_attention_base.h``; each feature's
``source`` names the part it relies on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Feature, Probe, Use
from .gqa_llm import FEATURES as _LLM
from .gqa_graph import (
    _DOC,
    _KERNEL,
    DOMAIN,
    NKV,
    OP_TYPE,
    OPSET,
    B,
    H,
    N,
    S,
    _bias,
    _decode_feeds,
    _Graph,
    _neutral_query,
    _probe,
    _prompt,
    _rope_cache,
    _rounded,
    _without,
)


def _build_base(feature_id: str, dtype: str, seed: int, head: int = H) -> Callable[[], Probe]:
    """The op itself in ``dtype``: a causal prompt vs the same graph with a zero query."""
    def build() -> Probe:
        g = _prompt(np.random.default_rng(seed), dtype, head=head)
        return _probe(feature_id, g, _neutral_query(g), head)
    return build


def _build_packed_qkv() -> Probe:
    rng = np.random.default_rng(2002)
    g = _prompt(rng, "float16")
    feeds = dict(g.feeds)
    packed = np.concatenate([feeds.pop("query"), feeds.pop("key"), feeds.pop("value")], axis=-1)
    subject = replace(g, feeds={"query": packed, **feeds})
    # Neutral control: the Q part of the packed tensor is zero, K and V unchanged.
    neutral = packed.copy()
    neutral[..., :N * H] = 0.0
    control = replace(subject, feeds=feeds, constants={"query": neutral})
    return _probe("gqa.packed_qkv", subject, control)


def _build_decode() -> Probe:
    rng = np.random.default_rng(2003)
    past = S - 1  # cache of 7 tokens; the new token is number 8 (seqlens_k = 7, total = 8)
    dtype = "float16"
    feeds = {
        "query": _rounded(rng.standard_normal((B, 1, N * H)), dtype),
        "key": _rounded(rng.standard_normal((B, 1, NKV * H)), dtype),
        "value": _rounded(rng.standard_normal((B, 1, NKV * H)), dtype),
        "past_key": _rounded(rng.standard_normal((B, NKV, past, H)), dtype),
        "past_value": _rounded(rng.standard_normal((B, NKV, past, H)), dtype),
        "seqlens_k": np.full(B, past, dtype=np.int32),
        "total_sequence_length": np.array(past + 1, dtype=np.int32),
    }
    subject = _Graph(dtype, {}, feeds)
    # Dropping past_key/past_value would leave an S = 1, total = 8 graph with no cache, which
    # the op does not define; a zero cache is the neutral value (keys score 0, values add 0).
    control_feeds = {k: v for k, v in feeds.items() if k not in ("past_key", "past_value")}
    control = _Graph(dtype, {}, control_feeds, constants={
        "past_key": np.zeros_like(feeds["past_key"]),
        "past_value": np.zeros_like(feeds["past_value"])})
    return _probe("gqa.decode", subject, control)


def _build_attention_bias(feature_id: str, seed: int, shape: tuple[int, int]) -> Callable[[], Probe]:
    """Bias of shape ``shape + (S, total)``, std 2 (logit differences of several units)."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        g = _prompt(rng, "float16")
        bias = _rounded(2.0 * rng.standard_normal(shape + (S, S)), "float16")
        subject = replace(g, feeds={**g.feeds, "attention_bias": bias})
        return _probe(feature_id, subject, _without(subject, "attention_bias"))
    return build


def _build_head_sink() -> Probe:
    rng = np.random.default_rng(2007)
    g = _prompt(rng, "float16")
    # ±2 against scores of about N(0, 1): exp(2) outweighs a short causal row, exp(-2) still
    # shows on the first rows, which see one or two keys.
    sinks = _rounded(np.array([2.0, -2.0, 2.0, -2.0]), "float16")
    subject = replace(g, feeds={**g.feeds, "head_sink": sinks})
    return _probe("gqa.head_sink", subject, _without(subject, "head_sink"))


def _build_softcap() -> Probe:
    # Q scaled by 3: scores of about N(0, 9), mostly beyond the cap of 2, where
    # 2·tanh(x/2) flattens them.
    g = _prompt(np.random.default_rng(2008), "float16", q_scale=3.0, attrs={"softcap": 2.0})
    return _probe("gqa.softcap", g, _without(g, attrs=("softcap",)))


def _build_local_window() -> Probe:
    g = _prompt(np.random.default_rng(2009), "float16", attrs={"local_window_size": 2})
    return _probe("gqa.local_window", g, _without(g, attrs=("local_window_size",)))


def _build_smooth_softmax() -> Probe:
    # Scores of about N(0, 0.25): row sums of exp stay near the row length, so the extra
    # exp(0) = 1 in the denominator takes a visible share (half of it on the first row).
    g = _prompt(np.random.default_rng(2010), "float16", q_scale=0.5, attrs={"smooth_softmax": 1})
    return _probe("gqa.smooth_softmax", g, _without(g, attrs=("smooth_softmax",)))


def _build_rotary() -> Probe:
    rng = np.random.default_rng(2011)
    g = _prompt(rng, "float16", attrs={"do_rotary": 1})
    cos, sin = _rope_cache(S, H)
    subject = replace(g, feeds={**g.feeds, "cos_cache": _rounded(cos, "float16"),
                                "sin_cache": _rounded(sin, "float16")})
    return _probe("gqa.rotary", subject,
                  _without(subject, "cos_cache", "sin_cache", attrs=("do_rotary",)))


def _build_qk_output() -> Probe:
    # output_qk has no "off" state that keeps the output, so the control asks for the other
    # mode: probabilities (2) instead of the pre-softmax scores (1) the subject asks for.
    rng = np.random.default_rng(2012)
    subject = _prompt(rng, "float16", attrs={"qk_output": 1})
    control = replace(subject, attrs={"qk_output": 2})
    return _probe("gqa.qk_output", subject, control)


def _build_bias_with(feature_id: str, seed: int, q_scale: float, attrs: Mapping[str, object],
                     sinks: bool) -> Callable[[], Probe]:
    """attention_bias combined with head_sink / smooth_softmax; the control drops the bias,
    so an EP that drops the bias when the other feature is on lands on it."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        g = _prompt(rng, "float16", q_scale=q_scale, attrs=attrs)
        feeds = {**g.feeds, "attention_bias": _bias(rng)}
        if sinks:
            feeds["head_sink"] = _rounded(np.array([2.0, -2.0, 2.0, -2.0]), "float16")
        subject = replace(g, feeds=feeds)
        return _probe(feature_id, subject, _without(subject, "attention_bias"))
    return build


def _build_softcap_with_bias() -> Probe:
    # Scores of std ~3 against a cap of 2, plus a bias of std 2: capping before or after the
    # bias changes the logits by units (tested against the wrong order in the tests).
    rng = np.random.default_rng(2015)
    g = _prompt(rng, "float16", q_scale=3.0, attrs={"softcap": 2.0})
    subject = replace(g, feeds={**g.feeds, "attention_bias": _bias(rng)})
    return _probe("gqa.softcap.with_bias", subject, _without(subject, attrs=("softcap",)))


def _build_rotary_interleaved() -> Probe:
    rng = np.random.default_rng(2016)
    g = _prompt(rng, "float16", attrs={"do_rotary": 1, "rotary_interleaved": 1})
    cos, sin = _rope_cache(S, H)
    subject = replace(g, feeds={**g.feeds, "cos_cache": _rounded(cos, "float16"),
                                "sin_cache": _rounded(sin, "float16")})
    return _probe("gqa.rotary_interleaved", subject, _without(subject, attrs=("rotary_interleaved",)))


def _build_position_ids() -> Probe:
    # Decode: generated positions are 7 (the cache length) for both rows; explicit ids 2 and
    # 5 rotate the query and the new key by other angles than the cached keys assume.
    rng = np.random.default_rng(2017)
    feeds = _decode_feeds(rng, S - 1, (S, S))
    cos, sin = _rope_cache(2 * S, H)
    feeds.update(cos_cache=_rounded(cos, "float16"), sin_cache=_rounded(sin, "float16"),
                 position_ids=np.array([[2], [5]], dtype=np.int64))
    subject = _Graph("float16", {"do_rotary": 1}, feeds)
    return _probe("gqa.position_ids", subject, _without(subject, "position_ids"))


def _build_chunked(feature_id: str, seed: int, past: int, seq: int) -> Callable[[], Probe]:
    """A later prompt chunk: B = 1 (the op's rule for S > 1 with a past), ``seq`` new tokens
    after ``past`` cached ones; the control bakes in a zero cache."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        dtype = "float16"
        feeds = {
            "query": _rounded(rng.standard_normal((1, seq, N * H)), dtype),
            "key": _rounded(rng.standard_normal((1, seq, NKV * H)), dtype),
            "value": _rounded(rng.standard_normal((1, seq, NKV * H)), dtype),
            "past_key": _rounded(rng.standard_normal((1, NKV, past, H)), dtype),
            "past_value": _rounded(rng.standard_normal((1, NKV, past, H)), dtype),
            "seqlens_k": np.array([past + seq - 1], dtype=np.int32),
            "total_sequence_length": np.array(past + seq, dtype=np.int32),
        }
        subject = _Graph(dtype, {}, feeds)
        control = _Graph(dtype, {}, {k: v for k, v in feeds.items() if k not in ("past_key", "past_value")},
                         constants={"past_key": np.zeros_like(feeds["past_key"]),
                                    "past_value": np.zeros_like(feeds["past_value"])})
        return _probe(feature_id, subject, control)
    return build


def _build_batch_ragged() -> Probe:
    # Row 0 holds 8 tokens (7 cached + 1 new), row 1 only 5 (4 cached + 1 new): its cache
    # slots 4..6 are padding, offset by +4 so that reading them is visible. The control bakes
    # in seqlens_k = [7, 7], an EP that ignores the per-row lengths.
    rng = np.random.default_rng(2019)
    feeds = _decode_feeds(rng, S - 1, (S, 5))
    for name in ("past_key", "past_value"):
        shifted = feeds[name].copy()
        shifted[1, :, 4:] += 4.0
        feeds[name] = _rounded(shifted, "float16")  # still float16 values after the shift
    subject = _Graph("float16", {}, feeds)
    control = replace(subject, feeds={k: v for k, v in feeds.items() if k != "seqlens_k"},
                      constants={"seqlens_k": np.full(B, S - 1, dtype=np.int32)})
    return _probe("gqa.batch_ragged", subject, control)


def _build_local_window_with_past() -> Probe:
    rng = np.random.default_rng(2020)
    subject = _Graph("float16", {"local_window_size": 3}, _decode_feeds(rng, S - 1, (S, S)))
    return _probe("gqa.local_window.with_past", subject, _without(subject, attrs=("local_window_size",)))


def _build_qk_mode(feature_id: str, seed: int, mode: int, *, decode: bool = False,
                   presents: bool = True) -> Callable[[], Probe]:
    """output_qk in ``mode`` (1 scores before softmax, 2 probabilities); the control asks for
    the other mode, as :func:`_build_qk_output` does. ``decode``: one token after a 7-token
    cache (output_qk then spans T = 8 keys); ``presents`` off: present_key/value not requested."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        if decode:
            subject = _Graph("float16", {"qk_output": mode}, _decode_feeds(rng, S - 1, (S, S)))
        else:
            subject = _prompt(rng, "float16", attrs={"qk_output": mode})
        subject = replace(subject, presents=presents)
        return _probe(feature_id, subject, replace(subject, attrs={"qk_output": 3 - mode}))
    return build


def _build_output_only() -> Probe:
    g = replace(_prompt(np.random.default_rng(2040), "float16"), presents=False)
    return _probe("gqa.outputs.output_only", g, _neutral_query(g))


def _feature(fid: str, dtype: str, changes: str, source: str, build: Callable[[], Probe],
             uses: Use | None = None) -> Feature:
    return Feature(id=fid, op_type=OP_TYPE, domain=DOMAIN, opset=OPSET, dtype=dtype,
                   changes=changes, source=source, build=build, uses=uses or Use())


#: A node with a KV cache: past_key/past_value fed (decode, chunks, ragged batches).
_PAST = ("past_key", "past_value")

#: The GQA features, in catalog order.
FEATURES: tuple[Feature, ...] = (
    _feature("gqa.prompt", "float16",
             "causal first prompt (B=2, S=8, N=4, Nkv=2, H=16); control bakes in a zero query",
             f"{_DOC}; {_KERNEL}", _build_base("gqa.prompt", "float16", 2001)),
    _feature("gqa.packed_qkv", "float16",
             "packed QKV in input 0, key/value omitted; control zeroes the packed Q part",
             f"{_DOC}: input 'query' (packed QKV); group_query_attention_helper.h CheckInputs",
             _build_packed_qkv,
             Use(absent=("key", "value"))),
    _feature("gqa.decode", "float16",
             "token generation S=1 with a 7-token past_key/past_value cache; control bakes in a zero cache",
             f"{_DOC}: inputs past_key/past_value (BNSH); {_KERNEL}, ConcatStateChunkGQA",
             _build_decode,
             Use(inputs=_PAST)),
    _feature("gqa.attention_bias", "float16",
             "attention_bias (B,N,S,T) with std 2; control drops it",
             f"{_DOC}: input 'attention_bias'; {_KERNEL} (bias after softcap, before masking)",
             _build_attention_bias("gqa.attention_bias", 2004, (B, N)),
             Use(inputs=("attention_bias",))),
    _feature("gqa.attention_bias.broadcast", "float16",
             "attention_bias (1,1,S,T) broadcast over batch and heads; control drops it",
             f"{_DOC}: attention_bias (batch_size or 1, num_heads or 1, S, T)",
             _build_attention_bias("gqa.attention_bias.broadcast", 2005, (1, 1)),
             Use(inputs=("attention_bias",), facts={"attention_bias_batch": 1, "attention_bias_heads": 1})),
    _feature("gqa.attention_bias.broadcast_batch", "float16",
             "attention_bias (B,1,S,T), B=2, broadcast over heads; control drops it",
             f"{_DOC}: attention_bias (batch_size or 1, num_heads or 1, S, T)",
             _build_attention_bias("gqa.attention_bias.broadcast_batch", 2006, (B, 1)),
             Use(inputs=("attention_bias",), facts={"attention_bias_heads": 1})),
    _feature("gqa.head_sink", "float16",
             "head_sink (N,) = [2,-2,2,-2] as an extra softmax logit per head; control drops it",
             f"{_DOC}: input 'head_sink'; onnxruntime PR #25269 (exp(x_i)/(exp(s)+sum exp(x_j)))",
             _build_head_sink,
             Use(inputs=("head_sink",))),
    _feature("gqa.softcap", "float16",
             "softcap=2.0 on scores of std ~3; control resets softcap to 0",
             f"{_DOC}: attribute 'softcap'; {_KERNEL} (c*tanh(x/c) before bias and mask)",
             _build_softcap,
             Use(attributes={"softcap": NON_DEFAULT})),
    _feature("gqa.local_window", "float16",
             "local_window_size=2 (each query sees itself and one key back) with S=8; control resets it to -1",
             f"{_DOC}: attribute 'local_window_size'; {_KERNEL} (window of W keys)",
             _build_local_window,
             Use(attributes={"local_window_size": NON_DEFAULT})),
    _feature("gqa.smooth_softmax", "float16",
             "smooth_softmax=1 (extra logit 0 in the denominator) on scores of std ~0.5; control resets it",
             f"{_DOC}: attribute 'smooth_softmax'; onnxruntime PR #25269",
             _build_smooth_softmax,
             Use(attributes={"smooth_softmax": 1})),
    _feature("gqa.rotary", "float16",
             "do_rotary=1 with RoPE cos/sin caches (base 10000, halves layout); control drops both",
             f"{_DOC}: do_rotary, cos_cache, sin_cache; contrib_ops/cpu/bert/rotary_embedding.cc",
             _build_rotary,
             Use(inputs=("cos_cache", "sin_cache"), attributes={"do_rotary": 1})),
    _feature("gqa.qk_output", "float16",
             "qk_output=1: output_qk holds pre-softmax scores (0.0 at masked keys); control asks for mode 2",
             f"{_DOC}: attribute 'qk_output', output 'output_qk'; {_KERNEL} (WriteOutputQKHeadChunk)",
             _build_qk_output,
             Use(attributes={"qk_output": 1})),
    _feature("gqa.attention_bias.with_head_sink", "float16",
             "attention_bias (B,N,S,T) std 2 together with head_sink [2,-2,2,-2]; control drops the bias",
             f"{_DOC}: inputs 'attention_bias' and 'head_sink'; {_KERNEL} (bias, then the sink in the denominator)",
             _build_bias_with("gqa.attention_bias.with_head_sink", 2021, 1.0, {}, sinks=True),
             Use(inputs=("attention_bias", "head_sink"))),
    _feature("gqa.attention_bias.with_smooth_softmax", "float16",
             "attention_bias (B,N,S,T) std 2 with smooth_softmax=1 on scores of std ~0.5; control drops the bias",
             f"{_DOC}: input 'attention_bias', attribute 'smooth_softmax'; onnxruntime PR #25269",
             _build_bias_with("gqa.attention_bias.with_smooth_softmax", 2022, 0.5, {"smooth_softmax": 1},
                              sinks=False),
             Use(inputs=("attention_bias",), attributes={"smooth_softmax": 1})),
    _feature("gqa.softcap.with_bias", "float16",
             "softcap=2.0 on scores of std ~3 plus attention_bias std 2: softcap first, then the bias; "
             "control resets softcap",
             f"{_DOC}: attribute 'softcap', input 'attention_bias'; {_KERNEL} (c*tanh(x/c), then + bias)",
             _build_softcap_with_bias,
             Use(inputs=("attention_bias",), attributes={"softcap": NON_DEFAULT})),
    _feature("gqa.rotary_interleaved", "float16",
             "do_rotary=1 with rotary_interleaved=1 (pairs 2i, 2i+1); control resets rotary_interleaved (halves)",
             f"{_DOC}: attribute 'rotary_interleaved'; onnxruntime/core/mlas/lib/rotary_embedding.cpp",
             _build_rotary_interleaved,
             Use(inputs=("cos_cache", "sin_cache"), attributes={"do_rotary": 1, "rotary_interleaved": 1})),
    _feature("gqa.position_ids", "float16",
             "decode with rotary and position_ids [[2],[5]] instead of the generated 7; control drops position_ids",
             f"{_DOC}: input 'position_ids' (B,S) int64; {_KERNEL}; rotary positions per row",
             _build_position_ids,
             Use(inputs=("cos_cache", "sin_cache", "position_ids"), attributes={"do_rotary": 1})),
    _feature("gqa.chunked_prefill", "float16",
             "a later prompt chunk: B=1, 4 new tokens after 4 cached (S > 1 with a past); "
             "control bakes in a zero cache",
             f"{_DOC}: past_key/past_value with S > 1 (group_query_attention_helper.h: batch 1 only); {_KERNEL}",
             _build_chunked("gqa.chunked_prefill", 2018, 4, 4),
             Use(inputs=_PAST)),
    _feature("gqa.batch_ragged", "float16",
             "decode, B=2 with seqlens_k [7, 4]: row 1's padded cache slots (offset +4) must not leak; "
             "control bakes in seqlens_k [7, 7]",
             f"{_DOC}: input 'seqlens_k' per batch row; {_KERNEL}, ConcatStateChunkGQA",
             _build_batch_ragged,
             Use(inputs=_PAST)),
    _feature("gqa.local_window.with_past", "float16",
             "decode after 7 cached tokens with local_window_size=3 (the 3 most recent keys); control resets it",
             f"{_DOC}: attribute 'local_window_size' with past_key/past_value; {_KERNEL}",
             _build_local_window_with_past,
             Use(inputs=_PAST, attributes={"local_window_size": NON_DEFAULT})),
    _feature("gqa.present_outputs", "float16",
             "present_key/present_value after a B=1 chunk (3 new after 5 cached) exactly equal the "
             "concatenated cache; control bakes in a zero cache",
             f"{_DOC}: outputs present_key/present_value (BNSH, past then new); ConcatStateChunkGQA",
             _build_chunked("gqa.present_outputs", 2023, 5, 3),
             Use(inputs=_PAST)),
    *(_feature(f"gqa.prompt.head_size.{h}", "float16",
               f"gqa.prompt with head size {h} (kernel selection depends on it); control bakes in a zero query",
               f"{_DOC}: head_size = hidden / num_heads; {_KERNEL}",
               _build_base(f"gqa.prompt.head_size.{h}", "float16", 2030 + h, head=h),
               Use(facts={"head_size": h}))
      for h in (64, 128, 256, 512)),
    _feature("gqa.dtype.float32", "float32",
             "gqa.prompt in float32; control bakes in a zero query",
             f"{_DOC}: type constraint T includes tensor(float)",
             _build_base("gqa.dtype.float32", "float32", 2013)),
    _feature("gqa.dtype.bfloat16", "bfloat16",
             "gqa.prompt in bfloat16 (float32 I/O, Cast around the node); control bakes in a zero query",
             f"{_DOC}: type constraint T includes tensor(bfloat16)",
             _build_base("gqa.dtype.bfloat16", "bfloat16", 2014)),
    _feature("gqa.qk_output.2", "float16",
             "qk_output=2: output_qk holds the softmax probabilities; control asks for mode 1",
             f"{_DOC}: attribute 'qk_output' (2 = after softmax), output 'output_qk'; {_KERNEL}",
             _build_qk_mode("gqa.qk_output.2", 2041, 2), Use(attributes={"qk_output": 2})),
    *(_feature(f"gqa.qk_output.{m}.with_past", "float16",
               f"qk_output={m} while decoding one token after a 7-token cache (output_qk over T=8 keys); "
               f"control asks for mode {3 - m}",
               f"{_DOC}: output 'output_qk' (B,N,S,T) with past_key/past_value; {_KERNEL}",
               _build_qk_mode(f"gqa.qk_output.{m}.with_past", 2041 + m, m, decode=True),
               Use(inputs=("past_key", "past_value"), attributes={"qk_output": m}))
      for m in (1, 2)),
    *(_feature(f"gqa.qk_output.{m}.without_presents", "float16",
               f"qk_output={m} with present_key/present_value not requested; control asks for mode {3 - m}",
               f"{_DOC}: outputs present_key/present_value optional (onnxruntime PR #28242); {_KERNEL}",
               _build_qk_mode(f"gqa.qk_output.{m}.without_presents", 2044 + m, m, presents=False),
               Use(attributes={"qk_output": m}, facts={"outputs": ("output", "output_qk")}))
      for m in (1, 2)),
    _feature("gqa.outputs.output_only", "float16",
             "causal prompt with present_key/present_value not requested; control bakes in a zero query",
             f"{_DOC}: outputs present_key/present_value optional (onnxruntime PR #28242); {_KERNEL}",
             _build_output_only, Use(facts={"outputs": ("output",)})),
    # The LLM-serving inputs and attributes (quantized and windowed caches, QK-norm, ...).
    *_LLM,
)
