"""The HTML report: made from one real run (CPU, a CPU EP made to ignore its input, an
EP that is not there), checked as text and loaded in a real headless Chromium.

The browser tests are skipped, with the reason, when no Chromium is installed
(``apt-get install chromium``; ``.ci/run`` installs it). Each browser test writes a
screenshot under ``$EPAUDIT_ARTIFACTS`` (default ``.epaudit/artifacts``) and prints its path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import browser
import pytest
from click.testing import CliRunner
from conftest import TODAY

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.load import parse
from epaudit.report import FORMATS
from epaudit.report.html import data

MATRIX = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["DEAF"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.DEAF]
    name = "CPUExecutionProvider"
    inject_fault = "ignore"
    [providers.GONE]
    name = "WebGpuExecutionProvider"
    python = "$EPAUDIT_TEST_NEVER_SET"
    [features."gqa.softcap"]
    CPU = "supported"
    DEAF = "supported"
    [features."gqa.dtype.bfloat16"]
    CPU = { status = "unsupported", issue = "https://github.com/microsoft/onnxruntime/issues/28768", until = 2027-06-30, reason = "no bf16 kernel" }
    DEAF = { status = "unsupported", issue = "https://github.com/microsoft/onnxruntime/issues/28768", until = 2027-06-30 }
    ''')
FEATURES = [BY_ID["gqa.softcap"], BY_ID["gqa.dtype.bfloat16"], BY_ID["attention.basic"]]
HOSTILE = '</script><img src=x onerror="document.title=\'pwned\'"><b>&amp;'
ARTIFACTS = Path(os.environ.get("EPAUDIT_ARTIFACTS", Path(__file__).resolve().parent.parent / ".epaudit" / "artifacts"))

needs_browser = pytest.mark.skipif(browser.find() is None,
                                   reason="no Chromium installed (apt-get install chromium): the HTML report "
                                          "is not loaded in a browser here")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "caps.toml"
    path.write_text(MATRIX)
    return run(parse(MATRIX, str(path)), features=FEATURES, today=TODAY)


@pytest.fixture(scope="module")
def hostile(result):
    """The run with markup in an ORT message (summary and evidence) and in the matrix path."""
    key = ("gqa.softcap", "DEAF")
    c = result.results[key]
    bad = dataclasses.replace(c, summary=HOSTILE, evidence={**c.evidence, "error": {"stage": "run", "message": HOSTILE}})
    return dataclasses.replace(result, results={**result.results, key: bad}, matrix_path=HOSTILE)


@pytest.fixture(scope="module")
def page(result, tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(FORMATS["html"](result), encoding="utf-8")
    return path


def test_the_run_is_what_the_report_is_made_from(result):
    assert result.results[("gqa.softcap", "CPU")].outcome is Outcome.PASS
    assert result.results[("gqa.softcap", "DEAF")].outcome is Outcome.IGNORED
    assert result.results[("gqa.dtype.bfloat16", "CPU")].outcome is Outcome.REJECTED
    assert result.results[("gqa.softcap", "GONE")].outcome is Outcome.UNAVAILABLE
    assert result.gate.exit_code == 1


def test_data_block_holds_every_cell_with_its_outcome_and_findings(result):
    d = data(result)
    assert d["features"] == [f.id for f in FEATURES]
    assert [e["alias"] for e in d["eps"]] == ["CPU", "DEAF", "GONE"]
    ops = {name: [d["features"][i] for i in members] for name, members in d["ops"]}
    assert ops["com.microsoft.GroupQueryAttention"] == ["gqa.softcap", "gqa.dtype.bfloat16"]
    deaf = d["cells"][0][1]
    assert d["outcomes"][deaf[0]] == "IGNORED" and d["verdicts"][deaf[1]] == "failed"
    assert {d["kinds"][k] for k, failing, _ in deaf[4] if failing} >= {"silent"}
    gap = d["cells"][1][0]  # bf16 on CPU: declared unsupported, refused loudly
    assert d["verdicts"][gap[1]] == "declared_gap"
    assert "28768" in d["decl"][gap[3]]
    assert "Could not find an implementation" in gap[5]["error"]
    passed = d["cells"][0][0]
    assert "probe" in passed[5]["placement"] and "worst" in passed[5] and "raw" not in passed[5]


def test_page_is_self_contained_and_escapes_every_text(hostile):
    text = FORMATS["html"](hostile)
    # One file: no external script, style, font or image, and a CSP that forbids fetching.
    assert not re.search(r'<(script|link|img|iframe)[^>]*\s(src|href)=', text)
    assert "default-src 'none'" in text
    assert "http://" not in text.split('id="epaudit-data"')[0].replace("http://www.w3.org", "")
    # The hostile text appears nowhere as markup: escaped in HTML, \\u-escaped in the data.
    assert "<img" not in text and "</script><img" not in text
    assert "&lt;/script&gt;&lt;img" in text  # the matrix path, escaped server-side
    blocks = re.findall(r'<script type="application/json" id="epaudit-data">(.*?)</script>', text, re.S)
    assert len(blocks) == 1 and json.loads(blocks[0])["cells"][0][1][2] == HOSTILE  # decoded intact

    class Tags(HTMLParser):
        seen: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.seen.append(tag)

    p = Tags()
    p.feed(text)
    assert "img" not in p.seen and p.seen.count("script") == 2


def test_coverage_is_rendered_generically_when_the_result_has_it(result):
    cov = {"CPU": {"operators": 2, "kernels": [{"op": "Attention", "opset": 23}, {"op": "GroupQueryAttention", "opset": 1}],
                   "ratio": 0.5}, "DEAF": {"note": "<i>not measured</i>"}}
    r = dataclasses.replace(result, coverage=cov)
    text = FORMATS["html"](r)
    section = text[text.index('<section id="coverage">'):text.index("</section>")]
    assert section.count('class="cov-ep"') == 2 and "GroupQueryAttention" in section and ">0.5<" in section
    assert "&lt;i&gt;not measured&lt;/i&gt;" in section
    assert 'id="coverage"' not in FORMATS["html"](dataclasses.replace(result, coverage={}))


def test_cli_writes_html_beside_json_for_a_run_and_a_fleet_merge(tmp_path):
    caps = tmp_path / "caps.toml"
    caps.write_text(MATRIX)
    saved, page = tmp_path / "run.json", tmp_path / "run.html"
    r = CliRunner().invoke(main, ["check", "--matrix", str(caps), "--ep", "CPU", "--feature", "gqa.softcap",
                                  "--format", "json", "--output", str(saved), "--report", f"html:{page}"])
    assert r.exit_code == 0, r.output
    assert page.read_text().startswith("<!DOCTYPE html>") and "gqa.softcap" in page.read_text()
    merged = tmp_path / "merged.html"
    r = CliRunner().invoke(main, ["check", "--matrix", str(caps), "--results", str(saved), "--format", "html",
                                  "--output", str(merged), "--feature", "gqa.softcap"])
    assert r.exit_code == 0, r.output
    assert "merged from 1 report(s)" in merged.read_text()


def _cells(dom: str, feature: str) -> list[str]:
    row = re.search(rf'<tr class="feat" data-feature="{re.escape(feature)}"[^>]*>(.*?)</tr>', dom, re.S)
    assert row, f"no row for {feature}"
    return re.findall(r'<td class="c ([^"]*)"', row.group(1))


def _hidden(dom: str, feature: str) -> bool:
    return bool(re.search(rf'<tr class="feat" data-feature="{re.escape(feature)}"[^>]*hidden', dom))


def _shot(page: Path, fragment: str, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / name
    browser.screenshot(browser.url(page, fragment), png)
    print(f"screenshot: {png}")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return png


@needs_browser
def test_browser_renders_heat_map_rows_and_colours(page):
    dom, _ = browser.dump_dom(browser.url(page, "expand=1"))
    assert 'data-ready="1"' in dom, "the report's script did not finish"
    feats = re.findall(r'<tr class="feat" data-feature="([^"]+)"', dom)
    assert sorted(feats) == sorted(f.id for f in FEATURES)
    assert _cells(dom, "gqa.softcap") == ["o-PASS", "o-IGNORED failing", "o-UNAVAILABLE"]
    assert _cells(dom, "gqa.dtype.bfloat16")[0] == "o-REJECTED gap"
    assert not any(_hidden(dom, f.id) for f in FEATURES)
    # Operator rows summarise their features per EP: the worst outcome, failing marked.
    op = re.search(r'<tr class="op open" data-op="1">(.*?)</tr>', dom, re.S).group(1)
    assert "GroupQueryAttention" in op and 'class="c o-IGNORED failing"' in op
    assert "1 of 3 feature(s)" not in dom and "3 of 3 feature(s) shown" in dom
    _shot(page, "expand=1&cell=gqa.softcap|DEAF", "html-report.png")


@needs_browser
def test_browser_filters_by_outcome_and_ep(page, result):
    dom, _ = browser.dump_dom(browser.url(page, "outcome=REJECTED"))
    rejected = {f for (f, _), c in result.results.items() if c.outcome is Outcome.REJECTED}
    assert rejected and len(rejected) < len(FEATURES)
    for f in FEATURES:
        assert _hidden(dom, f.id) is (f.id not in rejected), f.id
    assert f"{len(rejected)} of 3 feature(s) shown" in dom
    dom, _ = browser.dump_dom(browser.url(page, "ep=CPU&kind=silent"))
    assert "0 of 3 feature(s) shown" in dom  # CPU has no silent finding: the filter empties the map
    assert re.search(r'<th class="col" data-ep="1"[^>]*hidden', dom)  # DEAF's column hidden


@needs_browser
def test_browser_shows_escaped_evidence_and_never_runs_it(hostile, tmp_path):
    page = tmp_path / "hostile.html"
    page.write_text(FORMATS["html"](hostile), encoding="utf-8")
    dom, _ = browser.dump_dom(browser.url(page, "cell=gqa.softcap|DEAF"))
    assert 'data-ready="1"' in dom
    assert "<title>epaudit: FAIL" in dom and "pwned" not in dom.split("</title>")[0]
    detail = dom[dom.index('<aside id="detail"'):]
    assert "&lt;/script&gt;&lt;img" in detail and "<img" not in detail
    assert 'href="https://github.com/microsoft/onnxruntime/issues/28768"' not in detail  # softcap: supported
    dom, _ = browser.dump_dom(browser.url(page, "cell=gqa.dtype.bfloat16|CPU"))
    detail = dom[dom.index('<aside id="detail"'):]
    assert 'href="https://github.com/microsoft/onnxruntime/issues/28768"' in detail
    assert "Could not find an implementation" in detail


def test_conformance_cases_group_under_their_operator(result):
    from epaudit.contract.results import ConformanceInfo

    conf = dataclasses.replace(result, conformance=ConformanceInfo(("Attention",), "1.23.2", False, 3, {}))
    assert [name for name, _ in data(conf)["ops"]] == ["Attention"]  # not one row per case name
