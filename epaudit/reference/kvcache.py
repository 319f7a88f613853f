"""The quantized and the windowed KV cache of ``com.microsoft.GroupQueryAttention``, and its QK-norm.

Rules, from the operator description ``get_all_operator_schema()`` returns for
onnxruntime-gpu 1.31.1 (the text of ``onnxruntime/core/graph/contrib_ops/bert_defs.cc``,
also ``docs/ContribOperators.md``), sections "Quantization", "Quantization Modes" and
"Windowed KV Cache", and inputs 12-15:

* **Quantized cache.** ``past_key``/``past_value`` (and the present outputs, "in same
  format") hold int8, uint8 (4-bit: two values per byte) or float8e4m3fn codes; ``k_scale`` /
  ``v_scale`` are float32, broadcastable to the cache: ``PER_TENSOR`` shape (1),
  ``PER_CHANNEL`` (1, Nkv, 1, H). A value is ``code * scale`` (symmetric: no zero point).
  int8 codes are signed; a 4-bit code ``c`` in [-8, 7] is stored as the unsigned nibble
  ``c + 8``, element ``2j`` of a head vector in the low nibble of byte ``j``; float8 codes are
  :mod:`epaudit.reference.minifloat` values. A new key or value enters the cache as
  ``round(x / scale)`` clamped to the code range (float8: the nearest code, saturating), and
  the attention reads the cache *after* that rounding: the new token attends to its own
  quantized key. Measured on the onnxruntime-gpu 1.31.1 CPU EP (int8 per tensor and per
  channel, 4-bit per tensor): the present rows equal ``round(x / scale)`` and the output
  matches attention over the dequantized present cache to 3e-7 (against 7e-3 with the
  unrounded new key), and the 4-bit nibbles carry the +8 offset (two's-complement nibbles
  miss by 3.4).
* **Windowed cache** (``sliding_window_cache = 1``): the buffers hold ``C`` rows (the past's
  dimension 2); after a step of a batch entry whose absolute length is ``T = seqlens_k[b] + 1``
  rows ``[0, L(T))`` hold positions ``T - L(T) .. T - 1`` with ``G = C - W + 1`` and
  ``L(T) = T`` for ``T <= C``, else ``T - G * ceil((T - C) / G)``; rows ``[L, C)`` are
  unspecified. Query position ``p`` sees the keys at positions ``p - W + 1 .. p``
  (``W = local_window_size``). ``attention_bias`` keeps absolute key columns. Measured on the
  1.31.1 CPU EP for (C, W, T, S) = (4, 3, 6, 1), (4, 3, 5, 1), (5, 3, 9, 1), (4, 3, 7, 2),
  (4, 4, 9, 1): output within 3e-7, resident rows exact.
* **QK-norm** (inputs 14, 15): "a per-head RMS normalization to Q (and K) before any rotary
  embedding" (Qwen3's ``SimplifiedLayerNormalization`` over the head dimension):
  ``x / sqrt(mean(x^2) + qk_norm_epsilon) * weight``.
"""

from __future__ import annotations

import math

import numpy as np

from . import minifloat

__all__ = ["QUANT_TYPES", "CACHE_TYPES", "dequantize", "quantize", "resident_rows", "rms_norm",
           "pack_int4", "unpack_int4"]

#: Attribute values of ``k_quant_type`` / ``v_quant_type`` (schema text).
QUANT_TYPES = ("NONE", "PER_TENSOR", "PER_CHANNEL")

#: Cache element type -> (bits, code range) for the integer caches; float8 via minifloat.
CACHE_TYPES = {"int8": (8, (-128, 127)), "uint8": (4, (-8, 7)), "float8e4m3fn": (8, None)}


