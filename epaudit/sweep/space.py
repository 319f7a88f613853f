"""Where configurations come from: the space around each catalog probe, within the schema.

A *seed* is a catalog feature whose subject is one node (:func:`base_config` reads it as a
:class:`~epaudit.sweep.config.Config`). A :class:`Space` holds the seeds of one operator and
the values each part of a configuration may take, and :meth:`Space.draw` makes one
configuration from a seeded generator:

* **shapes**: every dimension of a ``data`` input, alone or with every dimension of the
  seed that has the same size (so coupled dimensions, a Conv's ``C`` in ``X`` and ``W``,
  move together), through :data:`DIMS`: 1, small and odd sizes, powers of two and their
  neighbours, channel counts around vector and block widths (:data:`CHANNELS`), and 0
  (an empty tensor) now and then;
* **attributes**: every value the operator's catalog probes use, integers' neighbours,
  and the schema default (the attribute left out); a flag (:data:`FLAGS`) only 0 and 1;
* **dtype** of the first data input's type variable, among the float (or integer) types
  the schema's constraint allows;
* **values**: a value kind (:mod:`.values`); NaN and infinities only for operators that
  propagate them (:data:`PROPAGATES`);
* **optional inputs** the seed feeds may be omitted, written ``""`` or cut
  (:data:`~epaudit.sweep.config.OMIT_STYLES`).

Operator families whose parts constrain each other are drawn whole by :mod:`.families`
(pooling, Conv, Resize, Pad, the reductions, LayerNormalization): pads begin and end apart,
a last window that ends past the input under ``ceil_mode``, output sizes whose source
coordinate is an exact ``.5``, reflect pads as wide as the axis, empty ``axes``.
A configuration is made only if every input and the largest input stay within
:data:`~epaudit.sweep.config.MAX_ELEMENTS`; what onnx or the reference then refuse is
skipped by :mod:`.build` with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from ..contract.probes import Feature
from .config import CHANNELS, MAX_ELEMENTS, OMIT_STYLES, VALUE_KINDS, Config, Input, input_param, schema_of
from .families import family

#: Dimension sizes a shape is swept through.
DIMS = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33)
#: Schema input names whose values are parameters, not data (kept as the seed has them
#: unless a family draws them).
PARAMS = frozenset({
    "axes", "pads", "shape", "sizes", "scales", "roi", "starts", "ends", "steps", "repeats", "split", "K", "k",
    "depth", "values", "y_scale", "y_zero_point", "x_scale", "x_zero_point", "a_scale", "a_zero_point",
    "b_scale", "b_zero_point", "w_scale", "w_zero_point", "constant_value", "min", "max", "sequence_lens",
    "max_output_boxes_per_class", "iou_threshold", "score_threshold", "M", "cond", "start", "limit", "delta",
    "frame_step", "frame_length", "dft_length", "axis", "output_shape", "dilations", "strides", "kernel_shape",
    "block_size", "output_size", "image_shape", "batch_indices", "rois", "num_mel_bins", "sample_rate",
    "lower_edge_hertz", "upper_edge_hertz", "default_value", "initial_state", "trip_count",
})
#: Operators that propagate NaN and infinities elementwise (IEEE): ``special`` values are
#: drawn only for them, where the reference's NaN is what the spec says.
PROPAGATES = frozenset({
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Mean", "Sum", "Abs", "Neg", "Ceil", "Floor", "Sqrt", "Identity",
    "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Concat", "Flatten", "Expand", "Tile", "Slice", "Gather",
})
#: Dtypes a configuration's type variable may take (schema permitting).
FLOATS = ("float32", "float16", "float64")
INTS = ("int32", "int64", "int8", "uint8")
#: Integer attributes the spec defines as flags, 0 or 1 ("Must be one of 0, or 1", "If set to 1",
#: "Whether ..."): swept through 0, 1 and the default only. A value outside (HannWindow
#: ``periodic=-1``, TopK ``sorted=2``) has no meaning the spec gives, so an EP's answer to it is
#: no finding (the full CPU sweep read 3 such configurations as failures before this).
FLAGS = frozenset({
    "periodic", "sorted", "largest", "keepdims", "noop_with_empty_axes", "select_last_index", "ceil_mode",
    "count_include_pad", "training_mode", "transA", "transB", "exclusive", "reverse", "detect_negative",
    "detect_positive", "new_axis", "align_corners", "inverse", "onesided", "is_causal", "interleaved",
    "linear_before_reset", "input_forget", "layout", "fmod", "center_point_box", "storage_order", "saturate",
    "antialias", "exclude_outside", "do_rotary", "unidirectional", "past_present_share_buffer",
    "normalized",
})
#: Operators whose inputs get symbolic dimensions (ORT constant-folds them on static shapes).
SYMBOLIC = frozenset({"Shape", "Size"})

_ONNX_TO_NP = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(int32)": "int32", "tensor(int64)": "int64", "tensor(int8)": "int8",
               "tensor(uint8)": "uint8", "tensor(bool)": "bool", "tensor(int16)": "int16",
               "tensor(uint16)": "uint16", "tensor(uint32)": "uint32", "tensor(uint64)": "uint64"}


def _role(param_name: str | None, dtype: str, shape: tuple[int, ...]) -> str:
    if param_name is None:
        return "data"
    if param_name in PARAMS or "indices" in param_name or "index" in param_name.lower():
        return "param"
    if dtype.startswith(("int", "uint")) and shape == ():
        return "param"
    return "data"


def base_config(feature: Feature) -> Config | str:
    """The configuration of ``feature``'s subject (a one-node model), or why it is no seed."""
    import onnx
    from onnx import helper, numpy_helper

    from ..catalog.corpus.history import node_attributes

    try:
        probe = feature.build()
    except Exception as exc:  # noqa: BLE001 - a seed that cannot be built is no seed
        return f"the probe cannot be built: {type(exc).__name__}"
    model = onnx.load_from_string(probe.subject.model)
    if len(model.graph.node) != 1:
        return "not one node (bfloat16 casts or a function body around it)"
    node = model.graph.node[0]
    domain = node.domain if node.domain != "ai.onnx" else ""
    opset = next((o.version for o in model.opset_import if o.domain == domain
                  or (not domain and o.domain == "ai.onnx")), 0)
    schema = schema_of(node.op_type, domain, opset)
    declared = {vi.name: vi for vi in model.graph.input}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = probe.subject.feeds
    inputs: list[Input | None] = []
    for i, name in enumerate(node.input):
        if not name:
            inputs.append(None)
            continue
        if name in feeds:
            arr = np.asarray(feeds[name])
        elif name in inits:
            arr = inits[name]
        else:
            return f"node input {name!r} is neither fed nor constant"
        if arr.dtype.kind not in "biuf" or arr.dtype.name not in _ONNX_TO_NP.values():
            return f"input {name!r} of dtype {arr.dtype.name}: not swept"
        vi = declared.get(name)
        if vi is not None and vi.type.tensor_type.elem_type != helper.np_dtype_to_tensor_dtype(arr.dtype):
            return f"input {name!r} is fed as {arr.dtype.name} but declared otherwise"
        param = input_param(schema, i)
        role = _role(param.name if param is not None else None, arr.dtype.name, tuple(arr.shape))
        value = tuple(arr.ravel().tolist()) if role == "param" else None
        inputs.append(Input(name, arr.dtype.name, tuple(int(d) for d in arr.shape), role, value))
    attrs = {}
    for k, v in node_attributes(node).items():
        if isinstance(v, list):
            v = tuple(x.decode() if isinstance(x, bytes) else x for x in v)
        if not isinstance(v, (int, float, str, tuple)):
            return f"attribute {k!r} is a graph or tensor: not swept"
        attrs[k] = v
    declared = tuple((vi.name, np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).name)
                     for vi in model.graph.output if vi.type.tensor_type.elem_type) if schema is None else ()
    return Config(op=node.op_type, domain=domain, opset=opset, inputs=tuple(inputs), outputs=tuple(node.output),
                  attributes=tuple(sorted(attrs.items())), values="normal", seed=0, omit="cut",
                  opsets=tuple((o.domain, o.version) for o in model.opset_import),
                  symbolic=node.op_type in SYMBOLIC, declared=declared, origin=feature.id)


