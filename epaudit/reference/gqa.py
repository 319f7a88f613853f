"""Float64 reference for ``com.microsoft.GroupQueryAttention`` (GQA), version 1.

Written from the ORT contrib-op documentation (``docs/ContribOperators.md``, section
``com.microsoft.GroupQueryAttention``; schema in
``onnxruntime/core/graph/contrib_ops/bert_defs.cc``) and the ORT CPU kernel:

* ``onnxruntime/contrib_ops/cpu/bert/group_query_attention_helper.h`` (``CheckInputs``):
  shapes, prompt vs token generation, present length, rotary cache checks;
* ``onnxruntime/contrib_ops/cpu/bert/group_query_attention.cc``: rotary embedding of Q and
  the new K before the KV cache is built;
* ``onnxruntime/contrib_ops/cpu/bert/gqa_attention_base.h`` (``ComputeAttentionProbs``,
  ``ComputeVxAttentionScore``, ``ConcatStateChunkGQA``): the per-row order of operations
  ``Q·Kᵀ·scale → softcap → + attention_bias → causal / local-window mask → softmax``,
  and what ``output_qk`` holds;
* ``onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc`` and
  ``onnxruntime/core/mlas/lib/rotary_embedding.cpp`` (``MlasRotaryEmbedOneRow_FallBack``):
  the rotation itself;
* microsoft/onnxruntime PR #25269 ("[CPU] GQA supports head_sink input for smooth
  softmax"): ``softmax_i = exp(x_i) / (exp(s) + Σ_j exp(x_j))``, ``s = head_sink[h]``, or 0
  for ``smooth_softmax`` without ``head_sink``.

Everything is computed in float64 from the inputs as given: callers that probe a
float16 / bfloat16 kernel pass the *rounded* inputs, so only the kernel's own arithmetic
separates its result from this one.

Letters: B batch, S new (query) tokens, N query heads, Nkv key/value heads, H head size,
P past length (``past_key.shape[2]``), T present length ``max(total_sequence_length, P)``.
"""

from __future__ import annotations

import math

import numpy as np

from . import kvcache

__all__ = ["gqa_reference", "rotary_embedding"]


def rotary_embedding(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, *,
                     interleaved: bool) -> np.ndarray:
    """Rotate the first ``2 * cos.shape[-1]`` features of every head vector.

    Args:
        x: (..., H) float array; its leading axes must broadcast with those of ``cos``.
        cos, sin: (..., R/2) cache rows already gathered at each vector's position.
        interleaved: rotate pairs ``(2i, 2i+1)`` (True) or halves ``(i, i + R/2)`` (False).

    Returns:
        float64 array shaped like ``x``; features from ``R`` on are copied unchanged.

    Source: ``MlasRotaryEmbedOneRow_FallBack`` (onnxruntime/core/mlas/lib/
    rotary_embedding.cpp): for output index ``i`` it reads cache index ``i/2`` (interleaved)
    or ``i mod R/2`` (halves), partner ``i±1`` or ``i±R/2``, and subtracts ``partner·sin``
    on the first element of a pair, adds it on the second; ``RunRotaryEmbedding``
    (rotary_embedding.cc) copies ``[R, H)`` through.
    """
    x = np.asarray(x, dtype=np.float64)
    cos = np.asarray(cos, dtype=np.float64)
    sin = np.asarray(sin, dtype=np.float64)
    half = cos.shape[-1]
    out = x.copy()
    if interleaved:
        even, odd = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = even * cos - odd * sin
        out[..., 1:2 * half:2] = odd * cos + even * sin
    else:
        first, second = x[..., :half], x[..., half:2 * half]
        out[..., :half] = first * cos - second * sin
        out[..., half:2 * half] = second * cos + first * sin
    return out


