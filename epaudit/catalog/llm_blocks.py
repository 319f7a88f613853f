"""Probes for the ``com.microsoft`` LLM block operators (version 1): ``EngramGate``,
``CausalConvWithState``, ``HyperConnectionPreMix``, ``HyperConnectionPostMix``,
``BranchwiseRMSNorm``, ``GatedRMSNorm`` and ``LinearAttentionGate``.

float32 unless a feature is a dtype (float16: the kernels compute in float32 and round the
result). Shapes: B = 2, S = 3 tokens, hc / C = 4 branches, H = 16 features. References from
:mod:`epaudit.reference.llm_blocks`.

Controls: the operator itself bakes in a neutral input (EngramGate: value 0; CausalConv:
weight 0; PreMix: pre_mix 0; PostMix: post_mix 0 (output = streams); BranchwiseRMSNorm: X 0;
GatedRMSNorm: gate 0; LinearAttentionGate: dt_bias 0); optional inputs are dropped (an
optional output's control keeps it and bakes in the neutral input); attributes are reset to
their defaults; ``epsilon`` features run on inputs of mean square ~1e-4 where epsilon 1e-2
dominates.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import llm_blocks as ref
from . import _xcase as x

_MS = "com.microsoft"
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_K = "onnxruntime/contrib_ops/cpu/bert/"
B, S, C, H = 2, 3, 4, 16

ENGRAM = x.XOp("EngramGate", _MS, 1, ("key", "query", "value", "key_norm_scale", "query_norm_scale",
                                      "conv_norm_scale"), ("output", "gated_value_normed"),
               lambda v, a: ref.engram_gate(*(v.get(n) for n in ("key", "query", "value", "key_norm_scale",
                                                                 "query_norm_scale", "conv_norm_scale")),
                                            epsilon=float(a.get("epsilon", 1e-5))))
CCONV = x.XOp("CausalConvWithState", _MS, 1, ("input", "weight", "bias", "past_state"), ("output", "present_state"),
              lambda v, a: ref.causal_conv_with_state(v["input"], v["weight"], v.get("bias"), v.get("past_state"),
                                                      **dict(a)))
PREMIX = x.XOp("HyperConnectionPreMix", _MS, 1, ("streams", "pre_mix"), ("output",),
               lambda v, a: {"output": ref.hyper_connection_pre_mix(v["streams"], v["pre_mix"], **dict(a))})
POSTMIX = x.XOp("HyperConnectionPostMix", _MS, 1, ("streams", "block_output", "post_mix", "stream_mix"), ("output",),
                lambda v, a: {"output": ref.hyper_connection_post_mix(v["streams"], v["block_output"], v["post_mix"],
                                                                      v.get("stream_mix"), **dict(a))})
BRMS = x.XOp("BranchwiseRMSNorm", _MS, 1, ("X", "scale"), ("Y",),
             lambda v, a: {"Y": ref.branchwise_rms_norm(v["X"], v.get("scale"), **dict(a))})
GRMS = x.XOp("GatedRMSNorm", _MS, 1, ("X", "scale", "gate"), ("Y",),
             lambda v, a: {"Y": ref.gated_rms_norm(v["X"], v["scale"], v["gate"], **dict(a))})
LAGATE = x.XOp("LinearAttentionGate", _MS, 1, ("a", "dt_bias", "decay_scale", "b"), ("decay", "beta"),
               lambda v, a: ref.linear_attention_gate(v["a"], v["dt_bias"], v["decay_scale"], v.get("b")),
               {"dt_bias": "float32", "decay_scale": "float32"})


def _n(rng, shape, dtype="float32", scale=1.0, loc=0.0):
    return x.normal(rng, shape, dtype, scale, loc)


def _zero(g: x.Graph, name: str) -> x.Graph:
    return g.baked(**{name: np.zeros_like(g.feeds[name])})


# --------------------------------------------------------------------------- EngramGate
def _engram(fid: str, seed: int, *, dtype: str = "float32", outputs=("output",), attrs=None,
            scale: float = 1.0) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        feeds = {"key": _n(rng, (B, S, C, H), dtype, scale), "query": _n(rng, (B, S, C, H), dtype, scale),
                 "value": _n(rng, (B, S, H), dtype), "key_norm_scale": _n(rng, (C, H), dtype, 0.3, 1.0),
                 "query_norm_scale": _n(rng, (C, H), dtype, 0.3, 1.0)}
        if "gated_value_normed" in outputs:
            feeds["conv_norm_scale"] = _n(rng, (C, H), dtype, 0.3, 1.0)
        g = x.Graph(dtype, dict(attrs or {}), feeds, tuple(outputs))
        control = g.without(attrs=tuple(attrs)) if attrs else _zero(g, "value")
        return x.probe(ENGRAM, fid, g, control)
    return build


# --------------------------------------------------------------------------- CausalConvWithState
def _cconv(fid: str, seed: int, *, attrs=None, length: int = 6, past: bool = False, bias: bool = False,
           drop: tuple[str, ...] = (), reset: tuple[str, ...] = (), layout=None, k: int = 3,
           outputs=("output", "present_state")) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        a = dict(attrs or {})
        dil = int(a.get("dilation", 1))
        pad = (k - 1) * dil
        shape = layout or (B, C, length)
        feeds = {"input": _n(rng, shape), "weight": _n(rng, (C, 1, k), scale=0.6)}
        if bias:
            feeds["bias"] = _n(rng, (C,))
        if past:
            window = int(a.get("state_window", 0))
            pshape = (B, pad) + shape[2:] if a.get("channels_last") else (B, C, pad)
            feeds["past_state"] = _n(rng, ((window,) if window else ()) + pshape)
        g = x.Graph("float32", a, feeds, tuple(outputs))
        control = g.without(*drop, attrs=reset) if drop or reset else _zero(g, "weight")
        return x.probe(CCONV, fid, g, control)
    return build


# --------------------------------------------------------------------------- HyperConnection
def _premix(fid: str, seed: int, *, mix_shape=(B, S, C), attrs=None, flat: bool = False,
            dtype: str = "float32") -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        streams = _n(rng, (B, S, C * H) if flat else (B, S, C, H), dtype)
        g = x.Graph(dtype, dict(attrs or {}), {"streams": streams, "pre_mix": _n(rng, mix_shape, dtype)}, ("output",))
        reset = tuple(k for k in (attrs or {}) if k != "num_branches")
        return x.probe(PREMIX, fid, g, g.without(attrs=reset) if reset else _zero(g, "pre_mix"))
    return build


def _postmix(fid: str, seed: int, *, post_shape=(B, S, C), stream_mix: bool = False, attrs=None,
             flat: bool = False, dtype: str = "float32") -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        feeds = {"streams": _n(rng, (B, S, C * H) if flat else (B, S, C, H), dtype),
                 "block_output": _n(rng, (B, S, H), dtype), "post_mix": _n(rng, post_shape, dtype)}
        if stream_mix:
            feeds["stream_mix"] = _n(rng, (B, S, C, C), dtype, 0.5)
        g = x.Graph(dtype, dict(attrs or {}), feeds, ("output",))
        return x.probe(POSTMIX, fid, g, g.without("stream_mix") if stream_mix else _zero(g, "post_mix"))
    return build


# --------------------------------------------------------------------------- RMS norms / gates
def _brms(fid: str, seed: int, *, scale_shape=None, attrs=None, flat: bool = False, std: float = 1.0,
          dtype: str = "float32", drop_attrs: tuple[str, ...] = ()) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        # Branches of different scale (0.5 … 4): a norm over the wrong axis is off by up to 8x.
        branch = np.array([0.5, 1.0, 2.0, 4.0])
        spread = np.repeat(branch, H) if flat else branch[:, None]
        feeds = {"X": _n(rng, (B, S, C * H) if flat else (B, S, C, H), dtype, std * spread)}
        if scale_shape:
            feeds["scale"] = _n(rng, scale_shape, dtype, 0.5, 1.0)
        g = x.Graph(dtype, dict(attrs or {}), feeds, ("Y",))
        if drop_attrs:
            control = g.without(attrs=drop_attrs)
        elif scale_shape:
            control = g.without("scale")
        else:
            control = _zero(g, "X")
        return x.probe(BRMS, fid, g, control)
    return build


def _grms(fid: str, seed: int, *, c: int = 32, attrs=None, std: float = 1.0, dtype: str = "float32",
          drop_attrs: tuple[str, ...] = ()) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        feeds = {"X": _n(rng, (B, S, 32), dtype, std), "scale": _n(rng, (c,), dtype, 0.5, 1.0),
                 "gate": _n(rng, (B, S, 32), dtype, 1.5)}
        g = x.Graph(dtype, dict(attrs or {}), feeds, ("Y",))
        return x.probe(GRMS, fid, g, g.without(attrs=drop_attrs) if drop_attrs else _zero(g, "gate"))
    return build


def _lagate(fid: str, seed: int, *, beta: bool = False, dtype: str = "float32") -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        feeds = {"a": _n(rng, (B, S, H), dtype, 2.0), "dt_bias": _n(rng, (H,), scale=1.5),
                 "decay_scale": -np.exp(_n(rng, (H,), scale=0.5))}
        if beta:
            feeds["b"] = _n(rng, (B, S, H), dtype, 2.0)
        g = x.Graph(dtype, {}, feeds, ("beta", "decay") if beta else ("decay",))
        return x.probe(LAGATE, fid, g, _zero(g, "b") if beta else _zero(g, "dt_bias"))
    return build


_f = x.feature
_EG = f"{_DOC}EngramGate; {_K}engram_gate.cc, engram_helper.h"
_CC = f"{_DOC}CausalConvWithState; {_K}causal_conv_with_state.cc"
_PRE = f"{_DOC}HyperConnectionPreMix; {_K}hyper_connection_pre_mix.cc"
_POST = f"{_DOC}HyperConnectionPostMix; {_K}hyper_connection_post_mix.cc"
_BR = f"{_DOC}BranchwiseRMSNorm; {_K}branchwise_rms_norm.cc"
_GR = f"{_DOC}GatedRMSNorm (schema text of onnxruntime 1.31.1)"
_LA = f"{_DOC}LinearAttentionGate; {_K}linear_attention_gates.cc"
_EPS = {"epsilon": 1e-2}
_CL = (B, 6, C)

#: EngramGate, CausalConvWithState, HyperConnection{Pre,Post}Mix, BranchwiseRMSNorm, GatedRMSNorm,
#: LinearAttentionGate features.
FEATURES = (
    _f(ENGRAM, "engramgate.basic", "float32",
       "gate from RMS-normed key/query (2,3,4,16) times value (2,3,16); control bakes in value = 0",
       _EG, _engram("engramgate.basic", 9601)),
    _f(ENGRAM, "engramgate.output.gated_value_normed", "float32",
       "optional output gated_value_normed (listed first) with conv_norm_scale; control value = 0",
       f"{_EG}: output 'gated_value_normed', input 'conv_norm_scale'",
       _engram("engramgate.output.gated_value_normed", 9602, outputs=("gated_value_normed", "output")),
       Use(inputs=("conv_norm_scale",), facts={"outputs": ("output", "gated_value_normed")})),
    _f(ENGRAM, "engramgate.epsilon", "float32", "epsilon=1e-2 on key/query of std 1e-2; control epsilon 1e-5",
       f"{_EG}: attribute 'epsilon'", _engram("engramgate.epsilon", 9603, attrs=_EPS, scale=1e-2),
       Use(attributes={"epsilon": NON_DEFAULT})),
    _f(ENGRAM, "engramgate.dtype.float16", "float16", "engramgate.basic in float16; control value = 0",
       f"{_EG}: type constraint T includes tensor(float16)", _engram("engramgate.dtype.float16", 9604,
                                                                       dtype="float16")),
    _f(CCONV, "causalconvwithstate.basic", "float32",
       "depthwise causal conv K=3 of input (2,4,6), zero past; present_state = last 2 positions; control weight 0",
       _CC, _cconv("causalconvwithstate.basic", 9701)),
    _f(CCONV, "causalconvwithstate.bias", "float32", "bias (4); control drops it", f"{_CC}: input 'bias'",
       _cconv("causalconvwithstate.bias", 9702, bias=True, drop=("bias",)), Use(inputs=("bias",))),
    _f(CCONV, "causalconvwithstate.past_state", "float32", "past_state (2,4,2) prepended; control drops it",
       f"{_CC}: input 'past_state'", _cconv("causalconvwithstate.past_state", 9703, past=True, drop=("past_state",)),
       Use(inputs=("past_state",))),
    _f(CCONV, "causalconvwithstate.decode", "float32", "one position (L=1) with a past_state; control drops it",
       f"{_CC} (decode fast path)", _cconv("causalconvwithstate.decode", 9704, length=1, past=True,
                                          drop=("past_state",)), Use(inputs=("past_state",), facts={"L": 1})),
    _f(CCONV, "causalconvwithstate.activation.silu", "float32", "activation=silu; control none",
       f"{_CC}: attribute 'activation'", _cconv("causalconvwithstate.activation.silu", 9705,
                                                attrs={"activation": "silu"}, reset=("activation",)),
       Use(attributes={"activation": "silu"})),
    _f(CCONV, "causalconvwithstate.activation.swish", "float32", "activation=swish (alias of silu); control none",
       f"{_CC}: attribute 'activation'", _cconv("causalconvwithstate.activation.swish", 9706,
                                                attrs={"activation": "swish"}, reset=("activation",)),
       Use(attributes={"activation": "swish"})),
    _f(CCONV, "causalconvwithstate.dilation", "float32", "dilation=2 (state length 4) with a past; control weight 0",
       f"{_CC}: attribute 'dilation'", _cconv("causalconvwithstate.dilation", 9707, attrs={"dilation": 2}, past=True),
       Use(attributes={"dilation": NON_DEFAULT})),
    _f(CCONV, "causalconvwithstate.channels_last", "float32",
       "channels_last=1: input (2,6,4) sequence-major with a past (2,2,4); control weight 0",
       f"{_CC}: attribute 'channels_last'",
       _cconv("causalconvwithstate.channels_last", 9708, attrs={"channels_last": 1}, past=True, layout=_CL),
       Use(attributes={"channels_last": NON_DEFAULT})),
    _f(CCONV, "causalconvwithstate.channels_last.multi_axis", "float32",
       "channels_last=1 with two channel axes: input (2,6,2,2), C = 4; control weight 0",
       f"{_CC}: channels_last (batch, sequence, d_1, ..., d_n)",
       _cconv("causalconvwithstate.channels_last.multi_axis", 9709, attrs={"channels_last": 1},
              layout=(B, 6, 2, 2)), Use(attributes={"channels_last": NON_DEFAULT})),
    _f(CCONV, "causalconvwithstate.state_window", "float32",
       "state_window=2: present_state (2,2,4,2) holds the last two per-position states; control weight 0",
       f"{_CC}: attribute 'state_window'",
       _cconv("causalconvwithstate.state_window", 9710, attrs={"state_window": 2}, past=True),
       Use(attributes={"state_window": NON_DEFAULT})),
    _f(PREMIX, "hyperconnectionpremix.basic", "float32",
       "sum over 4 branches of streams (2,3,4,16) weighted by pre_mix (2,3,4); control pre_mix 0",
       _PRE, _premix("hyperconnectionpremix.basic", 9801)),
    _f(PREMIX, "hyperconnectionpremix.pre_mix.per_feature", "float32", "pre_mix (2,3,4,16); control pre_mix 0",
       f"{_PRE}: pre_mix (..., C, H)", _premix("hyperconnectionpremix.pre_mix.per_feature", 9802,
                                               mix_shape=(B, S, C, H)), Use(facts={"pre_mix": "C,H"})),
    _f(PREMIX, "hyperconnectionpremix.pre_mix.column", "float32", "pre_mix (2,3,4,1); control pre_mix 0",
       f"{_PRE}: pre_mix (..., C, 1)", _premix("hyperconnectionpremix.pre_mix.column", 9803,
                                               mix_shape=(B, S, C, 1)), Use(facts={"pre_mix": "C,1"})),
    _f(PREMIX, "hyperconnectionpremix.reduction_scale", "float32", "reduction_scale=0.25; control 1",
       f"{_PRE}: attribute 'reduction_scale'",
       _premix("hyperconnectionpremix.reduction_scale", 9804, attrs={"reduction_scale": 0.25}),
       Use(attributes={"reduction_scale": NON_DEFAULT})),
    _f(PREMIX, "hyperconnectionpremix.num_branches", "float32",
       "flattened streams (2,3,64) with num_branches=4, pre_mix (2,3,4); control pre_mix 0",
       f"{_PRE}: attribute 'num_branches'",
       _premix("hyperconnectionpremix.num_branches", 9805, attrs={"num_branches": C}, flat=True),
       Use(attributes={"num_branches": NON_DEFAULT})),
    _f(PREMIX, "hyperconnectionpremix.num_branches.flat_pre_mix", "float32",
       "flattened streams and pre_mix (2,3,64) with num_branches=4; control pre_mix 0",
       f"{_PRE}: pre_mix (..., C * H) for flattened streams",
       _premix("hyperconnectionpremix.num_branches.flat_pre_mix", 9806, attrs={"num_branches": C}, flat=True,
               mix_shape=(B, S, C * H)), Use(attributes={"num_branches": NON_DEFAULT})),
    _f(PREMIX, "hyperconnectionpremix.dtype.float16", "float16", "hyperconnectionpremix.basic in float16",
       f"{_PRE}: type constraints T, M include tensor(float16)",
       _premix("hyperconnectionpremix.dtype.float16", 9807, dtype="float16")),
    _f(POSTMIX, "hyperconnectionpostmix.basic", "float32",
       "streams (2,3,4,16) + post_mix (2,3,4) x block_output (2,3,16); control post_mix 0 (= streams)",
       _POST, _postmix("hyperconnectionpostmix.basic", 9901)),
    _f(POSTMIX, "hyperconnectionpostmix.stream_mix", "float32", "stream_mix (2,3,4,4) mixes the streams; control drops it",
       f"{_POST}: input 'stream_mix'", _postmix("hyperconnectionpostmix.stream_mix", 9902, stream_mix=True),
       Use(inputs=("stream_mix",))),
    _f(POSTMIX, "hyperconnectionpostmix.post_mix.per_feature", "float32", "post_mix (2,3,4,16); control post_mix 0",
       f"{_POST}: post_mix (..., C, H)", _postmix("hyperconnectionpostmix.post_mix.per_feature", 9903,
                                                  post_shape=(B, S, C, H)), Use(facts={"post_mix": "C,H"})),
    _f(POSTMIX, "hyperconnectionpostmix.num_branches", "float32",
       "flattened streams (2,3,64) with num_branches=4 and a stream_mix; control drops stream_mix",
       f"{_POST}: attribute 'num_branches'",
       _postmix("hyperconnectionpostmix.num_branches", 9904, attrs={"num_branches": C}, flat=True, stream_mix=True),
       Use(inputs=("stream_mix",), attributes={"num_branches": NON_DEFAULT})),
    _f(POSTMIX, "hyperconnectionpostmix.dtype.float16", "float16", "hyperconnectionpostmix.basic in float16",
       f"{_POST}: type constraints T, M include tensor(float16)",
       _postmix("hyperconnectionpostmix.dtype.float16", 9905, dtype="float16")),
    _f(BRMS, "branchwisermsnorm.basic", "float32", "RMS norm over H of each of 4 branches of X (2,3,4,16); control X 0",
       _BR, _brms("branchwisermsnorm.basic", 10001)),
    _f(BRMS, "branchwisermsnorm.scale", "float32", "scale (16) shared by the branches; control drops it",
       f"{_BR}: input 'scale' (H)", _brms("branchwisermsnorm.scale", 10002, scale_shape=(H,)), Use(inputs=("scale",))),
    _f(BRMS, "branchwisermsnorm.scale.per_branch", "float32", "scale (4,16); control drops it",
       f"{_BR}: input 'scale' (C, H)", _brms("branchwisermsnorm.scale.per_branch", 10003, scale_shape=(C, H)),
       Use(inputs=("scale",))),
    _f(BRMS, "branchwisermsnorm.scale.flat", "float32", "scale (64) = (C*H); control drops it",
       f"{_BR}: input 'scale' (C * H)", _brms("branchwisermsnorm.scale.flat", 10004, scale_shape=(C * H,)),
       Use(inputs=("scale",))),
    _f(BRMS, "branchwisermsnorm.num_branches", "float32",
       "flattened X (2,3,64) with num_branches=4 (branches of rising scale); control normalizes all 64 jointly",
       f"{_BR}: attribute 'num_branches'",
       _brms("branchwisermsnorm.num_branches", 10005, attrs={"num_branches": C}, flat=True,
             drop_attrs=("num_branches",)), Use(attributes={"num_branches": NON_DEFAULT})),
    _f(BRMS, "branchwisermsnorm.epsilon", "float32", "epsilon=1e-2 on X of std ~1e-2; control epsilon 1e-5",
       f"{_BR}: attribute 'epsilon'", _brms("branchwisermsnorm.epsilon", 10006, attrs=_EPS, std=1e-2,
                                             drop_attrs=("epsilon",)), Use(attributes={"epsilon": NON_DEFAULT})),
    _f(BRMS, "branchwisermsnorm.dtype.float16", "float16", "branchwisermsnorm.scale in float16; control drops scale",
       f"{_BR}: type constraints T, M include tensor(float16)",
       _brms("branchwisermsnorm.dtype.float16", 10007, scale_shape=(H,), dtype="float16"), Use(inputs=("scale",))),
    _f(GRMS, "gatedrmsnorm.basic", "float32",
       "RMS norm of X (2,3,32) · scale (32) · silu(gate) (default); control gate 0", _GR, _grms("gatedrmsnorm.basic", 10101)),
    _f(GRMS, "gatedrmsnorm.activation.sigmoid", "float32", "activation=sigmoid; control silu",
       f"{_GR}: attribute 'activation'", _grms("gatedrmsnorm.activation.sigmoid", 10102,
                                               attrs={"activation": "sigmoid"}, drop_attrs=("activation",)),
       Use(attributes={"activation": "sigmoid"})),
    _f(GRMS, "gatedrmsnorm.activation.swish", "float32", "activation=swish (alias of silu); control gate 0",
       f"{_GR}: attribute 'activation'", _grms("gatedrmsnorm.activation.swish", 10103, attrs={"activation": "swish"}),
       Use(attributes={"activation": "swish"})),
    _f(GRMS, "gatedrmsnorm.groups", "float32", "scale of C=8: 4 groups of 8 per row, each normalized alone; control gate 0",
       f"{_GR}: 'last dimension must be a multiple of C'", _grms("gatedrmsnorm.groups", 10104, c=8),
       Use(facts={"groups": 4})),
    _f(GRMS, "gatedrmsnorm.epsilon", "float32", "epsilon=1e-2 on X of std 1e-2; control epsilon 1e-5",
       f"{_GR}: attribute 'epsilon'", _grms("gatedrmsnorm.epsilon", 10105, attrs=_EPS, std=1e-2,
                                             drop_attrs=("epsilon",)), Use(attributes={"epsilon": NON_DEFAULT})),
    _f(GRMS, "gatedrmsnorm.dtype.float16", "float16", "gatedrmsnorm.basic in float16; control gate 0",
       f"{_GR}: type constraint T includes tensor(float16)", _grms("gatedrmsnorm.dtype.float16", 10106, dtype="float16")),
    _f(LAGATE, "linearattentiongate.basic", "float32",
       "decay = decay_scale · softplus(a + dt_bias), a (2,3,16); control dt_bias 0", _LA,
       _lagate("linearattentiongate.basic", 10201)),
    _f(LAGATE, "linearattentiongate.output.beta", "float32",
       "optional output beta = sigmoid(b) (listed first) with b fed; control b = 0 (beta 0.5)",
       f"{_LA}: input 'b', output 'beta'", _lagate("linearattentiongate.output.beta", 10202, beta=True),
       Use(inputs=("b",), facts={"outputs": ("decay", "beta")})),
    _f(LAGATE, "linearattentiongate.dtype.float16", "float16",
       "linearattentiongate.output.beta with float16 a/b (float32 dt_bias, decay_scale); control b = 0",
       f"{_LA}: type constraint T includes tensor(float16), TF float32",
       _lagate("linearattentiongate.dtype.float16", 10203, beta=True, dtype="float16"), Use(inputs=("b",))),
)
