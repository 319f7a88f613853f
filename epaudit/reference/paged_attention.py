"""Float64 reference for ``com.microsoft.PagedAttention`` (version 1), the block-table KV-cache
attention of continuous batching. Registered only by the CUDA EP (the schema: "designed to
work with the CUDA Execution Provider only"); no CPU kernel exists to compare with, so this
reference is checked by hand-worked cases only (``tests/test_contrib_qlinear_attention_moe.py``).

From the schema text (``docs/ContribOperators.md#com.microsoft.PagedAttention``):

* tokens are packed: sequence b owns query/key/value rows [cu[b], cu[b+1]) of
  ``cumulative_sequence_length``; its first new token sits at position ``past_seqlens[b]``;
* caches are (num_blocks, block_size, N_kv, H): position p of sequence b is slot
  ``p % block_size`` of block ``block_table[b, p // block_size]``. Each new key/value is
  written there (or, when ``slot_mapping`` is given, at its flat slot
  ``block·block_size + offset``; −1 skips the write), then every query reads positions
  0..past+len−1 through ``block_table``; ``key_cache_out``/``value_cache_out`` alias the
  updated caches;
* query token i of sequence b at position q = past + i attends to positions ≤ q (``is_causal``
  1, bottom-right aligned) — or to every position (``is_causal`` 0) — limited on the left by
  ``local_window_size`` W (the W most recent positions, itself included, as GroupQueryAttention's
  window); scores are ``scale·q·k`` (default 1/√H), then ``softcap``·tanh(x / softcap), and a
  per-head ``head_sink`` logit joins the softmax denominator without a value;
* query head h reads key/value head h // (N / N_kv); ``do_rotary`` rotates query and new key
  at their positions with ``cos_cache``/``sin_cache`` (halves, or pairs with
  ``rotary_interleaved``) before the key is cached.

The rotation and the sink-softmax are those of :mod:`epaudit.reference.gqa`.
"""

from __future__ import annotations

import math

import numpy as np

from .gqa import rotary_embedding

__all__ = ["paged_attention_reference"]


def paged_attention_reference(query, key, value, key_cache, value_cache, cumulative_sequence_length, past_seqlens,
                              block_table, cos_cache=None, sin_cache=None, slot_mapping=None, head_sink=None, *,
                              num_heads: int, kv_num_heads: int, scale: float = 0.0, softcap: float = 0.0,
                              local_window_size: int = -1, is_causal: int = 1, do_rotary: int = 0,
                              rotary_interleaved: int = 0) -> dict[str, np.ndarray]:
    """Expected ``output`` (tokens, N·H), ``key_cache_out``, ``value_cache_out``, float64.

    Raises:
        ValueError: N not a multiple of N_kv, or a position beyond the sequence's blocks.
    """
    n, nkv = int(num_heads), int(kv_num_heads)
    if n % nkv:
        raise ValueError("num_heads must be a multiple of kv_num_heads")
    kc, vc = np.array(key_cache, np.float64), np.array(value_cache, np.float64)
    bs, head = kc.shape[1], kc.shape[3]
    q_all = np.asarray(query, np.float64).reshape(-1, n, head)
    k_all = np.asarray(key, np.float64).reshape(-1, nkv, head)
    v_all = np.asarray(value, np.float64).reshape(-1, nkv, head)
    cu = np.asarray(cumulative_sequence_length, np.int64)
    past = np.asarray(past_seqlens, np.int64)
    table = np.asarray(block_table, np.int64)
    alpha = 1.0 / math.sqrt(head) if scale == 0.0 else float(scale)
    out = np.zeros_like(q_all)
    qs, ks = q_all.copy(), k_all.copy()
    for b in range(len(past)):
        rows = np.arange(cu[b], cu[b + 1])
        pos = past[b] + np.arange(len(rows))
        if do_rotary:
            cos = np.asarray(cos_cache, np.float64)[pos][:, None, :]
            sin = np.asarray(sin_cache, np.float64)[pos][:, None, :]
            qs[rows] = rotary_embedding(q_all[rows], cos, sin, interleaved=bool(rotary_interleaved))
            ks[rows] = rotary_embedding(k_all[rows], cos, sin, interleaved=bool(rotary_interleaved))
        for r, p in zip(rows, pos):
            if slot_mapping is not None:
                flat = int(np.asarray(slot_mapping)[r])
                if flat < 0:
                    continue
                blk, off = divmod(flat, bs)
            else:
                if p // bs >= table.shape[1]:
                    raise ValueError("a position beyond the sequence's blocks")
                blk, off = table[b, p // bs], p % bs
            kc[blk, off], vc[blk, off] = ks[r], v_all[r]
    for b in range(len(past)):
        rows = np.arange(cu[b], cu[b + 1])
        total = past[b] + len(rows)
        kpos = np.arange(total)
        blocks, offs = table[b, kpos // bs], kpos % bs
        keys, vals = kc[blocks, offs], vc[blocks, offs]  # (total, N_kv, H)
        for i, r in enumerate(rows):
            qpos = past[b] + i
            allowed = kpos <= qpos if is_causal else np.ones(total, bool)
            if local_window_size > 0:
                allowed &= kpos > qpos - local_window_size
            for h in range(n):
                kvh = h // (n // nkv)
                sc = alpha * keys[allowed, kvh] @ qs[r, h]
                if softcap > 0:
                    sc = softcap * np.tanh(sc / softcap)
                m = sc.max() if head_sink is None else max(sc.max(), float(np.asarray(head_sink)[h]))
                e = np.exp(sc - m)
                denom = e.sum() + (0.0 if head_sink is None else math.exp(float(np.asarray(head_sink)[h]) - m))
                out[r, h] = (e / denom) @ vals[allowed, kvh]
    return {"output": out.reshape(len(q_all), n * head), "key_cache_out": kc, "value_cache_out": vc}
