"""Model building: element types, constants, and the bfloat16 rounding guard."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from epaudit.catalog.models import ONNX_TYPES, one_node_model, round_to_bfloat16, with_constants


def test_onnx_types_are_onnx_constants():
    assert ONNX_TYPES == {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT,
                          "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
                          "int32": TensorProto.INT32, "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def test_with_constants_moves_inputs_into_initializers_in_their_type():
    model = one_node_model("Add", "", 21, [("a", "float16", [2]), ("b", "float16", [2])], [("c", "float16")])
    proto = onnx.load_from_string(with_constants(model, {"b": np.array([1.5, -2.0])}))
    assert [i.name for i in proto.graph.input] == ["a"]
    (init,) = proto.graph.initializer
    assert init.name == "b" and init.data_type == TensorProto.FLOAT16
    assert onnx.numpy_helper.to_array(init).tolist() == [1.5, -2.0]
    with pytest.raises(KeyError, match="not graph inputs"):
        with_constants(model, {"z": np.zeros(2)})


def test_round_to_bfloat16_refuses_non_finite():
    with pytest.raises(ValueError, match="finite"):
        round_to_bfloat16(np.array([1.0, np.inf]))
