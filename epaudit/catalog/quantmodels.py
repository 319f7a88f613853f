"""One-node models whose weights are initializers: the shape quantized operators take in LLMs.

``MatMulNBits`` and ``GatherBlockQuantized`` document their weights, scales and zero points
as constants (ORT ``docs/ContribOperators.md``), and the CPU kernel only prepacks ``B`` when
it is one (``matmul_nbits.cc`` ``PrePack``). So a probe feeds only the activations (``A``,
``indices``) and bakes everything else into the graph; the control differs in its
initializers or attributes, and its feeds stay the subject's. ``int4``/``uint4`` tensors have
no numpy dtype: they are given as :class:`SubByte` (logical values) and packed by onnx.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..contract.probes import PROBE_NODE_NAME
from .models import set_lowest_ir_version

#: numpy dtype -> ONNX element type (onnx.proto TensorProto.DataType).
_ELEM = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int32): 6,
         np.dtype(np.int64): 7, np.dtype(np.float16): 10}

#: Sub-byte type name -> ONNX element type (UINT4 21, INT4 22).
SUB_BYTE_TYPES = {"uint4": 21, "int4": 22}


@dataclass(frozen=True)
class SubByte:
    """A 4-bit initializer: ``kind`` ``"int4"`` or ``"uint4"``, ``values`` its logical
    integers (any shape), packed two per byte by onnx (element 0 in the low nibble)."""

    kind: str
    values: np.ndarray


@dataclass(frozen=True)
class RawTensor:
    """An initializer of an element type numpy lacks (float8, float4): ``elem_type`` (ONNX
    ``TensorProto.DataType``), ``dims`` (logical shape) and ``raw`` (the packed bytes)."""

    elem_type: int
    dims: tuple[int, ...]
    raw: bytes


def _initializer(name: str, value: np.ndarray | SubByte | RawTensor):
    from onnx import helper, numpy_helper

    if isinstance(value, RawTensor):
        return helper.make_tensor(name, value.elem_type, list(value.dims), value.raw, raw=True)
    if isinstance(value, SubByte):
        vals = np.asarray(value.values, dtype=np.int64)
        return helper.make_tensor(name, SUB_BYTE_TYPES[value.kind], list(vals.shape),
                                  vals.reshape(-1).tolist())
    return numpy_helper.from_array(np.ascontiguousarray(value), name)


def const_node_model(op_type: str, domain: str, opset: int, node_inputs: Sequence[str],
                     feeds: Mapping[str, np.ndarray], constants: Mapping[str, np.ndarray | SubByte],
                     output: tuple[str, np.dtype], attributes: Mapping[str, object]) -> bytes:
    """Serialize a model with one node ``op_type`` named ``"probe"``.

    Args:
        node_inputs: the node's inputs in schema order, ``""`` for omitted optional ones;
            each named input is in ``feeds`` (a graph input) or ``constants`` (an initializer).
        feeds: graph inputs by name (their dtype and shape declare the input).
        constants: initializers by name.
        output: the one graph output, ``(name, numpy dtype)``.
        attributes: node attributes.

    Raises:
        KeyError: a node input that is neither fed nor constant, or an unsupported dtype.
    """
    from onnx import helper

    inputs = []
    for name in node_inputs:
        if not name:
            continue
        if name in feeds:
            arr = feeds[name]
            inputs.append(helper.make_tensor_value_info(name, _ELEM[arr.dtype], list(arr.shape)))
        elif name not in constants:
            raise KeyError(f"node input {name!r} is neither fed nor constant")
    node_in = list(node_inputs)
    while node_in and node_in[-1] == "":
        node_in.pop()
    node = helper.make_node(op_type, node_in, [output[0]], name=PROBE_NODE_NAME, domain=domain,
                            **dict(attributes))
    graph = helper.make_graph([node], f"epaudit.{op_type}", inputs,
                              [helper.make_tensor_value_info(output[0], _ELEM[np.dtype(output[1])], None)],
                              initializer=[_initializer(n, v) for n, v in constants.items()])
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(domain, opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="epaudit")
    set_lowest_ir_version(model)
    return model.SerializeToString()
