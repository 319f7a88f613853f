"""Float64 references for ``com.microsoft.EmbedLayerNormalization`` and
``com.microsoft.QEmbedLayerNormalization`` (version 1).

From the schema text (``docs/ContribOperators.md``) and the CPU kernels
``onnxruntime/contrib_ops/cpu/bert/embed_layer_norm.cc`` and
``onnxruntime/contrib_ops/cpu/quantization/qembed_layer_norm.cc``: per token (b, s),
``e = word_embedding[input_ids] + position_embedding[p] + segment_embedding[segment_ids]``
(p = ``position_ids[b, s]`` when given, broadcast from (1, S), else s; the segment term only
when segment inputs are given), then LayerNorm over the hidden axis,
``(e − mean) / sqrt(var + epsilon) · gamma + beta`` (schema default epsilon 1e-12).
``mask_index`` is the number of ones in each mask row, which for the prefix masks the probes
use is also "the position of the first 0" (the schema gives both readings). The optional
``embedding_sum`` output is ``e``. QEmbedLayerNormalization dequantizes every table, gamma and
beta first (``(q − zero_point) · scale``, per tensor).
"""

from __future__ import annotations

import numpy as np

from .qlinear import dequantize

__all__ = ["embed_layer_norm_reference", "qembed_layer_norm_reference", "DEFAULT_EPSILON"]

#: Schema default of ``epsilon`` (float32 1e-12, as ``get_all_operator_schema()`` gives it).
DEFAULT_EPSILON = float(np.float32(1e-12))


def embed_layer_norm_reference(input_ids, word_embedding, position_embedding, gamma, beta, *, segment_ids=None,
                               segment_embedding=None, mask=None, position_ids=None,
                               epsilon: float = DEFAULT_EPSILON) -> dict[str, np.ndarray]:
    """Expected outputs of one EmbedLayerNormalization node.

    Args:
        input_ids: int (B, S); word_embedding (V, D); position_embedding (P, D).
        gamma, beta: (D,).
        segment_ids: int (B, S) with ``segment_embedding`` (G, D), or both None.
        mask: int (B, S) 0/1 or None; position_ids: int (B, S), (1, S) or None.

    Returns:
        ``output`` (B, S, D), ``mask_index`` (B,) (0 without a mask, as the CPU kernel
        writes), ``embedding_sum`` (B, S, D); float64.

    Raises:
        ValueError: an id outside its table, or only one of segment_ids/segment_embedding.
    """
    ids = np.asarray(input_ids, np.int64)
    batch, seq = ids.shape
    word = np.asarray(word_embedding, np.float64)
    pos_table = np.asarray(position_embedding, np.float64)
    if ids.min() < 0 or ids.max() >= word.shape[0]:
        raise ValueError("input_ids outside the word embedding")
    pos = np.broadcast_to(np.arange(seq), (batch, seq)) if position_ids is None else \
        np.broadcast_to(np.asarray(position_ids, np.int64), (batch, seq))
    if pos.max() >= pos_table.shape[0]:
        raise ValueError("a position outside the position embedding")
    e = word[ids] + pos_table[pos]
    if (segment_ids is None) != (segment_embedding is None):
        raise ValueError("segment_ids and segment_embedding go together")
    if segment_ids is not None:
        seg = np.asarray(segment_ids, np.int64)
        e = e + np.asarray(segment_embedding, np.float64)[seg]
    mean = e.mean(axis=-1, keepdims=True)
    var = ((e - mean) ** 2).mean(axis=-1, keepdims=True)
    out = (e - mean) / np.sqrt(var + epsilon) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
    mi = np.zeros(batch) if mask is None else (np.asarray(mask) == 1).sum(axis=1).astype(np.float64)
    return {"output": out, "mask_index": mi, "embedding_sum": e}


def qembed_layer_norm_reference(values: dict, epsilon: float = DEFAULT_EPSILON) -> dict[str, np.ndarray]:
    """Expected ``layernorm_out`` and ``mask_index_out`` of QEmbedLayerNormalization from
    its inputs by schema name (tables ``*_quant`` with ``*_scale`` / ``*_zero_point``)."""
    def deq(name: str, q: str | None = None):
        return dequantize(values[q or name], values[f"{name}_scale"], values[f"{name}_zero_point"])
    seg = values.get("segment_ids")
    ref = embed_layer_norm_reference(
        values["input_ids"], deq("word_embedding", "word_embedding_quant"),
        deq("position_embedding", "position_embedding_quant"), deq("gamma", "gamma_quant"), deq("beta", "beta_quant"),
        segment_ids=seg, segment_embedding=None if seg is None else deq("segment_embedding"),
        mask=values.get("mask"), epsilon=epsilon)
    return {"layernorm_out": ref["output"], "mask_index_out": ref["mask_index"]}
