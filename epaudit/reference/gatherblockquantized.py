"""Float64 reference of ``com.microsoft.GatherBlockQuantized`` (version 1) for integer data.

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
                     zero_points: np.ndarray | None, default_zp: int) -> np.ndarray:
    """The dequantized table, float64, of the logical ``codes`` (unpacked integers).

    Args:
        codes: logical integer codes, data's logical shape.
        scales: data's rank; ``ceil(dim / block_size)`` along ``quantize_axis``.
        zero_points: logical integer zero points in the scales' shape, or None.
        default_zp: the zero point when ``zero_points`` is None.

    Raises:
        ValueError: scales or zero points of the wrong shape.
    """
    codes = np.asarray(codes, dtype=np.float64)
    axis = quantize_axis % codes.ndim
    want = list(codes.shape)
    want[axis] = -(-codes.shape[axis] // block_size)
    if tuple(np.shape(scales)) != tuple(want):
        raise ValueError(f"scales shape {np.shape(scales)} is not {tuple(want)}")
    blk = np.arange(codes.shape[axis]) // block_size
    s = np.take(np.asarray(scales, dtype=np.float64), blk, axis=axis)
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
                                     default_zp: int = 0) -> np.ndarray:
    """Gather rows of the dequantized table: output shape
    ``data.shape[:g] + indices.shape + data.shape[g+1:]`` (logical shapes), float64."""
    table = dequantize_table(codes, scales, quantize_axis=quantize_axis, block_size=block_size,
                             zero_points=zero_points, default_zp=default_zp)
    axis = gather_axis % table.ndim
    size = table.shape[axis]
    idx = np.asarray(indices, dtype=np.int64)
    valid = (idx >= -size) & (idx < size)
    out = np.take(table, np.where(valid, idx % size, 0), axis=axis)
    # Out-of-range indices give a zero slice: broadcast the validity over the other axes.
    mask = valid.reshape((1,) * axis + idx.shape + (1,) * (table.ndim - axis - 1))
    return np.where(mask, out, 0.0)
