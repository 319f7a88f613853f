"""tools/declare_fallbacks.py: cells that fell back to the CPU EP and computed wrongly, declared
skip with the CPU's own deviation (or the bundled CPU kernel's, given), never an EP's own finding."""

from __future__ import annotations

import importlib.util
import json
import tomllib
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "declare_fallbacks", Path(__file__).resolve().parents[1] / "tools" / "declare_fallbacks.py")
tool = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tool)


def _r(fid, outcome, kind):
    return {"feature": fid, "ep": "WebGPU", "outcome": outcome, "summary": f"{outcome}: something",
            "evidence": {"placement_verdict": {"kind": kind}}}


def test_fallback_silent_cells_inherit_the_cpu_deviation_or_take_the_given_link(tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        'schema_version = 1\n[providers.CPU]\nname = "CPUExecutionProvider"\n'
        '[providers.WebGPU]\nname = "WebGpuExecutionProvider"\n# a comment that stays\n'
        '[features."gqa.softcap"]\nCPU = { status = "skip", issue = "https://example.org/cpu-bug", '
        'until = 2099-01-01, reason = "the CPU kernel drops it" }\n')
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"eps": [{"alias": "WebGPU", "ort_version": "1.27.0"}], "results": [
        _r("gqa.softcap", "MISMATCH", "fallback"),          # CPU declares the same deviation
        _r("gqa.position_ids", "IGNORED", "fallback"),      # the bundled CPU kernel's, given
        _r("gqa.rotary", "MISMATCH", "on_ep"),              # the EP's own: never declared here
        _r("gqa.prompt", "FALLBACK", "fallback"),           # not silent
    ]}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", "https://example.org/fixed-later",
                      "--why", "fixed in 1.28", "--into", str(matrix), "--until", "2099-01-01"]) == 0
    assert "2 cell(s) declared skip" in capsys.readouterr().err
    text = matrix.read_text()
    f = tomllib.loads(text)["features"]
    assert f["gqa.softcap"]["WebGPU"]["issue"] == "https://example.org/cpu-bug"
    assert "the CPU kernel drops it" in f["gqa.softcap"]["WebGPU"]["reason"]
    assert f["gqa.position_ids"]["WebGPU"] == {
        "status": "skip", "issue": "https://example.org/fixed-later", "until": __import__("datetime").date(2099, 1, 1),
        "reason": "skip: WebGPU (onnxruntime 1.27.0) does not take this node; the CPU EP bundled with it computes "
                  "it wrongly (IGNORED: IGNORED: something): fixed in 1.28"}
    assert "gqa.rotary" not in f and "gqa.prompt" not in f
    assert "# a comment that stays" in text


def test_a_link_the_gate_would_refuse_is_one_line_and_exit_2(tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": []}))
    assert tool.main([str(run), "--ep", "WebGPU", "--link", "TODO", "--why", "x",
                      "--into", str(tmp_path / "m.toml")]) == 2
    assert capsys.readouterr().err.startswith("declare_fallbacks: error: --link 'TODO'")
