"""A model node's own configuration, rebuilt as a one-node model with seeded inputs.

For any operator: the node's operator version (the model's opset for its domain), its
attributes exactly as written (serialized ``AttributeProto``), which optional inputs it
feeds and which outputs it asks for, each input's dtype and shape, and what each input
is in the model:

* **fed** (computed in the model or a graph input): a graph input of the probe, seeded;
* **weight** (an initializer larger than a structural constant): an initializer of the
  probe holding *seeded* values of the same dtype and shape (the model's weights are
  never read);
* **const** (a structural constant, :data:`epaudit.scan.model.SMALL_ANY`): an
  initializer holding the model's own value (an exponent, an axis list, a shape).

Shapes: the node's inferred shapes (:mod:`.model`), symbolic dimensions bound to the
user's ``--dim`` values, else :data:`BATCH_DIM` for a name holding ``batch`` and
:data:`DEFAULT_DIM` for any other; an input whose shape is unknown is completed from the
operator's rules (:func:`_complete`: ``Conv``'s ``X`` from ``W``, an elementwise input
from its sibling); a structural input computed at run time (``Reshape``'s ``shape``) is
derived from the node's output shape where the operator allows, else the node is not
probed. A configuration over :data:`MAX_BYTES` is "too large to probe", decided from the
shapes before anything is allocated.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .model import FLOAT_TYPES, Node

#: Value of a symbolic dimension whose name holds "batch" (and of an unnamed leading one).
BATCH_DIM = 1
#: Value of any other symbolic or unknown dimension.
DEFAULT_DIM = 4
#: Largest sum of a probe's input bytes (feeds and initializers), checked before allocating.
MAX_BYTES = 48 * 2**20
#: Largest dimension accepted at all (a hostile model declares 2**40).
MAX_DIM = 2**31 - 1

#: dtype name -> numpy dtype, for the types a node probe can hold.
NUMPY = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int8": np.int8, "uint8": np.uint8,
         "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "int64": np.int64, "uint32": np.uint32,
         "uint64": np.uint64, "bool": np.bool_}
#: dtype name -> ONNX element type.
ONNX_TYPE = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
             "float16": 10, "float64": 11, "uint32": 12, "uint64": 13}

#: Operators never probed on their own: control flow (their bodies' nodes are), constants,
#: and random draws (ORT's generator is not numpy's).
NOT_PROBED = frozenset({"If", "Loop", "Scan", "SequenceMap", "Constant", "Bernoulli", "Multinomial", "RandomNormal",
                        "RandomNormalLike", "RandomUniform", "RandomUniformLike"})
#: Inputs whose *value* decides the output's shape or layout: taken from the model's
#: constant, derived from the node's output shape (:func:`_derive`), or the node is not probed.
STRUCTURAL = {
    "Reshape": ("shape",), "Expand": ("shape",), "Tile": ("repeats",), "ConstantOfShape": ("input",),
    "Slice": ("starts", "ends", "axes", "steps"), "Unsqueeze": ("axes",), "Squeeze": ("axes",),
    "Range": ("start", "limit", "delta"), "Resize": ("roi", "scales", "sizes"), "Upsample": ("scales",),
    "Pad": ("pads", "axes"), "TopK": ("K",), "Split": ("split",), "OneHot": ("depth",), "CumSum": ("axis",),
    "Trilu": ("k",), "CenterCropPad": ("shape", "axes"), "Col2Im": ("image_shape", "block_shape"),
    "MaxUnpool": ("output_shape",), "DFT": ("dft_length", "axis"), "STFT": ("frame_step", "frame_length"),
    "NonMaxSuppression": ("max_output_boxes_per_class",), "BlackmanWindow": ("size",), "HannWindow": ("size",),
    "HammingWindow": ("size",), "MelWeightMatrix": ("num_mel_bins", "dft_length", "sample_rate"),
    "ReduceSum": ("axes",), "ReduceMean": ("axes",), "ReduceMax": ("axes",), "ReduceMin": ("axes",),
    "ReduceProd": ("axes",), "ReduceL1": ("axes",), "ReduceL2": ("axes",), "ReduceLogSum": ("axes",),
    "ReduceLogSumExp": ("axes",), "ReduceSumSquare": ("axes",), "Dropout": ("ratio", "training_mode"),
}
#: Index inputs whose constant values are configuration (the rest of the model's small
#: constants are weights: seeded).
INDEX_INPUTS = frozenset({("Gather", "indices"), ("GatherElements", "indices"), ("GatherND", "indices"),
                          ("OneHot", "indices"), ("OneHot", "values")})
#: Elementwise operators: an input of unknown shape takes its sibling's.
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
                         "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "PRelu", "BitShift",
                         "BitwiseAnd", "BitwiseOr", "BitwiseXor"})


#: Operators that compute nothing (metadata, views, control flow, constants): their nodes
#: are probed where they can be but do not count as compute nodes in the coverage.
NON_COMPUTE = frozenset({"Constant", "Identity", "If", "Loop", "Scan", "Shape", "Size", "Reshape", "Squeeze",
                         "Unsqueeze", "Flatten", "Optional", "OptionalGetElement", "OptionalHasElement",
                         "SequenceConstruct", "SequenceAt", "SequenceEmpty", "SequenceInsert", "SequenceLength",
                         "SequenceErase"})


def is_compute(node: Node) -> bool:
    """Whether ``node`` computes something an EP runs: not folded by ORT, not metadata, a
    view, control flow or a constant (:data:`NON_COMPUTE`, ai.onnx)."""
    return not (node.folded or node.call or node.dead) and not (node.domain == "" and node.op_type in NON_COMPUTE)


class Unprobed(Exception):
    """This node cannot be probed in its own configuration; ``str()`` says why."""


@dataclass(frozen=True)
class Slot:
    """One input of the configuration.

    Attributes:
        key: the schema input name (the probe's graph input / initializer name).
        dtype: element type name.
        dims: concrete shape.
        role: ``fed``, ``weight`` or ``const`` (module doc), or ``fedvalue`` (a graph input
            of the probe fed with the value the model computes at run time).
        value: the values of a ``const`` or ``fedvalue`` input.
        optional: the schema marks the input optional.
    """

    key: str
    dtype: str
    dims: tuple[int, ...]
    role: str
    value: object = None
    optional: bool = False

    def nbytes(self) -> int:
        """Bytes of the input, from its shape (nothing allocated)."""
        return math.prod(self.dims) * np.dtype(NUMPY[self.dtype]).itemsize


@dataclass(frozen=True)
class Config:
    """One distinct node configuration.

    Attributes:
        op_type, domain: the operator.
        opset: the probe model's version of ``domain`` (the model's).
        since: the operator version in force.
        dtype: the node's dtype (its first float input's, else its first input's).
        slots: inputs by position, ``None`` where the node leaves one out.
        attrs: serialized ``AttributeProto`` of the node, as written.
        attributes: the same as python values (for words and contrib references).
        outputs: ``(name, dtype)`` by position of the outputs compared, ``None`` for one the
            node leaves out or that cannot be compared (a string, a sequence).
        out_dims: output name -> known concrete shape, for the bound on their size.
        opsets: every domain the probe model imports (the model's), for function bodies.
    """

    op_type: str
    domain: str
    opset: int
    since: int | None
    dtype: str
    slots: tuple[Slot | None, ...]
    attrs: tuple[bytes, ...]
    attributes: Mapping[str, object]
    outputs: tuple[tuple[str, str] | None, ...]
    out_dims: Mapping[str, tuple[int, ...]]
    opsets: tuple[tuple[str, int], ...]

    @property
    def key(self) -> str:
        """A stable digest of everything that makes the configuration what it is."""
        h = hashlib.sha256()
        h.update(repr((self.op_type, self.domain, self.opset, self.dtype, self.opsets)).encode())
        for s in self.slots:
            h.update(repr(None if s is None else (s.key, s.dtype, s.dims, s.role)).encode())
            if s is not None and s.role in ("const", "fedvalue"):
                h.update(np.asarray(s.value).tobytes())
        for a in sorted(self.attrs):
            h.update(a)
        h.update(repr(self.outputs).encode())
        return h.hexdigest()[:10]

    def words(self) -> str:
        """The configuration in words: ``Conv-11 float32 X[1,129,4] W[128,129,3] ... pads=[1, 1]``."""
        from .match import short

        ins = []
        for s in self.slots:
            if s is None:
                continue
            dims = ",".join(str(d) for d in s.dims)
            mark = "=" + short(np.asarray(s.value).tolist()) if s.role in ("const", "fedvalue") else ""
            ins.append(f"{s.key}[{dims}]{mark}")
        attrs = [f"{k}={short(v)}" for k, v in sorted(self.attributes.items())]
        name = f"{self.domain + '.' if self.domain else ''}{self.op_type}-{self.since or self.opset}"
        return " ".join([name, self.dtype] + ins + attrs)

    def nbytes(self) -> int:
        """Input bytes of the configuration (nothing allocated)."""
        return sum(s.nbytes() for s in self.slots if s is not None)


def _bind(dim, dims: Mapping[str, int], leading: bool) -> int:
    if isinstance(dim, int) and dim > 0:
        return dim
    if isinstance(dim, int) and dim == 0:
        return 0
    if isinstance(dim, str):
        if dim in dims:
            return int(dims[dim])
        return BATCH_DIM if "batch" in dim.lower() else DEFAULT_DIM
    return BATCH_DIM if leading else DEFAULT_DIM


def _concrete(shape, dims: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(_bind(d, dims, i == 0 and len(shape) > 2) for i, d in enumerate(shape))


def _complete(node: Node, key: str, shapes: dict) -> tuple | None:
    """The shape of input ``key`` when the model does not give it, from the operator's
    rules, or ``None``."""
    op = node.op_type
    w = shapes.get("W") if "W" in shapes else shapes.get("w")
    if op in ("Conv", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv") and key in ("X", "x") and w:
        group = int(node.attributes.get("group", 1) or 1)
        return (None, w[1] * group) + (None,) * (len(w) - 2)
    if op == "ConvTranspose" and key == "X" and w:
        return (None, w[0]) + (None,) * (len(w) - 2)
    if op in ELEMENTWISE or op in ("LayerNormalization", "SkipLayerNormalization", "BatchNormalization"):
        known = [s for k, s in shapes.items() if s is not None and len(s) >= 1 and k != key]
        if known and op in ELEMENTWISE:
            return max(known, key=len)
    if op in ("MatMul", "MatMulInteger", "Gemm") and key in ("A", "a") and ("B" in shapes or "b" in shapes):
        b = shapes.get("B") or shapes.get("b")
        return (None, b[0]) if len(b) == 2 else None
    out = next(iter(node.output_shapes.values()), None)
    if out is not None and len(node.inputs) == 1:  # unary: the output's shape (Relu, Sigmoid, Cast, ...)
        if op not in STRUCTURAL and op not in ("Flatten", "Transpose", "ArgMax", "ArgMin", "Shape", "Size",
                                                "GlobalAveragePool", "GlobalMaxPool", "SpaceToDepth", "DepthToSpace"):
            return out
    return None


def _derive(node: Node, key: str, slots: dict) -> np.ndarray | None:
    """The value of structural input ``key`` computed at run time, from the node's output
    shape, or ``None``."""
    op = node.op_type
    out = next((node.output_shapes[o] for o in node.outputs if o and o in node.output_shapes), None)
    if out is None or any(not (isinstance(d, int) and d > 0) for d in out):
        return None
    if (op, key) in (("Reshape", "shape"), ("Expand", "shape"), ("ConstantOfShape", "input")):
        return np.array(out, dtype=np.int64)
    data = next((s for s in slots.values() if s is not None and s.role != "const" and s.key != key), None)
    if op == "Tile" and key == "repeats" and data is not None and len(data.dims) == len(out) \
            and all(d and o % d == 0 for d, o in zip(data.dims, out)):
        return np.array([o // d for d, o in zip(data.dims, out)], dtype=np.int64)
    if op == "Resize" and key == "sizes":
        return np.array(out, dtype=np.int64)
    return None


def _spatial(node: Node, key: str, shape: tuple, concrete: tuple[int, ...]) -> tuple[int, ...]:
    """Unknown spatial dims of a convolution or pooling input made large enough for its
    kernel (``(k - 1) * dilation + 1`` less the padding, at least :data:`DEFAULT_DIM`)."""
    if node.op_type not in ("Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool", "AveragePool",
                            "LpPool", "FusedConv") or key not in ("X", "x") or len(shape) < 3:
        return concrete
    a = node.attributes
    kernel = list(a.get("kernel_shape") or [])
    w = node.consts.get("W") or node.consts.get("w")
    if not kernel and w is not None:
        kernel = list(w.dims[2:])
    if len(kernel) != len(shape) - 2:
        return concrete
    dil = list(a.get("dilations") or [1] * len(kernel))
    pads = list(a.get("pads") or [0] * (2 * len(kernel)))
    out = list(concrete)
    for i, k in enumerate(kernel):
        if not (isinstance(shape[i + 2], int) and shape[i + 2] > 0):
            need = (k - 1) * dil[i] + 1 - pads[i] - pads[i + len(kernel)]
            out[i + 2] = max(DEFAULT_DIM, need)
    return tuple(out)


def _align_recurrent(node: Node, slots: dict, raw: Mapping[str, tuple | None]) -> None:
    """LSTM / GRU / RNN: ``X`` is (seq, batch, input) (``layout`` 0) and the initial states
    (directions, batch, hidden): a batch dim the model leaves unknown takes the states'."""
    if node.op_type not in ("LSTM", "GRU", "RNN") or "X" not in slots or int(node.attributes.get("layout", 0)):
        return
    x = slots["X"]
    state = next((slots[k] for k in ("initial_h", "initial_c") if k in slots), None)
    known = raw.get("X")
    if state is not None and known is not None and len(x.dims) == 3 and not isinstance(known[1], int):
        slots["X"] = Slot(x.key, x.dtype, (x.dims[0], state.dims[1], x.dims[2]), x.role, x.value, x.optional)


def _defaulted(shape) -> set[int]:
    return {i for i, d in enumerate(shape) if not (isinstance(d, int) and d >= 0)}


def _align_defaults(node: Node, slots: dict, pre: Mapping[str, tuple]) -> None:
    """Dims this module chose (unknown or symbolic in the model) take the value a sibling
    input fixes where the operator ties them: the broadcast dims of an elementwise operator
    (aligned from the right), and the contracted dim of a MatMul (A's last, B's first)."""
    def set_dim(key: str, i: int, value: int) -> None:
        s = slots[key]
        d = list(s.dims)
        d[i] = value
        slots[key] = Slot(s.key, s.dtype, tuple(d), s.role, s.value, s.optional)

    fed = [k for k in slots if k in pre and slots[k].role in ("fed", "weight")]
    if node.op_type in ELEMENTWISE and len(fed) >= 2:
        rank = max(len(slots[k].dims) for k in fed)
        for k in fed:
            off = rank - len(slots[k].dims)
            for i in _defaulted(pre[k]):
                for other in fed:
                    if other == k:
                        continue
                    j = i + off - (rank - len(slots[other].dims))
                    if 0 <= j < len(slots[other].dims) and j not in _defaulted(pre[other]):
                        set_dim(k, i, slots[other].dims[j])
                        break
    elif node.op_type in ("MatMul", "MatMulInteger", "QLinearMatMul") and len(fed) >= 2:
        a, b = ("A", "B") if "A" in slots else ("a", "b")
        if a in slots and b in slots and len(slots[a].dims) >= 1 and len(slots[b].dims) >= 2:
            ka, kb = len(slots[a].dims) - 1, len(slots[b].dims) - 2
            if ka in _defaulted(pre.get(a, ())) and kb not in _defaulted(pre.get(b, ())):
                set_dim(a, ka, slots[b].dims[kb])
            elif kb in _defaulted(pre.get(b, ())) and ka not in _defaulted(pre.get(a, ())):
                set_dim(b, kb, slots[a].dims[ka])


def configure(node: Node, dims: Mapping[str, int], opsets: Mapping[str, int]) -> Config:
    """The node's configuration (module doc).

    Raises:
        Unprobed: a control-flow, constant or random operator, an input whose type or
            shape is unknown, a structural input computed at run time that cannot be
            derived, a string or bfloat16 input, or a configuration over :data:`MAX_BYTES`.
    """
    if node.op_type in NOT_PROBED:
        raise Unprobed(f"{node.op_type} is not probed on its own")
    if node.folded:
        raise Unprobed("every input is a constant: ORT folds the node before an EP sees it")
    if node.dead:
        raise Unprobed("in an If branch the given inputs do not take")
    if node.call:
        raise Unprobed(f"calls the model-local function {node.operator}: its body's nodes are probed")
    if node.opset is None:
        raise Unprobed(f"the model does not import domain {node.domain!r}")
    sch = node.schema
    optional = sch.optional if sch is not None else frozenset()
    structural = STRUCTURAL.get(node.op_type, ()) if not node.domain else ()
    raw = {k: node.shapes.get(k) for k in node.inputs}
    for k, c in node.consts.items():
        if c.dims is not None:
            raw[k] = c.dims
    slots: dict[str, Slot] = {}
    pre: dict[str, tuple] = {}
    for key, tensor in node.inputs.items():
        dtype = node.input_types.get(key) or (node.consts[key].dtype if key in node.consts else None)
        if dtype is None:
            raise Unprobed(f"type of input {key} unknown")
        if dtype not in NUMPY:
            raise Unprobed(f"input {key} is {dtype}: no node probe in that type")
        shape = raw.get(key)
        if shape is None:
            shape = _complete(node, key, {k: v for k, v in raw.items() if v is not None})
        if shape is None:
            raise Unprobed(f"shape of input {key} unknown (give the model's input shapes or --dim)")
        pre[key] = tuple(shape)
        concrete = _spatial(node, key, shape, _concrete(shape, dims))
        if any(d > MAX_DIM for d in concrete):
            raise Unprobed(f"input {key} declares a dimension over 2^31")
        c = node.consts.get(key)
        configures = key in structural or (node.op_type, key) in INDEX_INPUTS or (
            math.prod(concrete) <= 1 and not (c is not None and c.runtime))
        if c is not None and c.runtime and not configures:
            c = None  # computed at run time: a fed input of the probe
        if c is not None and c.value is not None and configures:
            value = np.asarray(c.value)
            vtype = {np.dtype(v): k for k, v in NUMPY.items()}.get(value.dtype, dtype)
            role = "runtime" if c.runtime else "const"
            slots[key] = Slot(key, vtype, tuple(value.shape), role, value, key in optional)
        elif key in structural:
            slots[key] = Slot(key, dtype, concrete, "derive", None, key in optional)
        else:
            slots[key] = Slot(key, dtype, concrete, "weight" if c is not None else "fed", None, key in optional)
    _align_recurrent(node, slots, pre)
    _align_defaults(node, slots, pre)
    for key, s in list(slots.items()):
        if s.role == "derive":
            value = _derive(node, key, slots)
            if value is None:
                raise Unprobed(f"input {key} is computed at run time and its value decides the output: "
                               "not derivable from the model")
            slots[key] = Slot(key, s.dtype, tuple(value.shape), "const", value.astype(NUMPY[s.dtype]), s.optional)
    if not any(s.role in ("fed", "fedvalue") for s in slots.values()):
        # A node ORT does not fold although its inputs are constants (DequantizeLinear of a
        # QDQ weight): its first input is fed, so the probe's node is not folded either; a
        # structural input computed at run time (a Range's limit) is fed with its value.
        first = next((s for s in slots.values() if s.role == "weight"), None)
        runtime = next((s for s in slots.values() if s.role == "runtime"), None)
        if first is not None:
            slots[first.key] = Slot(first.key, first.dtype, first.dims, "fed", None, first.optional)
        elif runtime is not None:
            slots[runtime.key] = Slot(runtime.key, runtime.dtype, runtime.dims, "fedvalue", runtime.value,
                                      runtime.optional)
    for k, s in list(slots.items()):
        if s.role == "runtime":
            slots[k] = Slot(s.key, s.dtype, s.dims, "const", s.value, s.optional)
    total = sum(s.nbytes() for s in slots.values())
    if total > MAX_BYTES:
        raise Unprobed(f"too large to probe: {total / 2**20:.0f} MiB of inputs (bound {MAX_BYTES // 2**20} MiB)")
    out_names = sch.outputs if sch is not None and sch.outputs else ()
    outputs: list[tuple[str, str] | None] = []
    out_dims = {}
    for i, o in enumerate(node.outputs):
        name = out_names[i] if i < len(out_names) else (f"{out_names[-1]}{i}" if out_names else f"output{i}")
        t = node.output_types.get(o) if o else None
        if not o or (t is not None and t not in NUMPY):
            outputs.append(None)
            continue
        if name in slots:
            name = f"{name}_out"
        outputs.append((name, t or ""))
        shape = node.output_shapes.get(o)
        if shape is not None and all(isinstance(d, int) and d > 0 for d in shape):
            out_dims[name] = tuple(shape)
            if math.prod(shape) * 8 > MAX_BYTES:
                raise Unprobed(f"too large to probe: output {name} has {math.prod(shape)} elements")
    if not any(outputs):
        raise Unprobed("no output that can be compared (strings, sequences or maps only)")
    by_pos = tuple(slots.get(k) if k else None for k in node.input_list)
    dtype = node.dtype if node.dtype in NUMPY else next(iter(s.dtype for s in slots.values()), "float32")
    return Config(node.op_type, node.domain, node.opset, node.since, dtype, by_pos, tuple(node.attr_protos),
                  dict(node.attributes), tuple(outputs), out_dims, tuple(sorted(opsets.items())))


def is_float(dtype: str) -> bool:
    """Whether ``dtype`` names a float type."""
    return dtype in FLOAT_TYPES.values()
