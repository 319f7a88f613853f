"""Tensor types, shapes and small constant values as ``scan`` reads them from a model proto:
element type names, the structural-constant rule (:data:`SMALL_ANY`, :data:`SMALL_INT`),
tensor-valued attributes summarised (``tensor int64[1]``, never protobuf text), attribute
reading, and the name -> (type, shape) scopes a walk over graphs and subgraphs keeps
(:class:`_Types`). Strings from the proto may be ``bytes`` that are not UTF-8:
:func:`text` decodes them with backslash escapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

#: ONNX element type -> dtype name, for the float types features are probed in.
FLOAT_TYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
_OTHER_TYPES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string", 9: "bool",
                12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 17: "float8e4m3fn",
                18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
                23: "float4e2m1"}
#: Ops whose output type is never their input's (shape and index producers).
_INT64_OUT = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "TopK"}
#: Operators whose output is bool whatever their inputs (ONNX spec: comparison and test ops).
_BOOL_OUT = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf"}
#: Structural constants: every tensor of at most this many elements ...
SMALL_ANY = 16
#: ... and integer / bool tensors of at most this many.
SMALL_INT = 256


def text(value) -> str:
    """A proto string as ``str``: bytes that are not UTF-8 (protobuf hands those over as
    ``bytes``) decoded with backslash escapes."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return value


@dataclass(frozen=True)
class TensorValue:
    """A tensor-valued attribute (``Constant``'s ``value``), summarised.

    Attributes:
        dtype: element type name.
        dims: its shape.
        value: the values as a numpy array when small (:data:`SMALL_ANY` / :data:`SMALL_INT`)
            and stored in the file, else ``None``.
    """

    dtype: str
    dims: tuple[int, ...]
    value: object = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"tensor {self.dtype}[{', '.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class Const:
    """A node input that is an initializer or a ``Constant`` output.

    Attributes:
        dtype: element type name (``None`` when unknown).
        dims: shape (``None`` for a folded node's output of unknown shape).
        value: numpy array of a structural constant (see the module doc), else ``None``
            (a weight: never read).
        runtime: the value is computed at run time (from the shapes or small values the user
            bound), known here but not a constant ORT folds.
    """

    dtype: str | None
    dims: tuple[int, ...] | None
    value: object = field(default=None, compare=False)
    runtime: bool = False



def _dims(tensor_type) -> tuple | None:
    if not tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (text(d.dim_param) or None)
                 for d in tensor_type.shape.dim)


def type_name(elem: int) -> str | None:
    """The dtype name of an ONNX element type, ``None`` for an unknown one."""
    return FLOAT_TYPES.get(elem) or _OTHER_TYPES.get(elem)


def _small(dtype: str | None, dims) -> bool:
    n = 1
    for d in dims:
        n *= int(d)
    integer = dtype is not None and (dtype.startswith(("int", "uint")) or dtype == "bool")
    return n <= SMALL_ANY or (integer and n <= SMALL_INT)


def _value(tensor) -> object:
    """The values of a structural constant stored in the file, else ``None``."""
    if tensor.data_location == 1 or not _small(type_name(tensor.data_type), tensor.dims):
        return None
    try:
        from onnx import numpy_helper

        return numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - a malformed tensor: treated as a weight
        return None


