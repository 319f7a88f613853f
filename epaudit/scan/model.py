"""Reading a model for ``scan``: every node (subgraphs and model-local functions included),
its operator version in force, inputs by schema name, attributes, dtypes, shapes and the
small constants that configure it.

Weights are never read: ``onnx.load(..., load_external_data=False)`` keeps external
tensors as references, so a model of many GiB costs the size of its ``.onnx`` file.
Types and shapes come from the graph's inputs, outputs, ``value_info`` and initializers
(whose ``data_type`` and ``dims`` are in the proto even when the data is external), then
from onnx shape inference with data propagation on the weightless proto, run with the
graph inputs' symbolic dimensions bound (``dims``: ``--dim batch=1``; unbound names keep
their symbol). What inference cannot type (contrib operators onnx has no schema for) is
carried forward from each node's first typed input (``Cast`` from its ``to``), the rule of
the type constraint ``T`` most operators share.

*Structural constants* (:data:`SMALL_ANY` elements or fewer of any type, or
:data:`SMALL_INT` integer elements: exponents, epsilons, axes, shapes, pads, scales) are
configuration, not weights: their values are read (from initializers stored in the file
and from ``Constant`` nodes) and a node probe uses them as they are. Every larger tensor
is a weight: only its type and shape are read.

Strings a model holds are not trusted: a name that is not UTF-8 is decoded with
backslash escapes (protobuf hands it over as ``bytes``), and nothing here prints them
(:mod:`.safe` escapes them for every report).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from .schemas import Schema, schema
from .tensors import (_SUBGRAPHS, FLOAT_TYPES, SMALL_ANY, SMALL_INT, Const, TensorValue, _attributes,  # noqa: F401
                      _dims, _small, _Types, text, type_name)

#: Operators ORT's constant folding leaves in place (kept for the QDQ fusions:
#: ``constant_folding.cc`` skips DequantizeLinear), and random draws.
_NOT_FOLDED = frozenset({"DequantizeLinear", "QuantizeLinear", "RandomNormal", "RandomUniform", "RandomNormalLike",
                         "RandomUniformLike", "Multinomial", "Bernoulli"})

#: Highest opset version a model may import; a larger one is a broken or hostile file
#: (ONNX is at 25; ``onnx.defs`` takes an int32).
MAX_OPSET = 1000


class ModelError(Exception):
    """A file that is not a readable ONNX model; ``str()`` is one line naming it."""


@dataclass(frozen=True)
class Node:
    """One node of a model, as features are matched against it and node probes built.

    Attributes:
        name: the node's name, or ``<op_type>#<index>`` when it has none.
        op_type: e.g. ``GroupQueryAttention``.
        domain: ``""`` for ai.onnx, else the domain (``com.microsoft``, ``ai.onnx.ml``).
        opset: the version of ``domain`` imported where the node lives, or ``None``.
        scope: where it lives: ``graph``, ``<node>/<attribute>`` for a subgraph (If, Loop,
            Scan bodies), ``function <domain>.<name>`` for a model-local function body.
        inputs: schema input name -> tensor name, for the inputs fed (not ``""``).
        attributes: attribute name -> value, as set on the node (graphs left out; tensors
            as :class:`TensorValue`).
        dtype: the node's dtype: its first float input's, else its first input's (integer
            and quantized operators keep their integer type), ``None`` when no input type
            is known.
        shapes: schema input name -> dims (int, or str for a symbolic dim; ``None``
            where unknown) for the inputs whose shape is known.
        input_types: schema input name -> dtype name, where known.
        schema: the operator schema at ``opset``, or ``None`` when unknown.
        outputs: the node's output names as written (``""`` for an omitted output).
        output_types: output name -> dtype name, where known.
        output_shapes: output name -> dims, where known.
        consts: schema input name -> :class:`Const` for inputs that are initializers or
            ``Constant`` outputs.
        attr_protos: the node's attributes (not graphs) as serialized ``AttributeProto``,
            for node probes that rebuild the node exactly.
        input_list: the node's inputs by position (schema name, or ``""`` for one left out).
        folded: every input is a constant, or the output of a folded node: ORT's constant
            folding computes it at session creation, before any EP runs a kernel
            (``DequantizeLinear`` excepted, which ORT keeps for its QDQ fusions).
        call: the node calls a model-local function (ORT inlines it: its body's nodes,
            read too, are what runs).
        dead: the node is in an ``If`` branch the given inputs never take (``--inputs``).
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
    output_types: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    output_shapes: Mapping[str, tuple] = field(default_factory=dict, compare=False, repr=False)
    consts: Mapping[str, Const] = field(default_factory=dict, compare=False, repr=False)
    attr_protos: tuple[bytes, ...] = field(default=(), compare=False, repr=False)
    input_list: tuple[str, ...] = field(default=(), compare=False, repr=False)
    folded: bool = field(default=False, compare=False)
    call: bool = field(default=False, compare=False)
    dead: bool = field(default=False, compare=False)

    @property
    def operator(self) -> str:
        """``domain.op_type`` with ``ai.onnx`` for the default domain."""
        return f"{self.domain or 'ai.onnx'}.{self.op_type}"

    @property
    def since(self) -> int | None:
        """The operator version in force: the ``since_version`` of the definition the
        node's opset resolves to (``Conv`` at opset 21 -> 11), ``None`` when unknown."""
        return self.schema.since_version if self.schema is not None else None


