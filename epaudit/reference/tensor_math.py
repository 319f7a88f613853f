"""References for the ``com.microsoft`` tensor and math operators (version 1): ``Pad``,
``GatherND``, ``ExpandDims``, ``Range``, ``Trilu``, ``Inverse``, ``CDist``, ``Unique``,
``UnfoldTensor`` and ``SampleOp``. Values are float64 (integers for index outputs).

Sources: the schema text (ORT ``docs/ContribOperators.md``, ``get_all_operator_schema()`` on
onnxruntime 1.31.1) and the CPU kernels:

* ``Pad``: ``pads`` [x1_begin, x2_begin, …, x1_end, …] (1-D of 2·rank, or (1, 2·rank)),
  negative values remove; modes ``constant`` (``value``, default 0), ``reflect`` (mirror
  without repeating the edge), ``edge`` (``onnxruntime/core/providers/cpu/tensor/pad.cc``,
  the contrib registration of the ONNX Pad kernel).
* ``GatherND``: ``output[i_0 … i_{q-2}] = data[indices[i_0 … i_{q-2}]]`` with the last index
  axis of length ≤ rank(data); negative indices count from the end (ONNX GatherND-11,
  ``batch_dims`` 0).
* ``ExpandDims``: inserts a 1 at ``axis`` (negative: from the end, ``-1`` appends)
  (``onnxruntime/contrib_ops/cpu/expand_dims.h``).
* ``Range``: ``start + i · delta`` for ``i < ceil((limit − start) / delta)``, ``delta`` default 1
  (``onnxruntime/contrib_ops/cpu/range.cc``).
* ``Trilu``: keeps ``j − i ≥ k`` (``upper``, default) or ``j − i ≤ k`` of the last two axes.
* ``Inverse``: the inverse of every matrix of the last two axes.
* ``CDist``: ``sqeuclidean`` (default) and ``euclidean`` between the rows of A (M, N) and B (K, N)
  (``onnxruntime/contrib_ops/cpu/cdist.h``: the two metrics the CPU kernel implements;
  ``cityblock`` is in the schema's list and computed here as ``Σ|a − b|``).
* ``Unique``: uniques in order of first occurrence, the index of every input element in
  them, and their counts (schema example).
* ``UnfoldTensor``: every slice of ``size`` along ``dim`` with stride ``step``, the slice
  appended as a new last axis (torch ``Tensor.unfold``; schema doc).
* ``SampleOp``: a copy of X ("Sample echo operator", ``onnxruntime/contrib_ops/cpu/sample.h``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["pad", "gather_nd", "expand_dims", "range_", "trilu", "inverse", "cdist", "unique",
           "unfold_tensor", "sample_op"]


def pad(data: np.ndarray, pads: np.ndarray, value: np.ndarray | None = None, mode: str = "constant") -> np.ndarray:
    """ORT's contrib Pad, float64.

    Raises:
        ValueError: ``pads`` not of 2·rank elements, or an unknown mode.
    """
    x = np.asarray(data, np.float64)
    p = np.asarray(pads, np.int64).reshape(-1)
    r = x.ndim
    if p.size != 2 * r:
        raise ValueError(f"pads must hold {2 * r} values, got {p.size}")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    # Negative pads crop first; the positive part is padded after.
    crop = tuple(slice(max(0, -int(p[i])), x.shape[i] - max(0, -int(p[i + r]))) for i in range(r))
    x = x[crop]
    widths = [(max(0, int(p[i])), max(0, int(p[i + r]))) for i in range(r)]
    if mode == "constant":
        v = 0.0 if value is None else float(np.asarray(value, np.float64).reshape(-1)[0])
        return np.pad(x, widths, mode="constant", constant_values=v)
    if mode == "reflect":
        return np.pad(x, widths, mode="reflect")
    if mode == "edge":
        return np.pad(x, widths, mode="edge")
    raise ValueError(f"unknown Pad mode {mode!r}")


def gather_nd(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """GatherND with batch_dims 0; ``indices`` (…, m), m ≤ rank(data).

    Raises:
        ValueError: m > rank(data) or an index out of range.
    """
    d = np.asarray(data)
    idx = np.asarray(indices, np.int64)
    m = idx.shape[-1]
    if m > d.ndim:
        raise ValueError(f"indices' last axis {m} exceeds rank {d.ndim}")
    flat = idx.reshape(-1, m)
    out = []
    for row in flat:
        key = []
        for axis, i in enumerate(row):
            n = d.shape[axis]
            if not -n <= i < n:
                raise ValueError(f"index {i} out of range for axis {axis} of size {n}")
            key.append(int(i) % n)
        out.append(d[tuple(key)])
    return np.asarray(out, dtype=np.float64).reshape(idx.shape[:-1] + d.shape[m:])


def expand_dims(x: np.ndarray, axis: int) -> np.ndarray:
    """ExpandDims: ``x`` with a 1 inserted at ``axis`` (−1 appends).

    Raises:
        ValueError: ``axis`` outside [−rank−1, rank].
    """
    a = np.asarray(x, np.float64)
    axis = int(axis)
    if not -a.ndim - 1 <= axis <= a.ndim:
        raise ValueError(f"axis {axis} out of range for rank {a.ndim}")
    return np.expand_dims(a, axis if axis >= 0 else a.ndim + 1 + axis)


def range_(start, limit, delta=None) -> np.ndarray:
    """Range: ``start + i · delta``, ``i < max(0, ceil((limit − start) / delta))``; ``delta`` default 1.

    Raises:
        ValueError: ``delta`` 0.
    """
    s, lim = float(np.asarray(start).reshape(-1)[0]), float(np.asarray(limit).reshape(-1)[0])
    d = 1.0 if delta is None else float(np.asarray(delta).reshape(-1)[0])
    if d == 0:
        raise ValueError("delta must not be 0")
    n = max(0, math.ceil((lim - s) / d))
    return s + d * np.arange(n, dtype=np.float64)


def trilu(x: np.ndarray, k: np.ndarray | int | None = None, upper: int = 1) -> np.ndarray:
    """Trilu over the last two axes: ``upper`` keeps ``j − i ≥ k``, else ``j − i ≤ k``."""
    a = np.asarray(x, np.float64)
    kk = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(a, kk) if upper else np.tril(a, kk)


def inverse(x: np.ndarray) -> np.ndarray:
    """Inverse of each (…, n, n) matrix.

    Raises:
        numpy.linalg.LinAlgError: a singular matrix.
    """
    return np.linalg.inv(np.asarray(x, np.float64))


def cdist(a: np.ndarray, b: np.ndarray, metric: str = "sqeuclidean") -> np.ndarray:
    """Pairwise distances (M, K) between the rows of ``a`` (M, N) and ``b`` (K, N).

    Raises:
        ValueError: non-2-D inputs, different N, or a metric this reference lacks.
    """
    a2, b2 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a2.ndim != 2 or b2.ndim != 2 or a2.shape[1] != b2.shape[1]:
        raise ValueError(f"A {a2.shape} and B {b2.shape} must be (M, N) and (K, N)")
    metric = metric.decode() if isinstance(metric, bytes) else metric
    diff = a2[:, None, :] - b2[None, :, :]
    if metric == "sqeuclidean":
        return (diff ** 2).sum(-1)
    if metric == "euclidean":
        return np.sqrt((diff ** 2).sum(-1))
    if metric == "cityblock":
        return np.abs(diff).sum(-1)
    raise ValueError(f"metric {metric!r} not in this reference")


def unique(x: np.ndarray) -> dict[str, np.ndarray]:
    """``y`` (uniques, first-occurrence order), ``idx`` (int64, x's size), ``counts`` (int64)."""
    v = np.asarray(x).reshape(-1)
    order: dict = {}
    idx = np.empty(v.size, np.int64)
    for i, e in enumerate(v.tolist()):
        if e not in order:
            order[e] = len(order)
        idx[i] = order[e]
    y = np.array(list(order), dtype=np.float64)
    return {"y": y, "idx": idx, "counts": np.bincount(idx, minlength=len(order)).astype(np.int64)}


def unfold_tensor(x: np.ndarray, size: int, step: int = 1, dim: int = -1) -> np.ndarray:
    """UnfoldTensor: slices ``x[…, i·step : i·step + size, …]`` along ``dim``, the slice axis
    appended last; ``(x.shape[dim] − size) // step + 1`` slices.

    Raises:
        ValueError: ``size`` larger than the axis, or ``step`` < 1.
    """
    a = np.asarray(x, np.float64)
    d = dim % a.ndim
    n = a.shape[d]
    if size > n or step < 1:
        raise ValueError(f"size {size} / step {step} do not fit axis {d} of length {n}")
    count = (n - size) // step + 1
    moved = np.moveaxis(a, d, -1)
    windows = np.stack([moved[..., i * step:i * step + size] for i in range(count)], axis=-2)
    return np.moveaxis(windows, -2, d)


def sample_op(x: np.ndarray) -> np.ndarray:
    """SampleOp: a copy of ``x``."""
    return np.array(x, dtype=np.float64)
