"""Probes for the fused layer norms: ``com.microsoft.SkipLayerNormalization``,
``com.microsoft.SkipSimplifiedLayerNormalization`` (version 1) and
``SimplifiedLayerNormalization`` (ai.onnx domain as ORT registers it, since version 1).

Every probe is one node (float32 unless the feature is a dtype) on (B, S, D) = (2, 4, 32)
rows; references from :mod:`epaudit.reference.norms`.

Controls: the operator itself bakes in a zero ``skip`` (an EP that drops the residual) or,
for SimplifiedLayerNormalization, a ``scale`` of ones; ``beta`` / ``bias`` are dropped;
``epsilon`` is reset to the schema default, on inputs of tiny variance (std 1e-3) where ε
dominates the denominator. Optional outputs (``mean``, ``inv_std_var``,
``input_skip_bias_sum``) are listed first in the graph, so the ``unwritten`` fault proves an
EP that never writes them is caught; their control keeps the outputs and bakes in the
zero skip (every statistic then changes).

Sources: ORT ``docs/ContribOperators.md`` and ``onnxruntime/contrib_ops/cpu/skip_layer_norm.cc``
(``ComputeJob``); ``onnxruntime/core/graph/contrib_ops/contrib_defs.cc`` and
``onnxruntime/core/providers/cpu/nn/layer_norm_impl.cc`` for SimplifiedLayerNormalization.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference.norms import simplified_layer_norm_reference, skip_layer_norm_reference
from . import _contrib as c

B, S, D = 2, 4, 32
_SLN_DOC = "ORT docs/ContribOperators.md#com.microsoft.SkipLayerNormalization"
_SSLN_DOC = "ORT docs/ContribOperators.md#com.microsoft.SkipSimplifiedLayerNormalization"
_KERNEL = "onnxruntime/contrib_ops/cpu/skip_layer_norm.cc ComputeJob"
_SIMP_SCHEMA = "onnxruntime/core/graph/contrib_ops/contrib_defs.cc SimplifiedLayerNormalization (kOnnxDomain, since 1)"
_SIMP_KERNEL = "onnxruntime/core/providers/cpu/nn/layer_norm_impl.cc (simplified)"
_STATS = {"mean": "float32", "inv_std_var": "float32"}
_SKIP_OUT = ("output", "mean", "inv_std_var", "input_skip_bias_sum")


def _skip_ref(simplified: bool):
    def ref(values: Mapping[str, np.ndarray], attrs: Mapping[str, object]) -> Mapping[str, np.ndarray]:
        eps = attrs.get("epsilon")
        kwargs = {} if eps is None else {"epsilon": float(eps)}
        return skip_layer_norm_reference(values["input"], values["skip"], values["gamma"], values.get("beta"),
                                         values.get("bias"), simplified=simplified, **kwargs)
    return ref


def _simp_ref(values: Mapping[str, np.ndarray], attrs: Mapping[str, object]) -> Mapping[str, np.ndarray]:
    return simplified_layer_norm_reference(values["X"], values["scale"], **attrs)


SLN = c.Op("SkipLayerNormalization", "com.microsoft", 1, ("input", "skip", "gamma", "beta", "bias"),
           _SKIP_OUT, {}, _STATS, _skip_ref(False))
SSLN = c.Op("SkipSimplifiedLayerNormalization", "com.microsoft", 1, ("input", "skip", "gamma", "bias"),
            _SKIP_OUT, {}, _STATS, _skip_ref(True))
#: ai.onnx is imported at 21 in the probe model; the schema exists from version 1.
SIMP = c.Op("SimplifiedLayerNormalization", "", 21, ("X", "scale"), ("Y", "inv_std_var"), {},
            {"inv_std_var": "float32"}, _simp_ref)


def _skip_graph(seed: int, dtype: str = "float32", *, std: float = 1.0, skip_shape: tuple[int, ...] = (B, S, D),
                extra: tuple[str, ...] = (), attrs: Mapping[str, object] | None = None,
                outputs: tuple[str, ...] = ("output",), rows: tuple[int, ...] = (B, S)) -> c.Graph:
    """input/skip ~ N(0, std²), gamma ~ 1 + N(0, 0.25), beta/bias ~ N(0, 1) when in ``extra``."""
    rng = np.random.default_rng(seed)
    feeds = {"input": c.rounded(std * rng.standard_normal(rows + (D,)), dtype),
             "skip": c.rounded(std * rng.standard_normal(skip_shape), dtype),
             "gamma": c.rounded(1.0 + 0.5 * rng.standard_normal(D), dtype)}
    for name in extra:
        feeds[name] = c.rounded(rng.standard_normal(D), dtype)
    return c.Graph(dtype, {"epsilon": 1e-5, **(attrs or {})}, feeds, outputs)


def _zero_skip(g: c.Graph) -> c.Graph:
    return g.baked(skip=np.zeros_like(g.feeds["skip"]))


def _build_skip(op: c.Op, fid: str, seed: int, *, dtype: str = "float32", extra: tuple[str, ...] = (),
                drop: str | None = None, outputs: tuple[str, ...] = ("output",),
                skip_shape: tuple[int, ...] = (B, S, D), rows: tuple[int, ...] = (B, S)) -> Callable[[], Probe]:
    """The control drops ``drop`` (an input), or bakes in a zero skip when ``drop`` is None."""
    def build() -> Probe:
        g = _skip_graph(seed, dtype, extra=extra, outputs=outputs, skip_shape=skip_shape, rows=rows)
        return c.probe(op, fid, g, g.without(drop) if drop else _zero_skip(g))
    return build


def _build_skip_epsilon(op: c.Op, fid: str, seed: int) -> Callable[[], Probe]:
    """Rows of std ~1.4e-3 (variance 2e-6) with epsilon 1e-4: the output shrinks ~7x."""
    def build() -> Probe:
        g = _skip_graph(seed, std=1e-3, attrs={"epsilon": 1e-4})
        return c.probe(op, fid, g, g.without(attrs=("epsilon",)))
    return build


def _simp_graph(seed: int, dtype: str = "float32", *, std: float = 1.0, attrs: Mapping[str, object] | None = None,
                outputs: tuple[str, ...] = ("Y",), scale_shape: tuple[int, ...] = (D,)) -> c.Graph:
    rng = np.random.default_rng(seed)
    feeds = {"X": c.rounded(std * rng.standard_normal((B, S, D)), dtype),
             "scale": c.rounded(1.0 + 0.5 * rng.standard_normal(scale_shape), dtype)}
    return c.Graph(dtype, dict(attrs or {}), feeds, outputs)


def _build_simp(fid: str, seed: int, dtype: str = "float32", outputs: tuple[str, ...] = ("Y",)) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _simp_graph(seed, dtype, outputs=outputs)
        return c.probe(SIMP, fid, g, g.baked(scale=np.ones_like(g.feeds["scale"])))
    return build


def _build_simp_epsilon() -> Probe:
    # Mean square ~1e-6 against epsilon 1e-4 (default 1e-5): the output shrinks ~3x.
    g = _simp_graph(5103, std=1e-3, attrs={"epsilon": 1e-4})
    return c.probe(SIMP, "simplified_layer_norm.epsilon", g, g.without(attrs=("epsilon",)))


def _build_simp_axis() -> Probe:
    # axis=1 normalizes each batch row over (S, D) jointly; the scale is fed as ones (S, D) so
    # that the control (axis reset to -1, a (D,) scale of ones baked in) differs only by axis.
    rng = np.random.default_rng(5104)
    x = c.rounded(rng.standard_normal((B, S, D)) * np.array([0.3, 1.0, 2.0, 4.0])[None, :, None], "float32")
    g = c.Graph("float32", {"axis": 1}, {"X": x, "scale": np.ones((S, D))}, ("Y", "inv_std_var"))
    control = c.Graph("float32", {}, {"X": x}, ("Y", "inv_std_var"), {"scale": np.ones(D)})
    return c.probe(SIMP, "simplified_layer_norm.axis", g, control)


_f = c.feature
_SUM = "input_skip_bias_sum"


def _outputs(*names: str, inputs: tuple[str, ...] = ()) -> Use:
    """A node uses an optional-output feature when it requests exactly ``output`` and those
    outputs: the fact ``outputs`` (formal names, in order; ``epaudit/scan/match.py``)."""
    return Use(inputs=inputs, facts={"outputs": ("output",) + names})


def _skip_features(op: c.Op, prefix: str, doc: str, seed: int, simplified: bool) -> tuple:
    """The features both skip norms share; SkipLayerNormalization adds beta and mean."""
    kind = "RMS " if simplified else ""
    return (
        _f(op, f"{prefix}.basic", "float32",
           f"{kind}layer norm of input + skip (B,S,D)=(2,4,32), gamma; control bakes in a zero skip",
           f"{doc}; {_KERNEL}", _build_skip(op, f"{prefix}.basic", seed)),
        _f(op, f"{prefix}.bias", "float32", "bias (D) added to input + skip; control drops it",
           f"{doc}: input 'bias'; {_KERNEL} (val += bias[h])",
           _build_skip(op, f"{prefix}.bias", seed + 1, extra=("bias",), drop="bias"), Use(inputs=("bias",))),
        _f(op, f"{prefix}.epsilon", "float32",
           "epsilon=1e-4 on rows of variance ~2e-6; control resets epsilon to the default 1e-12",
           f"{doc}: attribute 'epsilon'; {_KERNEL} (sqrt(... + epsilon))",
           _build_skip_epsilon(op, f"{prefix}.epsilon", seed + 2), Use(attributes={"epsilon": NON_DEFAULT})),
        _f(op, f"{prefix}.skip_broadcast", "float32",
           "skip of shape (S,D) broadcast over the batch; control bakes in a zero skip",
           f"{doc}: input 'skip' (sequence_length, hidden_size); {_KERNEL} (skip offset % skip_size)",
           _build_skip(op, f"{prefix}.skip_broadcast", seed + 3, skip_shape=(S, D)), Use(facts={"skip_rank": 2})),
        _f(op, f"{prefix}.output.inv_std_var", "float32",
           "optional output inv_std_var (B,S,1) float, listed first; control bakes in a zero skip",
           f"{doc}: output 'inv_std_var'; {_KERNEL}",
           _build_skip(op, f"{prefix}.output.inv_std_var", seed + 4, outputs=("inv_std_var", "output")),
           _outputs("inv_std_var")),
        _f(op, f"{prefix}.output.{_SUM}", "float32",
           f"optional output {_SUM} = input + skip + bias, listed first (bias fed); control bakes in a zero skip",
           f"{doc}: output '{_SUM}'; {_KERNEL} (p_skip_input_bias_add_output)",
           _build_skip(op, f"{prefix}.output.{_SUM}", seed + 5, extra=("bias",), outputs=(_SUM, "output")),
           _outputs(_SUM, inputs=("bias",))),
        _f(op, f"{prefix}.dtype.float16", "float16", f"{prefix}.basic in float16; control bakes in a zero skip",
           f"{doc}: type constraint T includes tensor(float16); {_KERNEL} (MLFloat16 overload, float math)",
           _build_skip(op, f"{prefix}.dtype.float16", seed + 6, dtype="float16")),
    )


#: SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization features.
FEATURES = (
    *_skip_features(SLN, "skip_layer_norm", _SLN_DOC, 5001, simplified=False),
    _f(SLN, "skip_layer_norm.beta", "float32", "beta (D) added after gamma; control drops it",
       f"{_SLN_DOC}: input 'beta'; {_KERNEL}",
       _build_skip(SLN, "skip_layer_norm.beta", 5010, extra=("beta",), drop="beta"), Use(inputs=("beta",))),
    _f(SLN, "skip_layer_norm.skip_broadcast_batch", "float32",
       "skip of shape (1,S,D) broadcast over the batch; control bakes in a zero skip",
       f"{_SLN_DOC}: input 'skip' (1, sequence_length, hidden_size); {_KERNEL}",
       _build_skip(SLN, "skip_layer_norm.skip_broadcast_batch", 5011, skip_shape=(1, S, D)),
       Use(facts={"skip_rank": 3, "skip_batch": 1})),
    _f(SLN, "skip_layer_norm.output.mean", "float32",
       "optional output mean (B,S,1) float, listed first; control bakes in a zero skip",
       f"{_SLN_DOC}: output 'mean'; {_KERNEL}",
       _build_skip(SLN, "skip_layer_norm.output.mean", 5012, outputs=("mean", "output")), _outputs("mean")),
    _f(SLN, "skip_layer_norm.output.all", "float32",
       "every output at once (mean, inv_std_var, input_skip_bias_sum listed before output) with beta "
       "and bias; control bakes in a zero skip",
       f"{_SLN_DOC}: outputs 0-3; {_KERNEL}",
       _build_skip(SLN, "skip_layer_norm.output.all", 5013, extra=("beta", "bias"),
                   outputs=_SKIP_OUT[1:] + _SKIP_OUT[:1]),
       _outputs("mean", "inv_std_var", _SUM, inputs=("beta", "bias"))),
    *_skip_features(SSLN, "skip_simplified_layer_norm", _SSLN_DOC, 5101, simplified=True),
    _f(SSLN, "skip_simplified_layer_norm.input_2d", "float32",
       "2-D input and skip (token_count=8, D=32); control bakes in a zero skip",
       f"{_SSLN_DOC}: input (token_count, hidden_size); {_KERNEL}",
       _build_skip(SSLN, "skip_simplified_layer_norm.input_2d", 5110, skip_shape=(B * S, D), rows=(B * S,)),
       Use(facts={"input_rank": 2})),
    _f(SSLN, "skip_simplified_layer_norm.output.inv_std_var_and_sum", "float32",
       "inv_std_var and input_skip_bias_sum together with output (bias fed); control bakes in a zero skip",
       f"{_SSLN_DOC}: outputs 'inv_std_var', '{_SUM}'; {_KERNEL}",
       _build_skip(SSLN, "skip_simplified_layer_norm.output.inv_std_var_and_sum", 5111, extra=("bias",),
                   outputs=("inv_std_var", _SUM, "output")), _outputs("inv_std_var", _SUM, inputs=("bias",))),
    _f(SIMP, "simplified_layer_norm.basic", "float32",
       "RMS norm of X (B,S,D) over the last axis times scale (D); control bakes in a scale of ones",
       f"{_SIMP_SCHEMA}; {_SIMP_KERNEL}", _build_simp("simplified_layer_norm.basic", 5101)),
    _f(SIMP, "simplified_layer_norm.epsilon", "float32",
       "epsilon=1e-4 on X of mean square ~1e-6; control resets epsilon (default 1e-5)",
       f"{_SIMP_SCHEMA}: attribute 'epsilon'; {_SIMP_KERNEL}", _build_simp_epsilon,
       Use(attributes={"epsilon": NON_DEFAULT})),
    _f(SIMP, "simplified_layer_norm.axis", "float32",
       "axis=1: each batch row normalized over (S,D) jointly (rows of different scale); control axis=-1",
       f"{_SIMP_SCHEMA}: attribute 'axis'; {_SIMP_KERNEL}", _build_simp_axis,
       Use(attributes={"axis": NON_DEFAULT})),
    _f(SIMP, "simplified_layer_norm.output.inv_std_var", "float32",
       "optional output inv_std_var (B,S,1) float, listed first; control bakes in a scale of ones",
       f"{_SIMP_SCHEMA}: output 'inv_std_var'; {_SIMP_KERNEL}",
       _build_simp("simplified_layer_norm.output.inv_std_var", 5105, outputs=("inv_std_var", "Y")),
       _outputs("inv_std_var")),
    _f(SIMP, "simplified_layer_norm.dtype.float16", "float16",
       "simplified_layer_norm.basic in float16 (inv_std_var stays float); control bakes in a scale of ones",
       f"{_SIMP_SCHEMA}: type constraints T, V include tensor(float16)",
       _build_simp("simplified_layer_norm.dtype.float16", 5106, dtype="float16")),
)
