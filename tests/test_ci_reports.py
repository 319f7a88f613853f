"""CI-facing reports from one real run: JUnit (schema-validated), Markdown (size-bounded),
GitHub annotations, several reports in one run, the JSON Schema of the JSON report."""

from __future__ import annotations

import dataclasses
import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema
from click.testing import CliRunner
from conftest import TODAY

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.cli import main
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.results import GateResult
from epaudit.gate.rules import apply
from epaudit.matrix.load import parse
from epaudit.report import FORMATS, github, junit, markdown
from epaudit.report.json import to_dict
from epaudit.saved.read import schema

XSD = xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd")))

# CPU is the reference; BROKEN is the CPU EP made to refuse (ORT's own NOT_IMPLEMENTED);
# GONE names an interpreter that is not set, so it is UNAVAILABLE. BROKEN's softcap cell
# is left undeclared: a failing lag plus an undeclared warning on one cell.
MATRIX = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["BROKEN"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.BROKEN]
    name = "CPUExecutionProvider"
    inject_fault = "refuse"
    [providers.GONE]
    name = "WebGpuExecutionProvider"
    python = "$EPAUDIT_TEST_NEVER_SET"
    if_unset = "unavailable"
    [features."gqa.softcap"]
    CPU = "supported"
    GONE = "supported"
    [features."gqa.dtype.bfloat16"]
    CPU = { status = "unsupported", issue = "https://github.com/microsoft/onnxruntime/issues/28768", until = 2027-06-30, reason = "no bf16 kernel" }
    BROKEN = { status = "unsupported", issue = "https://x.invalid/1", until = 2027-06-30 }
    ''')
FEATURES = [BY_ID["gqa.softcap"], BY_ID["gqa.dtype.bfloat16"]]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "caps.toml"
    path.write_text(MATRIX)
    return parse(MATRIX, str(path))


@pytest.fixture(scope="module")
def result(matrix):
    return run(matrix, features=FEATURES, today=TODAY)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_run_is_what_the_reports_are_made_from(result):
    # The facts every report below relies on, from real ORT sessions.
    assert result.results[("gqa.softcap", "CPU")].outcome is Outcome.PASS
    assert result.results[("gqa.softcap", "BROKEN")].outcome is Outcome.REJECTED
    assert result.results[("gqa.dtype.bfloat16", "CPU")].outcome is Outcome.REJECTED
    assert result.results[("gqa.softcap", "GONE")].outcome is Outcome.UNAVAILABLE
    assert {(f.kind, f.ep, f.failing) for f in result.gate.findings} == {
        (FindingKind.LAG, "BROKEN", True), (FindingKind.UNDECLARED, "BROKEN", False)}


# ----------------------------------------------------------------------------- JUnit
def test_junit_validates_and_maps_every_cell(result, matrix):
    text = junit.format(result)
    XSD.validate(text)
    root = ET.fromstring(text)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["CPU", "BROKEN", "GONE"]
    cases = {(s, c.get("name")): c for s, el in suites.items() for c in el.iter("testcase")}
    assert len(cases) == 6
    for (suite, fid), case in cases.items():
        assert case.get("classname") == "com.microsoft.GroupQueryAttention"
        assert case.get("file") == matrix.path

    passed = cases[("CPU", "gqa.softcap")]
    assert list(passed) == []  # plain: an earned PASS

    gap = cases[("CPU", "gqa.dtype.bfloat16")].find("skipped")
    assert gap.get("type") == "epaudit.declared_gap"
    assert "issues/28768" in gap.get("message") and "NOT_IMPLEMENTED" in gap.get("message")

    lag = cases[("BROKEN", "gqa.softcap")]
    (failure,) = lag.findall("failure")
    assert failure.get("type") == "epaudit.lag"
    assert "Could not find an implementation for GroupQueryAttention(1)" in failure.text  # the evidence
    assert lag.get("line") == str(line_of(MATRIX, '[features."gqa.softcap"]'))
    assert "warning undeclared" in lag.find("system-out").text

    gone = cases[("GONE", "gqa.softcap")].find("skipped")
    assert gone.get("type") == "epaudit.unavailable" and "EPAUDIT_TEST_NEVER_SET" in gone.get("message")

    assert (suites["BROKEN"].get("tests"), suites["BROKEN"].get("failures"), suites["BROKEN"].get("skipped")) \
        == ("2", "1", "1")
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("6", "1", "4")


def test_junit_required_ep_not_live_is_a_failing_case(result, matrix):
    gated = dataclasses.replace(result, gate=apply(matrix, result.eps, result.results, result.features,
                                                   require=["GONE"], today=TODAY))
    text = junit.format(gated)
    XSD.validate(text)
    case = next(c for c in ET.fromstring(text).iter("testcase") if c.get("name") == "GONE is live")
    assert case.find("failure").get("type") == "epaudit.incomplete"
    assert case.get("line") == str(line_of(MATRIX, "[providers.GONE]"))


def test_junit_survives_control_characters_in_ort_messages(result):
    key = ("gqa.softcap", "BROKEN")
    dirty = dataclasses.replace(result.results[key], summary="\x1b[31mNOT_IMPLEMENTED\x00\x07 here")
    text = junit.format(dataclasses.replace(result, results={**result.results, key: dirty}))
    XSD.validate(text)  # raw control characters would make the XML unreadable
    assert "NOT_IMPLEMENTED" in text and "\x1b" not in text


def test_the_xsd_rejects_what_ci_would_reject(result):
    # The schema is not a rubber stamp: a failure before a skipped, or a count that is
    # not a number, is refused.
    text = junit.format(result)
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        XSD.validate(text.replace('tests="6"', 'tests="six"'))
    bad = ('<testsuites><testsuite name="x" tests="1"><testcase name="t"><failure/><skipped/>'
           '</testcase></testsuite></testsuites>')
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        XSD.validate(bad)


# ----------------------------------------------------------------------------- Markdown
def test_markdown_verdict_first_table_and_details(result):
    text = markdown.format(result)
    first = text.splitlines()[0]
    assert first.startswith("## ❌ epaudit: FAIL") and "(exit 1)" in first
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert rows["`gqa.softcap`"].split("|")[2:5] == [" ✅ PASS ", " **⛔ REJECTED (lag)** ", " ➖ UNAVAILABLE "]
    assert "⛔ REJECTED (gap)" in rows["`gqa.dtype.bfloat16`"]
    assert text.count("<details>") == len(result.gate.findings) == 2
    assert "Could not find an implementation for GroupQueryAttention(1)" in text


def _many_findings(result, n: int, message_chars: int):
    base = result.gate.findings[0]
    findings = tuple(dataclasses.replace(base, message=f"#{i} " + "x" * message_chars) for i in range(n))
    return dataclasses.replace(result, gate=GateResult(findings, 1, result.gate.verdict))


def test_markdown_stays_under_github_summary_limit(result):
    big = _many_findings(result, 3000, 600)  # ~2 MiB of findings uncut
    text = markdown.format(big)
    assert len(text.encode("utf-8")) <= markdown.MAX_BYTES == 1024 * 1024
    shown = text.count("<details>")
    assert 0 < shown < 3000
    assert f"… {3000 - shown} more finding(s) left out" in text
    assert text.splitlines()[0].startswith("## ❌ epaudit: FAIL")  # the verdict always survives


def test_markdown_small_limit_cuts_rows_too(result):
    text = markdown.format(_many_findings(result, 10, 100), limit=1200)
    assert len(text.encode("utf-8")) <= 1200
    assert "left out" in text or "cut at 1200 bytes" in text


# ----------------------------------------------------------------------------- annotations
def test_github_annotations_point_at_the_matrix_line(result, matrix):
    lines = github.format(result).splitlines()
    assert len(lines) == 2
    err = next(line for line in lines if line.startswith("::error "))
    want_line = line_of(MATRIX, '[features."gqa.softcap"]')
    assert err.startswith(f"::error file={matrix.path},line={want_line},"
                          "title=epaudit lag%3A gqa.softcap on BROKEN::REJECTED while reference CPU pass(es)")
    assert any(line.startswith("::warning ") and "undeclared" in line for line in lines)


def test_github_escaping():
    assert github.escape_data("50%\r\nnext: a,b") == "50%25%0D%0Anext: a,b"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_embedded_matrix_gets_no_file_property(result):
    text = github.format(dataclasses.replace(result, matrix_path="<embedded capabilities.toml>"))
    assert "file=" not in text and text.startswith("::error title=")


# ----------------------------------------------------------------------------- JSON Schema
def test_json_report_validates_against_the_shipped_schema(result):
    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.validate(json.loads(FORMATS["json"](result)), schema())


def test_schema_enums_are_the_code_enums():
    defs = schema()["$defs"]
    assert defs["outcome"]["enum"] == [o.value for o in Outcome]
    assert defs["finding"]["properties"]["kind"]["enum"] == [k.value for k in FindingKind]


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("results"),
    lambda d: d["eps"][0].__setitem__("live", "yes"),
    lambda d: d["results"][0].__setitem__("outcome", "PASSISH"),
    lambda d: d["findings"][0].__setitem__("line", "12"),
    lambda d: d.__setitem__("catalog_version", "1"),
])
def test_schema_rejects_wrong_shapes(result, mutate):
    doc = to_dict(result)
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema())


# ----------------------------------------------------------------------------- CLI outputs
def test_several_reports_in_one_run_and_github_integration(tmp_path, matrix):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    x, md, js = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "r.json"
    r = CliRunner(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}).invoke(
        main, ["check", "--matrix", matrix.path, "--feature", "gqa.softcap",
               "--report", f"junit:{x}", "--report", f"markdown:{md}", "--report", f"json:{js}"],
        catch_exceptions=False)
    assert r.exit_code == 1
    assert "verdict: FAIL" in r.stdout  # the table still goes to stdout
    assert any(line.startswith("::error file=") for line in r.stdout.splitlines())
    XSD.validate(x.read_text())
    assert md.read_text().startswith("## ❌ epaudit: FAIL")
    assert json.loads(js.read_text())["exit_code"] == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ epaudit: FAIL")  # appended, not replaced


def test_annotations_leave_machine_output_on_stdout_clean(matrix):
    r = CliRunner(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": ""}).invoke(
        main, ["check", "--matrix", matrix.path, "--feature", "gqa.softcap", "--format", "json"],
        catch_exceptions=False)
    assert r.exit_code == 1
    assert json.loads(r.stdout)["exit_code"] == 1
    assert "::error file=" in r.stderr


@pytest.mark.parametrize("args, words", [
    (["--report", "junit"], "--report junit: expected FORMAT:FILE"),
    (["--report", "yaml:x.yml"], "unknown format 'yaml'"),
    (["--report", "junit:same.xml", "--report", "json:same.xml"], "same.xml is the target of two reports"),
    (["--report", "junit:/proc/nope/x.xml"], "cannot write there"),
    (["--label", "h100@x"], "--label 'h100@x'"),
])
def test_report_option_errors_exit_2_before_probing(args, words):
    r = CliRunner().invoke(main, ["check", "--feature", "gqa.softcap", *args])
    assert r.exit_code == 2, r.output
    assert words in r.output and "Traceback" not in r.output
    assert "verdict" not in r.output  # nothing was probed


def test_the_outcome_grid_draws_what_a_rich_table_draws():
    """report.table.grid replaced rich.table.Table for the outcome grid (30 ms -> 1 ms on
    the default catalog): its plain text must be the table rich would draw."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from epaudit.report.table import grid

    header = ["feature", "CPU", "CUDA (not live)", "WebGPU@lavapipe"]
    rows = [["gqa.attention_bias", Text("PASS", style="bold green"), Text("UNAVAILABLE", style="dim"),
             Text("IGNORED", style="bold red") + Text(" ≠ supported", style="italic")],
            ["attention.qk_matmul_output_mode.3.fully_masked", "—", Text("REJECTED"), Text("PASS")]]

    def plain(renderable, **kw) -> str:
        buf = io.StringIO()
        Console(file=buf, width=200, no_color=True, highlight=False).print(renderable, **kw)
        return buf.getvalue()

    table = Table()
    for h in header:
        table.add_column(h, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    assert plain(grid(header, rows), soft_wrap=True) == plain(table)
