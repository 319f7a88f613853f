"""Synthetic control-flow node cases: ``Loop`` and ``Scan`` with bodies every tensor type has.

The backend corpus' Loop and Scan cases carry float32 through bodies of arithmetic (``Add``
in ``test_scan9_sum``, a ``Concat`` of sequences in ``test_loop13_seq``), so no type
variant of them can be made, and one case per operator reaches one or two schema
versions: on the CPU EP's surface the two operators held 400 items (``V``, their carried
type, in every tensor type at nine schema versions) with one covered. These cases move
their values through ``Identity`` only, which every tensor type has, so the derivation
makes the operator-itself probe (the carried value baked in as zeros) and type variants
retype the body with the node (:func:`epaudit.catalog.corpus.types._retype`).

* ``test_cf_loop_identity`` (ai.onnx 25): ``Loop(M=3, cond=true, v)``; the body passes ``v``
  through and stacks it as a scan output, its condition is ``iteration_num < 2``. ONNX
  Loop: "the loop runs while ... (trip_count > iteration) && cond" and "the final values
  of the loop-carried dependencies ... scan_outputs ... concatenated along a new first
  axis": ``v_final = v``, ``scan = [v, v, v]``.
* ``test_cf_scan_shift`` (ai.onnx 25): ``Scan(s, x)`` with ``num_scan_inputs=1``; the body
  makes the new state the scan slice and emits the old state: ``final = x[-1]``,
  ``ys = [s, x[0], ..., x[-2]]`` (ONNX Scan-9+: "the scan_outputs are ... stacked along
  the scan axis").

References are ours (numpy, below); the derivation checks ReferenceEvaluator against them
before it trusts it for any derived model.
"""

from __future__ import annotations

import numpy as np

from ...contract.probes import PROBE_NODE_NAME, Case, Probe, Tolerance
from .cases import BackendCase

#: The ai.onnx opset of both cases (the newest Loop and Scan schema of onnx 1.23).
OPSET = 25
TOLERANCE = Tolerance(atol=1e-6, rtol=1e-6)


def _finish(cid: str, op: str, node, inputs, outputs, feeds: dict, refs: dict) -> BackendCase:
    from onnx import helper

    g = helper.make_graph([node], cid, inputs, outputs)
    model = helper.make_model(g, ir_version=10, producer_name="epaudit", opset_imports=[helper.make_opsetid("", OPSET)])
    case = Case(model.SerializeToString(), feeds, tuple(refs), {k: np.asarray(v, np.float64) for k, v in refs.items()})
    return BackendCase(cid, op, OPSET, False, Probe(cid, case, None, TOLERANCE, "float32", node_name=PROBE_NODE_NAME))


def loop_identity(m: int, v: np.ndarray, limit: int = 2) -> dict[str, np.ndarray]:
    """ONNX Loop with the body ``cond = iteration_num < limit``, ``v_out = v``, ``scan = v``:
    ``min(m, limit + 1)`` iterations; returns ``{"v_final": v, "scan": v stacked that many
    times along a new axis 0}`` (float32 ``v`` of any shape)."""
    n = min(int(m), limit + 1)
    return {"v_final": v, "scan": np.stack([v] * n) if n else np.zeros((0,) + v.shape, v.dtype)}


def scan_shift(s: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    """ONNX Scan (one state, one scan input along axis 0) with the body ``state' = x_t``,
    ``y_t = state``: returns ``{"final": x[-1], "ys": [s, x[0], ..., x[-2]]}``."""
    return {"final": x[-1], "ys": np.concatenate([s[None], x[:-1]], axis=0)}


def _loop() -> BackendCase:
    from onnx import TensorProto as T
    from onnx import helper

    v = np.round(np.random.default_rng(901).uniform(-2, 2, (2, 3)), 2).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["limit"], value=helper.make_tensor("limit", T.INT64, [], [2])),
         helper.make_node("Less", ["i", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"]),
         helper.make_node("Identity", ["v_in"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("v_in", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("v_out", T.FLOAT, [2, 3]),
         helper.make_tensor_value_info("scan_out", T.FLOAT, [2, 3])])
    node = helper.make_node("Loop", ["M", "cond", "v"], ["v_final", "scan"], name=PROBE_NODE_NAME, body=body)
    feeds = {"M": np.array(3, np.int64), "cond": np.array(True), "v": v}
    refs = loop_identity(3, v)
    return _finish("test_cf_loop_identity", "Loop", node,
                   [helper.make_tensor_value_info("M", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
                    helper.make_tensor_value_info("v", T.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("v_final", T.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("scan", T.FLOAT, [3, 2, 3])], feeds, refs)


def _scan() -> BackendCase:
    from onnx import TensorProto as T
    from onnx import helper

    rng = np.random.default_rng(902)
    s = np.round(rng.uniform(-2, 2, (2, 3)), 2).astype(np.float32)
    x = np.round(rng.uniform(-2, 2, (4, 2, 3)), 2).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Identity", ["x_t"], ["s_out"]), helper.make_node("Identity", ["s_in"], ["y_t"])],
        "body",
        [helper.make_tensor_value_info("s_in", T.FLOAT, [2, 3]), helper.make_tensor_value_info("x_t", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("s_out", T.FLOAT, [2, 3]), helper.make_tensor_value_info("y_t", T.FLOAT, [2, 3])])
    node = helper.make_node("Scan", ["s", "x"], ["final", "ys"], name=PROBE_NODE_NAME, body=body, num_scan_inputs=1)
    refs = scan_shift(s, x)
    return _finish("test_cf_scan_shift", "Scan", node,
                   [helper.make_tensor_value_info("s", T.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("x", T.FLOAT, [4, 2, 3])],
                   [helper.make_tensor_value_info("final", T.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("ys", T.FLOAT, [4, 2, 3])], {"s": s, "x": x}, refs)


def cases() -> tuple[BackendCase, ...]:
    """The synthetic control-flow cases, in name order."""
    return (_loop(), _scan())