def pack_int4(codes: np.ndarray) -> np.ndarray:
    """Signed 4-bit codes (..., H) in [-8, 7] -> uint8 (..., H/2): nibble ``c + 8``, element 2j low.

    Raises:
        ValueError: a code out of range or an odd last dimension.
    """
    c = np.asarray(codes, dtype=np.int64)
    if c.shape[-1] % 2 or (c.size and (c.min() < -8 or c.max() > 7)):
        raise ValueError("4-bit codes must lie in [-8, 7] with an even last dimension")
    u = c + 8
    return (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_int4`: uint8 (..., H/2) -> int64 codes (..., H) in [-8, 7]."""
    b = np.asarray(packed, dtype=np.uint8).astype(np.int64)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], -1) - 8


def _scale(scale: np.ndarray, quant_type: str, shape: tuple[int, ...]) -> np.ndarray:
    """The scale broadcast to a (B, Nkv, T, H) cache (schema: "broadcastable to present_key").

    Raises:
        ValueError: an unknown quant type, or a scale whose shape the mode does not allow.
    """
    s = np.asarray(scale, dtype=np.float64)
    if quant_type == "PER_TENSOR":
        if s.size != 1:
            raise ValueError(f"PER_TENSOR takes one scale, got shape {s.shape}")
    elif quant_type == "PER_CHANNEL":
        if s.shape != (1, shape[1], 1, shape[3]):
            raise ValueError(f"PER_CHANNEL scale must be (1, {shape[1]}, 1, {shape[3]}), got {s.shape}")
    else:
        raise ValueError(f"quant type must be one of {QUANT_TYPES[1:]}, got {quant_type!r}")
    return np.broadcast_to(s.reshape(s.shape if s.ndim == 4 else (1, 1, 1, 1)), shape)


def dequantize(raw: np.ndarray, scale: np.ndarray, quant_type: str, cache_type: str) -> np.ndarray:
    """A stored cache (B, Nkv, P, H) -> float64 values (B, Nkv, P, H).

    Args:
        raw: int8 codes, uint8 packed 4-bit codes (B, Nkv, P, H/2), or float8 codes (uint8).
        scale: ``k_scale`` / ``v_scale``.
        quant_type: ``PER_TENSOR`` or ``PER_CHANNEL``.
        cache_type: a key of :data:`CACHE_TYPES`.
    """
    r = np.asarray(raw)
    if cache_type == "uint8":
        codes = unpack_int4(r).astype(np.float64)
    elif cache_type == "int8":
        codes = r.astype(np.float64)
    elif cache_type == "float8e4m3fn":
        codes = minifloat.decode(r.astype(np.int64), cache_type)
    else:
        raise ValueError(f"unknown cache type {cache_type!r}")
    return codes * _scale(scale, quant_type, codes.shape)


def quantize(x: np.ndarray, scale: np.ndarray, quant_type: str, cache_type: str) -> tuple[np.ndarray, np.ndarray]:
    """New keys or values (B, Nkv, S, H) as the cache stores them.

    Returns ``(raw, values)``: the stored codes (int64: int8 codes, packed 4-bit bytes, or
    float8 codes) and the float64 values they dequantize to (what the attention reads).
    Integer codes are ``round(x / scale)`` clamped to the range; a probe keeps ``x / scale``
    away from ``.5`` so the rounding rule (ties) never decides.
    """
    x = np.asarray(x, dtype=np.float64)
    s = _scale(scale, quant_type, x.shape)
    if cache_type == "float8e4m3fn":
        codes = minifloat.encode(x / s, cache_type)
        return codes, minifloat.decode(codes, cache_type) * s
    bits_range = CACHE_TYPES.get(cache_type)
    if bits_range is None:
        raise ValueError(f"unknown cache type {cache_type!r}")
    lo, hi = bits_range[1]
    codes = np.clip(np.rint(x / s), lo, hi).astype(np.int64)
    raw = pack_int4(codes).astype(np.int64) if cache_type == "uint8" else codes
    return raw, codes * s


def resident_rows(total: int, capacity: int, window: int) -> int:
    """``L(T)`` of the windowed cache: rows resident after a step that reaches length ``T``.

    Raises:
        ValueError: ``capacity < window`` ("rejected with INVALID_ARGUMENT") or ``window < 1``.
    """
    if window < 1 or capacity < window:
        raise ValueError(f"windowed cache needs 1 <= local_window_size ({window}) <= capacity ({capacity})")
    if total <= capacity:
        return total
    g = capacity - window + 1
    return total - g * math.ceil((total - capacity) / g)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """Per-head RMS norm over the last axis: ``x / sqrt(mean(x^2) + eps) * weight`` (float64)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64).reshape(-1)
    if w.shape != (x.shape[-1],):
        raise ValueError(f"norm weight must have shape ({x.shape[-1]},), got {w.shape}")
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w
