"""Float64 reference for ``com.microsoft.MultiHeadAttention`` (MHA), version 1.

Written from the ORT contrib-op documentation (``docs/ContribOperators.md``, section
``com.microsoft.MultiHeadAttention``; schema in ``onnxruntime/core/graph/contrib_ops/bert_defs.cc``,
the same text ``get_all_operator_schema()`` returns) and the ORT CPU kernel:

* ``onnxruntime/contrib_ops/cpu/bert/multihead_attention.cc`` (``Compute``): the projection
  ``bias`` (Q | K | V slices) is added before the BNSH transpose
  (``MaybeTransposeToBNSHAndAddBias``); packed QKV (B, L, N, 3, H) and packed KV
  (B, L, N, 2, H) are ``NOT_IMPLEMENTED`` on CPU;
* ``onnxruntime/contrib_ops/cpu/bert/multihead_attention_helper.h`` (``CheckInputs``): the
  accepted ``key_padding_mask`` shapes and the total length T = P + L;
* ``onnxruntime/contrib_ops/cpu/bert/attention_cpu_base.h`` (``ApplyAttention``,
  ``ComputeAttentionProbs``) and ``attention_helper.h`` (``PrepareMask``): per score row
  ``scale·QKᵀ + attention_bias + mask → softmax``, where the mask adds
  ``mask_filter_value`` (default −10000) at every padded key and, with ``unidirectional``
  and S > 1, a fixed −10000 at every key after ``P + s`` (causal, bottom-right; the last
  query row is left out of the loop);
  present K/V are ``concat(past, new)`` along the sequence axis (``ConcatStateChunk``).

The mask is *additive* on CPU: a masked key keeps weight ``exp(score + mask_filter_value)``,
which only vanishes for a large negative value (measured on ORT 1.31.1 CPU; the CUDA
softmax kernels in ``contrib_ops/cuda/bert/attention_softmax.cu`` instead *replace* the
score by ``mask_filter_value``).

Letters: B batch, S query length, L new key/value length, P past length, T = P + L,
N heads, H head size (Q/K), Hv head size of V.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["mha_reference", "mask_shape_kind"]

#: Schema default of ``mask_filter_value`` (ContribOperators.md, MultiHeadAttention).
DEFAULT_MASK_FILTER_VALUE = -10000.0
#: What the CPU kernel adds at causally masked keys (attention_helper.h ``PrepareMask``).
CAUSAL_MASK_VALUE = -10000.0


def mask_shape_kind(shape: tuple[int, ...], batch: int, seq: int, kv_len: int, total: int) -> str:
    """Which documented ``key_padding_mask`` form ``shape`` is.

    Returns one of ``"key_len"`` (B), ``"key_len_start"`` (3B + 2), ``"raw_kv"`` (B, L),
    ``"raw_total"`` (B, T), ``"raw_3d"`` (B, S, T).

    Raises:
        ValueError: a shape the schema does not list (ContribOperators.md, input 4).
    """
    if shape == (batch,):
        return "key_len"
    if shape == (3 * batch + 2,):
        return "key_len_start"
    if shape == (batch, total):
        return "raw_total"
    if shape == (batch, kv_len):
        return "raw_kv"
    if shape == (batch, seq, total):
        return "raw_3d"
    raise ValueError(f"key_padding_mask shape {shape} is none of (B), (3B+2), (B, L), (B, T), (B, S, T)")


def _padding(mask: np.ndarray, batch: int, seq: int, kv_len: int, total: int) -> np.ndarray:
    """(B, S, T) bool: True where ``key_padding_mask`` pads (masks) a key.

    Sources: ``PrepareMask`` (attention_helper.h): a 1-D mask holds each row's key length
    (keys at or after it are padding); a raw 2-D/3-D mask holds 0 for padding, else 1.
    The (3B + 2) form starts with the B key lengths (ContribOperators.md: "actual length of
    each key sequence"; the other 2B + 2 entries are cumulative query/key offsets for the
    CUDA kernels), so the reference reads those B entries.
    """
    kind = mask_shape_kind(tuple(mask.shape), batch, seq, kv_len, total)
    keys = np.arange(total)
    if kind in ("key_len", "key_len_start"):
        lengths = mask[:batch].astype(np.int64)
        pad = keys[None, :] >= lengths[:, None]  # (B, T)
        return np.broadcast_to(pad[:, None, :], (batch, seq, total))
    if kind == "raw_3d":
        return mask == 0
    if kind == "raw_kv" and kv_len != total:
        raise ValueError("a (B, L) key_padding_mask with a past: the CPU mask spans T = P + L keys")
    return np.broadcast_to((mask == 0)[:, None, :], (batch, seq, total))


def mha_reference(
    query: np.ndarray,
    key: np.ndarray | None = None,
    value: np.ndarray | None = None,
    *,
    num_heads: int,
    bias: np.ndarray | None = None,
    key_padding_mask: np.ndarray | None = None,
    attention_bias: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    unidirectional: int = 0,
    scale: float = 0.0,
    mask_filter_value: float = DEFAULT_MASK_FILTER_VALUE,
    past_sequence_length: np.ndarray | None = None,
    cache_indirection: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Expected outputs of one ``MultiHeadAttention`` node, in float64.

    Args:
        query: (B, S, N·H), or packed QKV (B, S, N, 3, H) with ``key``/``value`` None.
        key: (B, L, N·H), or packed KV (B, L, N, 2, H) with ``value`` None.
        value: (B, L, N·Hv).
        num_heads: N.
        bias: (N·H + N·H + N·Hv) projection bias added to Q, K and V.
        key_padding_mask: int (B), (3B + 2), (B, L), (B, T) or (B, S, T); see :func:`_padding`.
        attention_bias: (B or 1, N or 1, S, T), added to the scaled scores.
        past_key, past_value: (B, N, P, H) / (B, N, P, Hv) cache, both or neither.
        unidirectional: 1 masks keys after ``P + s`` for query rows ``s < S − 1`` (only when
            S > 1, as ``ApplyAttention`` does: ``causal = is_unidirectional_ && sequence_length > 1``;
            the last row is left unmasked, which matters only when L > S).
        scale: score scale; 0 means 1/√H.
        mask_filter_value: the value added at masked keys.
        past_sequence_length: int32 (1,) P: buffer sharing, the past buffers are
            (B, N, max_sequence_length, H) and only their first P rows are the past (schema,
            inputs 6-8); the presents are then the shared buffers, of which only ``output``
            is returned meaningfully here (``present_*`` hold past rows [0, P) and the new rows).
        cache_indirection: int32 (batch, beam, max_sequence_length): query row
            ``i * beam + j`` reads past position t from beam ``cache_indirection[i, j, t]`` of
            its batch entry (schema, input 9); needs ``past_sequence_length``.

    Returns:
        ``output`` (B, S, N·Hv), ``present_key`` (B, N, T, H), ``present_value``
        (B, N, T, Hv), ``qk`` (B, N, S, T): the scores after scale, ``attention_bias`` and
        the mask, before the softmax (what the CPU kernel writes to output 3); float64.

    Raises:
        ValueError: shapes the operator rejects (mismatched widths, only one of
            past_key/past_value, a mask or bias shape the schema does not list).
    """
    q_in = np.asarray(query, dtype=np.float64)
    n = int(num_heads)
    if q_in.ndim == 5:
        # Packed QKV (B, L, N, 3, H): ContribOperators.md input 0; key and value absent.
        if key is not None or value is not None or q_in.shape[2:4] != (n, 3):
            raise ValueError("packed QKV must be (B, S, N, 3, H) with key and value absent")
        q4, k4, v4 = (q_in[:, :, :, i, :] for i in range(3))
    else:
        if key is None:
            raise ValueError("key is required unless query is packed QKV")
        k_in = np.asarray(key, dtype=np.float64)
        if k_in.ndim == 5:
            # Packed KV (B, L, N, 2, H): ContribOperators.md input 1; value absent.
            if value is not None or k_in.shape[2:4] != (n, 2):
                raise ValueError("packed KV must be (B, L, N, 2, H) with value absent")
            k4, v4 = k_in[:, :, :, 0, :], k_in[:, :, :, 1, :]
        else:
            if value is None:
                raise ValueError("value is required with a 3-D key")
            v_in = np.asarray(value, dtype=np.float64)
            if k_in.shape[-1] % n or v_in.shape[-1] % n or k_in.shape[:2] != v_in.shape[:2]:
                raise ValueError("key/value must be (B, L, N·H) / (B, L, N·Hv)")
            k4 = k_in.reshape(*k_in.shape[:2], n, -1)
            v4 = v_in.reshape(*v_in.shape[:2], n, -1)
        if q_in.ndim != 3 or q_in.shape[-1] % n:
            raise ValueError("query must be (B, S, N·H)")
        q4 = q_in.reshape(*q_in.shape[:2], n, -1)
    batch, seq, _, head = q4.shape
    kv_len, v_head = k4.shape[1], v4.shape[3]
    if k4.shape[0] != batch or k4.shape[3] != head:
        raise ValueError("key must share B and H with query")

    if bias is not None:
        # multihead_attention.cc: offsets 0, D, 2D into the bias (MaybeTransposeToBNSHAndAddBias).
        b = np.asarray(bias, dtype=np.float64).reshape(-1)
        if b.shape != (2 * n * head + n * v_head,):
            raise ValueError(f"bias must be ({2 * n * head + n * v_head},)")
        q4 = q4 + b[:n * head].reshape(n, head)
        k4 = k4 + b[n * head:2 * n * head].reshape(n, head)
        v4 = v4 + b[2 * n * head:].reshape(n, v_head)

    q = q4.transpose(0, 2, 1, 3)  # BNSH
    k = k4.transpose(0, 2, 1, 3)
    v = v4.transpose(0, 2, 1, 3)
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must both be given or both be None")
    shared = None
    if cache_indirection is not None and past_sequence_length is None:
        raise ValueError("cache_indirection needs past_sequence_length (buffer sharing)")
    if past_sequence_length is not None:
        if past_key is None:
            raise ValueError("past_sequence_length needs past_key/past_value")
        valid = int(np.asarray(past_sequence_length).reshape(-1)[0])
        pk_buf = np.asarray(past_key, dtype=np.float64)
        pv_buf = np.asarray(past_value, dtype=np.float64)
        shared = (pk_buf.copy(), pv_buf.copy(), valid)  # the presents are these buffers, updated
        if not 0 <= valid <= pk_buf.shape[2]:
            raise ValueError(f"past_sequence_length {valid} outside the buffer of {pk_buf.shape[2]} rows")
        if cache_indirection is not None:
            ci = np.asarray(cache_indirection, dtype=np.int64)
            beams = ci.shape[1]
            if ci.ndim != 3 or ci.shape[0] * beams != batch or ci.shape[2] != pk_buf.shape[2] \
                    or ci.min() < 0 or ci.max() >= beams:
                raise ValueError("cache_indirection must be (batch, beam, max_sequence_length) with beams in range")
            # Row i*beam + j reads past position t from row i*beam + ci[i, j, t].
            rows = (np.arange(batch) // beams * beams)[:, None] + ci.reshape(batch, -1)  # (B, max_seq)
            t = np.arange(pk_buf.shape[2])
            pk_buf = pk_buf[rows[:, None, :], np.arange(n)[None, :, None], t[None, None, :]]
            pv_buf = pv_buf[rows[:, None, :], np.arange(n)[None, :, None], t[None, None, :]]
        past_key, past_value = pk_buf[:, :, :valid], pv_buf[:, :, :valid]
    if past_key is not None:
        pk = np.asarray(past_key, dtype=np.float64)
        pv = np.asarray(past_value, dtype=np.float64)
        if pk.shape[:2] != (batch, n) or pk.shape[3] != head or pv.shape[:3] != pk.shape[:3]:
            raise ValueError("past_key/past_value must be (B, N, P, H)")
        new_k, new_v = k, v
        k = np.concatenate([pk, k], axis=2)  # ConcatStateChunk: past rows, then the new ones
        v = np.concatenate([pv, v], axis=2)
        if shared is not None:
            # Buffer sharing: the new rows are written at rows [P, P + L) of the shared buffers;
            # the past rows stay as stored (not reordered by cache_indirection). Measured on the
            # 1.31.1 CPU EP, which also leaves rows after P + L as they were (probes fill every row).
            pres_k, pres_v, valid = shared
            if valid + kv_len > pres_k.shape[2]:
                raise ValueError("past_sequence_length + kv_sequence_length exceeds the shared buffer")
            pres_k[:, :, valid:valid + kv_len] = new_k
            pres_v[:, :, valid:valid + kv_len] = new_v
            shared = (pres_k, pres_v)
    past = k.shape[2] - kv_len
    total = k.shape[2]

    alpha = 1.0 / math.sqrt(head) if scale == 0.0 else float(scale)
    scores = alpha * np.einsum("bnsh,bnth->bnst", q, k)
    if attention_bias is not None:
        ab = np.asarray(attention_bias, dtype=np.float64)
        if ab.ndim != 4 or ab.shape[0] not in (1, batch) or ab.shape[1] not in (1, n) \
                or ab.shape[2:] != (seq, total):
            raise ValueError(f"attention_bias must be (B|1, N|1, S, T) = ({batch}|1, {n}|1, {seq}, {total})")
        scores = scores + ab
    mask_add = np.zeros((batch, seq, total))
    if key_padding_mask is not None:
        pad = _padding(np.asarray(key_padding_mask), batch, seq, kv_len, total)
        mask_add = mask_add + np.where(pad, mask_filter_value, 0.0)
    if unidirectional and seq > 1:
        # PrepareMask: rows s < S − 1 mask keys j > P + s; the loop stops before the last
        # row, which sees all T keys. With L = S that is the usual causal mask; with L > S
        # (cross-attention) the last row is unmasked (measured on ORT 1.31.1 CPU).
        later = np.arange(total)[None, :] > past + np.arange(seq)[:, None]  # (S, T)
        later[seq - 1] = False
        # The causal part adds a fixed −10000 (PrepareMask's `static_cast<T>(-10000.0f)`),
        # whatever mask_filter_value is; only padded keys get mask_filter_value.
        mask_add = mask_add + np.where(later, CAUSAL_MASK_VALUE, 0.0)[None]
    scores = scores + mask_add[:, None]
    # Output 3 ('qk') is this buffer before the softmax: ComputeAttentionProbs copies
    # attention_probs (scaled QK + bias + mask) into output_qk (measured on ORT 1.31.1 CPU).
    qk = scores
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    out = np.einsum("bnst,bnth->bnsh", probs, v)
    return {
        "output": out.transpose(0, 2, 1, 3).reshape(batch, seq, n * v_head),
        "present_key": k if shared is None else shared[0],
        "present_value": v if shared is None else shared[1],
        "qk": qk,
    }
