"""Reading a model for ``scan``: every node (subgraphs and model-local functions included),
its operator schema, inputs by schema name, attributes, float dtype and shape facts.

Weights are never read: ``onnx.load(..., load_external_data=False)`` keeps external
tensors as references, so a model of many GiB costs the size of its ``.onnx`` file.
Types come from the graph's inputs, outputs, ``value_info`` and initializers (whose
``data_type`` and ``dims`` are in the proto even when the data is external); where a
node's float input has none, onnx shape inference runs on the weightless proto, and
what it cannot type (contrib ops onnx has no schema for) is carried forward from each
node's first typed input (``Cast`` from its ``to``), the rule of the type constraint
``T`` most operators share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from .schemas import Schema, schema

#: ONNX element type -> dtype name, for the float types features are probed in.
FLOAT_TYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
_OTHER_TYPES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
                12: "uint32", 13: "uint64", 17: "float8e4m3fn", 21: "uint4", 22: "int4"}
#: Ops whose output type is never their input's (shape and index producers).
_INT64_OUT = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "TopK"}


class ModelError(Exception):
    """A file that is not a readable ONNX model; ``str()`` is one line naming it."""


@dataclass(frozen=True)
class Node:
    """One node of a model, as features are matched against it.

    Attributes:
        name: the node's name, or ``<op_type>#<index>`` when it has none.
        op_type: e.g. ``GroupQueryAttention``.
        domain: ``""`` for ai.onnx, else the domain (``com.microsoft``).
        opset: the version of ``domain`` imported where the node lives, or ``None``.
        scope: where it lives: ``graph``, ``<node>/<attribute>`` for a subgraph (If, Loop,
            Scan bodies), ``function <domain>.<name>`` for a model-local function body.
        inputs: schema input name -> tensor name, for the inputs fed (not ``""``).
        attributes: attribute name -> value, as set on the node (graphs left out).
        dtype: the node's float dtype (its first float input's; the first input's when
            none is float), or ``None`` when no input type is known.
        shapes: schema input name -> dims (int, or str for a symbolic dim; ``None``
            where unknown) for the inputs whose shape is known.
        input_types: schema input name -> dtype name, where known.
        schema: the operator schema at ``opset``, or ``None`` when unknown.
        outputs: the node's output names as written (``""`` for an omitted output).
    """

    name: str
    op_type: str
    domain: str
    opset: int | None
    scope: str
    inputs: Mapping[str, str]
    attributes: Mapping[str, object]
    dtype: str | None
    shapes: Mapping[str, tuple]
    input_types: Mapping[str, str]
    schema: Schema | None = field(default=None, compare=False, repr=False)
    outputs: tuple[str, ...] = ()

    @property
    def operator(self) -> str:
        """``domain.op_type`` with ``ai.onnx`` for the default domain."""
        return f"{self.domain or 'ai.onnx'}.{self.op_type}"


@dataclass(frozen=True)
class Model:
    """A read model.

    Attributes:
        path: the file as named on the command line.
        opsets: domain -> imported version (``""`` is ai.onnx).
        nodes: every node, main graph first, then subgraphs and functions.
        external: external-data files the initializers reference (not read).
        inferred: onnx shape inference ran (some float input had no declared type).
    """

    path: str
    opsets: Mapping[str, int]
    nodes: tuple[Node, ...]
    external: tuple[str, ...] = ()
    inferred: bool = False


def _dims(tensor_type) -> tuple | None:
    if not tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tensor_type.shape.dim)


def _type_name(elem: int) -> str | None:
    return FLOAT_TYPES.get(elem) or _OTHER_TYPES.get(elem)


class _Types:
    """Tensor name -> (dtype name, dims) over nested scopes (a subgraph sees its parents')."""

    def __init__(self, parent: "_Types | None" = None):
        self.parent = parent
        self.known: dict[str, tuple[str | None, tuple | None]] = {}

    def add_graph(self, graph) -> None:
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                self.known[vi.name] = (_type_name(tt.elem_type), _dims(tt))
        for init in graph.initializer:
            self.known[init.name] = (_type_name(init.data_type), tuple(init.dims))
        for init in getattr(graph, "sparse_initializer", []):
            self.known[init.values.name] = (_type_name(init.values.data_type), tuple(init.dims))

    def get(self, name: str) -> tuple[str | None, tuple | None]:
        t = self.known.get(name)
        if t is not None:
            return t
        return self.parent.get(name) if self.parent is not None else (None, None)

    def propagate(self, node) -> None:
        """Type the node's untyped outputs from its inputs (see the module doc)."""
        out_type = None
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            out_type = _type_name(to)
        elif node.op_type in _INT64_OUT:
            out_type = "int64"
        elif node.op_type in ("If", "Loop", "Scan"):
            # Outputs are the body's: If's then_branch declares them (Loop/Scan carry
            # state first, so their outputs are left to the graph's own value_info).
            branch = next((a.g for a in node.attribute if a.name == "then_branch"), None)
            if branch is not None:
                for out, vi in zip(node.output, branch.output):
                    t = _type_name(vi.type.tensor_type.elem_type) if vi.type.HasField("tensor_type") else None
                    if out and t and self.get(out)[0] is None:
                        self.known[out] = (t, None)
            return
        else:
            out_type = next((t for n in node.input if n and (t := self.get(n)[0]) is not None), None)
        for i, out in enumerate(node.output):
            if out and self.get(out)[0] is None and out_type is not None:
                # TopK's second output is int64; its first keeps the input type.
                t = out_type if not (node.op_type == "TopK" and i == 0) else self.get(node.input[0])[0]
                self.known[out] = (t, self.known.get(out, (None, None))[1])


#: AttributeProto.AttributeType -> how to read the value (onnx.proto): read directly, as
#: ``onnx.helper.get_attribute_value`` costs a quarter of a 10,000-node scan.
_READERS = {1: lambda a: a.f, 2: lambda a: a.i, 3: lambda a: a.s.decode("utf-8", "replace"),
            6: lambda a: list(a.floats), 7: lambda a: list(a.ints),
            8: lambda a: [s.decode("utf-8", "replace") for s in a.strings]}
_SUBGRAPHS = (5, 10)  # GRAPH, GRAPHS


def _attributes(node) -> dict[str, object]:
    out = {}
    for a in node.attribute:
        if a.type in _SUBGRAPHS:
            continue
        if a.ref_attr_name:  # a function body's attribute reference: its value is the caller's
            out[a.name] = f"<ref {a.ref_attr_name}>"
            continue
        reader = _READERS.get(a.type)
        if reader is not None:
            out[a.name] = reader(a)
        else:  # tensors, type protos, sparse tensors: rare, leave to onnx
            from onnx import helper

            out[a.name] = helper.get_attribute_value(a)
    return out


def _node(proto, index: int, scope: str, opsets: Mapping[str, int], types: _Types) -> Node:
    domain = "" if proto.domain == "ai.onnx" else proto.domain
    opset = opsets.get(domain)
    sch = schema(proto.op_type, domain, opset)
    names = list(sch.inputs) if sch is not None else []
    inputs, shapes, input_types = {}, {}, {}
    for i, tensor in enumerate(proto.input):
        if i < len(names):
            key = names[i]
        elif sch is not None and sch.variadic and names:
            key = f"{names[-1]}{i - len(names) + 1}"
        else:
            key = f"input{i}"
        if not tensor:
            continue
        inputs[key] = tensor
        dtype, dims = types.get(tensor)
        if dims is not None:
            shapes[key] = dims
        if dtype is not None:
            input_types[key] = dtype
    dtype = next((t for t in input_types.values() if t in FLOAT_TYPES.values()),
                 next(iter(input_types.values()), None))
    return Node(name=proto.name or f"{proto.op_type}#{index}", op_type=proto.op_type, domain=domain,
                opset=opset, scope=scope, inputs=inputs, attributes=_attributes(proto), dtype=dtype,
                shapes=shapes, input_types=input_types, schema=sch, outputs=tuple(proto.output))


def _walk(graph, scope: str, opsets: Mapping[str, int], types: _Types, counter: list[int],
          untyped: list[bool]) -> Iterator[Node]:
    """Nodes of ``graph`` in order, each followed by the nodes of its subgraphs.
    ``untyped[0]`` is set when a node has an input of unknown type, or an Attention node
    an unknown ``Q`` shape (its heads and head size come from it)."""
    for proto in graph.node:
        counter[0] += 1
        node = _node(proto, counter[0], scope, opsets, types)
        if len(node.input_types) < len(node.inputs) or (
                node.op_type == "Attention" and not node.domain and "Q" not in node.shapes):
            untyped[0] = True
        types.propagate(proto)
        yield node
        for a in proto.attribute:
            subs = [a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []
            for sub in subs:
                inner = _Types(types)
                inner.add_graph(sub)
                yield from _walk(sub, f"{proto.name or proto.op_type}/{a.name}", opsets, inner, counter, untyped)


def read(path: str | Path) -> Model:
    """Read ``path`` without its external data.

    Raises:
        ModelError: missing, unreadable, not a protobuf ``ModelProto``, or a proto with
            no graph (one line naming the file).
    """
    import onnx

    name = str(path)
    p = Path(path)
    if not p.exists():
        raise ModelError(f"{name}: no such file")
    if not p.is_file():
        raise ModelError(f"{name}: not a regular file")
    try:
        proto = onnx.load(name, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and friends
        raise ModelError(f"{name}: not a readable ONNX model ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else 'cannot parse'})") from None
    if not proto.HasField("graph") or not proto.opset_import:
        raise ModelError(f"{name}: not an ONNX model (no graph or no opset_import)")
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in proto.opset_import}
    types = _Types()
    types.add_graph(proto.graph)
    counter, untyped = [0], [False]
    nodes = list(_walk(proto.graph, "graph", opsets, types, counter, untyped))
    inferred = False
    if untyped[0]:
        # Some input has no declared type: onnx shape inference on the weightless proto,
        # then one more walk (most exported models declare enough to skip this).
        try:
            shaped = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False,
                                                       data_prop=False)
            types = _Types()
            types.add_graph(proto.graph)
            types.add_graph(shaped.graph)
            counter = [0]
            nodes = list(_walk(proto.graph, "graph", opsets, types, counter, [False]))
            inferred = True
        except Exception:  # noqa: BLE001 - inference is a help, not a requirement
            pass
    external = sorted({e.value for t in proto.graph.initializer if t.data_location == 1
                       for e in t.external_data if e.key == "location"})
    if proto.functions:
        nodes += _functions(proto, _call_sites(proto.graph, types), counter)
    return Model(path=name, opsets=opsets, nodes=tuple(nodes), external=tuple(external), inferred=inferred)


def _call_sites(graph, types: _Types) -> dict[tuple[str, str], list[str | None]]:
    """(domain, op_type) -> the input dtypes of its first call in ``graph``."""
    out: dict[tuple[str, str], list[str | None]] = {}
    for node in graph.node:
        out.setdefault((node.domain, node.op_type), [types.get(n)[0] if n else None for n in node.input])
    return out


def _functions(proto, callers: Mapping[tuple[str, str], list], counter: list[int]) -> list[Node]:
    """Nodes of every model-local function, typed from its first call site's input types
    (a function body declares none of its own before IR 10)."""
    out: list[Node] = []
    for fn in proto.functions:
        fn_opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in fn.opset_import}
        types = _Types()
        for vi in getattr(fn, "value_info", []):
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                types.known[vi.name] = (_type_name(tt.elem_type), _dims(tt))
        call = callers.get((fn.domain, fn.name))
        if call is not None:
            for formal, actual in zip(fn.input, call):
                if actual is not None:
                    types.known.setdefault(formal, (actual, None))
        fake_graph = type("G", (), {"node": fn.node})
        out += list(_walk(fake_graph, f"function {fn.domain or 'ai.onnx'}.{fn.name}", fn_opsets, types, counter,
                          [False]))
    return out
