"""Float64 references for the ``com.microsoft`` activation operators (version 1) and the
activation functions the fused kernels apply.

Sources (ORT ``docs/ContribOperators.md``, the schema text ``get_all_operator_schema()``
returns on onnxruntime 1.31.1, and the CPU kernels):

* ``Gelu``: ``Y = 0.5 · X · (1 + erf(X / √2))`` (the schema's function body in
  ``onnxruntime/core/graph/contrib_ops/contrib_defs.cc``; CPU kernel
  ``onnxruntime/contrib_ops/cpu/activations.h`` ``Gelu``: ``MlasComputeErf``).
* ``BiasGelu``: ``Gelu(A + B)``, ``B`` a 1-D bias over the last axis
  (``onnxruntime/contrib_ops/cpu/bert/bias_gelu.cc``, ``bias_gelu_helper.cc``).
* ``FastGelu``: ``Y = 0.5 · X · (1 + tanh(0.7978845608 · X + 0.0356774081 · X³))`` with the
  optional ``bias`` (last axis) added to ``X`` first (schema doc; ``bias_gelu.cc``
  ``BiasGelu<float, true>``: ``B = sqrt(2/π)``, ``C = 0.044715 · sqrt(2/π)``).
* ``QuickGelu``: ``Y = X · sigmoid(alpha · X)``, ``alpha`` default 1.702 (schema).
* ``ScaledSiLU``: ``Z = s · X``, ``Y = Z · sigmoid(Z)`` where ``s`` is the scalar ``scale``
  input when present, else the ``alpha`` attribute (default 1); the schema's explicit T
  rounding of ``Z`` and ``sigmoid(Z)`` is below float32 tolerance
  (``onnxruntime/contrib_ops/cpu/bert/scaled_silu.cc``).
* ``GatedAdd``: ``output = X + Y · gate``, ``gate`` of shape (..., 1) broadcast over the
  last axis (schema; ``onnxruntime/contrib_ops/cpu/bert/gated_add.cc``).
* Fused activations (:data:`ACTIVATIONS`): ``FusedConv``'s ``activation`` /
  ``activation_params`` (``onnxruntime/contrib_ops/cpu/fused_activation.cc``
  ``GetFusedActivationAttr``: Relu, Tanh, Sigmoid, LeakyRelu(alpha), Clip(min, max),
  HardSigmoid(alpha, beta)) and ``FusedGemm``'s ``activation`` with
  ``activation_alpha/beta/gamma`` (``onnxruntime/contrib_ops/cpu/fused_gemm.cc``:
  ``ElementWiseRangedTransform::Create``, the ONNX definitions of Relu, LeakyRelu, Tanh,
  Sigmoid, HardSigmoid, Elu, Selu, Softplus, Softsign, ThresholdedRelu).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

__all__ = ["erf", "sigmoid", "gelu", "bias_gelu", "fast_gelu", "quick_gelu", "scaled_silu", "gated_add",
           "ACTIVATIONS", "activate", "QUICK_GELU_ALPHA"]

#: Schema default of QuickGelu's ``alpha``.
QUICK_GELU_ALPHA = 1.702
_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function elementwise, float64 (``math.erf``)."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` elementwise, float64, without overflow for large ``|x|``."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU ``0.5 x (1 + erf(x / √2))``; any shape, float64."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _last_axis_bias(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    b = np.asarray(bias, dtype=np.float64)
    if b.ndim != 1 or b.shape[0] != x.shape[-1]:
        raise ValueError(f"bias must be 1-D of length {x.shape[-1]} (the last axis), got {b.shape}")
    return x + b


def bias_gelu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """BiasGelu: ``gelu(A + B)``, ``A`` any rank ≥ 1, ``B`` (A.shape[-1],).

    Raises:
        ValueError: ``B`` is not 1-D of the last axis' length.
    """
    return gelu(_last_axis_bias(np.asarray(a, dtype=np.float64), b))


def fast_gelu(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """FastGelu's tanh approximation of GELU of ``X (+ bias)``; ``bias`` (X.shape[-1],).

    Raises:
        ValueError: a bias that is not 1-D of the last axis' length.
    """
    v = np.asarray(x, dtype=np.float64)
    if bias is not None:
        v = _last_axis_bias(v, bias)
    k = math.sqrt(2.0 / math.pi)
    return 0.5 * v * (1.0 + np.tanh(k * v + 0.044715 * k * v ** 3))


def quick_gelu(x: np.ndarray, alpha: float = QUICK_GELU_ALPHA) -> np.ndarray:
    """QuickGelu ``X · sigmoid(alpha · X)``; any shape, float64."""
    v = np.asarray(x, dtype=np.float64)
    return v * sigmoid(alpha * v)


def scaled_silu(x: np.ndarray, scale: np.ndarray | None = None, alpha: float = 1.0) -> np.ndarray:
    """ScaledSiLU ``Z · sigmoid(Z)`` with ``Z = s · X``; ``s`` is the scalar ``scale`` when
    given (it overrides ``alpha``), else ``alpha``.

    Raises:
        ValueError: ``scale`` is not a scalar (the CPU kernel: "scale must be a scalar").
    """
    if scale is not None:
        s = np.asarray(scale, dtype=np.float64)
        if s.ndim != 0:
            raise ValueError("scale must be a scalar (rank 0)")
        alpha = float(s)
    z = alpha * np.asarray(x, dtype=np.float64)
    return z * sigmoid(z)


def gated_add(x: np.ndarray, y: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """GatedAdd ``X + Y · gate``; X, Y (..., C), gate (..., 1).

    Raises:
        ValueError: Y's shape differs from X's, or gate is not X's shape with a last axis of 1.
    """
    x, y, g = (np.asarray(a, dtype=np.float64) for a in (x, y, gate))
    if y.shape != x.shape:
        raise ValueError("Y must have the shape of X")
    if g.shape != x.shape[:-1] + (1,):
        raise ValueError(f"gate must have shape {x.shape[:-1] + (1,)}, got {g.shape}")
    return x + y * g


def _hard_sigmoid(x, alpha=0.2, beta=0.5):
    return np.clip(alpha * x + beta, 0.0, 1.0)


def _selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0))


#: Activation name -> (function of (x, *parameters), the parameter names in order, their
#: defaults). FusedConv passes ``activation_params`` positionally; FusedGemm passes
#: ``activation_alpha``/``beta``/``gamma`` by name.
ACTIVATIONS: Mapping[str, tuple[Callable[..., np.ndarray], tuple[str, ...], tuple[float, ...]]] = {
    "Relu": (lambda x: np.maximum(x, 0.0), (), ()),
    "Tanh": (np.tanh, (), ()),
    "Sigmoid": (sigmoid, (), ()),
    "LeakyRelu": (lambda x, alpha=0.01: np.where(x >= 0, x, alpha * x), ("alpha",), (0.01,)),
    "Clip": (lambda x, lo, hi: np.clip(x, lo, hi), ("min", "max"), ()),
    "HardSigmoid": (_hard_sigmoid, ("alpha", "beta"), (0.2, 0.5)),
    "Elu": (lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0)), ("alpha",), (1.0,)),
    "Selu": (_selu, ("alpha", "gamma"), (1.67326319217681884765625, 1.05070102214813232421875)),
    "Softplus": (lambda x: np.logaddexp(0.0, x), (), ()),
    "Softsign": (lambda x: x / (1.0 + np.abs(x)), (), ()),
    "ThresholdedRelu": (lambda x, alpha=1.0: np.where(x > alpha, x, 0.0), ("alpha",), (1.0,)),
}


def activate(x: np.ndarray, name: str | None, params: Sequence[float] = (),
             named: Mapping[str, float] | None = None) -> np.ndarray:
    """``x`` through the fused activation ``name`` (``None`` or ``""``: identity).

    Args:
        x: any shape, float64.
        name: a key of :data:`ACTIVATIONS`.
        params: positional parameters (FusedConv's ``activation_params``).
        named: parameters by name (FusedGemm's ``activation_alpha`` … without the prefix).

    Raises:
        ValueError: an unknown activation, or a parameter count the kernel refuses.
    """
    x = np.asarray(x, dtype=np.float64)
    if not name:
        return x
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}")
    fn, names, _ = ACTIVATIONS[name]
    if named is not None:
        return fn(x, **{k: float(v) for k, v in named.items() if k in names})
    if params and len(params) != len(names):
        raise ValueError(f"{name} takes {len(names)} activation_params, got {len(params)}")
    return fn(x, *[float(p) for p in params])
