"""Float64 references for the ``com.microsoft`` LLM block operators (version 1):
``EngramGate``, ``CausalConvWithState``, ``HyperConnectionPreMix``, ``HyperConnectionPostMix``,
``BranchwiseRMSNorm``, ``GatedRMSNorm`` and ``LinearAttentionGate``.

Written from the schema text onnxruntime 1.31.1 returns (``get_all_operator_schema()``; ORT
``docs/ContribOperators.md``), with the CPU kernels under ``onnxruntime/contrib_ops/cpu/bert/``
(``engram_gate.cc``, ``causal_conv_with_state.cc``, ``hyper_connection_pre_mix.cc``,
``hyper_connection_post_mix.cc``, ``branchwise_rms_norm.cc``, ``linear_attention_gates.cc``)
for what the text leaves open:

* ``RMSNorm(v) = v / sqrt(mean(v²) + ε)`` over the named axis; every kernel computes in float32.
* EngramGate: ``dot = Σ_h RMSNorm(key)·key_scale · RMSNorm(query)·query_scale / √H`` per
  (b, s, hc); ``gate = sigmoid(sign(dot) · sqrt(max(|dot|, 1e-6)))`` (0 for dot = 0,
  ``engram_helper.h`` ``EngramGateArg``); ``output = gate · value`` (value broadcast over hc);
  ``gated_value_normed = RMSNorm(output) · conv_norm_scale``.
* CausalConvWithState (ndim 1): per channel, output ``t = bias + Σ_j w[j] · v[t + j·dilation]``
  over the virtual input ``v = past_state ++ input`` (zeros without a past), state length
  ``(K − 1) · dilation``; optional SiLU (``silu`` = ``swish``); ``present_state`` = the last
  state-length positions of ``v``; ``channels_last`` = (B, L, d1 … dn) with C = Π d;
  ``state_window`` W > 0: the states after positions L − W … L − 1, slot W − 1 read as the past.
* HyperConnectionPreMix: ``Y[..., h] = reduction_scale · Σ_c X[..., c, h] · pre_mix[..., c, h]``
  with pre_mix (..., C), (..., C, 1), (..., C, H) or (..., C·H) (flattened X with ``num_branches``).
* HyperConnectionPostMix: ``Y[..., k, h] = Σ_c stream_mix[..., c, k] · X[..., c, h] +
  post_mix[..., k, h] · block_output[..., h]``, stream_mix defaulting to the identity.
* BranchwiseRMSNorm: RMSNorm over H of each branch of X (..., C, H) (or flattened with
  ``num_branches``), times the optional scale (C·H), (C, H) or (H).
* GatedRMSNorm: groups of C = len(scale) along the last axis: ``RMSNorm(x) · scale ·
  act(gate)``, act ``silu``/``swish`` ``z·sigmoid(z)`` or ``sigmoid``.
* LinearAttentionGate: ``decay = decay_scale · softplus(a + dt_bias)``, ``beta = sigmoid(b)``.
"""

from __future__ import annotations

import numpy as np

from .activations import sigmoid

__all__ = ["rms_norm", "engram_gate", "causal_conv_with_state", "hyper_connection_pre_mix",
           "hyper_connection_post_mix", "branchwise_rms_norm", "gated_rms_norm", "linear_attention_gate"]


def rms_norm(v: np.ndarray, eps: float, axis: int = -1) -> np.ndarray:
    """``v / sqrt(mean(v², axis) + eps)``, float64."""
    v = np.asarray(v, np.float64)
    return v / np.sqrt((v * v).mean(axis=axis, keepdims=True) + eps)


