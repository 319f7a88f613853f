"""Probes for ``com.microsoft.GatherBlockQuantized`` (version 1): a quantized embedding lookup.

Every probe is one node gathering from a (16, 64) table (logical shape; uint8 data with
``bits`` < 8 packs ``8 / bits`` codes per byte along the last axis), quantized in blocks of 16
along ``quantize_axis`` (1 unless a feature says otherwise), with int64 ``indices`` (2, 3)
fed at run time and ``data``, ``scales``, ``zero_points`` as initializers (the schema calls
them constants). The float64 reference is
:func:`epaudit.reference.gatherblockquantized.gather_block_quantized_reference`.

Scales are multiples of 1/64 in [4/64, 12/64] (exact in float16), codes uniform over their
type's range, explicit zero points never the implicit one. Controls: ``zero_points``
features drop the input (the implicit default then applies: 0 for int4/uint4, ``2^(bits-1)``
for uint8); every other feature bakes in zero scales (a zero output) with the same indices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..contract.probes import Case, Feature, Probe, Use, tolerance_for
from ..reference import minifloat
from ..reference.gatherblockquantized import default_zero_point, gather_block_quantized_reference
from ..reference.matmulnbits import pack_codes
from .quantmodels import RawTensor, SubByte, const_node_model

OP_TYPE = "GatherBlockQuantized"
DOMAIN = "com.microsoft"
OPSET = 1

_DOC = "ORT docs/ContribOperators.md#com.microsoft.GatherBlockQuantized"
_KERNEL = "onnxruntime/contrib_ops/cpu/quantization/gather_block_quantized.cc"
_INPUTS = ("data", "indices", "scales", "zero_points")
_NP = {"float32": np.float32, "float16": np.float16}
#: Logical code range per data kind and bits.
_RANGE = {"int4": (-8, 8), "uint4": (0, 16)}


@dataclass(frozen=True)
class _Spec:
    """One GatherBlockQuantized graph over a logical (rows, cols) table."""

    kind: str = "uint8"           # "uint8", "int4" or "uint4"
    bits: int = 4
    block_size: int = 16
    rows: int = 16
    cols: int = 64
    gather_axis: int = 0
    quantize_axis: int = 1
    zp: bool = False
    dtype: str = "float32"
    indices: tuple[tuple[int, ...], ...] = ((3, 0, 15), (7, 12, 3))
    index_dtype: str = "int64"
    zero_scales: bool = False
    explicit_attrs: bool = True   # False: the node sets no attribute (schema defaults apply)
    scale_rows: int | None = None  # FP8/FP4: scales (1, ...) broadcast along axis 0


def _float_data(kind: str, codes: np.ndarray) -> RawTensor:
    """An FP8/FP4 initializer of ``codes`` (integer codes, logical shape) as raw bytes: numpy
    has no such dtype, so the bytes are built here (FP4: two per byte, element 0 low).

    Raises:
        ValueError: the installed onnx does not know the type (the probe is then dropped with
            this reason, as every probe that cannot be built is).
    """
    from onnx import TensorProto

    fmt = minifloat.FORMATS[kind]
    if fmt.onnx_type not in TensorProto.DataType.values():
        # An onnx older than the type (float4e2m1 needs onnx 1.18): the probe cannot be built.
        raise ValueError(f"the installed onnx has no tensor type {kind} (element type {fmt.onnx_type})")
    raw = minifloat.pack_fp4(codes) if fmt.bits == 4 else np.asarray(codes, dtype=np.uint8).tobytes()
    return RawTensor(fmt.onnx_type, tuple(codes.shape), raw)


def _float_codes(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random codes of ``kind`` whose values are finite with magnitude at most 4 (never NaN or
    infinity; FP4's largest is 6, so at most 4 too)."""
    values = minifloat.decode(np.arange(1 << minifloat.FORMATS[kind].bits), kind)
    ok = np.flatnonzero(np.isfinite(values) & (np.abs(values) <= 4.0))
    return rng.choice(ok, size=shape)


