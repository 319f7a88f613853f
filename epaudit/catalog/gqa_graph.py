"""One ``com.microsoft.GroupQueryAttention`` node as a probe graph: inputs in schema order,
the seeded prompt and decode feeds, rotary caches, and the subject/control
:class:`~epaudit.contract.probes.Case` pairs with their float64 references
(:func:`epaudit.reference.gqa.gqa_reference`).

The features that use it are in :mod:`epaudit.catalog.gqa`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np

from ..contract.probes import Case, Probe, tolerance_for
from ..reference.gqa import gqa_reference
from .models import NUMPY_TYPES, one_node_model, round_to_bfloat16, with_constants

OP_TYPE = "GroupQueryAttention"

DOMAIN = "com.microsoft"

OPSET = 1

#: Probe shapes: batch, query length, query heads, key/value heads, head size.
B, S, N, NKV, H = 2, 8, 4, 2, 16

_DOC = "ORT docs/ContribOperators.md#com.microsoft.GroupQueryAttention"

_KERNEL = "onnxruntime/contrib_ops/cpu/bert/gqa_attention_base.h ComputeAttentionProbs"

#: GQA inputs in schema order (ContribOperators.md, inputs 0-11); a probe uses a prefix
#: of this list, with "" for the optional inputs it leaves out.
_INPUT_ORDER = ("query", "key", "value", "past_key", "past_value", "seqlens_k",
                "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
                "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight", "k_norm_weight")

_INT_INPUTS = {"seqlens_k": "int32", "total_sequence_length": "int32", "position_ids": "int64"}

#: Inputs of a fixed type whatever the node's T: the KV scales are T_KV_SCALE = float.
_FIXED_INPUTS = {"k_scale": "float32", "v_scale": "float32"}

#: Quantized cache element types (T_CACHE) -> ONNX element type (onnx.proto TensorProto).
CACHE_ELEM = {"int8": 3, "uint8": 2, "float8e4m3fn": 17}
_CACHE_NUMPY = {"int8": np.int8, "uint8": np.uint8}
_CACHE_NAMES = ("past_key", "past_value", "present_key", "present_value")

_OUTPUTS = ("output", "present_key", "present_value")


def _rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` precision, as float64 (the values the reference sees)."""
    if dtype == "bfloat16":
        return round_to_bfloat16(x).astype(np.float64)
    return np.asarray(x).astype(NUMPY_TYPES[dtype]).astype(np.float64)


@dataclass(frozen=True)
class _Graph:
    """One GQA graph: attributes, fed inputs, and inputs baked in as constants.

    Float values are float64 already rounded to ``dtype``; integer inputs keep their
    dtype. ``constants`` are the neutral values a control bakes into the graph.
    ``heads`` is (num_heads, kv_num_heads). ``cache`` names a quantized cache element type
    (:data:`CACHE_ELEM`): past_key/past_value then hold codes (int8, uint8 packed 4-bit, or
    float8e4m3fn codes as uint8 numbers, baked in as raw bytes since numpy has no float8) and
    the presents are of that type.
    """

    dtype: str
    attrs: Mapping[str, object]
    feeds: Mapping[str, np.ndarray]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    presents: bool = True
    heads: tuple[int, int] = (N, NKV)
    cache: str | None = None

    @property
    def outputs(self) -> tuple[str, ...]:
        """Graph outputs: output, present_key, present_value (unless ``presents`` is off: both
        optional outputs left out), plus output_qk when asked for."""
        base = _OUTPUTS if self.presents else _OUTPUTS[:1]
        return base + (("output_qk",) if self.attrs.get("qk_output", 0) else ())

    @property
    def node_outputs(self) -> tuple[str, ...]:
        """The node's outputs in schema order, ``""`` for the ones not requested."""
        names = _OUTPUTS + (("output_qk",) if self.attrs.get("qk_output", 0) else ())
        return tuple(n if n in self.outputs else "" for n in names)


def _retyped(model: bytes, types: Mapping[str, int], raw: Mapping[str, np.ndarray]) -> bytes:
    """The model with the graph inputs/outputs in ``types`` given those ONNX element types,
    and the inputs in ``raw`` (float8 codes) turned into initializers of raw bytes."""
    if not types:
        return model
    import onnx
    from onnx import helper

    proto = onnx.load_from_string(model)
    for vi in list(proto.graph.input) + list(proto.graph.output):
        if vi.name in types:
            vi.type.tensor_type.elem_type = types[vi.name]
    for name, codes in raw.items():
        codes = np.asarray(codes, dtype=np.uint8)
        proto.graph.initializer.append(helper.make_tensor(name, types[name], list(codes.shape),
                                                          codes.tobytes(), raw=True))
    kept = [vi for vi in proto.graph.input if vi.name not in raw]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    return proto.SerializeToString()


