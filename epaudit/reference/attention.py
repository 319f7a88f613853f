"""Float64 reference for the ONNX ``Attention`` operator (ai.onnx opset 23 and 24).

Written from the specification, not from any runtime:

* [DOC23] / [DOC24]: the operator documentation of ``Attention`` since version 23 / 24
  (``onnx/defs/nn/old.cc`` / ``onnx/defs/nn/defs.cc``, rendered in ``docs/Operators.md``
  and ``docs/Changelog.md``), as corrected in place by onnx PR #7867 (softcap before the
  mask), PR #7913 (``qk_matmul_output_mode`` 1 and 2 renumbered to follow the pipeline)
  and the errata of PR #8068 (bottom-right causal alignment, fully-masked rows are zero);
  the text read is the one the onnx 1.23.2 wheel carries
  (``onnx.defs.get_schema("Attention", 23).doc``).
* [BODY]: the ONNX function body of the same schema
  (``AttentionAppendFunction*`` in ``onnx/defs/nn/utils.cc``), the executable form of the
  specification; a rule quoted from it names the function-body tensor it comes from
  (``QKAttnWeightSoftcap``, ``RowAllMasked``, ...).

Every tensor is computed in float64. Units: scores and outputs are in the units of the
inputs (no hidden rescaling besides the ``scale`` attribute).
"""

from __future__ import annotations

import numpy as np

__all__ = ["attention_reference"]

#: ``qk_matmul_output_mode`` values [DOC23 attribute ``qk_matmul_output_mode``, after
#: onnx PR #7913]: 0 scale*QK^T, 1 after softcap, 2 after softcap and mask/bias,
#: 3 after softmax.
QK_MODES = (0, 1, 2, 3)


def _to_bnsh(x: np.ndarray, num_heads: int, what: str) -> np.ndarray:
    """(B, S, N*H) -> (B, N, S, H).

    [DOC23 inputs Q/K/V] "3D tensor with shape (batch_size, q_sequence_length,
    q_hidden_size) ... q_hidden_size = q_num_heads * head_size"; [BODY] reshapes to
    (B, S, N, H) and transposes with perm [0, 2, 1, 3].
    """
    b, s, hidden = x.shape
    if hidden % num_heads:
        raise ValueError(f"{what}: hidden size {hidden} is not a multiple of {num_heads} heads")
    return x.reshape(b, s, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)


