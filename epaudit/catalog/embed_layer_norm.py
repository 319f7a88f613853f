"""Probes for ``com.microsoft.EmbedLayerNormalization`` and ``QEmbedLayerNormalization``
(version 1): B = 2 sequences of S = 6 token ids into tables of 20 words, 8 positions and 2
segments of D = 32 features. Ids, segment ids, mask and position ids are fed (int32); tables,
gamma and beta are constants. References: :mod:`epaudit.reference.embed_layer_norm`.
Float outputs within ``tolerance_for("float32")``; ``mask_index`` (int32) exactly.

Controls: the operator itself bakes in gamma = 0 (the output is beta everywhere); an optional
input is dropped (segment ids with their table, position ids: the default positions 0..S-1);
``mask`` is baked in as all ones (mask_index = S); ``epsilon`` is reset on embeddings of tiny
variance. Optional outputs (``mask_index``, ``embedding_sum``) are listed first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.embed_layer_norm import embed_layer_norm_reference, qembed_layer_norm_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, const, probe

B, S, V, PMAX, G, D = 2, 6, 20, 8, 2, 32
_DOC = "ORT docs/ContribOperators.md#com.microsoft.EmbedLayerNormalization"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/embed_layer_norm.cc; embed_layer_norm_helper.cc CheckInputs"
_QDOC = "ORT docs/ContribOperators.md#com.microsoft.QEmbedLayerNormalization"
_QKERNEL = "onnxruntime/contrib_ops/cpu/quantization/qembed_layer_norm.cc"
_TOL = tolerance_for("float32")

_IN = ("input_ids", "segment_ids", "word_embedding", "position_embedding", "segment_embedding", "gamma", "beta",
       "mask", "position_ids")


def _ref(v, attrs):
    return embed_layer_norm_reference(v["input_ids"], v["word_embedding"], v["position_embedding"], v["gamma"],
                                      v["beta"], segment_ids=v.get("segment_ids"),
                                      segment_embedding=v.get("segment_embedding"), mask=v.get("mask"),
                                      position_ids=v.get("position_ids"), **attrs)


OP = QOp("EmbedLayerNormalization", "com.microsoft", 1, _IN, ("output", "mask_index", "embedding_sum"), _ref,
         float_t=frozenset({"word_embedding", "position_embedding", "segment_embedding", "gamma", "beta", "output",
                            "embedding_sum"}))


def _f32(a) -> np.ndarray:
    return np.asarray(a, np.float32)


def _prefix_mask() -> np.ndarray:
    m = np.zeros((B, S), np.int32)
    m[0, :4] = 1
    m[1, :S] = 1
    m[1, 5] = 0
    return m


def _graph(seed: int, *, segment=True, std=1.0, outputs=("output",), attrs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, V, size=(B, S)).astype(np.int32)}
    consts = {"word_embedding": _f32(std * rng.standard_normal((V, D))),
              "position_embedding": _f32(std * rng.standard_normal((PMAX, D))),
              "gamma": _f32(1.0 + 0.5 * rng.standard_normal(D)), "beta": _f32(rng.standard_normal(D))}
    if segment:
        feeds["segment_ids"] = rng.integers(0, G, size=(B, S)).astype(np.int32)
        consts["segment_embedding"] = _f32(std * rng.standard_normal((G, D)))
    outs = {o: ("int32" if o == "mask_index" else "float32") for o in outputs}
    # Two output slots ("output", ""): ORT's type inference fails on a node with one output
    # (see embedlayernormalization.output_only).
    return QGraph({"epsilon": 1e-5, **(attrs or {})}, feeds, outs, consts, out_slots=2)


def _zero_gamma(g: QGraph) -> QGraph:
    return g.baked(gamma=np.zeros(D, np.float32))


def _probe(fid: str, subject: QGraph, control: QGraph) -> Probe:
    return probe(OP, fid, subject, control, _TOL, "float32", exact=frozenset({"mask_index"}))


def _build(fid: str, seed: int, *, control="gamma", segment=True, outputs=("output",), feeds=None) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, segment=segment, outputs=outputs)
        if feeds:
            g = replace(g, feeds={**g.feeds, **feeds})
        if control == "segment":
            ctl = g.without("segment_ids", "segment_embedding")
        elif control == "mask":
            ctl = g.baked(mask=np.ones((B, S), np.int32))
        elif control == "position_ids":
            ctl = g.without("position_ids")
        else:
            ctl = _zero_gamma(g)
        return _probe(fid, g, ctl)
    return build


def _build_output_only() -> Probe:
    """The node lists one output (mask_index and embedding_sum left off the end); control
    spells out an empty mask_index slot and bakes in gamma = 0."""
    g = _graph(6908)
    return _probe("embedlayernormalization.output_only", replace(g, out_slots=0), _zero_gamma(g))


def _build_epsilon() -> Probe:
    g = _graph(6911, std=1e-3, attrs={"epsilon": 1e-4})
    return _probe("embedlayernormalization.epsilon", g, g.without(attrs=("epsilon",)))


# --- QEmbedLayerNormalization ---------------------------------------------------------

_QIN = ("input_ids", "segment_ids", "word_embedding_quant", "position_embedding_quant", "segment_embedding", "gamma_quant",
        "beta_quant", "mask", "word_embedding_scale", "position_embedding_scale", "segment_embedding_scale",
        "gamma_scale", "beta_scale", "word_embedding_zero_point", "position_embedding_zero_point",
        "segment_embedding_zero_point", "gamma_zero_point", "beta_zero_point")
QOP = QOp("QEmbedLayerNormalization", "com.microsoft", 1, _QIN, ("layernorm_out", "mask_index_out"),
          lambda v, a: qembed_layer_norm_reference(v, **a))
_TABLES = {"word_embedding": ("word_embedding_quant", (V, D), 0.02), "position_embedding": ("position_embedding_quant", (PMAX, D), 0.02),
           "segment_embedding": ("segment_embedding", (G, D), 0.02), "gamma": ("gamma_quant", (D,), 0.01),
           "beta": ("beta_quant", (D,), 0.01)}


def _qgraph(seed: int, dtype: str = "uint8", *, segment=True, mask=False) -> QGraph:
    rng = np.random.default_rng(seed)
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    zp = 128 if dtype == "uint8" else 0
    consts: dict[str, object] = {}
    for name, (qname, shape, scale) in _TABLES.items():
        if name == "segment_embedding" and not segment:
            continue
        if name == "gamma":  # gamma around 1
            q = rng.integers(zp + 60, zp + 120, size=shape)
        else:
            q = rng.integers(lo, hi + 1, size=shape)
        consts[qname] = q.astype(np.dtype(dtype))
        consts[f"{name}_scale"] = const(scale, "float32")
        consts[f"{name}_zero_point"] = const(zp, dtype)
    feeds = {"input_ids": rng.integers(0, V, size=(B, S)).astype(np.int32)}
    if segment:
        feeds["segment_ids"] = rng.integers(0, G, size=(B, S)).astype(np.int32)
    if mask:
        feeds["mask"] = _prefix_mask()
    return QGraph({"epsilon": 1e-5}, feeds, {"layernorm_out": "float32", "mask_index_out": "int32"}, consts)


def _build_q(fid: str, seed: int, dtype: str = "uint8", *, control="gamma", segment=True, mask=False) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _qgraph(seed, dtype, segment=segment, mask=mask)
        if control == "segment":
            ctl = g.without("segment_ids", "segment_embedding", "segment_embedding_scale",
                            "segment_embedding_zero_point")
        elif control == "mask":
            ctl = g.baked(mask=np.ones((B, S), np.int32))
        else:
            zp = np.asarray(g.constants["gamma_zero_point"])
            ctl = g.baked(gamma_quant=np.full(D, zp, dtype=zp.dtype))
        # The CPU kernel's type constraints name T (float) only: the feature's type is float32.
        return probe(QOP, fid, g, ctl, _TOL, "float32", exact=frozenset({"mask_index_out"}))
    return build


_f = c.feature
_OUT = ("output", "mask_index", "embedding_sum")

#: The EmbedLayerNormalization and QEmbedLayerNormalization features, in catalog order.
FEATURES = (
    _f(OP, "embedlayernormalization.basic", "float32", "word + position + segment embeddings of ids (2,6), LayerNorm "
       "over D=32; control bakes in gamma = 0", f"{_DOC}; {_KERNEL}", _build("embedlayernormalization.basic", 6901)),
    _f(OP, "embedlayernormalization.segment", "float32", "segment_ids with segment_embedding; control drops both",
       f"{_DOC}: inputs 'segment_ids', 'segment_embedding' (optional)",
       _build("embedlayernormalization.segment", 6902, control="segment"),
       Use(inputs=("segment_ids", "segment_embedding"))),
    _f(OP, "embedlayernormalization.no_segment", "float32", "no segment inputs (word + position only); control bakes "
       "in gamma = 0", f"{_DOC}: segment inputs optional", _build("embedlayernormalization.no_segment", 6903,
                                                                  segment=False),
       Use(absent=("segment_ids", "segment_embedding"))),
    _f(OP, "embedlayernormalization.mask", "float32", "mask (2,6) prefix ones [4,5]: output mask_index listed first "
       "(exact); control bakes in an all-ones mask", f"{_DOC}: input 'mask', output 'mask_index'; {_KERNEL}",
       _build("embedlayernormalization.mask", 6904, control="mask", outputs=("mask_index", "output"),
              feeds={"mask": _prefix_mask()}), Use(inputs=("mask",), facts={"outputs": ("output", "mask_index")})),
    _f(OP, "embedlayernormalization.position_ids", "float32", "position_ids (2,6) out of order; control drops them "
       "(positions 0..5)", f"{_DOC}: input 'position_ids'",
       _build("embedlayernormalization.position_ids", 6905, control="position_ids",
              feeds={"position_ids": np.array([[7, 2, 5, 0, 1, 3], [4, 4, 6, 7, 2, 0]], np.int32)}),
       Use(inputs=("position_ids",))),
    _f(OP, "embedlayernormalization.position_ids.broadcast", "float32", "position_ids (1,6) shared by the batch; "
       "control drops them", f"{_DOC}: position_ids (1, sequence_length)",
       _build("embedlayernormalization.position_ids.broadcast", 6906, control="position_ids",
              feeds={"position_ids": np.array([[6, 5, 4, 3, 2, 1]], np.int32)}), Use(inputs=("position_ids",))),
    _f(OP, "embedlayernormalization.embedding_sum", "float32", "optional output embedding_sum (the sum before the "
       "norm) listed first; control bakes in gamma = 0", f"{_DOC}: output 'embedding_sum'",
       _build("embedlayernormalization.embedding_sum", 6907, outputs=("embedding_sum", "output")),
       Use(facts={"outputs": ("output", "embedding_sum")})),
    _f(OP, "embedlayernormalization.output_only", "float32", "the node lists only 'output' (both optional outputs "
       "left off); control spells out an empty second slot and bakes in gamma = 0",
       f"{_DOC}: outputs 1, 2 optional; onnxruntime/core/graph/contrib_ops/bert_defs.cc (type inference)",
       _build_output_only, Use(facts={"outputs": ("output",)})),
    _f(OP, "embedlayernormalization.epsilon", "float32", "epsilon=1e-4 on embeddings of std 1e-3; control resets it "
       "(1e-12)", f"{_DOC}: attribute 'epsilon'", _build_epsilon, Use(attributes={"epsilon": NON_DEFAULT})),
    *(_f(QOP, f"qembedlayernormalization.{d}", "float32", f"{d} tables, gamma, beta (per-tensor scales, zero point "
         f"{128 if d == 'uint8' else 0}); control bakes in gamma at its zero point", f"{_QDOC}; {_QKERNEL}",
         _build_q(f"qembedlayernormalization.{d}", 6921 + i, d)) for i, d in enumerate(("uint8", "int8"))),
    _f(QOP, "qembedlayernormalization.segment", "float32", "the segment input group (ids, table, scale, zero point); "
       "control drops all four", f"{_QDOC}: all-or-none segment inputs",
       _build_q("qembedlayernormalization.segment", 6923, control="segment"),
       Use(inputs=("segment_ids", "segment_embedding", "segment_embedding_scale", "segment_embedding_zero_point"))),
    _f(QOP, "qembedlayernormalization.mask", "float32", "mask (2,6) prefix ones [4,5] -> mask_index_out (exact); control "
       "bakes in an all-ones mask", f"{_QDOC}: input 'mask'",
       _build_q("qembedlayernormalization.mask", 6924, control="mask", mask=True), Use(inputs=("mask",))),
)
