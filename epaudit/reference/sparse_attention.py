"""Float64 reference for ``com.microsoft.SparseAttention`` (block-sparse causal attention of
Phi-3-small), version 1.

From the schema text (``docs/ContribOperators.md#com.microsoft.SparseAttention``) and the CPU
kernel ``onnxruntime/contrib_ops/cpu/sparse/sparse_attention_base.h``
(``ComputeAttentionProbs``, ``ComputeVxAttentionScore``) with ``sparse_attention.cc``:

* the KV cache is a shared buffer: ``past_key``/``past_value`` (B, N_kv, M, H) hold
  ``past = key_total_sequence_lengths[b] − S`` rows (0 for a prompt, when
  ``total_sequence_length`` = S); the new keys/values are written at rows [past, past + S)
  of ``present_key``/``present_value`` (the rest copied);
* query s of batch b sits at absolute position q = past + s and attends causally to keys
  0..q that the head's layout allows: head h uses layout ``h % num_layout``; the layout is
  the CSR block mask (``block_row_indices``, ``block_col_indices``), and key k is allowed
  when block ``(q // sparse_block_size, k // sparse_block_size)`` is non-zero;
* query head h reads key/value head ``h // (N / N_kv)`` (grouped-query attention);
* ``do_rotary`` rotates Q and the new K at their absolute positions with ``cos_cache`` /
  ``sin_cache`` (halves, or pairs with ``rotary_interleaved``) before the cache is written;
* scores are scaled by ``scale`` (default 1/√H); packed QKV (B, S, (N + 2·N_kv)·H) may stand
  in for query, key and value.
"""

from __future__ import annotations

import math

import numpy as np

from .gqa import rotary_embedding

__all__ = ["block_mask_from_csr", "sparse_attention_reference"]


def block_mask_from_csr(row_indices: np.ndarray, col_indices: np.ndarray) -> np.ndarray:
    """(num_layout, max_blocks, max_blocks) 0/1 block masks from the CSR inputs (negative
    column indices are padding)."""
    rows = np.asarray(row_indices, np.int64)
    cols = np.asarray(col_indices, np.int64)
    nl, nb = rows.shape[0], rows.shape[1] - 1
    mask = np.zeros((nl, nb, nb), np.int64)
    for layout in range(nl):
        for r in range(nb):
            for j in range(rows[layout, r], rows[layout, r + 1]):
                if cols[layout, j] >= 0:
                    mask[layout, r, cols[layout, j]] = 1
    return mask


def sparse_attention_reference(query, key, value, past_key, past_value, block_row_indices, block_col_indices,
                               total_sequence_length, key_total_sequence_lengths, cos_cache=None, sin_cache=None, *,
                               num_heads: int, kv_num_heads: int, sparse_block_size: int, scale: float = 0.0,
                               do_rotary: int = 0, rotary_interleaved: int = 0) -> dict[str, np.ndarray]:
    """Expected ``output`` (B, S, N·H), ``present_key``/``present_value`` (B, N_kv, M, H), float64.

    Raises:
        ValueError: N not a multiple of N_kv, or a cache too short for the tokens.
    """
    n, nkv = int(num_heads), int(kv_num_heads)
    if n % nkv:
        raise ValueError("num_heads must be a multiple of kv_num_heads")
    q_in = np.asarray(query, np.float64)
    pk, pv = np.asarray(past_key, np.float64), np.asarray(past_value, np.float64)
    batch, seq = q_in.shape[:2]
    head = pk.shape[3]
    if key is None:  # packed QKV
        q_in, key, value = np.split(q_in, [n * head, (n + nkv) * head], axis=-1)
    q = q_in.reshape(batch, seq, n, head)
    k = np.asarray(key, np.float64).reshape(batch, seq, nkv, head)
    v = np.asarray(value, np.float64).reshape(batch, seq, nkv, head)
    totals = np.asarray(key_total_sequence_lengths, np.int64).reshape(-1)
    prompt = int(np.asarray(total_sequence_length).reshape(-1)[0]) == seq
    masks = block_mask_from_csr(block_row_indices, block_col_indices)
    alpha = 1.0 / math.sqrt(head) if scale == 0.0 else float(scale)
    present_k, present_v = pk.copy(), pv.copy()
    out = np.zeros((batch, seq, n, head))
    for b in range(batch):
        past = 0 if prompt else int(totals[b]) - seq
        pos = past + np.arange(seq)
        qb, kb = q[b], k[b]
        if do_rotary:
            cos = np.asarray(cos_cache, np.float64)[pos][:, None, :]
            sin = np.asarray(sin_cache, np.float64)[pos][:, None, :]
            qb = rotary_embedding(qb, cos, sin, interleaved=bool(rotary_interleaved))
            kb = rotary_embedding(kb, cos, sin, interleaved=bool(rotary_interleaved))
        if past + seq > pk.shape[2]:
            raise ValueError("the KV buffer is shorter than past + new tokens")
        present_k[b, :, past:past + seq] = kb.transpose(1, 0, 2)
        present_v[b, :, past:past + seq] = v[b].transpose(1, 0, 2)
        total = past + seq
        for h in range(n):
            kvh = h // (n // nkv)
            keys, vals = present_k[b, kvh, :total], present_v[b, kvh, :total]
            layout = masks[h % masks.shape[0]]
            for s in range(seq):
                qa = past + s
                allowed = np.arange(total) <= qa
                allowed &= layout[qa // sparse_block_size, np.arange(total) // sparse_block_size] == 1
                scores = alpha * keys[allowed] @ qb[s, h]
                p = np.exp(scores - scores.max())
                out[b, s, h] = (p / p.sum()) @ vals[allowed]
    return {"output": out.reshape(batch, seq, n * head), "present_key": present_k, "present_value": present_v}
