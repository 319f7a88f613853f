"""What the spec asks of a node's inputs that onnx's checker does not enforce.

A sweep draws values and shapes freely; for a few operators the spec puts a rule on them
that neither onnx's strict shape inference nor its checker sees, and a configuration that
breaks it has no answer the spec gives (each one below was a false finding of the full CPU
sweep, docs/sweep.md):

* **class indices**: NegativeLogLikelihoodLoss' ``target`` and SoftmaxCrossEntropyLoss'
  ``labels`` hold values in ``[0, C)`` or ``ignore_index`` (the spec: "target ... values in
  the range [0, C)"); drawn so by :func:`feed`, a quarter of them ``ignore_index`` when the
  node has one. Their ``weight`` is "a manual rescaling weight given to each class ... of
  size C": drawn positive (a sum of weights near 0 makes the ``mean`` reduction a
  cancellation, not a kernel question), and a configuration whose weight is not of length
  ``C``, or whose target is not ``(N, d1, ..., dk)``, is :func:`outside` the spec;
* **shapes and indices the spec fixes**: LSTM, GRU and RNN's ``W``, ``R`` and ``B`` follow
  from ``hidden_size`` (``W`` [num_directions, gates * hidden_size, input_size]); Gather,
  GatherElements and ScatterElements' ``indices`` lie in ``[-s, s - 1]`` along ``axis``
  ("an error if any of the index values are out of bounds"); ai.onnx RotaryEmbedding's
  ``position_ids`` are (batch_size, sequence_length) and its two caches alike. A WebGPU
  sweep read LSTM ``W`` [1, 1, 1] for ``hidden_size=1``, GatherElements index 1 along an
  axis of size 1 and ``position_ids`` [1, 1] for a batch of 2 as failures (the EP answers
  what the spec calls an error): :func:`outside`;
* **DynamicQuantizeLinear of a zero range**: ``y_scale = (max(0, max(x)) - min(0, min(x))) /
  255`` is 0 for an all-zero ``x`` and ``y = round(x / y_scale)`` divides 0 by 0: the spec
  gives no answer (ORT 1.31.1 writes ``y_scale = 1``, onnx.reference ``1 / 255``):
  :func:`undefined`;
* **stage-one precision**: LayerNormalization, GroupNormalization and RMSNormalization
  compute their mean and variance in the type ``stash_type`` names (default 1, float), so a
  float64 node is as exact as float32 there: :func:`stage_one_dtype` (ORT runs
  GroupNormalization-21's function body, whose float32 stage one differs from a float64
  reference by 2.5e-8 on ``x`` of shape (1, 2, 2, 2)).
"""

from __future__ import annotations

import numpy as np

from .config import Config

#: (domain, op) -> (index of the class-index input, index of the per-class weight input).
CLASS_INPUTS = {("", "NegativeLogLikelihoodLoss"): (1, 2), ("", "SoftmaxCrossEntropyLoss"): (1, 2)}
#: Operators whose ``stash_type`` sets the precision of their stage one.
STASHED = frozenset({"LayerNormalization", "GroupNormalization", "RMSNormalization"})
#: ``stash_type`` values (TensorProto data types) and their numpy names.
_STASH = {1: "float32", 11: "float64", 10: "float16"}


def feed(config: Config, index: int, rng: np.random.Generator) -> np.ndarray | None:
    """The feed of input ``index`` where a rule decides its values, else ``None`` (the value
    kind draws it): class indices in ``[0, C)`` (``C`` = ``inputs[0].shape[1]``) with some
    ``ignore_index``, or positive per-class weights (multiples of 0.25 in [0.25, 4])."""
    rule = CLASS_INPUTS.get((config.domain, config.op))
    x = config.inputs[index]
    if rule is None or x is None or len(config.inputs[0].shape) < 2:
        return None
    classes = int(config.inputs[0].shape[1])
    if index == rule[0]:
        got = rng.integers(0, max(classes, 1), size=x.shape)
        ignore = config.attrs.get("ignore_index")
        if ignore is not None and got.size:
            got = np.where(rng.random(x.shape) < 0.25, int(ignore), got)
        return got.astype(x.dtype)
    if index == rule[1]:
        return (rng.integers(1, 17, size=x.shape) / 4.0).astype(x.dtype)
    return None


