"""The command line end to end: exit codes 0/1/2/3, one-line errors, reports written whole."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.load import load

CPU_ONLY = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["BROKEN"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.BROKEN]
    name = "CPUExecutionProvider"
    {fault}
    [features."gqa.head_sink"]
    CPU = "supported"
    BROKEN = "supported"
    ''')


def write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_exit_0_when_the_gate_passes(tmp_path):
    m = write(tmp_path, CPU_ONLY.format(fault=""))
    r = invoke("check", "--matrix", m, "--feature", "gqa.head_sink")
    assert r.exit_code == 0, r.output
    assert "verdict: PASS" in r.output and "gqa.head_sink" in r.output


def test_exit_1_on_a_failing_finding_and_json_report(tmp_path):
    m = write(tmp_path, CPU_ONLY.format(fault='inject_fault = "ignore"'))
    out = tmp_path / "report.json"
    r = invoke("check", "--matrix", m, "--feature", "gqa.head_sink", "--format", "json", "--output", str(out))
    assert r.exit_code == 1
    report = json.loads(out.read_text())
    assert report["exit_code"] == 1 and report["verdict"].startswith("FAIL")
    cell = {(x["feature"], x["ep"]): x for x in report["results"]}[("gqa.head_sink", "BROKEN")]
    assert cell["outcome"] == "IGNORED" and cell["declared"] == "supported"
    assert cell["evidence"]["control_comparison"]["output"]["match"] is True
    assert {f["kind"] for f in report["findings"]} == {"silent"}
    assert report["semantics"].startswith("epaudit-attention-semantics/")
    assert report["environment"]["onnx"] and report["eps"][0]["distribution"].startswith("onnxruntime")
    assert not list(tmp_path.glob(".epaudit-*")), "no temp file left behind"
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask(), "an ordinary file, not mkstemp's 0600"


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_two_reports_to_one_file_are_refused_however_spelled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--format", "json", "--output", "o.json",
                                  "--report", f"junit:{tmp_path}/o.json"])
    assert r.exit_code == 2 and "is the target of two reports" in r.output


def test_exit_3_when_a_required_ep_is_not_live():
    r = invoke("check", "--feature", "gqa.head_sink", "--require", "CUDA")
    assert r.exit_code == 3, r.output
    assert "INCOMPLETE" in r.output and "CUDA" in r.output


@pytest.mark.parametrize("args, words", [
    (["check", "--ep", "CUDE"], "--ep CUDE: no provider 'CUDE'"),
    (["check", "--feature", "gqa.nothing*"], "matches no feature"),
    (["check", "--require", "TPU"], "--require TPU"),
    (["check", "--output", "/proc/definitely/not/here.json"], "cannot write there"),
    (["check", "--timeout", "nan"], "must be a number of seconds from 0.1 to 3600"),
    (["check", "--ep", ","], "names no EP"),
    (["check", "--jobs", "0"], "Invalid value for '--jobs'"),
    (["check", "--timeout", "inf"], "must be a number of seconds from 0.1 to 3600"),
    (["probe", "--ep", "CPU", "--timeout", "0"], "from 0.1 to 3600"),
])
def test_usage_errors_exit_2_with_one_line(args, words):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2
    assert words in r.output
    assert "Traceback" not in r.output
    assert [line for line in r.output.splitlines() if line.strip()] == [r.output.strip()], "one line"
    assert r.output.startswith("epaudit: error: ")


def test_matrix_error_is_one_line_exit_2_without_traceback(tmp_path):
    m = write(tmp_path, CPU_ONLY.format(fault="").replace('[features."gqa.head_sink"]', '[features."gqa.head_snk"]'))
    proc = subprocess.run([sys.executable, "-m", "epaudit", "check", "--matrix", m],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == (f"epaudit: error: {m}:10: features.\"gqa.head_snk\": unknown feature id 'gqa.head_snk', "
                        "did you mean 'gqa.head_sink'? (see `epaudit features`)")


def test_probe_shows_details_for_one_ep(tmp_path):
    out = tmp_path / "cpu.json"
    r = invoke("probe", "--ep", "CPU", "--feature", "gqa.dtype.*", "--json", str(out))
    assert r.exit_code == 0
    assert "gqa.dtype.float32 on CPU: PASS" in r.output
    assert "gqa.dtype.bfloat16 on CPU: REJECTED" in r.output and "NOT_IMPLEMENTED" in r.output
    assert {x["outcome"] for x in json.loads(out.read_text())["results"]} == {"PASS", "REJECTED"}


def test_feature_selection_is_exact_for_ids_and_fnmatch_for_globs():
    """``--feature`` (``epaudit.catalog.select``): an id without a wildcard is that id only,
    a glob matches by ``fnmatch``; mixed lists are their union, in catalog order."""
    from epaudit.catalog import FEATURES, select

    softcap = [f.id for f in FEATURES if f.id.startswith("gqa.softcap")]
    assert len(softcap) >= 2 and "gqa.softcap" in softcap
    assert [f.id for f in select(["gqa.softcap"])] == ["gqa.softcap"]
    assert [f.id for f in select(["gqa.softcap*"])] == softcap
    mixed = select(["gqa.head_sink", "gqa.softcap*", "gqa.head_sink"])
    order = [f.id for f in FEATURES]
    assert [f.id for f in mixed] == sorted(["gqa.head_sink", *softcap], key=order.index)
    assert select(["gqa.no_such_feature"]) == ()
    every = [f.id for f in FEATURES]
    assert [f.id for f in select(every)] == every


def test_features_lists_the_catalog():
    r = invoke("features")
    assert r.exit_code == 0
    assert "gqa.attention_bias" in r.output and "attention.qk_matmul_output_mode.3" in r.output


def test_providers_shows_cpu_live_and_cuda_unavailable():
    r = invoke("providers")
    assert r.exit_code == 0
    assert "CPU" in r.output and "live" in r.output
    assert "UNAVAILABLE" in r.output and "EPAUDIT_WEBGPU_PYTHON" in r.output


#: Declared gaps the CPU EP of onnxruntime 1.31.1 inlines into their function bodies.
INLINED_ON_CPU = {"attention.dtype.float64", "gelu.basic.float16", "fastgelu.basic.float16", "fastgelu.bias.float16",
                  "quickgelu.basic.float16", "quickgelu.alpha.float16"}


def test_default_check_on_this_machine():
    """`epaudit check` with no arguments: CPU probed over the whole catalog, CUDA and WebGPU
    UNAVAILABLE with their reasons, every CPU cell as declared, and the gate passes."""
    from conftest import TODAY

    from epaudit.audit import run

    m = load(None)
    result = run(m, today=TODAY, allow_absent=("CUDA",))
    assert not result.eps["CUDA"].live and result.eps["CUDA"].reason
    assert not result.eps["WebGPU"].live and "EPAUDIT_WEBGPU_PYTHON" in result.eps["WebGPU"].reason
    for fid in result.features:
        decl = m.declaration(fid, "CPU")
        got = result.results[(fid, "CPU")].outcome
        # float64 Attention and the float16 Gelu family (float kernels only) are inlined by ORT
        # (declared unsupported, DECOMPOSED); a skip is not probed.
        want = {"supported": Outcome.PASS, "skip": Outcome.SKIPPED}.get(
            decl.status, Outcome.DECOMPOSED if fid in INLINED_ON_CPU else Outcome.REJECTED)
        assert got is want, (fid, got, result.results[(fid, "CPU")].summary)
        assert result.results[(fid, "CUDA")].outcome is Outcome.UNAVAILABLE
    assert result.gate.exit_code == 0, result.gate.findings
    assert result.gate.verdict.endswith("; not audited: CUDA (not live, allowed absent)")


def test_oracle_without_an_attention_feature_is_a_usage_error():
    r = CliRunner().invoke(main, ["oracle", "--feature", "gqa.*"])
    assert r.exit_code == 2 and "nothing to cross-check" in r.output


def test_an_alias_running_another_alias_ep_is_pointed_out(tmp_path):
    """Found by a fresh user: CUDA declared as the CPU EP passes as CUDA; say so."""
    m = write(tmp_path, CPU_ONLY.format(fault="").replace("BROKEN", "CUDA"))
    r = invoke("check", "--matrix", m, "--feature", "gqa.softcap")
    assert "note: CPU and CUDA both ran CPUExecutionProvider" in r.output
    r = invoke("check", "--matrix", write(tmp_path, CPU_ONLY.format(fault='inject_fault = "nan"'), "f.toml"),
               "--feature", "gqa.softcap")
    assert "note:" not in r.output  # a deliberately broken variant is the point


def test_text_from_the_matrix_is_never_read_as_rich_markup(tmp_path):
    """Found by a fresh user: an interpreter path like /opt/envs/[cuda]/bin/python lost
    its '[cuda]' in the report (wrong evidence), and '[/red]' anywhere was a traceback
    (MarkupError) with the JSON report never written."""
    odd = tmp_path / "opt" / "envs" / "[cuda]" / "bin" / "[" / "red]python"
    odd.parent.mkdir(parents=True)
    odd.write_text("#!/bin/sh\necho 'not a [bold]python[/bold]'\nexit 1\n")
    odd.chmod(0o755)
    text = textwrap.dedent('''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.ODD]
        name = "CPUExecutionProvider"
        python = "TMP/opt/envs/[cuda]/bin/[/red]python"
        [features."gqa.softcap"]
        CPU = "supported"
        ODD = { status = "unsupported", reason = "[/] boom [bold]x", issue = "https://example.com/1", until = 2099-01-01 }
        ''').replace("TMP", str(tmp_path))
    out = tmp_path / "r.json"
    r = invoke("check", "--matrix", write(tmp_path, text), "--feature", "gqa.softcap",
               "--report", f"json:{out}")
    assert r.exit_code == 3, r.output  # an interpreter that is not a Python: misconfigured
    assert f"worker failed at start-up under {tmp_path}/opt/envs/[cuda]/bin/[/red]python" in r.output
    assert "not a [bold]python[/bold]" in r.output
    assert json.loads(out.read_text())["eps"][1]["alias"] == "ODD"
    r = invoke("probe", "--matrix", write(tmp_path, text), "--ep", "ODD", "--feature", "gqa.softcap")
    assert r.exit_code == 0 and "[/red]python" in r.output


def test_a_report_that_cannot_be_written_is_one_line_exit_2():
    """Found by a fresh user: `> /dev/full` and a closed stdout were tracebacks (exit 1,
    which also hid the verdict)."""
    for args in (["check", "--ep", "CPU", "--feature", "gqa.softcap"], ["features"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "epaudit", *args], stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("epaudit: error: "), proc.stderr
        assert "No space left on device" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "epaudit", "check", "--ep", "CPU"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120,
                          preexec_fn=lambda: __import__("os").close(1))
    assert proc.returncode == 2 and proc.stderr == "epaudit: error: standard output is closed\n"


def test_a_report_to_a_fifo_or_device_is_written_into_it_not_over_it(tmp_path):
    """Found by a fresh user: --output /dev/null was renamed over, leaving a regular file
    where the device was. A path that is not a regular file is written to as it is."""
    import os
    import stat
    import threading

    from epaudit.cli import write_atomic

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("text", fifo.read_text()))
    reader.start()
    write_atomic(str(fifo), "the report\n")
    reader.join(10)
    assert got["text"] == "the report\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.fifo"]  # no temp file left


def test_output_extension_picks_the_format_when_format_is_not_given(tmp_path):
    """--output r.json with no --format wrote the terminal table into r.json (fresh-user
    finding); an explicit --format still wins over the extension."""
    import json as _json

    from click.testing import CliRunner

    from epaudit.cli import main

    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--feature", "gqa.softcap", "--output", str(out)])
    assert r.exit_code == 0, r.output
    assert _json.loads(out.read_text())["results"][0]["feature"] == "gqa.softcap"
    xml = tmp_path / "r.xml"
    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--feature", "gqa.softcap", "--output", str(xml)])
    assert xml.read_text().startswith("<?xml") and "<testsuite" in xml.read_text()
    md = tmp_path / "table.json"
    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--feature", "gqa.softcap", "--format", "markdown",
                                  "--output", str(md)])
    assert r.exit_code == 0 and md.read_text().lstrip().startswith(("#", "|", "**", "<")), md.read_text()[:80]
