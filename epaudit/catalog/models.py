"""Building the tiny one-node ONNX models that probes run.

Every probe model holds one node under test, named :data:`epaudit.contract.probes.PROBE_NODE_NAME`,
whose inputs and outputs are graph inputs and outputs. bfloat16 has no numpy dtype, so a
bfloat16 probe graph takes and returns float32 and casts around the node
(``Cast`` nodes named ``cast_in.<input>`` / ``cast_out.<output>``); the EP under test must
take those casts too.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..contract.probes import PROBE_NODE_NAME

# onnx is imported inside the builders, not here: probes are built on a background thread
# (probeset.ProbeSet) while the workers start, so onnx's import (~0.1-0.3 s) overlaps the
# workers' import of onnxruntime instead of delaying their start.

#: Lowest IR version a probe model is written with: IR 3 is the first with ONNX 1.0's
#: ``opset_import`` (onnx.helper.VERSION_TABLE).
MIN_IR_VERSION = 3

#: Element type (``TensorProto.DataType``) -> the IR version that added it (onnx.proto's
#: ``Version`` enum comments: BFLOAT16 in IR 4, the FLOAT8 types in 9, UINT4/INT4 in 10,
#: FLOAT4E2M1 in 11, FLOAT8E8M0 in 12, UINT2/INT2 in 13); older types need nothing more.
TYPE_IR_VERSION: Mapping[int, int] = {16: 4, 17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11,
                                      24: 12, 25: 13, 26: 13}


def lowest_ir_version(opset_imports, initializers: bool = False, elem_types=()) -> int:
    """The lowest IR version that carries ``opset_imports`` (``OperatorSetIdProto`` values):
    ``onnx.helper.find_min_ir_version_for`` over onnx's release table
    (``onnx.helper.VERSION_TABLE``: ai.onnx 21 needs IR 10, 19-20 IR 9, 14 IR 7, ...;
    domains it does not know, ``com.microsoft``, add nothing), at least
    :data:`MIN_IR_VERSION`, 4 with ``initializers`` that are not graph inputs (IR 3 reads
    every initializer as an input's default), and what the ``elem_types`` used need
    (:data:`TYPE_IR_VERSION`).

    So a release that reads only older IR versions loads every probe its opsets allow:
    onnxruntime 1.16 and 1.17 read IR <= 9 ("Unsupported model IR version: 10, max
    supported IR version: 9", measured on 1.17.3), so an opset-19 probe written as IR 10
    could not run there at all (docs/sweep.md "Probes old releases can load").
    """
    from onnx import helper

    ir = helper.find_min_ir_version_for(list(opset_imports), ignore_unknown=True)
    for t in elem_types:
        ir = max(ir, TYPE_IR_VERSION.get(int(t), 0))
    return max(ir, 4 if initializers else MIN_IR_VERSION)


def set_lowest_ir_version(model) -> None:
    """Give ``model`` (a ``ModelProto``, in place) :func:`lowest_ir_version` of its opset
    imports, its initializers and the element types of its graph inputs, outputs,
    initializers and ``Cast``/``to`` targets."""
    g = model.graph
    types = [vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.output) + list(g.value_info)
             if vi.type.HasField("tensor_type")]
    types += [t.data_type for t in g.initializer]
    types += [a.i for n in g.node for a in n.attribute if a.name == "to"]
    inputs = {vi.name for vi in g.input}
    model.ir_version = lowest_ir_version(model.opset_import, any(t.name not in inputs for t in g.initializer),
                                         types)

#: dtype name -> ONNX element type (``onnx.TensorProto.DataType``, onnx.proto; the tests
#: check these against onnx's own constants).
ONNX_TYPES: Mapping[str, int] = {
    "float64": 11,   # DOUBLE
    "float32": 1,    # FLOAT
    "float16": 10,   # FLOAT16
    "bfloat16": 16,  # BFLOAT16
    "int32": 6,      # INT32
    "int64": 7,      # INT64
    "bool": 9,       # BOOL
}

#: dtype name -> numpy dtype of the *graph input* (bfloat16 graphs take float32).
NUMPY_TYPES: Mapping[str, type] = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": np.float32,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}


def one_node_model(
    op_type: str,
    domain: str,
    opset: int,
    inputs: Sequence[tuple[str, str, Sequence[int] | None]],
    outputs: Sequence[tuple[str, str]],
    attributes: Mapping[str, object] | None = None,
    node_inputs: Sequence[str] | None = None,
    node_name: str = PROBE_NODE_NAME,
) -> bytes:
    """Serialize a model with one node ``op_type`` named ``"probe"``.

    Args:
        op_type: e.g. ``"GroupQueryAttention"``.
        domain: ``"com.microsoft"`` or ``""`` (ai.onnx).
        opset: version of ``domain``; ai.onnx is imported at ``max(opset, 21)`` when the
            node is in another domain (for the casts).
        inputs: graph inputs ``(name, dtype name, shape)``; shape ``None`` means a scalar.
        outputs: graph outputs ``(name, dtype name)``; shapes left to inference.
        attributes: node attributes (skip the ones at their default).
        node_inputs: the node's input list, with ``""`` for omitted optional inputs;
            defaults to the names of ``inputs`` in order.
        node_name: the node's name (placement checks look it up).

    Returns:
        Serialized ``ModelProto`` bytes.

    Raises:
        KeyError: an unknown dtype name.
    """
    import onnx
    from onnx import TensorProto, helper

    node_in = list(node_inputs) if node_inputs is not None else [n for n, _, _ in inputs]
    nodes: list[onnx.NodeProto] = []
    graph_inputs = []
    for name, dtype, shape in inputs:
        dims = [] if shape is None else list(shape)
        if dtype == "bfloat16":
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
            cast_name = f"{name}.bf16"
            nodes.append(helper.make_node("Cast", [name], [cast_name], to=TensorProto.BFLOAT16,
                                          name=f"cast_in.{name}"))
            node_in = [cast_name if n == name else n for n in node_in]
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, ONNX_TYPES[dtype], dims))
    node_out = []
    graph_outputs = []
    tail: list[onnx.NodeProto] = []
    for name, dtype in outputs:
        if name == "":
            node_out.append("")
            continue
        if dtype == "bfloat16":
            inner = f"{name}.bf16"
            node_out.append(inner)
            tail.append(helper.make_node("Cast", [inner], [name], to=TensorProto.FLOAT,
                                         name=f"cast_out.{name}"))
            graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
        else:
            node_out.append(name)
            graph_outputs.append(helper.make_tensor_value_info(name, ONNX_TYPES[dtype], None))
    while node_out and node_out[-1] == "":
        node_out.pop()
    nodes.append(helper.make_node(op_type, node_in, node_out, name=node_name,
                                  domain=domain, **dict(attributes or {})))
    nodes.extend(tail)
    graph = helper.make_graph(nodes, f"epaudit.{op_type}", graph_inputs, graph_outputs)
    if domain:
        opsets = [helper.make_opsetid("", 21), helper.make_opsetid(domain, opset)]
    else:
        opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="epaudit")
    set_lowest_ir_version(model)
    return model.SerializeToString()


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float values to the nearest bfloat16 (ties to even); float32 result, same shape.

    bfloat16 is the upper 16 bits of a float32, so rounding adds ``0x7FFF`` plus the
    lowest kept bit (the tie-to-even correction) and clears the low 16 bits: the rounding
    a float32 -> bfloat16 ``Cast`` does (the tests check it against ORT's Cast).

    Raises:
        ValueError: a non-finite input (the bit trick is only right for finite values).
    """
    a = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(a).all():
        raise ValueError("round_to_bfloat16 takes finite values only")
    bits = a.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).reshape(a.shape)


def with_constants(model: bytes, values: Mapping[str, np.ndarray]) -> bytes:
    """Turn the graph inputs named in ``values`` into initializers holding those arrays.

    A control uses this to make an input neutral (a zero query, an unmasked row) while
    its feeds stay a subset of the subject's. Each array is stored in its graph input's
    element type, so in a bfloat16 graph the float32 constant still goes through its
    ``cast_in`` node.

    Raises:
        KeyError: a name in ``values`` is not a graph input.
    """
    if not values:
        return model
    import onnx
    from onnx import helper, numpy_helper

    proto = onnx.load_from_string(model)
    by_name = {vi.name: vi for vi in proto.graph.input}
    missing = sorted(set(values) - set(by_name))
    if missing:
        raise KeyError(f"not graph inputs: {missing}")
    for name, arr in values.items():
        np_type = helper.tensor_dtype_to_np_dtype(by_name[name].type.tensor_type.elem_type)
        proto.graph.initializer.append(numpy_helper.from_array(np.asarray(arr).astype(np_type), name))
    kept = [vi for vi in proto.graph.input if vi.name not in values]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    set_lowest_ir_version(proto)  # an initializer that is not a graph input needs IR 4
    return proto.SerializeToString()
