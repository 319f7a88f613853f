"""The operator itself: a control with one required input baked into the graph as a constant.

Ablation and variation need an optional input or attribute to switch; 95 operators of
the corpus have neither (Abs, Add, Relu, Sigmoid, ...). For them the generated catalog
takes the method the hand-written catalogs use for the operator itself (``gqa.prompt``:
the control is the same graph with a zero query baked in, ``epaudit/catalog/gqa.py``):
the subject is the backend case as it is (reference: its stored outputs) and the control
is the same node with one *required* input replaced by a constant of the same dtype and
shape (:data:`CONSTANTS`: zeros, ones, or the fed value reversed along its first axis),
its reference from ``onnx.reference.ReferenceEvaluator``. An EP that ignores that input,
or computes something unrelated to it, cannot pass: the two references are at least
``MIN_SEPARATION`` bounds apart (checked in :func:`..derive.derive`).

The constant is an initializer named as the graph input it replaces, so the control's
feeds are the subject's without it (the ``ignore`` fault runs the control's graph on
those feeds). When it was the node's only fed input (Relu, Sigmoid), the initializer
stays declared as a graph input, i.e. an overridable default: ORT's constant folding
only folds initializers that are not graph inputs (``graph_utils::IsConstantInitializer``,
onnxruntime/core/optimizer/constant_folding.cc), so the node still reaches a kernel
(a fully constant node would be folded away: placement unknown, as Shape with static
dims was). That needs IR version 4 or later: below it ORT treats every initializer as a
constant (measured: every opset-7 stamp of Relu, Sigmoid, ... read ``placement
unknown`` under the ``ignore`` fault until the control was raised to IR 4), and IR 3
wants every initializer declared as a graph input (And, Or, Xor exist at opset 7 only:
the checker refused all their controls). Every operator-itself control is IR 4 or later.
"""

from __future__ import annotations

import numpy as np

#: The constants tried, in order; the first one whose probe is decisive is kept. Zeros
#: first (the neutral value of most operators' arithmetic); ones where zero is
#: degenerate (a divisor, a log: the derived reference turns infinite and is dropped);
#: the fed value reversed along axis 0 where a constant is not decisive (an index, a
#: shape-preserving permutation: only when the first dimension is > 1).
CONSTANTS = ("zeros", "ones", "reversed")
#: For operators that read only their input's shape (Size, Shape: no constant of the same
#: shape can be decisive), the fed value with its first row repeated once more along axis 0.
SHAPE_CONSTANTS = ("longer",)


def constant(kind: str, fed: np.ndarray) -> np.ndarray | None:
    """The array that replaces ``fed`` (same dtype and shape; ``longer``: one more row along
    axis 0), or ``None`` when ``kind`` does not apply (``reversed`` of a scalar or a first
    dimension of 1, ``longer`` of a scalar; a non-numeric dtype)."""
    fed = np.asarray(fed)
    if fed.dtype.kind not in "biufc":
        return None
    if kind == "zeros":
        return np.zeros_like(fed)
    if kind == "ones":
        return np.ones_like(fed)
    if kind == "reversed" and fed.ndim and fed.shape[0] > 1:
        return np.ascontiguousarray(np.flip(fed, 0))
    if kind == "longer" and fed.ndim:
        return np.ascontiguousarray(np.concatenate([fed, fed[:1]], axis=0))
    return None


def plan_inputs(node, schema, graph_inputs: set[str]) -> list[tuple[int, str]]:
    """``[(node input index, schema input name)]`` of the node's required inputs
    (``Single`` or ``Variadic``; a variadic input is named by its schema parameter and
    the index) that are fed graph inputs, in node order."""
    import onnx.defs

    Opt = onnx.defs.OpSchema.FormalParameterOption
    out = []
    for i, name in enumerate(node.input):
        if not name or name not in graph_inputs or not schema.inputs:
            continue
        param = schema.inputs[min(i, len(schema.inputs) - 1)]
        if i >= len(schema.inputs) and param.option != Opt.Variadic:
            continue
        if param.option == Opt.Optional:
            continue
        label = param.name if i < len(schema.inputs) and param.option != Opt.Variadic else f"{param.name}{i}"
        out.append((i, label))
    return out


def with_constant(model, feeds: dict[str, np.ndarray], index: int, kind: str):
    """``(control model, control feeds)``: a copy of ``model`` (ModelProto, one node) whose
    node input ``index`` is an initializer holding :func:`constant` ``(kind, fed value)``,
    named as the graph input it replaces; the feeds are ``feeds`` without it. It stays
    declared as a graph input (an overridable default, never fed) when no other node
    input stays fed (see the module docstring). Output shapes are cleared (the caller
    sets them). ``None`` when ``kind`` does not apply to the fed value.

    Raises:
        ValueError: the node input is not a fed graph input.
    """
    import onnx
    from onnx import numpy_helper

    node = model.graph.node[0]
    name = node.input[index]
    declared = {vi.name for vi in model.graph.input}
    if name not in declared or name not in feeds:
        raise ValueError(f"node input {index} ({name!r}) is not a fed graph input")
    value = constant(kind, feeds[name])
    if value is None:
        return None
    still_fed = {x for x in node.input if x and x in declared and x != name}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.initializer.append(numpy_helper.from_array(value, name))
    # IR < 4 makes every initializer a constant whatever the graph inputs say (ORT
    # graph.cc), so an opset-7 stamp (IR 3) would be folded; and IR 3 wants every
    # initializer declared as a graph input (onnx.checker: "x in initializer but not in
    # graph input"), so a constant next to a fed input would be refused.
    m.ir_version = max(m.ir_version, 4)
    if still_fed:
        kept = [vi for vi in m.graph.input if vi.name != name]
        del m.graph.input[:]
        m.graph.input.extend(kept)
    for vi in m.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    return m, {k: v for k, v in feeds.items() if k != name}
