"""Shrinking: the smaller configurations to try next, simplest first.

A failing configuration is shrunk greedily, as property-based testing does: every round
tries :func:`candidates` of the current configuration (on the EP, all at once), and the
first one, in this order, that still fails the same way (the same outcome) becomes the
current one; the shrink ends when none does (a local minimum: no single step below it
still fails) or after :data:`MAX_ROUNDS`. The steps, in order:

1. an optional input omitted (``inputs dropped``);
2. an attribute back to its schema default (removed);
3. a dimension toward 1: to 1, to half, one less; alone and with every dimension of the
   same size (coupled dimensions: a Conv's ``C`` in ``X`` and ``W``);
4. a list attribute's entry toward 0 (pads) or 1 (strides, dilations, kernel), a
   ``param`` input's integer entry toward 0;
5. values toward 0: a simpler value kind (``zeros`` < ``ones`` < ``ints`` < ``ties`` < ...),
   then seed 0;
6. float16 or float64 toward float32.

A step that makes the configuration invalid (a kernel wider than the input) is skipped
when it is built, at no EP cost.
"""

from __future__ import annotations

from dataclasses import replace

from .config import VALUE_KINDS, Config
from .space import retype

#: Rounds a shrink may take (each is one batch on the EP).
MAX_ROUNDS = 40
#: List attributes shrunk toward 1 (the others toward 0).
_TOWARD_ONE = frozenset({"strides", "dilations", "kernel_shape"})


def _dims(cfg: Config) -> list[Config]:
    out = []
    slots = [(i, a, d) for i, x in enumerate(cfg.inputs) if x is not None and x.role == "data"
             for a, d in enumerate(x.shape) if d > 1]
    seen = set()
    for i, a, d in slots:
        for new in dict.fromkeys((1, d // 2, d - 1)):
            if new < 1 or new >= d:
                continue
            for group in (False, True):
                members = [(j, b) for j, b, e in slots if e == d] if group else [(i, a)]
                key = (tuple(members), new)
                if key in seen:
                    continue
                seen.add(key)
                shapes = {j: list(x.shape) for j, x in enumerate(cfg.inputs) if x is not None}
                for j, b in members:
                    shapes[j][b] = new
                ins = tuple(None if x is None else replace(x, shape=tuple(shapes[j])) for j, x in enumerate(cfg.inputs))
                out.append(replace(cfg, inputs=ins))
    return out


def _lists(cfg: Config) -> list[Config]:
    out = []
    for name, value in cfg.attributes:
        if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
            continue
        floor = 1 if name in _TOWARD_ONE else 0
        for k, v in enumerate(value):
            if v > floor:
                out.append(cfg.with_attr(name, value[:k] + (v - 1,) + value[k + 1:]))
    for i, x in enumerate(cfg.inputs):
        if x is None or x.role != "param" or not x.value or not all(isinstance(v, int) for v in x.value):
            continue
        for k, v in enumerate(x.value):
            if v != 0:
                step = v - 1 if v > 0 else v + 1
                out.append(cfg.with_input(i, replace(x, value=x.value[:k] + (step,) + x.value[k + 1:])))
    return out


def candidates(cfg: Config, optional: tuple[int, ...] = ()) -> list[Config]:
    """The one-step reductions of ``cfg``, in the order above; ``optional`` are the indices of
    inputs that may be omitted (the schema's optional ones)."""
    out: list[Config] = []
    for i in optional:
        if i < len(cfg.inputs) and cfg.inputs[i] is not None:
            out.append(cfg.with_input(i, None))
    out += [cfg.with_attr(name, None) for name, _ in cfg.attributes]
    out += _dims(cfg)
    out += _lists(cfg)
    rank = VALUE_KINDS.index(cfg.values) if cfg.values in VALUE_KINDS else len(VALUE_KINDS)
    out += [replace(cfg, values=k) for k in VALUE_KINDS[:rank]]
    if cfg.seed != 0:
        out.append(replace(cfg, seed=0))
    if cfg.dtype in ("float16", "float64"):
        out.append(retype(cfg, "float32"))
    if cfg.omit == "empty" and any(x is None for x in cfg.inputs):
        out.append(replace(cfg, omit="cut"))
    return out


def optional_inputs(cfg: Config) -> tuple[int, ...]:
    """Indices of ``cfg``'s inputs the schema marks optional (none without a schema)."""
    import onnx.defs

    from .config import input_param, schema_of

    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    if schema is None:
        return ()
    opt = onnx.defs.OpSchema.FormalParameterOption.Optional
    return tuple(i for i in range(len(cfg.inputs)) if input_param(schema, i).option == opt)
