"""References epaudit computes itself: operators onnx's evaluator does not know, or gets wrong.

ORT's contrib operators (``com.microsoft``, and the ones ORT registers in the ai.onnx domain
such as ``SimplifiedLayerNormalization``) are swept where epaudit has a float64 reference
that takes a node's inputs and attributes as they are (:data:`ADAPTERS`, over
:mod:`epaudit.reference`); any other raises ``NotImplementedError`` and its configurations are
skipped as ``no reference``, never judged against a guess. AveragePool and MaxPool take
:mod:`epaudit.reference.pool` instead of ``onnx.reference`` (which loses windows that start
in the begin pad: that module's docstring), and Resize takes :mod:`epaudit.reference.resize`
(exact coordinates: ``.5`` ties, whole-number cubic taps), LpNormalization takes
:func:`epaudit.reference.norms.lp_normalization_reference` (onnx.reference drops the
absolute value for p = 1), LpPool :func:`epaudit.reference.pool.lp_pool`, and LogSoftmax,
LRN, the two losses and Unique :mod:`epaudit.reference.onnx_fixes` (each module says what
onnx.reference gets wrong, measured); an adapter raises
:class:`UseEvaluator` for the configurations it leaves to onnx.reference (Resize-10,
``tf_crop_and_resize``, antialias).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from .config import Config


def _inputs(config: Config, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray | None]:
    return [None if x is None else np.asarray(feeds[x.name]) for x in config.inputs]


def _skip_ln(config: Config, feeds, simplified: bool) -> dict:
    from ..reference.norms import SKIP_LN_DEFAULT_EPSILON, skip_layer_norm_reference

    ins = _inputs(config, feeds) + [None] * 5
    x, skip, gamma = ins[0], ins[1], ins[2]
    beta, bias = (None, ins[3]) if simplified else (ins[3], ins[4])
    got = skip_layer_norm_reference(x, skip, gamma, beta, bias, simplified=simplified,
                                    epsilon=float(config.attrs.get("epsilon", SKIP_LN_DEFAULT_EPSILON)))
    names = ("output", "mean", "inv_std_var", "input_skip_bias_sum")
    return {out: got[k] for out, k in zip(config.outputs, names) if out}


def _simplified_ln(config: Config, feeds) -> dict:
    from ..reference.norms import SIMPLIFIED_LN_DEFAULT_EPSILON, simplified_layer_norm_reference

    ins = _inputs(config, feeds)
    got = simplified_layer_norm_reference(ins[0], ins[1], axis=int(config.attrs.get("axis", -1)),
                                          epsilon=float(config.attrs.get("epsilon", SIMPLIFIED_LN_DEFAULT_EPSILON)))
    return {out: got[k] for out, k in zip(config.outputs, ("Y", "inv_std_var")) if out}


def _rotary(config: Config, feeds) -> dict:
    from ..reference.rotary import rotary_reference

    ins = _inputs(config, feeds)
    a = config.attrs
    got = rotary_reference(ins[0], ins[1], ins[2], ins[3], interleaved=int(a.get("interleaved", 0)),
                           rotary_embedding_dim=int(a.get("rotary_embedding_dim", 0)),
                           num_heads=int(a.get("num_heads", 0)), scale=float(a.get("scale", 1.0)))
    return {config.outputs[0]: got["output"]}


def _lp_norm(config: Config, feeds) -> dict:
    from ..reference.norms import lp_normalization_reference

    a = config.attrs
    y = lp_normalization_reference(np.asarray(feeds[config.inputs[0].name]), axis=int(a.get("axis", -1)),
                                   p=int(a.get("p", 2)))
    return {config.outputs[0]: y}


def _pool(config: Config, feeds) -> dict:
    from ..reference.pool import average_pool, lp_pool, max_pool

    a = config.attrs
    x = np.asarray(feeds[config.inputs[0].name])
    common = dict(strides=a.get("strides"), pads=a.get("pads"), dilations=a.get("dilations"),
                  ceil_mode=int(a.get("ceil_mode", 0)), auto_pad=str(a.get("auto_pad", "NOTSET")))
    if config.op == "AveragePool":
        y = average_pool(x, list(a["kernel_shape"]), count_include_pad=int(a.get("count_include_pad", 0)), **common)
    elif config.op == "LpPool":
        y = lp_pool(x, list(a["kernel_shape"]), p=int(a.get("p", 2)), **common)
    else:
        if len([o for o in config.outputs if o]) > 1:
            raise NotImplementedError("MaxPool's Indices output (ties make it ambiguous)")
        y = max_pool(x, list(a["kernel_shape"]), **common)
    return {config.outputs[0]: y}


def _log_softmax(config: Config, feeds) -> dict:
    from ..reference.onnx_fixes import log_softmax

    axis = config.attrs.get("axis")
    return {config.outputs[0]: log_softmax(np.asarray(feeds[config.inputs[0].name]), axis, opset=config.opset)}


def _lrn(config: Config, feeds) -> dict:
    from ..reference.onnx_fixes import lrn

    a = config.attrs
    y = lrn(np.asarray(feeds[config.inputs[0].name]), int(a["size"]), alpha=float(a.get("alpha", 1e-4)),
            beta=float(a.get("beta", 0.75)), bias=float(a.get("bias", 1.0)))
    return {config.outputs[0]: y}


def _loss(config: Config, feeds) -> dict:
    from ..reference.onnx_fixes import nll_loss, softmax_cross_entropy_loss

    ins = _inputs(config, feeds) + [None] * 3
    a = config.attrs
    kw = dict(reduction=str(a.get("reduction", "mean")), ignore_index=a.get("ignore_index"))
    if config.op == "NegativeLogLikelihoodLoss":
        return {config.outputs[0]: nll_loss(ins[0], ins[1], ins[2], **kw)}
    loss, log_prob = softmax_cross_entropy_loss(ins[0], ins[1], ins[2], **kw)
    got = {config.outputs[0]: loss}
    if len(config.outputs) > 1 and config.outputs[1]:
        got[config.outputs[1]] = log_prob
    return got


def _unique(config: Config, feeds) -> dict:
    from ..reference.onnx_fixes import unique

    a = config.attrs
    got = unique(np.asarray(feeds[config.inputs[0].name]), a.get("axis"), int(a.get("sorted", 1)))
    names = ("Y", "indices", "inverse_indices", "counts")
    return {out: got[k] for out, k in zip(config.outputs, names) if out}


class UseEvaluator(Exception):
    """An adapter's word that this configuration is onnx.reference's to compute."""


def _resize(config: Config, feeds) -> dict:
    from ..reference.resize import resize

    a = config.attrs
    if config.opset < 11 or a.get("mode", "nearest") not in ("nearest", "linear", "cubic"):
        raise UseEvaluator()
    if any(a.get(k) not in (None, 0, "stretch") for k in ("antialias", "axes", "keep_aspect_ratio_policy")):
        raise UseEvaluator()
    if a.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        raise UseEvaluator()
    names = {1: "roi", 2: "scales", 3: "sizes"}
    got = {names[i]: np.asarray(feeds[x.name]) for i, x in enumerate(config.inputs) if x is not None and i in names}
    sizes = got.get("sizes")
    scales = got.get("scales")
    kwargs = {"sizes": sizes.tolist()} if sizes is not None and sizes.size else {"scales": scales.tolist()}
    y = resize(np.asarray(feeds[config.inputs[0].name]), mode=str(a.get("mode", "nearest")),
               coordinate_transformation_mode=str(a.get("coordinate_transformation_mode", "half_pixel")),
               nearest_mode=str(a.get("nearest_mode", "round_prefer_floor")),
               cubic_coeff_a=float(a.get("cubic_coeff_a", -0.75)), exclude_outside=int(a.get("exclude_outside", 0)),
               **kwargs)
    return {config.outputs[0]: y}


#: (domain, op type) -> reference of one node: ``(config, feeds) -> {output name: array}``.
ADAPTERS: dict[tuple[str, str], Callable] = {
    ("com.microsoft", "SkipLayerNormalization"): lambda c, f: _skip_ln(c, f, False),
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): lambda c, f: _skip_ln(c, f, True),
    ("", "SimplifiedLayerNormalization"): _simplified_ln,
    ("com.microsoft", "RotaryEmbedding"): _rotary,
    ("", "AveragePool"): _pool,
    ("", "MaxPool"): _pool,
    ("", "Resize"): _resize,
    ("", "LpNormalization"): _lp_norm,
    ("", "LpPool"): _pool,
    ("", "LogSoftmax"): _log_softmax,
    ("", "LRN"): _lrn,
    ("", "NegativeLogLikelihoodLoss"): _loss,
    ("", "SoftmaxCrossEntropyLoss"): _loss,
    ("", "Unique"): _unique,
}


def reference(config: Config, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference outputs of ``config`` on ``feeds`` (float64 where the adapter computes so).

    Raises:
        NotImplementedError: no adapter for the operator.
        ValueError: a configuration the adapter's operator refuses.
    """
    adapter = ADAPTERS.get((config.domain, config.op))
    if adapter is None:
        raise NotImplementedError(f"no epaudit reference takes a {config.domain or 'ai.onnx'}.{config.op} node "
                                  "as it is")
    return {k: np.asarray(v, dtype=np.float64) for k, v in adapter(config, feeds).items()}
