"""Float64 reference of ``com.microsoft.MatMulNBits`` (version 1), and the packing it reads.

Rules, each from ORT ``docs/ContribOperators.md#com.microsoft.MatMulNBits`` (the schema text
``get_all_operator_schema()`` returns) and the CPU kernel
``onnxruntime/contrib_ops/cpu/quantization/matmul_nbits.cc`` with its helpers
``matmul_nbits_helper.h`` (``CheckInputs``) and ``matmul_nbits_impl.cc``
(``Dequantize4BitsKernelReOrder``):

* ``Y = A @ Wᵀ + bias`` with ``W`` (N, K) dequantized block-wise along K:
  ``W[n, k] = (q[n, k] - zero_point[n, blk]) * scales[n, blk]``, ``blk = k // block_size``.
* ``B`` is uint8 (N, k_blocks, blob_size), ``k_blocks = ceil(K / block_size)``,
  ``blob_size = block_size * bits / 8``: the codes of one block packed along K, lowest bits
  first (for 4 bits, code 2j in the low nibble of byte j). A K that is not a multiple of
  ``block_size`` leaves padding codes at the end of the last block; they multiply nothing.
* ``scales`` (N, k_blocks) in A's type. ``zero_points`` either uint8 packed like ``B`` per row,
  (N, ceil(k_blocks * bits / 8)), or unpacked in A's type (N, k_blocks) and then any real value;
  absent: ``2^(bits-1)`` (8 for 4 bits, 128 for 8 bits, 2 for 2 bits).
* ``g_idx`` int32 (K,): element k takes the scale and zero point of block ``g_idx[k]`` instead
  of ``k // block_size`` (the code still sits at position k of ``B``).
* ``accuracy_level`` is the lowest precision A may be computed in; it does not change the
  result the operator defines, so the reference ignores it.
"""

from __future__ import annotations

import numpy as np


def default_zero_point(bits: int) -> int:
    """The implicit zero point ``2^(bits-1)`` of the schema text (input ``zero_points``)."""
    return 1 << (bits - 1)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack integer codes along the last axis, lowest bits first, ``8 // bits`` per byte.

    Args:
        codes: integer array (..., L) with values in ``[0, 2^bits)``; L a multiple of
            ``8 // bits``.
        bits: 2, 4 or 8.

    Returns:
        uint8 array (..., L * bits / 8).

    Raises:
        ValueError: a code out of range or L not a multiple of the codes per byte.
    """
    codes = np.asarray(codes, dtype=np.int64)
    per = 8 // bits
    if codes.shape[-1] % per or codes.min(initial=0) < 0 or codes.max(initial=0) >= (1 << bits):
        raise ValueError(f"codes do not pack into {bits}-bit bytes: shape {codes.shape}")
    grouped = codes.reshape(codes.shape[:-1] + (codes.shape[-1] // per, per))
    shifts = np.arange(per, dtype=np.int64) * bits
    return (grouped << shifts).sum(axis=-1).astype(np.uint8)


def unpack_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of :func:`pack_codes`: uint8 (..., L') -> int64 codes (..., L' * 8 / bits)."""
    packed = np.asarray(packed, dtype=np.uint8).astype(np.int64)
    per = 8 // bits
    shifts = np.arange(per, dtype=np.int64) * bits
    codes = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    return codes.reshape(packed.shape[:-1] + (packed.shape[-1] * per,))


def pack_zero_points(zp: np.ndarray, bits: int) -> np.ndarray:
    """Integer zero points (N, k_blocks) -> uint8 (N, ceil(k_blocks * bits / 8)), each row packed
    like ``B`` and padded with code 0 (``CheckInputs``: ``(k_blocks * bits + 7) / 8`` per row)."""
    zp = np.asarray(zp, dtype=np.int64)
    per = 8 // bits
    pad = (-zp.shape[1]) % per
    return pack_codes(np.pad(zp, ((0, 0), (0, pad))), bits)


