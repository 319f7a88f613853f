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
    """Fold the main graph of ``graph`` in node order (module doc), adding every folded
    small tensor to ``known``; returns the indices of the nodes whose outputs are all known."""
    folded = []
    for index, node in enumerate(graph.node):
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
            for name, value in zip(node.output, outs):
                if name:
                    known[name] = value
            folded.append(index)
    return folded


def infer(proto, values: dict[str, np.ndarray]):
    """``proto`` (ModelProto, weightless, dims bound) shape-inferred after folding; adds the
    folded values to ``values``. Returns the inferred proto, or ``None`` when onnx
    inference fails on it."""
    import onnx
    from onnx import numpy_helper

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)

    def shapes_of(model) -> dict[str, tuple]:
        out = {}
        for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.HasField("shape"):
                out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        for init in model.graph.initializer:
            out[init.name] = tuple(init.dims)
        return out

    try:
        shaped = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        return None
    if not opset:
        return shaped
    for init in proto.graph.initializer:
        if init.data_location != 1 and math.prod(init.dims) <= MAX_ELEMENTS:
            try:
                values.setdefault(init.name, numpy_helper.to_array(init))
            except Exception:  # noqa: BLE001 - a malformed tensor: not a value
                pass
    for node in proto.graph.node:
        if node.op_type == "Constant" and node.output and node.attribute:
            a = node.attribute[0]
            if a.type == 4 and a.t.data_location != 1 and math.prod(a.t.dims) <= MAX_ELEMENTS:
                try:
                    values.setdefault(node.output[0], numpy_helper.to_array(a.t))
                except Exception:  # noqa: BLE001
                    pass
    done = fold_graph(shaped.graph, values, shapes_of(shaped), opset)
    if not done:
        return shaped
    work = onnx.ModelProto()
    work.CopyFrom(proto)
    keep = [n for i, n in enumerate(work.graph.node) if i not in set(done)]
    del work.graph.node[:]
    work.graph.node.extend(keep)
    have = {i.name for i in work.graph.initializer}
    for name in {o for i in done for o in proto.graph.node[i].output if o}:
        if name in values and name not in have:
            work.graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))
    try:
        again = onnx.shape_inference.infer_shapes(work, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001
        return shaped
    # A second fold on the sharper shapes (Shape of a now-static tensor), without a third inference.
    fold_graph(again.graph, values, shapes_of(again), opset)
    return again
