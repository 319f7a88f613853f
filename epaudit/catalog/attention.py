"""Probe catalog for the ONNX ``Attention`` operator (ai.onnx opset 23, 24).

Each feature builds one :class:`~epaudit.contract.probes.Probe`: a *subject* model with the
feature on at a decisive value and a *control* model with it off (input dropped,
attribute reset to its default) or neutral, both with fixed seeded inputs and float64
references from :func:`epaudit.reference.attention.attention_reference`.

Controls never feed a changed array under a subject input's name: when the control needs
a *neutral value* of an input (``Q`` made zero, a mask row unmasked), that value is baked
into the control graph as an initializer and the input leaves the graph's inputs. So the
control's feeds are always a subset of the subject's feeds, with the same arrays.

Specification sections cited in ``source``: "ONNX Attention-23/24" is the operator text
of ``onnx/defs/nn/{old,defs}.cc`` (``docs/Operators.md#Attention``) as corrected by onnx
PRs #7867, #7913 and the errata of #8068.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Feature, Probe, Use
from .attention_graph import (
    _B,
    _H,
    _N,
    _PRESENT,
    _SRC,
    _SRC24,
    _Graph,
    _neutral_q,
    _past_arrays,
    _probe,
    _qkv,
    _random_bool_mask,
    _without,
)

__all__ = ["FEATURES"]


def _build_basic(feature_id: str, dtype: str, seed: int, head: int = _H,
                 attrs: Mapping[str, object] | None = None) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        g = _Graph(_qkv(rng, dtype, s_q=4, s_kv=6, head=head), dict(attrs or {}))
        return _probe(feature_id, dtype, 23, g, _neutral_q(g), head)
    return build


def _build_3d_heads() -> Probe:
    rng = np.random.default_rng(1002)
    bnsh = _qkv(rng, "float32", s_q=3, s_kv=5)
    # (B, N, S, H) -> (B, S, N*H): the 3-D layout [DOC23 input Q].
    arrays = {n: a.transpose(0, 2, 1, 3).reshape(_B, a.shape[2], _N * _H) for n, a in bnsh.items()}
    g = _Graph(arrays, {"q_num_heads": _N, "kv_num_heads": _N})
    return _probe("attention.3d_heads", "float32", 23, g, _neutral_q(g))


def _build_gqa_heads() -> Probe:
    rng = np.random.default_rng(1003)
    g = _Graph(_qkv(rng, "float32", s_q=4, s_kv=6, n_kv=2))
    return _probe("attention.gqa_heads", "float32", 23, g, _neutral_q(g))


def _build_bool_mask(feature_id: str, seed: int, shape: tuple[int, ...], p_masked: float = 0.5,
                     opset: int = 23) -> Callable[[], Probe]:
    """A boolean ``attn_mask`` of ``shape`` (any rank the spec broadcasts, a last dimension
    up to T = 6); the control drops the mask."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
        arrays["attn_mask"] = _random_bool_mask(rng, shape, p_masked)
        g = _Graph(arrays)
        return _probe(feature_id, "float32", opset, g, _without(g, "attn_mask"))
    return build


def _build_mask_float() -> Probe:
    rng = np.random.default_rng(1005)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
    arrays["attn_mask"] = (3.0 * rng.standard_normal((_B, 1, 4, 6))).astype(np.float32)
    g = _Graph(arrays)
    return _probe("attention.mask.float", "float32", 23, g, _without(g, "attn_mask"))


def _build_fully_masked_row(opset: int = 23, feature_id: str = "attention.fully_masked_row") -> Probe:
    rng = np.random.default_rng(1006)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
    mask = _random_bool_mask(rng, (_B, 1, 4, 6), 0.3)
    ctrl_mask = mask.copy()
    mask[0, 0, 1, :] = False  # batch 0, query row 1: every key masked, for every head
    ctrl_mask[0, 0, 1, :] = True  # control: that row attends everything
    arrays["attn_mask"] = mask
    g = _Graph(arrays)
    ctrl = dict(arrays, attn_mask=ctrl_mask)
    return _probe(feature_id, "float32", opset, g, _Graph(ctrl, constants=frozenset({"attn_mask"})))


