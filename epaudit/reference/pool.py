"""Float64 references for AveragePool, MaxPool and LpPool, written from the ONNX spec.

Why not ``onnx.reference``: its pooling loses windows that start inside the begin pad
(measured, onnx 1.23.2: AveragePool-11/19/22, ``X`` of shape [1, 1, 1, 1] of ones,
``kernel_shape=[4, 1]``, ``pads=[3, 0, 1, 0]``, ``strides=[3, 1]``, ``ceil_mode=1``,
``count_include_pad=1`` gives ``[0, 0.5]``; the spec's window 0 holds three pad rows and
the one input row, ``1 / 4 = 0.25``, which onnxruntime 1.31.1 computes; not found upstream).

The rules (AveragePool-22 / MaxPool-22, onnx docs/Operators.md, and onnx PRs #5741 and
#6650, which state them for every version):

* output size per spatial axis, explicit pads: ``floor`` (``ceil`` under ``ceil_mode``) of
  ``(in + pad_begin + pad_end - ((k - 1) * d + 1)) / s + 1``; under ``ceil_mode`` a last
  window that would start in the end pad (``start >= in + pad_begin``) is dropped
  ("Sliding windows that would start in the right padded region are ignored");
* ``auto_pad``: ``SAME_UPPER``/``SAME_LOWER`` give ``ceil(in / s)`` outputs and a total pad
  of ``max((out - 1) * s + (k - 1) * d + 1 - in, 0)``, its odd part at the end (UPPER) or
  the beginning (LOWER); ``VALID`` no pad, ``ceil((in - ((k - 1) * d + 1) + 1) / s)``;
* window ``o`` covers ``o * s - pad_begin + j * d`` for ``j < k``; AveragePool sums the
  positions inside the input and divides by their count (``count_include_pad=0``) or by
  the count of positions inside the *padded* input (``count_include_pad=1``: the pads count,
  the overhang past the end pad under ``ceil_mode`` does not: onnx PR #6650, "pads required
  ... excluded"); MaxPool takes the largest value inside the input; LpPool takes
  ``(Σ |x|^p)^(1/p)`` over the positions inside the input (a pad is a zero: it adds
  nothing). onnx.reference's LpPool (onnx 1.23.2) counts a position past the input under
  ``ceil_mode``: ``X`` (1, 1, 1, 2) of ones, ``kernel_shape=[3, 3]``, ``pads=[0, 1, 2, 1]``,
  ``strides=[1, 2]``, ``ceil_mode=1`` gives ``[1.414, 1.225]`` where the last window holds
  one input element, ``1.0``, as ORT 1.31.1 computes.

Inputs are ``(N, C, D1, ..., Dn)``; the outputs are float64.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

__all__ = ["pool_geometry", "average_pool", "max_pool", "lp_pool"]


def pool_geometry(size: Sequence[int], kernel: Sequence[int], strides: Sequence[int] | None = None,
                  pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
                  ceil_mode: int = 0, auto_pad: str = "NOTSET") -> tuple[list[int], list[int], list[int]]:
    """``(output sizes, begin pads, end pads)`` per spatial axis (module docstring rules).

    Raises:
        ValueError: a window that does not fit (no output), or lengths that disagree.
    """
    r = len(size)
    strides = list(strides or [1] * r)
    dil = list(dilations or [1] * r)
    pads = list(pads or [0] * (2 * r))
    if len(kernel) != r or len(strides) != r or len(dil) != r or len(pads) != 2 * r:
        raise ValueError("kernel_shape, strides, dilations and pads must match the spatial rank")
    out, begin, end = [], [], []
    for a in range(r):
        span = (kernel[a] - 1) * dil[a] + 1
        n, s = size[a], strides[a]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s)
            total = max((o - 1) * s + span - n, 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pb, pe = lo, total - lo
        elif auto_pad == "VALID":
            o = -(-(n - span + 1) // s)
            pb = pe = 0
        else:
            pb, pe = pads[a], pads[a + r]
            q = (n + pb + pe - span) / s + 1
            o = math.ceil(q) if ceil_mode else math.floor(q)
            if ceil_mode and o > 0 and (o - 1) * s >= n + pb:
                o -= 1
        if o <= 0:
            raise ValueError(f"axis {a}: no window fits (input {n}, window {span}, pads {pb}+{pe})")
        out.append(o)
        begin.append(pb)
        end.append(pe)
    return out, begin, end


def _windows(x, kernel, strides, pads, dilations, ceil_mode, auto_pad):
    x = np.asarray(x, dtype=np.float64)
    size = list(x.shape[2:])
    r = len(size)
    strides = list(strides or [1] * r)
    dil = list(dilations or [1] * r)
    out, begin, end = pool_geometry(size, kernel, strides, pads, dil, ceil_mode, auto_pad)
    for o in itertools.product(*(range(n) for n in out)):
        inside, padded = [], []
        for a in range(r):
            pos = [o[a] * strides[a] - begin[a] + j * dil[a] for j in range(kernel[a])]
            inside.append([p for p in pos if 0 <= p < size[a]])
            padded.append([p for p in pos if -begin[a] <= p < size[a] + end[a]])
        yield o, inside, padded
    return


def average_pool(x: np.ndarray, kernel: Sequence[int], *, strides=None, pads=None, dilations=None,
                 ceil_mode: int = 0, count_include_pad: int = 0, auto_pad: str = "NOTSET") -> np.ndarray:
    """AveragePool of ``x`` (N, C, spatial...), float64.

    Raises:
        ValueError: a window with no input element under ``count_include_pad=0`` (0 / 0),
            or a geometry :func:`pool_geometry` refuses.
    """
    x = np.asarray(x, dtype=np.float64)
    out_shape, _, _ = pool_geometry(list(x.shape[2:]), kernel, strides, pads, dilations, ceil_mode, auto_pad)
    y = np.zeros(x.shape[:2] + tuple(out_shape))
    for o, inside, padded in _windows(x, kernel, strides, pads, dilations, ceil_mode, auto_pad):
        idx = np.ix_(*inside) if all(inside) else None
        total = x[(slice(None), slice(None)) + idx].sum(axis=tuple(range(2, x.ndim))) if idx is not None else 0.0
        count = int(np.prod([len(p) for p in (padded if count_include_pad else inside)]))
        if count == 0:
            raise ValueError("a window holds no element to average")
        y[(slice(None), slice(None)) + o] = total / count
    return y


def max_pool(x: np.ndarray, kernel: Sequence[int], *, strides=None, pads=None, dilations=None,
             ceil_mode: int = 0, auto_pad: str = "NOTSET") -> np.ndarray:
    """MaxPool's ``Y`` of ``x`` (N, C, spatial...), float64.

    Raises:
        ValueError: a window with no input element (the spec leaves it undefined), or a
            geometry :func:`pool_geometry` refuses.
    """
    x = np.asarray(x, dtype=np.float64)
    out_shape, _, _ = pool_geometry(list(x.shape[2:]), kernel, strides, pads, dilations, ceil_mode, auto_pad)
    y = np.zeros(x.shape[:2] + tuple(out_shape))
    for o, inside, _ in _windows(x, kernel, strides, pads, dilations, ceil_mode, auto_pad):
        if not all(inside):
            raise ValueError("a window holds no input element")
        y[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + np.ix_(*inside)].max(
            axis=tuple(range(2, x.ndim)))
    return y


def lp_pool(x: np.ndarray, kernel: Sequence[int], *, p: int = 2, strides=None, pads=None, dilations=None,
            ceil_mode: int = 0, auto_pad: str = "NOTSET") -> np.ndarray:
    """LpPool of ``x`` (N, C, spatial...), float64: ``(Σ |x|^p)^(1/p)`` per window over
    the positions inside the input (0 for a window of pads only).

    Raises:
        ValueError: a geometry :func:`pool_geometry` refuses.
    """
    x = np.asarray(x, dtype=np.float64)
    out_shape, _, _ = pool_geometry(list(x.shape[2:]), kernel, strides, pads, dilations, ceil_mode, auto_pad)
    y = np.zeros(x.shape[:2] + tuple(out_shape))
    for o, inside, _ in _windows(x, kernel, strides, pads, dilations, ceil_mode, auto_pad):
        if all(inside):
            part = np.abs(x[(slice(None), slice(None)) + np.ix_(*inside)]) ** p
            y[(slice(None), slice(None)) + o] = part.sum(axis=tuple(range(2, x.ndim))) ** (1.0 / p)
    return y
