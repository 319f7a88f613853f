"""Float64 / exact-integer references for the com.microsoft quantized matrix products
(version 1): ``QGemm``, ``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat``,
``MatMulInteger16``, ``MatMulFpQ4`` and ``MatMulBnb4``.

Integer products are accumulated exactly (int64); only the final scaling is float.

* QGemm (schema text; ``onnxruntime/contrib_ops/cpu/quantization/quant_gemm.cc``):
  ``acc = Σ_k (A − a_zp)(B − b_zp[n]) + C`` (C int32, broadcast to (M, N), added to the
  accumulator: it is "quantized with zero_point 0 and scale alpha·a_scale·b_scale");
  ``Y = alpha·a_scale·b_scale[n]·acc``, float32 when ``y_scale``/``y_zero_point`` are absent,
  else ``quantize(Y, y_scale, y_zero_point)``.
* DynamicQuantizeMatMul (``dynamic_quantize_matmul.cc``): A is quantized to uint8 per
  tensor at run time (the ONNX DynamicQuantizeLinear rule: range widened to include 0,
  ``scale = (max − min)/255``, ``zp = round(−min/scale)``), then ``Y = (A_q − zp)·scale @
  (B − b_zp)·b_scale + bias``. The probes feed A on that quantization grid, where quantizing
  and dequantizing A is lossless, so the reference is ``A @ dequant(B) + bias``.
* MatMulIntegerToFloat: ``Y = ((A − a_zp)·a_scale) @ ((B − b_zp)·b_scale) + bias``.
* MatMulInteger16 (schema: numpy.matmul of int16, int32 result): exact.
* MatMulFpQ4 (schema; blob layout of ``core/mlas/lib/q4common.h`` and the unpacking in
  ``q4_dq.cpp`` ``MlasQ4GemmUnPackBImpl``): B (K, N) is stored column by column, each
  column in blocks along K of 32 (types 0, 1) or 64 (type 2) values; a block is a float32
  scale, for type 1 a uint8 zero point, then 16 bytes per 32 values where byte l holds value l
  in its low nibble and value l + 16 in its high nibble; value = (q − 8)·scale (types 0, 2)
  or (q − zp)·scale (type 1).
* MatMulBnb4 (schema; arXiv 2305.14314; ``blockwise_quant_block_bnb4.h``): the transposed
  weight (N, K), flattened row-major, is cut into blocks of ``block_size``; element i is the
  high nibble of byte i//2 when i is even, the low nibble when odd; value =
  ``table[code]·absmax[i // block_size]`` with the FP4 (quant_type 0) or NF4 (1) table.
"""

from __future__ import annotations

import numpy as np

from .qlinear import dequantize, quantize

__all__ = ["qgemm", "matmul_integer_to_float", "dynamic_quantize_matmul", "matmul_integer16",
           "fpq4_pack", "fpq4_dequantize", "bnb4_pack", "bnb4_dequantize", "FP4_TABLE", "NF4_TABLE"]

#: bitsandbytes FP4 code -> value (the float32 constants of ``blockwise_quant_block_bnb4.h``).
FP4_TABLE = np.array([0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
                      -0.0, -5.208333333e-03, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25],
                     dtype=np.float32).astype(np.float64)
#: NormalFloat4 code -> value (QLoRA, arXiv 2305.14314, appendix E; float32 as ORT stores them).
NF4_TABLE = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                      -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                      0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                      0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0],
                     dtype=np.float32).astype(np.float64)


def _col(v, n: int) -> np.ndarray:
    """A per-tensor (scalar / 1-element) or per-column (n) parameter as an (n,) float64 row."""
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    return np.full(n, a[0]) if a.size == 1 else a


def qgemm(a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None, *, alpha: float = 1.0,
          trans_a: int = 0, trans_b: int = 0, y_dtype: str | None = None) -> np.ndarray:
    """Expected ``Y`` of QGemm: float64 values, or quantized codes of ``y_dtype`` when
    ``y_scale`` is given. A (M, K) or (K, M) with ``trans_a``; B (K, N) or (N, K)."""
    am = np.asarray(a, np.int64)
    bm = np.asarray(b, np.int64)
    am = am.T if trans_a else am
    bm = bm.T if trans_b else bm
    n = bm.shape[1]
    acc = (am - int(np.asarray(a_zp).reshape(-1)[0])) @ (bm - _col(b_zp, n).astype(np.int64)[None, :])
    if c is not None:
        acc = acc + np.broadcast_to(np.asarray(c, np.int64), acc.shape)
    y = float(alpha) * float(np.asarray(a_scale).reshape(-1)[0]) * _col(b_scale, n)[None, :] * acc
    if y_scale is None:
        return y
    return quantize(y, y_scale, 0 if y_zp is None else y_zp, y_dtype or "uint8")


