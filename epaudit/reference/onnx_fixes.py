"""Float64 references for ai.onnx operators whose ``onnx.reference`` answer is wrong, from the spec.

Each was a false finding of the full CPU sweep (docs/sweep.md) before the sweep took it
(:mod:`epaudit.sweep.contrib`); what onnx.reference (onnx 1.23.2) does is measured:

* **LogSoftmax** (``log_softmax``): ``x - max - log(Σ exp(x - max))`` along ``axis``
  (opset 13: one axis, default -1; opsets 1-11: the input coerced to 2-D at ``axis``,
  default 1). onnx.reference takes ``log(softmax(x))`` and underflows: for ``[0, -2578.35]``
  along the axis it gives ``[0, -inf]``; the spec's (and ORT's) answer is ``[0, -2578.35]``.
* **LRN** (``lrn``): ``square_sum[n, c] = Σ x[n, i]²`` for ``i`` in ``[max(0, c -
  floor((size - 1) / 2)), min(C - 1, c + ceil((size - 1) / 2))]``, ``y = x / (bias + alpha
  / size · square_sum) ** beta``. onnx.reference loops ``c`` over ``x.shape[0]`` (N), not C:
  every channel past the batch size gets ``square_sum = 0`` (``x`` of shape (1, 2, 1, 1),
  ``[11, 2.5]``, ``size=3``: 2.5 where the spec and ORT give 2.4921).
* **NegativeLogLikelihoodLoss** and **SoftmaxCrossEntropyLoss** (``nll_loss``,
  ``softmax_cross_entropy_loss``): ``loss = -input[n, target, d...] · weight[target]`` (weight
  1 without ``weight``), 0 and weight 0 where ``target == ignore_index``; ``mean`` is
  ``Σ loss / Σ weight`` over the samples not ignored (the function bodies' ``ReduceSum(loss)
  / ReduceSum(weight)``; the spec's "(weight) averaged"). onnx.reference special-cases
  ``ignore_index = -1`` without ``weight`` and divides by every sample, ignored ones
  included (``input`` (1, 2, 2), ``target`` ``[-1, 1]``: -2.0 where ORT gives -4.0).
  SoftmaxCrossEntropyLoss is the loss of ``log_softmax(scores, axis=1)``, its second output.
* **Unique** (``unique``): the unique slices along ``axis`` (or elements of the flattened
  input), sorted or in the order of first occurrence (``sorted=0``), with ``indices``,
  ``inverse_indices`` and ``counts``. onnx.reference reorders ``Y`` for ``sorted=0`` with
  ``np.take(x, indices, axis=0)`` whatever the axis: ``X = [[0, 0]]``, ``axis=-1`` gives ``Y``
  of shape (1, 2) beside ``counts = [2]``; the spec's and ORT's ``Y`` is ``[[0]]``.

Inputs are any float dtype; outputs are float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_softmax", "lrn", "nll_loss", "softmax_cross_entropy_loss", "unique"]


def log_softmax(x: np.ndarray, axis: int | None = None, opset: int = 13) -> np.ndarray:
    """LogSoftmax of ``x`` (module docstring), float64, the shape of ``x``."""
    x64 = np.asarray(x, dtype=np.float64)
    if opset >= 13:
        a = -1 if axis is None else int(axis)
        m = np.max(x64, axis=a, keepdims=True) if x64.size else x64
        return x64 - m - np.log(np.sum(np.exp(x64 - m), axis=a, keepdims=True))
    a = 1 if axis is None else int(axis) % max(x64.ndim, 1)
    rows = int(np.prod(x64.shape[:a], dtype=np.int64))
    flat = x64.reshape(rows, -1)
    return log_softmax(flat, axis=1).reshape(x64.shape)


def lrn(x: np.ndarray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
    """LRN of ``x`` (N, C, D1, ..., Dk) across channels (module docstring), float64.

    Raises:
        ValueError: ``x`` of rank below 3.
    """
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim < 3:
        raise ValueError(f"LRN: input of rank {x64.ndim} (the spec: (N, C, D1, ..., Dk))")
    channels = x64.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = x64 ** 2
    square_sum = np.stack([sq[:, max(0, c - lo):min(channels - 1, c + hi) + 1].sum(axis=1)
                           for c in range(channels)], axis=1) if channels else sq
    return x64 / (bias + alpha / size * square_sum) ** beta


def nll_loss(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None, *, reduction: str = "mean",
             ignore_index: int | None = None) -> np.ndarray:
    """NegativeLogLikelihoodLoss of ``x`` (N, C, d1, ..., dk) and ``target`` (N, d1, ..., dk).

    A ``mean`` over samples whose weights sum to 0 is 0 / 0 (NaN: the spec gives no answer).

    Raises:
        ValueError: a target outside ``[0, C)`` that is not ``ignore_index``, or an unknown
            ``reduction``.
    """
    x64 = np.asarray(x, dtype=np.float64)
    t = np.asarray(target, dtype=np.int64)
    channels = x64.shape[1]
    ignored = (t == ignore_index) if ignore_index is not None else np.zeros(t.shape, bool)
    if np.any(((t < 0) | (t >= channels)) & ~ignored):
        raise ValueError("NegativeLogLikelihoodLoss: a target outside [0, C)")
    safe = np.where(ignored, 0, t)
    picked = np.take_along_axis(x64, safe[:, None], axis=1)[:, 0]
    w = np.ones(t.shape) if weight is None else np.asarray(weight, dtype=np.float64)[safe]
    w = np.where(ignored, 0.0, w)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum())
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(loss.sum() / w.sum())
    raise ValueError(f"reduction {reduction!r}")


def softmax_cross_entropy_loss(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None, *,
                               reduction: str = "mean", ignore_index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(output, log_prob)`` of SoftmaxCrossEntropyLoss (module docstring)."""
    log_prob = log_softmax(scores, axis=1)
    return nll_loss(log_prob, labels, weights, reduction=reduction, ignore_index=ignore_index), log_prob


def unique(x: np.ndarray, axis: int | None = None, sorted_: int = 1) -> dict[str, np.ndarray]:
    """``{"Y", "indices", "inverse_indices", "counts"}`` of Unique (module docstring); ``Y``
    keeps ``x``'s dtype, the others are int64."""
    x = np.asarray(x)
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = np.asarray(inverse).reshape(-1)
    if not sorted_:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
        y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None else axis)
    return {"Y": y, "indices": first.astype(np.int64), "inverse_indices": inverse.astype(np.int64),
            "counts": counts.astype(np.int64)}
