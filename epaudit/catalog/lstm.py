"""Probes for ``com.microsoft.DynamicQuantizeLSTM`` (version 1): T = 5 steps, B = 2, input 8,
hidden H = 8, uint8 W/R (zero point 128) or int8 (zero point 0), X fed, weights, scales, zero
points, biases and peepholes constants, sequence_lens / initial states fed. Reference:
:mod:`epaudit.reference.lstm` (float LSTM on the exactly dequantized weights).

Tolerance: the kernel quantizes X and every step's H to uint8 on the fly, an error the float
reference does not model: with |X| < 2 and |H| < 1 one uint8 step is 2·2/255 ≈ 0.016 (X) and
2/255 ≈ 0.008 (H), half a step per element, through weights of |w| ≤ 0.25, summed over 8
inputs: at worst ~0.016 per gate pre-activation, typically a fifth of that once the rounding
errors partly cancel. ``Tolerance(atol=0.01, rtol=0.01)`` sits between (the worst case
measured on CPU over every probe is 0.0055, ``docs/contrib-qlinear-attention-moe.md``); each
feature's subject and control differ by 10 such bounds or more (the separation self-check).

Controls: the operator itself bakes in a zero W_scale (the input never reaches the gates); an
optional input is dropped (bias, peepholes, initial states: zeros; sequence_lens: full
length); attributes are reset. Optional outputs Y_h / Y_c are listed first in their features.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Tolerance, Use
from ..reference.lstm import dequantize_lstm_weights, lstm_reference
from . import _contrib as c
from ._qgraph import U8S8_WEIGHTS, QGraph, QOp, probe

T, B, I, H = 5, 2, 8, 8
_DOC = "ORT docs/ContribOperators.md#com.microsoft.DynamicQuantizeLSTM; ONNX LSTM"
_KERNEL = "onnxruntime/contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc; core/providers/cpu/rnn/uni_directional_lstm.cc"
#: One uint8 activation quantization step through the gates (module docstring).
TOL = Tolerance(atol=0.01, rtol=0.01)
_IN = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "W_scale", "W_zero_point", "R_scale",
       "R_zero_point")
_ATTRS = ("hidden_size", "direction", "activations", "activation_alpha", "activation_beta", "clip", "input_forget")


def _ref(v, attrs):
    w = dequantize_lstm_weights(v["W"], v["W_scale"], v["W_zero_point"])
    r = dequantize_lstm_weights(v["R"], v["R_scale"], v["R_zero_point"])
    kw = {k: (attrs[k] if not isinstance(attrs[k], bytes) else attrs[k].decode()) for k in _ATTRS if k in attrs}
    return lstm_reference(v["X"], w, r, v.get("B"), v.get("sequence_lens"), v.get("initial_h"), v.get("initial_c"),
                          v.get("P"), **kw)


OP = QOp("DynamicQuantizeLSTM", "com.microsoft", 1, _IN, ("Y", "Y_h", "Y_c"), _ref)
_ALL = {"Y": "float32", "Y_h": "float32", "Y_c": "float32"}


def _f32(a) -> np.ndarray:
    return np.asarray(a, np.float32)


def _graph(seed: int, wt: str = "uint8", *, dirs: int = 1, extra=(), attrs=None, per_channel=False,
           outputs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    # int8 W/R meet X and H quantized to uint8 at run time: 7 bits (_qgraph.U8S8_WEIGHTS)
    lo, hi, zp = (0, 255, 128) if wt == "uint8" else (*U8S8_WEIGHTS, 0)
    scale = 0.25 / (127 if wt == "uint8" else 64)  # |w| <= 0.25

    def q(k):
        return rng.integers(lo, hi + 1, size=(dirs, k, 4 * H)).astype(np.dtype(wt))

    if per_channel:
        ws = _f32(np.tile(np.linspace(0.5, 1.5, 4 * H) * scale, (dirs, 1)))
        zps = np.full((dirs, 4 * H), zp).astype(np.dtype(wt))
    else:
        ws, zps = _f32(np.full(dirs, scale)), np.full(dirs, zp).astype(np.dtype(wt))
    consts: dict[str, object] = {"W": q(I), "R": q(H), "W_scale": ws, "W_zero_point": zps, "R_scale": _f32(np.full(dirs, scale)),
                                 "R_zero_point": np.full(dirs, zp).astype(np.dtype(wt))}
    feeds = {"X": _f32(rng.uniform(-2, 2, size=(T, B, I)))}
    if "B" in extra:
        consts["B"] = _f32(rng.uniform(-1, 1, size=(dirs, 8 * H)))
    if "P" in extra:
        consts["P"] = _f32(rng.uniform(-3, 3, size=(dirs, 3 * H)))
    if "B_gates" in extra:  # input gate mostly shut (-1.5), forget gate shut (-3): 1 - i keeps C, f drops it
        bias = np.zeros((dirs, 8 * H))
        bias[:, :H], bias[:, 2 * H:3 * H] = -1.5, -3.0
        consts["B"] = _f32(bias)
    if "sequence_lens" in extra:
        feeds["sequence_lens"] = np.array([T, 3], np.int32)
    if "initial_h" in extra:
        feeds["initial_h"] = _f32(rng.uniform(-0.9, 0.9, size=(dirs, B, H)))
    if "initial_c" in extra:
        feeds["initial_c"] = _f32(rng.uniform(-2, 2, size=(dirs, B, H)))
    a = {"hidden_size": H, **({"direction": "bidirectional"} if dirs == 2 else {}), **(attrs or {})}
    return QGraph(a, feeds, dict(outputs or _ALL), consts)


def _build(fid: str, seed: int, wt="uint8", *, control="w_scale", reset=(), **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, wt, **kw)
        if control == "w_scale":
            ctl = g.baked(W_scale=np.zeros_like(g.constants["W_scale"]))
        elif control == "attrs":
            ctl = g.without(attrs=reset)
        elif control == "per_tensor":
            ctl = g.baked(W_scale=_f32(g.constants["W_scale"][:, 0]), W_zero_point=g.constants["W_zero_point"][:, 0].copy())
        else:
            ctl = g.without(control)
        return probe(OP, fid, g, ctl, TOL, wt)
    return build


_f = c.feature

#: The DynamicQuantizeLSTM features, in catalog order.
FEATURES = (
    _f(OP, "dynamicquantizelstm.uint8", "uint8", "forward LSTM, T=5, B=2, H=8, uint8 W/R (zero point 128), per-tensor "
       "scales, Y, Y_h, Y_c; control bakes in W_scale 0", f"{_DOC}; {_KERNEL}", _build("dynamicquantizelstm.uint8", 7601)),
    _f(OP, "dynamicquantizelstm.int8", "int8", "int8 W/R (zero point 0); control bakes in W_scale 0", f"{_DOC}; {_KERNEL}",
       _build("dynamicquantizelstm.int8", 7602, "int8")),
    _f(OP, "dynamicquantizelstm.per_channel", "uint8", "W_scale per gate column (1,32); control bakes in the first per "
       "direction", f"{_DOC}: W_scale (num_directions, 4*hidden_size)",
       _build("dynamicquantizelstm.per_channel", 7603, per_channel=True, control="per_tensor"),
       Use(facts={"w_scale_rank": 2})),
    *(_f(OP, f"dynamicquantizelstm.{n.lower()}", "uint8", f"input '{n}' ({what}); control drops it ({default})",
         f"{_DOC}: input '{n}'", _build(f"dynamicquantizelstm.{n.lower()}", 7604 + i, extra=(n,), control=n),
         Use(inputs=(n,)))
      for i, (n, what, default) in enumerate((
          ("B", "W and R biases (1,64)", "zeros"), ("P", "peepholes (1,24) in [-3, 3]", "zeros"),
          ("sequence_lens", "[5, 3]: row 1 stops after 3 steps", "full length"),
          ("initial_h", "(1,2,8)", "zeros"), ("initial_c", "(1,2,8)", "zeros")))),
    _f(OP, "dynamicquantizelstm.direction.reverse", "uint8", "direction=reverse (with sequence_lens [5,3]); control "
       "forward", f"{_DOC}: attribute 'direction'",
       _build("dynamicquantizelstm.direction.reverse", 7609, extra=("sequence_lens",), attrs={"direction": "reverse"},
              control="attrs", reset=("direction",)), Use(attributes={"direction": "reverse"})),
    _f(OP, "dynamicquantizelstm.direction.bidirectional", "uint8", "direction=bidirectional (W, R, scales per "
       "direction); control bakes in W_scale 0", f"{_DOC}: attribute 'direction'",
       _build("dynamicquantizelstm.direction.bidirectional", 7610, dirs=2),
       Use(attributes={"direction": "bidirectional"})),
    _f(OP, "dynamicquantizelstm.clip", "uint8", "clip=0.3 on every gate pre-activation (bias B given); control drops clip",
       f"{_DOC}: attribute 'clip'", _build("dynamicquantizelstm.clip", 7611, extra=("B",), attrs={"clip": 0.3},
                                           control="attrs", reset=("clip",)), Use(attributes={"clip": NON_DEFAULT})),
    _f(OP, "dynamicquantizelstm.input_forget", "uint8", "input_forget=1 (f = 1 - i) with biases shutting the input "
       "and forget gates (f = 0.05, 1 - i = 0.8) and an initial_c; control resets it",
       f"{_DOC}: attribute 'input_forget'", _build("dynamicquantizelstm.input_forget", 7612, extra=("B_gates", "initial_c"),
                                                   attrs={"input_forget": 1}, control="attrs",
                                                   reset=("input_forget",)), Use(attributes={"input_forget": 1})),
    _f(OP, "dynamicquantizelstm.activations", "uint8", "activations [Sigmoid, Tanh, Relu] (h = Relu); control leaves "
       "them unset (Sigmoid, Tanh, Tanh)", f"{_DOC}: attribute 'activations'",
       _build("dynamicquantizelstm.activations", 7613, attrs={"activations": ["Sigmoid", "Tanh", "Relu"]},
              control="attrs", reset=("activations",)), Use(attributes={"activations": NON_DEFAULT})),
    *(_f(OP, f"dynamicquantizelstm.output.{o.lower()}", "uint8", f"only the optional output {o} requested; control "
         "bakes in W_scale 0", f"{_DOC}: output '{o}'",
         _build(f"dynamicquantizelstm.output.{o.lower()}", 7614 + i, extra=("B",), outputs={o: "float32"}),
         Use(facts={"outputs": (o,)})) for i, o in enumerate(("Y_h", "Y_c"))),
)