@dataclass(frozen=True)
class Model:
    """A read model.

    Attributes:
        path: the file as named on the command line.
        opsets: domain -> imported version (``""`` is ai.onnx).
        nodes: every node, main graph first, then subgraphs and functions.
        external: external-data files the initializers reference (not read).
        inferred: onnx shape inference ran and added types or shapes.
        inputs: graph input name -> (dtype, dims) of the main graph's inputs (initializers
            excluded).
        outputs: graph output name -> (dtype, dims).
        problems: one line per thing that keeps the model from loading (an external data
            file missing, short, or outside the model's folder), empty when none.
        ir_version: the model's IR version.
    """

    path: str
    opsets: Mapping[str, int]
    nodes: tuple[Node, ...]
    external: tuple[str, ...] = ()
    inferred: bool = False
    inputs: Mapping[str, tuple] = field(default_factory=dict)
    outputs: Mapping[str, tuple] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    ir_version: int = 0


def _node(proto, index: int, scope: str, opsets: Mapping[str, int], types: _Types) -> Node:
    op_type, raw_domain = text(proto.op_type), text(proto.domain)
    domain = "" if raw_domain == "ai.onnx" else raw_domain
    opset = opsets.get(domain)
    sch = schema(op_type, domain, opset)
    names = list(sch.inputs) if sch is not None else []
    inputs, shapes, input_types, consts, order = {}, {}, {}, {}, []
    for i, tensor in enumerate(proto.input):
        tensor = text(tensor)
        if i < len(names):
            key = names[i]
        elif sch is not None and sch.variadic and names:
            key = f"{names[-1]}{i - len(names) + 1}"
        else:
            key = f"input{i}"
        order.append(key if tensor else "")
        if not tensor:
            continue
        inputs[key] = tensor
        dtype, dims = types.get(tensor)
        if dims is not None:
            shapes[key] = dims
        if dtype is not None:
            input_types[key] = dtype
        c = types.const(tensor)
        if c is not None:
            consts[key] = c
    dtype = next((t for t in input_types.values() if t in FLOAT_TYPES.values()),
                 next(iter(input_types.values()), None))
    outputs = tuple(text(o) for o in proto.output)
    out_types, out_shapes = {}, {}
    for o in outputs:
        if o:
            t, d = types.get(o)
            if t is not None:
                out_types[o] = t
            if d is not None:
                out_shapes[o] = d
    attrs = _attributes(proto)
    raw = tuple(a.SerializeToString() for a in proto.attribute if a.type not in _SUBGRAPHS)
    return Node(name=text(proto.name) or f"{op_type}#{index}", op_type=op_type, domain=domain,
                opset=opset, scope=scope, inputs=inputs, attributes=attrs, dtype=dtype,
                shapes=shapes, input_types=input_types, schema=sch, outputs=outputs,
                output_types=out_types, output_shapes=out_shapes, consts=consts, attr_protos=raw,
                input_list=tuple(order))