def _build_fully_masked_row_neg_inf(opset: int = 23,
                                    feature_id: str = "attention.fully_masked_row.neg_inf") -> Probe:
    rng = np.random.default_rng(1007)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
    mask = rng.standard_normal((_B, 1, 4, 6)).astype(np.float32)
    ctrl_mask = mask.copy()
    mask[0, 0, 1, :] = -np.inf  # batch 0, query row 1: a -inf float-mask row
    ctrl_mask[0, 0, 1, :] = 0.0  # control: the neutral additive value
    arrays["attn_mask"] = mask
    g = _Graph(arrays)
    ctrl = dict(arrays, attn_mask=ctrl_mask)
    return _probe(feature_id, "float32", opset, g,
                  _Graph(ctrl, constants=frozenset({"attn_mask"})))


def _build_is_causal() -> Probe:
    rng = np.random.default_rng(1008)
    g = _Graph(_qkv(rng, "float32", s_q=5, s_kv=5), {"is_causal": 1})
    return _probe("attention.is_causal", "float32", 23, g, _without(g, attrs=("is_causal",)))


def _build_is_causal_offset() -> Probe:
    # S_q = 3 queries after P = 3 cached keys: offset 3, so query i sees keys 0..i+3
    # (bottom-right), where a top-left mask would let query 0 see key 0 only.
    rng = np.random.default_rng(1009)
    g = _Graph(_past_arrays(rng, 3, 3, 3), {"is_causal": 1}, _PRESENT)
    return _probe("attention.is_causal.offset", "float32", 23, g, _without(g, attrs=("is_causal",)))


def _build_past() -> Probe:
    rng = np.random.default_rng(1010)
    g = _Graph(_past_arrays(rng, 2, 2, 4), {}, _PRESENT)
    return _probe("attention.past", "float32", 23, g, _without(g, "past_key", "past_value"))


def _build_nonpad() -> Probe:
    rng = np.random.default_rng(1011)
    arrays = _qkv(rng, "float32", s_q=3, s_kv=6)
    lens = np.array([2, 4], dtype=np.int64)
    v = arrays["V"].copy()
    for b, n in enumerate(lens):
        v[b, :, n:, :] += 4.0  # padding slots hold far-off values: using them is visible
    arrays["V"] = v
    arrays["nonpad_kv_seqlen"] = lens
    g = _Graph(arrays)
    return _probe("attention.nonpad_kv_seqlen", "float32", 24, g, _without(g, "nonpad_kv_seqlen"))


def _build_scale() -> Probe:
    rng = np.random.default_rng(1012)
    # 1.0 is 4x the default 1/sqrt(16) and exact in float32.
    g = _Graph(_qkv(rng, "float32", s_q=4, s_kv=6, q_gain=1.0), {"scale": 1.0})
    return _probe("attention.scale", "float32", 23, g, _without(g, attrs=("scale",)))


def _build_softcap() -> Probe:
    rng = np.random.default_rng(1013)
    # Scores of a few units against a cap of 1: tanh flattens them decisively.
    g = _Graph(_qkv(rng, "float32", s_q=4, s_kv=6, q_gain=3.0), {"softcap": 1.0})
    return _probe("attention.softcap", "float32", 23, g, _without(g, attrs=("softcap",)))


def _build_softcap_with_mask() -> Probe:
    rng = np.random.default_rng(1014)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6, q_gain=3.0)
    arrays["attn_mask"] = _random_bool_mask(rng, (_B, 1, 4, 6), 0.5)
    g = _Graph(arrays, {"softcap": 1.0})
    return _probe("attention.softcap_with_mask", "float32", 23, g, _without(g, attrs=("softcap",)))


def _qk_mode_graph(mode: int) -> _Graph:
    rng = np.random.default_rng(1015)  # one input set for all four modes
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6, q_gain=3.0)
    # A finite float mask keeps mode 2 finite, and differs from softcap everywhere.
    arrays["attn_mask"] = (2.0 * rng.standard_normal((_B, 1, 4, 6))).astype(np.float32)
    attrs: dict[str, object] = {"softcap": 2.0}
    if mode:
        attrs["qk_matmul_output_mode"] = mode
    return _Graph(arrays, attrs, ("Y", "qk_matmul_output"))


