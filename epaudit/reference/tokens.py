"""Exact references for the ``com.microsoft`` token and hashing operators (version 1):
``MurmurHash3``, ``NGramRepeatBlock``, ``BifurcationDetector``, ``DynamicTimeWarping``,
``NGramHashMapping`` and ``VarlenNGramHashMapping``. Integer results are Python/numpy
integers (int64 arrays); NGramRepeatBlock returns float64 scores with ``-inf``.

Sources (schema text of onnxruntime 1.31.1, ORT ``docs/ContribOperators.md``, and the CPU
kernels where the text leaves a rule open):

* ``MurmurHash3``: MurmurHash3_x86_32 (Austin Appleby's public-domain algorithm) of each
  element's little-endian bytes with ``seed``; the 32-bit result read as uint32
  (``positive=1``, default) or int32 (``onnxruntime/contrib_ops/cpu/murmur_hash3.cc``).
* ``NGramRepeatBlock``: a token gets ``-inf`` when appending it to ``input_ids`` would repeat an
  n-gram of ``ngram_size`` already in the row: every earlier window whose first n−1 tokens equal
  the last n−1 tokens bans its n-th token (``onnxruntime/contrib_ops/cpu/bert/ngram_repeat_block.h``).
* ``BifurcationDetector``: with ``pred_tokens``, the bifurcation index ``i`` is the first index
  where ``pred_tokens[i] != src_tokens[prev_idx + i]`` (at most len(src) − prev_idx) and
  ``tokens = cur_tokens ++ pred_tokens[: i + 1]``; without it ``tokens = cur_tokens``. The suffix
  match: for n from ``min_ngram_size`` to ``max_ngram_size`` (while n ≤ len(tokens)), look up the
  last n tokens in ``src_tokens``: not found → stop; found more than once → −1 and try the next
  n; found once → the index just *after* that occurrence (the kernel's ``it - src + i``; the
  schema says "the start of the n-gram", but the value is where the next prediction starts,
  as its use as ``prev_suffix_match_idx`` requires) and try the next n; an index at the end of
  ``src_tokens`` stops the search (``onnxruntime/contrib_ops/cpu/bert/bifurcation_detector.h``).
* ``DynamicTimeWarping``: the lowest-cost path from (0, 0) to (M−1, N−1) through the cost
  matrix with steps (+1, +1), (+1, 0), (0, +1), as a (2, len) int32 array of (row, col) pairs
  (schema; inputs here have no ties).
* ``NGramHashMapping``: for n in 2 … max_ngram_size and each of its heads,
  ``mix = XOR_k (tok[t − k] · multipliers[k])`` (wrapping in the id type), hash ``mix mod
  vocab_sizes[h]`` (non-negative) ``+ head_offsets[h]``; ids before the sequence come from
  ``past_ids`` (right-aligned), else ``pad_id`` (``eos_token_id`` when given); with
  ``reset_on_eos`` every shifted position at or before the latest EOS strictly before t reads
  ``eos_token_id``; with ``segment_ids`` every shifted position before the latest segment
  boundary at or before t (within the chunk) reads the missing-history id; ``present_ids`` are
  the trailing max_ngram_size − 1 ids of ``past_ids ++ input_ids``.
* ``VarlenNGramHashMapping``: the same per packed request ``[cu[i], cu[i + 1])`` with its own
  ``past_ids`` row; with ``past_segment_ids`` the segment boundaries inside the history and
  between it and the request count too; ``present_segment_ids`` are the trailing segment ids
  (the request's first id for missing history); ``state_update[b, j]`` (j < min(capture_count[b],
  request length, state_update_capacity)) is the trailing history after token j, other slots
  ``pad_id`` (``onnxruntime/contrib_ops/cpu/bert/varlen_ngram_hash_mapping.cc``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["murmurhash3_x86_32", "murmurhash3", "ngram_repeat_block", "bifurcation_detector",
           "dynamic_time_warping", "ngram_hash_mapping", "varlen_ngram_hash_mapping", "wrap"]

_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmurhash3_x86_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` as an unsigned 32-bit integer."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _M32
    n = len(data) // 4
    for i in range(n):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (_rotl((k * c1) & _M32, 15) * c2) & _M32
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _M32
    tail = data[4 * n:]
    if tail:
        k = 0
        for j, b in enumerate(tail):
            k ^= b << (8 * j)
        h ^= (_rotl((k * c1) & _M32, 15) * c2) & _M32
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def murmurhash3(x: np.ndarray, seed: int = 0, positive: int = 1) -> np.ndarray:
    """MurmurHash3 of every element's little-endian bytes (``x``'s own dtype), x's shape, int64
    values of the uint32 (``positive``) or int32 result."""
    a = np.ascontiguousarray(x)
    le = a.astype(a.dtype.newbyteorder("<"), copy=False)
    out = [murmurhash3_x86_32(e.tobytes(), seed) for e in le.reshape(-1)]
    vals = np.array(out, dtype=np.uint32)
    return (vals if positive else vals.view(np.int32)).astype(np.int64).reshape(a.shape)


def ngram_repeat_block(input_ids: np.ndarray, scores: np.ndarray, ngram_size: int) -> np.ndarray:
    """Scores (B, V) with ``-inf`` at every token that would repeat an n-gram of ``input_ids`` (B, L)."""
    ids = np.asarray(input_ids, np.int64)
    out = np.array(scores, dtype=np.float64)
    n = int(ngram_size)
    length = ids.shape[1]
    if length + 1 < n:
        return out
    for b in range(ids.shape[0]):
        tail = list(ids[b, length + 1 - n:]) if n > 1 else []
        for i in range(length - n + 1):
            if list(ids[b, i:i + n - 1]) == tail:
                out[b, int(ids[b, i + n - 1])] = -np.inf
    return out


def _find(hay: Sequence[int], needle: Sequence[int], start: int = 0) -> int:
    n = len(needle)
    for i in range(start, len(hay) - n + 1):
        if list(hay[i:i + n]) == list(needle):
            return i
    return -1


def bifurcation_detector(src_tokens: np.ndarray, cur_tokens: np.ndarray, prev_suffix_match_idx: np.ndarray,
                         pred_tokens: np.ndarray | None = None, *, min_ngram_size: int = 1,
                         max_ngram_size: int = 3) -> dict[str, np.ndarray]:
    """``tokens`` (int64 1-D) and ``suffix_match_idx`` (int64, prev_suffix_match_idx's shape).

    Raises:
        ValueError: ``pred_tokens`` not of length len(src) + 1 − prev_idx, or prev_idx out of range.
    """
    src = [int(v) for v in np.asarray(src_tokens).reshape(-1)]
    cur = [int(v) for v in np.asarray(cur_tokens).reshape(-1)]
    prev_arr = np.asarray(prev_suffix_match_idx)
    prev = int(prev_arr.reshape(-1)[0])
    if pred_tokens is None:
        tokens = cur
    else:
        pred = [int(v) for v in np.asarray(pred_tokens).reshape(-1)]
        if not 0 <= prev <= len(src) or len(pred) != len(src) + 1 - prev:
            raise ValueError("pred_tokens must hold len(src_tokens) + 1 - prev_suffix_match_idx tokens")
        i = 0
        while i < len(src) - prev and pred[i] == src[i + prev]:
            i += 1
        tokens = cur + pred[:i + 1]
    idx = -1
    for n in range(min_ngram_size, max_ngram_size + 1):
        if n > len(tokens):
            break
        gram = tokens[len(tokens) - n:]
        at = _find(src, gram)
        if at < 0:
            break
        idx = at + n
        if idx >= len(src):
            break
        if _find(src, gram, at + 1) >= 0:
            idx = -1
    return {"tokens": np.array(tokens, dtype=np.int64),
            "suffix_match_idx": np.full(prev_arr.shape, idx, dtype=np.int64)}


def dynamic_time_warping(cost: np.ndarray) -> np.ndarray:
    """The (2, len) int64 (row, col) pairs of the lowest-cost monotone path of ``cost`` (M, N) or (1, M, N).

    Raises:
        ValueError: a rank other than 2, or 3 with a first axis of 1.
    """
    c = np.asarray(cost, np.float64)
    if c.ndim == 3 and c.shape[0] == 1:
        c = c[0]
    if c.ndim != 2:
        raise ValueError("DynamicTimeWarping takes (M, N) or (1, M, N)")
    m, n = c.shape
    acc = np.full((m + 1, n + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            acc[i, j] = c[i - 1, j - 1] + min(acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
    path = []
    i, j = m, n
    while i > 0 and j > 0:
        path.append((i - 1, j - 1))
        steps = {(i - 1, j - 1): acc[i - 1, j - 1], (i - 1, j): acc[i - 1, j], (i, j - 1): acc[i, j - 1]}
        i, j = min(steps, key=steps.get)
    return np.array(path[::-1], dtype=np.int64).T


def wrap(v: int, bits: int) -> int:
    """``v`` wrapped to a signed ``bits``-bit integer (two's complement)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _hash_request(hist: list[int], toks: list[int], segs: list[int] | None, past_segs: list[int] | None, *,
                  mult: list[int], vocab: list[int], offsets: list[int], max_ngram_size: int,
                  n_head_per_ngram: int, fill: int, eos: int | None, reset: bool, bits: int) -> list[list[int]]:
    """Hash ids (len(toks), heads) of one sequence whose history is ``hist`` (right-aligned).

    A shifted position at or before the latest *reset point* before t reads ``fill``: the
    latest EOS of ``hist ++ toks`` before t (``reset``), the position before a change of
    segment id within ``toks`` (``segs``), or within ``past_segs ++ segs`` when the past
    segment ids are given (VarlenNGramHashMapping's ``past_segment_ids``).
    """
    state = len(hist)
    seq = hist + toks
    last = -1
    if reset and eos is not None:
        last = max([i for i in range(state) if hist[i] == eos], default=-1)
    if past_segs is not None and segs is not None:
        for i in range(1, state):
            if past_segs[i] != past_segs[i - 1]:
                last = max(last, i - 1)
        if segs[0] != past_segs[-1]:
            last = max(last, state - 1)
    rows = []
    for t in range(len(toks)):
        if t >= 1 and ((reset and eos is not None and toks[t - 1] == eos) or (segs is not None and segs[t] != segs[t - 1])):
            last = state + t - 1
        row = []
        for n in range(2, max_ngram_size + 1):
            mix = 0
            for k in range(n):
                p = state + t - k
                tok = fill if p <= last else seq[p]
                mix ^= wrap(tok * mult[k], bits)
            mix = wrap(mix, bits)
            for h in range(n_head_per_ngram):
                o = (n - 2) * n_head_per_ngram + h
                row.append(wrap(mix % vocab[o] + offsets[o], bits))
        rows.append(row)
    return rows


def _ngram_args(multipliers, vocab_sizes, head_offsets, eos_token_id, max_ngram_size, n_head_per_ngram, pad_id):
    mult = [int(v) for v in np.asarray(multipliers).reshape(-1)]
    vocab = [int(v) for v in np.asarray(vocab_sizes).reshape(-1)]
    heads = (max_ngram_size - 1) * n_head_per_ngram
    if max_ngram_size < 2 or len(mult) < max_ngram_size or len(vocab) != heads or min(vocab) <= 0:
        raise ValueError("bad max_ngram_size, multipliers or vocab_sizes")
    offsets = [0] * heads if head_offsets is None else [int(v) for v in np.asarray(head_offsets).reshape(-1)]
    eos = None if eos_token_id is None else int(np.asarray(eos_token_id).reshape(-1)[0])
    return mult, vocab, offsets, eos, (pad_id if eos is None else eos), heads


def ngram_hash_mapping(input_ids: np.ndarray, multipliers: np.ndarray, vocab_sizes: np.ndarray,
                       past_ids: np.ndarray | None = None, head_offsets: np.ndarray | None = None,
                       eos_token_id: np.ndarray | None = None, segment_ids: np.ndarray | None = None, *,
                       max_ngram_size: int, n_head_per_ngram: int, pad_id: int, reset_on_eos: int = 0,
                       bits: int = 64) -> dict[str, np.ndarray]:
    """``hash_ids`` (B, S, (max_ngram_size − 1)·n_head_per_ngram) and ``present_ids`` (B, max_ngram_size − 1).

    Raises:
        ValueError: max_ngram_size < 2, multipliers shorter than max_ngram_size, a non-positive
            vocabulary size, or past_ids of another shape than (B, max_ngram_size − 1).
    """
    ids = np.asarray(input_ids, np.int64)
    mult, vocab, offsets, eos, fill, heads = _ngram_args(multipliers, vocab_sizes, head_offsets, eos_token_id,
                                                         max_ngram_size, n_head_per_ngram, pad_id)
    b_size, s_len = ids.shape
    state = max_ngram_size - 1
    if past_ids is not None and np.asarray(past_ids).shape != (b_size, state):
        raise ValueError("past_ids must be (batch, max_ngram_size - 1)")
    out = np.zeros((b_size, s_len, heads), np.int64)
    present = np.zeros((b_size, state), np.int64)
    for b in range(b_size):
        hist = [fill] * state if past_ids is None else [int(v) for v in np.asarray(past_ids)[b]]
        toks = [int(v) for v in ids[b]]
        segs = None if segment_ids is None else [int(v) for v in np.asarray(segment_ids)[b]]
        out[b] = _hash_request(hist, toks, segs, None, mult=mult, vocab=vocab, offsets=offsets,
                               max_ngram_size=max_ngram_size, n_head_per_ngram=n_head_per_ngram, fill=fill,
                               eos=eos, reset=bool(reset_on_eos), bits=bits)
        present[b] = (hist + toks)[-state:]
    return {"hash_ids": out, "present_ids": present}


def varlen_ngram_hash_mapping(input_ids, multipliers, vocab_sizes, cumulative_sequence_length, past_ids=None,
                              head_offsets=None, eos_token_id=None, segment_ids=None, past_segment_ids=None,
                              capture_count=None, *, max_ngram_size: int, n_head_per_ngram: int, pad_id: int,
                              reset_on_eos: int = 0, state_update_capacity: int = 0,
                              bits: int = 64) -> dict[str, np.ndarray]:
    """VarlenNGramHashMapping over the packed requests ``[cu[i], cu[i + 1])`` of ``input_ids`` (T,):
    ``hash_ids`` (T, heads), ``present_ids`` and ``present_segment_ids`` (B, L), ``state_update``
    (B, state_update_capacity, L), with L = max_ngram_size − 1 (schema text; CPU kernel
    ``varlen_ngram_hash_mapping.cc``: missing history reads ``eos_token_id`` or ``pad_id``;
    missing past segment ids read the request's first segment id).

    Raises:
        ValueError: what :func:`ngram_hash_mapping` raises, or an empty or unordered request.
    """
    ids = [int(v) for v in np.asarray(input_ids).reshape(-1)]
    cu = [int(v) for v in np.asarray(cumulative_sequence_length).reshape(-1)]
    mult, vocab, offsets, eos, fill, heads = _ngram_args(multipliers, vocab_sizes, head_offsets, eos_token_id,
                                                         max_ngram_size, n_head_per_ngram, pad_id)
    if cu[0] != 0 or cu[-1] != len(ids) or any(b <= a for a, b in zip(cu, cu[1:])):
        raise ValueError("cumulative_sequence_length must rise strictly from 0 to total_tokens")
    state = max_ngram_size - 1
    batch = len(cu) - 1
    out = np.zeros((len(ids), heads), np.int64)
    present = np.zeros((batch, state), np.int64)
    present_seg = np.zeros((batch, state), np.int64)
    update = np.full((batch, state_update_capacity, state), pad_id, np.int64)
    seg_all = None if segment_ids is None else [int(v) for v in np.asarray(segment_ids).reshape(-1)]
    for b in range(batch):
        toks = ids[cu[b]:cu[b + 1]]
        hist = [fill] * state if past_ids is None else [int(v) for v in np.asarray(past_ids)[b]]
        segs = None if seg_all is None else seg_all[cu[b]:cu[b + 1]]
        psegs = None if past_segment_ids is None else [int(v) for v in np.asarray(past_segment_ids)[b]]
        out[cu[b]:cu[b + 1]] = _hash_request(hist, toks, segs, psegs, mult=mult, vocab=vocab, offsets=offsets,
                                             max_ngram_size=max_ngram_size, n_head_per_ngram=n_head_per_ngram,
                                             fill=fill, eos=eos, reset=bool(reset_on_eos), bits=bits)
        present[b] = (hist + toks)[-state:]
        if segs is not None:
            present_seg[b] = ((psegs if psegs is not None else [segs[0]] * state) + segs)[-state:]
        if capture_count is not None and state_update_capacity:
            n = min(int(np.asarray(capture_count).reshape(-1)[b]), len(toks), state_update_capacity)
            for j in range(n):
                update[b, j] = (hist + toks[:j + 1])[-state:]
    return {"hash_ids": out, "present_ids": present, "present_segment_ids": present_seg, "state_update": update}
