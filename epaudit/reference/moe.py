"""Float64 references for ``com.microsoft.MoE`` and ``com.microsoft.QMoE`` (mixture of experts),
version 1.

From the schema texts (``docs/ContribOperators.md#com.microsoft.MoE``, ``#com.microsoft.QMoE``)
and the CPU kernels ``onnxruntime/contrib_ops/cpu/moe/moe_cpu.cc``, ``moe_utils.cc`` and
``moe_quantization_cpu.cc``:

* routing, per token: the ``router_probs`` row is a row of logits: softmax over the experts,
  the ``k`` largest probabilities pick the experts, each expert's output is weighted by its
  probability, renormalized over the k picks when ``normalize_routing_weights`` = 1 (the
  schema does not say; both CPU kernels do this). QMoE's ``router_weights``, when given,
  replaces the probabilities as mixing weights (its values at the picked experts);
* expert e: ``h = act(x W1[e]ᵀ + b1[e])``, ``y = h W2[e]ᵀ + b2[e]`` with W1 (E, I, D) and W2
  (E, D, I) (rows are output features), the activation ``relu``, ``gelu`` (tanh form),
  ``silu`` or ``identity``; SwiGLU: ``swiglu = G·sigmoid(alpha·G)·(L + beta)`` with
  ``G = min(g, limit)``, ``L = clamp(l, −limit, limit)`` (no clamp without
  ``swiglu_limit``), g and l interleaved on each row of W1 (2I rows) for ``swiglu_fusion`` 1
  (g at the even rows) or concatenated (g first) for 2;
* QMoE weights are uint8 rows of ``bits``-wide codes packed along K, lowest bits first; the
  value is ``(q − zp)·scale`` with scales per row (E, N) or per block (E, N, K/block_size) and
  an implicit zero point 2^(bits−1) when no zero points are given.
"""

from __future__ import annotations

import numpy as np

__all__ = ["moe_reference", "unpack_codes", "dequantize_experts"]


def _act(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "gelu":
        return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
    if kind == "silu":
        return x / (1.0 + np.exp(-x))
    if kind == "identity":
        return x
    raise ValueError(f"unknown activation {kind!r}")


def _swiglu(h: np.ndarray, fusion: int, alpha: float, beta: float, limit: float | None) -> np.ndarray:
    inter = h.shape[-1] // 2
    if fusion == 1:
        g, lin = h[..., 0::2], h[..., 1::2]
    else:
        g, lin = h[..., :inter], h[..., inter:]
    if limit is not None:
        g = np.minimum(g, limit)
        lin = np.clip(lin, -limit, limit)
    return g / (1.0 + np.exp(-alpha * g)) * (lin + beta)


def moe_reference(x, router_probs, w1, w2, b1=None, b2=None, *, k: int = 1, normalize_routing_weights: int = 0,
                  activation_type: str = "relu", activation_alpha: float = 1.0, activation_beta: float = 0.0,
                  swiglu_limit: float | None = None, swiglu_fusion: int = 0, router_weights=None, w3=None,
                  b3=None) -> np.ndarray:
    """Expected ``output`` (the input's shape) of MoE / QMoE with dequantized weights.

    Args:
        x: (T, D) or (B, S, D); router_probs (tokens, E) logits.
        w1: (E, I or 2I, D); w2: (E, D, I); b1 (E, I or 2I), b2 (E, D) or None.
        router_weights: (tokens, E) mixing weights (QMoE), or None.
        w3, b3: FC3 (E, I, D) / (E, I): the linear half l of a non-fused SwiGLU (g from FC1).

    Raises:
        ValueError: a tie between the k-th and (k+1)-th probability (the pick would be
            ambiguous: probes avoid it), or an unknown activation.
    """
    a = np.asarray(x, np.float64)
    tokens = a.reshape(-1, a.shape[-1])
    logits = np.asarray(router_probs, np.float64).reshape(tokens.shape[0], -1)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = p / p.sum(axis=1, keepdims=True)
    out = np.zeros_like(tokens)
    w1, w2 = np.asarray(w1, np.float64), np.asarray(w2, np.float64)
    for t in range(tokens.shape[0]):
        order = np.argsort(-p[t], kind="stable")
        if k < p.shape[1] and np.isclose(p[t, order[k - 1]], p[t, order[k]], rtol=1e-6, atol=0):
            raise ValueError(f"token {t}: the top-{k} pick is a tie")
        picks = order[:k]
        weights = p[t, picks]
        if router_weights is not None:
            weights = np.asarray(router_weights, np.float64).reshape(tokens.shape[0], -1)[t, picks]
        if normalize_routing_weights:
            weights = weights / weights.sum()
        for e, wt in zip(picks, weights):
            h = w1[e] @ tokens[t] + (0.0 if b1 is None else np.asarray(b1, np.float64)[e])
            if w3 is not None:
                lin = np.asarray(w3, np.float64)[e] @ tokens[t] + (0.0 if b3 is None else np.asarray(b3, np.float64)[e])
                h = np.concatenate([h, lin])  # g then l, as the concatenated (fusion 2) layout
                h = _swiglu(h, 2, activation_alpha, activation_beta, swiglu_limit)
            elif activation_type == "swiglu":
                h = _swiglu(h, swiglu_fusion, activation_alpha, activation_beta, swiglu_limit)
            else:
                h = _act(h, activation_type)
            y = w2[e] @ h + (0.0 if b2 is None else np.asarray(b2, np.float64)[e])
            out[t] += wt * y
    return out.reshape(a.shape)


def unpack_codes(packed: np.ndarray, bits: int, k: int) -> np.ndarray:
    """(..., K·bits/8) uint8 rows -> (..., K) int64 codes, lowest bits first."""
    raw = np.asarray(packed, np.uint8).astype(np.int64)
    per = 8 // bits
    codes = np.stack([(raw >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1)
    return codes.reshape(*raw.shape[:-1], -1)[..., :k]


def dequantize_experts(packed: np.ndarray, scales: np.ndarray, bits: int, k: int, block_size: int = 0,
                       zero_points: np.ndarray | None = None) -> np.ndarray:
    """QMoE weights (E, N, K·bits/8) -> (E, N, K) float64: ``(q − zp)·scale`` per row
    (scales (E, N); zero points (E, ceil(N·bits/8)), packed along N) or per block of
    ``block_size`` along K (scales (E, N, K/block); zero points (E, N, ceil(K/block·bits/8))),
    with the implicit 2^(bits−1) when ``zero_points`` is None."""
    q = unpack_codes(packed, bits, k)
    e, n = q.shape[:2]
    groups = k // block_size if block_size else 1
    if zero_points is None:
        zp = np.full((e, n, groups), float(1 << (bits - 1)))
    elif block_size:
        zp = unpack_codes(zero_points, bits, groups).astype(np.float64)
    else:
        zp = unpack_codes(zero_points, bits, n).astype(np.float64)[..., None]
    s = np.asarray(scales, np.float64).reshape(e, n, groups)
    span = k // groups
    return (q - np.repeat(zp, span, axis=-1)) * np.repeat(s, span, axis=-1)
