"""Probes old releases can load: the lowest IR version a model's opsets and types need,
and opset stamps verified against the schema history (docs/sweep.md)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

from epaudit.catalog import HAND_WRITTEN
from epaudit.catalog.models import lowest_ir_version, one_node_model, with_constants
from epaudit.run.canary import CANARY_MODEL, canary_model


def test_ir_version_follows_the_opset_table():
    # onnx.helper.VERSION_TABLE: ai.onnx 19-20 -> IR 9, 14 -> 7, 21 -> 10
    for opset, ir in ((7, 3), (13, 7), (14, 7), (19, 9), (20, 9), (21, 10), (22, 10)):
        m = onnx.load_from_string(one_node_model("Relu", "", opset, [("x", "float32", [2])], [("y", "float32")]))
        assert m.ir_version == ir, (opset, m.ir_version)


def test_types_and_initializers_raise_the_ir_version():
    # bfloat16 casts need IR 4; int4 IR 10 (onnx.proto's Version comments)
    m = onnx.load_from_string(one_node_model("Relu", "", 7, [("x", "bfloat16", [2])], [("y", "bfloat16")]))
    assert m.ir_version == 4
    assert lowest_ir_version([helper.make_opsetid("", 13)], elem_types=[22]) == 10
    # an initializer that is not a graph input: IR 4
    base = one_node_model("Add", "", 7, [("a", "float32", [2]), ("b", "float32", [2])], [("c", "float32")])
    assert onnx.load_from_string(base).ir_version == 3
    made = onnx.load_from_string(with_constants(base, {"b": np.ones(2, np.float32)}))
    assert made.ir_version == 4


def test_every_hand_written_probe_is_written_at_its_lowest_ir_version():
    from epaudit.catalog.models import set_lowest_ir_version

    for f in HAND_WRITTEN:
        p = f.build()
        for case in (p.subject, p.control):
            if case is None:
                continue
            m = onnx.load_from_string(case.model)
            need = helper.find_min_ir_version_for(list(m.opset_import), ignore_unknown=True)
            lowest = onnx.ModelProto()
            lowest.CopyFrom(m)
            set_lowest_ir_version(lowest)
            # at least what its opsets need, and no more than its opsets and types need
            # (float4e2m1 needs IR 11; ai.onnx 21 IR 10)
            assert need <= m.ir_version <= lowest.ir_version, (f.id, m.ir_version, need, lowest.ir_version)


def test_the_canary_loads_on_ir_9_releases():
    assert CANARY_MODEL == canary_model()
    m = onnx.load_from_string(CANARY_MODEL)
    assert m.ir_version <= 9 and m.opset_import[0].version == 13


# --------------------------------------------------------------------------- opset stamps
from epaudit.catalog.corpus import derive, history  # noqa: E402


def test_the_schema_history_stamps_maxpool_below_opset_22():
    # MaxPool-22 adds only bfloat16 and the sentence onnx PR #5741/#6650 apply to every
    # version; MaxPool-12, -11 the same node; MaxPool-10 added ceil_mode (a signature change)
    assert history.same_node("MaxPool", 22, 12)[0]
    assert history.same_node("MaxPool", 22, 10)[0]
    ok, why = history.same_node("MaxPool", 22, 8)
    assert not ok and "MaxPool-10: signature differs" in why
    assert derive.same_semantics("MaxPool", 22, 10) and not derive.same_semantics("MaxPool", 22, 8)
    assert derive.same_semantics("AveragePool", 22, 19)


def test_a_signature_difference_is_never_the_same_node():
    # Softmax-13 changed axis' default (1 -> -1): the case the old rule was made for
    ok, why = history.same_node("Softmax", 13, 11)
    assert not ok and "signature" in why
    assert not derive.same_semantics("Softmax", 13, 11)


def test_documented_behaviour_changes_drop_the_stamp():
    assert not history.same_node("Max", 13, 7)[0]  # Max-8 added broadcasting
    assert history.same_node("Max", 13, 8)[0]
    # a mode the newer version added: only a node that uses it is another node
    assert not history.same_node("Pad", 23, 18, {"mode": "wrap"})[0]
    assert history.same_node("Pad", 23, 18, {"mode": "reflect"})[0]
    # negative axes accepted from version 11: the same node while the axes are >= 0
    assert history.same_node("ReduceMax", 13, 7, {"axes": [0, 1]})[0]
    assert not history.same_node("ReduceMax", 13, 7, {"axes": [0, -1]})[0]


def test_a_text_change_nobody_reviewed_is_not_trusted(monkeypatch):
    monkeypatch.delitem(history.TRANSITIONS, ("MaxPool", 22))
    ok, why = history.same_node("MaxPool", 22, 12)
    assert not ok and "not reviewed" in why


@pytest.mark.skipif(onnx.__version__ != "1.23.2", reason="the table was reviewed against onnx 1.23.2")
def test_every_transition_of_the_installed_onnx_is_reviewed():
    assert history.unreviewed() == []