def _case(g: _Graph) -> Case:
    """Build the model, the runtime feeds and the float64 reference of one graph."""
    values = {**g.feeds, **g.constants}
    last = max(_INPUT_ORDER.index(name) for name in values)
    inputs, node_inputs = [], []
    for name in _INPUT_ORDER[:last + 1]:
        if name not in values:
            node_inputs.append("")
            continue
        arr = values[name]
        inputs.append((name, _INT_INPUTS.get(name, _FIXED_INPUTS.get(name, g.dtype)),
                       None if arr.ndim == 0 else arr.shape))
        node_inputs.append(name)
    num_heads, kv_num_heads = g.heads
    attrs = {"num_heads": num_heads, "kv_num_heads": kv_num_heads, **g.attrs}
    model = one_node_model(OP_TYPE, DOMAIN, OPSET, inputs, [(o, g.dtype) for o in g.node_outputs],
                           attrs, node_inputs)
    types = {n: CACHE_ELEM[g.cache] for n in _CACHE_NAMES} if g.cache else {}
    fp8 = {n: v for n, v in values.items() if n in _CACHE_NAMES} if g.cache == "float8e4m3fn" else {}
    model = _retyped(model, types, fp8)
    model = with_constants(model, {n: v for n, v in g.constants.items() if n not in fp8})

    graph_type = NUMPY_TYPES[g.dtype]
    feeds = {name: (arr if name in _INT_INPUTS else arr.astype(_CACHE_NUMPY[g.cache])
                    if g.cache and name in _CACHE_NAMES else arr.astype(NUMPY_TYPES[_FIXED_INPUTS[name]])
                    if name in _FIXED_INPUTS else arr.astype(graph_type))
             for name, arr in g.feeds.items() if name not in fp8}

    kwargs = {k: v for k, v in values.items() if k not in ("query", "key", "value")}
    kwargs["total_sequence_length"] = int(kwargs["total_sequence_length"])
    reference = gqa_reference(values["query"], values.get("key"), values.get("value"),
                              num_heads=num_heads, kv_num_heads=kv_num_heads, cache_type=g.cache,
                              **kwargs, **g.attrs)
    # The present outputs are the cache carried over plus the new K/V: copies, held to
    # exact equality (codes, for a quantized cache); present_key is computed when do_rotary
    # is set or QK-norm normalizes the new keys.
    computed_key = g.attrs.get("do_rotary") or "k_norm_weight" in values
    exact = frozenset({"present_value"} | (set() if computed_key else {"present_key"}))
    return Case(model=model, feeds=feeds, outputs=g.outputs,
                reference={o: reference[o] for o in g.outputs}, exact=exact)


def _probe(feature_id: str, subject: _Graph, control: _Graph, head: int = H) -> Probe:
    return Probe(feature_id=feature_id, subject=_case(subject), control=_case(control),
                 tolerance=tolerance_for(subject.dtype, head), dtype=subject.dtype)


def _prompt(rng: np.random.Generator, dtype: str, *, q_scale: float = 1.0,
            attrs: Mapping[str, object] | None = None, head: int = H) -> _Graph:
    """A first-prompt graph: B rows of S new tokens, no cache, seqlens_k = S − 1.

    Q, K, V ~ N(0, 1) (Q times ``q_scale``), so the scores Q·Kᵀ/√H are about N(0, q_scale²)
    whatever the head size ``head``.
    """
    feeds = {
        "query": _rounded(q_scale * rng.standard_normal((B, S, N * head)), dtype),
        "key": _rounded(rng.standard_normal((B, S, NKV * head)), dtype),
        "value": _rounded(rng.standard_normal((B, S, NKV * head)), dtype),
        "seqlens_k": np.full(B, S - 1, dtype=np.int32),
        "total_sequence_length": np.array(S, dtype=np.int32),
    }
    return _Graph(dtype, dict(attrs or {}), feeds)


def _neutral_query(g: _Graph) -> _Graph:
    """The same graph with a zero query baked in: every score 0, uniform causal attention."""
    feeds = dict(g.feeds)
    zero_q = np.zeros_like(feeds.pop("query"))
    return replace(g, feeds=feeds, constants={**g.constants, "query": zero_q})


def _without(g: _Graph, *inputs: str, attrs: tuple[str, ...] = ()) -> _Graph:
    """The same graph with ``inputs`` dropped and ``attrs`` reset to their defaults."""
    return replace(g, feeds={k: v for k, v in g.feeds.items() if k not in inputs},
                   attrs={k: v for k, v in g.attrs.items() if k not in attrs})


def _rope_cache(rows: int, rotary_dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """Standard RoPE caches (rows, rotary_dim/2): angle p · base^(−2i/rotary_dim)."""
    inv_freq = base ** (-np.arange(0, rotary_dim, 2) / rotary_dim)
    angles = np.arange(rows)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def _bias(rng: np.random.Generator, total: int = S) -> np.ndarray:
    """A (B, N, S, total) float16 attention bias with std 2: logit shifts of several units."""
    return _rounded(2.0 * rng.standard_normal((B, N, S, total)), "float16")


def _decode_feeds(rng: np.random.Generator, past: int, lengths: tuple[int, ...],
                  dtype: str = "float16") -> dict[str, np.ndarray]:
    """Token generation: B rows of one new token after a ``past``-slot cache; row b holds
    ``lengths[b]`` valid tokens in total (seqlens_k = lengths − 1), total length = max."""
    return {
        "query": _rounded(rng.standard_normal((B, 1, N * H)), dtype),
        "key": _rounded(rng.standard_normal((B, 1, NKV * H)), dtype),
        "value": _rounded(rng.standard_normal((B, 1, NKV * H)), dtype),
        "past_key": _rounded(rng.standard_normal((B, NKV, past, H)), dtype),
        "past_value": _rounded(rng.standard_normal((B, NKV, past, H)), dtype),
        "seqlens_k": np.array(lengths, dtype=np.int32) - 1,
        "total_sequence_length": np.array(max(lengths), dtype=np.int32),
    }
