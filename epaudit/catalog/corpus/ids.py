"""Generated probe ids and manifest entries.

``onnx.<Op>.<input or attribute>[=<value>].<case without test_>.opset<N>``: the operator,
what the subject turns on (an ablated input or attribute by its schema name; a varied
attribute with the value the subject sets; for the operator itself
``input:<required input>=<zeros|ones|reversed>``, the input the control bakes in as that
constant), the source backend test case and the opset stamp. Ids are stable for a given onnx corpus: a new onnx release may add or remove cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...contract.probes import NON_DEFAULT


def value_text(value: Any) -> str:
    """An attribute value as it appears in an id: ``0.5``, ``cubic``, ``1_2`` for lists."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, (list, tuple)):
        return "_".join(value_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def probe_id(op: str, kind: str, key: str, value: Any, case: str, stamp: int) -> str:
    """``onnx.<Op>.<input or attribute>[=<value>].<case without test_>.opset<N>``.

    Ablation ids name the input or attribute the subject feeds or sets and its control
    leaves out (``onnx.Clip.min.clip_default_min.opset13``); variation ids add the value
    the subject sets (``onnx.LeakyRelu.alpha=0.5.leakyrelu_default.opset16``).
    The operator itself (kind ``itself``) names the required input its control replaces
    by a constant and which constant (``onnx.Add.input:B=zeros.add.opset14``).
    """
    case = case[5:] if case.startswith("test_") else case
    if kind == "itself":
        what = f"input:{key}={value}"
    else:
        what = f"{key}={value_text(value)}" if kind == "vary" else key
    return f"onnx.{op}.{what}.{case}.opset{stamp}"


def record(case: str, op: str, stamp: int, kind: str, key, extra, dtype: str, domain: str = "") -> dict:
    """The manifest entry of one probe: id, what the subject changes, the Use it exercises;
    ``domain`` (``ai.onnx.ml``; absent for ai.onnx) and ``opset``, the stamp of that domain."""
    if kind == "itself":
        fid = probe_id(op, kind, key, extra, case, stamp)
        changes = (f"subject: backend case {case} as is (the operator itself); control: required input "
                   f"{key!r} baked into the graph as a constant ({extra})")
        uses = {"inputs": [], "attributes": {}}  # Use(): every node of the operator
    elif kind == "input":
        fid = probe_id(op, kind, extra, None, case, stamp)
        changes = (f"subject: backend case {case} as is (feeds optional input {extra!r}); "
                   f"control: {extra!r} left out")
        uses = {"inputs": [extra], "attributes": {}}
    elif kind == "attribute":
        fid = probe_id(op, kind, key, None, case, stamp)
        changes = f"subject: backend case {case} as is (sets {key!r}); control: {key!r} back to its default"
        uses = {"inputs": [], "attributes": {key: NON_DEFAULT}}
    else:
        fid = probe_id(op, kind, key, extra, case, stamp)
        shown = extra.decode() if isinstance(extra, bytes) else extra
        if isinstance(shown, float):  # the float32 the model holds, written shortest (0.45)
            shown = float(str(np.float32(shown)))
        changes = f"subject: {key}={shown!r}; control: backend case {case} as is"
        uses = {"inputs": [], "attributes": {key: shown if not isinstance(shown, tuple) else list(shown)}}
    out = {"id": fid, "op_type": op, "vary": [key, value_text(extra)] if kind == "vary" else None, "opset": stamp,
           "dtype": dtype, "changes": changes, "case": case, "kind": kind, "uses": uses}
    if domain:
        out["domain"] = domain
    return out
