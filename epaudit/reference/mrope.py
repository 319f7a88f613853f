"""Float64 reference for ``com.microsoft.MRotaryEmbedding`` (M-RoPE, Qwen2-VL family), version 1.

From the schema text (``docs/ContribOperators.md#com.microsoft.MRotaryEmbedding``) and the CPU
kernel ``onnxruntime/contrib_ops/cpu/bert/mrotary_embedding.cc`` (``RunMRotaryEmbedding``):
each token has three positions (``position_ids`` (3, B, S): temporal, height, width); the
half-rotary axis (R/2 columns) is divided among them by ``mrope_section`` = (s_t, s_h, s_w):

* ``mrope_layout`` 0 (sectioned): columns [0, s_t) from T, [s_t, s_t + s_h) from H, the rest
  from W;
* ``mrope_layout`` 1 (interleaved): every column from T, then H overwrites columns 1, 4, 7, ...
  below 3·s_h and W overwrites columns 2, 5, 8, ... below 3·s_w;

column c of the per-token cos/sin vector is ``cache[position of its stream, c]``; the
standard rotation (:func:`epaudit.reference.gqa.rotary_embedding`: halves, or pairs with
``interleaved``) is applied to the first R features of every head, the rest copied. The input
is (B, N, S, H), or (B, S, N·H) with ``num_heads`` (needed with ``rotary_embedding_dim``).
"""

from __future__ import annotations

import numpy as np

from .gqa import rotary_embedding

__all__ = ["stream_of_columns", "mrope_reference"]


def stream_of_columns(section, layout: int, half: int) -> np.ndarray:
    """For each of the ``half`` cache columns, the position stream (0 T, 1 H, 2 W) it reads.

    Raises:
        ValueError: sections that do not add up to ``half``.
    """
    st, sh, sw = (int(v) for v in section)
    if st + sh + sw != half:
        raise ValueError(f"mrope_section {section} must add up to half the rotary dimension ({half})")
    if layout == 0:
        return np.array([0] * st + [1] * sh + [2] * sw)
    cols = np.zeros(half, np.int64)
    idx = np.arange(half)
    cols[(idx % 3 == 1) & (idx < 3 * sh)] = 1
    cols[(idx % 3 == 2) & (idx < 3 * sw)] = 2
    return cols


def mrope_reference(x, position_ids, cos_cache, sin_cache, *, mrope_section, num_heads: int = 0,
                    rotary_embedding_dim: int = 0, interleaved: int = 0, mrope_layout: int = 0) -> dict[str, np.ndarray]:
    """Expected ``output`` of one MRotaryEmbedding node, float64, shaped like ``x``.

    Raises:
        ValueError: ``position_ids`` not (3, B, S), a position outside the cache, or shapes
            that do not fit the head size.
    """
    a = np.asarray(x, np.float64)
    cos, sin = np.asarray(cos_cache, np.float64), np.asarray(sin_cache, np.float64)
    if a.ndim == 4:
        batch, heads, seq, head = a.shape
        bsnh = a.transpose(0, 2, 1, 3)
    else:
        batch, seq, width = a.shape
        head = width // num_heads if num_heads else 2 * cos.shape[1]
        bsnh = a.reshape(batch, seq, width // head, head)
    rot = rotary_embedding_dim or head
    half = rot // 2
    if cos.shape[1] != half:
        raise ValueError(f"caches must have {half} columns")
    pos = np.asarray(position_ids, np.int64)
    if pos.shape != (3, batch, seq):
        raise ValueError(f"position_ids must be (3, {batch}, {seq})")
    if pos.min() < 0 or pos.max() >= cos.shape[0]:
        raise ValueError("a position outside the cos/sin cache")
    streams = stream_of_columns(mrope_section, int(mrope_layout), half)
    cols = np.arange(half)
    chosen = pos[streams][:, :, :]  # (half, B, S): the position each column reads, per token
    cos_t = cos[chosen, cols[:, None, None]].transpose(1, 2, 0)[:, :, None, :]  # (B, S, 1, half)
    sin_t = sin[chosen, cols[:, None, None]].transpose(1, 2, 0)[:, :, None, :]
    out = rotary_embedding(bsnh, cos_t, sin_t, interleaved=bool(interleaved))
    if a.ndim == 4:
        out = out.transpose(0, 2, 1, 3)
    return {"output": out.reshape(a.shape)}