def outside(config: Config) -> str:
    """Why ``config`` breaks a rule of the spec onnx does not check, or ``""``."""
    if not config.domain:
        why = _shape_rules(config)
        if why:
            return why
    rule = CLASS_INPUTS.get((config.domain, config.op))
    if rule is None:
        return ""
    scores = config.inputs[0].shape
    target = config.inputs[rule[0]] if len(config.inputs) > rule[0] else None
    weight = config.inputs[rule[1]] if len(config.inputs) > rule[1] else None
    if len(scores) < 2:
        return f"{config.op}: input of rank {len(scores)} (the spec: (N, C, d1, ..., dk))"
    if target is not None and tuple(target.shape) != (scores[0],) + tuple(scores[2:]):
        return f"{config.op}: target {list(target.shape)} for input {list(scores)} (the spec: (N, d1, ..., dk))"
    if weight is not None and tuple(weight.shape) != (scores[1],):
        return f"{config.op}: weight {list(weight.shape)} for C = {scores[1]} (the spec: a weight of size C)"
    return ""


#: Recurrent operators -> gates per direction (the spec's W: [num_directions, gates * hidden_size,
#: input_size], R: [num_directions, gates * hidden_size, hidden_size], B: [num_directions,
#: 2 * gates * hidden_size]).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: Operators whose integer ``indices`` input (index 1) points along ``axis`` of ``data``:
#: "All index values are expected to be within bounds [-s, s-1] along axis of size s. It is an
#: error if any of the index values are out of bounds."
INDEXED = frozenset({"GatherElements", "ScatterElements", "Gather"})


def _shape_rules(config: Config) -> str:
    op, ins = config.op, config.inputs
    if op in GATES and len(ins) >= 3 and ins[1] is not None and ins[2] is not None:
        hidden = config.attrs.get("hidden_size")
        w, r = ins[1].shape, ins[2].shape
        b = ins[3].shape if len(ins) > 3 and ins[3] is not None else None
        g = GATES[op]
        if hidden is None or len(w) != 3 or len(r) != 3:
            return ""
        want_w, want_r = (w[0], g * hidden, ins[0].shape[-1]), (w[0], g * hidden, hidden)
        if tuple(w) != want_w or tuple(r) != want_r or (b is not None and tuple(b) != (w[0], 2 * g * hidden)):
            return (f"{op}: W {list(w)}, R {list(r)}{'' if b is None else f', B {list(b)}'} for hidden_size={hidden} "
                    f"(the spec: W {list(want_w)}, R {list(want_r)})")
    if op in INDEXED and len(ins) > 1 and ins[0] is not None and ins[1] is not None and ins[1].value:
        data = ins[0].shape
        axis = int(config.attrs.get("axis", 0))
        if data and -len(data) <= axis < len(data):
            size = data[axis]
            if any(not -size <= int(v) < size for v in ins[1].value):
                return f"{op}: an index outside [-{size}, {size - 1}] along axis {axis} (the spec: an error)"
    if op == "RotaryEmbedding" and len(ins) > 3 and ins[3] is not None and ins[1] is not None:
        x, cos, sin, pos = ins[0].shape, ins[1].shape, ins[2].shape, ins[3].shape
        seq = x[2] if len(x) == 4 else x[1] if len(x) == 3 else None
        if tuple(cos) != tuple(sin) or (seq is not None and tuple(pos) != (x[0], seq)):
            return (f"RotaryEmbedding: position_ids {list(pos)} for input {list(x)}, caches {list(cos)} and "
                    f"{list(sin)} (the spec: position_ids (batch_size, sequence_length), the caches alike)")
    return ""


def undefined(config: Config, feeds: dict[str, np.ndarray]) -> str:
    """Why the spec gives no answer for ``config`` on ``feeds``, or ``""``."""
    if (config.domain, config.op) == ("", "DynamicQuantizeLinear"):
        x = feeds[config.inputs[0].name]
        lo, hi = min(0.0, float(np.min(x))) if x.size else 0.0, max(0.0, float(np.max(x))) if x.size else 0.0
        if hi - lo == 0.0:
            return "DynamicQuantizeLinear of a zero range: y_scale = 0 and x / y_scale is 0 / 0"
    return ""


def stage_one_dtype(config: Config) -> str | None:
    """The numpy dtype of ``config``'s stage one where ``stash_type`` makes it coarser than
    the node's own float type, else ``None``."""
    if config.domain or config.op not in STASHED:
        return None
    stash = _STASH.get(int(config.attrs.get("stash_type", 1)))
    if stash is None or config.dtype not in _STASH.values():
        return None
    return stash if np.finfo(stash).eps > np.finfo(config.dtype).eps else None