class _Types:
    """Tensor name -> (dtype name, dims) over nested scopes (a subgraph sees its parents'),
    and the constants among them."""

    def __init__(self, parent: "_Types | None" = None):
        self.parent = parent
        self.known: dict[str, tuple[str | None, tuple | None]] = {}
        self.consts: dict[str, Const] = {}

    def add_graph(self, graph, values: bool = True) -> None:
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                old = self.known.get(text(vi.name), (None, None))
                dims = _dims(tt)
                self.known[text(vi.name)] = (type_name(tt.elem_type) or old[0], dims if dims is not None else old[1])
        if not values:
            return
        for init in graph.initializer:
            dtype, dims = type_name(init.data_type), tuple(init.dims)
            self.known[text(init.name)] = (dtype, dims)
            self.consts[text(init.name)] = Const(dtype, dims, _value(init))
        for init in getattr(graph, "sparse_initializer", []):
            dtype, dims = type_name(init.values.data_type), tuple(init.dims)
            self.known[text(init.values.name)] = (dtype, dims)
            self.consts[text(init.values.name)] = Const(dtype, dims)

    def get(self, name: str) -> tuple[str | None, tuple | None]:
        t = self.known.get(name)
        if t is not None:
            return t
        return self.parent.get(name) if self.parent is not None else (None, None)

    def const(self, name: str) -> Const | None:
        c = self.consts.get(name)
        if c is not None:
            return c
        return self.parent.const(name) if self.parent is not None else None

    def folded(self, name: str) -> bool:
        c = self.consts.get(name)
        if c is not None:
            return not c.runtime
        return self.parent.folded(name) if self.parent is not None else False

    def propagate(self, node, attributes: Mapping[str, object]) -> None:
        """Type the node's untyped outputs from its inputs (see the module doc)."""
        op = text(node.op_type)
        if op == "Constant" and not text(node.domain) and node.output:
            value = next(iter(attributes.values()), None)
            if isinstance(value, TensorValue):
                self.consts[text(node.output[0])] = Const(value.dtype, value.dims, value.value)
                self.known.setdefault(text(node.output[0]), (value.dtype, value.dims))
        out_type = None
        if op == "Cast":
            to = next((a.i for a in node.attribute if text(a.name) == "to"), 0)
            out_type = type_name(to)
        elif op in _INT64_OUT:
            out_type = "int64"
        elif op in _BOOL_OUT and not text(node.domain):
            out_type = "bool"
        elif op == "ConstantOfShape" and not text(node.domain):
            # The output takes the type of its `value` attribute, float32 when absent (ONNX
            # spec, ConstantOfShape), never the int64 of its shape input.
            value = next((a.t for a in node.attribute if text(a.name) == "value" and a.type == 4), None)
            out_type = (type_name(value.data_type) or "float32") if value is not None else "float32"
        elif op == "QuantizeLinear" and not text(node.domain):
            # y_zero_point's type, else output_dtype (opset 21), else uint8 (ONNX spec)
            zp = self.get(text(node.input[2]))[0] if len(node.input) > 2 and node.input[2] else None
            to = next((a.i for a in node.attribute if text(a.name) == "output_dtype"), 0)
            out_type = zp or (type_name(to) if to else "uint8")
        elif op == "DequantizeLinear" and not text(node.domain) and len(node.input) > 1:
            out_type = self.get(text(node.input[1]))[0]  # x_scale's type (ONNX spec)
        elif op in ("If", "Loop", "Scan"):
            # Outputs are the body's: If's then_branch declares them (Loop/Scan carry
            # state first, so their outputs are left to the graph's own value_info).
            branch = next((a.g for a in node.attribute if text(a.name) == "then_branch"), None)
            if branch is not None:
                for out, vi in zip(node.output, branch.output):
                    t = type_name(vi.type.tensor_type.elem_type) if vi.type.HasField("tensor_type") else None
                    if out and t and self.get(text(out))[0] is None:
                        self.known[text(out)] = (t, None)
            return
        else:
            out_type = next((t for n in node.input if n and (t := self.get(text(n))[0]) is not None), None)
        for i, out in enumerate(node.output):
            out = text(out)
            if out and self.get(out)[0] is None and out_type is not None:
                # TopK's second output is int64; its first keeps the input type.
                t = out_type if not (op == "TopK" and i == 0) else self.get(text(node.input[0]))[0]
                self.known[out] = (t, self.known.get(out, (None, None))[1])


#: AttributeProto.AttributeType -> how to read the value (onnx.proto): read directly, as
#: ``onnx.helper.get_attribute_value`` costs a quarter of a 10,000-node scan.
_READERS = {1: lambda a: a.f, 2: lambda a: a.i, 3: lambda a: text(a.s) if isinstance(a.s, str)
            else bytes(a.s).decode("utf-8", "backslashreplace"),
            6: lambda a: list(a.floats), 7: lambda a: list(a.ints),
            8: lambda a: [bytes(s).decode("utf-8", "backslashreplace") for s in a.strings]}
_SUBGRAPHS = (5, 10)  # GRAPH, GRAPHS


def _tensor_value(t) -> TensorValue:
    dtype = type_name(t.data_type) or f"type{t.data_type}"
    return TensorValue(dtype, tuple(int(d) for d in t.dims), _value(t))


def _attributes(node) -> dict[str, object]:
    out = {}
    for a in node.attribute:
        name = text(a.name)
        if a.type in _SUBGRAPHS:
            continue
        if a.ref_attr_name:  # a function body's attribute reference: its value is the caller's
            out[name] = f"<ref {text(a.ref_attr_name)}>"
            continue
        reader = _READERS.get(a.type)
        if reader is not None:
            out[name] = reader(a)
        elif a.type == 4:  # TENSOR: summarised, never printed as protobuf text
            out[name] = _tensor_value(a.t)
        elif a.type == 9:  # TENSORS
            out[name] = [str(_tensor_value(t)) for t in a.tensors]
        elif a.type == 11:  # SPARSE_TENSOR
            out[name] = f"sparse tensor [{', '.join(str(d) for d in a.sparse_tensor.dims)}]"
        elif a.type in (13, 14):  # TYPE_PROTO(S)
            out[name] = "type"
        else:
            out[name] = f"attribute type {a.type}"
    return out