def _mask_to_bias(attn_mask: np.ndarray, total_len: int) -> np.ndarray:
    """Additive float64 bias from ``attn_mask`` (before broadcasting).

    [DOC23 input attn_mask] "A boolean mask where a value of True indicates that the
    element should take part in attention. Also supports a float mask ... that is added
    to the attention score."  [BODY] ``AttnBiasShort = Where(attn_mask, 0, -inf)`` for a
    boolean mask.  [DOC24 input attn_mask] "The last dimension can also be shorter than
    total_sequence_length and will be padded to total_sequence_length with negative
    infinity" (the onnx reference applies the same padding at opset 23).
    """
    mask = np.asarray(attn_mask)
    if mask.ndim == 0:
        raise ValueError("attn_mask must have at least one dimension")
    if mask.dtype == np.bool_:
        bias = np.where(mask, 0.0, -np.inf)
    elif np.issubdtype(mask.dtype, np.floating):
        bias = mask.astype(np.float64)
        # NaN or +inf has no meaning as an additive bias; the spec does not define it.
        if np.isnan(bias).any() or np.isposinf(bias).any():
            raise ValueError("a float attn_mask must not contain NaN or +inf")
    else:
        # Integer masks are allowed by the type constraint U, but the spec gives them no
        # meaning beyond "bool or float"; refuse rather than guess.
        raise ValueError(f"attn_mask dtype {mask.dtype} is neither bool nor float")
    short = total_len - bias.shape[-1]
    if short < 0:
        raise ValueError(f"attn_mask last dimension {bias.shape[-1]} exceeds total length {total_len}")
    if short > 0:
        pad = [(0, 0)] * (bias.ndim - 1) + [(0, short)]
        bias = np.pad(bias, pad, constant_values=-np.inf)
    return bias


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; rows that are entirely ``-inf`` give zeros, not NaN.

    The caller decides full masking on the bias (see ``attention_reference``); here the
    row maximum is only made safe so that no NaN is ever formed.
    """
    row_max = np.max(x, axis=-1, keepdims=True)
    dead = np.isneginf(row_max)
    e = np.exp(x - np.where(dead, 0.0, row_max))
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0.0, 1.0, s)


def attention_reference(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    attn_mask: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    nonpad_kv_seqlen: np.ndarray | None = None,
    *,
    is_causal: int = 0,
    q_num_heads: int | None = None,
    kv_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    want_qk: bool = False,
) -> dict[str, np.ndarray]:
    """Reference outputs of one ONNX ``Attention`` node, in float64.

    Args:
        Q: query, 4-D ``(B, Nq, Sq, H)`` or 3-D ``(B, Sq, Nq*H)``; any float dtype (the
            values are taken as they are: round them to the model dtype first).
        K: key, ``(B, Nkv, Skv, H)`` or ``(B, Skv, Nkv*H)``, same rank as ``Q``.
        V: value, ``(B, Nkv, Skv, Hv)`` or ``(B, Skv, Nkv*Hv)``, same rank as ``Q``.
        attn_mask: optional; bool (True = attend) or float (added to the scores),
            broadcastable to ``(B, Nq, Sq, T)`` with ``T = P + Skv``; a shorter last
            dimension is padded with ``-inf`` / False.
        past_key: optional ``(B, Nkv, P, H)``; needs ``past_value``.
        past_value: optional ``(B, Nkv, P, Hv)``; needs ``past_key``.
        nonpad_kv_seqlen: optional int ``(B,)`` (opset 24): keys ``j >= nonpad[b]`` are
            padding; not allowed together with ``past_key``.
        is_causal: 1 for the bottom-right-aligned causal mask.
        q_num_heads: query heads; required with 3-D inputs, checked against 4-D shapes.
        kv_num_heads: key/value heads; required with 3-D inputs.
        qk_matmul_output_mode: what ``qk_matmul_output`` holds: 0 ``scale*Q@K^T``, 1 after
            softcap, 2 after softcap and mask, 3 after softmax.
        scale: score scale; ``None`` means ``1/sqrt(H)``.
        softcap: ``c`` > 0 applies ``c*tanh(x/c)`` to the scaled scores; 0 disables it.
        want_qk: also return ``qk_matmul_output``.

    Returns:
        float64 arrays: ``"Y"`` (``(B, Nq, Sq, Hv)``, or ``(B, Sq, Nq*Hv)`` for 3-D
        inputs), ``"present_key"`` ``(B, Nkv, T, H)`` and ``"present_value"``
        ``(B, Nkv, T, Hv)`` (always: the concatenation of past and current K/V, which
        the op defines whether or not a past is given), and ``"qk_matmul_output"``
        ``(B, Nq, Sq, T)`` when ``want_qk``. A fully-masked query row is a zero row of
        ``Y`` and of the mode-3 ``qk_matmul_output``; a mode-2 output keeps its ``-inf``.

    Raises:
        ValueError: inconsistent ranks, shapes or head counts; 3-D inputs without head
            counts; ``past_key`` without ``past_value`` (or the reverse);
            ``nonpad_kv_seqlen`` with a past, of the wrong shape or out of ``[0, T]``;
            an unknown ``qk_matmul_output_mode``; a negative ``softcap``; a non-positive
            or non-finite ``scale``; a mask that is not bool/float, holds NaN/+inf, or
            does not broadcast.
    """
    q = np.asarray(Q, dtype=np.float64)
    k = np.asarray(K, dtype=np.float64)
    v = np.asarray(V, dtype=np.float64)
    if not (q.ndim == k.ndim == v.ndim) or q.ndim not in (3, 4):
        raise ValueError(f"Q, K, V must all be 3-D or all 4-D, got {q.ndim}, {k.ndim}, {v.ndim}")
    if qk_matmul_output_mode not in QK_MODES:
        raise ValueError(f"qk_matmul_output_mode must be one of {QK_MODES}, got {qk_matmul_output_mode}")
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0 disables it), got {softcap}")

    three_d = q.ndim == 3
    if three_d:
        # [DOC23 attributes q_num_heads / kv_num_heads] "Must be used with 3D inputs".
        if q_num_heads is None or kv_num_heads is None:
            raise ValueError("3-D inputs need q_num_heads and kv_num_heads")
        q = _to_bnsh(q, q_num_heads, "Q")
        k = _to_bnsh(k, kv_num_heads, "K")
        v = _to_bnsh(v, kv_num_heads, "V")
    else:
        if q_num_heads is not None and q_num_heads != q.shape[1]:
            raise ValueError(f"q_num_heads={q_num_heads} disagrees with Q shape {q.shape}")
        if kv_num_heads is not None and kv_num_heads != k.shape[1]:
            raise ValueError(f"kv_num_heads={kv_num_heads} disagrees with K shape {k.shape}")
    batch, n_q, s_q, head = q.shape
    n_kv = k.shape[1]
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError("Q, K, V batch sizes differ")
    if k.shape[3] != head:
        raise ValueError(f"K head size {k.shape[3]} != Q head size {head}")
    if v.shape[1] != n_kv or v.shape[2] != k.shape[2]:
        raise ValueError(f"V shape {v.shape} does not match K shape {k.shape}")
    # [DOC23] GQA: "q_num_heads > kv_num_heads, q_num_heads % kv_num_heads == 0"
    # (MHA when equal, MQA when kv_num_heads = 1).
    if n_q % n_kv:
        raise ValueError(f"q_num_heads {n_q} is not a multiple of kv_num_heads {n_kv}")

    # [DOC23] "Both past and present state key/values are optional. They shall be used
    # together, and not allowed to use only one of them."
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must be given together")
    # [DOC24 input nonpad_kv_seqlen] "This should not be used together with past_key and
    # past_value inputs or present_key and present_value outputs".
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")

    # [DOC23 outputs present_key/present_value] "(batch_size, kv_num_heads,
    # total_sequence_length, head_size) where total_sequence_length =
    # past_sequence_length + kv_sequence_length"; [BODY] PresentKey = Concat(past_key, K,
    # axis=2), or Identity(K) without a past.
    past_len = 0
    if past_key is not None:
        pk = np.asarray(past_key, dtype=np.float64)
        pv = np.asarray(past_value, dtype=np.float64)
        if pk.ndim != 4 or pk.shape[:2] != (batch, n_kv) or pk.shape[3] != head:
            raise ValueError(f"past_key shape {pk.shape} does not match K {k.shape}")
        if pv.ndim != 4 or pv.shape[:3] != pk.shape[:3] or pv.shape[3] != v.shape[3]:
            raise ValueError(f"past_value shape {pv.shape} does not match V {v.shape}")
        past_len = pk.shape[2]
        k = np.concatenate([pk, k], axis=2)
        v = np.concatenate([pv, v], axis=2)
    present_key, present_value = k, v
    total = k.shape[2]
    if nonpad_kv_seqlen is not None:
        lens = np.asarray(nonpad_kv_seqlen)
        if lens.shape != (batch,) or not np.issubdtype(lens.dtype, np.integer):
            raise ValueError(f"nonpad_kv_seqlen must be an integer ({batch},) array, got {lens.dtype} {lens.shape}")
        if (lens < 0).any() or (lens > total).any():
            raise ValueError(f"nonpad_kv_seqlen values must lie in [0, {total}], got {lens}")

    # Additive bias (B|1, Nq|1, Sq, T): attn_mask, then causal, then nonpad padding.
    target = (batch, n_q, s_q, total)
    bias = np.zeros((s_q, total))
    if attn_mask is not None:
        mask_bias = _mask_to_bias(attn_mask, total)
        # [DOC23 input attn_mask] "Shape must be broadcastable to (batch_size,
        # q_num_heads, q_sequence_length, total_sequence_length)": broadcasting may not
        # grow that shape.
        try:
            fits = np.broadcast_shapes(mask_bias.shape, target) == target
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"attn_mask of shape {np.shape(attn_mask)} does not broadcast to {target}")
        bias = bias + mask_bias
    if is_causal:
        # [DOC23 attribute is_causal] "query i attends key j iff j <= i +
        # past_sequence_length"; [DOC24] "offset = past_sequence_length when past_key is
        # provided; offset = nonpad_kv_seqlen - q_sequence_length (per batch) when an
        # external cache is indicated by nonpad_kv_seqlen without past_key; offset = 0
        # when neither is provided". Not clamped: a negative offset fully masks the
        # leading rows ([DOC24] "the leading query rows have an empty key set").
        # "The causal frontier is computed independently of attn_mask and is then composed
        # with it additively" [DOC23].
        i = np.arange(s_q).reshape(s_q, 1)
        j = np.arange(total).reshape(1, total)
        if nonpad_kv_seqlen is not None:
            offset = lens.reshape(batch, 1, 1, 1) - s_q
        else:
            offset = past_len
        bias = bias + np.where(j <= i + offset, 0.0, -np.inf)
    if nonpad_kv_seqlen is not None:
        # [DOC24 input nonpad_kv_seqlen] "the number of valid (ie, non-padding) tokens in
        # each sample. A padding mask can be derived from this": key j of batch b takes
        # part iff j < nonpad_kv_seqlen[b] (the onnx reference's padding_mask).
        keep = np.arange(total).reshape(1, total) < lens.reshape(batch, 1)
        bias = bias + np.where(keep, 0.0, -np.inf).reshape(batch, 1, 1, total)
    bias = np.broadcast_to(bias, target)

    # [DOC23 GQA] each key/value head serves q_num_heads / kv_num_heads consecutive query
    # heads: [BODY] KExpanded = Expand(Unsqueeze(K, 2), (B, Nkv, G, T, H)) reshaped to
    # (B, Nq, T, H), so query head h reads key/value head h // G.
    group = n_q // n_kv
    k_full = np.repeat(k, group, axis=1)
    v_full = np.repeat(v, group, axis=1)

    # [DOC23 attribute scale] "Default value is 1/sqrt(head_size) ... scale Q, K by
    # sqrt(scale) before matmul"; [BODY] QScaled = Q * sqrt(scale), KScaled = K^T * sqrt(scale).
    if scale is None:
        scale = 1.0 / np.sqrt(head)
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    root = np.sqrt(np.float64(scale))
    scores = np.matmul(q * root, np.swapaxes(k_full * root, -1, -2))  # mode 0
    qk_out = scores

    # [DOC23 diagram, after onnx PR #7867] "softcap (if provided)" comes right after the
    # MatMul and before "at_mask---Add"; [BODY] QKAttnSoftcapped = Mul(Tanh(Div(QK, c)), c).
    # Softcap 0 is the default and means none (the attribute's "Default value is 0").
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    if qk_matmul_output_mode == 1:
        # [DOC23 qk_matmul_output_mode] "If set to 1, qk_matmul_output is the output after
        # the softcap operation (before mask addition)" (equal to mode 0 without softcap).
        qk_out = scores

    # [BODY] QKAttnWeightSoftcap = Add(QKAttnSoftcapped, AttnBiasT).
    logits = scores + bias
    if qk_matmul_output_mode == 2:
        # [DOC23 qk_matmul_output_mode] "If set to 2, qk_matmul_output includes the
        # attention mask and softcap (if provided) applied to the output of qk matmul".
        qk_out = logits

    probs = _softmax_rows(logits)
    # [DOC23] "A fully-masked query row (every key's combined additive bias is -inf, e.g.
    # an all-False boolean attn_mask row) produces a zero output row ..., not NaN", and the
    # errata of onnx PR #8068: "the same zero-row guard applies to the mode-3
    # qk_matmul_output". [BODY] decides it on the bias, not the logits:
    # RowAllMasked = Equal(ReduceMax(AttnBiasT, -1), -inf); Where(RowAllMasked, 0, Softmax).
    fully_masked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(fully_masked, 0.0, probs)
    if qk_matmul_output_mode == 3:
        # [DOC23 qk_matmul_output_mode] "If set to 3, qk_matmul_output is the output after
        # the softmax operation ... the fully-masked-row guard is applied before this
        # output is produced."
        qk_out = probs

    y = np.matmul(probs, v_full)  # (B, Nq, Sq, Hv)
    if three_d:
        # [DOC23 output Y] "3D tensor with shape (batch_size, q_sequence_length,
        # hidden_size) ... hidden_size = q_num_heads * v_head_size".
        y = y.transpose(0, 2, 1, 3).reshape(batch, s_q, n_q * v.shape[3])

    out = {
        "Y": y,
        "present_key": np.array(present_key),
        "present_value": np.array(present_value),
    }
    if want_qk:
        out["qk_matmul_output"] = np.array(qk_out)
    return out