def _softmax_row(x: np.ndarray, sink: float | None) -> np.ndarray:
    """Softmax of one unmasked score row, with an optional extra logit in the denominator.

    ``sink`` None: the plain softmax. Otherwise ``exp(x_i) / (exp(sink) + Σ_j exp(x_j))``
    (PR #25269); the max used for stability includes the sink, which changes nothing
    mathematically.
    """
    m = x.max() if sink is None else max(x.max(), sink)
    e = np.exp(x - m)
    denom = e.sum() + (0.0 if sink is None else math.exp(sink - m))
    return e / denom


def gqa_reference(
    query: np.ndarray,
    key: np.ndarray | None,
    value: np.ndarray | None,
    *,
    num_heads: int,
    kv_num_heads: int,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    seqlens_k: np.ndarray,
    total_sequence_length: int,
    cos_cache: np.ndarray | None = None,
    sin_cache: np.ndarray | None = None,
    position_ids: np.ndarray | None = None,
    attention_bias: np.ndarray | None = None,
    head_sink: np.ndarray | None = None,
    scale: float = 0.0,
    softcap: float = 0.0,
    local_window_size: int = -1,
    do_rotary: int = 0,
    rotary_interleaved: int = 0,
    smooth_softmax: int = 0,
    qk_output: int = 0,
    k_scale: np.ndarray | None = None,
    v_scale: np.ndarray | None = None,
    q_norm_weight: np.ndarray | None = None,
    k_norm_weight: np.ndarray | None = None,
    causal: int = 1,
    sliding_window_cache: int = 0,
    qk_norm_epsilon: float = 1e-6,
    k_quant_type: str = "NONE",
    v_quant_type: str = "NONE",
    kv_cache_bit_width: int = 0,
    cache_type: str | None = None,
) -> dict[str, np.ndarray]:
    """Expected outputs of one ``GroupQueryAttention`` node, in float64.

    Args:
        query: (B, S, N·H), or packed QKV (B, S, (N + 2·Nkv)·H) when ``key`` and
            ``value`` are both None.
        key, value: (B, S, Nkv·H) or both None (packed QKV). GQA is self-attention:
            the new K/V length equals S.
        num_heads, kv_num_heads: N and Nkv; N must be a multiple of Nkv. Query head
            ``n`` reads key/value head ``n // (N / Nkv)``.
        past_key, past_value: (B, Nkv, P, H) KV cache in BNSH, or both None.
        seqlens_k: (B,) int, total length − 1 of each batch row.
        total_sequence_length: the batch's maximum total length (past + new).
        cos_cache, sin_cache: (max_positions, R/2), used when ``do_rotary``; R ≤ H.
        position_ids: (B, S) int rotary positions, or None to derive them from
            ``seqlens_k`` as the CPU kernel does. On the first prompt only
            ``position_ids[0, 0]`` is read (positions ``position_ids[0, 0] + s``).
        attention_bias: (B or 1, N or 1, S, total_sequence_length), added to the scores
            of unmasked keys.
        head_sink: (N,) per-head extra logit in the softmax denominator.
        scale: score scale; 0 means 1/√H.
        softcap: c > 0 replaces a score x by c·tanh(x / c); 0 disables it.
        local_window_size: W > 0 lets each query see its W most recent keys (itself
            included); −1 disables the window.
        do_rotary, rotary_interleaved, smooth_softmax: 0/1 attribute values.
        qk_output: 0 no ``output_qk``; 1 scores before softmax (after scale, softcap and
            bias; masked keys hold 0.0); 2 softmax probabilities (masked keys 0.0).
        k_scale, v_scale, k_quant_type, v_quant_type, kv_cache_bit_width, cache_type: the
            quantized cache (:mod:`epaudit.reference.kvcache`): ``cache_type`` is the element
            type of ``past_key``/``past_value`` (``int8``, ``uint8`` = 4-bit, ``float8e4m3fn``);
            the past holds codes, the presents are returned as codes (int8 codes, packed bytes
            or float8 codes, as float64 numbers).
        q_norm_weight, k_norm_weight, qk_norm_epsilon: QK-norm (both weights or neither).
        causal: 0 lets every query see every key of its row (``local_window_size`` must be -1).
        sliding_window_cache: 1 reads and writes the windowed cache (:mod:`epaudit.reference.kvcache`);
            needs a past, ``local_window_size`` > 0, ``qk_output`` 0.

    Returns:
        ``output`` (B, S, N·H), ``present_key`` and ``present_value`` (B, Nkv, T, H), and
        ``output_qk`` (B, N, S, total_sequence_length) when ``qk_output`` is 1 or 2; all
        float64. Present rows the kernel does not fill are 0.0, as the CPU kernel
        zero-fills the present buffers before copying.

    Raises:
        ValueError: inconsistent shapes or attribute values the operator rejects
            (H not a multiple of 8, N not a multiple of Nkv, only one of key/value or
            past_key/past_value, S > 1 with past context and B > 1, rotary without
            caches or with H not a multiple of 16, an unknown ``qk_output`` mode,
            ``local_window_size`` 0 or below −1).

    Sources: see the module docstring; each rule below names its file.
    """
    q_in = np.asarray(query, dtype=np.float64)
    if q_in.ndim != 3:
        raise ValueError(f"query must be 3-D (B, S, D), got shape {q_in.shape}")
    batch, seq, width = q_in.shape
    if num_heads <= 0 or kv_num_heads <= 0 or num_heads % kv_num_heads:
        # group_query_attention_helper.h CheckInputs: "num_heads must be a multiple of kv_num_heads".
        raise ValueError(f"num_heads ({num_heads}) must be a positive multiple of kv_num_heads ({kv_num_heads})")
    group = num_heads // kv_num_heads

    if (key is None) != (value is None):
        # CheckInputs: "'key' and 'value' shall be both present, or both absent".
        raise ValueError("key and value must both be given or both be None (packed QKV)")
    packed = key is None
    # CheckInputs: head_size = D / N, or D / (N + 2·Nkv) for packed QKV, a multiple of 8.
    heads_in_query = num_heads + 2 * kv_num_heads if packed else num_heads
    if width % heads_in_query:
        raise ValueError(f"query width {width} is not a multiple of {heads_in_query} heads")
    head = width // heads_in_query
    if head % 8:
        raise ValueError(f"head size {head} must be a multiple of 8")
    if packed:
        # Packed QKV: Q, K, V follow each other along the last axis (gqa_attention_base.h:
        # k = Q + N·S·H, v = Q + (N + Nkv)·S·H in the BNSH copy).
        q_flat = q_in[..., :num_heads * head]
        k_flat = q_in[..., num_heads * head:(num_heads + kv_num_heads) * head]
        v_flat = q_in[..., (num_heads + kv_num_heads) * head:]
    else:
        q_flat = q_in
        k_flat = np.asarray(key, dtype=np.float64)
        v_flat = np.asarray(value, dtype=np.float64)
        for name, arr in (("key", k_flat), ("value", v_flat)):
            # CheckInputs: same batch and sequence length as query, hidden size Nkv·H.
            if arr.shape != (batch, seq, kv_num_heads * head):
                raise ValueError(f"{name} must have shape {(batch, seq, kv_num_heads * head)}, got {arr.shape}")

    # BSNH -> BNSH, the layout every later step of the kernel uses.
    q = q_flat.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)
    k_new = k_flat.reshape(batch, seq, kv_num_heads, head).transpose(0, 2, 1, 3)
    v_new = v_flat.reshape(batch, seq, kv_num_heads, head).transpose(0, 2, 1, 3)

    if (q_norm_weight is None) != (k_norm_weight is None):
        # Schema, input 15: "Must be provided together with q_norm_weight".
        raise ValueError("q_norm_weight and k_norm_weight must both be given or both be None")
    if q_norm_weight is not None:
        # Schema, input 14: per-head RMS norm of Q and K "before any rotary embedding".
        q = kvcache.rms_norm(q, q_norm_weight, qk_norm_epsilon)
        k_new = kvcache.rms_norm(k_new, k_norm_weight, qk_norm_epsilon)

    quant_k, quant_v = k_quant_type != "NONE", v_quant_type != "NONE"
    _check_quantization(quant_k, quant_v, kv_cache_bit_width, cache_type, k_scale, v_scale, past_key)
    if (past_key is None) != (past_value is None):
        # CheckInputs: "'past_key' and 'past_value' shall be both present or both absent".
        raise ValueError("past_key and past_value must both be given or both be None")
    past_len = 0
    if past_key is not None:
        # A quantized past holds codes: its values are code * scale (kvcache.dequantize).
        past_k = (kvcache.dequantize(past_key, k_scale, k_quant_type, cache_type) if quant_k
                  else np.asarray(past_key, dtype=np.float64))
        past_v = (kvcache.dequantize(past_value, v_scale, v_quant_type, cache_type) if quant_v
                  else np.asarray(past_value, dtype=np.float64))
        if past_k.ndim != 4 or past_k.shape[:2] != (batch, kv_num_heads) or past_k.shape[3] != head \
                or past_v.shape != past_k.shape:
            raise ValueError(f"past_key/past_value must be (B, Nkv, P, H) = ({batch}, {kv_num_heads}, P, {head})")
        past_len = past_k.shape[2]

    lengths = np.asarray(seqlens_k, dtype=np.int64).reshape(-1) + 1  # total length per batch row
    if lengths.shape != (batch,):
        raise ValueError(f"seqlens_k must have shape ({batch},)")
    total = int(total_sequence_length)
    if lengths.max() > total:
        raise ValueError("seqlens_k + 1 exceeds total_sequence_length")
    # CheckInputs: present length = max(total_sequence_length, past buffer length).
    present_len = max(total, past_len)

    # CheckInputs: S > 1 and S != total is a "subsequent prompt", allowed only with B = 1;
    # otherwise S == total is the first prompt and any other S must be 1 (token generation).
    first_prompt = seq == total
    if seq > 1 and not first_prompt and batch != 1:
        raise ValueError("batch_size must be 1 when sequence_length > 1 and past context is given")
    if not first_prompt and past_key is None:
        raise ValueError("S != total_sequence_length needs past_key/past_value (the cache being extended)")
    # gqa_attention_base.h ComputeAttentionProbs: past rows taken from the cache, and the
    # causal offset of query row s, are total_b − S except on the first prompt (0).
    past_rows = np.zeros(batch, dtype=np.int64) if first_prompt else lengths - seq
    # A windowed cache (sliding_window_cache) holds fewer rows than the positions before the step.
    if (past_rows < 0).any() or (not sliding_window_cache and (past_rows > past_len).any()):
        raise ValueError("seqlens_k inconsistent with S and the past length")

    if do_rotary:
        if cos_cache is None or sin_cache is None:
            # group_query_attention.cc reads both caches when do_rotary is set.
            raise ValueError("do_rotary needs cos_cache and sin_cache")
        cos_c = np.asarray(cos_cache, dtype=np.float64)
        sin_c = np.asarray(sin_cache, dtype=np.float64)
        # CheckInputs: H multiple of 16, cache width R/2 ≤ H/2 and a multiple of 8.
        if head % 16 or cos_c.shape != sin_c.shape or cos_c.shape[1] > head // 2 or cos_c.shape[1] % 8:
            raise ValueError("rotary needs H % 16 == 0 and caches (M, R/2) with R/2 <= H/2, R/2 % 8 == 0")
        if position_ids is not None:
            pos = np.asarray(position_ids, dtype=np.int64).reshape(batch, seq)
            if first_prompt:
                # Schema (bert_defs.cc, input 9): "When processing the first prompt the kernel
                # uses only the first element": positions position_ids[0, 0] + s, every row.
                pos = np.broadcast_to(pos[0, 0] + np.arange(seq), (batch, seq))
        else:
            # Generated positions (CPU GeneratePositionIds, mirrored by the WebGPU
            # GeneratePositionIDsProgram in contrib_ops/webgpu/bert/group_query_attention.cc):
            # s on the first prompt, total_b − S + s afterwards.
            pos = past_rows[:, None] + np.arange(seq)[None, :]
        if pos.min() < 0 or pos.max() >= cos_c.shape[0]:
            raise ValueError("rotary position outside the cos/sin cache")
        cos_p = cos_c[pos][:, None]  # (B, 1, S, R/2): broadcast over heads
        sin_p = sin_c[pos][:, None]
        # group_query_attention.cc: Q and the new K are rotated (V never), before K enters the cache.
        q = rotary_embedding(q, cos_p, sin_p, interleaved=bool(rotary_interleaved))
        k_new = rotary_embedding(k_new, cos_p, sin_p, interleaved=bool(rotary_interleaved))

    # A quantized cache stores the new rows as codes; the attention reads their values.
    k_raw = v_raw = None
    if quant_k:
        k_raw, k_new = kvcache.quantize(k_new, k_scale, k_quant_type, cache_type)
    if quant_v:
        v_raw, v_new = kvcache.quantize(v_new, v_scale, v_quant_type, cache_type)

    if qk_output not in (0, 1, 2):
        raise ValueError(f"qk_output must be 0, 1 or 2, got {qk_output}")
    if causal not in (0, 1):
        raise ValueError(f"causal must be 0 or 1, got {causal}")
    if not causal and local_window_size != -1:
        # Schema, attribute local_window_size: "Must be -1 when causal is 0".
        raise ValueError("local_window_size must be -1 when causal is 0")
    if sliding_window_cache:
        if past_key is None or local_window_size < 1 or qk_output or not causal:
            # CPU 1.31.1: "sliding_window_cache=1 requires past_key and past_value to be present";
            # schema: "Requires local_window_size > 0". output_qk is not modelled here.
            raise ValueError("sliding_window_cache needs a past, local_window_size > 0, causal, no qk_output")
        return _windowed(q, k_new, v_new, past_k, past_v, _raw(past_key, quant_k), _raw(past_value, quant_v),
                         k_raw, v_raw, lengths, local_window_size, attention_bias, head_sink,
                         scale=scale, softcap=softcap, smooth_softmax=smooth_softmax, group=group)

    # ConcatStateChunkGQA after a zero fill of the present buffers: rows [0, past_b) from the
    # cache, then the S new rows.
    present_k = np.zeros((batch, kv_num_heads, present_len, head))
    present_v = np.zeros_like(present_k)
    # The presents a quantized cache writes are codes: the same rows, in the stored form.
    present_k_out = _present_codes(past_key, k_raw, past_rows, present_len) if quant_k else present_k
    present_v_out = _present_codes(past_value, v_raw, past_rows, present_len) if quant_v else present_v
    for b in range(batch):
        p = int(past_rows[b])
        if p:
            present_k[b, :, :p] = past_k[b, :, :p]
            present_v[b, :, :p] = past_v[b, :, :p]
        present_k[b, :, p:p + seq] = k_new[b]
        present_v[b, :, p:p + seq] = v_new[b]

    if attention_bias is not None:
        bias = np.asarray(attention_bias, dtype=np.float64)
        # Schema: (B or 1, N or 1, S, total_sequence_length), broadcast on the first two axes.
        if bias.ndim != 4 or bias.shape[0] not in (1, batch) or bias.shape[1] not in (1, num_heads) \
                or bias.shape[2:] != (seq, total):
            raise ValueError(f"attention_bias must be (B|1, N|1, S, total) = ({batch}|1, {num_heads}|1, {seq}, {total}),"
                             f" got {bias.shape}")
        bias = np.broadcast_to(bias, (batch, num_heads, seq, total))
    sinks = None
    if head_sink is not None:
        sinks = np.asarray(head_sink, dtype=np.float64).reshape(-1)
        if sinks.shape != (num_heads,):
            raise ValueError(f"head_sink must have shape ({num_heads},)")
    if qk_output not in (0, 1, 2):
        raise ValueError(f"qk_output must be 0, 1 or 2, got {qk_output}")
    if local_window_size == 0 or local_window_size < -1:
        raise ValueError(f"local_window_size must be -1 or positive, got {local_window_size}")

    alpha = 1.0 / math.sqrt(head) if scale == 0.0 else float(scale)  # ComputeAttentionProbs: alpha
    # ComputeAttentionProbs: `use_smooth_softmax_ || head_sink != nullptr` selects the softmax
    # with an extra logit, head_sink[n] or 0.
    use_sink = bool(smooth_softmax) or sinks is not None
    output = np.zeros((batch, seq, num_heads, head))
    # Columns at or past total_b of a shorter batch row stay 0 here; the kernel leaves them
    # unspecified, so probes keep every row at the full total length.
    qk = np.zeros((batch, num_heads, seq, total)) if qk_output else None

    for b in range(batch):
        total_b = int(lengths[b])
        for n in range(num_heads):
            kv = n // group
            scores = alpha * (q[b, n] @ present_k[b, kv, :total_b].T)  # (S, total_b)
            for s in range(seq):
                # ComputeAttentionProbs: the row sees keys [start, causal) where causal =
                # past_b + s + 1 (capped at total_b) and, with a window W, start = causal − W:
                # W keys, the current one included (measured on ORT 1.31.1; older kernels
                # used `seq_causal_length - local_window_size_ - 1`, i.e. W + 1 keys).
                causal_end = min(int(past_rows[b]) + s + 1, total_b) if causal else total_b
                start = causal_end - local_window_size if 0 < local_window_size < causal_end else 0
                row = scores[s, start:causal_end].copy()
                if softcap > 0.0:
                    row = softcap * np.tanh(row / softcap)  # softcap first ...
                if attention_bias is not None:
                    row = row + bias[b, n, s, start:causal_end]  # ... then the bias, on unmasked keys only
                if qk_output == 1:
                    # BEFORE_SOFTMAX copies the row after masked keys were set to 0.0.
                    qk[b, n, s, start:causal_end] = row
                sink = (sinks[n] if sinks is not None else 0.0) if use_sink else None
                probs = _softmax_row(row, sink)
                if qk_output == 2:
                    qk[b, n, s, start:causal_end] = probs
                # ComputeVxAttentionScore: probs (masked keys 0) times V of the same kv head.
                output[b, s, n] = probs @ present_v[b, kv, start:causal_end]

    result = {
        "output": output.reshape(batch, seq, num_heads * head),
        "present_key": present_k_out,
        "present_value": present_v_out,
    }
    if qk_output:
        result["output_qk"] = qk
    return result