def _walk(graph, scope: str, opsets: Mapping[str, int], types: _Types, counter: list[int],
          inferred: "Mapping[tuple, object] | None" = None, values: Mapping[str, object] | None = None,
          taken: Mapping[str, str] | None = None, dead: bool = False, runtime: set | None = None
          ) -> Iterator[Node]:
    """Nodes of ``graph`` in order, each followed by the nodes of its subgraphs.
    ``inferred`` maps ``id()`` of an original subgraph to its shape-inferred twin, whose
    ``value_info`` types the body."""
    for proto in graph.node:
        counter[0] += 1
        attrs_for_types = None
        if text(proto.op_type) == "Constant":
            attrs_for_types = _attributes(proto)
        node = _node(proto, counter[0], scope, opsets, types)
        if dead:
            node = replace(node, dead=True)
        ins = [text(i) for i in proto.input if i]
        outs = [text(o) for o in proto.output if o]
        if node.op_type not in _NOT_FOLDED and not any(a.type in _SUBGRAPHS for a in proto.attribute) and (
                (ins and all(types.folded(i) for i in ins))
                or (values is not None and outs and all(o in values and o not in (runtime or ()) for o in outs))):
            node = replace(node, folded=True)
            for o in outs:
                if o not in types.consts:
                    t, d = types.get(o)
                    v = values.get(o) if values is not None else None
                    types.consts[o] = Const(t, d if d is not None else (None if v is None else tuple(v.shape)), v)
        elif values is not None and runtime:
            for o in outs:  # known for these inputs, computed at run time: a value, not a constant
                if o in values and o in runtime and o not in types.consts:
                    t, d = types.get(o)
                    v = values[o]
                    types.consts[o] = Const(t, d if d is not None else tuple(np.shape(v)), v, runtime=True)
        types.propagate(proto, attrs_for_types if attrs_for_types is not None else {})
        yield node
        for a in proto.attribute:
            subs = [a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []
            for sub in subs:
                inner = _Types(types)
                inner.add_graph(sub)
                twin = inferred.get((text(proto.name), text(a.name))) if inferred and a.type == 5 else None
                if twin is not None:
                    inner.add_graph(twin, values=False)
                off = dead or (taken is not None and text(proto.name) in taken and taken[text(proto.name)] != text(a.name))
                yield from _walk(sub, f"{node.name}/{text(a.name)}", opsets, inner, counter, inferred, values, taken,
                                 off, runtime)


def _keyed(graph) -> dict[tuple[str, str], object]:
    """(node name, attribute name) -> subgraph, over every nesting level; a key two
    subgraphs share is dropped (ambiguous)."""
    out: dict = {}
    dup = set()
    for n in graph.node:
        for a in n.attribute:
            if a.type == 5:
                key = (text(n.name), text(a.name))
                if key in out:
                    dup.add(key)
                out[key] = a.g
                for k, v in _keyed(a.g).items():
                    if k in out:
                        dup.add(k)
                    out[k] = v
    return {k: v for k, v in out.items() if k not in dup}


def _twins(original, inferred) -> dict[tuple[str, str], object]:
    """(node name, attribute name) of each subgraph of ``original`` -> its shape-inferred
    twin (matched by name: the inferred proto may have inlined some branches)."""
    mine, theirs = _keyed(original), _keyed(inferred)
    return {k: theirs[k] for k in mine if k in theirs}


def _subgraphs(graph) -> Iterator:
    for n in graph.node:
        for a in n.attribute:
            for sub in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                yield sub
                yield from _subgraphs(sub)


def _bind(proto, dims: Mapping[str, int], shapes: Mapping[str, tuple] | None = None) -> None:
    """Bind symbolic dims (in place): the named ones of ``dims``, and those the whole
    shapes of ``shapes`` (graph input name -> shape) give; every declaration that uses the
    same symbol (``value_info``, outputs, subgraphs) takes the value, so inference starts
    from concrete shapes instead of keeping the model's symbols."""
    symbols = {str(k): int(v) for k, v in dims.items()}
    for vi in proto.graph.input:
        fixed = (shapes or {}).get(text(vi.name))
        if fixed is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for d, v in zip(vi.type.tensor_type.shape.dim, fixed):
            if d.HasField("dim_param") and text(d.dim_param):
                symbols.setdefault(text(d.dim_param), int(v))
    for vi in proto.graph.input:
        fixed = (shapes or {}).get(text(vi.name))
        if fixed is not None and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for v in fixed:
                shape.dim.add().dim_value = int(v)
    if symbols:
        _substitute(proto.graph, symbols)


def _substitute(graph, symbols: Mapping[str, int]) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and text(d.dim_param) in symbols:
                    d.dim_value = symbols[text(d.dim_param)]
    for n in graph.node:
        for a in n.attribute:
            for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                _substitute(g, symbols)


def read(path: str | Path, dims: Mapping[str, int] | None = None,
         input_shapes: Mapping[str, tuple[int, ...]] | None = None,
         input_values: Mapping[str, object] | None = None) -> Model:
    """Read ``path`` without its external data.

    Args:
        path: the ``.onnx`` file.
        dims: symbolic dimension name -> value, bound before shape inference.
        input_shapes: graph input name -> concrete shape (the arrays of ``--inputs``),
            bound before shape inference.
        input_values: graph input name -> value, for the small ones of ``--inputs`` (a
            sample rate, a flag): folded like constants, so an ``If`` on them takes its
            branch, and the nodes of the branch those inputs never take are marked ``dead``.

    Raises:
        ModelError: missing, unreadable, not a protobuf ``ModelProto``, a proto with
            no graph, or an opset outside 1..:data:`MAX_OPSET` (one line naming the file).
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
        first = str(exc).splitlines()[0] if str(exc) else "cannot parse"
        raise ModelError(f"{name}: not a readable ONNX model ({type(exc).__name__}: {first[:200]})") from None
    if not proto.HasField("graph") or not proto.opset_import:
        raise ModelError(f"{name}: not an ONNX model (no graph or no opset_import)")
    opsets = {}
    for o in proto.opset_import:
        domain = text(o.domain)
        if not 1 <= o.version <= MAX_OPSET:
            raise ModelError(f"{name}: opset {o.version} of domain {domain or 'ai.onnx'!r} is outside "
                             f"1..{MAX_OPSET} (a broken or hostile file)")
        opsets["" if domain == "ai.onnx" else domain] = int(o.version)
    for fn in proto.functions:
        for o in fn.opset_import:
            if not 1 <= o.version <= MAX_OPSET:
                raise ModelError(f"{name}: function opset {o.version} is outside 1..{MAX_OPSET}")
    external = sorted({text(e.value) for t in _all_initializers(proto) if t.data_location == 1
                       for e in t.external_data if text(e.key) == "location"})
    from .external import problems

    trouble = problems(proto, p)
    _strip(proto)
    inferred = False
    shaped = None
    values: dict = {}
    taken: dict = {}
    tainted: set = set()
    try:
        from .fold import infer

        work = onnx.ModelProto()
        work.CopyFrom(proto)
        symbolic = any(d.HasField("dim_param") or not d.HasField("dim_value")
                       for vi in work.graph.input if vi.type.HasField("tensor_type")
                       for d in vi.type.tensor_type.shape.dim)
        runtime = symbolic and bool(dims or input_shapes)
        from .fold import declared_shapes

        declared = declared_shapes(work) if runtime else {}
        _bind(work, dict(dims or {}), dict(input_shapes or {}))
        for k, v in (input_values or {}).items():
            arr = np.asarray(v)
            if arr.size <= SMALL_ANY and arr.dtype.kind in "biuf":
                values[k] = arr
        shaped = infer(work, values, runtime_shapes=runtime, declared=declared)
        from .fold import TAINTED, TAKEN

        taken = dict(TAKEN)
        tainted = set(TAINTED)
        inferred = shaped is not None
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        shaped, work = None, None
    types = _Types()
    types.add_graph(proto.graph)
    if shaped is not None:  # a superset of the original's declarations, input dims bound
        types.add_graph(shaped.graph, values=False)
    bound = work if work is not None else proto
    twins = _twins(proto.graph, shaped.graph) if shaped is not None else {}
    counter = [0]
    nodes = list(_walk(proto.graph, "graph", opsets, types, counter, twins, values, taken, runtime=tainted))
    init_names = {text(i.name) for i in proto.graph.initializer}
    g_inputs = {text(vi.name): (type_name(vi.type.tensor_type.elem_type), _dims(vi.type.tensor_type))
                for vi in bound.graph.input if text(vi.name) not in init_names and vi.type.HasField("tensor_type")}
    g_outputs = {text(vi.name): (type_name(vi.type.tensor_type.elem_type), _dims(vi.type.tensor_type))
                 for vi in proto.graph.output if vi.type.HasField("tensor_type")}
    if proto.functions:
        local = {(text(f.domain), text(f.name)) for f in proto.functions}
        nodes = [replace(n, call=True) if (n.domain, n.op_type) in local else n for n in nodes]
        nodes += _functions(proto, _call_sites(proto.graph, types), counter)
    return Model(path=name, opsets=opsets, nodes=tuple(nodes), external=tuple(external), inferred=inferred,
                 inputs=g_inputs, outputs=g_outputs, problems=trouble, ir_version=int(proto.ir_version))


_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data",
                "uint64_data")


def _strip(proto) -> None:
    """Drop the data of every weight (what is not a structural constant) from ``proto``, in
    place: nothing after this reads weights, and shape inference copies the proto."""
    for t in _all_initializers(proto):
        if t.data_location != 1 and not _small(type_name(t.data_type), t.dims):
            for f in _DATA_FIELDS:
                t.ClearField(f)
            t.data_location = 1  # EXTERNAL without a location: its dims and type only


def _all_initializers(proto) -> Iterator:
    yield from proto.graph.initializer
    for sub in _subgraphs(proto.graph):
        yield from sub.initializer


def _call_sites(graph, types: _Types) -> dict[tuple[str, str], list[str | None]]:
    """(domain, op_type) -> the input dtypes of its first call in ``graph``."""
    out: dict[tuple[str, str], list[str | None]] = {}
    for node in graph.node:
        out.setdefault((text(node.domain), text(node.op_type)),
                       [types.get(text(n))[0] if n else None for n in node.input])
    return out


def _functions(proto, callers: Mapping[tuple[str, str], list], counter: list[int]) -> list[Node]:
    """Nodes of every model-local function, typed from its first call site's input types
    (a function body declares none of its own before IR 10)."""
    out: list[Node] = []
    for fn in proto.functions:
        fn_opsets = {("" if text(o.domain) == "ai.onnx" else text(o.domain)): o.version for o in fn.opset_import}
        types = _Types()
        for vi in getattr(fn, "value_info", []):
            if vi.type.HasField("tensor_type"):
                tt = vi.type.tensor_type
                types.known[text(vi.name)] = (type_name(tt.elem_type), _dims(tt))
        call = callers.get((text(fn.domain), text(fn.name)))
        if call is not None:
            for formal, actual in zip(fn.input, call):
                if actual is not None:
                    types.known.setdefault(text(formal), (actual, None))
        fake_graph = type("G", (), {"node": fn.node})
        out += list(_walk(fake_graph, f"function {text(fn.domain) or 'ai.onnx'}.{text(fn.name)}", fn_opsets, types,
                          counter))
    return out
