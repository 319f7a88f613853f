"""Float64 reference for ``com.microsoft.DynamicQuantizeLSTM`` (version 1): the ONNX ``LSTM``
(ONNX operator spec, section LSTM: gates i, o, f, c; Ct = ft ⊙ Ct−1 + it ⊙ ct, Ht = ot ⊙ h(Ct);
peepholes P = (Pi, Po, Pf); ``clip`` on the gate pre-activations; ``input_forget`` couples
ft = 1 − it; ``sequence_lens`` stops a batch row early, its Y rows then 0 and Y_h/Y_c its
last valid state; ``reverse`` runs from the end; ``bidirectional`` stacks both) whose weights
are quantized.

The com.microsoft schema has no text (its doc string is None); its inputs say what differs:
W is (D, input_size, 4H) and R (D, H, 4H), i.e. transposed against ONNX LSTM's (D, 4H, I),
quantized with W_scale/W_zero_point (and R's) per direction (D,) or per gate column (D, 4H).
The reference dequantizes them exactly and runs the float LSTM. The CPU kernel
(``onnxruntime/contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc`` on
``core/providers/cpu/rnn/uni_directional_lstm.cc``) also quantizes X and each step's H to
uint8 on the fly (hence "dynamic"), which this reference does not model: the catalog's
tolerance bounds that error instead (``catalog/lstm.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["lstm_reference", "dequantize_lstm_weights", "ACTIVATIONS"]


def _sigmoid(x, alpha=None, beta=None):
    return 1.0 / (1.0 + np.exp(-x))


#: Activation name -> f(x, alpha, beta) (ONNX RNN activation list; defaults of the spec).
ACTIVATIONS = {
    "Sigmoid": _sigmoid,
    "Tanh": lambda x, a=None, b=None: np.tanh(x),
    "Relu": lambda x, a=None, b=None: np.maximum(x, 0.0),
    "HardSigmoid": lambda x, a=None, b=None: np.clip((0.2 if a is None else a) * x + (0.5 if b is None else b), 0, 1),
    "Affine": lambda x, a=None, b=None: (1.0 if a is None else a) * x + (0.0 if b is None else b),
}


def dequantize_lstm_weights(q, scale, zero_point) -> np.ndarray:
    """(D, K, 4H) quantized codes -> float64, with per-direction (D,) or per-column (D, 4H)
    scale / zero point."""
    s = np.asarray(scale, np.float64)
    z = np.asarray(zero_point, np.float64)
    s = s[:, None, None] if s.ndim == 1 else s[:, None, :]
    z = z[:, None, None] if z.ndim == 1 else z[:, None, :]
    return (np.asarray(q, np.float64) - z) * s


def _direction(x, w, r, b, p, h0, c0, lens, fns, clip, input_forget, reverse):
    steps, batch, _ = x.shape
    hidden = r.shape[0]
    h, c = h0.copy(), c0.copy()
    ys = np.zeros((steps, batch, hidden))
    f, g, hh = fns
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        gates = x[t] @ w + h @ r + b  # (B, 4H): i, o, f, c
        gi, go, gf, gc = np.split(gates, 4, axis=1)
        pi, po, pf = p
        gi, gf = gi + pi * c, gf + pf * c
        if clip is not None:
            gi, gf, gc = (np.clip(v, -clip, clip) for v in (gi, gf, gc))
        it = f(gi)
        ft = 1.0 - it if input_forget else f(gf)
        ct = g(gc)
        c_new = ft * c + it * ct
        go = go + po * c_new
        if clip is not None:
            go = np.clip(go, -clip, clip)
        h_new = f(go) * hh(c_new)
        valid = (t < lens)[:, None]
        h = np.where(valid, h_new, h)
        c = np.where(valid, c_new, c)
        ys[t] = np.where(valid, h_new, 0.0)
    return ys, h, c


def lstm_reference(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *, hidden_size: int,
                   direction: str = "forward", activations=None, activation_alpha=None, activation_beta=None,
                   clip: float | None = None, input_forget: int = 0) -> dict[str, np.ndarray]:
    """Expected ``Y`` (T, D, B, H), ``Y_h`` and ``Y_c`` (D, B, H) of an LSTM with float64
    weights W (D, I, 4H), R (D, H, 4H), B (D, 8H), P (D, 3H).

    Raises:
        ValueError: an unknown direction or activation name.
    """
    xa = np.asarray(x, np.float64)
    steps, batch, _ = xa.shape
    dirs = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(direction)
    if dirs is None:
        raise ValueError(f"unknown direction {direction!r}")
    hsz = int(hidden_size)
    names = list(activations or ["Sigmoid", "Tanh", "Tanh"] * dirs)
    alphas = list(activation_alpha or [None] * len(names))
    betas = list(activation_beta or [None] * len(names))
    lens = np.full(batch, steps) if sequence_lens is None else np.asarray(sequence_lens, np.int64)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        fns = []
        for j in range(3):
            name = names[3 * d + j]
            if name not in ACTIVATIONS:
                raise ValueError(f"unknown activation {name!r}")
            fn, a, bb = ACTIVATIONS[name], alphas[3 * d + j], betas[3 * d + j]
            fns.append(lambda v, fn=fn, a=a, bb=bb: fn(v, a, bb))
        bias = np.zeros(8 * hsz) if b is None else np.asarray(b, np.float64)[d]
        peep = np.zeros(3 * hsz) if p is None else np.asarray(p, np.float64)[d]
        h0 = np.zeros((batch, hsz)) if initial_h is None else np.asarray(initial_h, np.float64)[d]
        c0 = np.zeros((batch, hsz)) if initial_c is None else np.asarray(initial_c, np.float64)[d]
        y, h, c = _direction(xa, np.asarray(w, np.float64)[d], np.asarray(r, np.float64)[d],
                             bias[:4 * hsz] + bias[4 * hsz:], np.split(peep, 3), h0, c0, lens, fns, clip,
                             input_forget, direction == "reverse" or d == 1)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return {"Y": np.stack(ys, axis=1), "Y_h": np.stack(hs), "Y_c": np.stack(cs)}