def _check_quantization(quant_k: bool, quant_v: bool, bits: int, cache_type: str | None,
                        k_scale, v_scale, past_key) -> None:
    """The quantized-cache inputs the schema and the 1.31.1 CPU kernel require together.

    Raises:
        ValueError: scales missing, a bit width other than the cache type's (CPU:
            "kv_cache_bit_width must be 4 or 8 when quantization is enabled"), or a cache
            type without quantization.
    """
    if not (quant_k or quant_v):
        if cache_type not in (None, "float16", "float32", "bfloat16"):
            raise ValueError(f"a {cache_type} cache needs k_quant_type/v_quant_type")
        return
    if cache_type not in kvcache.CACHE_TYPES:
        raise ValueError(f"quantized cache type must be one of {sorted(kvcache.CACHE_TYPES)}, got {cache_type!r}")
    if bits != kvcache.CACHE_TYPES[cache_type][0]:
        raise ValueError(f"kv_cache_bit_width {bits} does not fit a {cache_type} cache")
    if (quant_k and k_scale is None) or (quant_v and v_scale is None):
        # Schema, "Quantization": "The corresponding k_scale and v_scale tensors must be provided".
        raise ValueError("a quantized cache needs k_scale and v_scale")


def _raw(past, quantized: bool):
    """The past as stored (codes) when quantized, else None."""
    return np.asarray(past) if quantized and past is not None else None


