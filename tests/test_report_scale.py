"""Reports of a thousand features: the terminal summarises before it lists, ``--all``
lists every row, Markdown stays under GitHub's limit with a note, JSON and JUnit carry
every cell.

Formatters are pure (data in, string out), so the large runs here are built from data:
a run over 1000 generated-style ids, gated through a glob matrix by the real gate. The
``--all`` option is checked end to end with real probes on the CPU EP, with the
threshold lowered so two features count as "many".
"""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from conftest import TODAY

from epaudit.catalog import operator
from epaudit.cli import main
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.results import Classified, EPInfo, RunResult
from epaudit.gate.rules import apply, describe
from epaudit.matrix.load import parse
from epaudit.report import FORMATS, markdown, summary

EPS = ("CPU", "CUDA", "WebGPU", "QNN", "OpenVINO")
LIVE = ("CPU", "CUDA")


def ids(n: int) -> list[str]:
    """Ten features per operator, ids shaped like the generated catalog's."""
    return [f"onnx.Op{i // 10:03d}.attr{i % 3}.test_case_{i}" for i in range(n)]


def matrix_text(n: int) -> str:
    text = ["schema_version = 1", "[gate]", 'reference = ["CPU"]', 'gated = ["CUDA"]']
    names = {"WebGPU": "WebGpu"}  # ORT's own spelling of the provider name
    text += [f'[providers.{a}]\nname = "{names.get(a, a)}ExecutionProvider"' for a in EPS]
    text += ['[features."onnx.*"]', 'CPU = "supported"', 'CUDA = "supported"']
    # Op000-Op009 governed gaps on CUDA; Op010's CUDA cells undeclared (exact CPU keys only)
    text += ['[features."onnx.Op00?.*"]',
             'CUDA = { status = "unsupported", issue = "https://example.org/1", until = 2099-01-01 }']
    return "\n".join(text) + "\n"


def outcome_of(i: int, alias: str, decl) -> Outcome:
    if alias not in LIVE:
        return Outcome.UNAVAILABLE
    if alias == "CPU":
        return Outcome.REJECTED if i % 50 == 7 else Outcome.IGNORED if i % 333 == 5 else Outcome.PASS
    return Outcome.REJECTED if decl is not None and decl.status == "unsupported" else Outcome.PASS


def big_run(n: int = 1000, undeclared_op: str | None = None) -> RunResult:
    fids = ids(n)
    text = matrix_text(n)
    m = parse(text, "m.toml", feature_ids=fids)
    if undeclared_op:  # that operator's CUDA cells left undeclared: drop them from the view
        m.features.update({f: {"CPU": m.features[f]["CPU"]} for f in fids if f".{undeclared_op}." in f})
    eps = {a: EPInfo(a, f"{a}ExecutionProvider", a in LIVE, reason="" if a in LIVE else f"${a} is not set")
           for a in EPS}
    results = {(f, a): Classified(f, a, outcome_of(i, a, m.declaration(f, a)), f"seen on {a}")
               for i, f in enumerate(fids) for a in EPS}
    gate = apply(m, eps, results, fids, today=TODAY)
    declared = {(f, a): describe(d) for f in fids for a in EPS if (d := m.declaration(f, a)) is not None}
    return RunResult("m.toml", tuple(fids), eps, results, gate, {"epaudit": "test"}, "test", declared=declared)


@pytest.fixture(scope="module")
def run1000():
    return big_run(1000, undeclared_op="Op010")


