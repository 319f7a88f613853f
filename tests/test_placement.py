"""Placement through EP graph rewrites, and numbers checked whatever the placement (issue 23).

Every branch through real ORT sessions on the CPU EP: the NCHWc rewrite (a real rewrite after
assignment) right and wrong, a model-local function ORT inlines (decomposition) right and
wrong, a node on CPU under another EP (the fallback fault, and a real fallback-guard refusal)
right and wrong; plus the rules of epaudit/classify/placement.py on the node lists real EPs
report (WebGPU's layout transform, QNN's and OpenVINO's compiled partitions), measured and
recorded in docs/ort-facts.md.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TODAY, make_matrix

from epaudit.audit import run
from epaudit.catalog.models import one_node_model
from epaudit.classify import placement as P
from epaudit.classify.outcome import classify_case, decide, measure_case
from epaudit.contract.outcomes import Outcome
from epaudit.contract.probes import TOLERANCES, Case, Feature, Probe
from epaudit.contract.results import CaseRun

CPU = "CPUExecutionProvider"


def _conv_feature(channels: int, wrong: float = 0.0, fid: str = "test.conv", fed: bool = False) -> Feature:
    """A Conv whose weight is an initializer, so the CPU EP's NCHWc transformer rewrites it
    (16 channels: ReorderInput, a com.microsoft.nchwc Conv, ReorderOutput; 1 channel: the Conv
    and ReorderOutput); ``fed``: the weight is a graph input, which the transformer leaves alone."""
    from onnx import helper, numpy_helper
    import onnx

    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, channels, 8, 8)).astype(np.float32)
    w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1
    bias = rng.standard_normal(channels).astype(np.float32)

    def model(with_bias: bool) -> bytes:
        inputs = ["X", "W"] + (["B"] if with_bias else [])
        node = helper.make_node("Conv", inputs, ["Y"], name="probe", pads=[1, 1, 1, 1])
        inits = ([] if fed else [numpy_helper.from_array(w, "W")]) + (
            [numpy_helper.from_array(bias, "B")] if with_bias else [])
        graph_inputs = [helper.make_tensor_value_info("X", 1, list(x.shape))] + (
            [helper.make_tensor_value_info("W", 1, list(w.shape))] if fed else [])
        g = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info("Y", 1, [1, channels, 8, 8])], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    def conv(b):
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, channels, 8, 8))
        for i in range(3):
            for j in range(3):
                out += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i:i + 8, j:j + 8])
        return out + (b.astype(np.float64)[None, :, None, None] if b is not None else 0.0)

    feeds = {"X": x, "W": w} if fed else {"X": x}
    subject = Case(model(True), feeds, ("Y",), {"Y": conv(bias) + wrong})
    control = Case(model(False), feeds, ("Y",), {"Y": conv(None)})
    onnx.checker.check_model(onnx.load_from_string(subject.model))
    return Feature(fid, "Conv", "", 17, "float32", "bias on / off", "test",
                   lambda: Probe(fid, subject, control, TOLERANCES["float32"], "float32"))


def _run(feature, provider_table: str = "", fault: str | None = None):
    """``feature`` on X: the CPU EP with ``provider_table``'s keys and ``fault`` injected."""
    body = provider_table + (f'inject_fault = "{fault}"\n' if fault else "")
    m = make_matrix(f'[providers.X]\nname = "CPUExecutionProvider"\n{body}', gate='reference = ["CPU"]')
    return run(m, providers=[m.providers["X"]], features=[feature], today=TODAY).results[(feature.id, "X")]


def test_a_rewrite_after_assignment_is_on_the_ep_and_judged_by_its_numbers():
    """profile = true: the profile shows what ran (the NCHWc rewrite), the assignment the node."""
    c = _run(_conv_feature(16), "profile = true\n")
    assert c.outcome is Outcome.PASS, c.summary
    v = c.evidence["placement_verdict"]
    assert v["kind"] == "rewritten" and "rewritten by its graph optimizations" in v["detail"]
    ran = {n["op_type"] for n in c.evidence["placement"]}
    assert {"ReorderInput", "ReorderOutput", "Conv"} <= ran
    assert [n["name"] for n in c.evidence["assigned"]] == ["probe"]
    # Right: compared with the subject's reference only (the control's is asked of a wrong answer).
    assert c.evidence["comparison"]["Y"]["match"] is True and "control_comparison" not in c.evidence


