"""References for the ai.onnx operators onnx dropped that ORT's CPU EP still runs from old
models (opset <= 9): ``Affine``, ``ScaledTanh``, ``ParametricSoftplus``, ``Scale``,
``ImageScaler``, ``Crop``, ``DynamicSlice`` (ORT keeps their version-1 schemas; version 10
is a deprecation marker), plus ``GlobalLpPool``-2 and ``MaxRoiPool``-1, which onnx still has.
Values are float64.

Sources: the schema text (``get_all_operator_schema()`` on onnxruntime 1.31.1) and the CPU
kernels (github.com/microsoft/onnxruntime):

* ``Affine``: ``y = alpha * x + beta`` (defaults 1, 0), ``contrib_ops/cpu/element_wise_ops.cc``.
* ``ScaledTanh``: ``y = alpha * tanh(beta * x)``; ``ParametricSoftplus``:
  ``y = alpha * ln(exp(beta * x) + 1)``, computed by the kernel as
  ``beta*x + ln(exp(-beta*x) + 1)`` for ``beta*x > 0`` (``contrib_ops/cpu/activations.h``).
  The schemas give neither attribute a default and the kernels refuse a node without them
  ("No attribute with name:'alpha'is defined", measured on 1.31.1).
* ``Scale``: ``y = scale * x`` (default 1), ``contrib_ops/cpu/element_wise_ops.cc``.
* ``ImageScaler``: ``y[n, c] = scale * x[n, c] + bias[c]`` on (N, C, H, W), ``scale``
  default 1; ``bias`` is read unconditionally (``contrib_ops/cpu/image_scaler.h``).
* ``Crop``: ``border`` = (left, top, right, bottom); rows ``top .. H - bottom`` and columns
  ``left .. W - right``, or with ``scale`` = (height, width) rows ``top .. top + height``
  and columns ``left .. left + width`` (``contrib_ops/cpu/crop.h``).
* ``DynamicSlice``: ONNX Slice-10 semantics with ``starts``/``ends``/``axes`` as inputs:
  negative values count from the end, values past the end clamp, ``axes`` default
  ``0 .. len(starts) - 1`` (the schema doc and its two examples).
* ``GlobalLpPool``: ``(sum |x|^p)^(1/p)`` over every spatial axis, ``p`` an int, default 2
  (``core/providers/cpu/nn/pool.cc``, ``pool_base.h`` LpPool).
* ``MaxRoiPool``: per ROI ``[batch, x1, y1, x2, y2]`` scaled by ``spatial_scale`` and
  rounded half away from zero, a (h2 - h1 + 1, w2 - w1 + 1) region (at least 1x1) cut into
  ``pooled_shape`` bins ``floor(i * bin) .. ceil((i + 1) * bin)`` (float32 bin sizes),
  clipped to the image, the max of each bin; an empty bin is 0
  (``core/providers/cpu/nn/roi_pool.cc``). That kernel starts each bin at
  ``numeric_limits<float>::min()`` (the smallest positive float, not the lowest), so a bin
  of negative values reads ~1e-38 there: the probes feed positive data only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["affine", "scaled_tanh", "parametric_softplus", "scale", "image_scaler", "crop",
           "dynamic_slice", "global_lp_pool", "max_roi_pool"]


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def affine(x, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """``alpha * x + beta``."""
    return float(alpha) * _f(x) + float(beta)


def scaled_tanh(x, alpha: float, beta: float) -> np.ndarray:
    """``alpha * tanh(beta * x)``."""
    return float(alpha) * np.tanh(float(beta) * _f(x))


def parametric_softplus(x, alpha: float, beta: float) -> np.ndarray:
    """``alpha * ln(exp(beta * x) + 1)`` (``logaddexp(0, beta * x)``: no overflow)."""
    return float(alpha) * np.logaddexp(0.0, float(beta) * _f(x))


def scale(x, scale: float = 1.0) -> np.ndarray:  # noqa: A002 - the attribute's name
    """``scale * x``."""
    return float(scale) * _f(x)


def image_scaler(x, bias: Sequence[float], scale: float = 1.0) -> np.ndarray:
    """``scale * x + bias[c]`` of an (N, C, H, W) ``x``.

    Raises:
        ValueError: ``x`` not 4-D, or ``bias`` not of length C.
    """
    a = _f(x)
    b = np.asarray(bias, dtype=np.float64)
    if a.ndim != 4 or b.shape != (a.shape[1],):
        raise ValueError(f"ImageScaler takes (N, C, H, W) and C biases, got {a.shape} and {b.shape}")
    return float(scale) * a + b.reshape(1, -1, 1, 1)


def crop(x, border: Sequence[int], scale: Sequence[int] | None = None) -> np.ndarray:
    """The (N, C, H, W) ``x`` cropped by ``border`` (left, top, right, bottom), or from its
    left/top border to ``scale`` = (height, width).

    Raises:
        ValueError: ``border`` not of 4, or a crop past the image (the kernel's checks).
    """
    a = _f(x)
    if len(border) != 4 or a.ndim != 4:
        raise ValueError("Crop takes a 4-D input and four borders")
    left, top, right, bottom = (int(v) for v in border)
    h, w = a.shape[2:]
    bottom_limit, right_limit = h - bottom, w - right
    if scale:
        bottom_limit, right_limit = top + int(scale[0]), left + int(scale[1])
    if top + bottom > h or left + right > w or bottom_limit > h or right_limit > w:
        raise ValueError("crop past the image")
    return a[:, :, top:bottom_limit, left:right_limit]


def dynamic_slice(data, starts, ends, axes=None) -> np.ndarray:
    """``data`` sliced along ``axes`` (default ``0 .. len(starts) - 1``) from ``starts`` to
    ``ends`` (exclusive; negative from the end; clamped to the axis). Keeps ``data``'s dtype."""
    a = np.asarray(data)
    starts = [int(v) for v in np.ravel(starts)]
    ends = [int(v) for v in np.ravel(ends)]
    axes = list(range(len(starts))) if axes is None else [int(v) for v in np.ravel(axes)]
    index = [slice(None)] * a.ndim
    for s, e, ax in zip(starts, ends, axes):
        n = a.shape[ax]
        s = min(max(s + n if s < 0 else s, 0), n)
        e = min(max(e + n if e < 0 else e, 0), n)
        index[ax if ax >= 0 else ax + a.ndim] = slice(s, e)
    return a[tuple(index)]


def global_lp_pool(x, p: int = 2) -> np.ndarray:
    """``(sum |x|^p)^(1/p)`` over every axis after the first two, kept as 1s."""
    a = _f(x)
    axes = tuple(range(2, a.ndim))
    return np.power(np.sum(np.power(np.abs(a), int(p)), axis=axes, keepdims=True), 1.0 / int(p))


def _round_away(v: float) -> int:
    """C ``round``: half away from zero."""
    return int(np.sign(v) * np.floor(abs(v) + 0.5))


def max_roi_pool(x, rois, pooled_shape: Sequence[int], spatial_scale: float = 1.0) -> np.ndarray:
    """(num_rois, C, ph, pw) maxima of each ROI's bins (module docstring).

    Raises:
        ValueError: ``rois`` not (num_rois, 5), or a batch index outside ``x``.
    """
    a = _f(x)
    r = np.asarray(rois, dtype=np.float32)
    if r.ndim != 2 or r.shape[1] != 5:
        raise ValueError(f"rois must be (num_rois, 5), got {r.shape}")
    n, c, height, width = a.shape
    ph_n, pw_n = (int(v) for v in pooled_shape)
    out = np.zeros((r.shape[0], c, ph_n, pw_n))
    sc = np.float32(spatial_scale)
    for i, (b, x1, y1, x2, y2) in enumerate(r):
        if not 0 <= int(b) < n:
            raise ValueError(f"roi batch index {b} outside the batch")
        w1, h1, w2, h2 = (_round_away(float(np.float32(v) * sc)) for v in (x1, y1, x2, y2))
        bin_h = np.float32(max(h2 - h1 + 1, 1)) / np.float32(ph_n)
        bin_w = np.float32(max(w2 - w1 + 1, 1)) / np.float32(pw_n)
        for ph in range(ph_n):
            hs = min(max(int(np.floor(np.float32(ph) * bin_h)) + h1, 0), height)
            he = min(max(int(np.ceil(np.float32(ph + 1) * bin_h)) + h1, 0), height)
            for pw in range(pw_n):
                ws = min(max(int(np.floor(np.float32(pw) * bin_w)) + w1, 0), width)
                we = min(max(int(np.ceil(np.float32(pw + 1) * bin_w)) + w1, 0), width)
                if he > hs and we > ws:
                    out[i, :, ph, pw] = a[int(b), :, hs:he, ws:we].max(axis=(1, 2))
    return out