def engram_gate(key, query, value, key_norm_scale, query_norm_scale, conv_norm_scale=None, *,
                epsilon: float = 1e-5) -> dict[str, np.ndarray]:
    """``output`` and (with ``conv_norm_scale``) ``gated_value_normed``, both (B, S, hc, H).

    Raises:
        ValueError: key/query not (B, S, hc, H), value not (B, S, H), or scales not (hc, H).
    """
    k, q, v = (np.asarray(a, np.float64) for a in (key, query, value))
    if k.ndim != 4 or q.shape != k.shape or v.shape != k.shape[:2] + k.shape[3:]:
        raise ValueError("key/query (B, S, hc, H) and value (B, S, H) expected")
    h = k.shape[-1]
    dot = (rms_norm(k, epsilon) * np.asarray(key_norm_scale) * rms_norm(q, epsilon)
           * np.asarray(query_norm_scale)).sum(-1) / np.sqrt(h)
    arg = np.sign(dot) * np.sqrt(np.maximum(np.abs(dot), 1e-6))
    gate = sigmoid(arg)[..., None]
    out = gate * v[:, :, None, :]
    res = {"output": out}
    if conv_norm_scale is not None:
        res["gated_value_normed"] = rms_norm(out, epsilon) * np.asarray(conv_norm_scale, np.float64)
    return res


def _states(v: np.ndarray, state_len: int, ends: list[int]) -> np.ndarray:
    """(len(ends), B, C, state_len): the state_len positions of ``v`` (B, C, T) before each end."""
    out = np.zeros((len(ends),) + v.shape[:2] + (state_len,))
    for i, e in enumerate(ends):
        if e >= 0 and state_len:
            out[i] = v[:, :, e - state_len:e]
    return out


def causal_conv_with_state(x, weight, bias=None, past_state=None, *, activation: str = "none", dilation: int = 1,
                           channels_last: int = 0, state_window: int = 0, ndim: int = 1) -> dict[str, np.ndarray]:
    """``output`` (x's shape) and ``present_state`` of the 1-D causal depthwise convolution.

    Raises:
        ValueError: ndim other than 1, a weight not (C, 1, K), or an unknown activation.
    """
    if ndim != 1:
        raise ValueError("this reference covers ndim = 1")
    act = activation.decode() if isinstance(activation, bytes) else activation
    if act not in ("none", "silu", "swish"):
        raise ValueError(f"unknown activation {act!r}")
    a = np.asarray(x, np.float64)
    w = np.asarray(weight, np.float64)
    if channels_last:
        b_, length = a.shape[:2]
        xin = a.reshape(b_, length, -1).transpose(0, 2, 1)  # (B, C, L)
    else:
        xin = a
    b_, c, length = xin.shape
    if w.shape[:2] != (c, 1) or w.ndim != 3:
        raise ValueError(f"weight must be ({c}, 1, K), got {w.shape}")
    k = w.shape[2]
    pad = (k - 1) * dilation
    if past_state is None:
        past = np.zeros((b_, c, pad))
    else:
        p = np.asarray(past_state, np.float64)
        if state_window:
            p = p[-1]
        past = p.reshape(b_, pad, -1).transpose(0, 2, 1) if channels_last else p
    v = np.concatenate([past, xin], axis=-1)  # (B, C, pad + L)
    y = np.zeros((b_, c, length))
    for j in range(k):
        y += w[None, :, 0, j, None] * v[:, :, j * dilation:j * dilation + length]
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None]
    if act in ("silu", "swish"):
        y = y * sigmoid(y)
    # Slot j of a window holds the state after input position L - W + j (virtual end
    # pad + L - W + j + 1); slots before the first position of this call are zeros.
    ends = ([pad + length - state_window + j + 1 if length - state_window + j >= 0 else -1
             for j in range(state_window)] if state_window else [pad + length])
    states = _states(v, pad, ends)
    if channels_last:
        states = states.transpose(0, 1, 3, 2).reshape(states.shape[:2] + (pad,) + a.shape[2:])
        y = y.transpose(0, 2, 1).reshape(a.shape)
    present = states if state_window else states[0]
    return {"output": y, "present_state": present}


