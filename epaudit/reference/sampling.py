"""Float64 references for the ``com.microsoft`` sampling operators (version 1):
``GridSample`` and ``CropAndResize``.

* ``GridSample`` (4-D input only, schema doc): for output ``Y[n, c, h, w]`` the grid holds
  normalized ``(x, y)`` in [−1, 1]; they are denormalized to pixel coordinates
  (``align_corners=1``: ``(g + 1) / 2 · (size − 1)``; 0: ``((g + 1) · size − 1) / 2``), then
  sampled with ``mode`` ``bilinear`` (2x2 taps), ``nearest`` (round half to even) or
  ``bicubic`` (4x4 taps, Keys cubic with ``a = −0.75``); ``padding_mode`` ``zeros`` reads
  taps outside the image as 0, ``border`` clamps the coordinate to [0, size − 1] and
  ``reflection`` reflects it about the borders ([0, size − 1] with aligned corners, else
  [−0.5, size − 0.5]) before sampling (bicubic: each tap index is clamped / reflected). The
  schema points at ``torch.nn.functional.grid_sample`` for these rules; they are ONNX
  GridSample-16's, whose ``onnx.reference`` evaluator the tests compare against.
* ``CropAndResize`` (TensorFlow ``crop_and_resize``, the CPU kernel's origin,
  ``onnxruntime/contrib_ops/cpu/crop_and_resize.cc``): for box ``[y1, x1, y2, x2]`` (normalized)
  and a crop of (ch, cw), sample rows ``y1 (H − 1) + i · (y2 − y1)(H − 1) / (ch − 1)`` (the box
  centre when ch = 1), columns likewise; a sample outside [0, H − 1] × [0, W − 1] is
  ``extrapolation_value``; ``bilinear`` interpolates the 2x2 neighbours, ``nearest`` takes the
  rounded position (half away from zero). Output (num_boxes, C, ch, cw), rows read from
  image ``batch_indices[box]``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["grid_sample", "crop_and_resize", "cubic_weights"]


def cubic_weights(t: float, a: float = -0.75) -> np.ndarray:
    """Keys cubic convolution weights of the 4 taps at offsets −1, 0, 1, 2 for a fraction ``t``."""
    def k(s: float) -> float:
        s = abs(s)
        if s <= 1:
            return (a + 2) * s ** 3 - (a + 3) * s ** 2 + 1
        if s < 2:
            return a * s ** 3 - 5 * a * s ** 2 + 8 * a * s - 4 * a
        return 0.0
    return np.array([k(t + 1), k(t), k(1 - t), k(2 - t)])


def _denorm(g: float, size: int, align: bool) -> float:
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(v: float, lo: float, hi: float) -> float:
    span = hi - lo
    if span <= 0:
        return lo
    if v < lo:
        d = lo - v
        n, r = int(d // span), d % span
        return lo + r if n % 2 == 0 else hi - r
    if v > hi:
        d = v - hi
        n, r = int(d // span), d % span
        return hi - r if n % 2 == 0 else lo + r
    return v


def _coord(v: float, size: int, align: bool, padding: str) -> float:
    if padding == "border":
        return min(max(v, 0.0), size - 1.0)
    if padding == "reflection":
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        return min(max(_reflect(v, lo, hi), 0.0), size - 1.0)
    return v


def _tap(img: np.ndarray, yi: int, xi: int, padding: str, align: bool) -> float:
    h, w = img.shape
    if padding == "zeros":
        return float(img[yi, xi]) if 0 <= yi < h and 0 <= xi < w else 0.0
    if padding == "reflection":
        lo_h, hi_h = (0.0, h - 1.0) if align else (-0.5, h - 0.5)
        lo_w, hi_w = (0.0, w - 1.0) if align else (-0.5, w - 0.5)
        yi, xi = int(_reflect(yi, lo_h, hi_h)), int(_reflect(xi, lo_w, hi_w))
    return float(img[min(max(yi, 0), h - 1), min(max(xi, 0), w - 1)])


def grid_sample(x: np.ndarray, grid: np.ndarray, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: int = 0) -> np.ndarray:
    """GridSample of ``x`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2) → (N, C, Ho, Wo), float64.

    Raises:
        ValueError: a non-4-D input, or an unknown mode / padding mode.
    """
    x = np.asarray(x, np.float64)
    grid = np.asarray(grid, np.float64)
    mode = mode.decode() if isinstance(mode, bytes) else mode
    padding_mode = padding_mode.decode() if isinstance(padding_mode, bytes) else padding_mode
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise ValueError("GridSample takes X (N, C, H, W) and Grid (N, Ho, Wo, 2)")
    if mode not in ("bilinear", "nearest", "bicubic") or padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"unknown mode {mode!r} or padding_mode {padding_mode!r}")
    n, c, h, w = x.shape
    align = bool(align_corners)
    y = np.zeros((n, c) + grid.shape[1:3])
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx, gy = grid[b, i, j]
                px, py = _denorm(gx, w, align), _denorm(gy, h, align)
                for ch in range(c):
                    img = x[b, ch]
                    if mode == "bicubic":
                        x0, y0 = math.floor(px), math.floor(py)
                        wx, wy = cubic_weights(px - x0), cubic_weights(py - y0)
                        taps = np.array([[_tap(img, y0 - 1 + r, x0 - 1 + s, padding_mode, align) for s in range(4)]
                                         for r in range(4)])
                        y[b, ch, i, j] = wy @ taps @ wx
                        continue
                    cx, cy = _coord(px, w, align, padding_mode), _coord(py, h, align, padding_mode)
                    if mode == "nearest":
                        y[b, ch, i, j] = _tap(img, int(np.rint(cy)), int(np.rint(cx)), padding_mode, align)
                        continue
                    x0, y0 = math.floor(cx), math.floor(cy)
                    fx, fy = cx - x0, cy - y0
                    y[b, ch, i, j] = ((1 - fy) * ((1 - fx) * _tap(img, y0, x0, padding_mode, align)
                                                  + fx * _tap(img, y0, x0 + 1, padding_mode, align))
                                      + fy * ((1 - fx) * _tap(img, y0 + 1, x0, padding_mode, align)
                                              + fx * _tap(img, y0 + 1, x0 + 1, padding_mode, align)))
    return y


def _positions(lo: float, hi: float, size: int, count: int) -> list[float]:
    if count == 1:
        return [0.5 * (lo + hi) * (size - 1)]
    return [lo * (size - 1) + i * (hi - lo) * (size - 1) / (count - 1) for i in range(count)]


def crop_and_resize(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, crop_size: np.ndarray,
                    mode: str = "bilinear", extrapolation_value: float = 0.0) -> np.ndarray:
    """CropAndResize of ``x`` (N, C, H, W) over ``rois`` (R, 4) → (R, C, ch, cw), float64.

    Raises:
        ValueError: a batch index outside [0, N) or a non-positive crop size.
    """
    x = np.asarray(x, np.float64)
    rois = np.asarray(rois, np.float64)
    ch, cw = (int(v) for v in np.asarray(crop_size).reshape(-1)[:2])
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if ch <= 0 or cw <= 0:
        raise ValueError("crop_size must be positive")
    n, c, h, w = x.shape
    out = np.full((rois.shape[0], c, ch, cw), float(extrapolation_value))
    for r, (y1, x1, y2, x2) in enumerate(rois):
        b = int(np.asarray(batch_indices).reshape(-1)[r])
        if not 0 <= b < n:
            raise ValueError(f"batch index {b} outside [0, {n})")
        for i, py in enumerate(_positions(y1, y2, h, ch)):
            if py < 0 or py > h - 1:
                continue
            for j, px in enumerate(_positions(x1, x2, w, cw)):
                if px < 0 or px > w - 1:
                    continue
                if mode == "nearest":
                    yi, xi = (int(math.floor(v + 0.5)) for v in (py, px))  # round half away from zero (v >= 0)
                    out[r, :, i, j] = x[b, :, yi, xi]
                    continue
                y0, x0 = math.floor(py), math.floor(px)
                y1i, x1i = math.ceil(py), math.ceil(px)
                fy, fx = py - y0, px - x0
                top = x[b, :, y0, x0] + (x[b, :, y0, x1i] - x[b, :, y0, x0]) * fx
                bottom = x[b, :, y1i, x0] + (x[b, :, y1i, x1i] - x[b, :, y1i, x0]) * fx
                out[r, :, i, j] = top + (bottom - top) * fy
    return out
