"""Float64 reference for ``com.microsoft.LinearAttention`` (version 1): the recurrent form of
linear / gated / delta-rule attention, token by token.

From the schema text (``docs/ContribOperators.md#com.microsoft.LinearAttention``), which gives
the recurrences (S_t is the (d_k, d_v) state of one key/value head, ⊗ the outer product):

* ``linear``: S_t = S_{t−1} + k_t ⊗ v_t
* ``gated``: S_t = exp(g_t)·S_{t−1} + k_t ⊗ v_t
* ``delta``: S_t = S_{t−1} + β_t·k_t ⊗ (v_t − S_{t−1}ᵀ k_t)
* ``gated_delta``: S_t = exp(g_t)·S_{t−1} + β_t·k_t ⊗ (v_t − exp(g_t)·S_{t−1}ᵀ k_t)

and o_t = scale · q_tᵀ S_t (``scale`` 0 → 1/√d_k). ``decay`` g is (B, T, H_kv) (one gate per
head) or (B, T, H_kv·d_k) (one per key dimension: row i of S scaled by exp(g_i)); ``beta`` is
(B, T, H_kv) or (B, T, 1). With H_q > H_kv query head h reads state h // (H_q / H_kv) and the
output has one head per query head. ``past_state`` (B, H_kv, d_k, d_v) defaults to zeros;
``present_state`` is the state after the last token, or, with ``state_window`` W > 0, the
(W, B, H_kv, d_k, d_v) stack whose slot j is the state after token T − W + j (zeros for
slots before the first token of this call). ``chunk_size`` is a tuning hint with no effect
on the result (the schema says so), so the reference ignores it. The CPU kernel is
``onnxruntime/contrib_ops/cpu/bert/linear_attention.cc``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["linear_attention_reference", "UPDATE_RULES"]

UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


def linear_attention_reference(query, key, value, past_state=None, decay=None, beta=None, *, q_num_heads: int,
                               kv_num_heads: int, update_rule: str = "gated_delta", scale: float = 0.0,
                               state_window: int = 0, chunk_size: int = 64) -> dict[str, np.ndarray]:
    """Expected ``output`` (B, T, max(H_q, H_kv)·d_v) and ``present_state`` of one node, float64.

    Raises:
        ValueError: an unknown rule, a gate a rule needs but lacks, or H_q < H_kv (the
            inverse-GQA form is not modelled).
    """
    del chunk_size  # a tuning hint (schema): no effect on the result
    if update_rule not in UPDATE_RULES:
        raise ValueError(f"unknown update_rule {update_rule!r}")
    hq, hkv = int(q_num_heads), int(kv_num_heads)
    if hq % hkv:
        raise ValueError("q_num_heads must be a multiple of kv_num_heads")
    q = np.asarray(query, np.float64)
    batch, steps = q.shape[:2]
    dk = q.shape[2] // hq
    q = q.reshape(batch, steps, hq, dk)
    k = np.asarray(key, np.float64).reshape(batch, steps, hkv, dk)
    v = np.asarray(value, np.float64)
    dv = v.shape[2] // hkv
    v = v.reshape(batch, steps, hkv, dv)
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if gated and decay is None or delta and beta is None:
        raise ValueError(f"{update_rule} needs {'decay' if gated and decay is None else 'beta'}")
    if gated:
        g = np.asarray(decay, np.float64)
        g = g.reshape(batch, steps, hkv, dk) if g.shape[2] == hkv * dk else \
            np.broadcast_to(g.reshape(batch, steps, hkv, 1), (batch, steps, hkv, dk))
    if delta:
        bt = np.broadcast_to(np.asarray(beta, np.float64), (batch, steps, hkv))
    state = np.zeros((batch, hkv, dk, dv)) if past_state is None else np.array(past_state, np.float64)
    if state.ndim == 5:  # a windowed past: slot W-1 is the one read
        state = state[-1].copy()
    alpha = 1.0 / math.sqrt(dk) if scale == 0.0 else float(scale)
    out = np.zeros((batch, steps, hq, dv))
    history = []
    for t in range(steps):
        for h in range(hkv):
            s = state[:, h]
            kt, vt = k[:, t, h], v[:, t, h]
            if gated:
                s = np.exp(g[:, t, h])[:, :, None] * s
            if delta:
                retrieved = np.einsum("bij,bi->bj", s, kt)
                upd = bt[:, t, h][:, None, None] * np.einsum("bi,bj->bij", kt, vt - retrieved)
            else:
                upd = np.einsum("bi,bj->bij", kt, vt)
            state[:, h] = s + upd
        history.append(state.copy())
        for h in range(hq):
            out[:, t, h] = alpha * np.einsum("bij,bi->bj", state[:, h // (hq // hkv)], q[:, t, h])
    present = state
    if state_window:
        w = int(state_window)
        slots = [history[steps - w + j] if steps - w + j >= 0 else np.zeros_like(state) for j in range(w)]
        present = np.stack(slots)
    return {"output": out.reshape(batch, steps, hq * dv), "present_state": present}
