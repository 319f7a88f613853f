"""Terminal conventions (issue 17): ORT's sentence instead of its C++ signature, colour
(--color, NO_COLOR), width (terminal, COLUMNS, no wrap in a pipe), --quiet, progress
lines for logs, exit codes in every --help, features as JSON, the run's start and
duration in the JSON report, relative error at a zero reference, the oracle's onnx and
NaN wording. Refusals come from real ORT sessions; broken EPs from the fault hook."""

from __future__ import annotations

import io
import json
import textwrap

import jsonschema
import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner

from epaudit.catalog import BY_ID, FEATURES
from epaudit.catalog.models import one_node_model
from epaudit.classify.compare import _rel_text, compare
from epaudit.classify.messages import ort_message, shorten
from epaudit.cli import main
from epaudit.contract.probes import Tolerance
from epaudit.saved.read import load as load_saved
from epaudit.saved.read import schema
from epaudit.terminal import LineProgress, color_enabled, width

MATRIX = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["BROKEN"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.BROKEN]
    name = "CPUExecutionProvider"
    inject_fault = "nan"
    ''')


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "caps.toml"
    path.write_text(MATRIX)
    return str(path)


def invoke(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def check(caps, *extra, env=None):
    return invoke("check", "--matrix", caps, "--feature", "gqa.softcap", *extra, env=env)


# ----------------------------------------------------------------------------- ORT's words
def _ort_error(model: bytes) -> str:
    with pytest.raises(Exception) as info:
        ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return str(info.value)


def test_opset_refusal_keeps_the_sentence_not_the_signature():
    # An opset no onnxruntime release supports: ORT_ENFORCE in model_load_utils.h says why.
    raw = _ort_error(one_node_model("Add", "", 99, [("a", "float32", [2]), ("b", "float32", [2])],
                                    [("c", "float32")]))
    assert "ValidateOpsetForDomain" in raw and ".h:" in raw  # what ORT itself prints
    text = shorten(ort_message(raw))
    assert "ValidateOpsetForDomain" not in text and "std::" not in text and ".h:" not in text
    assert "[ONNXRuntimeError]" not in text
    assert text.endswith(text.split(". ")[-1]) and "Current official support for domain ai.onnx is till opset" in text


def test_run_time_refusal_in_a_real_probe_reads_as_ort_sentence(caps):
    from epaudit.audit import run
    from epaudit.matrix.load import parse

    result = run(parse(MATRIX, caps), features=[BY_ID["attention.opset24.mask_shorter"]],
                 providers=[parse(MATRIX, caps).providers["CPU"]])
    c = result.results[("attention.opset24.mask_shorter", "CPU")]
    assert c.outcome.value == "REJECTED"
    assert "onnxruntime::" in c.evidence["error"]["message"]  # the JSON keeps ORT's full text
    assert "onnxruntime::" not in c.summary and "attention_helper.h" not in c.summary
    assert "inconsistent total_sequence_length" in c.summary


def test_ort_message_leaves_plain_text_alone():
    assert ort_message("Could not find an implementation for Expand(13) node with name ''") == \
        "Could not find an implementation for Expand(13) node with name ''"
    assert ort_message("/a/b.cc:12 x was false. why") == "x was false. why"
    assert ort_message("A | [ONNXRuntimeError] : 1 : FAIL : Failed | B") == "A | FAIL: Failed | B"


# ----------------------------------------------------------------------------- numbers
def test_relative_error_where_the_reference_is_zero_is_said_so():
    ref = np.zeros((2, 4))
    ref[1] = 2.0
    got = ref.copy()
    got[0, 3] = 1.25  # wrong where the reference is 0
    c = compare({"Y": got.astype(np.float32)}, {"Y": ref}, Tolerance(1e-3, 1e-3))["Y"]
    assert c["ref_at_worst"] == 0.0 and c["max_rel"] == 0.0 and c["worst_index"] == [0, 3]
    assert _rel_text(c) == "reference 0 there, so no relative error"
    got[1, 0] = 2.5
    c = compare({"Y": got}, {"Y": ref}, Tolerance(1e-3, 1e-3))["Y"]
    assert "1e+30" not in _rel_text(c) and c["max_rel"] == pytest.approx(0.25)


# ----------------------------------------------------------------------------- colour, width, quiet
def test_color_choice_and_no_color():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert color_enabled("auto", Tty(), {}) is True
    assert color_enabled("auto", Tty(), {"NO_COLOR": "1"}) is False
    assert color_enabled("auto", io.StringIO(), {}) is False
    assert color_enabled("always", io.StringIO(), {"NO_COLOR": "1"}) is True
    assert color_enabled("never", Tty(), {}) is False
    assert width(io.StringIO(), {"COLUMNS": "80"}) == 80 and width(io.StringIO(), {}) is None


def test_check_color_always_never_and_quiet(caps):
    r = check(caps, "--color", "always")
    assert r.exit_code == 1 and "\x1b[" in r.output
    r = check(caps, "--color", "never", env={"NO_COLOR": ""})
    assert "\x1b[" not in r.output
    r = check(caps, "--quiet")
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert "┏" not in r.output and "live (" not in r.output
    assert lines[0].startswith("FAIL silent gqa.softcap on BROKEN: NAN: ")
    assert lines[-1].startswith("verdict: FAIL") and "(exit 1)" in lines[-1]


def test_no_hard_wrap_in_a_pipe_and_columns_wraps(caps):
    r = check(caps)
    line = next(x for x in r.output.splitlines() if x.startswith("FAIL silent gqa.softcap on BROKEN"))
    assert line.endswith("an EP that cannot do this must refuse it") and len(line) > 160
    r = check(caps, env={"COLUMNS": "80"})
    assert max(len(x) for x in r.output.splitlines() if x.startswith(("FAIL", "warn", " "))) <= 80


def test_progress_lines_for_a_log():
    clock = iter([0.0, 1.0, 6.0, 7.0, 13.0, 14.0]).__next__
    out = io.StringIO()
    with LineProgress(4, every=5.0, stream=out, clock=clock) as p:
        for fid in ("a", "b", "c", "d"):
            p.advance("CPU", fid)
    assert out.getvalue().splitlines() == ["epaudit: probing 2/4 (CPU: b), 6 s",
                                           "epaudit: probing 4/4 (CPU: d), 13 s",
                                           "epaudit: probing 4/4 (done), 14 s"]


def test_every_command_help_lists_exit_codes_and_an_example():
    import click

    def commands(group, prefix=()):
        for name, cmd in group.commands.items():
            if isinstance(cmd, click.Group):
                yield from commands(cmd, prefix + (name,))
            else:
                yield prefix + (name,)

    seen = list(commands(main))
    assert ("check",) in seen and ("env", "create") in seen
    for path in seen:
        r = invoke(*path, "--help")
        assert r.exit_code == 0, path
        assert "Exit codes:" in r.output, path
        assert "Example" in r.output and "epaudit " in r.output.split("Example")[1], path


def test_features_as_json():
    r = invoke("features", "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert doc["count"] == len(FEATURES) == len(doc["features"])
    first = doc["features"][0]
    assert first["id"] == FEATURES[0].id and first["operator"] == FEATURES[0].operator
    assert {"opset", "dtype", "changes", "source", "uses"} <= set(first)


# ----------------------------------------------------------------------------- JSON report
def test_json_report_has_start_and_duration_and_old_reports_still_load(caps, tmp_path):
    out = tmp_path / "r.json"
    r = check(caps, "--format", "json", "--output", str(out))
    assert r.exit_code == 1
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema())
    assert doc["started"].endswith("+00:00") and 0 < doc["duration_s"] < 600
    assert load_saved(str(out)).environment["started"] == doc["started"]
    old = json.loads(out.read_text())
    del old["started"], old["duration_s"], old["environment"]["started"], old["environment"]["duration_s"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert "started" not in load_saved(str(tmp_path / "old.json")).environment
    bad = dict(doc, duration_s=-1)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    r = invoke("diff", str(out), str(tmp_path / "bad.json"))
    assert r.exit_code == 2 and "duration_s" in r.output


# ----------------------------------------------------------------------------- oracle
def test_oracle_names_onnx_and_nan_reads_nan(monkeypatch):
    import onnx

    from epaudit.reference import oracle

    probe = BY_ID["attention.basic"].build()
    ref = np.asarray(probe.subject.reference["Y"], np.float64)
    got = ref.copy()
    got.flat[5] = np.nan
    text = oracle._difference(got, ref, probe)
    assert text.startswith("NaN in 1 of ") and "tolerance bounds" not in text
    # A listed disagreement on a case that agrees: said to be gone, with the onnx version.
    listed = next(iter(oracle.KNOWN.values()))
    monkeypatch.setitem(oracle.KNOWN, ("attention.basic", "subject"), listed)
    row = oracle.check_case("attention.basic", "subject", probe)
    assert row.verdict is oracle.Verdict.RESOLVED
    assert f"no longer occurs with onnx {onnx.__version__}" in row.detail
    r = invoke("oracle", "--feature", "attention.basic")
    assert f"ReferenceEvaluator of onnx {onnx.__version__}" in r.output.splitlines()[0]
