"""Probes for ``com.microsoft.MatMulNBits`` (version 1): block-quantized weight matmul.

Every probe is one MatMulNBits node ``Y = A @ Wᵀ (+ bias)``, A (M, K) with M = 4 (or the
shape a feature names), N = 8 outputs, K = 64 and 4-bit blocks of 32 unless the feature
varies one of them. Only ``A`` is fed; ``B``, ``scales``, ``zero_points``, ``g_idx`` and
``bias`` are initializers, as in quantized LLMs (the CPU kernel prepacks a constant ``B``:
``matmul_nbits.cc`` ``PrePack``). The float64 reference is
:func:`epaudit.reference.matmulnbits.matmulnbits_reference`.

Data, chosen so that every feature moves the outputs decisively and nothing else does:

* ``A`` holds multiples of 1/32 in [-127/32, 127/32] with ±127/32 at every 16th k: exact in
  float16 and bfloat16, and exact after the int8 block quantization ``accuracy_level = 4``
  allows (scale = absmax / 127 = 1/32 in every block of 16 or more), so a hint that lowers
  A's precision changes nothing the tolerance has to absorb.
* scales are multiples of 1/64 in [4/64, 12/64]; codes are uniform over ``[0, 2^bits)``;
  explicit zero points never equal the implicit ``2^(bits-1)``; a ``g_idx`` is an act-order
  permutation (every block keeps ``block_size`` members, most of them moved).

Controls: an optional input's feature drops the input; every other feature (``bits``,
``block_size``, dtypes, shapes, the ``accuracy_level`` hint) bakes in zero scales, so the
control's W is 0 and Y is the bias or 0: an EP that never applies the weights lands on it.
The control feeds the same ``A``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Case, Feature, Probe, Use, tolerance_for
from ..reference.matmulnbits import (
    default_zero_point,
    matmulnbits_reference,
    pack_codes,
    pack_zero_points,
    prepack_fpa_intb,
)
from .quantmodels import const_node_model

OP_TYPE = "MatMulNBits"
DOMAIN = "com.microsoft"
OPSET = 1

_DOC = "ORT docs/ContribOperators.md#com.microsoft.MatMulNBits"
_KERNEL = "onnxruntime/contrib_ops/cpu/quantization/matmul_nbits.cc"
_HELPER = "contrib_ops/cpu/quantization/matmul_nbits_helper.h CheckInputs"
_REORDER = "contrib_ops/cpu/quantization/matmul_nbits_impl.cc Dequantize4BitsKernelReOrder"
_INPUTS = ("A", "B", "scales", "zero_points", "g_idx", "bias")
_NP = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32}


@dataclass(frozen=True)
class _Spec:
    """One MatMulNBits graph. ``zp``: None (implicit), ``"uint8"`` (packed) or ``"float"``
    (A's type, non-integer values); ``zero_scales``: the neutral control's zero scales.
    ``layout``: the layout ``B``'s bytes are in (0 standard, 1 CUDA SM80, 2 CUDA SM90 fpA_intB,
    :func:`epaudit.reference.matmulnbits.prepack_fpa_intb`); ``prepacked``: the
    ``weight_prepacked`` attribute. A ``dtype`` of bfloat16 feeds float32 and casts around the node."""

    dtype: str = "float32"
    bits: int = 4
    block_size: int = 32
    k: int = 64
    n: int = 8
    lead: tuple[int, ...] = (4,)
    zp: str | None = None
    g_idx: bool = False
    bias: bool = False
    accuracy_level: int | None = None
    zero_scales: bool = False
    layout: int = 0
    prepacked: int = 0


def _data(spec: _Spec, seed: int) -> dict[str, np.ndarray]:
    """Every array of the subject graph, float values already rounded to ``spec.dtype``."""
    rng = np.random.default_rng(seed)
    ft = _NP[spec.dtype]
    k_blocks = -(-spec.k // spec.block_size)
    a = np.clip(np.round(32 * rng.standard_normal(spec.lead + (spec.k,))), -127, 127)
    a[..., ::16] = 127 * rng.choice([-1.0, 1.0], size=a[..., ::16].shape)
    codes = rng.integers(0, 1 << spec.bits, size=(spec.n, k_blocks, spec.block_size))
    out = {"A": (a / 32).astype(ft), "B": pack_codes(codes, spec.bits),
           "scales": (rng.integers(4, 13, size=(spec.n, k_blocks)) / 64).astype(ft)}
    if spec.layout:
        # The weight the node is given is the CUDA layout of the same codes; the reference
        # reads the codes themselves when weight_prepacked names that layout.
        out["B_codes"] = out["B"]
        out["B"] = prepack_fpa_intb(codes.reshape(spec.n, -1)[:, :spec.k], 80 if spec.layout == 1 else 90
                                    ).reshape(out["B_codes"].shape)
    dflt = default_zero_point(spec.bits)
    if spec.zp == "uint8":
        zp = rng.integers(0, (1 << spec.bits) - 1, size=(spec.n, k_blocks))
        zp = zp + (zp >= dflt)  # every value but the implicit one
        out["zero_points"] = pack_zero_points(zp, spec.bits)
    elif spec.zp == "float":
        out["zero_points"] = rng.uniform(0, (1 << spec.bits) - 1, size=(spec.n, k_blocks)).astype(ft)
    if spec.g_idx:
        g_idx = np.repeat(np.arange(k_blocks, dtype=np.int32), spec.block_size)[:spec.k]
        rng.shuffle(g_idx)
        out["g_idx"] = g_idx
    if spec.bias:
        out["bias"] = (2.0 * rng.standard_normal(spec.n)).astype(ft)
    if spec.zero_scales:
        out["scales"] = np.zeros_like(out["scales"])
    return out


def _bfloat16(model: bytes) -> bytes:
    """The float32 model as a bfloat16 node: Cast(A) to bfloat16 in, Cast(Y) to float32 out,
    and its float initializers stored as bfloat16 (their values are bfloat16-exact)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from .models import round_to_bfloat16

    proto = onnx.load_from_string(model)
    node = proto.graph.node[0]
    for i, init in enumerate(proto.graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            arr = numpy_helper.to_array(init)
            bits = (round_to_bfloat16(arr).view(np.uint32) >> 16).astype(np.uint16)
            proto.graph.initializer[i].CopyFrom(helper.make_tensor(init.name, TensorProto.BFLOAT16, list(arr.shape),
                                                                   bits.tobytes(), raw=True))
    node.input[0] = "A.bf16"
    node.output[0] = "Y.bf16"
    cast_in = helper.make_node("Cast", ["A"], ["A.bf16"], to=TensorProto.BFLOAT16, name="cast_in.A")
    cast_out = helper.make_node("Cast", ["Y.bf16"], ["Y"], to=TensorProto.FLOAT, name="cast_out.Y")
    nodes = [cast_in, *proto.graph.node, cast_out]
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    return proto.SerializeToString()


def _case(spec: _Spec, seed: int) -> Case:
    arrays = _data(spec, seed)
    node_inputs = [n if n in arrays else "" for n in _INPUTS]
    attrs: dict[str, object] = {"K": spec.k, "N": spec.n, "bits": spec.bits, "block_size": spec.block_size}
    if spec.accuracy_level is not None:
        attrs["accuracy_level"] = spec.accuracy_level
    if spec.prepacked:
        attrs["weight_prepacked"] = spec.prepacked
    feeds = {"A": arrays["A"]}
    model = const_node_model(OP_TYPE, DOMAIN, OPSET, node_inputs, feeds,
                             {n: v for n, v in arrays.items() if n in _INPUTS and n != "A"},
                             ("Y", arrays["A"].dtype), attrs)
    if spec.dtype == "bfloat16":
        model = _bfloat16(model)
    # weight_prepacked naming B's layout: the weight is the codes; 0 with a CUDA layout: the
    # bytes read as the standard layout (what a kernel ignoring the attribute computes).
    b_read = arrays["B_codes"] if spec.layout and spec.prepacked == spec.layout else arrays["B"]
    ref = matmulnbits_reference(arrays["A"], b_read, arrays["scales"], k=spec.k, n=spec.n,
                                bits=spec.bits, block_size=spec.block_size,
                                zero_points=arrays.get("zero_points"), g_idx=arrays.get("g_idx"),
                                bias=arrays.get("bias"))
    return Case(model=model, feeds=feeds, outputs=("Y",), reference={"Y": ref})


def _build(feature_id: str, seed: int, subject: _Spec, control: _Spec) -> Callable[[], Probe]:
    """Subject and control share ``seed``, so every array they share is identical."""
    def build() -> Probe:
        return Probe(feature_id=feature_id, subject=_case(subject, seed), control=_case(control, seed),
                     tolerance=tolerance_for(subject.dtype, subject.k), dtype=subject.dtype)
    return build


def _feature(fid: str, seed: int, subject: _Spec, control: _Spec, changes: str, source: str,
             uses: Use) -> Feature:
    return Feature(id=fid, op_type=OP_TYPE, domain=DOMAIN, opset=OPSET, dtype=subject.dtype,
                   changes=changes, source=source, build=_build(fid, seed, subject, control), uses=uses)


def _neutral(fid: str, seed: int, spec: _Spec, changes: str, source: str, uses: Use) -> Feature:
    """A feature whose control is the same graph with zero scales (W = 0)."""
    return _feature(fid, seed, spec, replace(spec, zero_scales=True),
                    f"{changes}; control bakes in zero scales (W = 0)", source, uses)


def _dropping(fid: str, seed: int, spec: _Spec, drop: str, changes: str, source: str,
              uses: Use) -> Feature:
    """A feature whose control drops the optional input ``drop`` (a field of :class:`_Spec`)."""
    return _feature(fid, seed, spec, replace(spec, **{drop: None if drop == "zp" else False}),
                    f"{changes}; control drops {'zero_points' if drop == 'zp' else drop}", source, uses)


_F16 = _Spec(dtype="float16")
_ZP_SRC = f"{_DOC}: input zero_points (packed uint8 (N, ceil(k_blocks*bits/8)), low bits first); {_HELPER}"
_FZP_SRC = f"{_DOC}: input zero_points unpacked in A's type (N, k_blocks); {_KERNEL} ComputeBUnpacked"
_GIDX_SRC = f"{_DOC}: input g_idx (K,) int32, block of each k; {_REORDER}"
_ACC_SRC = (f"{_DOC}: attribute accuracy_level (a minimum precision of A; 4 = int8); "
            f"{_KERNEL} GetComputeType (SQNBIT_CompInt8)")

#: The MatMulNBits features, in catalog order.
FEATURES: tuple[Feature, ...] = (
    *(_neutral(f"matmulnbits.bits.{b}", 3000 + b, _Spec(bits=b),
               f"{b}-bit codes, block 32, K=64, N=8, A (4, 64) float32, implicit zero point {1 << (b - 1)}",
               f"{_DOC}: attribute bits, input B (N, k_blocks, block_size*bits/8); {_KERNEL}",
               Use(attributes={"bits": b}) if b != 4 else Use())  # 4 is the schema default
      for b in (2, 4, 8)),
    *(_neutral(f"matmulnbits.bits.{b}.float16", 3010 + b, _Spec(dtype="float16", bits=b),
               f"{b}-bit codes, block 32, A float16",
               f"{_DOC}: attribute bits, type constraint T1 tensor(float16); {_KERNEL} MatMulNBits<MLFloat16>",
               Use(attributes={"bits": b}))
      for b in (2, 8)),
    _neutral("matmulnbits.dtype.float16", 3020, _F16, "4-bit codes, block 32, A/scales/Y float16",
             f"{_DOC}: type constraint T1 tensor(float16); {_KERNEL} MatMulNBits<MLFloat16>", Use()),
    *(_neutral(f"matmulnbits.block_size.{bs}", 3030 + bs.bit_length(), _Spec(block_size=bs, k=max(64, 2 * bs)),
               f"4-bit codes in blocks of {bs}, K={max(64, 2 * bs)}",
               f"{_DOC}: attribute block_size (a power of 2, >= 16; no upper bound in the schema); {_HELPER}",
               Use(attributes={"block_size": bs}))
      for bs in (16, 64, 128, 256, 512)),
    _neutral("matmulnbits.k_not_multiple", 3040, _Spec(k=80),
             "K=80 with blocks of 32: 3 blocks, the last holds 16 codes and 16 padding codes",
             f"{_DOC}: input B, k_blocks = ceil(K / block_size), attribute K; {_HELPER}",
             Use(attributes={"K": NON_DEFAULT}, facts={"k_mod_block_size": "nonzero"})),
    _neutral("matmulnbits.a_3d", 3041, _Spec(lead=(2, 3)),
             "A of rank 3 (2, 3, 64): the matmul broadcasts over the leading dims",
             f"{_DOC}: input A (..., K); {_KERNEL} MatMulComputeHelper", Use(facts={"a_rank": 3})),
    _neutral("matmulnbits.gemv", 3042, _Spec(lead=(1,)),
             "one row of A (M=1, token generation): kernels take a GEMV path",
             f"{_DOC}: input A (M, K) with M = 1; {_KERNEL}", Use(facts={"m": 1})),
    _neutral("matmulnbits.n_odd", 3043, _Spec(n=7),
             "N=7 output features (not a multiple of any tile)",
             f"{_DOC}: attribute N; {_HELPER}", Use(attributes={"N": NON_DEFAULT}, facts={"n": "odd"})),
    _dropping("matmulnbits.zero_points.uint8", 3050, _Spec(zp="uint8"), "zp",
              "4-bit packed uint8 zero_points (N, 1), none equal to the implicit 8", _ZP_SRC,
              Use(inputs=("zero_points",))),
    *(_dropping(f"matmulnbits.zero_points.uint8.bits.{b}", 3050 + b, _Spec(zp="uint8", bits=b), "zp",
                f"{b}-bit packed uint8 zero_points, none equal to the implicit {1 << (b - 1)}", _ZP_SRC,
                Use(inputs=("zero_points",), attributes={"bits": b}))
      for b in (2, 8)),
    _dropping("matmulnbits.zero_points.uint8.odd_blocks", 3059, _Spec(zp="uint8", k=96), "zp",
              "K=96: 3 blocks, packed zero_points (N, 2) whose last byte holds one nibble of padding",
              _ZP_SRC, Use(inputs=("zero_points",))),
    _dropping("matmulnbits.zero_points.float", 3060, _Spec(zp="float"), "zp",
              "float32 zero_points (N, k_blocks) with non-integer values in [0, 15]", _FZP_SRC,
              Use(inputs=("zero_points",))),
    _dropping("matmulnbits.zero_points.float16", 3061, _Spec(dtype="float16", zp="float"), "zp",
              "float16 A with float16 zero_points (N, k_blocks), non-integer values", _FZP_SRC,
              Use(inputs=("zero_points",))),
    _dropping("matmulnbits.zero_points.float.bits.8", 3062, _Spec(zp="float", bits=8), "zp",
              "8-bit codes with float32 zero_points in [0, 255]", _FZP_SRC,
              Use(inputs=("zero_points",), attributes={"bits": 8})),
    _dropping("matmulnbits.g_idx", 3070, _Spec(g_idx=True), "g_idx",
              "g_idx (64,) int32, an act-order permutation of the two blocks of 32", _GIDX_SRC,
              Use(inputs=("g_idx",))),
    _dropping("matmulnbits.g_idx.with_zero_points", 3071, _Spec(g_idx=True, zp="uint8"), "g_idx",
              "g_idx with packed uint8 zero_points: each k takes the zero point of block g_idx[k]",
              _GIDX_SRC, Use(inputs=("g_idx", "zero_points"))),
    _dropping("matmulnbits.g_idx.with_float_zero_points", 3072, _Spec(g_idx=True, zp="float"), "g_idx",
              "g_idx with float32 zero_points: each k takes the zero point of block g_idx[k]",
              _GIDX_SRC, Use(inputs=("g_idx", "zero_points"))),
    _dropping("matmulnbits.bias", 3080, _Spec(bias=True), "bias",
              "bias (N,) float32 with std 2", f"{_DOC}: input bias (N,); {_KERNEL} (C = bias, beta = 1)",
              Use(inputs=("bias",))),
    _dropping("matmulnbits.bias.float16", 3081, _Spec(dtype="float16", bias=True), "bias",
              "bias (N,) float16 with std 2", f"{_DOC}: input bias (N,); {_KERNEL}", Use(inputs=("bias",))),
    _dropping("matmulnbits.bias.with_zero_points", 3082, _Spec(bias=True, zp="uint8"), "bias",
              "bias (N,) with packed uint8 zero_points", f"{_DOC}: inputs bias, zero_points; {_KERNEL}",
              Use(inputs=("bias", "zero_points"))),
    *(_neutral(f"matmulnbits.accuracy_level.{lvl}", 3090 + lvl, _Spec(accuracy_level=lvl),
               f"accuracy_level={lvl} (a precision hint; A is exact at every level, so the result "
               "must match)", _ACC_SRC, Use(attributes={"accuracy_level": lvl}))
      for lvl in (1, 2, 3, 4)),
    _neutral("matmulnbits.accuracy_level.4.with_zero_points", 3095, _Spec(accuracy_level=4, zp="uint8"),
             "accuracy_level=4 (int8 A) with packed uint8 zero_points", _ACC_SRC,
             Use(inputs=("zero_points",), attributes={"accuracy_level": 4})),
    _neutral("matmulnbits.accuracy_level.4.bits.8", 3096, _Spec(accuracy_level=4, bits=8),
             "accuracy_level=4 (int8 A) with 8-bit codes", _ACC_SRC,
             Use(attributes={"accuracy_level": 4, "bits": 8})),
    _neutral("matmulnbits.accuracy_level.4.float16", 3097, _Spec(dtype="float16", accuracy_level=4),
             "accuracy_level=4 (int8 A) with float16 A", _ACC_SRC, Use(attributes={"accuracy_level": 4})),
    *(_feature(f"matmulnbits.weight_prepacked.{lay}", 3100 + lay,
               _Spec(dtype="float16", k=64, n=64, block_size=bs, layout=lay, prepacked=lay),
               _Spec(dtype="float16", k=64, n=64, block_size=bs, layout=lay, prepacked=0),
               f"weight_prepacked={lay}: B holds the 4-bit codes in the CUDA {arch} fpA_intB layout "
               f"(K=N=64, blocks of {bs}, float16 A); control: the same bytes with weight_prepacked=0 "
               "(read as the standard layout, what a kernel ignoring the attribute computes)",
               f"{_DOC}: attribute weight_prepacked; contrib_ops/cuda/quantization/matmul_nbits.cc PrePack_B; "
               "contrib_ops/cuda/llm/fpA_intB_gemm_preprocessors_impl.cu preprocess_weights_for_mixed_gemm_cuda",
               Use(attributes={"weight_prepacked": lay}))
      for lay, arch, bs in ((1, "SM80", 32), (2, "SM90", 64))),
    _neutral("matmulnbits.dtype.bfloat16", 3110, _Spec(dtype="bfloat16"),
             "4-bit codes, block 32, A/scales/Y bfloat16 (float32 I/O, Cast around the node)",
             f"{_DOC}: type constraint T1 tensor(bfloat16); contrib_ops/cuda/quantization/matmul_nbits.cc "
             "(BFloat16 kernel, sm >= 80)", Use()),
)