def _case(spec: _Spec, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    floats = spec.kind in minifloat.FORMATS
    lo, hi = _RANGE.get(spec.kind, (0, 1 << spec.bits))
    codes = _float_codes(rng, spec.kind, (spec.rows, spec.cols)) if floats \
        else rng.integers(lo, hi, size=(spec.rows, spec.cols))
    q_axis = spec.quantize_axis % 2
    sshape = [spec.rows, spec.cols]
    sshape[q_axis] = -(-sshape[q_axis] // (spec.block_size or sshape[q_axis]))
    if spec.scale_rows is not None:
        sshape[1 - q_axis] = spec.scale_rows
    scales = (rng.integers(4, 13, size=sshape) / 64).astype(_NP[spec.dtype])
    dflt = default_zero_point(spec.kind, spec.bits)
    zp = None
    if spec.zp:
        zp = rng.integers(lo, hi - 1, size=sshape)
        zp = zp + (zp >= dflt)  # every value but the implicit one
    if spec.zero_scales:
        scales = np.zeros_like(scales)
    if floats:
        constants = {"data": _float_data(spec.kind, codes)}
    elif spec.kind == "uint8":
        constants = {"data": pack_codes(codes, spec.bits)}
        if zp is not None:
            per = 8 // spec.bits
            constants["zero_points"] = pack_codes(np.pad(zp, ((0, 0), (0, (-zp.shape[1]) % per))), spec.bits)
    else:
        constants = {"data": SubByte(spec.kind, codes)}
        if zp is not None:
            constants["zero_points"] = SubByte(spec.kind, zp)
    constants["scales"] = scales
    indices = np.array(spec.indices, dtype=spec.index_dtype)
    attrs = {"bits": spec.bits, "block_size": spec.block_size, "gather_axis": spec.gather_axis,
             "quantize_axis": spec.quantize_axis} if spec.explicit_attrs else {}
    node_inputs = [n if n in constants or n == "indices" else "" for n in _INPUTS]
    model = const_node_model(OP_TYPE, DOMAIN, OPSET, node_inputs, {"indices": indices}, constants,
                             ("output", scales.dtype), attrs)
    values = minifloat.decode(codes, spec.kind) if floats else codes
    ref = gather_block_quantized_reference(values, indices, scales, gather_axis=spec.gather_axis,
                                           quantize_axis=spec.quantize_axis, block_size=spec.block_size,
                                           zero_points=zp, default_zp=0 if floats else dflt, broadcast=floats)
    return Case(model=model, feeds={"indices": indices}, outputs=("output",), reference={"output": ref})


def _build(feature_id: str, seed: int, subject: _Spec, control: _Spec) -> Callable[[], Probe]:
    def build() -> Probe:
        return Probe(feature_id=feature_id, subject=_case(subject, seed), control=_case(control, seed),
                     tolerance=tolerance_for(subject.dtype), dtype=subject.dtype)
    return build


def _feature(fid: str, seed: int, spec: _Spec, changes: str, source: str, uses: Use) -> Feature:
    """``spec`` with zero points: the control drops them; otherwise it bakes in zero scales."""
    if spec.zp:
        control, how = replace(spec, zp=False), "control drops zero_points (implicit default)"
    else:
        control, how = replace(spec, zero_scales=True), "control bakes in zero scales"
    return Feature(id=fid, op_type=OP_TYPE, domain=DOMAIN, opset=OPSET, dtype=spec.dtype,
                   changes=f"{changes}; {how}", source=source, build=_build(fid, seed, spec, control),
                   uses=uses)


_SRC = f"{_DOC}; {_KERNEL} CopyDataAndDequantize"
_ZP = f"{_DOC}: input zero_points (same type as data; uint8 packed along quantize_axis); {_KERNEL}"

#: The GatherBlockQuantized features, in catalog order.
FEATURES: tuple[Feature, ...] = (
    *(_feature(f"gatherblockquantized.uint8.bits.{b}", 4000 + b, _Spec(bits=b),
               f"uint8 data, {b}-bit codes ({8 // b} per byte), no zero_points (implicit {1 << (b - 1)})",
               f"{_DOC}: attribute bits, point 5 (uint8 packing, gather_axis 0); {_KERNEL}",
               Use(attributes={"bits": b}, facts={"data_type": "uint8"}) if b != 4
               else Use(facts={"data_type": "uint8"}))
      for b in (2, 4, 8)),
    *(_feature(f"gatherblockquantized.uint8.zero_points.bits.{b}", 4010 + b, _Spec(bits=b, zp=True),
               f"uint8 data, {b}-bit codes with packed uint8 zero_points, none the implicit {1 << (b - 1)}",
               _ZP, Use(inputs=("zero_points",), attributes={"bits": b}) if b != 4 else Use(inputs=("zero_points",)))
      for b in (2, 4, 8)),
    *(_feature(f"gatherblockquantized.{kind}", 4020 + i, _Spec(kind=kind),
               f"{kind} data (16, 64), no zero_points (implicit 0)", f"{_DOC}: type constraint T1 tensor({kind}); {_SRC}",
               Use(facts={"data_type": kind}))
      for i, kind in enumerate(("int4", "uint4"))),
    *(_feature(f"gatherblockquantized.{kind}.zero_points", 4030 + i, _Spec(kind=kind, zp=True),
               f"{kind} data with {kind} zero_points, none 0", _ZP, Use(inputs=("zero_points",)))
      for i, kind in enumerate(("int4", "uint4"))),
    _feature("gatherblockquantized.int4.gather_axis.1", 4040,
             _Spec(kind="int4", gather_axis=1, quantize_axis=0, indices=((5, 63, 0), (32, 17, 5))),
             "int4 data gathered along axis 1 (columns), quantized along axis 0",
             f"{_DOC}: attributes gather_axis, quantize_axis; {_SRC}",
             Use(attributes={"gather_axis": 1, "quantize_axis": 0})),
    _feature("gatherblockquantized.int4.quantize_axis.0", 4041, _Spec(kind="int4", quantize_axis=0),
             "int4 data gathered along axis 0 and quantized along the same axis 0 (blocks of 16 rows)",
             f"{_DOC}: attribute quantize_axis; {_SRC}", Use(attributes={"quantize_axis": 0})),
    _feature("gatherblockquantized.int4.zero_points.gather_axis.1", 4042,
             _Spec(kind="int4", gather_axis=1, quantize_axis=0, zp=True, indices=((5, 63, 0), (32, 17, 5))),
             "int4 data with zero_points gathered along axis 1, quantized along axis 0", _ZP,
             Use(inputs=("zero_points",), attributes={"gather_axis": 1, "quantize_axis": 0})),
    *(_feature(f"gatherblockquantized.block_size.{bs}", 4050 + bs.bit_length(), _Spec(block_size=bs, cols=max(64, 2 * bs)),
               f"uint8 4-bit data (16, {max(64, 2 * bs)}) in blocks of {bs}",
               f"{_DOC}: attribute block_size (a power of 2, >= 16); {_KERNEL}",
               Use(attributes={"block_size": bs}) if bs != 128 else Use())  # 128: the default
      for bs in (32, 64, 128, 256)),
    _feature("gatherblockquantized.default_attributes", 4059,
             _Spec(block_size=128, cols=256, explicit_attrs=False),
             "no attribute set: the schema defaults bits=4, block_size=128, gather_axis=0, quantize_axis=1 "
             "on uint8 data (16, 256)",
             f"{_DOC}: attribute defaults (bits 4, block_size 128, gather_axis 0, quantize_axis 1); {_KERNEL}",
             Use(facts={"attributes": "unset"})),
    _feature("gatherblockquantized.float16", 4060, _Spec(dtype="float16"),
             "float16 scales and output", f"{_DOC}: type constraint T2 tensor(float16); {_KERNEL}", Use()),
    _feature("gatherblockquantized.indices.int32", 4061, _Spec(index_dtype="int32"),
             "int32 indices", f"{_DOC}: type constraint Tind tensor(int32); {_KERNEL}",
             Use(facts={"indices_type": "int32"})),
    _feature("gatherblockquantized.indices.negative", 4062, _Spec(indices=((-1, 0, -16), (7, -9, 3))),
             "negative indices -1, -16, -9 count from the end", f"{_DOC}: input indices, values in [-s, s-1]; {_KERNEL}",
             Use(facts={"indices": "negative"})),
    _feature("gatherblockquantized.indices.out_of_range", 4063, _Spec(indices=((3, 16, 15), (-17, 12, 40))),
             "indices 16, -17, 40 outside [-16, 15] give zero rows, the others gather",
             f"{_DOC}: input indices ('an out-of-range index produces zeros'); {_KERNEL} (std::fill_n zeros)",
             Use(facts={"indices": "out_of_range"})),
    *(_feature(f"gatherblockquantized.{kind}", 4070 + i, _Spec(kind=kind),
               f"{kind} data (16, 64) (bytes built here: numpy has no {kind}), values of magnitude <= 4, "
               "blocks of 16 along axis 1, no zero_points (symmetric)",
               f"{_DOC}: type constraint T1 tensor({kind}), point 6 ('output = float(data) * scales'); {_SRC}",
               Use(facts={"data_type": kind}))
      for i, kind in enumerate(minifloat.FORMATS)),
    _feature("gatherblockquantized.float8e4m3fn.block_size.0", 4080, _Spec(kind="float8e4m3fn", block_size=0),
             "float8e4m3fn data with block_size=0: one scale per row (the whole quantize_axis is one block)",
             f"{_DOC}: attribute block_size ('0 ... only valid for an FP8 or FP4 data type'); {_SRC}",
             Use(attributes={"block_size": 0}, facts={"data_type": "float8e4m3fn"})),
    _feature("gatherblockquantized.float8e4m3fn.scales_broadcast", 4081,
             _Spec(kind="float8e4m3fn", scale_rows=1),
             "float8e4m3fn data with scales (1, 4): one scale row broadcast over all 16 rows",
             f"{_DOC}: input scales ('a dimension of 1 broadcasts the scale along that axis'), point 6; {_SRC}",
             Use(facts={"data_type": "float8e4m3fn", "scales": "broadcast"})),
)
