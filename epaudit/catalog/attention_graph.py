"""One ONNX ``Attention`` node as a probe graph: its inputs, attributes and outputs, the
seeded Q/K/V and masks, and the subject/control :class:`~epaudit.contract.probes.Case`
pairs with their float64 references (:func:`epaudit.reference.attention.attention_reference`).

The features that use it are in :mod:`epaudit.catalog.attention`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..contract.probes import Case, Probe, tolerance_for
from ..reference.attention import attention_reference
from .models import NUMPY_TYPES, one_node_model, round_to_bfloat16, with_constants

#: The node's input names, in the op's input order (spec inputs 0..6).
_NODE_INPUTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")

#: The node's output names, in the op's output order.
_NODE_OUTPUTS = ("Y", "present_key", "present_value", "qk_matmul_output")

#: Shapes shared by the probes: batch, query heads, head size.
_B, _N, _H = 2, 4, 16

_SRC = "ONNX Attention-23 (onnx/defs/nn/old.cc, docs/Operators.md#Attention)"

_SRC24 = "ONNX Attention-24 (onnx/defs/nn/defs.cc, docs/Operators.md#Attention)"


def _as_model_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """The array as the graph input takes it; bfloat16 graphs take float32 rounded to bf16."""
    if dtype == "bfloat16":
        return round_to_bfloat16(x)
    return np.asarray(x, dtype=NUMPY_TYPES[dtype])


@dataclass(frozen=True)
class _Graph:
    """One Attention node: its input arrays, attributes and requested outputs.

    ``arrays`` maps node input names (from :data:`_NODE_INPUTS`) to values already in
    the graph input dtype; ``constants`` names those baked into the graph as
    initializers instead of being fed.
    """

    arrays: Mapping[str, np.ndarray]
    attrs: Mapping[str, object] = field(default_factory=dict)
    outputs: tuple[str, ...] = ("Y",)
    constants: frozenset[str] = frozenset()


def _input_dtype(name: str, arr: np.ndarray, dtype: str) -> str:
    """Graph input dtype name of one node input."""
    if name == "nonpad_kv_seqlen":
        return "int64"
    if name == "attn_mask" and arr.dtype == np.bool_:
        return "bool"
    return dtype


def _case(graph: _Graph, dtype: str, opset: int) -> Case:
    """Build the model, feeds and float64 reference of one graph."""
    present = [n for n in _NODE_INPUTS if n in graph.arrays]
    last = max(_NODE_INPUTS.index(n) for n in present)
    node_inputs = [n if n in graph.arrays else "" for n in _NODE_INPUTS[: last + 1]]
    inputs = [(n, _input_dtype(n, graph.arrays[n], dtype), graph.arrays[n].shape) for n in present]
    outputs = [(n, dtype) if n in graph.outputs else ("", dtype) for n in _NODE_OUTPUTS]
    model = one_node_model("Attention", "", opset, inputs, outputs, graph.attrs, node_inputs)
    model = with_constants(model, {n: graph.arrays[n] for n in sorted(graph.constants)})
    feeds = {n: graph.arrays[n] for n in present if n not in graph.constants}

    attrs = dict(graph.attrs)
    # softmax_precision is the precision the softmax is computed in ([DOC23] attribute
    # softmax_precision): a float64 reference is at least that precise, so it changes nothing.
    attrs.pop("softmax_precision", None)
    ref = attention_reference(
        *(graph.arrays.get(n) for n in _NODE_INPUTS),
        is_causal=int(attrs.pop("is_causal", 0)),
        q_num_heads=attrs.pop("q_num_heads", None),
        kv_num_heads=attrs.pop("kv_num_heads", None),
        qk_matmul_output_mode=int(attrs.pop("qk_matmul_output_mode", 0)),
        scale=attrs.pop("scale", None),
        softcap=float(attrs.pop("softcap", 0.0)),
        want_qk="qk_matmul_output" in graph.outputs,
    )
    if attrs:  # an attribute the reference does not model would silently be ignored
        raise ValueError(f"attributes without a reference rule: {sorted(attrs)}")
    out_names = tuple(n for n in _NODE_OUTPUTS if n in graph.outputs)
    return Case(model=model, feeds=feeds, outputs=out_names, reference={n: ref[n] for n in out_names})


def _probe(feature_id: str, dtype: str, opset: int, subject: _Graph, control: _Graph,
           head: int = _H) -> Probe:
    """Assemble a probe; both graphs share dtype and opset; ``head`` sets the tolerance."""
    return Probe(
        feature_id=feature_id,
        subject=_case(subject, dtype, opset),
        control=_case(control, dtype, opset),
        tolerance=tolerance_for(dtype, head),
        dtype=dtype,
    )


def _qkv(rng: np.random.Generator, dtype: str, *, s_q: int = 4, s_kv: int = 4,
         n_kv: int = _N, q_gain: float = 2.0, head: int = _H) -> dict[str, np.ndarray]:
    """BNSH Q, K, V drawn from N(0, 1); Q is amplified so attention is peaked (decisive).

    The scores ``Q.K^T / sqrt(head)`` are about N(0, q_gain^2) at every head size.
    """
    q = q_gain * rng.standard_normal((_B, _N, s_q, head))
    k = rng.standard_normal((_B, n_kv, s_kv, head))
    v = rng.standard_normal((_B, n_kv, s_kv, head))
    return {"Q": _as_model_dtype(q, dtype), "K": _as_model_dtype(k, dtype), "V": _as_model_dtype(v, dtype)}


def _neutral_q(g: _Graph) -> _Graph:
    """The same graph with Q baked in as zeros: every score is 0, attention is uniform
    over the allowed keys, so an EP that ignores Q.K^T lands on this control."""
    arrays = dict(g.arrays)
    arrays["Q"] = np.zeros_like(g.arrays["Q"])
    return _Graph(arrays, g.attrs, g.outputs, g.constants | {"Q"})


def _without(g: _Graph, *names: str, attrs: tuple[str, ...] = ()) -> _Graph:
    """The same graph with inputs dropped and attributes reset to their defaults."""
    return _Graph(
        {n: a for n, a in g.arrays.items() if n not in names},
        {k: v for k, v in g.attrs.items() if k not in attrs},
        g.outputs,
        g.constants - set(names),
    )


def _random_bool_mask(rng: np.random.Generator, shape: tuple[int, ...], p_masked: float) -> np.ndarray:
    """A (..., S_q, T) bool mask, True = attend, with at least one True in every row."""
    mask = rng.random(shape) >= p_masked
    keep = rng.integers(0, shape[-1], size=shape[:-1])
    np.put_along_axis(mask, keep[..., None], True, axis=-1)
    return mask


def _past_arrays(rng: np.random.Generator, s_q: int, s_new: int, past: int) -> dict[str, np.ndarray]:
    arrays = _qkv(rng, "float32", s_q=s_q, s_kv=s_new)
    arrays["past_key"] = rng.standard_normal((_B, _N, past, _H)).astype(np.float32)
    arrays["past_value"] = rng.standard_normal((_B, _N, past, _H)).astype(np.float32)
    return arrays


_PRESENT = ("Y", "present_key", "present_value")