def _build_qk_mode(mode: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _qk_mode_graph(mode)
        # Mode 0 is the attribute's default, so its control cannot reset it: the qk
        # output itself is the feature, and Q is made neutral as for the base features.
        ctrl = _neutral_q(g) if mode == 0 else _without(g, attrs=("qk_matmul_output_mode",))
        return _probe(f"attention.qk_matmul_output_mode.{mode}", "float32", 23, g, ctrl)
    return build


def _build_past_with_mask() -> Probe:
    rng = np.random.default_rng(1020)
    arrays = _past_arrays(rng, 2, 2, 4)
    arrays["attn_mask"] = _random_bool_mask(rng, (_B, 1, 2, 6), 0.5)  # T = 4 past + 2 new
    g = _Graph(arrays, {}, _PRESENT)
    return _probe("attention.past.with_mask", "float32", 23, g, _without(g, "attn_mask"))


def _build_past_with_causal() -> Probe:
    # 2 queries after 5 cached keys with grouped K/V heads: query 0 sees keys 0..5, not key 6.
    rng = np.random.default_rng(1021)
    arrays = _qkv(rng, "float32", s_q=2, s_kv=2, n_kv=2)
    arrays["past_key"] = rng.standard_normal((_B, 2, 5, _H)).astype(np.float32)
    arrays["past_value"] = rng.standard_normal((_B, 2, 5, _H)).astype(np.float32)
    g = _Graph(arrays, {"is_causal": 1}, _PRESENT)
    return _probe("attention.past.with_causal", "float32", 23, g, _without(g, attrs=("is_causal",)))


def _build_qk_mode3_fully_masked(opset: int = 23, feature_id: str =
                                 "attention.qk_matmul_output_mode.3.fully_masked") -> Probe:
    rng = np.random.default_rng(1022)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
    mask = _random_bool_mask(rng, (_B, 1, 4, 6), 0.3)
    ctrl_mask = mask.copy()
    mask[0, 0, 1, :] = False  # batch 0, query row 1: every key masked
    ctrl_mask[0, 0, 1, :] = True
    arrays["attn_mask"] = mask
    attrs = {"qk_matmul_output_mode": 3}
    g = _Graph(arrays, attrs, ("Y", "qk_matmul_output"))
    ctrl = _Graph(dict(arrays, attn_mask=ctrl_mask), attrs, ("Y", "qk_matmul_output"), frozenset({"attn_mask"}))
    return _probe(feature_id, "float32", opset, g, ctrl)


def _build_fully_masked_row_lowest(opset: int = 23,
                                   feature_id: str = "attention.fully_masked_row.lowest") -> Probe:
    # A finite "masked" value is not masking in the spec: only -inf (or False) is. Every
    # logit of the row is lowest + score, which rounds to lowest in float32 and float64
    # alike, so the softmax is uniform and the row is the mean of V ([BODY]: RowAllMasked
    # is ReduceMax(bias) == -inf, false here).
    rng = np.random.default_rng(1023)
    arrays = _qkv(rng, "float32", s_q=4, s_kv=6)
    mask = rng.standard_normal((_B, 1, 4, 6)).astype(np.float32)
    ctrl_mask = mask.copy()
    mask[0, 0, 1, :] = np.finfo(np.float32).min
    ctrl_mask[0, 0, 1, :] = 0.0
    arrays["attn_mask"] = mask
    g = _Graph(arrays)
    return _probe(feature_id, "float32", opset, g,
                  _Graph(dict(arrays, attn_mask=ctrl_mask), constants=frozenset({"attn_mask"})))


def _build_outputs(feature_id: str, seed: int, outputs: tuple[str, ...], past: int = 0,
                   opset: int = 23) -> Callable[[], Probe]:
    """``outputs`` requested (Y plus any of present_key, present_value, qk_matmul_output in
    mode 0), with a past of ``past`` keys or none; the control makes Q zero (the presents are
    then the same copies and Y differs)."""
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        arrays = _past_arrays(rng, 3, 4, past) if past else _qkv(rng, "float32", s_q=3, s_kv=4)
        g = _Graph(arrays, {}, outputs)
        return _probe(feature_id, "float32", opset, g, _neutral_q(g))
    return build


def _causal_nonpad_graph() -> _Graph:
    # An external cache: 2 new queries over a 6-slot K/V buffer holding 4 and 6 valid keys.
    # [DOC24] causal offset = nonpad_kv_seqlen - S_q: batch 0's query 0 sees keys 0..2, batch
    # 1's sees 0..4; padding slots (offset by +4) must not leak.
    rng = np.random.default_rng(1040)
    arrays = _qkv(rng, "float32", s_q=2, s_kv=6)
    lens = np.array([4, 6], dtype=np.int64)
    v = arrays["V"].copy()
    for b, n in enumerate(lens):
        v[b, :, n:, :] += 4.0
    arrays["V"] = v
    arrays["nonpad_kv_seqlen"] = lens
    return _Graph(arrays, {"is_causal": 1})


def _build_causal_with_nonpad() -> Probe:
    g = _causal_nonpad_graph()
    return _probe("attention.is_causal.with_nonpad", "float32", 24, g, _without(g, attrs=("is_causal",)))


def _build_nonpad_with_causal() -> Probe:
    g = _causal_nonpad_graph()
    return _probe("attention.nonpad_kv_seqlen.with_causal", "float32", 24, g, _without(g, "nonpad_kv_seqlen"))


_QK_CHANGES = {
    0: "requests qk_matmul_output (output 3) in mode 0, scale*Q@K^T; control makes Q zero",
    1: "qk_matmul_output_mode=1: output 3 after softcap, before the mask; control mode 0",
    2: "qk_matmul_output_mode=2: output 3 after softcap and the float mask; control mode 0",
    3: "qk_matmul_output_mode=3: output 3 after softmax; control mode 0",
}

_QK_SOURCE = (_SRC + ", attribute qk_matmul_output_mode as renumbered by onnx PR #7913 "
              "(0 QK, 1 softcap, 2 softcap+mask, 3 softmax)")

#: Optional inputs of a node with a KV cache.
_PAST = ("past_key", "past_value")

#: A node fed a boolean / a float (additive) attn_mask: a row of it may mask every key.
_MASK_BOOL = Use(inputs=("attn_mask",), facts={"attn_mask_dtype": "bool"})

_MASK_FLOAT = Use(inputs=("attn_mask",), facts={"attn_mask_dtype": "float"})

#: Every Attention feature, in catalog order.
FEATURES: tuple[Feature, ...] = (
    Feature("attention.basic", "Attention", "", 23, "float32",
            "4-D BNSH Q/K/V, 4 heads, S_q 4 / S_kv 6; control makes Q zero (uniform attention)",
            _SRC + ": Q, K, V inputs, softmax(scale*Q@K^T)@V",
            _build_basic("attention.basic", "float32", 1001)),
    Feature("attention.3d_heads", "Attention", "", 23, "float32",
            "3-D (B, S, N*H) Q/K/V with q_num_heads=kv_num_heads=4; control makes Q zero",
            _SRC + ": 3-D inputs with attributes q_num_heads / kv_num_heads",
            _build_3d_heads,
            uses=Use(facts={"q_rank": 3})),
    Feature("attention.gqa_heads", "Attention", "", 23, "float32",
            "grouped-query heads: 4 query heads share 2 K/V heads; control makes Q zero",
            _SRC + ": GQA, q_num_heads % kv_num_heads == 0; head h reads K/V head h // (Nq/Nkv)",
            _build_gqa_heads,
            uses=Use(facts={"grouped": True})),
    Feature("attention.mask.bool", "Attention", "", 23, "float32",
            "boolean attn_mask (B,1,S_q,T), True = attend; control drops the mask",
            _SRC + ": input attn_mask, boolean form",
            _build_bool_mask("attention.mask.bool", 1004, (_B, 1, 4, 6)),
            uses=_MASK_BOOL),
    Feature("attention.mask.float", "Attention", "", 23, "float32",
            "float attn_mask (B,1,S_q,T) added to the scores; control drops the mask",
            _SRC + ": input attn_mask, float (additive) form",
            _build_mask_float,
            uses=_MASK_FLOAT),
    Feature("attention.is_causal", "Attention", "", 23, "float32",
            "is_causal=1 with S_q = S_kv = 5 (lower-triangular); control is_causal=0",
            _SRC + ": attribute is_causal",
            _build_is_causal,
            uses=Use(attributes={"is_causal": 1})),
    Feature("attention.is_causal.offset", "Attention", "", 23, "float32",
            "is_causal=1 with 3 past keys + 3 new, S_q 3 < T 6: bottom-right, query i sees keys <= i+3; "
            "control is_causal=0",
            _SRC + ": attribute is_causal, bottom-right alignment j <= i + past_sequence_length "
            "(errata of onnx PR #8068)",
            _build_is_causal_offset,
            uses=Use(inputs=_PAST, attributes={"is_causal": 1})),
    Feature("attention.past", "Attention", "", 23, "float32",
            "past_key/past_value (P=4) concatenated before K/V, present_key/present_value compared; "
            "control drops the past",
            _SRC + ": inputs past_key/past_value, outputs present_key/present_value",
            _build_past,
            uses=Use(inputs=_PAST)),
    Feature("attention.scale", "Attention", "", 23, "float32",
            "scale=1.0 (default 1/sqrt(16) = 0.25); control leaves scale unset",
            _SRC + ": attribute scale",
            _build_scale,
            uses=Use(attributes={"scale": NON_DEFAULT})),
    Feature("attention.softcap", "Attention", "", 23, "float32",
            "softcap=1.0 on scores of several units; control leaves softcap unset (0)",
            _SRC + ": attribute softcap, c*tanh(x/c)",
            _build_softcap,
            uses=Use(attributes={"softcap": NON_DEFAULT})),
    Feature("attention.softcap_with_mask", "Attention", "", 23, "float32",
            "softcap=1.0 with a boolean mask: softcap before the mask, masked keys get no weight; "
            "control leaves softcap unset",
            _SRC + ": softcap before at_mask Add (onnx PR #7867)",
            _build_softcap_with_mask,
            uses=Use(inputs=("attn_mask",), attributes={"softcap": NON_DEFAULT},
                     facts={"attn_mask_dtype": "bool"})),
    *(Feature(f"attention.qk_matmul_output_mode.{m}", "Attention", "", 23, "float32",
              _QK_CHANGES[m], _QK_SOURCE, _build_qk_mode(m),
              uses=Use(attributes={"qk_matmul_output_mode": m}, facts={"qk_output": True}))
      for m in range(4)),
    Feature("attention.fully_masked_row", "Attention", "", 23, "float32",
            "one query row fully masked by a boolean mask: its Y row is zero; control unmasks the row",
            _SRC + ": fully-masked query row gives a zero output row (errata of onnx PR #8068)",
            _build_fully_masked_row,
            uses=_MASK_BOOL),
    Feature("attention.fully_masked_row.neg_inf", "Attention", "", 23, "float32",
            "one float-mask row all -inf: its Y row is zero; control sets the row to 0",
            _SRC + ": fully-masked query row gives a zero output row (errata of onnx PR #8068)",
            _build_fully_masked_row_neg_inf,
            uses=_MASK_FLOAT),
    Feature("attention.nonpad_kv_seqlen", "Attention", "", 24, "float32",
            "nonpad_kv_seqlen=[2,4] of 6 keys (padding V offset by +4); control drops the input",
            _SRC24 + ": input nonpad_kv_seqlen",
            _build_nonpad,
            uses=Use(inputs=("nonpad_kv_seqlen",))),
    Feature("attention.dtype.float16", "Attention", "", 23, "float16",
            "attention.basic in float16; control makes Q zero",
            _SRC + ": type constraint T1/T2 includes tensor(float16)",
            _build_basic("attention.dtype.float16", "float16", 1016)),
    Feature("attention.mask.bool.broadcast", "Attention", "", 23, "float32",
            "2-D boolean attn_mask (S_q, T) broadcast over batch and heads; control drops the mask",
            _SRC + ": attn_mask 'broadcastable to (batch_size, q_num_heads, q_sequence_length, "
            "total_sequence_length)'",
            _build_bool_mask("attention.mask.bool.broadcast", 1025, (4, 6)),
            uses=Use(inputs=("attn_mask",), facts={"attn_mask_dtype": "bool", "attn_mask_rank": 2})),
    Feature("attention.mask.bool.broadcast_3d", "Attention", "", 23, "float32",
            "3-D boolean attn_mask (N, S_q, T), one mask per head, broadcast over batch; control drops the mask",
            _SRC + ": attn_mask broadcastable to (B, q_num_heads, S_q, T), numpy broadcasting from the right",
            _build_bool_mask("attention.mask.bool.broadcast_3d", 1026, (_N, 4, 6)),
            uses=Use(inputs=("attn_mask",), facts={"attn_mask_dtype": "bool", "attn_mask_rank": 3})),
    Feature("attention.past.with_mask", "Attention", "", 23, "float32",
            "past_key/past_value (P=4) with a boolean mask over all T = 6 keys; control drops the mask",
            _SRC + ": attn_mask last dimension is total_sequence_length = past + new",
            _build_past_with_mask,
            uses=Use(inputs=_PAST + ("attn_mask",), facts={"attn_mask_dtype": "bool"})),
    Feature("attention.past.with_causal", "Attention", "", 23, "float32",
            "is_causal=1 with 5 past keys, 2 new, grouped K/V heads: query i sees keys <= i+5; "
            "control is_causal=0",
            _SRC + ": is_causal with past, offset = past_sequence_length (errata of onnx PR #8068)",
            _build_past_with_causal,
            uses=Use(inputs=_PAST, attributes={"is_causal": 1}, facts={"grouped": True})),
    Feature("attention.softmax_precision", "Attention", "", 23, "float16",
            "float16 node with softmax_precision=1 (FLOAT): must run and match; control makes Q zero "
            "(a precision hint: ignoring it is not visible in the outputs)",
            _SRC + ": attribute softmax_precision",
            _build_basic("attention.softmax_precision", "float16", 1027, attrs={"softmax_precision": 1}),
            uses=Use(attributes={"softmax_precision": 1})),
    Feature("attention.qk_matmul_output_mode.3.fully_masked", "Attention", "", 23, "float32",
            "qk_matmul_output_mode=3 with one fully-masked query row: its Y and output-3 rows are zero; "
            "control unmasks the row",
            _SRC + ": the fully-masked-row guard applies to the mode-3 output (errata of onnx PR #8068)",
            _build_qk_mode3_fully_masked,
            uses=Use(inputs=("attn_mask",), attributes={"qk_matmul_output_mode": 3},
                     facts={"attn_mask_dtype": "bool", "qk_output": True})),
    Feature("attention.fully_masked_row.lowest", "Attention", "", 23, "float32",
            "one float-mask row at the lowest float32: not masked by the spec, a uniform softmax (mean of V); "
            "control sets the row to 0",
            _SRC + ": only -inf masks (function body RowAllMasked = ReduceMax(bias) == -inf)",
            _build_fully_masked_row_lowest,
            uses=_MASK_FLOAT),
    Feature("attention.opset24.mask_shorter", "Attention", "", 24, "float32",
            "opset-24 boolean mask covering 4 of T = 6 keys, the rest padded with -inf; control drops the mask",
            _SRC24 + ": attn_mask 'last dimension can also be shorter than total_sequence_length'",
            # Keys 4 and 5 are padded with -inf ([DOC24] attn_mask); an EP padding with True
            # instead computes the control (no mask) there.
            _build_bool_mask("attention.opset24.mask_shorter", 1024, (_B, 1, 4, 4), 0.3, opset=24),
            uses=Use(inputs=("attn_mask",), facts={"attn_mask_dtype": "bool", "opset": 24})),
    *(Feature(f"attention.basic.head_size.{h}", "Attention", "", 23, "float16",
              f"attention.basic in float16 with head size {h} (kernel selection depends on it); "
              "control makes Q zero",
              _SRC + ": head_size from the last dimension of Q/K",
              _build_basic(f"attention.basic.head_size.{h}", "float16", 1030 + h, head=h),
              uses=Use(facts={"head_size": h}))
      for h in (64, 128, 256, 512)),
    Feature("attention.dtype.float64", "Attention", "", 23, "float64",
            "attention.basic in float64; control makes Q zero",
            _SRC + ": type constraint T1/T2 includes tensor(double)",
            _build_basic("attention.dtype.float64", "float64", 1028)),
    Feature("attention.dtype.bfloat16", "Attention", "", 23, "bfloat16",
            "attention.basic in bfloat16 (float32 I/O, Cast around the node); control makes Q zero",
            _SRC + ": type constraint T1/T2 includes tensor(bfloat16)",
            _build_basic("attention.dtype.bfloat16", "bfloat16", 1017)),
    *(Feature(f"attention.outputs.{name}", "Attention", "", 23, "float32",
              f"requests {', '.join(outs[1:])} beside Y{' with a 4-key past' if past else ', no past'}; "
              "control makes Q zero",
              _SRC + ": optional outputs present_key, present_value (past + new K/V), qk_matmul_output",
              _build_outputs(f"attention.outputs.{name}", seed, outs, past),
              Use(inputs=("past_key", "past_value") if past else (), facts={"outputs": outs}))
      for name, seed, outs, past in (
          ("present_key", 1041, ("Y", "present_key"), 0),
          ("present_value", 1042, ("Y", "present_value"), 0),
          ("presents", 1043, _PRESENT, 0),
          ("all", 1044, _PRESENT + ("qk_matmul_output",), 0),
          ("all.with_past", 1045, _PRESENT + ("qk_matmul_output",), 4),
          ("qk_matmul_output.with_past", 1046, ("Y", "qk_matmul_output"), 4),
          ("present_key.with_past", 1047, ("Y", "present_key"), 4))),
    Feature("attention.is_causal.with_nonpad", "Attention", "", 24, "float32",
            "is_causal=1 with nonpad_kv_seqlen=[4,6] over 6 slots, S_q=2: offset nonpad - S_q; "
            "control resets is_causal",
            _SRC24 + ": is_causal offset = nonpad_kv_seqlen - q_sequence_length with an external cache",
            _build_causal_with_nonpad, Use(inputs=("nonpad_kv_seqlen",), attributes={"is_causal": 1})),
    Feature("attention.nonpad_kv_seqlen.with_causal", "Attention", "", 24, "float32",
            "nonpad_kv_seqlen=[4,6] (padding V offset by +4) with is_causal=1, S_q=2; control drops nonpad_kv_seqlen",
            _SRC24 + ": input nonpad_kv_seqlen together with is_causal",
            _build_nonpad_with_causal, Use(inputs=("nonpad_kv_seqlen",), attributes={"is_causal": 1})),
    *(Feature(f"{fid}.opset24", "Attention", "", 24, "float32", f"{fid} at opset 24; same control",
              _SRC24 + ": fully-masked query row gives a zero output row (errata of onnx PR #8068)",
              functools.partial(builder, 24, f"{fid}.opset24"), uses)
      for fid, builder, uses in (
          ("attention.fully_masked_row", _build_fully_masked_row, Use(inputs=("attn_mask",))),
          ("attention.fully_masked_row.neg_inf", _build_fully_masked_row_neg_inf, Use(inputs=("attn_mask",))),
          ("attention.qk_matmul_output_mode.3.fully_masked", _build_qk_mode3_fully_masked,
           Use(inputs=("attn_mask",), attributes={"qk_matmul_output_mode": 3})),
          ("attention.fully_masked_row.lowest", _build_fully_masked_row_lowest, Use(inputs=("attn_mask",))))),
)