def allowed_dtypes(config: Config) -> tuple[str, ...]:
    """The dtypes the first data input's type variable may take (:data:`FLOATS` or
    :data:`INTS` as its kind), by the schema's constraint; ``(its dtype,)`` without a schema."""
    schema = schema_of(config.op, config.domain, config.opset)
    first = next((i for i, x in enumerate(config.inputs) if x is not None and x.role == "data"), None)
    if schema is None or first is None:
        return (config.dtype,)
    param = input_param(schema, first)
    allowed = next((set(c.allowed_type_strs) for c in schema.type_constraints if c.type_param_str == param.type_str),
                   None)
    if allowed is None:
        return (config.dtype,)
    pool = FLOATS if config.inputs[first].dtype in FLOATS else INTS
    names = [_ONNX_TO_NP.get(t) for t in sorted(allowed)]
    return tuple(d for d in pool if d in names) or (config.dtype,)


def retype(config: Config, dtype: str) -> Config:
    """``config`` with every input sharing the first data input's type variable as ``dtype``
    (params too: a QuantizeLinear's ``y_scale`` follows ``x``); ``config`` itself when a
    value it holds has no ``dtype`` counterpart (a constant 128 as int8, a NaN as an
    integer): that type does not apply to it."""
    schema = schema_of(config.op, config.domain, config.opset)
    first = next((i for i, x in enumerate(config.inputs) if x is not None and x.role == "data"), None)
    if first is None or config.inputs[first].dtype == dtype:
        return config
    var = input_param(schema, first).type_str if schema is not None else None
    ins = []
    for i, x in enumerate(config.inputs):
        p = input_param(schema, i) if schema is not None else None
        same = i == first or (var is not None and p is not None and p.type_str == var)
        if x is not None and same:
            try:
                value = None if x.value is None else tuple(float(np.asarray(v, dtype).item()) for v in x.value)
            except (OverflowError, ValueError):
                return config
            x = replace(x, dtype=dtype, value=value)
        ins.append(x)
    return replace(config, inputs=tuple(ins))


