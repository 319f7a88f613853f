"""Float64 references for the com.microsoft fused-projection attention operators (version 1):
``Attention`` (BERT / GPT-2 style: the Q, K, V projections inside the node) and its
quantized twin ``QAttention``.

Both project ``input`` (B, S, D_in) with the merged ``weights`` (D_in, D_q + D_k + D_v) and
``bias``, split the result into Q | K | V (widths from ``qkv_hidden_sizes``, else three equal
thirds), and then attend exactly like ``MultiHeadAttention`` without a projection: the
softmax part is :func:`epaudit.reference.mha.mha_reference`, reused as is (scale, additive
``mask_filter_value`` at padded keys, the fixed −10000 causal part of ``unidirectional``,
``attention_bias``, the past concatenated before the new keys). ``past`` is the stacked
(2, B, N, P, H) cache and ``present`` the stacked (2, B, N, P + S, H) one.

``mask_index`` forms (the schema text): (B) key lengths (right padding); (2B) exclusive end
positions followed by inclusive start positions (left padding); raw (B, T) and (B, S, T)
0/1 masks. They are turned into a raw (B, S, T) mask for ``mha_reference``.

QAttention (schema text; ``onnxruntime/contrib_ops/cpu/quantization/attention_quant.cc``):
``input`` and ``weight`` are quantized (input per tensor, weight per tensor or per column
of 3·D), so the projection is ``((input − input_zp)·input_scale) @ ((weight − weight_zp)·
weight_scale) + bias``; the integer product is exact here.

Sources: ``docs/ContribOperators.md`` (com.microsoft.Attention, com.microsoft.QAttention),
``onnxruntime/contrib_ops/cpu/bert/attention.cc`` (``Compute``: the projection with bias
broadcast per head, then ``ApplyAttention`` of ``attention_cpu_base.h``),
``attention_base.cc`` (``CheckInputs``: mask and past shapes).
"""

from __future__ import annotations

import numpy as np

from .mha import DEFAULT_MASK_FILTER_VALUE, mha_reference
from .qlinear import dequantize

__all__ = ["mask_index_to_raw", "attention_ms_reference", "qattention_reference"]


def mask_index_to_raw(mask_index: np.ndarray, batch: int, seq: int, total: int) -> np.ndarray:
    """A ``mask_index`` in any documented form as an int32 (B, S, T) 0/1 mask (1 = attend).

    Raises:
        ValueError: a shape the schema does not list.
    """
    m = np.asarray(mask_index)
    keys = np.arange(total)
    if m.shape == (batch,):
        keep = keys[None, :] < m[:, None].astype(np.int64)
    elif m.shape == (2 * batch,):
        end, start = m[:batch].astype(np.int64), m[batch:].astype(np.int64)
        keep = (keys[None, :] < end[:, None]) & (keys[None, :] >= start[:, None])
    elif m.shape == (batch, total):
        keep = m != 0
    elif m.shape == (batch, seq, total):
        return (m != 0).astype(np.int32)
    else:
        raise ValueError(f"mask_index shape {m.shape} is none of (B), (2B), (B, T), (B, S, T)")
    return np.broadcast_to(keep[:, None, :], (batch, seq, total)).astype(np.int32)


def attention_ms_reference(input: np.ndarray, weights: np.ndarray, bias: np.ndarray | None = None,  # noqa: A002
                           mask_index: np.ndarray | None = None, past: np.ndarray | None = None,
                           attention_bias: np.ndarray | None = None, *, num_heads: int,
                           qkv_hidden_sizes=None, unidirectional: int = 0, scale: float = 0.0,
                           mask_filter_value: float = DEFAULT_MASK_FILTER_VALUE) -> dict[str, np.ndarray]:
    """Expected ``output`` (B, S, D_v) and ``present`` (2, B, N, P + S, H) of com.microsoft
    ``Attention``, float64.

    Args:
        input: (B, S, D_in); weights (D_in, D_q + D_k + D_v); bias (D_q + D_k + D_v) or None (0).
        mask_index: see :func:`mask_index_to_raw`; past: (2, B, N, P, H).
        attention_bias: (B|1, N|1, S, P + S).
        qkv_hidden_sizes: (D_q, D_k, D_v), or None for three equal thirds.

    Raises:
        ValueError: widths that do not split, or shapes :func:`mha_reference` rejects.
    """
    x = np.asarray(input, np.float64)
    w = np.asarray(weights, np.float64)
    qkv = x @ w
    if bias is not None:
        qkv = qkv + np.asarray(bias, np.float64)
    return _attend(qkv, w.shape[1], mask_index, past, attention_bias, num_heads=num_heads,
                   qkv_hidden_sizes=qkv_hidden_sizes, unidirectional=unidirectional, scale=scale,
                   mask_filter_value=mask_filter_value)


def qattention_reference(input, weight, bias, input_scale, weight_scale, mask_index=None, input_zero_point=0,  # noqa: A002
                         weight_zero_point=0, past=None, *, num_heads: int, unidirectional: int = 0,
                         scale: float = 0.0, mask_filter_value: float = DEFAULT_MASK_FILTER_VALUE
                         ) -> dict[str, np.ndarray]:
    """Expected ``output`` and ``present`` of ``QAttention``: dequantized projection (weight
    parameters per tensor or per column), then :func:`attention_ms_reference`'s attention."""
    w = np.asarray(weight, np.float64)
    width = w.shape[1]
    ws = np.asarray(weight_scale, np.float64).reshape(-1)
    wz = np.asarray(weight_zero_point, np.float64).reshape(-1)
    fw = (w - (wz[None, :] if wz.size > 1 else wz[0])) * (ws[None, :] if ws.size > 1 else ws[0])
    fx = dequantize(input, input_scale, input_zero_point)
    qkv = fx @ fw + np.asarray(bias, np.float64)
    return _attend(qkv, width, mask_index, past, None, num_heads=num_heads, qkv_hidden_sizes=None,
                   unidirectional=unidirectional, scale=scale, mask_filter_value=mask_filter_value)


def _attend(qkv, width, mask_index, past, attention_bias, *, num_heads, qkv_hidden_sizes, unidirectional, scale,
            mask_filter_value) -> dict[str, np.ndarray]:
    if qkv_hidden_sizes is None:
        if width % 3:
            raise ValueError(f"weights width {width} does not split into three equal parts")
        sizes = (width // 3,) * 3
    else:
        sizes = tuple(int(v) for v in qkv_hidden_sizes)
        if sum(sizes) != width:
            raise ValueError(f"qkv_hidden_sizes {sizes} do not add up to the weights width {width}")
    q, k, v = np.split(qkv, [sizes[0], sizes[0] + sizes[1]], axis=-1)
    batch, seq = q.shape[:2]
    kwargs: dict[str, object] = {}
    past_len = 0
    if past is not None:
        p = np.asarray(past, np.float64)
        kwargs["past_key"], kwargs["past_value"] = p[0], p[1]
        past_len = p.shape[3]
    total = past_len + seq
    if mask_index is not None:
        kwargs["key_padding_mask"] = mask_index_to_raw(mask_index, batch, seq, total)
    if attention_bias is not None:
        kwargs["attention_bias"] = attention_bias
    out = mha_reference(q, k, v, num_heads=num_heads, unidirectional=unidirectional, scale=scale,
                        mask_filter_value=mask_filter_value, **kwargs)
    res = {"output": out["output"]}
    if out["present_key"].shape == out["present_value"].shape:  # no present when V's head size differs
        res["present"] = np.stack([out["present_key"], out["present_value"]])
    return res
