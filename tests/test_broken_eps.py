"""Deliberately broken EPs, through real ORT sessions: each is classified and gated exactly.

The broken variants are the CPU EP with one fault injected (``epaudit/run/faults.py``): an
input dropped from the graph, a kernel that refuses (``NOT_IMPLEMENTED`` from ORT's own
kernel lookup), the node placed on another EP, NaN written into an output, one element
perturbed, the worker killed by a signal, a hang.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import TODAY, make_matrix

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.probes import Feature
from epaudit.matrix.load import load

# One GQA feature with an input, one with an attribute, one ONNX Attention feature.
FEATURES = [BY_ID["gqa.attention_bias"], BY_ID["gqa.softcap"], BY_ID["attention.mask.bool"]]


def outcomes(result, alias="BROKEN"):
    return {fid: c.outcome for (fid, a), c in result.results.items() if a == alias}


def finding_kinds(result, alias="BROKEN"):
    return {(f.feature_id, f.kind) for f in result.gate.findings if f.ep == alias and f.failing}


@pytest.mark.parametrize("fault, outcome, kind", [
    ("ignore", Outcome.IGNORED, FindingKind.SILENT),
    ("refuse", Outcome.REJECTED, FindingKind.LAG),
    ("fallback", Outcome.FALLBACK, FindingKind.LAG),
    ("nan", Outcome.NAN, FindingKind.SILENT),
    ("perturb", Outcome.MISMATCH, FindingKind.SILENT),
    ("unwritten", Outcome.UNWRITTEN, FindingKind.SILENT),
    ("kill", Outcome.CRASH, FindingKind.CRASH),
])
def test_fault_is_classified_and_gated(broken, fault, outcome, kind):
    result = run(broken(fault), features=FEATURES, today=TODAY)
    assert outcomes(result, "CPU") == {f.id: Outcome.PASS for f in FEATURES}
    assert outcomes(result) == {f.id: outcome for f in FEATURES}
    assert finding_kinds(result) == {(f.id, kind) for f in FEATURES}
    assert result.gate.exit_code == 1
    assert result.eps["BROKEN"].live  # the canary ran clean: the fault is in the probes only


def test_evidence_of_each_fault_is_specific(broken):
    r = run(broken("refuse"), features=FEATURES[:1], today=TODAY)
    c = r.results[("gqa.attention_bias", "BROKEN")]
    assert c.evidence["error"]["status"] == "NOT_IMPLEMENTED"
    assert "Could not find an implementation for GroupQueryAttention(1)" in c.evidence["error"]["message"]
    r = run(broken("fallback"), features=FEATURES[:1], today=TODAY)
    c = r.results[("gqa.attention_bias", "BROKEN")]
    assert c.evidence["asked"] == "CUDAExecutionProvider"
    assert {p["ep"] for p in c.evidence["placement"] if p["name"] == "probe"} == {"CPUExecutionProvider"}
    r = run(broken("perturb"), features=FEATURES[:1], today=TODAY)
    c = r.results[("gqa.attention_bias", "BROKEN")]
    cmp = c.evidence["comparison"]["output"]
    assert cmp["bad"] == 1 and cmp["worst_index"] == [0, 0, 0] and 9.0 < cmp["max_ratio"] < 11.0
    r = run(broken("kill"), features=FEATURES[:1], today=TODAY)
    # the worker announces each case on stderr before it starts: the dead one is named
    assert r.results[("gqa.attention_bias", "BROKEN")].summary == "worker killed by SIGKILL in the subject case"


def test_a_crash_names_the_case_the_worker_died_in():
    """The worker writes ``epaudit-case: <token> <role>`` before each case; the last one with
    the worker's token names the case a dead worker was in (a WebGPU sweep's crashes were in
    the control case alone: docs/sweep.md). Text without the token (a node name ORT printed)
    is no marker, and only a plain role name is repeated."""
    from epaudit.run.runner import _in_case

    t = "0123abcd"
    assert _in_case(f"epaudit-case: {t} subject\nsome ORT log\nepaudit-case: {t} control\n[W] ...", t) == \
        " in the control case"
    assert _in_case(f"\nepaudit-case: {t} subject\n", t) == " in the subject case"
    assert _in_case("no marker at all", t) == ""
    assert _in_case(f"epaudit-case: {t} subject\nName:'x'\nepaudit-case: control\n", t) == " in the subject case"
    assert _in_case(f"epaudit-case: {t} subject\nepaudit-case: ffff control\n", t) == " in the subject case"
    assert _in_case(f"epaudit-case: {t} con trol; rm -rf\n", t) == ""


def test_unwritten_output_is_seen_through_poisoned_bindings(broken):
    """Outputs are pre-bound to poisoned buffers, twice: an output the kernel never writes
    reads UNWRITTEN with the run and the element count; a healthy EP leaves no poison."""
    r = run(broken("unwritten"), features=[BY_ID["attention.past"]], today=TODAY)
    ok, bad = r.results[("attention.past", "CPU")], r.results[("attention.past", "BROKEN")]
    assert ok.outcome is Outcome.PASS and ok.evidence["binding"].startswith("iobinding: 2 runs")
    assert bad.outcome is Outcome.UNWRITTEN
    # Y (2, 4, 2, 16) is left unwritten in both runs; the present outputs were written.
    assert bad.evidence["unwritten"] == [{"run": 1, "output": "Y", "elements": 256, "size": 256},
                                         {"run": 2, "output": "Y", "elements": 256, "size": 256}]
    assert "Y: 256 of 256 element(s) still hold the poison run 1" in bad.summary


def test_binding_falls_back_to_a_plain_run_and_says_why(broken):
    """The fallback fault asks for CUDA, whose device cannot hold a buffer here: the worker
    runs plainly and the evidence says why, instead of guessing."""
    from epaudit.matrix.model import Provider
    from epaudit.run.runner import probe_ep

    ep = probe_ep(Provider("X", "CPUExecutionProvider", inject_fault="fallback"),
                  [BY_ID["gqa.softcap"]], {"gqa.softcap": BY_ID["gqa.softcap"].build()})
    subject = ep.observations["gqa.softcap"].cases["subject"]
    assert subject.binding.startswith("plain run: IOBinding failed:"), subject.binding
    assert subject.poisoned == () and subject.outputs  # one plain run, outputs returned


def test_poison_is_distinct_per_run_and_never_an_ordinary_nan():
    from epaudit.worker.sessions import poison_count, poison_fill

    for dtype in ("float16", "float32", "float64", "int32", "int64"):
        a, b = poison_fill(dtype, (2, 3), 0), poison_fill(dtype, (2, 3), 1)
        assert a.dtype == np.dtype(dtype) and a.shape == (2, 3)
        assert poison_count(a, 0) == 6 and poison_count(a, 1) == 0 and poison_count(b, 1) == 6
        if dtype.startswith("float"):
            assert np.isnan(a).all() and np.isnan(b).all()
            # NaN that arithmetic makes (0/0, numpy's nan) is not mistaken for poison.
            with np.errstate(invalid="ignore"):
                made = np.array([np.nan, np.float64(0) / np.float64(0)]).astype(dtype)
            assert poison_count(made, 0) == 0 and poison_count(made, 1) == 0


def test_hang_times_out_and_the_next_probe_still_runs(broken):
    m = broken("hang")
    result = run(m, features=FEATURES[:2], timeout=1.5, today=TODAY)
    assert outcomes(result) == {f.id: Outcome.TIMEOUT for f in FEATURES[:2]}
    assert finding_kinds(result) == {(f.id, FindingKind.TIMEOUT) for f in FEATURES[:2]}
    assert all(c.seconds < 10 for c in result.results.values())
    # Each probe had its own 1.5 s, counted from when the worker could start it (the
    # second was queued behind the first), and the evidence names that limit.
    hung = [result.results[(f.id, "BROKEN")] for f in FEATURES[:2]]
    assert all(1.4 < c.seconds < 5 for c in hung), [c.seconds for c in hung]
    assert all("no answer within 1.5 s" in c.summary for c in hung), [c.summary for c in hung]


def test_crash_costs_only_that_probe(broken):
    """After a killed worker a fresh one takes over: the healthy EP's later probes still pass."""
    m = make_matrix('[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "kill"\n')
    result = run(m, features=FEATURES, today=TODAY)
    assert set(outcomes(result).values()) == {Outcome.CRASH}
    assert set(outcomes(result, "CPU").values()) == {Outcome.PASS}