@dataclass
class Space:
    """The configurations around the seeds of one operator.

    Attributes:
        seeds: the base configurations, in the order of the catalog ids they come from.
        attr_values: attribute -> the values the operator's probes use (besides the default).
        skipped: seed feature id -> why it is no seed.
    """

    seeds: list[Config]
    attr_values: dict[str, list] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, features: Sequence[Feature]) -> Space:
        """The space of ``features`` (one operator's)."""
        seeds, skipped, values = [], {}, {}
        for f in features:
            base = base_config(f)
            if isinstance(base, str):
                skipped[f.id] = base
                continue
            seeds.append(base)
            for k, v in base.attributes:
                if v not in values.setdefault(k, []):
                    values[k].append(v)
        return cls(seeds, values, skipped)

    def draw(self, rng: np.random.Generator, index: int) -> Config:
        """Configuration ``index`` of a sweep: around seed ``index % len(seeds)``, every part
        kept as the seed has it or drawn anew with even odds (so changes combine)."""
        base = self.seeds[index % len(self.seeds)]
        cfg = replace(base, seed=int(rng.integers(0, 2**31 - 1)))
        fam = family(base.op, base.domain)
        if fam is not None:
            cfg = fam(cfg, rng)
        else:
            cfg = self._shapes(cfg, rng)
            cfg = self._attributes(cfg, rng)
        if rng.random() < 0.3:
            dtypes = allowed_dtypes(cfg)
            cfg = retype(cfg, dtypes[int(rng.integers(0, len(dtypes)))])
        cfg = replace(cfg, values=self._kind(cfg, rng))
        if fam is None:  # a family draws its optional inputs itself (a Resize needs scales or sizes)
            cfg = self._optional(cfg, rng)
        return cfg

    # -- parts ------------------------------------------------------------------------
    def _shapes(self, cfg: Config, rng: np.random.Generator) -> Config:
        slots = [(i, a) for i, x in enumerate(cfg.inputs) if x is not None and x.role == "data"
                 for a in range(len(x.shape))]
        if not slots or rng.random() < 0.3:
            return cfg
        shapes = {i: list(x.shape) for i, x in enumerate(cfg.inputs) if x is not None}
        for _ in range(int(rng.integers(1, 3))):
            i, a = slots[int(rng.integers(0, len(slots)))]
            old = shapes[i][a]
            new = 0 if rng.random() < 0.04 else int(DIMS[int(rng.integers(0, len(DIMS)))])
            group = [(j, b) for j, b in slots if shapes[j][b] == old] if rng.random() < 0.6 else [(i, a)]
            for j, b in group:
                shapes[j][b] = new
        ins = tuple(None if x is None else replace(x, shape=tuple(shapes[i])) for i, x in enumerate(cfg.inputs))
        if any(x is not None and x.size > MAX_ELEMENTS for x in ins):
            return cfg
        return replace(cfg, inputs=ins)

    def _attributes(self, cfg: Config, rng: np.random.Generator) -> Config:
        schema = schema_of(cfg.op, cfg.domain, cfg.opset)
        names = sorted(schema.attributes) if schema is not None else sorted(self.attr_values)
        for name in names:
            if rng.random() >= 0.3:
                continue
            pool = list(self.attr_values.get(name, []))
            cur = cfg.attrs.get(name)
            if name in FLAGS:
                pool = [v for v in pool if v in (0, 1)] + [0, 1]
            elif isinstance(cur, int) and not isinstance(cur, bool):
                pool += [cur - 1, cur + 1, 0, 1]
            pool.append(None)  # the schema default
            cfg = cfg.with_attr(name, pool[int(rng.integers(0, len(pool)))])
        return cfg

    def _kind(self, cfg: Config, rng: np.random.Generator) -> str:
        # NaN and infinities only where the operator propagates them; a float's extremes
        # only elementwise too (a float32 sum of two FLT_MAX overflows however right the
        # kernel: the float64 reference does not): integer extremes everywhere.
        floats = cfg.dtype.startswith("float")
        kinds = [k for k in VALUE_KINDS if cfg.op in PROPAGATES or not (k == "special" or (k == "extremes" and floats))]
        weights = np.array([0.5 if k in ("zeros", "ones") else 3.0 if k in ("normal", "ties") else 1.0
                            for k in kinds])
        return kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]

    def _optional(self, cfg: Config, rng: np.random.Generator) -> Config:
        schema = schema_of(cfg.op, cfg.domain, cfg.opset)
        if schema is None:
            return cfg
        import onnx.defs

        optional = [i for i, x in enumerate(cfg.inputs) if x is not None
                    and input_param(schema, i).option == onnx.defs.OpSchema.FormalParameterOption.Optional]
        if optional and rng.random() < 0.25:
            cfg = cfg.with_input(optional[int(rng.integers(0, len(optional)))], None)
        if any(x is None for x in cfg.inputs) and rng.random() < 0.5:
            cfg = replace(cfg, omit=OMIT_STYLES[1])
        return cfg
