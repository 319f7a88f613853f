"""Float64 references for the com.microsoft linear-quantization operators (version 1):
``QuantizeLinear``, ``DequantizeLinear`` and the ``QLinear*`` elementwise and pooling ops.

Every rule is the ONNX linear-quantization contract (``QuantizeLinear``/``DequantizeLinear``
in the ONNX operator spec; the com.microsoft schema text that ``get_all_operator_schema()``
returns says the same): ``dequantize(q) = (q − zero_point) · scale``, ``quantize(x) =
saturate(round_half_to_even(x / scale) + zero_point)`` into the integer type's range. A
QLinear op dequantizes its inputs, applies the float operation and quantizes the result
with the output's scale and zero point. The references do exactly that in float64; ORT's CPU
kernels (``onnxruntime/contrib_ops/cpu/quantization/``) compute in float32, through lookup
tables (``qlinear_lookup_table.cc``: QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
QLinearWhere) or fixed-point multipliers (``core/mlas/lib/qladd.cpp``), which may land one
step away from the exactly rounded value; the catalog says per feature how its outputs are
compared (``docs/contrib-qlinear-attention-moe.md``).

Sources per operator: the schema text (``docs/ContribOperators.md``) and
``quantize_ops.cc`` (registrations of the ONNX kernels ``core/providers/cpu/quantization/
quantize_linear.cc`` for the MS domain), ``qlinear_binary_op.cc``, ``qlinear_activations.cc``,
``qlinear_softmax.cc``, ``qlinear_pool.cc``, ``qlinear_global_average_pool.cc``,
``qlinear_concat.cc``, ``qlinear_where.cc``.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["RANGES", "quantize", "dequantize", "qlinear_binary", "qlinear_unary", "qlinear_softmax",
           "qlinear_where", "qlinear_concat", "average_pool", "qlinear_average_pool",
           "qlinear_global_average_pool"]

#: Saturation range of each quantized type (the schema: [0, 255] uint8, [-128, 127] int8, ...).
RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "uint4": (0, 15), "int4": (-8, 7), "int32": (-2**31, 2**31 - 1)}


def _per_axis(v: np.ndarray | float | int, rank: int, axis: int | None) -> np.ndarray:
    """A scale / zero point broadcast along ``axis`` of a rank-``rank`` tensor (a scalar as is)."""
    arr = np.asarray(v, dtype=np.float64)
    if arr.size == 1 or axis is None:
        if arr.size != 1:
            raise ValueError("a per-tensor scale / zero point must have one element")
        return arr.reshape(())
    ax = axis + rank if axis < 0 else axis
    if not 0 <= ax < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    shape = [1] * rank
    shape[ax] = arr.size
    return arr.reshape(shape)


def quantize(x: np.ndarray, scale, zero_point=0, dtype: str = "uint8", axis: int | None = None) -> np.ndarray:
    """``saturate(round_half_even(x / scale) + zero_point)`` as int64 values of ``dtype``'s range.

    Args:
        x: float values, any shape.
        scale, zero_point: scalars, or 1-D along ``axis`` (per-channel).
        dtype: quantized type name, a key of :data:`RANGES`.
        axis: the per-channel axis (negative counts from the end), None for per-tensor.

    Raises:
        KeyError: an unknown dtype; ValueError: a per-channel parameter without an axis.
    """
    lo, hi = RANGES[dtype]
    a = np.asarray(x, dtype=np.float64)
    q = np.rint(a / _per_axis(scale, a.ndim, axis)) + _per_axis(zero_point, a.ndim, axis)
    return np.clip(q, lo, hi).astype(np.int64)


def dequantize(q: np.ndarray, scale, zero_point=0, axis: int | None = None) -> np.ndarray:
    """``(q − zero_point) · scale`` in float64 (scale / zero point scalar or 1-D along ``axis``)."""
    a = np.asarray(q, dtype=np.float64)
    return (a - _per_axis(zero_point, a.ndim, axis)) * _per_axis(scale, a.ndim, axis)


def qlinear_binary(op: str, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp, dtype: str) -> np.ndarray:
    """QLinearAdd (``op="add"``) / QLinearMul (``"mul"``) with numpy broadcasting.

    Schema: ``C = (A_scale(A − A_zp) + B_scale(B − B_zp)) / C_scale + C_zp`` (Add),
    ``C = (A − A_zp)(B − B_zp) · A_scale·B_scale / C_scale + C_zp`` (Mul), rounded half to
    even and saturated; absent zero points are 0 (``qlinear_binary_op.cc`` ``QLinearImpl``).
    """
    fa, fb = dequantize(a, a_scale, a_zp), dequantize(b, b_scale, b_zp)
    if op == "add":
        y = fa + fb
    elif op == "mul":
        y = fa * fb
    else:
        raise ValueError(f"unknown binary op {op!r}")
    return quantize(y, c_scale, c_zp, dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def qlinear_unary(op: str, x, x_scale, x_zp, y_scale, y_zp, dtype: str, alpha: float = 0.01) -> np.ndarray:
    """QLinearSigmoid (``op="sigmoid"``) / QLinearLeakyRelu (``"leaky_relu"``, slope ``alpha``
    below 0, schema default 0.01): ``quantize(f(dequantize(x)))``."""
    fx = dequantize(x, x_scale, x_zp)
    if op == "sigmoid":
        y = _sigmoid(fx)
    elif op == "leaky_relu":
        y = np.where(fx >= 0, fx, float(alpha) * fx)
    else:
        raise ValueError(f"unknown unary op {op!r}")
    return quantize(y, y_scale, y_zp, dtype)


def qlinear_softmax(x, x_scale, x_zp, y_scale, y_zp, dtype: str, *, opset: int, axis: int | None = None) -> np.ndarray:
    """QLinearSoftmax: ``quantize(Softmax(dequantize(x)))``.

    ``opset`` ≥ 13 normalizes along ``axis`` (default −1); below 13 the input is coerced to
    (N, D) at ``axis`` (default 1) and each row of D = prod(shape[axis:]) is normalized
    (the schema; ``qlinear_softmax.cc`` constructor and ``ComputeInternal``). A softmax is
    shift-invariant, so ``x_zp`` changes no result (the CPU kernel never reads it).
    """
    fx = dequantize(x, x_scale, x_zp)
    ax = (-1 if opset >= 13 else 1) if axis is None else int(axis)
    ax = ax + fx.ndim if ax < 0 else ax
    if opset >= 13:
        z = fx - fx.max(axis=ax, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(axis=ax, keepdims=True)
    else:
        rows = fx.reshape(int(np.prod(fx.shape[:ax], dtype=np.int64)), -1)
        e = np.exp(rows - rows.max(axis=1, keepdims=True))
        p = (e / e.sum(axis=1, keepdims=True)).reshape(fx.shape)
    return quantize(p, y_scale, y_zp, dtype)


def qlinear_where(condition, x, x_scale, x_zp, y, y_scale, y_zp, z_scale, z_zp, dtype: str) -> np.ndarray:
    """QLinearWhere: ``quantize(where(condition, dequantize(X), dequantize(Y)), z_scale, z_zp)``
    with numpy broadcasting (``qlinear_where.cc``)."""
    fx, fy = dequantize(x, x_scale, x_zp), dequantize(y, y_scale, y_zp)
    return quantize(np.where(np.asarray(condition, dtype=bool), fx, fy), z_scale, z_zp, dtype)


def qlinear_concat(y_scale, y_zp, inputs: Sequence[tuple], axis: int, dtype: str) -> np.ndarray:
    """QLinearConcat: every ``(tensor, scale, zero_point)`` triple dequantized, concatenated
    along ``axis`` and quantized with Y's scale and zero point (``qlinear_concat.cc``:
    an input whose scale and zero point equal Y's is copied, which is the same thing)."""
    parts = [dequantize(t, s, z) for t, s, z in inputs]
    return quantize(np.concatenate(parts, axis=axis), y_scale, y_zp, dtype)


