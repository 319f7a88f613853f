"""Operator families whose parts constrain each other, drawn whole within the schema.

Each function takes a seed's configuration and a generator and returns a configuration of
the same operator, every part drawn anew with the dependencies kept (a window no larger
than the padded input, ``W``'s channels ``C / group``, ``pads`` of length twice the spatial
rank, a Resize's output size on the spatial axes only):

* **pooling** (AveragePool, MaxPool, LpPool): channels :data:`~.config.CHANNELS`, spatial
  sizes 1 ... 12, kernel 1 ... 4, strides 1 ... 3, begin and end pads apart (0 ... kernel-1),
  ``ceil_mode`` (a last window that ends past the input), ``count_include_pad``,
  ``dilations``, ``auto_pad``, as the opset's schema has them;
* **Conv**: channels in and out, ``group`` (depthwise now and then), kernel, strides,
  dilations, asymmetric pads, with and without bias;
* **Resize**: input and output spatial sizes (half the time a pair whose source
  coordinate is an exact ``.5`` under the drawn ``coordinate_transformation_mode``),
  ``mode``, ``nearest_mode``, ``coordinate_transformation_mode``, as sizes or scales as the
  seed gives them (scales dyadic: :data:`DYADIC`);
* **Pad**: per-axis begin/end pads up to the axis' extent and one past it (reflect pads
  as wide as the axis are outside what ORT >= 1.25 accepts: a refusal, never a finding;
  garbage from an older release is), every mode the opset has;
* **reductions**: ``axes`` (empty, a subset, negative), as attribute or input as the opset
  has it, omitted, ``keepdims``, ``noop_with_empty_axes``;
* **LayerNormalization**: rank, ``axis``, scale and bias of the normalized shape, bias
  omitted (``""`` or cut), ``epsilon``.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Callable

import numpy as np

from .config import CHANNELS, MAX_ELEMENTS, Config, Input, schema_of

Family = Callable[[Config, np.random.Generator], Config]

#: Resize scales: exactly representable, below and above 1.
DYADIC = (0.25, 0.5, 0.75, 0.875, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)


def _pick(rng: np.random.Generator, pool):
    return pool[int(rng.integers(0, len(pool)))]


def _data(cfg: Config, index: int, shape) -> Config:
    x = cfg.inputs[index]
    return cfg.with_input(index, replace(x, shape=tuple(int(d) for d in shape)))


def _set_attrs(cfg: Config, **attrs) -> Config:
    for k, v in attrs.items():
        cfg = cfg.with_attr(k, v)
    return cfg


def _too_big(cfg: Config) -> bool:
    return any(x is not None and x.size > MAX_ELEMENTS for x in cfg.inputs)


def _window(rng: np.random.Generator, spatial: int, schema, size_max: int = 12):
    sizes = [int(rng.integers(1, size_max + 1)) for _ in range(spatial)]
    kernel = [int(rng.integers(1, 5)) for _ in range(spatial)]
    strides = [int(_pick(rng, (1, 1, 2, 3))) for _ in range(spatial)]
    dil = [1] * spatial
    if "dilations" in schema.attributes and rng.random() < 0.25:
        dil = [int(_pick(rng, (1, 2))) for _ in range(spatial)]
    pads = [int(rng.integers(0, k)) for k in kernel] + [int(rng.integers(0, k)) for k in kernel]
    if rng.random() < 0.3:
        pads = [0] * (2 * spatial)
    # the window must fit the padded input
    for a in range(spatial):
        span = dil[a] * (kernel[a] - 1) + 1
        if sizes[a] + pads[a] + pads[a + spatial] < span:
            sizes[a] = span
    return sizes, kernel, strides, dil, pads


def pool(cfg: Config, rng: np.random.Generator) -> Config:
    """AveragePool, MaxPool, LpPool (see the module docstring)."""
    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    x = cfg.inputs[0]
    spatial = max(1, len(x.shape) - 2)
    sizes, kernel, strides, dil, pads = _window(rng, spatial, schema)
    cfg = _data(cfg, 0, [int(_pick(rng, (1, 1, 2))), int(_pick(rng, CHANNELS))] + sizes)
    auto = "NOTSET" if rng.random() < 0.8 or "auto_pad" not in schema.attributes else \
        _pick(rng, ("SAME_UPPER", "SAME_LOWER", "VALID"))
    attrs = {"kernel_shape": tuple(kernel), "strides": None if strides == [1] * spatial else tuple(strides),
             "pads": tuple(pads) if auto == "NOTSET" and any(pads) else None,
             "auto_pad": None if auto == "NOTSET" else auto,
             "dilations": tuple(dil) if "dilations" in schema.attributes and dil != [1] * spatial else None}
    for name in ("ceil_mode", "count_include_pad"):
        if name in schema.attributes:
            attrs[name] = int(_pick(rng, (0, 1, 1)))
    if "storage_order" in schema.attributes:
        attrs["storage_order"] = int(_pick(rng, (0, 0, 1)))
    if "p" in schema.attributes:
        attrs["p"] = int(_pick(rng, (1, 2, 3)))
    cfg = replace(_set_attrs(cfg, **attrs), outputs=cfg.outputs[:1])  # MaxPool's Indices: ties are ambiguous
    return cfg


def conv(cfg: Config, rng: np.random.Generator) -> Config:
    """Conv (see the module docstring)."""
    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    x = cfg.inputs[0]
    spatial = max(1, len(x.shape) - 2)
    sizes, kernel, strides, dil, pads = _window(rng, spatial, schema)
    kernel = [min(k, 3) if rng.random() < 0.5 else k for k in kernel]
    for a in range(spatial):
        span = dil[a] * (kernel[a] - 1) + 1
        sizes[a] = max(sizes[a], span - pads[a] - pads[a + spatial])
        pads[a] = min(pads[a], kernel[a] - 1)
        pads[a + spatial] = min(pads[a + spatial], kernel[a] - 1)
    c_in = int(_pick(rng, CHANNELS))
    group = 1
    if rng.random() < 0.15:
        group = c_in
    m = int(_pick(rng, (1, 2, 3, 4, 8, 9, 16)))
    if group > 1:
        m = group * int(_pick(rng, (1, 2)))
    cfg = _data(cfg, 0, [int(_pick(rng, (1, 1, 2))), c_in] + sizes)
    cfg = _data(cfg, 1, [m, c_in // group] + kernel)
    if len(cfg.inputs) > 2 or rng.random() < 0.5:
        bias = Input(cfg.inputs[2].name if len(cfg.inputs) > 2 and cfg.inputs[2] is not None else "B",
                     x.dtype, (m,))
        ins = list(cfg.inputs[:2]) + [bias if rng.random() < 0.6 else None]
        cfg = replace(cfg, inputs=tuple(ins))
    cfg = _set_attrs(cfg, kernel_shape=None, group=group if group > 1 else None,
                     strides=None if strides == [1] * spatial else tuple(strides),
                     dilations=None if dil == [1] * spatial else tuple(dil),
                     pads=tuple(pads) if any(pads) else None, auto_pad=None)
    return cfg


def _fragile(ctm: str, x: int, n_in: int, n_out: int, exact: Fraction) -> bool:
    """Whether float32 arithmetic misses the exact tie ``exact`` of output ``x``: the
    coordinate computed the two common ways (``(x + 0.5) / scale - 0.5`` and
    ``(x + 0.5) * (1 / scale) - 0.5``, ``scale = float32(n_out / n_in)``) is not ``exact``."""
    f = np.float32
    scale = f(n_out) / f(n_in)
    with np.errstate(all="ignore"):
        if ctm in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric"):
            got = [(f(x) + f(0.5)) / scale - f(0.5), (f(x) + f(0.5)) * (f(1) / scale) - f(0.5)]
        elif ctm == "asymmetric":
            got = [f(x) / scale, f(x) * (f(1) / scale)]
        elif ctm == "align_corners":
            got = [f(x) * (f(n_in - 1) / f(n_out - 1))]
        else:
            return False
    return any(float(g) != float(exact) for g in got)


def _tie_pair(rng: np.random.Generator, ctm: str) -> tuple[int, int]:
    """Input and output sizes whose some output coordinate maps to an exact ``.5`` source
    coordinate under ``ctm`` (exact rational arithmetic), preferring a pair where float32
    arithmetic misses it (:func:`_fragile`: the decision point a rounding mode exists for,
    and the one float kernels get wrong)."""
    first = None
    for _ in range(96):
        n_in, n_out = int(rng.integers(2, 25)), int(rng.integers(1, 25))
        if n_in == n_out:
            continue
        for x in range(n_out):
            src = _source(ctm, x, n_in, n_out)
            if src is not None and src.denominator == 2 and 0 < src < n_in - 1:
                if _fragile(ctm, x, n_in, n_out, src):
                    return n_in, n_out
                first = first or (n_in, n_out)
    return first or (int(rng.integers(2, 25)), int(rng.integers(1, 25)))


def _source(ctm: str, x: int, n_in: int, n_out: int) -> Fraction | None:
    """The source coordinate of output index ``x`` (exact), ONNX Resize's formulas with
    ``scale = n_out / n_in``."""
    scale = Fraction(n_out, n_in)
    if ctm == "half_pixel":
        return (x + Fraction(1, 2)) / scale - Fraction(1, 2)
    if ctm == "pytorch_half_pixel":
        return (x + Fraction(1, 2)) / scale - Fraction(1, 2) if n_out > 1 else Fraction(0)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "align_corners":
        return Fraction(x * (n_in - 1), n_out - 1) if n_out > 1 else Fraction(0)
    if ctm == "half_pixel_symmetric":
        adj = Fraction(n_out, n_out)  # output_width == output_width_int for integer sizes
        center = Fraction(n_in, 2) * (1 - adj)
        return center + (x + Fraction(1, 2)) / scale - Fraction(1, 2)
    return None


def resize(cfg: Config, rng: np.random.Generator) -> Config:
    """Resize (see the module docstring)."""
    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    x = cfg.inputs[0]
    rank = len(x.shape)
    modes = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]
    if "half_pixel_symmetric" in (schema.attributes["coordinate_transformation_mode"].description
                                  if "coordinate_transformation_mode" in schema.attributes else ""):
        modes.append("half_pixel_symmetric")
    mode = _pick(rng, ("nearest", "nearest", "nearest", "linear", "cubic"))
    ctm = _pick(rng, modes) if "coordinate_transformation_mode" in schema.attributes else "asymmetric"
    spatial = min(2, rank)
    shape_in, shape_out = [1] * rank, [1] * rank
    shape_in[:rank - spatial] = [1] * (rank - spatial)
    if rank > spatial:
        shape_in[1 if rank > 2 else 0] = int(_pick(rng, (1, 1, 2, 3)))
    shape_out[:rank - spatial] = shape_in[:rank - spatial]
    ties = mode == "nearest" and rng.random() < 0.6
    for a in range(rank - spatial, rank):
        if ties:
            shape_in[a], shape_out[a] = _tie_pair(rng, ctm)
        else:
            shape_in[a], shape_out[a] = int(rng.integers(1, 25)), int(rng.integers(1, 25))
    cfg = _data(cfg, 0, shape_in)
    names = [p.name for p in schema.inputs]
    ins = list(cfg.inputs) + [None] * (len(names) - len(cfg.inputs))
    by = {n: i for i, n in enumerate(names)}
    # sizes (an exact scale out / in, which float arithmetic rounds: where ties go wrong)
    # half the time wherever the opset has them, whatever the seed feeds
    use_sizes = "sizes" in by and (ins[by["sizes"]] is not None or rng.random() < 0.5)
    def empty_if_required(param: str, name: str):
        p = schema.inputs[by[param]]
        return Input(name, "float32", (0,), "param", ()) if p.option != p.option.Optional else None

    if "roi" in by:
        ins[by["roi"]] = empty_if_required("roi", ins[by["roi"]].name if ins[by["roi"]] is not None else "roi")
    if use_sizes:
        name = ins[by["sizes"]].name if ins[by["sizes"]] is not None else "sizes"
        ins[by["sizes"]] = Input(name, "int64", (rank,), "param", tuple(shape_out))
        if "scales" in by:
            ins[by["scales"]] = empty_if_required("scales", "scales")
    else:
        # Dyadic scales only: their float32 value is the number itself, so the output size
        # floor(in * scale) and a tie's source coordinate are exact in float arithmetic too
        # (a scale of 11/7 rounded to float32 makes 7 * scale land a hair below 11: the
        # spec's floor then says 10, every float implementation 11).
        si = by["scales"]
        name = ins[si].name if ins[si] is not None else "scales"
        # The input a multiple of the scale's denominator: in * scale is a whole number, so
        # the formulas that read the fractional output width (align_corners,
        # pytorch_half_pixel: onnx issue #2462) and the integer one agree.
        scales = [1.0] * rank
        for a in range(rank - spatial, rank):
            scales[a] = float(_pick(rng, DYADIC))
            den = Fraction(scales[a]).denominator
            shape_in[a] = den * int(rng.integers(1, max(2, 24 // den) + 1))
        cfg = _data(cfg, 0, shape_in)
        ins[0] = cfg.inputs[0]
        ins[si] = Input(name, "float32", (rank,), "param", tuple(scales))
        if "sizes" in by:
            ins[by["sizes"]] = None
    while ins and ins[-1] is None:
        ins.pop()
    cfg = replace(cfg, inputs=tuple(ins))
    attrs = {"mode": None if mode == "nearest" else mode}
    if "coordinate_transformation_mode" in schema.attributes:
        attrs["coordinate_transformation_mode"] = None if ctm == "half_pixel" else ctm
    if "nearest_mode" in schema.attributes:
        attrs["nearest_mode"] = _pick(rng, (None, "round_prefer_ceil", "floor", "ceil")) if mode == "nearest" else None
    if "cubic_coeff_a" in schema.attributes:
        attrs["cubic_coeff_a"] = _pick(rng, (None, -0.5)) if mode == "cubic" else None
    if "exclude_outside" in schema.attributes:
        attrs["exclude_outside"] = _pick(rng, (None, 1)) if mode == "cubic" else None
    for k in ("antialias", "keep_aspect_ratio_policy", "axes", "extrapolation_value"):
        attrs[k] = None
    return _set_attrs(cfg, **attrs)


def pad(cfg: Config, rng: np.random.Generator) -> Config:
    """Pad (see the module docstring)."""
    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    x = cfg.inputs[0]
    rank = max(1, len(x.shape))
    shape = [int(rng.integers(1, 7)) for _ in range(rank)]
    cfg = _data(cfg, 0, shape)
    pads = []
    for side in range(2):
        pads += [int(rng.integers(0, shape[a] + 2)) if rng.random() < 0.6 else 0 for a in range(rank)]
    modes = ["constant", "reflect", "edge"]
    if "wrap" in schema.attributes["mode"].description:
        modes.append("wrap")
    mode = _pick(rng, modes)
    if "pads" in schema.attributes:
        return _set_attrs(cfg, pads=tuple(pads), mode=None if mode == "constant" else mode)
    ins = list(cfg.inputs)
    ins[1] = Input(ins[1].name if ins[1] is not None else "pads", "int64", (2 * rank,), "param", tuple(pads))
    if len(ins) > 3:
        ins = ins[:3]  # axes: every axis
    return replace(cfg, inputs=tuple(ins)).with_attr("mode", None if mode == "constant" else mode)


def reduce(cfg: Config, rng: np.random.Generator) -> Config:
    """The Reduce* operators (see the module docstring)."""
    schema = schema_of(cfg.op, cfg.domain, cfg.opset)
    x = cfg.inputs[0]
    rank = int(_pick(rng, (1, 2, 3, 3, 4)))
    shape = [int(_pick(rng, (1, 2, 3, 4, 5, 7, 8, 9, 16, 17))) for _ in range(rank)]
    if rng.random() < 0.1:
        shape[int(rng.integers(0, rank))] = 0
    cfg = replace(cfg, inputs=(replace(x, shape=tuple(shape)),) + cfg.inputs[1:])
    n = int(rng.integers(0, rank + 1))
    axes = sorted(int(a) for a in rng.choice(rank, size=n, replace=False)) if n else []
    axes = tuple(a - rank if rng.random() < 0.2 else a for a in axes)
    omit_axes = rng.random() < 0.2
    attrs = {"keepdims": int(_pick(rng, (0, 1, 1)))}
    if "noop_with_empty_axes" in schema.attributes:
        attrs["noop_with_empty_axes"] = int(_pick(rng, (0, 0, 1)))
    if "axes" in schema.attributes:
        attrs["axes"] = None if omit_axes or not axes else axes
        cfg = replace(cfg, inputs=cfg.inputs[:1])
    elif len(schema.inputs) > 1:
        if omit_axes:
            cfg = replace(cfg, inputs=(cfg.inputs[0], None), omit=_pick(rng, ("cut", "empty")))
        else:
            name = cfg.inputs[1].name if len(cfg.inputs) > 1 and cfg.inputs[1] is not None else "axes"
            cfg = replace(cfg, inputs=(cfg.inputs[0], Input(name, "int64", (len(axes),), "param", axes)))
    return _set_attrs(cfg, **attrs)


def layernorm(cfg: Config, rng: np.random.Generator) -> Config:
    """LayerNormalization (see the module docstring)."""
    x = cfg.inputs[0]
    rank = int(_pick(rng, (2, 3, 3, 4)))
    shape = [int(_pick(rng, (1, 2, 3, 4, 5, 8, 16, 17, 32))) for _ in range(rank)]
    axis = int(rng.integers(-rank, rank))
    norm = tuple(shape[axis:])
    ins = [replace(x, shape=tuple(shape)), replace(cfg.inputs[1], shape=norm)]
    bias = cfg.inputs[2] if len(cfg.inputs) > 2 and cfg.inputs[2] is not None else Input("B", x.dtype, norm)
    ins.append(replace(bias, shape=norm, dtype=x.dtype) if rng.random() < 0.7 else None)
    omit = _pick(rng, ("cut", "empty"))
    cfg = replace(cfg, inputs=tuple(ins), omit=omit)
    return _set_attrs(cfg, axis=None if axis == -1 else axis, epsilon=_pick(rng, (None, 1e-3)))


_FAMILIES: dict[str, Family] = {
    "AveragePool": pool, "MaxPool": pool, "LpPool": pool, "Conv": conv, "Resize": resize, "Pad": pad,
    "LayerNormalization": layernorm,
}
for _op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
            "ReduceProd", "ReduceSum", "ReduceSumSquare"):
    _FAMILIES[_op] = reduce


def family(op: str, domain: str = "") -> Family | None:
    """The family drawer of ``op`` of ``domain``, or ``None`` (the generic space decides).
    The families are ai.onnx's: a contrib operator of the same name (``com.microsoft.Pad``)
    has another schema and is drawn by the generic space."""
    return _FAMILIES.get(op) if domain in ("", "ai.onnx") else None
