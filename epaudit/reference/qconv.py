"""Float64 / exact-integer reference for ``com.microsoft.QLinearConv`` (version 1).

The com.microsoft schema has no text of its own (every doc string is empty in
``get_all_operator_schema()``); its inputs, attributes and types are those of the ONNX
``QLinearConv`` (ONNX operator spec): ``y = saturate(round_half_even((Σ (x − x_zp)(w − w_zp) + B)
· x_scale · w_scale[m] / y_scale) + y_zp)``, with the ONNX Conv geometry (``strides``,
``pads``, ``dilations``, ``group``, ``auto_pad``) and an int32 bias ``B`` already quantized
with scale ``x_scale · w_scale[m]``. The extra ``channels_last`` attribute reads and writes
(N, H, W, C) (``onnxruntime/core/providers/cpu/quantization/qlinearconv.cc``, whose CPU
kernel also requires one w zero point shared by every output channel:
"QLinearConv : zero point of per-channel filter must be same").

The accumulation is done in exact integers (int64), so only the final requantization
(float32 ``x_scale · w_scale / y_scale`` in the kernel, float64 here) can differ by a step.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .qlinear import _auto_pads, quantize

__all__ = ["conv2d_int", "qlinear_conv"]


def conv2d_int(x: np.ndarray, w: np.ndarray, *, strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
               dilations: Sequence[int] = (1, 1), group: int = 1) -> np.ndarray:
    """Exact 2-D convolution (ONNX Conv, cross-correlation) of integer arrays.

    Args:
        x: (N, C, H, W) int64.
        w: (M, C / group, kH, kW) int64.
        strides, dilations: (sH, sW), (dH, dW).
        pads: (top, left, bottom, right), zeros.
        group: channel groups; C and M divisible by it.

    Returns:
        (N, M, oH, oW) int64.

    Raises:
        ValueError: channels that do not divide into ``group``.
    """
    n, ch, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    if ch != cg * group or m % group:
        raise ValueError(f"x has {ch} channels, w expects {cg} x group {group}; M={m}")
    xp = np.pad(np.asarray(x, np.int64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[2] - eh) // strides[0] + 1
    ow = (xp.shape[3] - ew) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), dtype=np.int64)
    per = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        wg = np.asarray(w[g * per:(g + 1) * per], np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:strides[0],
                           j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * per:(g + 1) * per] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    return y


def qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias=None, *, dtype: str,
                 strides=None, pads=None, dilations=None, group: int = 1, auto_pad: str = "NOTSET",
                 kernel_shape=None, channels_last: int = 0) -> np.ndarray:
    """Expected ``y`` of one QLinearConv node (2-D), int64 values of ``dtype``'s range.

    Args:
        x: (N, C, H, W), or (N, H, W, C) with ``channels_last``; uint8/int8 codes.
        w: (M, C / group, kH, kW) codes; ``w_scale``/``w_zp`` scalar or (M,).
        bias: int32 (M,) or None.
        dtype: the output type (y_zero_point's).
        strides, pads, dilations, group, auto_pad, kernel_shape: the ONNX Conv attributes.

    Raises:
        ValueError: a ``kernel_shape`` that disagrees with ``w``.
    """
    xa = np.asarray(x, np.int64)
    if channels_last:
        xa = np.moveaxis(xa, -1, 1)
    wa = np.asarray(w, np.int64)
    if kernel_shape is not None and tuple(kernel_shape) != wa.shape[2:]:
        raise ValueError(f"kernel_shape {tuple(kernel_shape)} disagrees with w {wa.shape}")
    st = tuple(strides or (1, 1))
    dl = tuple(dilations or (1, 1))
    if pads:
        pd = tuple(pads)
    else:
        eff = [(k - 1) * d + 1 for k, d in zip(wa.shape[2:], dl)]
        pd = tuple(_auto_pads(xa.shape[2:], eff, st, auto_pad))
    m = wa.shape[0]
    wz = np.broadcast_to(np.asarray(w_zp, np.int64).reshape(-1), (m,)) if np.size(w_zp) > 1 else np.full(m, int(np.asarray(w_zp).reshape(-1)[0]))
    acc = conv2d_int(xa - int(np.asarray(x_zp).reshape(-1)[0]), wa - wz[:, None, None, None], strides=st, pads=pd,
                     dilations=dl, group=group)
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)[None, :, None, None]
    ws = np.asarray(w_scale, np.float64).reshape(-1)
    ws = np.broadcast_to(ws, (m,)) if ws.size == 1 else ws
    real = acc * (float(np.asarray(x_scale).reshape(-1)[0]) * ws)[None, :, None, None]
    y = quantize(real, y_scale, y_zp, dtype)
    return np.moveaxis(y, 1, -1) if channels_last else y
