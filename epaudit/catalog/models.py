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

#: IR version of probe models; ORT 1.20+ loads IR 10.
IR_VERSION = 10

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
    model.ir_version = IR_VERSION
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
    return proto.SerializeToString()
