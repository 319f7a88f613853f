"""Float64 reference for ``com.microsoft.RotaryEmbedding``, version 1 (not ONNX's own
``RotaryEmbedding``-23, whose inputs are ordered differently and whose ``position_ids`` is
optional).

Written from ``docs/ContribOperators.md`` (``com.microsoft.RotaryEmbedding``) and the CPU
kernel:

* ``onnxruntime/contrib_ops/cpu/bert/rotary_embedding_helper.h`` (``CheckInputs``): a 3-D
  input (B, S, D) takes its head size from ``num_heads`` when set (D / num_heads), else
  from the cache width (2 · cos_cache.shape[1]); a 4-D input is (B, N, S, H); the rotary
  dimension R is ``rotary_embedding_dim`` when set (it needs ``num_heads``), else H; the
  caches are (max_position, R/2); ``position_ids`` of shape (1) is "format 0", an offset
  (position of token s = position_ids[0] + s), of shape (B, S) "format 1", per token;
* ``onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc`` (``RunRotaryEmbedding``):
  ``MlasRotaryEmbedOneRow`` rotates the first R features of every head vector (pairs
  (2i, 2i+1) when ``interleaved``, halves (i, i + R/2) otherwise) and copies [R, H).

``scale`` is read by the CPU kernel's constructor but used by no computation (it is meant
for regenerating the caches, which is ``NOT_IMPLEMENTED``); measured on ORT 1.31.1 CPU:
``scale = 3`` and ``scale = 1`` give identical outputs. So it changes no result and has no
probe (``docs/contrib-attention-norms.md``).
"""

from __future__ import annotations

import numpy as np

from .gqa import rotary_embedding

__all__ = ["rotary_reference", "rotary23_reference"]


def rotary_reference(
    x: np.ndarray,
    position_ids: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    *,
    interleaved: int = 0,
    rotary_embedding_dim: int = 0,
    num_heads: int = 0,
    scale: float = 1.0,
    is_packed_batching: int = 0,
) -> dict[str, np.ndarray]:
    """Expected ``output`` of one ``com.microsoft.RotaryEmbedding`` node, float64.

    Args:
        x: (B, S, D) or (B, N, S, H).
        position_ids: int (1,) offset or (B, S) positions.
        cos_cache, sin_cache: (M, R/2).
        interleaved, rotary_embedding_dim, num_heads: the attributes (0 = unset).
        scale: accepted and ignored, as the CPU kernel does (module docstring).
        is_packed_batching: "ragged batch inputs or not" (schema); no layout of a ragged
            batch is documented, so the reference takes inputs whose every batch row is full
            length, where a packed batch is the batch itself and the flag changes nothing.

    Returns:
        ``{"output": array shaped like x}``.

    Raises:
        ValueError: shapes ``CheckInputs`` rejects (R odd or above H, a cache of the wrong
            width, ``rotary_embedding_dim`` without ``num_heads``, a position outside the
            cache).
    """
    del scale, is_packed_batching  # no effect on any output (module docstring, Args)
    a = np.asarray(x, dtype=np.float64)
    cos = np.asarray(cos_cache, dtype=np.float64)
    sin = np.asarray(sin_cache, dtype=np.float64)
    if rotary_embedding_dim and not num_heads:
        raise ValueError("rotary_embedding_dim needs num_heads (rotary_embedding.cc constructor)")
    if a.ndim == 4:
        batch, heads, seq, head = a.shape
        bsnh = a.transpose(0, 2, 1, 3)
    elif a.ndim == 3:
        batch, seq, width = a.shape
        head = width // num_heads if num_heads else 2 * cos.shape[1]
        if width % head:
            raise ValueError(f"hidden size {width} is not a multiple of head size {head}")
        heads = width // head
        bsnh = a.reshape(batch, seq, heads, head)
    else:
        raise ValueError("input must be 3-D (B, S, D) or 4-D (B, N, S, H)")
    rot = rotary_embedding_dim or head
    if rot % 2 or rot > head or cos.shape != sin.shape or cos.ndim != 2 or cos.shape[1] != rot // 2:
        raise ValueError(f"caches must be (M, {rot // 2}) with R = {rot} even and <= H = {head}")
    pos = np.asarray(position_ids, dtype=np.int64)
    if pos.shape == (1,):
        pos = np.broadcast_to(pos[0] + np.arange(seq), (batch, seq))
    elif pos.shape != (batch, seq):
        raise ValueError(f"position_ids must be (1,) or ({batch}, {seq})")
    if pos.min() < 0 or pos.max() >= cos.shape[0]:
        raise ValueError("position outside the cos/sin cache")
    cos_p = cos[pos][:, :, None, :]  # (B, S, 1, R/2): one rotation per token, every head
    sin_p = sin[pos][:, :, None, :]
    out = rotary_embedding(bsnh, cos_p, sin_p, interleaved=bool(interleaved))
    if a.ndim == 4:
        out = out.transpose(0, 2, 1, 3)
    return {"output": out.reshape(a.shape)}


def rotary23_reference(
    x: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    position_ids: np.ndarray | None = None,
    *,
    interleaved: int = 0,
    rotary_embedding_dim: int = 0,
    num_heads: int = 0,
) -> dict[str, np.ndarray]:
    """Expected ``Y`` of ONNX ``RotaryEmbedding``-23 (ai.onnx), float64.

    Written from the function in the operator's schema text (ONNX ``docs/Operators.md``,
    ``RotaryEmbedding``; the same text ``get_all_operator_schema()`` returns): a 4-D input is
    (B, N, S, H) and is read as (B, S, N, H); a 3-D input (B, S, D) is split into
    ``num_heads`` heads; the first ``rotary_embedding_dim`` (0: all H) features of each head
    are rotated, halves or interleaved pairs, the rest copied; with ``position_ids`` (B, S)
    the caches (max_position, R/2) are gathered at the positions, else they are (B, S, R/2).

    Raises:
        ValueError: a 3-D input without ``num_heads``, caches of the wrong shape, a position
            outside the caches.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 4:
        bsnh = a.transpose(0, 2, 1, 3)
    elif a.ndim == 3:
        if not num_heads or a.shape[2] % num_heads:
            raise ValueError("a 3-D input needs num_heads dividing its hidden size")
        bsnh = a.reshape(a.shape[0], a.shape[1], num_heads, a.shape[2] // num_heads)
    else:
        raise ValueError("input must be 3-D or 4-D")
    batch, seq, _, head = bsnh.shape
    rot = rotary_embedding_dim or head
    cos = np.asarray(cos_cache, dtype=np.float64)
    sin = np.asarray(sin_cache, dtype=np.float64)
    if position_ids is not None:
        pos = np.asarray(position_ids, dtype=np.int64)
        if pos.shape != (batch, seq) or pos.min() < 0 or pos.max() >= cos.shape[0]:
            raise ValueError("position_ids must be (B, S) inside the caches")
        cos, sin = cos[pos], sin[pos]
    if cos.shape != (batch, seq, rot // 2) or sin.shape != cos.shape or rot % 2 or rot > head:
        raise ValueError(f"caches must give (B, S, R/2) = ({batch}, {seq}, {rot // 2})")
    out = rotary_embedding(bsnh, cos[:, :, None, :], sin[:, :, None, :], interleaved=bool(interleaved))
    if a.ndim == 4:
        out = out.transpose(0, 2, 1, 3)
    return {"Y": out.reshape(a.shape)}