def matmul_integer_to_float(a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None) -> np.ndarray:
    """Expected ``Y`` of MatMulIntegerToFloat: A (..., M, K), B (K, N); b parameters per
    tensor or per column (N)."""
    bm = np.asarray(b, np.int64)
    n = bm.shape[-1]
    fa = dequantize(a, a_scale, 0 if a_zp is None else a_zp)
    fb = (bm - _col(0 if b_zp is None else b_zp, n)[None, :]) * _col(b_scale, n)[None, :]
    y = fa @ fb
    return y if bias is None else y + np.asarray(bias, np.float64)


def dynamic_quantize_matmul(a, b, b_scale, b_zp=None, bias=None) -> np.ndarray:
    """Expected ``Y`` of DynamicQuantizeMatMul for an A already on its uint8 quantization
    grid (module docstring): ``A @ ((B − b_zp)·b_scale) + bias``."""
    return matmul_integer_to_float(np.asarray(a, np.float64), b, 1.0, b_scale, None, b_zp, bias)


def matmul_integer16(a, b) -> np.ndarray:
    """Exact int16 x int16 -> int32 numpy.matmul (int64 values)."""
    return np.asarray(a, np.int64) @ np.asarray(b, np.int64)


_FPQ4 = {0: (32, False), 1: (32, True), 2: (64, False)}


def fpq4_pack(codes: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, blk_quant_type: int) -> np.ndarray:
    """The MatMulFpQ4 blob (uint8) of a (K, N) weight given as 4-bit ``codes`` (K, N),
    per-block ``scales`` (N, K/BlkLen) float32 and, for type 1, ``zero_points`` (N, K/BlkLen).

    Raises:
        ValueError: an unknown type or K not a multiple of the block length.
    """
    blk, has_zp = _FPQ4[blk_quant_type]
    k, n = codes.shape
    if k % blk:
        raise ValueError(f"K={k} is not a multiple of the block length {blk}")
    out = bytearray()
    for col in range(n):
        for bi in range(k // blk):
            out += np.float32(scales[col, bi]).tobytes()
            if has_zp:
                out.append(int(zero_points[col, bi]))
            q = codes[bi * blk:(bi + 1) * blk, col].astype(np.uint8)
            for s in range(0, blk, 32):
                sub = q[s:s + 32]
                out += bytes((sub[:16] | (sub[16:] << 4)).tolist())
    return np.frombuffer(bytes(out), dtype=np.uint8).copy()


def fpq4_dequantize(blob: np.ndarray, k: int, n: int, blk_quant_type: int) -> np.ndarray:
    """Unpack a MatMulFpQ4 blob into the (K, N) float64 weight (module docstring)."""
    blk, has_zp = _FPQ4[blk_quant_type]
    raw = np.asarray(blob, np.uint8).tobytes()
    w = np.zeros((k, n))
    pos = 0
    for col in range(n):
        for bi in range(k // blk):
            scale = float(np.frombuffer(raw[pos:pos + 4], np.float32)[0])
            pos += 4
            zp = 8
            if has_zp:
                zp = raw[pos]
                pos += 1
            data = np.frombuffer(raw[pos:pos + blk // 2], np.uint8)
            pos += blk // 2
            vals = np.empty(blk, np.int64)
            for s in range(blk // 32):
                d = data[16 * s:16 * (s + 1)].astype(np.int64)
                vals[32 * s:32 * s + 16] = d & 0xF
                vals[32 * s + 16:32 * (s + 1)] = d >> 4
            w[bi * blk:(bi + 1) * blk, col] = (vals - zp) * scale
    return w


def bnb4_pack(codes: np.ndarray) -> np.ndarray:
    """MatMulBnb4's B: the flattened codes two per byte, even elements in the high nibble."""
    flat = np.asarray(codes, np.uint8).reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8)


def bnb4_dequantize(b: np.ndarray, absmax: np.ndarray, n: int, k: int, block_size: int, quant_type: int) -> np.ndarray:
    """The (N, K) float64 weight of MatMulBnb4's B (module docstring)."""
    packed = np.asarray(b, np.uint8).reshape(-1)
    codes = np.empty(packed.size * 2, np.int64)
    codes[0::2], codes[1::2] = packed >> 4, packed & 0xF
    codes = codes[:n * k]
    table = FP4_TABLE if quant_type == 0 else NF4_TABLE
    scale = np.repeat(np.asarray(absmax, np.float64).reshape(-1), block_size)[:n * k]
    return (table[codes] * scale).reshape(n, k)
