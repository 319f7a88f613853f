"""Probes for the LLM-serving inputs and attributes of ``com.microsoft.GroupQueryAttention`` 1:
the quantized KV cache (``k_scale``, ``v_scale``, ``k_quant_type``, ``v_quant_type``,
``kv_cache_bit_width``: int8, 4-bit and float8 caches), the windowed cache
(``sliding_window_cache``), Qwen3-style QK-norm (``q_norm_weight``, ``k_norm_weight``,
``qk_norm_epsilon``), ``causal``, ``scale`` and the head counts (``num_heads``,
``kv_num_heads``).

Shapes and data follow :mod:`epaudit.catalog.gqa` (float16, B = 2, N = 4, Nkv = 2, H = 16);
the float64 reference is :func:`epaudit.reference.gqa.gqa_reference` with the rules of
:mod:`epaudit.reference.kvcache` (the schema text of onnxruntime-gpu 1.31.1, each rule
measured on its CPU EP where the CPU EP runs it).

Quantized caches: past codes are random over the code range, scales are powers of two (exact
in float16), and every new key/value is ``scale * (c + f)`` with an integer ``c`` in range and
``0.1 <= |f| <= 0.35``, so ``round(x / scale)`` never meets a tie and the present codes are
held to exact equality. Controls bake in a zero cache (codes that decode to 0), or, for the
per-channel scales, one scale for every channel.

Windowed caches fill every row of the presents after the step (``L(T) = C``), because rows
``[L, C)`` are unspecified; the past rows the schema leaves unspecified hold values offset by
+4, so a kernel that reads them moves the output by units.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Feature, Probe, Use
from ..reference import minifloat
from ..reference.kvcache import pack_int4, resident_rows
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
    _decode_feeds,
    _Graph,
    _neutral_query,
    _probe,
    _prompt,
    _rope_cache,
    _rounded,
    _without,
)

_KV = "onnxruntime/contrib_ops/cpu/bert/group_query_attention.cc (quantized cache, sliding window)"
_SCHEMA = "get_all_operator_schema() GroupQueryAttention (onnxruntime-gpu 1.31.1)"
_QUANT = f"{_DOC}, 'Quantization' and 'Quantization Modes'; {_SCHEMA} inputs 12-13; {_KV}"
_WINDOW = f"{_DOC}, 'Windowed KV Cache', attribute sliding_window_cache; {_KV}"
_QKNORM = (f"{_SCHEMA} inputs 14-15 ('per-head RMS normalization to Q (and K) before any rotary "
           "embedding'; 'other EPs must reject the node'); onnxruntime/contrib_ops/cuda/bert/group_query_attention.cc")

#: Past length of the quantized decode probes (7 cached tokens, the 8th is new).
_PAST = S - 1


def _prompt_heads(rng: np.random.Generator, heads: int, kv_heads: int, head: int,
                  q_scale: float = 1.0) -> dict[str, np.ndarray]:
    """First-prompt feeds of B rows of S tokens for ``heads``/``kv_heads`` heads of size ``head``."""
    return {
        "query": _rounded(q_scale * rng.standard_normal((B, S, heads * head)), "float16"),
        "key": _rounded(q_scale * rng.standard_normal((B, S, kv_heads * head)), "float16"),
        "value": _rounded(rng.standard_normal((B, S, kv_heads * head)), "float16"),
        "seqlens_k": np.full(B, S - 1, dtype=np.int32),
        "total_sequence_length": np.array(S, dtype=np.int32),
    }


# --- head counts, scale, causal --------------------------------------------------------

def _build_num_heads() -> Probe:
    # The same arrays read as N = 4, Nkv = 2 heads of 16 and as N = 2, Nkv = 1 heads of 32:
    # an EP that ignores the head counts cannot land on both.
    g = _Graph("float16", {}, _prompt_heads(np.random.default_rng(2101), N, NKV, H, q_scale=1.5))
    return _probe("gqa.num_heads", g, replace(g, heads=(N // 2, NKV // 2)))


def _build_heads(fid: str, seed: int, heads: int, kv_heads: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _Graph("float16", {}, _prompt_heads(np.random.default_rng(seed), heads, kv_heads, H, q_scale=1.5),
                   heads=(heads, kv_heads))
        return _probe(fid, g, _neutral_query(g))
    return build


def _build_scale() -> Probe:
    g = _prompt(np.random.default_rng(2104), "float16", attrs={"scale": 1.0})  # 4x the default 1/sqrt(16)
    return _probe("gqa.scale", g, _without(g, attrs=("scale",)))


def _build_causal(fid: str, seed: int, past: int) -> Callable[[], Probe]:
    """causal = 0: every query sees every key of its row; the control resets it (causal)."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        if not past:
            g = _prompt(rng, "float16", q_scale=2.0, attrs={"causal": 0})
        else:
            seq = 4
            feeds = {
                "query": _rounded(2.0 * rng.standard_normal((1, seq, N * H)), "float16"),
                "key": _rounded(rng.standard_normal((1, seq, NKV * H)), "float16"),
                "value": _rounded(rng.standard_normal((1, seq, NKV * H)), "float16"),
                "past_key": _rounded(rng.standard_normal((1, NKV, past, H)), "float16"),
                "past_value": _rounded(rng.standard_normal((1, NKV, past, H)), "float16"),
                "seqlens_k": np.array([past + seq - 1], dtype=np.int32),
                "total_sequence_length": np.array(past + seq, dtype=np.int32),
            }
            g = _Graph("float16", {"causal": 0}, feeds)
        return _probe(fid, g, _without(g, attrs=("causal",)))
    return build