def grid_rows(text: str) -> list[list[str]]:
    """The body rows of every grid in a plain table report, as stripped cells."""
    return [[c.strip() for c in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]


def test_a_thousand_features_summarise_per_operator_then_list_what_is_not_a_pass(run1000):
    text = FORMATS["table"](run1000)
    rows = grid_rows(text)
    by_op = {r[0]: r for r in rows if r[0].startswith("ai.onnx.")}
    assert len(by_op) == 100 and set(by_op) == {operator(f) for f in run1000.features}
    # Counts per operator and EP, from the run itself.
    for op in ("ai.onnx.Op000", "ai.onnx.Op006", "ai.onnx.Op010", "ai.onnx.Op099"):
        fids = [f for f in run1000.features if operator(f) == op]
        for col, alias in enumerate(EPS, start=2):
            seen: dict[Outcome, int] = {}
            for f in fids:
                o = run1000.results[(f, alias)].outcome
                seen[o] = seen.get(o, 0) + 1
            want = ", ".join(f"{n} {o.value}" for o, n in sorted(seen.items(), key=lambda kv: list(Outcome).index(kv[0])))
            assert by_op[op][1] == str(len(fids)) and by_op[op][col] == want, (op, alias)
    assert by_op["ai.onnx.Op000"][2:5] == ["8 PASS, 1 REJECTED, 1 IGNORED", "10 REJECTED", "10 UNAVAILABLE"]
    assert by_op["ai.onnx.Op000"][-1] == "2 fail" and by_op["ai.onnx.Op010"][-1] == "1 fail, 10 warn"
    # Then exactly the rows with a cell that is not a PASS on a live EP, or a failing finding.
    listed = [r[0] for r in rows if r[0].startswith("onnx.")]
    want = [f for i, f in enumerate(run1000.features)
            if i % 50 == 7 or i % 333 == 5 or operator(f) in {f"ai.onnx.Op00{k}" for k in range(10)}]
    assert listed == want == summary.notable(run1000)
    assert f"Not a pass, or a failing finding: {len(want)} of 1000 feature row(s); not live, not listed: " \
           "WebGPU, QNN, OpenVINO (--all lists every row)" in text
    # Not-live columns are left out of the listed rows; the silent cells are marked.
    assert next(r for r in rows if r[0] == "onnx.Op000.attr2.test_case_5")[1:] == ["IGNORED ≠ supported", "REJECTED"]
    # Undeclared warnings are counted, not listed one per line; failing findings are listed.
    assert ("warn undeclared 10 cell(s) on CUDA the matrix does not declare (a glob key declares many; "
            "--strict fails them; --all lists each)\n") in text
    assert not re.search(r"warn undeclared onnx\.", text)
    fails = [f for f in run1000.gate.findings if f.failing]
    assert fails and all(f"FAIL {f.kind.value} {f.feature_id} on {f.ep} (matrix line {f.line})" in text for f in fails)
    assert len(text.splitlines()) < 100 + len(want) + len(fails) + 30  # not 1000 rows


def test_all_lists_every_row_and_every_finding(run1000):
    text = FORMATS["table"](run1000, all_rows=True)
    rows = grid_rows(text)
    assert [r[0] for r in rows] == list(run1000.features)
    assert rows[0][1:] == ["PASS", "REJECTED", "UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE"]
    assert "Summary:" not in text
    undeclared = [f for f in run1000.gate.findings if f.kind is FindingKind.UNDECLARED]
    assert len(undeclared) == 10 and all(f"warn undeclared {f.feature_id} on CUDA" in text for f in undeclared)


@pytest.mark.parametrize("n", [1, summary.FULL_TABLE_MAX])
def test_a_run_of_few_features_keeps_the_full_table(n):
    r = big_run(n)
    text = FORMATS["table"](r)
    assert text == FORMATS["table"](r, all_rows=True)
    assert [row[0] for row in grid_rows(text)] == list(r.features)


def test_details_of_a_large_probe_run_cover_only_cells_that_are_not_a_pass(run1000):
    text = FORMATS["table"](run1000, details=True)
    detailed = set(re.findall(r"^(onnx\.\S+) on (\w+): ", text, flags=re.M))
    want = {(f, a) for (f, a), c in run1000.results.items()
            if c.outcome is not Outcome.PASS and run1000.eps[a].live}
    assert detailed == want


def test_markdown_summary_first_and_every_row_within_the_limit(run1000):
    text = markdown.format(run1000)
    assert len(text.encode("utf-8")) <= markdown.MAX_BYTES
    assert text.index("### Summary: 1000 features by operator") < text.index("### Not a pass") \
        < text.index("<details><summary>All 1000 feature rows</summary>")
    assert "| `ai.onnx.Op001` | 10 | ✅ 10 | ⛔ 10 | ➖ 10 | ➖ 10 | ➖ 10 | — |" in text
    assert "| `ai.onnx.Op000` | 10 | ✅ 8 ⛔ 1 🙈 1 | ⛔ 10 | ➖ 10 | ➖ 10 | ➖ 10 | **2 failing** |" in text
    full = text[text.index("<details><summary>All 1000"):]
    full_rows = re.findall(r"^\| `(onnx\.[^`]+)` \|", full, flags=re.M)
    assert full_rows == list(run1000.features)
    assert "left out" not in text


def test_markdown_cut_says_how_many_rows_and_where_the_full_report_is(run1000):
    limit = 60_000
    text = markdown.format(run1000, limit=limit, full_report="out/epaudit.json")
    assert len(text.encode("utf-8")) <= limit
    full = text[text.index("<details><summary>All 1000"):]
    kept = len(re.findall(r"^\| `onnx\.", full, flags=re.M))
    assert 0 < kept < 1000
    assert (f"| … {1000 - kept} more feature row(s) left out to stay under {limit} bytes (GitHub's "
            "step-summary limit); the full report is `out/epaudit.json` |") in text
    assert "</details>" in text[text.index("more feature row(s) left out"):]  # the fold is closed
    no_path = markdown.format(run1000, limit=limit)
    assert "the JSON and JUnit reports (`--report json:FILE`) have all of it" in no_path


def test_json_and_junit_carry_every_cell(run1000):
    data = json.loads(FORMATS["json"](run1000))
    assert len(data["results"]) == 5000 and data["features"] == list(run1000.features)
    root = ET.fromstring(FORMATS["junit"](run1000).encode("utf-8"))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 5000 and {c.get("classname") for c in cases} == {operator(f) for f in run1000.features}


# ----------------------------------------------------------------------------- --all end to end
CPU_ONLY = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [features."gqa.softcap*"]
    CPU = "supported"
    ''')


def test_all_option_on_check_and_probe_with_real_probes(tmp_path, monkeypatch):
    """Two real features, the threshold at one: without --all the summary and no rows
    (both pass); with --all both rows."""
    monkeypatch.setattr(summary, "FULL_TABLE_MAX", 1)
    m = tmp_path / "m.toml"
    m.write_text(CPU_ONLY)
    args = ["--matrix", str(m), "--feature", "gqa.softcap*"]
    brief = CliRunner().invoke(main, ["check", *args])
    assert brief.exit_code == 0, brief.output
    assert "Summary: 1 operator(s), 2 feature(s)" in brief.output
    assert "│ com.microsoft.GroupQueryAttention │ 2        │ 2 PASS │ —        │" in brief.output
    assert "Not a pass, or a failing finding: 0 of 2 feature row(s)" in brief.output
    assert "│ gqa.softcap" not in brief.output
    full = CliRunner().invoke(main, ["check", *args, "--all"])
    assert full.exit_code == 0 and "Summary:" not in full.output
    assert [r[0] for r in grid_rows(full.output)] == ["gqa.softcap", "gqa.softcap.with_bias"]
    probe = CliRunner().invoke(main, ["probe", "--ep", "CPU", *args])
    assert probe.exit_code == 0 and "gqa.softcap on CPU: PASS" not in probe.output
    probe = CliRunner().invoke(main, ["probe", "--ep", "CPU", *args, "--all"])
    assert probe.exit_code == 0 and "gqa.softcap on CPU: PASS" in probe.output