def dequantize(b: np.ndarray, scales: np.ndarray, *, k: int, bits: int, block_size: int,
               zero_points: np.ndarray | None = None, g_idx: np.ndarray | None = None) -> np.ndarray:
    """The dequantized weight ``W`` (N, K), float64.

    Args:
        b: packed uint8 (N, k_blocks, blob_size).
        scales: (N, k_blocks) (a 1-D (N * k_blocks,) form is accepted, as the kernel does).
        k: the attribute ``K``.
        bits: 2, 4 or 8.
        block_size: power of two >= 16.
        zero_points: uint8 packed (N, ceil(k_blocks * bits / 8)), or float (N, k_blocks), or
            None for the implicit ``2^(bits-1)``.
        g_idx: int32 (K,) or (k_blocks * block_size,): block of each k; None: ``k // block_size``.

    Raises:
        ValueError: a shape that ``CheckInputs`` would refuse.
    """
    n = b.shape[0]
    k_blocks = -(-k // block_size)
    if b.shape != (n, k_blocks, block_size * bits // 8):
        raise ValueError(f"B shape {b.shape} is not (N, {k_blocks}, {block_size * bits // 8})")
    codes = unpack_codes(b, bits).reshape(n, k_blocks * block_size)[:, :k].astype(np.float64)
    s = np.asarray(scales, dtype=np.float64).reshape(n, k_blocks)
    if zero_points is None:
        z = np.full((n, k_blocks), float(default_zero_point(bits)))
    elif np.asarray(zero_points).dtype == np.uint8:
        z = unpack_codes(zero_points, bits)[:, :k_blocks].astype(np.float64)
    else:
        z = np.asarray(zero_points, dtype=np.float64).reshape(n, k_blocks)
    blk = np.arange(k) // block_size if g_idx is None else np.asarray(g_idx, dtype=np.int64)[:k]
    if blk.min() < 0 or blk.max() >= k_blocks:
        raise ValueError(f"g_idx values outside [0, {k_blocks})")
    return (codes - z[:, blk]) * s[:, blk]


def matmulnbits_reference(a: np.ndarray, b: np.ndarray, scales: np.ndarray, *, k: int, n: int,
                          bits: int, block_size: int, zero_points: np.ndarray | None = None,
                          g_idx: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """``Y = A @ Wᵀ (+ bias)`` in float64: A (..., K) -> Y (..., N).

    ``A``, ``scales``, ``bias`` and float ``zero_points`` are taken as given (already rounded to
    the node's dtype by the caller). Raises ValueError on a shape ``CheckInputs`` refuses.
    """
    w = dequantize(b, scales, k=k, bits=bits, block_size=block_size,
                   zero_points=zero_points, g_idx=g_idx)
    if w.shape[0] != n or np.shape(a)[-1] != k:
        raise ValueError(f"A (..., {np.shape(a)[-1]}) and W {w.shape} do not match K={k}, N={n}")
    y = np.asarray(a, dtype=np.float64) @ w.T
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64)
    return y


#: Row permutation within each group of 32 K-rows for 4-bit weights (W4_A16): output row r
#: of a group takes input row ``_LDSM_PERMUTATION[r]`` (``cutlass_preprocessors.cc``
#: ``get_permutation_map``).
_LDSM_PERMUTATION = (0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11, 18, 19, 26, 27,
                     4, 5, 12, 13, 20, 21, 28, 29, 6, 7, 14, 15, 22, 23, 30, 31)


def prepack_fpa_intb(codes: np.ndarray, arch: int) -> np.ndarray:
    """4-bit codes (N, K) in [0, 16) -> the CUDA fpA_intB weight layout ``weight_prepacked``
    names (1: SM80, ``arch`` 80; 2: SM90, ``arch`` 90), uint8 of shape (N, K / 32, 16): the
    byte count of a standard ``B`` (the kernel checks only the size; reshape it to the node's
    (N, k_blocks, blob_size)).

    Steps, from ORT's CUDA sources (``contrib_ops/cuda/quantization/matmul_nbits.cc``
    ``PrePack_B`` for a weight that is not prepacked, whose result a prepacked weight must
    equal; ``contrib_ops/cuda/llm/fpA_intB_gemm_preprocessors_impl.cu``
    ``preprocess_weights_for_mixed_gemm_cuda``; ``cutlass_extensions/gemm/kernel/mixed_gemm_B_layout.h``
    for the layout of half x uint4b_t: ThreadblockK 64, 4 columns interleaved, LDSM operator):

    1. ``unpack_uint4_transposed_to_int8_direct_cuda``: (K, N) signed 4-bit values ``code - 8``,
       two per byte along N, element 2j low;
    2. ``permute_B_rows_for_mixed_gemm``: rows permuted within groups of 32 (:data:`_LDSM_PERMUTATION`);
    3. ``subbyte_transpose``: to (N, K), two per byte along K;
    4. ``interleave_column_major_tensor`` (SM80 only, skipped for SM90): 32-bit words of 8
       values along K; column n, word r goes to column ``n // 4``, word
       ``4 * (r // 8 * 8) + 8 * (n % 4) + r % 8``;
    5. ``add_bias_and_interleave_int4s_inplace``: each value + 8, and within each 32-bit word
       nibbles ``[e0, e2, e4, e6, e1, e3, e5, e7]`` (nibble d holds element 2d for d < 4,
       ``2(d - 4) + 1`` after).

    Not checked on a GPU here (no device was lent); a layout error shows as a CUDA mismatch.

    Raises:
        ValueError: codes out of range, or N, K not multiples of 64 (the transpose's tiles).
    """
    c = np.asarray(codes, dtype=np.int64)
    n, k = c.shape
    if n % 64 or k % 64 or c.min() < 0 or c.max() > 15:
        raise ValueError("prepack needs 4-bit codes (N, K) with N and K multiples of 64")
    if arch not in (80, 90):
        raise ValueError(f"arch must be 80 or 90, got {arch}")
    t = (c - 8).T  # (K, N) signed values, step 1
    perm = np.array(_LDSM_PERMUTATION)
    t = t.reshape(k // 32, 32, n)[:, perm, :].reshape(k, n)  # step 2
    cm = t.T  # (N, K): column n of the (K, N) matrix, contiguous along K; step 3
    words = cm.reshape(n, k // 8, 8)  # 32-bit words of 8 values along K
    if arch == 80:  # step 4
        vec_rows = k // 8
        out = np.empty_like(words).reshape(-1, 8)
        flat = words.reshape(-1, 8)
        for col in range(n):
            for r in range(vec_rows):
                write = (col // 4) * vec_rows * 4 + 4 * (r // 8 * 8) + 8 * (col % 4) + r % 8
                out[write] = flat[col * vec_rows + r]
        words = out.reshape(n, k // 8, 8)
    u = words + 8  # step 5: unsigned nibbles, then the register interleave
    order = np.array([0, 2, 4, 6, 1, 3, 5, 7])
    nibbles = u[..., order]
    packed = nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)  # bytes, low nibble first
    return packed.astype(np.uint8).reshape(n, k // 32, 16)