# --- QK-norm --------------------------------------------------------------------------

def _norm_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"q_norm_weight": _rounded(1.0 + 0.5 * rng.standard_normal(H), "float16"),
            "k_norm_weight": _rounded(1.0 + 0.5 * rng.standard_normal(H), "float16")}


def _build_qk_norm(fid: str, seed: int, *, rotary: bool = False, eps: float | None = None) -> Callable[[], Probe]:
    """QK-norm on a prompt. Without ``eps``: Q, K of std 3 (scores of std ~9 unnormalized,
    ~1 normalized); the control drops both weights. With ``eps``: Q, K of std 0.01
    (mean square 1e-4), so eps = 1e-2 shrinks the normalized Q/K tenfold against the
    default 1e-6; the control resets qk_norm_epsilon."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        gain = 0.01 if eps is not None else 3.0
        feeds = _prompt_heads(rng, N, NKV, H, q_scale=gain)
        feeds.update(_norm_weights(rng))
        attrs: dict[str, object] = {}
        if eps is not None:
            attrs["qk_norm_epsilon"] = eps
        if rotary:
            attrs["do_rotary"] = 1
            cos, sin = _rope_cache(S, H)
            feeds.update(cos_cache=_rounded(cos, "float16"), sin_cache=_rounded(sin, "float16"))
        g = _Graph("float16", attrs, feeds)
        control = _without(g, attrs=("qk_norm_epsilon",)) if eps is not None \
            else _without(g, "q_norm_weight", "k_norm_weight")
        return _probe(fid, g, control)
    return build


# --- quantized caches -----------------------------------------------------------------

def _scales(rng: np.random.Generator, mode: str, base: float) -> np.ndarray:
    """PER_TENSOR: [base]; PER_CHANNEL: (1, Nkv, 1, H) of base * 2^{-1, 0, 1}, powers of two."""
    if mode == "PER_TENSOR":
        return np.array([base], dtype=np.float64)
    return base * 2.0 ** rng.integers(-1, 2, size=(1, NKV, 1, H)).astype(np.float64)


def _new_rows(rng: np.random.Generator, scale: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """(B, Nkv, 1, H) values ``scale * (c + f)``, c in [lo, hi], 0.1 <= |f| <= 0.35, as
    float16; then (B, 1, Nkv*H), the layout of ``key``/``value``."""
    c = rng.integers(lo, hi + 1, size=(B, NKV, 1, H))
    f = rng.uniform(0.1, 0.35, size=c.shape) * rng.choice([-1.0, 1.0], size=c.shape)
    x = _rounded(np.broadcast_to(scale.reshape(-1) if scale.size == 1 else scale, c.shape) * (c + f), "float16")
    return x.transpose(0, 2, 1, 3).reshape(B, 1, NKV * H)


def _fp8_codes(rng: np.random.Generator, shape, limit: float) -> np.ndarray:
    """Random float8e4m3fn codes of values in [-limit, limit] (never NaN)."""
    values = minifloat.decode(np.arange(256), "float8e4m3fn")
    ok = np.flatnonzero(np.isfinite(values) & (np.abs(values) <= limit))
    return rng.choice(ok, size=shape).astype(np.int64)


def _quant_graph(seed: int, cache: str, mode: str) -> _Graph:
    """Decode B = 2 rows of one token after a 7-token quantized cache (total 8)."""
    rng = np.random.default_rng(seed)
    bits = 4 if cache == "uint8" else 8
    base = {"int8": 1 / 64, "uint8": 1 / 4, "float8e4m3fn": 1 / 2}[cache]
    ks, vs = _scales(rng, mode, base), _scales(rng, mode, base)
    shape = (B, NKV, _PAST, H)
    if cache == "int8":
        past_k, past_v = (rng.integers(-100, 101, size=shape) for _ in range(2))
        new_k, new_v = _new_rows(rng, ks, -100, 100), _new_rows(rng, vs, -100, 100)
    elif cache == "uint8":
        past_k, past_v = (pack_int4(rng.integers(-8, 8, size=shape)) for _ in range(2))
        new_k, new_v = _new_rows(rng, ks, -7, 6), _new_rows(rng, vs, -7, 6)
    else:
        past_k, past_v = (_fp8_codes(rng, shape, 4.0) for _ in range(2))
        new_k, new_v = (_fp8_new_rows(rng, s) for s in (ks, vs))
    feeds = {
        "query": _rounded(2.0 * rng.standard_normal((B, 1, N * H)), "float16"),
        "key": new_k, "value": new_v,
        "past_key": np.asarray(past_k), "past_value": np.asarray(past_v),
        "seqlens_k": np.full(B, _PAST, dtype=np.int32),
        "total_sequence_length": np.array(_PAST + 1, dtype=np.int32),
        "k_scale": ks, "v_scale": vs,
    }
    attrs = {"k_quant_type": mode, "v_quant_type": mode, "kv_cache_bit_width": bits}
    return _Graph("float16", attrs, feeds, cache=cache, presents=cache != "float8e4m3fn")


def _fp8_new_rows(rng: np.random.Generator, scale: np.ndarray) -> np.ndarray:
    """New rows ``scale * v * (1 + d)`` for float8 values v of magnitude in [0.25, 4] and
    |d| <= 2 %, well inside half the 12.5 % spacing of a 3-bit mantissa: the nearest code is v."""
    values = minifloat.decode(np.arange(256), "float8e4m3fn")
    ok = values[np.isfinite(values) & (np.abs(values) >= 0.25) & (np.abs(values) <= 4.0)]
    v = rng.choice(ok, size=(B, NKV, 1, H)) * (1 + rng.uniform(-0.02, 0.02, size=(B, NKV, 1, H)))
    x = _rounded(np.broadcast_to(scale.reshape(-1) if scale.size == 1 else scale, v.shape) * v, "float16")
    return x.transpose(0, 2, 1, 3).reshape(B, 1, NKV * H)


def _zero_codes(g: _Graph) -> _Graph:
    """The same graph with a cache of codes that decode to 0 baked in (4-bit: nibble 8)."""
    zero = {"int8": 0, "uint8": 0x88, "float8e4m3fn": 0}[g.cache]
    past = {n: np.full_like(g.feeds[n], zero) for n in ("past_key", "past_value")}
    return replace(g, feeds={k: v for k, v in g.feeds.items() if k not in past}, constants={**g.constants, **past})


def _build_quant(fid: str, seed: int, cache: str, mode: str) -> Callable[[], Probe]:
    """The quantized cache against a zero cache (PER_TENSOR) or against one scale for every
    channel (PER_CHANNEL: the control bakes in k_scale/v_scale filled with their first entry)."""
    def build() -> Probe:
        g = _quant_graph(seed, cache, mode)
        if mode == "PER_CHANNEL":
            flat = {n: np.full_like(g.feeds[n], g.feeds[n].reshape(-1)[0]) for n in ("k_scale", "v_scale")}
            control = replace(g, feeds={k: v for k, v in g.feeds.items() if k not in flat}, constants=flat)
        else:
            control = _zero_codes(g)
        return _probe(fid, g, control)
    return build


# --- windowed cache -------------------------------------------------------------------

def _window_graph(rng: np.random.Generator, totals: tuple[int, ...], seq: int, capacity: int = 4,
                  window: int = 3) -> _Graph:
    """A step of ``seq`` tokens on a windowed cache of ``capacity`` rows; batch entry b
    reaches absolute length ``totals[b]``; its past holds ``L(totals[b] - seq)`` rows and the
    rest (unspecified) is offset by +4."""
    batch = len(totals)
    feeds = {
        "query": _rounded(2.0 * rng.standard_normal((batch, seq, N * H)), "float16"),
        "key": _rounded(rng.standard_normal((batch, seq, NKV * H)), "float16"),
        "value": _rounded(rng.standard_normal((batch, seq, NKV * H)), "float16"),
        "seqlens_k": np.array(totals, dtype=np.int32) - 1,
        "total_sequence_length": np.array(max(totals), dtype=np.int32),
    }
    for name in ("past_key", "past_value"):
        past = rng.standard_normal((batch, NKV, capacity, H))
        for b, total in enumerate(totals):
            held = resident_rows(total - seq, capacity, window)
            past[b, :, held:] += 4.0
        feeds[name] = _rounded(past, "float16")
    for total in totals:  # probes fill every present row: rows [L, C) are unspecified
        assert resident_rows(total, capacity, window) == capacity
    return _Graph("float16", {"sliding_window_cache": 1, "local_window_size": window}, feeds)


def _zero_cache(g: _Graph) -> _Graph:
    past = {n: np.zeros_like(g.feeds[n]) for n in ("past_key", "past_value")}
    return replace(g, feeds={k: v for k, v in g.feeds.items() if k not in past}, constants={**g.constants, **past})


def _build_window(fid: str, seed: int, totals: tuple[int, ...], seq: int, bias: bool = False) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        g = _window_graph(rng, totals, seq)
        if bias:
            ab = _rounded(2.0 * rng.standard_normal((len(totals), N, seq, max(totals))), "float16")
            g = replace(g, feeds={**g.feeds, "attention_bias": ab})
            return _probe(fid, g, _without(g, "attention_bias"))
        return _probe(fid, g, _zero_cache(g))
    return build


def _build_output_only_with_past() -> Probe:
    # Decode after a 7-token cache with present_key/present_value not requested: requesting
    # an optional output must not change another, so the output is the decode's.
    rng = np.random.default_rng(2118)
    g = _Graph("float16", {}, _decode_feeds(rng, _PAST, (S, S)), presents=False)
    return _probe("gqa.outputs.output_only.with_past", g, _zero_cache(g))


def _feature(fid: str, changes: str, source: str, build: Callable[[], Probe], uses: Use) -> Feature:
    return Feature(id=fid, op_type=OP_TYPE, domain=DOMAIN, opset=OPSET, dtype="float16",
                   changes=changes, source=source, build=build, uses=uses)


_QUANT_INPUTS = ("past_key", "past_value", "k_scale", "v_scale")


def _quant_use(mode: str, bits: int) -> Use:
    return Use(inputs=_QUANT_INPUTS, attributes={"k_quant_type": mode, "v_quant_type": mode,
                                                 "kv_cache_bit_width": bits})


_WINDOW_USE: Mapping[str, object] = {"sliding_window_cache": 1, "local_window_size": NON_DEFAULT}

#: The GQA LLM-serving features, in catalog order (after catalog.gqa's own).
FEATURES: tuple[Feature, ...] = (
    _feature("gqa.num_heads",
             "the same Q/K/V read as num_heads=4, kv_num_heads=2 (H=16); control reads them as 2 and 1 (H=32)",
             f"{_DOC}: attributes num_heads, kv_num_heads (head_size = hidden / num_heads); {_KERNEL}",
             _build_num_heads,
             Use(inputs=("key", "value"), attributes={"num_heads": NON_DEFAULT, "kv_num_heads": NON_DEFAULT})),
    _feature("gqa.kv_num_heads.1",
             "multi-query attention: kv_num_heads=1 shared by 4 query heads; control bakes in a zero query",
             f"{_DOC}: attribute kv_num_heads (num_heads a multiple of it); {_KERNEL}",
             _build_heads("gqa.kv_num_heads.1", 2102, N, 1), Use(inputs=("key", "value"), attributes={"kv_num_heads": 1})),
    _feature("gqa.num_heads.ungrouped",
             "num_heads = kv_num_heads = 4 (no grouping); control bakes in a zero query",
             f"{_DOC}: attributes num_heads, kv_num_heads; {_KERNEL}",
             _build_heads("gqa.num_heads.ungrouped", 2103, N, N), Use(inputs=("key", "value"), facts={"grouped": False})),
    _feature("gqa.scale", "scale=1.0 (default 1/sqrt(16) = 0.25); control leaves it unset",
             f"{_DOC}: attribute scale; {_KERNEL} (alpha = scale or 1/sqrt(H))",
             _build_scale, Use(attributes={"scale": NON_DEFAULT})),
    _feature("gqa.causal.0", "causal=0 on a prompt: every query sees all 8 keys; control resets it (causal)",
             f"{_SCHEMA} attribute causal ('Set to 0 for bidirectional attention'); {_KERNEL}",
             _build_causal("gqa.causal.0", 2105, 0), Use(attributes={"causal": 0})),
    _feature("gqa.causal.0.with_past",
             "causal=0 on a chunk of 4 tokens after 4 cached (B=1): early queries see later new keys; "
             "control resets it",
             f"{_SCHEMA} attribute causal with past_key/past_value; {_KERNEL}",
             _build_causal("gqa.causal.0.with_past", 2106, 4),
             Use(inputs=("past_key", "past_value"), attributes={"causal": 0})),
    _feature("gqa.qk_norm",
             "q_norm_weight/k_norm_weight (H,) ~ 1 + 0.5 N(0,1) on Q/K of std 3: per-head RMS norm; "
             "control drops both (the schema: EPs other than CUDA and WebGPU must reject the node)",
             _QKNORM, _build_qk_norm("gqa.qk_norm", 2107), Use(inputs=("q_norm_weight", "k_norm_weight"))),
    _feature("gqa.qk_norm_epsilon",
             "QK-norm with qk_norm_epsilon=1e-2 on Q/K of mean square 1e-4 (normalized Q/K ten times "
             "smaller than at the default 1e-6); control resets qk_norm_epsilon",
             f"{_QKNORM}; attribute qk_norm_epsilon", _build_qk_norm("gqa.qk_norm_epsilon", 2108, eps=1e-2),
             Use(inputs=("q_norm_weight", "k_norm_weight"), attributes={"qk_norm_epsilon": NON_DEFAULT})),
    _feature("gqa.qk_norm.with_rotary",
             "QK-norm then rotary (do_rotary=1): the norm comes first, its per-dim weights do not commute "
             "with the rotation; control drops both weights",
             f"{_QKNORM}; do_rotary, cos_cache, sin_cache", _build_qk_norm("gqa.qk_norm.with_rotary", 2109, rotary=True),
             Use(inputs=("q_norm_weight", "k_norm_weight", "cos_cache", "sin_cache"), attributes={"do_rotary": 1})),
    _feature("gqa.kv_cache.int8",
             "int8 KV cache, PER_TENSOR k_scale/v_scale 1/64, kv_cache_bit_width=8: decode after 7 cached tokens, "
             "new rows quantized (presents compared exactly); control bakes in a zero cache",
             _QUANT, _build_quant("gqa.kv_cache.int8", 2110, "int8", "PER_TENSOR"), _quant_use("PER_TENSOR", 8)),
    _feature("gqa.kv_cache.int8.per_channel",
             "int8 KV cache with PER_CHANNEL scales (1, Nkv, 1, H) of 1/128..1/32; control bakes in one scale "
             "(the first) for every channel",
             _QUANT, _build_quant("gqa.kv_cache.int8.per_channel", 2111, "int8", "PER_CHANNEL"),
             _quant_use("PER_CHANNEL", 8)),
    _feature("gqa.kv_cache.int4",
             "4-bit KV cache (uint8, two codes per byte, nibble = code + 8), PER_TENSOR scales 1/4, "
             "kv_cache_bit_width=4; control bakes in a zero cache (nibbles 8)",
             _QUANT, _build_quant("gqa.kv_cache.int4", 2112, "uint8", "PER_TENSOR"), _quant_use("PER_TENSOR", 4)),
    _feature("gqa.kv_cache.int4.per_channel",
             "4-bit KV cache with PER_CHANNEL scales (1, Nkv, 1, H) of 1/8..1/2; control bakes in one scale for "
             "every channel",
             _QUANT, _build_quant("gqa.kv_cache.int4.per_channel", 2113, "uint8", "PER_CHANNEL"),
             _quant_use("PER_CHANNEL", 4)),
    _feature("gqa.kv_cache.float8e4m3fn",
             "float8e4m3fn KV cache (codes baked in as initializers), PER_TENSOR scales 1/2, kv_cache_bit_width=8, "
             "output only (numpy has no float8 present); control bakes in a zero cache",
             _QUANT, _build_quant("gqa.kv_cache.float8e4m3fn", 2114, "float8e4m3fn", "PER_TENSOR"),
             Use(inputs=_QUANT_INPUTS, attributes={"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_TENSOR",
                                                   "kv_cache_bit_width": 8},
                 facts={"outputs": ("output",)})),
    _feature("gqa.sliding_window_cache",
             "windowed cache (sliding_window_cache=1, capacity 4, window 3), ragged decode to lengths 6 and 4: "
             "row 0's past holds positions 2-4 in rows 0-2; unspecified rows offset +4; control bakes in a zero cache",
             _WINDOW, _build_window("gqa.sliding_window_cache", 2115, (6, 4), 1),
             Use(inputs=("past_key", "past_value"), attributes=_WINDOW_USE)),
    _feature("gqa.sliding_window_cache.multi_token",
             "windowed cache, one step of 2 tokens (B=1) from length 6 to 8: the cache compacts; "
             "control bakes in a zero cache",
             _WINDOW, _build_window("gqa.sliding_window_cache.multi_token", 2116, (8,), 2),
             Use(inputs=("past_key", "past_value"), attributes=_WINDOW_USE)),
    _feature("gqa.sliding_window_cache.with_attention_bias",
             "windowed cache with attention_bias (B,N,1,6) std 2 indexed by absolute key position; "
             "control drops the bias",
             f"{_WINDOW}; input attention_bias ('CPU supports this windowed absolute-column indexing; CUDA "
             "rejects attention_bias when sliding_window_cache is 1')",
             _build_window("gqa.sliding_window_cache.with_attention_bias", 2117, (6, 4), 1, bias=True),
             Use(inputs=("past_key", "past_value", "attention_bias"), attributes=_WINDOW_USE)),
    _feature("gqa.outputs.output_only.with_past",
             "decode after a 7-token past_key/past_value cache with present_key/present_value not requested "
             "(the output must be the decode's); control bakes in a zero cache",
             f"{_DOC}: outputs present_key/present_value optional (onnxruntime PR #28242); {_KERNEL}",
             _build_output_only_with_past,
             Use(inputs=("past_key", "past_value"), facts={"outputs": ("output",)})),
)
