"""An exact-coordinate reference for Resize (opset 11 and later): nearest, linear, cubic.

Why not ``onnx.reference``: it computes the source coordinate in floating point, so an
exact ``.5`` tie (the case ``nearest_mode`` exists for) lands a rounding error to either
side: with sizes 20 -> 6 and ``half_pixel``, output 4 maps to ``(4 + 1/2) * 20/6 - 1/2 =
14.5`` exactly, which float arithmetic gives as 14.499999... or 14.500000...2, and
``round_prefer_floor`` then picks 15 or ``round_prefer_ceil`` 14, against the spec; and its
cubic weights at a coordinate that should be a whole number go wrong (measured, onnx 1.23.2:
15 -> 11 rows, output 5 maps to row 7 exactly, the evaluator returns row 6's value, ORT 1.31.1
row 7's). Here the
coordinate is a :class:`fractions.Fraction`: with ``sizes``, ``scale = output / input``
exactly (docs/Operators.md, Resize: "scale = output_size / input_size"); with ``scales``,
the float value given, as the exact binary fraction it is (0.3f is
0.300000011920928955078125: no tie). Output sizes from ``scales`` are
``floor(input * scale)``.

Coordinate transformations (the spec's formulas, ``x`` the output index):
``half_pixel`` ``(x + 1/2) / scale - 1/2``; ``pytorch_half_pixel`` the same when the output
is longer than 1, else 0; ``asymmetric`` ``x / scale``; ``align_corners``
``x * (in - 1) / (out - 1)`` (0 for an output of 1); ``half_pixel_symmetric``
``in/2 * (1 - out / (in * scale)) + (x + 1/2) / scale - 1/2``. ``nearest_mode``:
``round_prefer_floor`` / ``round_prefer_ceil`` round to nearest and break an exact half
down / up; ``floor``, ``ceil``. The index is clamped to ``[0, in - 1]``.
``linear`` weighs the two neighbours ``floor(src)`` and ``floor(src) + 1`` by ``1 - r`` and
``r`` (``r = src - floor(src)``); ``cubic`` the four from ``floor(src) - 1`` with the Keys
kernel of ``cubic_coeff_a`` (onnx's coefficients); a neighbour outside the input reads the
edge (onnx.reference pads by edge, ORT clamps), or, with ``exclude_outside``, weighs 0 and
the rest are renormalized. The weights are exact fractions made float64 at the end.
``tf_crop_and_resize``, ``axes``, ``keep_aspect_ratio_policy`` other than ``stretch`` and
``antialias`` raise ``NotImplementedError``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

__all__ = ["resize", "resize_nearest", "source_index", "source_coordinate"]

_HALF = Fraction(1, 2)


def source_coordinate(x: int, n_in: int, n_out: int, scale: Fraction, ctm: str) -> Fraction:
    """The exact source coordinate of output ``x`` of an axis (module docstring rules).

    Raises:
        NotImplementedError: a transformation this reference does not take.
    """
    if ctm == "half_pixel":
        src = (x + _HALF) / scale - _HALF
    elif ctm == "pytorch_half_pixel":
        src = (x + _HALF) / scale - _HALF if n_out > 1 else Fraction(0)
    elif ctm == "asymmetric":
        src = x / scale
    elif ctm == "align_corners":
        src = Fraction(x * (n_in - 1), n_out - 1) if n_out > 1 else Fraction(0)
    elif ctm == "half_pixel_symmetric":
        adjustment = Fraction(n_out) / (n_in * scale)
        src = Fraction(n_in, 2) * (1 - adjustment) + (x + _HALF) / scale - _HALF
    else:
        raise NotImplementedError(f"coordinate_transformation_mode {ctm!r}")
    return src


def source_index(x: int, n_in: int, n_out: int, scale: Fraction, ctm: str, nearest_mode: str) -> int:
    """The input index output ``x`` of an axis reads under ``mode="nearest"``.

    Raises:
        NotImplementedError: a transformation this reference does not take.
        ValueError: an unknown nearest_mode.
    """
    src = source_coordinate(x, n_in, n_out, scale, ctm)
    fl = math.floor(src)
    frac = src - fl
    if nearest_mode == "round_prefer_floor":
        idx = fl if frac <= _HALF else fl + 1
    elif nearest_mode == "round_prefer_ceil":
        idx = fl if frac < _HALF else fl + 1
    elif nearest_mode == "floor":
        idx = fl
    elif nearest_mode == "ceil":
        idx = math.ceil(src)
    else:
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    return min(max(idx, 0), n_in - 1)


def _cubic(r: Fraction, a: Fraction) -> list[Fraction]:
    s = 1 - r
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def _axis_weights(n_in: int, n_out: int, scale: Fraction, mode: str, ctm: str, nearest_mode: str,
                  cubic_a: Fraction, exclude_outside: bool) -> np.ndarray:
    w = np.zeros((n_out, n_in))
    for x in range(n_out):
        if mode == "nearest":
            w[x, source_index(x, n_in, n_out, scale, ctm, nearest_mode)] = 1.0
            continue
        src = source_coordinate(x, n_in, n_out, scale, ctm)
        base = math.floor(src)
        r = src - base
        if mode == "linear":
            taps = [(base, 1 - r), (base + 1, r)]
        elif mode == "cubic":
            taps = list(zip(range(base - 1, base + 3), _cubic(r, cubic_a)))
        else:
            raise NotImplementedError(f"mode {mode!r}")
        if exclude_outside:
            inside = [(i, c) for i, c in taps if 0 <= i < n_in]
            total = sum(c for _, c in inside)
            taps = [(i, c / total) for i, c in inside] if total else []
        acc: dict[int, Fraction] = {}
        for i, c in taps:
            j = min(max(i, 0), n_in - 1)
            acc[j] = acc.get(j, Fraction(0)) + c
        for j, c in acc.items():
            w[x, j] = float(c)
    return w


def _axis_scale(axis: int, n_in: int, scales, sizes) -> tuple[int, Fraction]:
    """(output length, exact scale) of one axis: from ``sizes`` (``scale = out / in``) or
    from the float value ``scales`` gives (``out = floor(in * scale)``, ONNX Resize spec).

    Raises:
        ValueError: an empty axis resized to a non-empty one, or a scale that is not positive.
    """
    if sizes is not None:
        n_out = int(sizes[axis])
        scale = Fraction(n_out, n_in) if n_in else Fraction(1)
    else:
        scale = Fraction(float(scales[axis]))
        n_out = math.floor(n_in * scale)
    if n_out > 0 and n_in == 0:
        raise ValueError("cannot resize an empty axis to a non-empty one")
    if scale <= 0 and n_out:
        raise ValueError("scales must be positive")
    return n_out, scale


def resize(x: np.ndarray, *, scales: Sequence[float] | None = None, sizes: Sequence[int] | None = None,
           mode: str = "nearest", coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75,
           exclude_outside: int = 0) -> np.ndarray:
    """Resize ``x`` (any rank; ``sizes`` ints or ``scales`` floats, one per axis), float64.

    Raises:
        ValueError: neither or both of scales and sizes, lengths other than x's rank, an
            empty axis resized to a non-empty one.
        NotImplementedError: see the module docstring.
    """
    x = np.asarray(x)
    if (scales is None) == (sizes is None) or len(scales if scales is not None else sizes) != x.ndim:
        raise ValueError("exactly one of scales and sizes, one entry per axis")
    y = x.astype(np.float64)
    a = Fraction(float(cubic_coeff_a))
    for axis, n_in in enumerate(x.shape):
        n_out, scale = _axis_scale(axis, n_in, scales, sizes)
        if n_out == n_in and scale == 1:
            continue
        w = _axis_weights(n_in, n_out, scale, mode, coordinate_transformation_mode, nearest_mode, a,
                          bool(exclude_outside))
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, axis, 0), axes=1), 0, axis)
    return y


def resize_nearest(x: np.ndarray, *, scales: Sequence[float] | None = None, sizes: Sequence[int] | None = None,
                   coordinate_transformation_mode: str = "half_pixel",
                   nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    """Resize ``x`` with ``mode="nearest"``: ``sizes`` (ints) or ``scales`` (the float
    values given), one per axis of ``x``; float64 out for float in, the dtype kept otherwise.

    Raises:
        ValueError: neither or both of scales and sizes, or lengths other than x's rank.
        NotImplementedError: see the module docstring.
    """
    x = np.asarray(x)
    if (scales is None) == (sizes is None) or len(scales if scales is not None else sizes) != x.ndim:
        raise ValueError("exactly one of scales and sizes, one entry per axis")
    index = []
    for a, n_in in enumerate(x.shape):
        n_out, scale = _axis_scale(a, n_in, scales, sizes)
        index.append(np.array([source_index(i, n_in, n_out, scale, coordinate_transformation_mode, nearest_mode)
                               for i in range(n_out)], dtype=np.int64))
    out = x[np.ix_(*index)] if all(len(i) for i in index) else np.zeros([len(i) for i in index], x.dtype)
    return out.astype(np.float64) if out.dtype.kind == "f" else out
