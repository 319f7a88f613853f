"""tools/declare_generated.py: loud generated non-passes grouped into matrix globs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from epaudit.matrix.load import parse

_SPEC = importlib.util.spec_from_file_location(
    "declare_generated", Path(__file__).resolve().parents[1] / "tools" / "declare_generated.py")
tool = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tool)


def _r(fid, outcome, ep="WebGPU"):
    return {"feature": fid, "ep": ep, "outcome": outcome, "declared": None}


RESULTS = [
    # every DFT probe refused: one operator glob
    _r("onnx.DFT.axis.dft.opset20", "FALLBACK"), _r("onnx.DFT.onesided.dft.opset17", "REJECTED"),
    # Resize: opset 19 all loud, opset 13 mixed (one pass)
    _r("onnx.Resize.mode=cubic.r.opset19", "FALLBACK"), _r("onnx.Resize.axes.r.opset19", "DECOMPOSED"),
    _r("onnx.Resize.mode=cubic.r.opset13", "FALLBACK"), _r("onnx.Resize.mode=linear.r.opset13", "PASS"),
    # silent: never declared; all passing: nothing
    _r("onnx.Elu.alpha.elu.opset22", "IGNORED"), _r("onnx.Relu.input:X=zeros.relu.opset14", "PASS"),
    # another EP's cells do not count
    _r("onnx.Relu.input:X=zeros.relu.opset14", "FALLBACK", ep="QNN"),
    # hand-written features are not the tool's
    _r("gqa.softcap", "REJECTED"),
]


def test_groups_by_operator_then_stamp_then_id():
    g = tool.groups(RESULTS, "WebGPU")
    assert {k: dict(v) for k, v in g.items()} == {
        "onnx.DFT.*": {"FALLBACK": 1, "REJECTED": 1},
        "onnx.Resize.*.opset19": {"FALLBACK": 1, "DECOMPOSED": 1},
        "onnx.Resize.mode=cubic.r.opset13": {"FALLBACK": 1},
    }
    assert {k: dict(v) for k, v in tool.groups(RESULTS, "QNN").items()} == {"onnx.Relu.*": {"FALLBACK": 1}}


def test_printed_tables_are_a_valid_matrix_that_declares_each_loud_cell(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": RESULTS, "eps": [{"alias": "WebGPU", "ort_version": "1.27.0"}]}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", "https://example.org/registry"]) == 0
    tables = capsys.readouterr().out
    ids = sorted({r["feature"] for r in RESULTS if r["feature"].startswith("onnx.")})
    m = parse('schema_version = 1\n[providers.WebGPU]\nname = "WebGpuExecutionProvider"\n' + tables,
              "m.toml", feature_ids=ids)
    declared = {fid: m.features[fid]["WebGPU"].status for fid in m.features if "WebGPU" in m.features[fid]}
    assert declared == {f: "unsupported" for f in (
        "onnx.DFT.axis.dft.opset20", "onnx.DFT.onesided.dft.opset17", "onnx.Resize.mode=cubic.r.opset19",
        "onnx.Resize.axes.r.opset19", "onnx.Resize.mode=cubic.r.opset13")}
    assert "FALLBACK 1 (placed on CPU), REJECTED 1 (refused)" in tables and "1.27.0" in tables


def test_one_link_per_ep():
    with pytest.raises(SystemExit):
        tool.main(["x.json", "--ep", "WebGPU", "--ep", "QNN", "--link", "https://example.org"])


def test_merge_into_a_matrix_keeps_its_text_and_its_cells(tmp_path):
    path = tmp_path / "m.toml"
    before = ('schema_version = 1\n# a comment that stays\n[providers.WebGPU]\nname = "WebGpuExecutionProvider"\n'
              '[providers.QNN]\nname = "QNNExecutionProvider"\n\n'
              '[features."onnx.DFT.*"]\nQNN = "supported"\n\n'
              '[features."onnx.Resize.*.opset19"]\nWebGPU = { status = "skip", issue = "https://example.org/1", '
              'until = 2027-06-30 }\n')
    path.write_text(before)
    cell = '{ status = "unsupported", issue = "https://example.org/r", until = 2027-06-30 }'
    added = tool.merge(str(path), {"onnx.DFT.*": {"WebGPU": cell}, "onnx.Resize.*.opset19": {"WebGPU": cell},
                                   "onnx.Relu.*": {"QNN": cell}}, header="new gaps")
    assert added == 2  # the existing WebGPU skip is left as it is
    text = path.read_text()
    assert text.startswith(before.replace('[features."onnx.DFT.*"]\n', f'[features."onnx.DFT.*"]\nWebGPU = {cell}\n'))
    assert text.endswith(f'\n# new gaps\n\n[features."onnx.Relu.*"]\nQNN = {cell}\n')
    ids = ["onnx.DFT.axis.dft.opset20", "onnx.Resize.mode=cubic.r.opset19", "onnx.Relu.input:X=zeros.relu.opset14"]
    m = parse(text, "m.toml", feature_ids=ids)
    assert m.features["onnx.DFT.axis.dft.opset20"]["WebGPU"].status == "unsupported"
    assert m.features["onnx.DFT.axis.dft.opset20"]["QNN"].status == "supported"
    assert m.features["onnx.Resize.mode=cubic.r.opset19"]["WebGPU"].status == "skip"
    assert m.features["onnx.Relu.input:X=zeros.relu.opset14"]["QNN"].status == "unsupported"


@pytest.mark.parametrize("args, says", [
    (["--until", "tomorrow"], "--until 'tomorrow': not a date like 2027-06-30"),
    (["--until", "2020-01-01"], "--until 2020-01-01: not in the future"),
    (["--link", "https://example.org"], "not a link the gate accepts"),
    (["--ep", "CUDA", "--link", "https://example.org/x"], "--ep CUDA: no result of that EP"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": RESULTS, "eps": []}))
    ep = [] if "--ep" in args else ["--ep", "WebGPU"]
    link = [] if "--link" in args else ["--link", "https://example.org/registry"]
    assert tool.main([str(run), *ep, *link, *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_file_that_is_not_a_report_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "m.toml"
    bad.write_text("schema_version = 1\n")
    assert tool.main([str(bad), "--ep", "CPU", "--link", "https://example.org/x"]) == 2
    assert f"{bad}: not an epaudit JSON report" in capsys.readouterr().err
    assert tool.main([str(tmp_path / "none.json"), "--ep", "CPU", "--link", "https://example.org/x"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_replace_redeclares_from_a_rerun_and_keeps_hand_written_cells(tmp_path, capsys):
    """A re-run after a gap began to pass: --replace drops the cells the tool wrote for that
    EP (they would read stale), declares what the new run saw, and leaves every other EP's
    cells, hand-written cells and comments where they were."""
    matrix = tmp_path / "m.toml"
    link = "https://example.org/registry"
    old = (f'{{ status = "unsupported", issue = "{link}", until = 2099-01-01, '
           'reason = "WebGPU (onnxruntime 1.27.0) in the measured run: DECOMPOSED 2 (function body inlined)" }')
    matrix.write_text(
        'schema_version = 1\n[providers.WebGPU]\nname = "WebGpuExecutionProvider"\n'
        '[providers.QNN]\nname = "QNNExecutionProvider"\n\n# keep this comment\n'
        f'[features."onnx.Resize.*"]\nWebGPU = {old}\nQNN = {old.replace("WebGPU (", "QNN (")}\n\n'
        f'[features."onnx.DFT.*"]\nWebGPU = {old}\n\n'
        '[features."onnx.Elu.alpha.elu.opset22"]\nWebGPU = { status = "skip", issue = "https://example.org/elu", '
        'until = 2099-01-01, reason = "by hand" }\n')
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": RESULTS, "eps": [{"alias": "WebGPU", "ort_version": "1.27.0"}]}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", link, "--into", str(matrix), "--replace",
                      "--until", "2099-01-01"]) == 0
    assert "2 cell(s) removed, 3 cell(s) added" in capsys.readouterr().err
    text = matrix.read_text()
    import tomllib

    features = tomllib.loads(text)["features"]
    assert "WebGPU" not in features.get("onnx.Resize.*", {}) and "QNN" in features["onnx.Resize.*"]
    assert features["onnx.DFT.*"]["WebGPU"]["reason"].endswith("FALLBACK 1 (placed on CPU), REJECTED 1 (refused)")
    assert features["onnx.Resize.*.opset19"]["WebGPU"]["status"] == "unsupported"
    assert features["onnx.Elu.alpha.elu.opset22"]["WebGPU"]["reason"] == "by hand"
    assert "# keep this comment" in text


def test_replace_needs_a_matrix_to_edit(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": RESULTS}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", "https://example.org/r", "--replace"]) == 2
    assert "--replace edits a matrix" in capsys.readouterr().err


VARIANTS = [
    # Relu: the base passes; float16 placed on CPU in both cases -> one type glob; float64 passes
    _r("onnx.Relu.input:X=zeros.relu.opset14", "PASS"), _r("onnx.Relu.input:X=zeros.relu.opset14.float16", "FALLBACK"),
    _r("onnx.Relu.alpha.relu.opset14", "PASS"), _r("onnx.Relu.alpha.relu.opset14.float16", "REJECTED"),
    _r("onnx.Relu.input:X=zeros.relu.opset14.float64", "PASS"),
    # Pad: the opset-13 bases are refused (a stamp glob), but their int32 variant runs: declared supported;
    # the opset-19 base passes and its int32 variant is refused: the type's outcomes differ -> the id
    _r("onnx.Pad.mode.pad.opset13", "REJECTED"), _r("onnx.Pad.mode.pad.opset13.int32", "PASS"),
    _r("onnx.Pad.mode.pad.opset19", "PASS"), _r("onnx.Pad.mode.pad.opset19.int32", "FALLBACK"),
    # a silent variant asks nothing of the matrix
    _r("onnx.Pad.mode.pad.opset19.float16", "NAN"),
]


def test_type_variants_get_the_cells_the_run_measured_through_inheritance(tmp_path, capsys):
    """A variant takes its base's cell unless a key names it (matrix "Type variants"): the
    tool declares a type glob or the id exactly where the inherited cell is not what was
    measured, including ``supported`` for a variant that runs where its base is a gap."""
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": VARIANTS, "eps": [{"alias": "WebGPU", "ort_version": "1.27.0"}]}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", "https://example.org/registry"]) == 0
    tables = capsys.readouterr().out
    assert '[features."onnx.Relu.*.float16"]' in tables and '[features."onnx.Pad.*.opset13"]' in tables
    assert '[features."onnx.Pad.mode.pad.opset19.int32"]' in tables
    ids = sorted({r["feature"] for r in VARIANTS})
    m = parse('schema_version = 1\n[providers.WebGPU]\nname = "WebGpuExecutionProvider"\n'
              '[features."onnx.*"]\nWebGPU = "supported"\n' + tables, "m.toml", feature_ids=ids)
    got = {fid: m.features[fid]["WebGPU"].status for fid in ids}
    want = {r["feature"]: {"PASS": "supported", "NAN": got[r["feature"]]}.get(r["outcome"], "unsupported")
            for r in VARIANTS}
    assert got == want
    assert "PASS 1 (runs in this type)" in tables