def _pool_geometry(size: int, k: int, s: int, begin: int, end: int, ceil_mode: bool) -> int:
    span = size + begin + end - k
    return (math.ceil(span / s) if ceil_mode else span // s) + 1


def _auto_pads(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], auto_pad: str) -> list[int]:
    """ONNX ``auto_pad``: SAME_UPPER puts the odd pad at the end, SAME_LOWER at the start;
    VALID pads nothing (ONNX AveragePool spec)."""
    if auto_pad in ("", "NOTSET", "VALID"):
        return [0] * (2 * len(spatial))
    begins, ends = [], []
    for size, k, s in zip(spatial, kernel, strides):
        out = -(-size // s)
        total = max(0, (out - 1) * s + k - size)
        small, big = total // 2, total - total // 2
        begins.append(big if auto_pad == "SAME_LOWER" else small)
        ends.append(small if auto_pad == "SAME_LOWER" else big)
    return begins + ends


def average_pool(x: np.ndarray, kernel_shape: Sequence[int], *, strides: Sequence[int] | None = None,
                 pads: Sequence[int] | None = None, count_include_pad: int = 0, ceil_mode: int = 0,
                 auto_pad: str = "NOTSET") -> np.ndarray:
    """ONNX AveragePool over the trailing ``len(kernel_shape)`` axes of an (N, C, ...) array,
    float64. A window averages the input positions it covers; with ``count_include_pad``
    it divides by the full kernel size (padded zeros count). Windows that ``ceil_mode``
    adds past the padded end are clipped like any other (the probes do not combine the two).
    """
    a = np.asarray(x, dtype=np.float64)
    nd = len(kernel_shape)
    spatial = a.shape[2:]
    if len(spatial) != nd:
        raise ValueError(f"a {nd}-D kernel needs {nd} spatial axes, got shape {a.shape}")
    st = list(strides or [1] * nd)
    pd = list(pads) if pads else _auto_pads(spatial, kernel_shape, st, auto_pad)
    outs = [_pool_geometry(spatial[i], kernel_shape[i], st[i], pd[i], pd[i + nd], bool(ceil_mode))
            for i in range(nd)]
    y = np.zeros(a.shape[:2] + tuple(outs))
    full = int(np.prod(kernel_shape))
    for idx in np.ndindex(*outs):
        sl, count = [], 1
        for i, o in enumerate(idx):
            start = o * st[i] - pd[i]
            stop = min(start + kernel_shape[i], spatial[i])
            start = max(start, 0)
            sl.append(slice(start, stop))
            count *= max(stop - start, 0)
        window = a[(slice(None), slice(None), *sl)]
        denom = full if count_include_pad else count
        y[(slice(None), slice(None), *idx)] = window.sum(axis=tuple(range(2, 2 + nd))) / denom
    return y


def _to_nchw(a: np.ndarray) -> np.ndarray:
    return np.moveaxis(a, -1, 1)


def qlinear_average_pool(x, x_scale, x_zp, y_scale, y_zp, dtype: str, *, kernel_shape, channels_last: int = 0,
                         **pool) -> np.ndarray:
    """QLinearAveragePool: ``quantize(AveragePool(dequantize(X)))``; ``channels_last`` reads
    and writes (N, spatial..., C) (``qlinear_pool.cc`` ``ComputeImpl``)."""
    fx = dequantize(x, x_scale, x_zp)
    if channels_last:
        fx = _to_nchw(fx)
    y = average_pool(fx, kernel_shape, **pool)
    if channels_last:
        y = np.moveaxis(y, 1, -1)
    return quantize(y, y_scale, y_zp, dtype)


def qlinear_global_average_pool(x, x_scale, x_zp, y_scale, y_zp, dtype: str, *, channels_last: int = 0) -> np.ndarray:
    """QLinearGlobalAveragePool: the mean over every spatial axis, keeping them as size 1
    ((N, C, 1, ...) or (N, 1, ..., C) with ``channels_last``)."""
    fx = dequantize(x, x_scale, x_zp)
    axes = tuple(range(1, fx.ndim - 1)) if channels_last else tuple(range(2, fx.ndim))
    return quantize(fx.mean(axis=axes, keepdims=True), y_scale, y_zp, dtype)
