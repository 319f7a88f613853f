"""float16 type variants of the hand-written float32 probes (issue 28, "Every type an EP registers").

The generated catalog has type variants (:mod:`epaudit.catalog.corpus.types`); the
hand-written contrib catalogs were float32 only for most operators, while float16 is what
GPU deployments run (CUDA, WebGPU: a float16 BERT fused by ORT's transformers optimizer).
A variant here is ``<base>.float16`` for every base id in :data:`BASES`: the base's own
builder run with :data:`~epaudit.catalog._contrib.TARGET_DTYPE` set to ``float16``, so the
shared builders (:func:`epaudit.catalog._contrib.probe`, :func:`epaudit.catalog._xcase.probe`,
:func:`epaudit.catalog._qgraph.probe`) retype its subject and control graphs
(:func:`epaudit.catalog._contrib.retyped`, :func:`epaudit.catalog._qgraph.retyped`: there the
inputs and outputs the operator's :attr:`~epaudit.catalog._qgraph.QOp.float_t` names):

* the node's float type parameter (``T``) becomes float16, in graph inputs, constants and
  outputs; integer inputs (``int_inputs``, ``input_dtypes``: position ids, masks, pads,
  indices) and inputs or outputs of a fixed dtype (the ``float`` ``U`` outputs of the layer
  norms, LinearAttentionGate's ``TF`` inputs) keep theirs;
* every float value is the base's value rounded to float16 (shapes, seeds and attributes
  unchanged), and the float64 reference is computed from those rounded values, the values
  the EP really receives;
* the tolerance is float16's (:data:`~epaudit.contract.probes.TOLERANCES`), widened by the
  base's accumulation length (``length``/``head``) as the base's builder does.

Which bases: every hand-written float32 feature built by those three builders whose
operator's schema allows float16 for that type parameter (the installed onnxruntime's
schemas, ``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema``: ORT's
``onnxruntime/core/graph/contrib_ops/*.cc``) and whose variant separates (subject and
control references at least ``MIN_SEPARATION`` float16 bounds apart: tests/
test_handwritten_variants.py builds every one). :data:`EXCLUDED` says why each other base
has none. Nothing is built at import: the list is static and each ``build`` runs the base's.

Matrix: a variant reads its base's cell unless a key naming the variant decides it
(:data:`VARIANT_OF`, :func:`variant_base`, used by ``epaudit/matrix/globs.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..contract.probes import Feature, Probe, type_variant_of
from . import (activations_math, bert_attention, dmmha, embed_layer_norm, experimental, linear_attention, mha, moe,
               mrope, norms, quant_matmul, rotary, sparse_attention)
from ._contrib import TARGET_DTYPE

#: The type every variant here is made in.
DTYPE = "float16"

#: Base feature ids with a float16 variant, by operator (catalog order within each).
BASES: tuple[str, ...] = (
    # com.microsoft.MultiHeadAttention (T: float, float16, bfloat16); mha.basic: see EXCLUDED
    "mha.packed_qkv", "mha.packed_kv", "mha.bias", "mha.key_padding_mask.key_len",
    "mha.key_padding_mask.key_len_start", "mha.key_padding_mask.raw_kv", "mha.key_padding_mask.raw_total",
    "mha.key_padding_mask.raw_3d", "mha.attention_bias", "mha.attention_bias.broadcast",
    "mha.attention_bias.broadcast_batch", "mha.attention_bias.broadcast_heads",
    "mha.key_padding_mask.with_attention_bias", "mha.past", "mha.decode", "mha.present_outputs", "mha.output_qk",
    "mha.unidirectional", "mha.unidirectional.with_past", "mha.key_padding_mask.with_unidirectional", "mha.scale",
    "mha.mask_filter_value", "mha.num_heads", "mha.past_sequence_length", "mha.cache_indirection",
    # com.microsoft.RotaryEmbedding and ai.onnx.RotaryEmbedding-23 (T: float, float16, bfloat16)
    "rotary.input_3d", "rotary.interleaved", "rotary.rotary_embedding_dim", "rotary.rotary_embedding_dim.interleaved",
    "rotary.interleaved.partial", "rotary.position_ids.offset", "rotary.position_ids.tensor",
    "rotary.position_ids.decode", "rotary.is_packed_batching", "rotary.scale",
    "rotary23.position_ids", "rotary23.num_heads", "rotary23.rotary_embedding_dim",
    # com.microsoft.SkipLayerNormalization, SkipSimplifiedLayerNormalization (T: float, float16, bfloat16; U float)
    "skip_layer_norm.bias", "skip_layer_norm.epsilon", "skip_layer_norm.skip_broadcast",
    "skip_layer_norm.output.inv_std_var", "skip_layer_norm.output.input_skip_bias_sum", "skip_layer_norm.beta",
    "skip_layer_norm.skip_broadcast_batch", "skip_layer_norm.output.mean", "skip_layer_norm.output.all",
    "skip_simplified_layer_norm.bias", "skip_simplified_layer_norm.epsilon", "skip_simplified_layer_norm.skip_broadcast",
    "skip_simplified_layer_norm.output.inv_std_var", "skip_simplified_layer_norm.output.input_skip_bias_sum",
    "skip_simplified_layer_norm.input_2d", "skip_simplified_layer_norm.output.inv_std_var_and_sum",
    # ai.onnx.SimplifiedLayerNormalization (ORT's, T and V: float16, float, double, bfloat16)
    "simplified_layer_norm.epsilon", "simplified_layer_norm.axis", "simplified_layer_norm.output.inv_std_var",
    # activations (T includes float16)
    "gelu.basic", "biasgelu.basic", "fastgelu.basic", "fastgelu.bias", "quickgelu.basic", "quickgelu.alpha",
    "scaledsilu.basic", "scaledsilu.alpha", "scaledsilu.scale", "gatedadd.basic", "gatedadd.rank2",
    # fused (FusedConv, ConvTransposeWithDynamicPads T: float16, float, double; FusedGemm, FusedMatMul,
    # TransposeMatMul: float16 among theirs)
    "fusedconv.basic", "fusedconv.activation.Relu", "fusedconv.activation.Tanh", "fusedconv.activation.Sigmoid",
    "fusedconv.activation.LeakyRelu", "fusedconv.activation.Clip", "fusedconv.activation.HardSigmoid",
    "fusedconv.B", "fusedconv.Z", "fusedconv.Z.with_activation", "fusedconv.pads", "fusedconv.strides",
    "fusedconv.dilations", "fusedconv.auto_pad", "fusedconv.group",
    "fusedgemm.basic", "fusedgemm.no_activation", "fusedgemm.activation.Relu", "fusedgemm.activation.Tanh",
    "fusedgemm.activation.Sigmoid", "fusedgemm.activation.LeakyRelu", "fusedgemm.activation.HardSigmoid",
    "fusedgemm.activation.Selu", "fusedgemm.activation.Elu", "fusedgemm.C", "fusedgemm.alpha", "fusedgemm.beta",
    "fusedgemm.transA", "fusedgemm.transB",
    "fusedmatmul.basic", "fusedmatmul.alpha", "fusedmatmul.transA", "fusedmatmul.transB", "fusedmatmul.transBatchA",
    "fusedmatmul.transBatchB", "fusedmatmul.transBatchA.transA",
    "transposematmul.basic", "transposematmul.alpha", "transposematmul.transA", "transposematmul.transB",
    "convtransposewithdynamicpads.basic", "convtransposewithdynamicpads.no_pads", "convtransposewithdynamicpads.Pads",
    "convtransposewithdynamicpads.B", "convtransposewithdynamicpads.strides",
    "convtransposewithdynamicpads.output_padding", "convtransposewithdynamicpads.dilations",
    "convtransposewithdynamicpads.group",
    # tensor math (Pad T: float16, float, double; GatherND, ExpandDims, Trilu, Unique, UnfoldTensor, SampleOp:
    # every numeric type)
    "pad.basic", "pad.value", "pad.mode.reflect", "pad.mode.edge", "pad.negative", "pad.pads_2d",
    "gathernd.basic", "gathernd.indices.int32", "gathernd.scalars", "gathernd.slices", "gathernd.negative",
    "expanddims.basic", "expanddims.negative_axis", "expanddims.constant_axis",
    "trilu.basic", "trilu.upper", "trilu.k", "trilu.k.negative", "trilu.k.lower",
    "unique.basic", "unfoldtensor.basic", "unfoldtensor.step", "unfoldtensor.dim", "sampleop.basic",
    # sampling (GridSample T1, CropAndResize T1: float16 among theirs)
    "gridsample.basic", "gridsample.mode.nearest", "gridsample.mode.bicubic", "gridsample.padding_mode.border",
    "gridsample.padding_mode.reflection", "gridsample.align_corners", "gridsample.align_corners.bicubic_border",
    "cropandresize.basic", "cropandresize.batch_indices", "cropandresize.mode.nearest",
    "cropandresize.extrapolation_value",
    # LLM blocks (T: float, float16, bfloat16; LinearAttentionGate's TF stays float)
    "engramgate.basic", "engramgate.output.gated_value_normed", "engramgate.epsilon",
    "causalconvwithstate.basic", "causalconvwithstate.bias", "causalconvwithstate.past_state",
    "causalconvwithstate.decode", "causalconvwithstate.activation.silu", "causalconvwithstate.activation.swish",
    "causalconvwithstate.dilation", "causalconvwithstate.channels_last", "causalconvwithstate.channels_last.multi_axis",
    "causalconvwithstate.state_window",
    "hyperconnectionpremix.basic", "hyperconnectionpremix.pre_mix.per_feature", "hyperconnectionpremix.pre_mix.column",
    "hyperconnectionpremix.reduction_scale", "hyperconnectionpremix.num_branches",
    "hyperconnectionpremix.num_branches.flat_pre_mix",
    "hyperconnectionpostmix.basic", "hyperconnectionpostmix.stream_mix", "hyperconnectionpostmix.post_mix.per_feature",
    "hyperconnectionpostmix.num_branches",
    "branchwisermsnorm.basic", "branchwisermsnorm.scale", "branchwisermsnorm.scale.per_branch",
    "branchwisermsnorm.scale.flat", "branchwisermsnorm.num_branches", "branchwisermsnorm.epsilon",
    "gatedrmsnorm.basic", "gatedrmsnorm.activation.sigmoid", "gatedrmsnorm.activation.swish", "gatedrmsnorm.groups",
    "gatedrmsnorm.epsilon", "linearattentiongate.basic", "linearattentiongate.output.beta",
    # ONNX's removed experimental operators as ORT keeps them (T: float16, float, double; DynamicSlice every type)
    "experimental.affine.alpha_beta", "experimental.scaledtanh.alpha", "experimental.scaledtanh.beta",
    "experimental.parametricsoftplus.alpha", "experimental.parametricsoftplus.beta", "experimental.scale.scale",
    "experimental.imagescaler.bias", "experimental.imagescaler.scale", "experimental.crop.border",
    "experimental.crop.scale", "experimental.dynamicslice.starts", "experimental.dynamicslice.axes",
    "experimental.dynamicslice.negative", "experimental.globallppool.p", "experimental.globallppool.default_p",
    "experimental.maxroipool.spatial_scale", "experimental.maxroipool.rois",
    # the _qgraph builder (T: float, float16 [, bfloat16]; int32 masks and ids, uint8 weights and QK/T2 kept):
    # com.microsoft.Attention, the non-quantized BERT attention of ORT's transformers optimizer
    "ms_attention.basic", "ms_attention.bias", "ms_attention.bias.omitted", "ms_attention.mask_index.key_len",
    "ms_attention.mask_index.key_len_start", "ms_attention.mask_index.raw_2d", "ms_attention.mask_index.raw_3d",
    "ms_attention.past", "ms_attention.attention_bias", "ms_attention.unidirectional",
    "ms_attention.unidirectional.with_past", "ms_attention.scale", "ms_attention.mask_filter_value",
    "ms_attention.qkv_hidden_sizes",
    # com.microsoft.EmbedLayerNormalization (T: float, float16; T1 int32)
    "embedlayernormalization.basic", "embedlayernormalization.segment", "embedlayernormalization.no_segment",
    "embedlayernormalization.mask", "embedlayernormalization.position_ids",
    "embedlayernormalization.position_ids.broadcast", "embedlayernormalization.embedding_sum",
    "embedlayernormalization.output_only", "embedlayernormalization.epsilon",
    # com.microsoft.DecoderMaskedMultiHeadAttention (T: float, float16; qk is QK, kept float)
    "decodermaskedmultiheadattention.self", "decodermaskedmultiheadattention.packed_qkv",
    "decodermaskedmultiheadattention.bias", "decodermaskedmultiheadattention.mask_index",
    "decodermaskedmultiheadattention.attention_bias", "decodermaskedmultiheadattention.output_qk",
    "decodermaskedmultiheadattention.scale", "decodermaskedmultiheadattention.mask_filter_value",
    "decodermaskedmultiheadattention.cross_attention", "decodermaskedmultiheadattention.beam_search",
    # com.microsoft.MRotaryEmbedding, SparseAttention (T: float, float16, bfloat16)
    "mrotaryembedding.mrope_section", "mrotaryembedding.mrope_layout", "mrotaryembedding.interleaved",
    "mrotaryembedding.input_3d", "mrotaryembedding.rotary_embedding_dim",
    "sparseattention.block_mask", "sparseattention.decode", "sparseattention.decode.ragged",
    "sparseattention.decode.block_mask", "sparseattention.packed_qkv", "sparseattention.do_rotary",
    "sparseattention.rotary_interleaved", "sparseattention.scale",
    # com.microsoft.LinearAttention (T and S: float, float16, bfloat16; S follows T: linear_attention.OP)
    "linearattention.gated_delta", "linearattention.update_rule.linear", "linearattention.update_rule.gated",
    "linearattention.update_rule.delta", "linearattention.past_state", "linearattention.decode",
    "linearattention.decay.per_key", "linearattention.beta.broadcast", "linearattention.gqa", "linearattention.scale",
    "linearattention.state_window",
    # com.microsoft.MoE (T: float, float16, bfloat16). The CPU EP of onnxruntime 1.31.1 computes all but
    # moe.fc3 wrongly in float16 (MOE_CPU_FLOAT16): made all the same, the CPU cells declared skip with
    # that finding, so an EP that runs float16 MoE (CUDA, WebGPU) is still audited by them
    "moe.fc3", "moe.basic", "moe.k", "moe.fc1_experts_bias", "moe.fc2_experts_bias", "moe.activation_type.gelu",
    "moe.activation_type.silu", "moe.activation_type.identity", "moe.swiglu", "moe.swiglu_limit", "moe.input_3d",
    "moe.normalize_routing_weights",
    # com.microsoft.MatMulBnb4 (T1: float, float16, bfloat16; B uint8)
    "matmulbnb4.nf4", "matmulbnb4.fp4", "matmulbnb4.block_size", "matmulbnb4.transB", "matmulbnb4.a_3d",
)

_NO_F16 = "the schema's {} has no float16"
_SIBLING = "a hand-written float16 sibling of the same configuration exists: {}"
_QMOE = ("QMoE's float scales are T2, a parameter of its own that ORT's kernels take "
         "in T's type (qmoe.dtype.float16 makes both float16); a T-only retype mixes them")
#: What the CPU EP does with the float16 MoE variants (declared skip on CPU in capabilities.toml).
MOE_CPU_FLOAT16 = ("onnxruntime 1.31.1's CPU EP runs a float16 MoE as its float kernel behind inserted Casts and "
                   "returns zeros for the experts unless normalize_routing_weights=1 (moe.basic.float16: 0 of 96 "
                   "elements nonzero, the control's output; the same with graph optimizations off; a float32 model "
                   "of the same float16-rounded values passes); moe.normalize_routing_weights.float16's control is "
                   "that path")

#: Base ids built by the two shared builders that have no variant, and why (one line each).
EXCLUDED: dict[str, str] = {
    "mha.basic": _SIBLING.format("mha.dtype.float16"),
    "rotary.basic": _SIBLING.format("rotary.dtype.float16"),
    "skip_layer_norm.basic": _SIBLING.format("skip_layer_norm.dtype.float16"),
    "skip_simplified_layer_norm.basic": _SIBLING.format("skip_simplified_layer_norm.dtype.float16"),
    "simplified_layer_norm.basic": _SIBLING.format("simplified_layer_norm.dtype.float16"),
    "inverse.basic": _SIBLING.format("inverse.dtype.float16"),
    "range.basic": _NO_F16.format("com.microsoft.Range T (float, double, int16, int32, int64)"),
    "range.delta": _NO_F16.format("com.microsoft.Range T (float, double, int16, int32, int64)"),
    "range.negative_delta": _NO_F16.format("com.microsoft.Range T (float, double, int16, int32, int64)"),
    "cdist.basic": _NO_F16.format("com.microsoft.CDist T (float, double)"),
    "cdist.metric.euclidean": _NO_F16.format("com.microsoft.CDist T (float, double)"),
    "cdist.metric.cityblock": _NO_F16.format("com.microsoft.CDist T (float, double)"),
    "cdist.short_rows": _NO_F16.format("com.microsoft.CDist T (float, double)"),
    "murmurhash3.float": _NO_F16.format("com.microsoft.MurmurHash3 T1 (uint32, int32, uint64, int64, float, "
                                        "double, string)"),
    "ngramrepeatblock.basic": _NO_F16.format("com.microsoft.NGramRepeatBlock T (float)"),
    "dynamictimewarping.basic": _NO_F16.format("com.microsoft.DynamicTimeWarping F (float)"),
    "dynamictimewarping.rank3": _NO_F16.format("com.microsoft.DynamicTimeWarping F (float)"),
    # the _qgraph builder
    "mrotaryembedding.basic": _SIBLING.format("mrotaryembedding.dtype.float16"),
    "sparseattention.basic": _SIBLING.format("sparseattention.dtype.float16"),
    "qmoe.bits.4": _SIBLING.format("qmoe.dtype.float16"),
    **{f"qmoe.{c}": _QMOE for c in ("bits.8", "block_size", "zero_points", "fc1_experts_bias", "k",
                                    "normalize_routing_weights.off", "router_weights")},
    **{f"dynamicquantizematmul.{c}": _NO_F16.format("com.microsoft.DynamicQuantizeMatMul T1 (float)")
       for c in ("uint8", "int8", "b_zero_point", "bias", "per_column", "a_3d")},
    **{f"matmulfpq4.{c}": _NO_F16.format("com.microsoft.MatMulFpQ4 T1 (float)")
       for c in ("blk_quant_type.1", "blk_quant_type.0", "blk_quant_type.2", "a_3d")},
    **{f"qembedlayernormalization.{c}": _NO_F16.format("com.microsoft.QEmbedLayerNormalization T (float)")
       for c in ("uint8", "int8", "segment", "mask")},
}

#: Variant id -> base id (the matrix reads a variant's cell from its base: module docstring).
VARIANT_OF: dict[str, str] = {f"{b}.{DTYPE}": b for b in BASES}


def variant_base(feature_id: str) -> str | None:
    """The base id of a type variant (a generated one, ``….opset14.float16``, or one of
    :data:`VARIANT_OF`), else ``None``. Hand-written ids are variants only when listed here,
    never by their shape: ``matmulnbits.bits.2.float16`` is a feature of its own."""
    return type_variant_of(feature_id) or VARIANT_OF.get(feature_id)


def _build(base: Feature, fid: str) -> Callable[[], Probe]:
    def build() -> Probe:
        token = TARGET_DTYPE.set(DTYPE)
        try:
            probe = base.build()
        finally:
            TARGET_DTYPE.reset(token)
        if probe.dtype != DTYPE:  # pragma: no cover - a base its builders do not retype (a catalog bug)
            raise RuntimeError(f"{base.id}: built as {probe.dtype}, not retyped to {DTYPE}")
        return replace(probe, feature_id=fid)
    return build


def variant(base: Feature) -> Feature:
    """The float16 variant of the float32 feature ``base`` (same operator, opset, uses and
    source; ``changes`` says it is the variant)."""
    fid = f"{base.id}.{DTYPE}"
    changes = (f"{base.changes} [type variant of {base.id}: the node's float type in {DTYPE}, float inputs "
               f"rounded to it, reference from the rounded values]")
    source = f"{base.source}; type constraint includes tensor({DTYPE})"
    return replace(base, id=fid, dtype=DTYPE, changes=changes, source=source, build=_build(base, fid))


def _features() -> tuple[Feature, ...]:
    modules = (mha, rotary, norms, activations_math, experimental, bert_attention, embed_layer_norm, dmmha, mrope,
               sparse_attention, linear_attention, moe, quant_matmul)
    by_id = {f.id: f for m in modules for f in m.FEATURES}
    return tuple(variant(by_id[b]) for b in BASES)


#: The variants, in :data:`BASES` order.
FEATURES: tuple[Feature, ...] = _features()
