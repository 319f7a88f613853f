"""`epaudit skips audit`: an ORT-style filter file against the generated Attention cases.

The fixture ``fixtures/onnx_backend_test_series_filters.jsonc`` was written for these
tests; each of its entries exercises one rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epaudit.cli import main
from epaudit.conformance.filters import FilterFileError, audit, parse_filters
from epaudit.contract.outcomes import FindingKind

FIXTURE = str(Path(__file__).parent / "fixtures" / "onnx_backend_test_series_filters.jsonc")
NAMES = ["test_attention_4d", "test_attention_4d_expanded", "test_attention_4d_causal_fp16",
         "test_attention_4d_with_past_and_present", "test_attention_4d_with_past_and_present_qk_matmul",
         "test_attention_4d_with_past_and_present_qk_matmul_bias",
         "test_attention_4d_diff_heads_mask4d_padded_kv", "test_attention_4d_attn_mask_3d_causal_expanded",
         "test_attention_3d_causal_bf16", "test_attention_4d_with_qk_matmul_softmax"]


def run_audit(max_matches=2, opset=28):
    return audit(FIXTURE, NAMES, ops=["Attention"], onnx_version="test", opset=opset, max_matches=max_matches)


def test_entries_with_scope_comments_issue_refs_and_lines():
    a = run_audit()
    by = {e.pattern: e for e in a.entries}
    e = by["^test_attention_4d_diff_heads_mask4d_padded_kv_cpu"]  # ORT's runner strips the _cpu suffix
    assert e.matches == ("test_attention_4d_diff_heads_mask4d_padded_kv",) and e.line == 6
    assert e.scope == "all EPs" and e.issues == ("#27542",)
    assert by["^test_attention_4d_causal_fp16"].issues == ()
    assert "renamed" in by["^test_attention_4d_softcap_with_nan_mask"].comment  # the comment line above it
    cuda = by["^test_attention_4d_with_qk_matmul_softmax"]
    assert cuda.scope == "CUDA" and cuda.issues == ("microsoft/onnxruntime#28994",)
    pair = by["^test_attention_3d_causal_bf16"]
    assert pair.opset == "^opset2[3-9]" and pair.active and pair.matches == ("test_attention_3d_causal_bf16",)
    old = by["^test_attention_3d_transpose_verification"]
    assert not old.active and old.matches == ()
    assert len(a.entries) == 8  # the "tolerance" table is not a skip-list


def test_each_finding_kind():
    a = run_audit()
    found = [(f.kind, f.entry.line) for f in a.findings]  # in file order
    assert found == [(FindingKind.DEAD, 9), (FindingKind.OVERBROAD, 10), (FindingKind.MISSCOPED, 11)]
    assert a.exit_code == 1
    misscoped = [f for f in a.findings if f.kind is FindingKind.MISSCOPED][0]
    assert "webgpu" in misscoped.message and "current_failing_tests_WEBGPU" in misscoped.message
    # the bound is what makes an entry overbroad: 3 matches pass a bound of 3
    assert FindingKind.OVERBROAD not in {f.kind for f in run_audit(max_matches=3).findings}


def test_an_opset_pair_applies_only_to_its_onnx():
    a = run_audit(opset=19)
    by = {e.pattern: e for e in a.entries}
    assert not by["^test_attention_3d_causal_bf16"].active
    assert by["^test_attention_3d_transpose_verification"].active
    assert (FindingKind.DEAD, 13) in {(f.kind, f.entry.line) for f in a.findings}


@pytest.mark.parametrize("text, words", [
    ('{"k": [\n  "^a",\n  5\n]}', ":3: k: an entry must be a regex string"),
    ('{"k": [\n  "^a(",\n]}', ":2: k: bad regex"),
    ('{"k": [\n  "^a"\n', "expected"),
    ('["^a"]', ":1: the file must hold one JSON object"),
    ('{"k": ["^a"]} // fine\n/* open', ":2: unterminated /* comment"),
    ('{\n "current_failing_tests": 5\n}', ":2: current_failing_tests: must be a list"),
])
def test_bad_files_are_one_line_errors_with_lines(text, words):
    with pytest.raises(FilterFileError) as info:
        parse_filters(text, "f.jsonc")
    assert words in str(info.value) and str(info.value).startswith("f.jsonc") and "\n" not in str(info.value)


def test_cli_lists_findings_and_writes_json(tmp_path, monkeypatch, backend_cases, cache_dir):
    monkeypatch.setenv("EPAUDIT_CACHE_DIR", str(cache_dir))
    r = CliRunner().invoke(main, ["skips", "audit", FIXTURE, "--max-matches", "5"])
    assert r.exit_code == 1, r.output
    for words in ("dead", "overbroad", "misscoped", "verdict: FAIL: 3 finding(s)"):
        assert words in r.output
    out = tmp_path / "a.json"
    r = CliRunner().invoke(main, ["skips", "audit", FIXTURE, "--max-matches", "5", "--format", "json",
                                  "--output", str(out)])
    assert r.exit_code == 1
    data = json.loads(out.read_text())
    assert sorted(f["kind"] for f in data["findings"]) == ["dead", "misscoped", "overbroad"]
    assert data["generated"] == len(backend_cases)
    bad = tmp_path / "bad.jsonc"
    bad.write_text('{"current_failing_tests": [\n "^x(" \n]}')
    r = CliRunner().invoke(main, ["skips", "audit", str(bad)])
    assert r.exit_code == 2 and r.output.strip().startswith(f"epaudit: error: {bad}:2:")
