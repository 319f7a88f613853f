"""Float64 reference for ``com.microsoft.DecoderMaskedMultiHeadAttention`` (DMMHA), version 1:
one new token (S = 1) per batch row attending to a KV cache.

From the schema text (``docs/ContribOperators.md``) and the CPU kernel
``onnxruntime/contrib_ops/cpu/bert/decoder_masked_multihead_attention.cc``:

* self-attention: ``past_key``/``past_value`` are the shared (B, N, M, H) buffers
  (``past_present_share_buffer = 1``), ``past_sequence_length`` = P says how many rows hold
  the past; the new key/value (``key``/``value`` (B, 1, D), or packed in ``query``
  (B, 1, 3D)) plus the ``bias`` slices become row P; the query attends to the T = P + 1 rows.
  ``present_key``/``present_value`` are the buffers with row P written (the other rows
  copied);
* cross-attention: ``key``/``value`` are (B, N, L, H) caches and there is no past;
* beam search: with ``beam_width`` W > 1, the batch axis holds B·W rows and
  ``cache_indirection`` (B, W, M) says, for beam j of batch b and past position t, which
  beam's cache row t comes from;
* ``mask_index`` is a raw (B, T) 0/1 key padding mask (the only mask the CPU kernel takes),
  ``attention_bias`` (B|1, N|1, 1, T) is added, ``mask_filter_value`` (default −10000) is
  added at masked keys; output 3 ``qk`` (with ``output_qk = 1``) holds the scaled scores
  with bias and mask, before the softmax, as MultiHeadAttention's.

The softmax part is :func:`epaudit.reference.mha.mha_reference`, called per batch row.
"""

from __future__ import annotations

import numpy as np

from .mha import DEFAULT_MASK_FILTER_VALUE, mha_reference

__all__ = ["dmmha_reference"]


def dmmha_reference(query, key=None, value=None, *, num_heads: int, mask_index=None, attention_bias=None,
                    past_key=None, past_value=None, past_sequence_length=None, beam_width=None,
                    cache_indirection=None, bias=None, scale: float = 0.0,
                    mask_filter_value: float = DEFAULT_MASK_FILTER_VALUE, output_qk: int = 0,
                    past_present_share_buffer: int = 0) -> dict[str, np.ndarray]:
    """Expected ``output`` (B, 1, D_v), ``present_key``/``present_value`` (B, N, M, H) and
    ``qk`` (B, N, 1, T) of one DMMHA node, float64.

    Raises:
        ValueError: S != 1, a self-attention call without past buffers and
            ``past_sequence_length``, or a beam width without ``cache_indirection``.
    """
    q = np.asarray(query, np.float64)
    if q.shape[1] != 1:
        raise ValueError("DecoderMaskedMultiHeadAttention takes one query token per row")
    n = int(num_heads)
    common = dict(num_heads=n, scale=scale, mask_filter_value=mask_filter_value)
    if past_key is None:  # cross-attention: key/value are (B, N, L, H) caches
        k = np.asarray(key, np.float64)
        v = np.asarray(value, np.float64)
        kk = k.transpose(0, 2, 1, 3).reshape(k.shape[0], k.shape[2], -1)
        vv = v.transpose(0, 2, 1, 3).reshape(v.shape[0], v.shape[2], -1)
        qb = q if bias is None else q + np.asarray(bias, np.float64)[:q.shape[2]]
        out = mha_reference(qb, kk, vv, key_padding_mask=mask_index, attention_bias=attention_bias, **common)
        return {"output": out["output"], "qk": out["qk"]}
    if past_sequence_length is None:
        raise ValueError("self-attention needs past_sequence_length with the shared past buffers")
    pk, pv = np.asarray(past_key, np.float64), np.asarray(past_value, np.float64)
    p = int(np.asarray(past_sequence_length).reshape(-1)[0])
    d = n * pk.shape[3]
    if key is None:  # packed QKV in query
        q, key, value = q[..., :d], q[..., d:2 * d], q[..., 2 * d:]
    rows = q.shape[0]
    width = int(np.asarray(beam_width).reshape(-1)[0]) if beam_width is not None else 1
    if width > 1 and cache_indirection is None:
        raise ValueError("a beam width above 1 needs cache_indirection")
    outs, qks = [], []
    present_k, present_v = pk.copy(), pv.copy()
    for r in range(rows):
        src = np.full(p, r)
        if width > 1:
            b, j = divmod(r, width)
            src = b * width + np.asarray(cache_indirection, np.int64)[b, j, :p]
        past_k = pk[src, :, np.arange(p)].transpose(1, 0, 2)[None]  # (1, N, P, H)
        past_v = pv[src, :, np.arange(p)].transpose(1, 0, 2)[None]
        mask = None if mask_index is None else np.asarray(mask_index)[r:r + 1]
        ab = None
        if attention_bias is not None:
            a = np.asarray(attention_bias, np.float64)
            ab = a[r:r + 1] if a.shape[0] > 1 else a
        out = mha_reference(q[r:r + 1], np.asarray(key, np.float64)[r:r + 1], np.asarray(value, np.float64)[r:r + 1],
                            bias=bias, key_padding_mask=mask, attention_bias=ab, past_key=past_k, past_value=past_v,
                            **common)
        outs.append(out["output"])
        qks.append(out["qk"])
        present_k[r, :, p] = out["present_key"][0, :, p]
        present_v[r, :, p] = out["present_value"][0, :, p]
    return {"output": np.concatenate(outs), "present_key": present_k, "present_value": present_v,
            "qk": np.concatenate(qks)}