def test_a_rewrite_that_computes_wrongly_is_silent():
    c = _run(_conv_feature(16), "profile = true\n", fault="perturb")
    assert c.outcome is Outcome.MISMATCH and c.evidence["placement_verdict"]["kind"] == "rewritten"


def test_without_profiling_the_assignment_shows_the_node_itself():
    c = _run(_conv_feature(16))
    assert c.outcome is Outcome.PASS and c.evidence["placement_source"] == "assignment_info"
    assert c.evidence["placement_verdict"]["kind"] == "on_ep"


def test_a_conv_the_transformer_leaves_alone_runs_as_itself_even_when_profiled():
    c = _run(_conv_feature(16, fed=True), "profile = true\n")
    assert c.outcome is Outcome.PASS and c.evidence["placement_verdict"]["kind"] == "on_ep"
    assert [n["name"] for n in c.evidence["placement"]] == ["probe"]


@pytest.mark.parametrize("fault,outcome,kind", [("decompose", Outcome.DECOMPOSED, "decomposed"),
                                                ("decompose_wrong", Outcome.MISMATCH, "decomposed"),
                                                ("fallback", Outcome.FALLBACK, "fallback"),
                                                ("fallback_wrong", Outcome.MISMATCH, "fallback")])
def test_decomposed_and_fallback_cells_are_compared_with_their_references(fault, outcome, kind):
    c = _run(_conv_feature(1), fault=fault)
    assert c.outcome is outcome, c.summary
    assert c.evidence["placement_verdict"]["kind"] == kind
    assert c.evidence["comparison"]["Y"]["match"] is (outcome is not Outcome.MISMATCH)
    if outcome is Outcome.MISMATCH:
        assert f"[placement: {kind}:" in c.summary


def test_a_decomposition_with_a_wrong_reference_is_a_mismatch_not_a_gap():
    c = _run(_conv_feature(1, wrong=0.5), fault="decompose")
    assert c.outcome is Outcome.MISMATCH and "[placement: decomposed:" in c.summary


def _worker_run(feature, target: str, wrong: float = 0.0):
    """The worker's own session code, in this process, on a real ORT session."""
    from epaudit.worker import ortinfo, sessions

    ortinfo.load()
    probe = feature.build()
    case = {"role": "subject", "model": probe.subject.model, "feeds": dict(probe.subject.feeds),
            "outputs": list(probe.subject.outputs), "node": "probe",
            "output_shapes": {"Y": list(np.shape(probe.subject.reference["Y"]))}}
    raw = sessions.run_case(target, {}, case, None)
    from epaudit.run.collect import _case_run

    return probe, _case_run(raw)


def test_a_real_fallback_guard_refusal_still_runs_and_is_judged_by_its_numbers():
    """ORT refuses a session whose nodes land on CPU when fallback is disabled (FIELD-NOTES
    "Seeing where a node ran"): the worker runs the same model with fallback allowed, so a
    fallback that computes wrongly is a wrong answer first."""
    probe, case_run = _worker_run(_conv_feature(1), "AzureExecutionProvider")
    assert case_run.guard_refused and case_run.error["stage"] == "create" and case_run.outputs
    outcome, summary, ev = classify_case(case_run, probe.subject, probe.control, probe.tolerance,
                                         "AzureExecutionProvider")
    assert outcome is Outcome.FALLBACK, summary
    assert ev["placement_verdict"]["kind"] == "fallback" and ev["comparison"]["Y"]["match"] is True
    wrong = Case(probe.subject.model, probe.subject.feeds, ("Y",), {"Y": probe.subject.reference["Y"] + 1.0})
    outcome, summary, _ = classify_case(case_run, wrong, probe.control, probe.tolerance, "AzureExecutionProvider")
    assert outcome is Outcome.MISMATCH and "[placement: fallback:" in summary


