"""Float64 references for the fused layer norms ORT runs in LLMs.

* ``com.microsoft.SkipLayerNormalization`` and ``com.microsoft.SkipSimplifiedLayerNormalization``
  (version 1): ``docs/ContribOperators.md`` and the CPU kernel
  ``onnxruntime/contrib_ops/cpu/skip_layer_norm.cc`` (``ComputeJob``): per row of the last
  axis, ``s = input + skip (+ bias)``; LayerNorm ``(s − mean) / sqrt(E[s²] − mean² + ε) · γ (+ β)``,
  the simplified (RMS) form ``s / sqrt(E[s²] + ε) · γ``; ``skip`` broadcasts from
  (1, S, D) or (S, D) (``p_skip = skip + offset % skip_size``); ``input_skip_bias_sum`` is
  ``s``. The ``mean`` / ``inv_std_var`` outputs are (B, S, 1) float32: the row mean and
  ``1 / sqrt(var + ε)`` (``1 / sqrt(E[s²] + ε)`` in the simplified form, whose ``mean``
  output the CPU kernel fills with 0, measured on ORT 1.31.1: not probed).
  SkipSimplifiedLayerNormalization's schema has ``bias`` at input 3 (no ``beta``).
* ``SimplifiedLayerNormalization`` (registered by ORT in the ai.onnx domain:
  ``ONNX_CONTRIB_OPERATOR_SCHEMA(SimplifiedLayerNormalization).SetDomain(kOnnxDomain).SinceVersion(1)``
  in ``onnxruntime/core/graph/contrib_ops/contrib_defs.cc``; ``get_all_operator_schema()``
  reports domain ``""``, since_version 1, on ORT 1.31.1), CPU kernel ``onnxruntime/core/providers/cpu/nn/layer_norm.cc`` with
  ``layer_norm_impl.cc``, ``simplified = true``): RMS normalization over the axes
  ``axis … rank − 1``: ``Y = X / sqrt(mean(X²) + ε) · scale``; ``inv_std_var`` has shape
  ``X.shape[:axis] + (1,) * (rank − axis)``.
* ``LpNormalization`` (ai.onnx, versions 1 and 22): ``Y = X / ||X||_p`` along ``axis`` with
  ``||X||_p = (Σ |x|^p)^(1/p)`` (the spec's "Lp-norm"; ORT's CPU kernel registers p = 1 and 2
  only, ``onnxruntime/core/providers/cpu/nn/lp_norm.{h,cc}``, and writes zeros where the norm
  is 0). onnx.reference's ``op_lp_normalization.py`` (onnx 1.23.2) sums ``x^p`` without the
  absolute value: for p = 1 and ``[1, -2, 1]`` it gives ``[0, 0, 0]`` where the definition
  gives ``[0.25, -0.5, 0.25]`` (measured), so the sweep takes this one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["skip_layer_norm_reference", "simplified_layer_norm_reference", "lp_normalization_reference",
           "SKIP_LN_DEFAULT_EPSILON", "SIMPLIFIED_LN_DEFAULT_EPSILON"]

#: Schema defaults of ``epsilon`` (``get_all_operator_schema()``, ORT 1.31.1).
SKIP_LN_DEFAULT_EPSILON = 1e-12
SIMPLIFIED_LN_DEFAULT_EPSILON = 1e-5


def skip_layer_norm_reference(
    input: np.ndarray,  # noqa: A002 - the operator's input name
    skip: np.ndarray,
    gamma: np.ndarray,
    beta: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    epsilon: float = SKIP_LN_DEFAULT_EPSILON,
    simplified: bool = False,
) -> dict[str, np.ndarray]:
    """Expected outputs of SkipLayerNormalization (``simplified`` False) or
    SkipSimplifiedLayerNormalization (True), float64.

    Args:
        input: (B, S, D) or (T, D).
        skip: the input's shape, (1, S, D) or (S, D).
        gamma, beta, bias: (D,); ``beta`` only without ``simplified``.
        epsilon: ε added to the variance (mean square).

    Returns:
        ``output`` (input's shape), ``mean`` and ``inv_std_var`` (input.shape[:-1] + (1,)),
        ``input_skip_bias_sum`` (input's shape).

    Raises:
        ValueError: a skip, gamma, beta or bias shape the kernel rejects, or ``beta`` with
            ``simplified``.
    """
    x = np.asarray(input, dtype=np.float64)
    sk = np.asarray(skip, dtype=np.float64)
    d = x.shape[-1]
    if sk.shape != x.shape and sk.shape not in ((1,) + x.shape[1:], x.shape[1:]):
        raise ValueError(f"skip shape {sk.shape} does not broadcast to {x.shape} as the kernel allows")
    s = x + sk
    if bias is not None:
        s = s + _vector(bias, d, "bias")
    mean = s.mean(axis=-1, keepdims=True)
    if simplified:
        if beta is not None:
            raise ValueError("SkipSimplifiedLayerNormalization has no beta")
        inv = 1.0 / np.sqrt((s * s).mean(axis=-1, keepdims=True) + epsilon)
        out = s * inv * _vector(gamma, d, "gamma")
        mean = np.zeros_like(mean)
    else:
        inv = 1.0 / np.sqrt(((s - mean) ** 2).mean(axis=-1, keepdims=True) + epsilon)
        out = (s - mean) * inv * _vector(gamma, d, "gamma")
        if beta is not None:
            out = out + _vector(beta, d, "beta")
    return {"output": out, "mean": mean, "inv_std_var": inv, "input_skip_bias_sum": s}


def simplified_layer_norm_reference(x: np.ndarray, scale: np.ndarray, *, axis: int = -1,
                                    epsilon: float = SIMPLIFIED_LN_DEFAULT_EPSILON,
                                    stash_type: int = 1) -> dict[str, np.ndarray]:
    """Expected ``Y`` and ``inv_std_var`` of SimplifiedLayerNormalization, float64.

    Args:
        x: any rank ≥ 1.
        scale: broadcastable to ``x.shape[axis:]``.
        axis: first normalized axis (negative counts from the end).
        epsilon: ε added to the mean square.
        stash_type: precision of the stashed statistics; a float64 reference is at least
            that precise, so it changes nothing here.

    Raises:
        ValueError: ``axis`` out of range.
    """
    del stash_type
    a = np.asarray(x, dtype=np.float64)
    ax = axis + a.ndim if axis < 0 else axis
    if not 0 <= ax < a.ndim:
        raise ValueError(f"axis {axis} out of range for rank {a.ndim}")
    axes = tuple(range(ax, a.ndim))
    inv = 1.0 / np.sqrt((a * a).mean(axis=axes, keepdims=True) + epsilon)
    return {"Y": a * inv * np.asarray(scale, dtype=np.float64), "inv_std_var": inv}


def _vector(v: np.ndarray, d: int, name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float64).reshape(-1)
    if arr.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},)")
    return arr


def lp_normalization_reference(x: np.ndarray, *, axis: int = -1, p: int = 2) -> np.ndarray:
    """``x / ||x||_p`` along ``axis`` (module docstring), float64, the shape of ``x``.

    A slice whose norm is 0 gives zeros (ORT's CPU kernel; 0/0 is not the spec's answer).

    Raises:
        ValueError: ``p`` other than 1 or 2 (the spec's "only 1 or 2 are supported").
    """
    if p not in (1, 2):
        raise ValueError(f"LpNormalization p={p}: the spec allows 1 or 2")
    x64 = np.asarray(x, dtype=np.float64)
    if x64.size == 0:
        return x64.copy()
    norm = np.sum(np.abs(x64) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm == 0, 0.0, x64 / np.where(norm == 0, 1.0, norm))
