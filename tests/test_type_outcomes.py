"""tools/type_outcomes.py: per-type outcome tables of a saved run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "type_outcomes", Path(__file__).resolve().parents[1] / "tools" / "type_outcomes.py")
tool = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tool)

RESULTS = [
    {"feature": "onnx.Abs.input:X=zeros.abs.opset13", "ep": "WebGPU", "outcome": "PASS"},
    {"feature": "onnx.Abs.input:X=zeros.abs.opset13.float16", "ep": "WebGPU", "outcome": "PASS"},
    {"feature": "onnx.Abs.input:X=zeros.abs.opset13.int8", "ep": "WebGPU", "outcome": "FALLBACK"},
    {"feature": "onnx.Acos.input:input=zeros.acos_example.opset22.float16", "ep": "WebGPU", "outcome": "CRASH",
     "summary": "worker killed by SIGSEGV in the control case"},
    {"feature": "onnx.Abs.input:X=zeros.abs.opset13.int8", "ep": "QNN", "outcome": "PASS"},
    {"feature": "gqa.softcap", "ep": "WebGPU", "outcome": "IGNORED"},
]


def test_rows_count_outcomes_per_type_of_one_ep():
    rows = tool.rows(RESULTS, "WebGPU")
    assert {t: dict(c) for t, c in rows.items()} == {
        "base": {"PASS": 1}, "float16": {"PASS": 1, "CRASH": 1}, "int8": {"FALLBACK": 1}}
    table = tool.table(rows).splitlines()
    assert table[2] == "| base | 1 | 1 | 0 | 0 | 0 | 0 | none |"
    assert "| float16 | 2 | 1 | 0 | 0 | 0 | 0 | 1 CRASH |" in table


def test_silent_lists_the_cells_to_triage_and_bad_input_is_one_line(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": RESULTS}))
    assert tool.main([str(run), "--ep", "WebGPU", "--silent"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["CRASH\tonnx.Acos.input:input=zeros.acos_example.opset22.float16\t"
                   "worker killed by SIGSEGV in the control case"]
    assert tool.main([str(tmp_path / "none.json"), "--ep", "WebGPU"]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and err.count("\n") == 1