def test_decide_needs_only_the_evidence():
    """The outcome is a function of the evidence: what a saved cell holds recomputes it."""
    import json

    c = _run(_conv_feature(1), fault="fallback_wrong")
    ev = json.loads(json.dumps(c.evidence))
    assert decide(ev) == (c.outcome, c.summary)


# --------------------------------------------------------------------------- the rules, on what real EPs reported
def _n(name, op, ep, domain=""):
    return {"name": name, "op_type": op, "ep": ep, "domain": domain}


WG = "WebGpuExecutionProvider"


def test_webgpu_layout_transform_is_a_rewrite_on_the_ep():
    """onnxruntime-webgpu 1.27.0 (lavapipe), a Conv probe: assignment info lists the two
    inserted Transposes only; the profile shows the NHWC Conv named from the probe."""
    assigned = [_n("Transpose", "Transpose", WG), _n("Transpose_token_0", "Transpose", WG)]
    executed = [_n("Transpose", "Transpose", WG), _n("probe_token_1", "Conv", WG), _n("Transpose_token_0", "Transpose", WG)]
    v = P.judge(assigned, executed, WG, "probe")
    assert v["kind"] == P.REWRITTEN and "layout transformation" in v["detail"] and "probe_token_1" in v["detail"]


def test_qnn_assigns_the_internal_nhwc_node():
    """onnxruntime-qnn 2.7: the assignment lists probe_token_1 in com.ms.internal.nhwc."""
    q = "QNNExecutionProvider"
    assigned = [_n("Transpose", "Transpose", q), _n("probe_token_1", "Conv", q, "com.ms.internal.nhwc"),
                _n("Transpose_token_0", "Transpose", q)]
    v = P.judge(assigned, [_n("QNNExecutionProvider_QNNExecutionProvider_47_1_0", "QNNExecutionProvider_47_1", q)], q, "probe")
    assert v["kind"] == P.REWRITTEN and "com.ms.internal.nhwc" in v["detail"]


def test_a_compiled_partition_is_on_the_ep():
    ov = "OpenVINOExecutionProvider"
    v = P.judge(None, [_n("OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0", "OpenVINO-EP-subgraph_1", ov)], ov, "probe")
    assert v["kind"] == P.REWRITTEN and "compiled" in v["detail"]


def test_a_rewrite_placed_off_the_ep_is_a_fallback():
    v = P.judge(None, [_n("probe_token_1", "Conv", CPU)], WG, "probe")
    assert v["kind"] == P.FALLBACK


def test_an_unnamed_replacement_no_rule_names_is_unknown_and_never_passes():
    v = P.judge(None, [_n("mystery", "Conv", WG)], WG, "probe")
    assert v["kind"] == P.UNKNOWN and "cannot tell" in v["detail"]
    ev = {"ran": True, "placement_verdict": v, "comparison": {"Y": {"output": "Y", "match": True, "max_abs": 0.0}}}
    outcome, summary = decide(ev)
    assert outcome is Outcome.ERROR and "placement unknown" in summary


def test_an_empty_or_missing_placement_is_unknown():
    assert P.judge(None, None, CPU, "probe")["kind"] == P.UNKNOWN
    assert P.judge([], [], CPU, "probe")["kind"] == P.UNKNOWN


def test_ort_copies_between_eps_are_not_arithmetic_but_other_helpers_are():
    on = [_n("probe", "Add", WG), _n("Memcpy", "MemcpyToHost", CPU)]
    assert P.judge(on, None, WG, "probe")["kind"] == P.ON_EP
    assert P.judge(on + [_n("cast_in", "Cast", CPU)], None, WG, "probe")["kind"] == P.FALLBACK


def test_the_profilers_names_for_unnamed_body_nodes_read_as_a_function_body():
    body = [_n("Identity_5", "Identity", CPU), _n("MatMul_3", "MatMul", CPU), _n("Softmax_9", "Softmax", CPU)]
    assert P.judge(None, body, CPU, "probe")["kind"] == P.DECOMPOSED
    assert P.judge(None, body + [_n("Add_1", "Add", WG)], CPU, "probe")["kind"] == P.FALLBACK


