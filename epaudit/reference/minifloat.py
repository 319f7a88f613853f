"""The 8-bit and 4-bit float formats ONNX names, decoded and encoded in float64 by us.

numpy has no float8 or float4 dtype, so probes build these tensors byte by byte and the
references decode the bytes themselves. Formats (ONNX ``docs/Operators.md`` "Float 8" and
``docs/docsgen/source/technical/float8.md``; float4: ONNX 1.18 ``FLOAT4E2M1``, the OCP
Microscaling spec's E2M1 element):

=================  =====  ========  ====  ==========================================
name               ONNX   exp/man   bias  special values
=================  =====  ========  ====  ==========================================
float8e4m3fn       17     4 / 3     7     no infinity; NaN = S.1111.111; max 448
float8e4m3fnuz     18     4 / 3     8     no infinity, no -0; NaN = 0x80; max 240
float8e5m2         19     5 / 2     15    IEEE-like: inf = S.11111.00, NaN S.11111.xx; max 57344
float8e5m2fnuz     20     5 / 2     16    no infinity, no -0; NaN = 0x80; max 57344
float4e2m1         23     2 / 1     1     none: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; two per byte, element 0 low nibble
=================  =====  ========  ====  ==========================================

Subnormals (exponent field 0) are ``man / 2^mbits * 2^(1 - bias)``, normals
``(1 + man / 2^mbits) * 2^(exp - bias)``. :func:`encode` rounds to the nearest
representable value, ties to the even code, and saturates at the largest finite value
(ONNX ``Cast`` with ``saturate=1``, the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["FORMATS", "Format", "decode", "encode", "pack_fp4", "unpack_fp4"]


@dataclass(frozen=True)
class Format:
    """One minifloat format.

    Attributes:
        name: the ONNX type name (``float8e4m3fn``).
        onnx_type: ``TensorProto.DataType`` value.
        exp_bits, man_bits, bias: the layout.
        kind: ``"fn"`` (top exponent+mantissa all ones is NaN, no inf), ``"fnuz"`` (only
            0x80 is NaN, no negative zero, no inf), ``"ieee"`` (top exponent is inf/NaN),
            ``"fp4"`` (every code finite).
        bits: 8 or 4.
    """

    name: str
    onnx_type: int
    exp_bits: int
    man_bits: int
    bias: int
    kind: str
    bits: int = 8


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("float8e4m3fn", 17, 4, 3, 7, "fn"),
    Format("float8e4m3fnuz", 18, 4, 3, 8, "fnuz"),
    Format("float8e5m2", 19, 5, 2, 15, "ieee"),
    Format("float8e5m2fnuz", 20, 5, 2, 16, "fnuz"),
    Format("float4e2m1", 23, 2, 1, 1, "fp4", bits=4),
)}


@lru_cache(maxsize=None)
def _table(name: str) -> np.ndarray:
    """float64 value of every code of ``name`` (NaN where the code is NaN)."""
    f = FORMATS[name]
    n = 1 << f.bits
    out = np.empty(n)
    for code in range(n):
        sign = -1.0 if code >> (f.bits - 1) else 1.0
        exp = (code >> f.man_bits) & ((1 << f.exp_bits) - 1)
        man = code & ((1 << f.man_bits) - 1)
        top = exp == (1 << f.exp_bits) - 1
        if f.kind == "fn" and top and man == (1 << f.man_bits) - 1:
            out[code] = np.nan
            continue
        if f.kind == "fnuz" and code == 0x80:
            out[code] = np.nan
            continue
        if f.kind == "ieee" and top:
            out[code] = sign * np.inf if man == 0 else np.nan
            continue
        if exp == 0:
            mag = man / (1 << f.man_bits) * 2.0 ** (1 - f.bias)
        else:
            mag = (1 + man / (1 << f.man_bits)) * 2.0 ** (exp - f.bias)
        out[code] = sign * mag
    return out


def decode(codes: np.ndarray, name: str) -> np.ndarray:
    """The float64 values of integer ``codes`` (one code per element, any shape).

    Raises:
        KeyError: an unknown format name.
        ValueError: a code outside ``[0, 2^bits)``.
    """
    c = np.asarray(codes, dtype=np.int64)
    f = FORMATS[name]
    if c.size and (c.min() < 0 or c.max() >= (1 << f.bits)):
        raise ValueError(f"{name} codes must lie in [0, {1 << f.bits})")
    return _table(name)[c]


def encode(values: np.ndarray, name: str) -> np.ndarray:
    """The code nearest to each finite value (ties to the even code), saturating at the
    largest finite magnitude; int64 codes, same shape.

    Raises:
        ValueError: a non-finite value (probes never encode one).
    """
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise ValueError("encode takes finite values only")
    table = _table(name)
    finite = np.flatnonzero(np.isfinite(table))
    # fnuz formats have no -0: 0x80 is NaN and already left out; keep one zero per sign.
    vals = table[finite]
    maxabs = np.max(np.abs(vals))
    v = np.clip(v, -maxabs, maxabs)
    dist = np.abs(v.reshape(-1, 1) - vals.reshape(1, -1))
    best = dist.min(axis=1, keepdims=True)
    ties = dist == best
    # Among equally near codes take the even one (ties to even); -0 and +0 tie only at 0.
    even = (finite % 2 == 0).reshape(1, -1)
    pick = np.where((ties & even).any(axis=1), np.argmax(ties & even, axis=1), np.argmax(ties, axis=1))
    codes = finite[pick]
    # A value of exactly 0 (or rounding to 0) takes the +0 code.
    codes = np.where(vals[pick] == 0.0, 0, codes)
    return codes.reshape(v.shape)


def pack_fp4(codes: np.ndarray) -> bytes:
    """float4 codes (flattened in C order) packed two per byte, element 0 in the low nibble;
    an odd count pads the last high nibble with 0 (ONNX's 4-bit packing)."""
    c = np.asarray(codes, dtype=np.uint8).reshape(-1)
    if c.size % 2:
        c = np.append(c, 0)
    return ((c[0::2] & 0xF) | ((c[1::2] & 0xF) << 4)).astype(np.uint8).tobytes()


def unpack_fp4(raw: bytes, count: int) -> np.ndarray:
    """Inverse of :func:`pack_fp4`: the first ``count`` codes (int64)."""
    b = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    out = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)
    return out[:count]
