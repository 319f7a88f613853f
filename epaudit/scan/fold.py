"""Constant folding and shape inference on the weightless proto, as ORT would see it.

Exporters compute shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``,
the padding of an STFT); onnx shape inference stops at the first value it cannot see, and
every node after it has unknown shapes. ORT folds such chains at session creation
(``constant_folding.cc``): so does this module, on the small tensors only, with
``onnx.reference`` on one node at a time:

1. infer shapes (graph inputs' symbolic dims bound: ``--dim``, ``--inputs``);
2. fold every node whose inputs are all known small values (:data:`FOLDABLE` operators;
   ``Shape`` and ``Size`` of an input whose inferred shape is static), keeping outputs of
   at most :data:`epaudit.scan.model.SMALL_INT` elements; the size an operator would
   allocate (``Range``, ``Expand``, ``ConstantOfShape``, ``Tile``) is checked from its
   inputs before it runs, so a hostile ``Range(0, 2**40)`` is never evaluated;
3. infer again with the folded values as initializers (their nodes removed).

The result: tensor name -> value of every folded tensor, and the shape-inferred proto.
Nothing here reads a weight (their data was dropped before, :func:`.model._strip`).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

#: Operators folded: cheap on small inputs, and what shape computations are made of.
FOLDABLE = frozenset({"Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice", "Reshape", "Add",
                      "Sub", "Mul", "Div", "Floor", "Ceil", "Equal", "Where", "Not", "Identity", "Transpose",
                      "Range", "ConstantOfShape", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "Max", "Min",
                      "Neg", "Abs", "Sqrt", "Pow", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                      "Expand", "Tile", "Mod", "Clip", "Sign", "Round", "Constant", "Flatten", "Split", "ArgMax",
                      "ArgMin", "NonZero"})
#: Largest folded tensor, elements.
MAX_ELEMENTS = 256


def _size_ok(op: str, values: list) -> bool:
    """Whether the output an operator would allocate from these inputs stays small."""
    try:
        if op == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in values[:3])
            return delta != 0 and math.ceil((limit - start) / delta) <= MAX_ELEMENTS
        if op in ("ConstantOfShape", "Expand"):
            shape = np.asarray(values[0 if op == "ConstantOfShape" else 1]).reshape(-1)
            return bool((shape >= 0).all()) and math.prod(int(x) for x in shape) <= MAX_ELEMENTS \
                and (op != "Expand" or np.asarray(values[0]).size <= MAX_ELEMENTS)
        if op == "Tile":
            reps = np.asarray(values[1]).reshape(-1)
            return bool((reps >= 0).all()) and np.asarray(values[0]).size * math.prod(int(r) for r in reps) \
                <= MAX_ELEMENTS
    except (ValueError, TypeError, OverflowError, IndexError):
        return False
    return all(np.asarray(v).size <= MAX_ELEMENTS for v in values if v is not None)


def _run(node, values: list, opset: int):
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{i}" if v is not None else "" for i, v in enumerate(values)]
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), None)
              for n, v in zip(names, values) if n]
    outs = [f"o{i}" for i in range(len(node.output))]
    n = helper.make_node(node.op_type, names, outs)
    n.attribute.extend(node.attribute)
    g = helper.make_graph([n], "fold", inputs, [helper.make_value_info(o, helper.TypeProto()) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    got = ReferenceEvaluator(m).run(None, {k: np.asarray(v) for k, v in zip(names, values) if k})
    return [np.asarray(x) for x in got]


def _static(shape) -> tuple[int, ...] | None:
    if shape is None or any(not (isinstance(d, int) and d >= 0) for d in shape):
        return None
    return tuple(shape)


def fold_graph(graph, known: dict[str, np.ndarray], shapes: Mapping[str, tuple], opset: int) -> list[int]:
    """Fold the nodes of ``graph`` in node order (module doc), adding every folded small
    tensor to ``known``; returns the indices of the nodes whose outputs are all known."""
    folded = []
    for index, node in enumerate(graph.node):
        if node.output and all(o in known for o in node.output if o):
            folded.append(index)  # folded in an earlier round
            continue
        if node.domain not in ("", "ai.onnx") or node.op_type not in FOLDABLE \
                or any(a.type in (5, 10) for a in node.attribute):
            continue
        if node.op_type in ("Shape", "Size") and node.input and node.input[0] not in known:
            shape = _static(shapes.get(node.input[0]))
            if shape is None:
                continue
            start = next((a.i for a in node.attribute if a.name == "start"), 0)
            end = next((a.i for a in node.attribute if a.name == "end"), None)
            value = np.array(shape[start:end] if node.op_type == "Shape" else math.prod(shape), dtype=np.int64)
            known[node.output[0]] = value
            if RUNTIME_SHAPES and not _declared(node.input[0], start, end, node.op_type):
                TAINTED.add(node.output[0])  # static only because --dim / --inputs bound it
            folded.append(index)
            continue
        values = [known.get(i) if i else None for i in node.input]
        if any(i and v is None for i, v in zip(node.input, values)) or not _size_ok(node.op_type, values):
            continue
        try:
            outs = _run(node, values, opset)
        except Exception:  # noqa: BLE001 - not foldable here: left to the model
            continue
        if all(o.size <= MAX_ELEMENTS and o.dtype != object for o in outs):
            tainted = any(i in TAINTED for i in node.input if i)
            for name, value in zip(node.output, outs):
                if name:
                    known[name] = value
                    if tainted:
                        TAINTED.add(name)
            folded.append(index)
    return folded


#: Contrib operators whose first output has their first input's shape and type (onnx has no
#: schema for them, so its inference stops there; ORT's symbolic shape inference knows them:
#: ``onnxruntime/python/tools/symbolic_shape_infer.py``).
SAME_SHAPE = frozenset({"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "SkipLayerNormalization",
                        "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization", "RotaryEmbedding",
                        "ScaledSiLU", "GatedAdd", "BiasAdd", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                        "QLinearLeakyRelu", "QLinearSoftmax", "LayerNormalization", "BiasSoftmax", "FusedConv"})


#: ai.onnx operators typed here too when onnx's own inference stopped before them (a chain
#: through contrib nodes): unary ones keep their input's shape, these binary ones broadcast.
UNARY = frozenset({"Sigmoid", "Relu", "Tanh", "Erf", "Neg", "Exp", "Sqrt", "Identity", "Softmax", "Abs", "Gelu",
                   "LeakyRelu", "HardSigmoid", "Softplus", "Reciprocal", "Log", "Sin", "Cos", "Floor", "Ceil",
                   "Round", "Not", "IsNaN", "Clip", "Elu", "Selu", "HardSwish", "Mish", "LogSoftmax"})
BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "And", "Or", "Where"})


def _broadcast(shapes: list[list]) -> list | None:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        fixed = {d for d in dims if d != 1}
        if len(fixed) > 1:
            return None
        out.append(fixed.pop() if fixed else 1)
    return out


def _contrib_outputs(node, shapes: dict, types: dict, attrs: dict) -> list[tuple[str, int, list]]:
    """``[(output, elem type, dims)]`` of a contrib node the rules know (see :data:`SAME_SHAPE`),
    or of an ai.onnx node of :data:`UNARY` / :data:`BINARY`."""
    op, ins = node.op_type, list(node.input)
    first = shapes.get(ins[0]) if ins and ins[0] else None
    t0 = types.get(ins[0]) if ins and ins[0] else None
    out = []
    if node.domain in ("", "ai.onnx") and op not in SAME_SHAPE:
        if op in UNARY and first is not None:
            out.append((node.output[0], t0 if op not in ("Not", "IsNaN") else 9, first))
        elif op in BINARY and all(i in shapes for i in ins if i):
            b = _broadcast([shapes[i] for i in ins if i])
            if b is not None:
                t = types.get(ins[1] if op == "Where" else ins[0])
                out.append((node.output[0], 9 if op in ("Equal", "Less", "Greater", "And", "Or") else t, b))
        return [(o, t, d) for o, t, d in out if o and t]
    if op in SAME_SHAPE and first is not None and op != "FusedConv":
        out.append((node.output[0], t0, first))
    elif op == "MatMulNBits" and first is not None and "N" in attrs:
        out.append((node.output[0], t0, first[:-1] + [attrs["N"]]))
    elif op == "EmbedLayerNormalization" and first is not None and len(ins) > 2 and shapes.get(ins[2]):
        out.append((node.output[0], types.get(ins[2]), first + [shapes[ins[2]][-1]]))
        if len(node.output) > 1 and node.output[1]:
            out.append((node.output[1], 6, first[:1]))
    elif op == "Attention" and first is not None and len(first) == 3 and len(ins) > 1 and shapes.get(ins[1]):
        sizes = attrs.get("qkv_hidden_sizes")
        hidden = sizes[2] if sizes else (shapes[ins[1]][-1] // 3 if isinstance(shapes[ins[1]][-1], int) else None)
        out.append((node.output[0], t0, first[:2] + [hidden]))
    elif op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization") and first is not None:
        pass  # handled with SAME_SHAPE above (output 0); output 3 below
    elif op == "GroupQueryAttention" and first is not None and len(first) == 3 and "num_heads" in attrs:
        n, kv = attrs["num_heads"], attrs.get("kv_num_heads", attrs["num_heads"])
        key = shapes.get(ins[1]) if len(ins) > 1 and ins[1] else None
        h = (key[-1] // kv if key is not None and isinstance(key[-1], int) and kv else
             first[-1] // (n + 2 * kv) if isinstance(first[-1], int) else None)
        if h:
            out.append((node.output[0], t0, first[:2] + [n * h]))
    elif op == "MultiHeadAttention" and first is not None and len(first) == 3:
        v = shapes.get(ins[2]) if len(ins) > 2 and ins[2] else None
        out.append((node.output[0], t0, first[:2] + [v[-1] if v is not None and len(v) == 3 else first[-1]]))
    elif op in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat") and first is not None and len(ins) > 1 \
            and shapes.get(ins[1]):
        out.append((node.output[0], 1, first[:-1] + [shapes[ins[1]][-1]]))
    if op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization") and first is not None \
            and len(node.output) > 3 and node.output[3]:
        out.append((node.output[3], t0, first))
    return [(o, t, d) for o, t, d in out if o and t]


def _contrib_pass(model) -> bool:
    """Add value_info for the outputs of contrib nodes the rules know; whether any was added."""
    from onnx import helper

    shapes, types = {}, {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type:
            types[vi.name] = tt.elem_type
            if tt.HasField("shape"):
                shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                   for d in tt.shape.dim]
    for init in model.graph.initializer:
        shapes[init.name], types[init.name] = list(init.dims), init.data_type
    added = False
    for node in model.graph.node:
        if node.domain == "ai.onnx.ml" or (node.domain in ("", "ai.onnx")
                                           and node.op_type not in UNARY | BINARY | SAME_SHAPE):
            continue
        if all(o in shapes for o in node.output if o):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.type in (1, 2, 7)}
        for name, elem, dims in _contrib_outputs(node, shapes, types, attrs):
            if name in shapes:
                continue
            model.graph.value_info.append(helper.make_tensor_value_info(name, elem, dims))
            shapes[name], types[name] = dims, elem
            added = True
    return added


#: Fold / inline / infer rounds.
ROUNDS = 4


def _shapes_of(graph, outer: Mapping[str, tuple] | None = None) -> dict[str, tuple]:
    out = dict(outer or {})
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    for init in graph.initializer:
        out[init.name] = tuple(init.dims)
    return out


def _constants(graph, values: dict) -> None:
    """Small initializers and ``Constant`` values of ``graph`` (and its subgraphs) into ``values``."""
    from onnx import numpy_helper

    for init in graph.initializer:
        if init.data_location != 1 and math.prod(init.dims) <= MAX_ELEMENTS:
            try:
                values.setdefault(init.name, numpy_helper.to_array(init))
            except Exception:  # noqa: BLE001 - a malformed tensor: not a value
                pass
    for node in graph.node:
        if node.op_type == "Constant" and node.output and node.attribute:
            a = node.attribute[0]
            if a.type == 4 and a.t.data_location != 1 and math.prod(a.t.dims) <= MAX_ELEMENTS:
                try:
                    values.setdefault(node.output[0], numpy_helper.to_array(a.t))
                except Exception:  # noqa: BLE001
                    pass
        for attr in node.attribute:
            for g in ([attr.g] if attr.type == 5 else list(attr.graphs) if attr.type == 10 else []):
                _constants(g, values)


def _fold_all(work_graph, shaped_graph, values: dict, opset: int, outer: Mapping[str, tuple]) -> bool:
    """Fold ``shaped_graph`` (and its subgraphs) into ``values``; replace the folded nodes of
    its twin ``work_graph`` by initializers. Whether anything changed."""
    from onnx import numpy_helper

    shapes = _shapes_of(shaped_graph, outer)
    done = set(fold_graph(shaped_graph, values, shapes, opset)) if len(shaped_graph.node) == len(work_graph.node) \
        else set()
    changed = bool(done)
    for i, (wn, sn) in enumerate(zip(work_graph.node, shaped_graph.node)):
        if i in done:
            continue
        for wa, sa in zip(wn.attribute, sn.attribute):
            if wa.type == 5 and sa.type == 5:
                changed |= _fold_all(wa.g, sa.g, values, opset, shapes)
    if done:
        outs = {o for i in done for o in work_graph.node[i].output if o}
        keep = [n for i, n in enumerate(work_graph.node) if i not in done]
        del work_graph.node[:]
        work_graph.node.extend(keep)
        have = {i.name for i in work_graph.initializer}
        for name in outs:
            if name in values and name not in have:
                work_graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))
    return changed


#: If node name -> the branch a known condition takes (filled by :func:`_inline_known_ifs`).
TAKEN: dict[str, str] = {}
#: Tensors whose folded value derives from a graph input's value (``--inputs``): known for
#: deciding an If, but computed at run time by the EP, so not folded nodes.
TAINTED: set[str] = set()
#: The graph inputs' shapes were bound by the user (symbolic in the model): a Shape of them
#: is known here but computed at run time by ORT.
RUNTIME_SHAPES = False
#: Tensor name -> its dims as inferred from the model's own declarations (inputs unbound):
#: an int where the model gives a value (-1 included, as some exporters write a dynamic
#: batch), ``None`` where it gives a symbol or nothing.
DECLARED: dict[str, list] = {}


def _declared(name: str, start: int, end: int | None, op: str) -> bool:
    """Whether ORT knows the dims a ``Shape`` (``[start:end]``) or ``Size`` of ``name`` reads
    at session creation, from the model's own declarations: then its constant folding
    (``constant_folding.cc``, the Shape node) folds it, whatever the bound inputs are. A
    rapidocr classifier declares its input ``[-1, 3, ?, ?]``; its GlobalAveragePool output is
    ``[-1, 200, 1, 1]`` and the ``Shape -> Cast -> Slice -> Cast -> Concat`` chain into a
    Reshape never runs (absent from ORT's profile), though a bound input made it look like
    run-time work here."""
    dims = DECLARED.get(name)
    if dims is None:
        return False
    part = dims if op == "Size" else dims[start:end]
    return all(isinstance(d, int) and not isinstance(d, bool) for d in part)


def declared_shapes(proto) -> dict[str, list]:
    """:data:`DECLARED` of ``proto`` (unbound, weightless): onnx inference from the model's
    own input declarations; empty when it fails."""
    try:
        shaped = _infer(proto)
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        return {}
    out = {}
    for vi in list(shaped.graph.input) + list(shaped.graph.value_info) + list(shaped.graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            out[vi.name] = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
    return out


def _inline_known_ifs(graph, values: dict, outer: frozenset = frozenset()) -> bool:
    """Replace every ``If`` of ``graph`` (and of its subgraphs) whose condition is a known
    value by the branch it takes (what ORT computes at run time; the branch's nodes keep
    their names). Whether any was inlined."""
    from onnx import helper

    existing = outer | ({i.name for i in graph.initializer} | {o for n in graph.node for o in n.output}
                        | {i.name for i in graph.input})
    nodes, changed = [], False
    for n in graph.node:
        for attr in n.attribute:
            if attr.type == 5 and not (n.op_type == "If" and values.get(n.input[0]) is not None):
                changed |= _inline_known_ifs(attr.g, values, frozenset(existing))
        cond = values.get(n.input[0]) if n.op_type == "If" and n.input else None
        if cond is None or np.asarray(cond).size != 1:
            nodes.append(n)
            continue
        name = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
        branch = next((a.g for a in n.attribute if a.name == name), None)
        inner = {o for b in branch.node for o in b.output} | {i.name for i in branch.initializer} if branch else set()
        if branch is None or inner & existing:
            nodes.append(n)
            continue
        graph.initializer.extend(branch.initializer)
        nodes.extend(branch.node)
        TAKEN[n.name] = name
        for bo, io in zip(branch.output, n.output):
            if io:
                nodes.append(helper.make_node("Identity", [bo.name], [io], name=f"{n.name}/{name}/out:{io}"))
        changed = True
    if changed:
        del graph.node[:]
        graph.node.extend(nodes)
    return changed


def _infer(model):
    import onnx

    shaped = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    for _ in range(3):  # contrib nodes the rules type (one pass in node order), then onnx again past them
        if not _contrib_pass(shaped):
            break
        shaped = onnx.shape_inference.infer_shapes(shaped, check_type=False, strict_mode=False, data_prop=True)
    return shaped


def infer(proto, values: dict[str, np.ndarray], runtime_shapes: bool = False,
          declared: dict[str, list] | None = None):
    """``proto`` (ModelProto, weightless, dims bound) shape-inferred after folding constants
    (subgraphs included) and inlining the ``If`` branches a known condition takes, in up to
    :data:`ROUNDS` rounds; adds the folded values to ``values``. Returns the inferred proto
    (``value_info`` of the inlined branches in its main graph), or ``None`` when onnx
    inference fails on it. ``declared``: :func:`declared_shapes` of the unbound model, where
    ``runtime_shapes``."""
    import onnx

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    global RUNTIME_SHAPES
    RUNTIME_SHAPES = runtime_shapes
    DECLARED.clear()
    DECLARED.update(declared or {})
    TAKEN.clear()
    TAINTED.clear()
    TAINTED.update(k for k in values if k in {i.name for i in proto.graph.input})
    try:
        shaped = _infer(proto)
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        return None
    if not opset:
        return shaped
    _constants(proto.graph, values)
    work = onnx.ModelProto()
    work.CopyFrom(proto)
    for _ in range(ROUNDS):
        changed = _fold_all(work.graph, shaped.graph, values, opset, {})
        changed |= _inline_known_ifs(work.graph, values)
        if not changed:
            break
        try:
            shaped = _infer(work)
        except Exception:  # noqa: BLE001 - keep the last good inference
            break
    return shaped
