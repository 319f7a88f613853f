"""``epaudit scan`` as people use it: directories, GenAI folders, many models with one bad
file, the same file twice, HTML, and hostile models (one line and exit 2, or a report in
which every model-supplied string is escaped; never a traceback or a memory bomb)."""

from __future__ import annotations

import json

import onnx
import pytest
import scan_models as sm
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper

from conftest import CPU_ONLY
from epaudit.cli import main

MATRIX = CPU_ONLY


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def matrix(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(MATRIX)
    return str(p)


def _relu(name: str = "/act/Relu", op: str = "Relu", domain: str = "", opset: int = 17) -> onnx.ModelProto:
    n = helper.make_node(op, ["x"], ["y"], name=name, domain=domain)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 8])])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    return m


def test_a_directory_a_genai_folder_one_bad_file_and_a_file_given_twice(tmp_path, matrix):
    """Every .onnx under a directory is scanned; a GenAI output folder contributes the files
    its genai_config.json names; an unreadable file is one line and the rest are reported
    (exit 2); the same file named twice is scanned once."""
    d = tmp_path / "models"
    (d / "sub").mkdir(parents=True)
    onnx.save(_relu(), d / "a.onnx")
    onnx.save(sm.tiny_cnn(), d / "sub" / "b.onnx")
    (d / "broken.onnx").write_bytes(b"not a model")
    genai = tmp_path / "genai"
    genai.mkdir()
    onnx.save(_relu("/lm/Relu"), genai / "model.onnx")
    onnx.save(_relu("/other/Relu"), genai / "unused.onnx")
    (genai / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "model.onnx"}}}))
    r = invoke("scan", str(d), str(genai), str(d / "a.onnx"), "--matrix", matrix, "--format", "json")
    assert r.exit_code == 2, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    paths = [m["path"] for m in doc["models"]]
    assert paths == [str(d / "a.onnx"), str(d / "sub" / "b.onnx"), str(genai / "model.onnx")]
    (bad,) = doc["unreadable"]
    assert bad.startswith(f"{d / 'broken.onnx'}: not a readable ONNX model")


def test_html_is_the_check_reports_look_and_escapes_what_a_model_says(tmp_path, matrix):
    from epaudit.report.html_assets import CSS

    onnx.save(_relu('<script>alert("x")</script>'), tmp_path / "m.onnx")
    out = tmp_path / "r.html"
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--format", "html", "--output", str(out))
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert CSS in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "default-src 'none'" in page and "would run as expected" in page


HOSTILE = "x\nverdict: would run as expected\x1b[2J\u202e::stop-commands::token\r::warning::forged"


def test_names_cannot_forge_lines_workflow_commands_or_terminal_codes(tmp_path, matrix):
    # An operator nobody has a reference for: its node is named in the uncovered list.
    onnx.save(_relu(HOSTILE, op="Mystery", domain="vendor.x"), tmp_path / "m.onnx")
    for fmt in ("table", "markdown"):
        r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--format", fmt)
        assert r.exit_code in (0, 3), r.output
        assert "\x1b" not in r.output and "\u202e" not in r.output and "\r" not in r.output
        for line in r.output.splitlines():
            assert not line.lstrip().startswith("::"), line
            assert not line.startswith("verdict:"), line
        assert "\\x0averdict" in r.output.replace("\\\\", "\\")
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--format", "json")
    doc = json.loads(r.output)
    assert "\x1b" not in r.output  # JSON escapes it, and the value survives as it is
    assert any(HOSTILE in c["nodes"] for c in doc["models"][0]["node_configs"])


def test_a_model_directory_name_starting_with_a_workflow_command_is_escaped(tmp_path, matrix):
    d = tmp_path / "::error::owned"
    d.mkdir()
    onnx.save(_relu(), d / "m.onnx")
    r = invoke("scan", str(d), "--matrix", matrix)
    assert r.exit_code == 0, r.output
    assert all(not line.lstrip().startswith("::") for line in r.output.splitlines())


def test_non_utf8_names_op_types_and_domains_are_printed_escaped(tmp_path, matrix):
    raw = _relu("NAMEX", op="OPTYPEX", domain="DOMAINX").SerializeToString()
    # Same lengths, so the protobuf framing holds.
    raw = raw.replace(b"NAMEX", b"N\xff\xfeEX").replace(b"OPTYPEX", b"O\xffTYPEX").replace(b"DOMAINX", b"D\xfe\xffAINX")
    (tmp_path / "m.onnx").write_bytes(raw)
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix)
    assert r.exit_code in (0, 3), r.output
    assert "Traceback" not in r.output and "N\\xff\\xfeEX" in r.output and "O\\xffTYPEX" in r.output


@pytest.mark.parametrize("version", [2**31, 2**40, 0, -3])
def test_an_opset_out_of_range_is_one_line_exit_2(tmp_path, matrix, version):
    m = _relu()
    m.opset_import[0].version = version
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "outside 1..1000" in r.output


def test_a_model_declaring_2_40_elements_is_bounded_before_any_allocation(tmp_path, matrix):
    """Node probes say "too large to probe"; seeded whole-model inputs are refused, one line."""
    n = helper.make_node("Relu", ["x"], ["y"], name="big")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", T.FLOAT, [1 << 20, 1 << 20])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix)
    assert r.exit_code == 0 and "too large to probe" in r.output and "partly checked (0 of 1" in r.output
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--whole")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "seeded inputs would take" in r.output


@pytest.mark.parametrize("dim", ["batch", "batch=x", "=3", "batch=99999999"])
def test_a_bad_dim_is_one_line_exit_2(tmp_path, matrix, dim):
    onnx.save(_relu(), tmp_path / "m.onnx")
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--dim", dim)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "--dim" in r.output


def test_dims_bind_the_node_probes_shapes(tmp_path, matrix):
    onnx.save(sm.tiny_cnn(), tmp_path / "m.onnx")
    r = invoke("scan", str(tmp_path / "m.onnx"), "--matrix", matrix, "--dim", "batch=2", "--format", "json")
    configs = [c["config"] for c in json.loads(r.output)["models"][0]["node_configs"]]
    assert any(c.startswith("Conv-11 float32 X[2,9,6,6]") for c in configs), configs