def test_regression_when_declared_supported(broken):
    cells = '[features."gqa.softcap"]\nCPU = "supported"\nBROKEN = "supported"\n'
    result = run(broken("refuse", cells), features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert finding_kinds(result) == {("gqa.softcap", FindingKind.REGRESSION)}


def test_stale_when_a_declared_gap_passes(broken):
    m = make_matrix('[providers.BROKEN]\nname = "CPUExecutionProvider"\n',
                    '[features."gqa.softcap"]\nCPU = "supported"\n'
                    'BROKEN = { status = "unsupported", issue = "https://github.com/x/y/issues/1", until = 2027-01-01 }\n')
    result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert outcomes(result) == {"gqa.softcap": Outcome.PASS}
    assert finding_kinds(result) == {("gqa.softcap", FindingKind.STALE)}


def test_decomposed_when_ort_inlines_the_function_body_and_its_numbers_are_checked():
    """float64 ONNX Attention has no CPU kernel: ORT inlines the body (docs/ort-facts.md "ONNX
    Attention"). The inlined body's outputs are compared too: right numbers read DECOMPOSED,
    wrong ones MISMATCH with the placement kept in the evidence and the summary."""
    import numpy as np

    from epaudit.catalog.models import one_node_model
    from epaudit.contract.probes import Case, Probe, Tolerance

    q = np.random.default_rng(3).standard_normal((1, 2, 3, 8))
    model = one_node_model("Attention", "", 23, [(n, "float64", [1, 2, 3, 8]) for n in "QKV"], [("Y", "float64")])
    scores = q @ np.swapaxes(q, -1, -2) / np.sqrt(8)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    right = (w / w.sum(-1, keepdims=True)) @ q
    control = Case(model, {"Q": q, "K": q, "V": q}, ("Y",), {"Y": np.ones((1, 2, 3, 8))})

    def feature(ref):
        case = Case(model, {"Q": q, "K": q, "V": q}, ("Y",), {"Y": ref})
        return Feature("attention.basic", "Attention", "", 23, "float64", "float64", "test",
                       lambda: Probe("attention.basic", case, control, Tolerance(1e-6, 1e-6), "float64"))

    m = make_matrix("", gate='reference = ["CPU"]')
    c = run(m, features=[feature(right)], today=TODAY).results[("attention.basic", "CPU")]
    assert c.outcome is Outcome.DECOMPOSED, c.summary
    assert "inlined into" in c.summary and "primitive node(s)" in c.summary and "within tolerance" in c.summary
    assert {p["op_type"] for p in c.evidence["placement"]} >= {"MatMul", "Softmax"}
    assert c.evidence["placement_verdict"]["kind"] == "decomposed"
    assert c.evidence["comparison"]["Y"]["match"] is True
    wrong = run(m, features=[feature(right + 0.5)], today=TODAY).results[("attention.basic", "CPU")]
    assert wrong.outcome is Outcome.MISMATCH
    assert "[placement: decomposed: node 'probe' was inlined into" in wrong.summary
    assert wrong.evidence["placement_verdict"]["kind"] == "decomposed"


def test_error_when_a_probe_cannot_be_built():
    def boom():
        raise ValueError("catalog bug")
    feature = Feature("gqa.prompt", "GroupQueryAttention", "com.microsoft", 1, "float16", "x", "test", boom)
    m = make_matrix("", gate='reference = ["CPU"]')
    result = run(m, features=[feature], today=TODAY)
    c = result.results[("gqa.prompt", "CPU")]
    assert c.outcome is Outcome.ERROR and "catalog bug" in c.summary
    assert {f.kind for f in result.gate.findings if f.failing} == {FindingKind.ERROR}


def test_a_blind_probe_is_an_error_never_a_pass():
    """A probe whose control equals its subject cannot fail: it must not run at all."""
    real = BY_ID["gqa.softcap"].build()
    blind = Feature("gqa.softcap", "GroupQueryAttention", "com.microsoft", 1, "float16", "x", "test",
                    lambda: type(real)(real.feature_id, real.subject, real.subject, real.tolerance, real.dtype))
    result = run(make_matrix("", gate='reference = ["CPU"]'), features=[blind], today=TODAY)
    c = result.results[("gqa.softcap", "CPU")]
    assert c.outcome is Outcome.ERROR and "blind probe" in c.summary
    assert result.gate.exit_code == 1


def test_cuda_is_unavailable_here_with_ortsreason_and_never_passes():
    m = load(None)
    result = run(m, providers=[m.providers["CUDA"]], features=FEATURES, require=["CUDA"], today=TODAY)
    info = result.eps["CUDA"]
    assert not info.live
    assert "CUDA" in info.reason or "fallback to CPU EP has been explicitly disabled" in info.reason
    assert set(outcomes(result, "CUDA").values()) == {Outcome.UNAVAILABLE}
    assert result.gate.exit_code == 3


def test_relative_interpreter_path_is_relative_to_where_epaudit_runs(tmp_path, monkeypatch):
    """Workers run in their own temp directory; `python = "venv/bin/python"` must still work."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    wrapper = tmp_path / "venv" / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    m = make_matrix('[providers.REL]\nname = "CPUExecutionProvider"\npython = "venv/bin/python"\n',
                    gate='reference = ["CPU"]')
    result = run(m, providers=[m.providers["REL"]], features=FEATURES[:1], today=TODAY)
    assert result.eps["REL"].live, result.eps["REL"].reason
    assert result.results[("gqa.attention_bias", "REL")].outcome is Outcome.PASS


def test_missing_interpreter_is_unavailable(tmp_path):
    m = make_matrix(f'[providers.OTHER]\nname = "CPUExecutionProvider"\npython = "{tmp_path}/no-python"\n',
                    gate='reference = ["CPU"]')
    result = run(m, features=FEATURES[:1], today=TODAY)
    assert not result.eps["OTHER"].live and "cannot start worker interpreter" in result.eps["OTHER"].reason
    assert result.results[("gqa.attention_bias", "OTHER")].outcome is Outcome.UNAVAILABLE


def test_worker_needs_neither_onnx_nor_epaudit(tmp_path):
    """The worker runs where onnx is not importable: a provider ``env`` shadows it."""
    blocker = tmp_path / "onnx"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('onnx is not installed here')\n")
    (tmp_path / "epaudit").mkdir()
    (tmp_path / "epaudit" / "__init__.py").write_text("raise ImportError('epaudit is not installed here')\n")
    m = make_matrix(f'[providers.BARE]\nname = "CPUExecutionProvider"\npython = "{sys.executable}"\n'
                    f'env = {{ PYTHONPATH = "{tmp_path}" }}\n', gate='reference = ["CPU"]')
    result = run(m, features=FEATURES[:1], today=TODAY)
    assert result.eps["BARE"].live
    assert result.results[("gqa.attention_bias", "BARE")].outcome is Outcome.PASS


def test_kernel_path_printed_by_ort_is_in_the_evidence(broken):
    """The line ORT prints with ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO=1 (CUDA only, so it
    is appended here to a real CPU observation) becomes ``kernel_path`` in the evidence."""
    import dataclasses

    from epaudit.classify.messages import kernel_paths
    from epaudit.classify.outcome import classify
    from epaudit.matrix.model import Provider
    from epaudit.run.runner import probe_ep

    feature = BY_ID["gqa.softcap"]
    probe = feature.build()
    obs = probe_ep(Provider("CPU", "CPUExecutionProvider"), [feature], {feature.id: probe}).observations[feature.id]
    assert "kernel_path" not in classify(obs, probe, "CPUExecutionProvider").evidence  # nothing printed
    line = "\x1b[36mOperator=GroupQueryAttention Node=probe DataType=fp16 SdpaKernel=EFFICIENT_ATTENTION\x1b[0m"
    printed = dataclasses.replace(obs, stderr=obs.stderr + f"\n{line}\n{line}\n")
    c = classify(printed, probe, "CPUExecutionProvider")
    assert c.outcome is Outcome.PASS
    assert c.evidence["kernel_path"] == [{"operator": "GroupQueryAttention", "node": "probe",
                                          "dtype": "fp16", "kernel": "EFFICIENT_ATTENTION"}]
    # Older builds print flags instead of SdpaKernel=.
    assert kernel_paths("Operator=Attention Node=probe DataType=fp32 FLASH_ATTENTION=1")[0]["kernel"] == "FLASH_ATTENTION"


def test_shipped_matrix_examples_for_cuda_kernel_paths_parse():
    """The commented CUDA variants in capabilities.toml load as providers when uncommented."""
    import re
    from pathlib import Path

    from epaudit.matrix.load import parse

    text = Path(__file__).resolve().parents[1].joinpath("capabilities.toml").read_text()
    block = re.search(r"^# \[providers\.CUDA-flash\].*?(?=^\[providers\.WebGPU\])", text, re.S | re.M).group(0)
    live = "\n".join(line[2:] if line.startswith("# ") else line for line in block.splitlines())
    m = parse(text.replace(block, live), "capabilities.toml")
    assert m.providers["CUDA-flash"].options["sdpa_kernel"] == "1"
    assert m.providers["CUDA-unfused"].env == {"ORT_DISABLE_FLASH_ATTENTION": "1",
                                               "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1",
                                               "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO": "1"}


@pytest.mark.parametrize("placement", [None, ()])
def test_no_placement_evidence_never_passes(placement):
    """Outputs that match the reference are not enough: without a placement that shows the
    node ran on the EP (an empty profile, say), the cell is ERROR, never PASS."""
    from epaudit.classify.outcome import classify_case
    from epaudit.contract.results import CaseRun

    probe = BY_ID["gqa.softcap"].build()
    outputs = {n: np.asarray(v).astype(np.float16) for n, v in probe.subject.reference.items()}
    run_ = CaseRun("subject", True, "done", None, placement, "profiling", "CPUExecutionProvider",
                   outputs, 1.0, 1.0)
    outcome, summary, _ = classify_case(run_, probe.subject, probe.control, probe.tolerance,
                                        "CPUExecutionProvider")
    assert outcome is Outcome.ERROR and "placement unknown" in summary
    placed = CaseRun("subject", True, "done", None,
                     ({"ep": "CPUExecutionProvider", "op_type": "GroupQueryAttention",
                       "domain": "com.microsoft", "name": "probe"},), "assignment_info",
                     "CPUExecutionProvider", outputs, 1.0, 1.0)
    assert classify_case(placed, probe.subject, probe.control, probe.tolerance,
                         "CPUExecutionProvider")[0] is Outcome.PASS