def test_an_inlined_body_with_device_copies_and_a_first_unindexed_name_is_a_function_body():
    """onnxruntime-webgpu 1.27.0, AffineGrid float16 (a function op): the profile lists the
    body as ``Size_6`` ... ``Transpose`` (the first of its op, no index) with the
    ``Memcpy`` / ``Memcpy_token_<n>`` copies ORT inserted between CPU and WebGPU; it read
    placement unknown (an ERROR cell) before."""
    body = [_n("Size_6", "Size", CPU), _n("If_8", "If", WG), _n("Memcpy_token_21", "MemcpyToHost", WG),
            _n("Transpose", "Transpose", WG), _n("Memcpy", "MemcpyFromHost", WG), _n("Div_2", "Div", WG)]
    v = P.judge(None, body, WG, "probe")
    assert v["kind"] == P.FALLBACK and "inlined" in v["detail"] and "Size_6" in v["detail"]
    assert "Memcpy" not in v["detail"]
    on_ep = [n for n in body if n["ep"] == WG]
    v = P.judge(None, on_ep, WG, "probe")
    assert v["kind"] == P.DECOMPOSED and "into 3 primitive node(s) (Div, If, Transpose)" in v["detail"]


def test_an_inlined_body_between_the_casts_ort_inserts_for_float16_is_a_function_body():
    """onnxruntime-openvino 1.24.1, ReduceLogSum float16 (keepdims=0): OpenVINO took no node;
    the CPU ran the inlined body (ReduceSum, Log) between ``InsertedPrecisionFreeCast_*``
    Casts; it read placement unknown (an ERROR cell) before."""
    ov = "OpenVINOExecutionProvider"
    body = [_n("InsertedPrecisionFreeCast_data", "Cast", CPU), _n("ReduceSum_1", "ReduceSum", CPU),
            _n("Log_2", "Log", CPU), _n("InsertedPrecisionFreeCast_reduced", "Cast", CPU)]
    v = P.judge(None, body, ov, "probe")
    assert v["kind"] == P.FALLBACK and "inlined" in v["detail"]
    assert P.judge(None, [_n("InsertedPrecisionFreeCast_data", "Cast", CPU), _n("mystery", "Conv", CPU)],
                   ov, "probe")["kind"] == P.UNKNOWN


def test_every_outcome_path_with_a_session_that_ran_holds_its_comparison():
    """0 cells whose session ran and whose outputs were not compared: walk every path of
    decide() that a run with outputs can take and find the comparison in its evidence."""
    probe = _conv_feature(1).build()
    ref = probe.subject.reference["Y"]
    placed = {"on_ep": ({"name": "probe", "op_type": "Conv", "ep": CPU, "domain": ""},),
              "fallback": ({"name": "probe", "op_type": "Conv", "ep": "Other", "domain": ""},),
              "decomposed": ({"name": "", "op_type": "Mul", "ep": CPU, "domain": ""},)}
    outputs = {"right": {"Y": ref.astype(np.float32)}, "control": {"Y": probe.control.reference["Y"].astype(np.float32)},
               "wrong": {"Y": (ref + 1).astype(np.float32)}, "nan": {"Y": np.full(ref.shape, np.nan, np.float32)}}
    seen = set()
    for kind, nodes in placed.items():
        for label, outs in outputs.items():
            r = CaseRun("subject", True, "done", None, nodes, "assignment_info", CPU, outs, 1.0, 1.0)
            ev = measure_case(r, probe.subject, probe.control, probe.tolerance, CPU)
            outcome, _ = decide(ev)
            seen.add(outcome)
            assert "comparison" in ev, (kind, label)
            # A wrong answer is also held to the control's reference (IGNORED or not).
            wrong = not all(c["match"] for c in ev["comparison"].values())
            assert ("control_comparison" in ev) == wrong, (kind, label)
    assert seen == {Outcome.PASS, Outcome.FALLBACK, Outcome.DECOMPOSED, Outcome.IGNORED, Outcome.MISMATCH, Outcome.NAN}