def _present_codes(past_raw, new_raw: np.ndarray, past_rows: np.ndarray, present_len: int) -> np.ndarray:
    """The present cache in its stored form (codes as float64): rows [0, past_b) from the
    past's codes, then the new rows' codes; rows not written stay 0 (a zero fill)."""
    batch, heads, seq, width = new_raw.shape
    out = np.zeros((batch, heads, present_len, width))
    for b in range(batch):
        p = int(past_rows[b])
        if p:
            out[b, :, :p] = np.asarray(past_raw)[b, :, :p]
        out[b, :, p:p + seq] = new_raw[b]
    return out


def _windowed(q, k_new, v_new, past_k, past_v, past_k_raw, past_v_raw, k_raw, v_raw, lengths,
              window: int, attention_bias, head_sink, *, scale: float, softcap: float,
              smooth_softmax: int, group: int) -> dict[str, np.ndarray]:
    """The windowed KV cache (``sliding_window_cache = 1``; kvcache module docstring).

    Row b's past holds ``L(T_b - S)`` rows, the positions just before the step; the keys of
    position p are those at positions ``p - W + 1 .. p``; the presents hold the last
    ``L(T_b)`` positions at rows ``[0, L)`` (values, or codes for a quantized cache) and 0.0
    in rows ``[L, C)``, which the schema leaves unspecified (probes fill every row).
    """
    batch, num_heads, seq, head = q.shape
    capacity = past_k.shape[2]
    alpha = 1.0 / math.sqrt(head) if scale == 0.0 else float(scale)
    output = np.zeros((batch, seq, num_heads, head))
    presents = {name: np.zeros((batch,) + arr.shape[1:2] + (capacity,) + arr.shape[3:])
                for name, arr in (("present_key", k_raw if k_raw is not None else k_new),
                                  ("present_value", v_raw if v_raw is not None else v_new))}
    sinks = None if head_sink is None else np.asarray(head_sink, dtype=np.float64).reshape(-1)
    use_sink = bool(smooth_softmax) or sinks is not None
    bias = None if attention_bias is None else np.broadcast_to(
        np.asarray(attention_bias, dtype=np.float64), (batch, num_heads, seq, int(lengths.max())))
    for b in range(batch):
        total_b = int(lengths[b])
        before = total_b - seq
        held = kvcache.resident_rows(before, capacity, window) if before > 0 else 0
        first = before - held  # absolute position of past row 0
        keys = np.concatenate([past_k[b, :, :held], k_new[b]], axis=1)  # positions first .. total_b - 1
        vals = np.concatenate([past_v[b, :, :held], v_new[b]], axis=1)
        after = kvcache.resident_rows(total_b, capacity, window)
        for name, past_raw, new, new_raw in (("present_key", past_k_raw, k_new, k_raw),
                                             ("present_value", past_v_raw, v_new, v_raw)):
            stored = np.concatenate([(past_raw if past_raw is not None else
                                      (past_k if name == "present_key" else past_v))[b, :, :held],
                                     new_raw[b] if new_raw is not None else new[b]], axis=1)
            presents[name][b, :, :after] = stored[:, stored.shape[1] - after:]
        for n in range(num_heads):
            kv = n // group
            for s in range(seq):
                pos = before + s
                lo = max(pos - window + 1, first)
                cols = np.arange(lo, pos + 1)
                row = alpha * (keys[kv, cols - first] @ q[b, n, s])
                if softcap > 0.0:
                    row = softcap * np.tanh(row / softcap)
                if bias is not None:
                    row = row + bias[b, n, s, cols]  # absolute key columns (schema, input 10)
                sink = (sinks[n] if sinks is not None else 0.0) if use_sink else None
                output[b, s, n] = _softmax_row(row, sink) @ vals[kv, cols - first]
    return {"output": output.reshape(batch, seq, num_heads * head), **presents}
