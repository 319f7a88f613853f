"""The output-combination and opset-24 features added to the Attention and GQA catalogs.

ONNX Attention probes are checked against ``onnx.reference.ReferenceEvaluator`` (an
independent evaluator); GQA, a ``com.microsoft`` operator without one, against the CPU EP.
Both are also run on the CPU EP through real ORT sessions wherever the matrix declares CPU
supported, and the CPU refusals the matrix declares are pinned to ORT's own message.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import BY_ID, FEATURES
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION
from epaudit.matrix.load import load as load_matrix

_NEW_ATTENTION = ("attention.is_causal.with_nonpad", "attention.nonpad_kv_seqlen.with_causal")
GAPS = tuple(f.id for f in FEATURES
             if f.id.startswith(("attention.outputs.", "gqa.qk_output.", "gqa.outputs."))
             or (f.op_type == "Attention" and f.id.endswith(".opset24")) or f.id in _NEW_ATTENTION)
MATRIX = load_matrix(None)


def _run_cpu(case):
    sess = ort.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    return dict(zip(case.outputs, sess.run(list(case.outputs), dict(case.feeds))))


def test_the_gap_features_exist():
    # 19 from issue 14, plus gqa.outputs.output_only.with_past (docs/contrib-llm-serving.md)
    assert len(GAPS) == 20 and "gqa.qk_output" not in GAPS  # the pre-existing feature is not one


@pytest.mark.parametrize("fid", GAPS)
def test_probe_contract_and_cpu(fid):
    probe = BY_ID[fid].build()
    assert separation(probe) >= MIN_SEPARATION
    assert_control_runs_on_subject_arrays(probe)
    decl = MATRIX.declaration(fid, "CPU")
    assert decl is not None
    if decl.status == "unsupported":
        with pytest.raises(Exception, match="does not support past_(key|value) provided and present_(key|value) being null"):
            _run_cpu(probe.subject)
        return
    if decl.status == "skip":
        pytest.skip(decl.reason)
    for case in (probe.subject, probe.control):
        got = _run_cpu(case)
        for name in case.outputs:
            assert probe.tolerance.close(got[name], case.reference[name]).all(), (fid, name)


@pytest.mark.parametrize("fid", [f for f in GAPS if BY_ID[f].op_type == "Attention"])
def test_attention_references_match_onnx_reference_evaluator(fid):
    probe = BY_ID[fid].build()
    for case in (probe.subject, probe.control):
        outs = ReferenceEvaluator(onnx.load_from_string(case.model)).run(None, dict(case.feeds))
        for name, got in zip(case.outputs, outs):
            assert got.shape == case.reference[name].shape
            assert probe.tolerance.close(got, case.reference[name]).all(), (fid, name)


def test_cpu_lowest_row_at_opset_24_is_zero_as_at_23():
    """The deviation declared ``skip`` on CPU for both opsets: a lowest-float32 mask row gives
    zeros on the CPU EP, the mean of V in the spec and in onnx.reference."""
    for fid in ("attention.fully_masked_row.lowest", "attention.fully_masked_row.lowest.opset24"):
        assert MATRIX.declaration(fid, "CPU").status == "skip"
        case = BY_ID[fid].build().subject
        y = _run_cpu(case)["Y"]
        assert not y[0, :, 1].any() and np.abs(case.reference["Y"][0, :, 1]).max() > 0.1