def _mix(weights: np.ndarray, c: int, h: int, lead: tuple[int, ...]) -> np.ndarray:
    """A gate of shape (..., C), (..., C, 1), (..., C, H) or (..., C·H) as (..., C, H)."""
    m = np.asarray(weights, np.float64)
    if m.shape == lead + (c,):
        return np.broadcast_to(m[..., None], lead + (c, h))
    if m.shape == lead + (c, 1):
        return np.broadcast_to(m, lead + (c, h))
    if m.shape == lead + (c, h):
        return m
    if m.shape == lead + (c * h,):
        return m.reshape(lead + (c, h))
    raise ValueError(f"gate shape {m.shape} is none of (..., C), (..., C, 1), (..., C, H), (..., C*H)")


def _grouped(x: np.ndarray, num_branches: int) -> np.ndarray:
    return x.reshape(x.shape[:-1] + (num_branches, x.shape[-1] // num_branches)) if num_branches else x


def hyper_connection_pre_mix(streams, pre_mix, *, reduction_scale: float = 1.0, num_branches: int = 0) -> np.ndarray:
    """(..., H): the scaled sum over C of streams (..., C, H) (or (..., C·H)) times pre_mix."""
    x = _grouped(np.asarray(streams, np.float64), num_branches)
    c, h = x.shape[-2:]
    return reduction_scale * (x * _mix(pre_mix, c, h, x.shape[:-2])).sum(-2)


def hyper_connection_post_mix(streams, block_output, post_mix, stream_mix=None, *, num_branches: int = 0) -> np.ndarray:
    """Streams' shape: ``stream_mixᵀ · streams + post_mix · block_output``."""
    raw = np.asarray(streams, np.float64)
    x = _grouped(raw, num_branches)
    c, h = x.shape[-2:]
    lead = x.shape[:-2]
    mixed = x if stream_mix is None else np.einsum("...ck,...ch->...kh", np.asarray(stream_mix, np.float64), x)
    y = mixed + _mix(post_mix, c, h, lead) * np.asarray(block_output, np.float64)[..., None, :]
    return y.reshape(raw.shape)


def branchwise_rms_norm(x, scale=None, *, epsilon: float = 1e-5, num_branches: int = 0) -> np.ndarray:
    """RMSNorm over H of each branch of x (..., C, H) or (..., C·H), times the optional scale."""
    raw = np.asarray(x, np.float64)
    g = _grouped(raw, num_branches)
    y = rms_norm(g, epsilon)
    if scale is not None:
        s = np.asarray(scale, np.float64)
        y = y * (s.reshape(g.shape[-2:]) if s.size == g.shape[-2] * g.shape[-1] else s)
    return y.reshape(raw.shape)


def gated_rms_norm(x, scale, gate, *, activation: str = "silu", epsilon: float = 1e-5) -> np.ndarray:
    """RMSNorm of each group of C = len(scale) along x's last axis · scale · act(gate).

    Raises:
        ValueError: a last axis that is not a multiple of C, or an unknown activation.
    """
    a = np.asarray(x, np.float64)
    s = np.asarray(scale, np.float64).reshape(-1)
    c = s.size
    if a.shape[-1] % c:
        raise ValueError(f"last axis {a.shape[-1]} is not a multiple of {c}")
    act = activation.decode() if isinstance(activation, bytes) else activation
    z = np.asarray(gate, np.float64)
    if act in ("silu", "swish"):
        g = z * sigmoid(z)
    elif act == "sigmoid":
        g = sigmoid(z)
    else:
        raise ValueError(f"unknown activation {act!r}")
    groups = a.reshape(a.shape[:-1] + (a.shape[-1] // c, c))
    return (rms_norm(groups, epsilon) * s).reshape(a.shape) * g


def linear_attention_gate(a, dt_bias, decay_scale, b=None) -> dict[str, np.ndarray]:
    """``decay`` (a's shape) and, with ``b``, ``beta``."""
    v = np.asarray(a, np.float64) + np.asarray(dt_bias, np.float64)
    res = {"decay": np.asarray(decay_scale, np.float64) * np.logaddexp(0.0, v)}
    if b is not None:
        res["beta"] = sigmoid(b)
    return res
