"""Float64 reference of ``com.microsoft.GatherBlockQuantized`` (version 1) for integer, FP8 and FP4 data.

Rules from ORT ``docs/ContribOperators.md#com.microsoft.GatherBlockQuantized`` (the schema
text) and the CPU kernel ``onnxruntime/contrib_ops/cpu/quantization/gather_block_quantized.cc``
(``PrepareForCompute``, ``CopyDataAndDequantize``):

* ``data`` is quantized block-wise along ``quantize_axis`` (default 1) in blocks of
  ``block_size`` (default 128); ``scales`` has data's rank, ``ceil(dim / block_size)`` along
  ``quantize_axis`` and data's size elsewhere; ``zero_points`` has the scales' shape.
* ``value = (code - zero_point) * scale`` of the element's block; without ``zero_points`` the
  zero point is 0 for int4/uint4 and ``2^(bits-1)`` for uint8.
* uint8 ``data`` with ``bits`` < 8 packs ``8 / bits`` codes per byte along the last axis
  (lowest bits first); its ``zero_points`` are packed the same way along ``quantize_axis``;
  ``gather_axis`` must be 0 and ``quantize_axis`` the last axis.
* The output is Gather along ``gather_axis`` (negative indices count from the end); unlike
  ONNX Gather, an index outside ``[-s, s-1]`` yields a zero slice.
"""

from __future__ import annotations

import numpy as np


def default_zero_point(kind: str, bits: int) -> int:
    """0 for ``"int4"``/``"uint4"`` data, ``2^(bits-1)`` for ``"uint8"`` (schema point 2)."""
    return 1 << (bits - 1) if kind == "uint8" else 0


def dequantize_table(codes: np.ndarray, scales: np.ndarray, *, quantize_axis: int, block_size: int,
                     zero_points: np.ndarray | None, default_zp: int, broadcast: bool = False) -> np.ndarray:
    """The dequantized table, float64, of the logical ``codes`` (unpacked integers).

    Args:
        codes: logical integer codes, data's logical shape.
        scales: data's rank; ``ceil(dim / block_size)`` along ``quantize_axis``.
        zero_points: logical integer zero points in the scales' shape, or None.
        default_zp: the zero point when ``zero_points`` is None.
        broadcast: scales of size 1 on other axes broadcast (FP8/FP4 data only).

    For FP8/FP4 data, ``codes`` are the decoded float values (:mod:`epaudit.reference.minifloat`)
    and the zero point is 0: "dequantization is simply float(data) * scales" (schema point 6).

    Raises:
        ValueError: scales or zero points of the wrong shape.
    """
    codes = np.asarray(codes, dtype=np.float64)
    axis = quantize_axis % codes.ndim
    if block_size == 0:
        # Schema point 1: for FP8/FP4 data "block_size may also be 0, meaning the entire
        # quantize_axis dimension forms a single block".
        block_size = codes.shape[axis]
    want = list(codes.shape)
    want[axis] = -(-codes.shape[axis] // block_size)
    got = tuple(np.shape(scales))
    # Schema point 6 (FP8/FP4 data): on an axis other than quantize_axis a scales dimension
    # of 1 broadcasts; callers pass broadcast=True only for those types.
    if len(got) != len(want) or got[axis] != want[axis] or any(
            g != w and not (broadcast and g == 1) for i, (g, w) in enumerate(zip(got, want)) if i != axis):
        raise ValueError(f"scales shape {got} is not {tuple(want)}")
    blk = np.arange(codes.shape[axis]) // block_size
    s = np.take(np.asarray(scales, dtype=np.float64), blk, axis=axis)
    s = np.broadcast_to(s, codes.shape)
    if zero_points is None:
        z = np.float64(default_zp)
    else:
        if tuple(np.shape(zero_points)) != tuple(want):
            raise ValueError(f"zero_points shape {np.shape(zero_points)} is not {tuple(want)}")
        z = np.take(np.asarray(zero_points, dtype=np.float64), blk, axis=axis)
    return (codes - z) * s


def gather_block_quantized_reference(codes: np.ndarray, indices: np.ndarray, scales: np.ndarray, *,
                                     gather_axis: int = 0, quantize_axis: int = 1, block_size: int = 128,
                                     zero_points: np.ndarray | None = None,
                                     default_zp: int = 0, broadcast: bool = False) -> np.ndarray:
    """Gather rows of the dequantized table: output shape
    ``data.shape[:g] + indices.shape + data.shape[g+1:]`` (logical shapes), float64.
    ``block_size`` 0 and ``broadcast`` as in :func:`dequantize_table` (FP8/FP4 data)."""
    table = dequantize_table(codes, scales, quantize_axis=quantize_axis, block_size=block_size,
                             zero_points=zero_points, default_zp=default_zp, broadcast=broadcast)
    axis = gather_axis % table.ndim
    size = table.shape[axis]
    idx = np.asarray(indices, dtype=np.int64)
    valid = (idx >= -size) & (idx < size)
    out = np.take(table, np.where(valid, idx % size, 0), axis=axis)
    # Out-of-range indices give a zero slice: broadcast the validity over the other axes.
    mask = valid.reshape((1,) * axis + idx.shape + (1,) * (table.ndim - axis - 1))
    return np.where(mask, out, 0.0)
