"""A gate that cannot be fooled (issue 12): each case here read PASS, or a traceback,
before its fix. Real ORT sessions and real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from click.testing import CliRunner
from procs import alive, tagged

from epaudit.cli import main
from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError

CPU = '[providers.CPU]\nname = "CPUExecutionProvider"\n'


def _write(tmp_path, text: str, name: str = "m.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _cli(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


# --- the verdict -------------------------------------------------------------------------

GATED_ABSENT = '''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["GPU"]
    {extra}
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.GPU]
    name = "CPUExecutionProvider"
    python = "$EPAUDIT_TEST_UNSET_PYTHON"
    if_unset = "unavailable"
    '''


def test_a_gated_ep_that_is_not_live_makes_the_verdict_incomplete(tmp_path):
    m = _write(tmp_path, GATED_ABSENT.format(extra=""))
    r = _cli("check", "--matrix", m, "--feature", "gqa.prompt")
    assert r.exit_code == 3, r.output
    assert "verdict: INCOMPLETE: EP(s) not live, so not audited: GPU" in r.output
    assert "--allow-absent GPU" in r.output


@pytest.mark.parametrize("how", ["option", "matrix"])
def test_allowing_the_gated_ep_to_be_absent_passes_and_names_it(tmp_path, how):
    extra = 'allow_absent = ["GPU"]' if how == "matrix" else ""
    m = _write(tmp_path, GATED_ABSENT.format(extra=extra))
    args = ["check", "--matrix", m, "--feature", "gqa.prompt", "--format", "json"]
    r = _cli(*args, *(["--allow-absent", "GPU"] if how == "option" else []))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert doc["verdict"] == "PASS with 1 warning(s); not audited: GPU (not live, allowed absent)"
    (f,) = [f for f in doc["findings"] if f["kind"] == "not-audited"]
    assert f["ep"] == "GPU" and f["failing"] is False


def test_a_gated_ep_left_out_of_the_run_is_named_in_the_verdict(tmp_path):
    m = _write(tmp_path, GATED_ABSENT.format(extra=""))
    r = _cli("check", "--matrix", m, "--ep", "CPU", "--feature", "gqa.prompt")
    assert r.exit_code == 0, r.output
    assert "verdict: PASS with 1 warning(s); not audited: GPU (not in this run) (exit 0)" in r.output


def test_the_shipped_matrix_on_a_machine_without_cuda_is_incomplete_not_pass():
    r = _cli("check", "--matrix", os.path.join(os.path.dirname(__file__), "..", "capabilities.toml"),
             "--feature", "gqa.prompt", env={"EPAUDIT_WEBGPU_PYTHON": "", "EPAUDIT_QNN_PYTHON": "",
                                             "EPAUDIT_OPENVINO_PYTHON": ""})
    assert r.exit_code == 3, r.output
    assert "not audited: CUDA" in r.output


def test_allow_absent_must_name_a_gated_ep(tmp_path):
    m = _write(tmp_path, GATED_ABSENT.format(extra=""))
    r = _cli("check", "--matrix", m, "--allow-absent", "CPU")
    assert r.exit_code == 2 and "CPU is not gated" in r.output
    with pytest.raises(MatrixError, match=r"m.toml:5: gate.allow_absent: 'CPU' is not gated"):
        parse(textwrap.dedent(GATED_ABSENT.format(extra='allow_absent = ["CPU"]')), "m.toml")


# --- matrix mistakes are matrix errors ----------------------------------------------------

def test_a_provider_name_no_onnxruntime_knows_is_a_matrix_error():
    text = 'schema_version = 1\n' + CPU + '[providers.CUDA]\nname = "CUDAExecutionProvidr"\n'
    with pytest.raises(MatrixError) as exc:
        parse(text, "m.toml")
    assert str(exc.value).startswith("m.toml:5: providers.CUDA.name: 'CUDAExecutionProvidr' is not an "
                                     "execution provider onnxruntime knows; did you mean 'CUDAExecutionProvider'?")


def test_a_plugin_provider_may_have_any_name():
    text = 'schema_version = 1\n[providers.P]\nname = "MyVendorEP"\nlibrary = "mod:fn"\n'
    assert parse(text, "m.toml").providers["P"].name == "MyVendorEP"


@pytest.mark.parametrize("kind, value, problem", [
    ("missing", "{tmp}/no/such/python", "does not exist"),
    ("directory", "{tmp}", "is a directory, not an interpreter"),
    ("not executable", "{tmp}/plain.txt", "is not executable"),
    ("bare name", "no-such-python-xyz", "is not found on PATH"),
])
def test_an_interpreter_that_is_not_there_is_a_matrix_error(tmp_path, kind, value, problem):
    (tmp_path / "plain.txt").write_text("")
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.X]
        name = "CPUExecutionProvider"
        python = "{value.format(tmp=tmp_path)}"
        ''')
    r = _cli("check", "--matrix", m, "--feature", "gqa.prompt")
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    assert line.startswith(f"epaudit: error: {m}:4: providers.X.python: ") and problem in line
    assert "Traceback" not in r.output


def test_an_unset_variable_is_an_error_unless_the_matrix_marks_it_optional(tmp_path):
    text = '''\
        schema_version = 1
        [providers.X]
        name = "CPUExecutionProvider"
        python = "$EPAUDIT_TEST_UNSET_PYTHON"
        '''
    r = _cli("check", "--matrix", _write(tmp_path, text), "--feature", "gqa.prompt")
    assert r.exit_code == 2 and "providers.X.python: $EPAUDIT_TEST_UNSET_PYTHON is not set" in r.output
    r = _cli("check", "--matrix", _write(tmp_path, text + '    if_unset = "unavailable"\n', "o.toml"),
             "--feature", "gqa.prompt", "--format", "json")
    doc = json.loads(r.output[r.output.index("{"):])
    (ep,) = doc["eps"]
    assert ep["live"] is False and ep["absence"] == "environment"
    assert r.exit_code == 3, "no EP live: nothing was audited"


def test_a_missing_plugin_library_is_a_matrix_error(tmp_path):
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.P]
        name = "MyVendorEP"
        library = "{tmp_path}/libnothere.so"
        ''')
    r = _cli("check", "--matrix", m)
    assert r.exit_code == 2 and f"{m}:4: providers.P.library: " in r.output and "does not exist" in r.output


def test_an_interpreter_that_is_not_a_python_with_onnxruntime_is_reported_within_its_start_limit(tmp_path):
    """/bin/sleep runs but never answers: misconfigured (incomplete), with what it printed,
    after the provider's start_timeout, not a fixed 120 s."""
    m = _write(tmp_path, '''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.X]
        name = "CPUExecutionProvider"
        python = "/bin/sh"
        start_timeout = 2
        ''')
    t0 = time.monotonic()
    r = _cli("check", "--matrix", m, "--feature", "gqa.prompt", "--format", "json")
    assert time.monotonic() - t0 < 60
    doc = json.loads(r.output[r.output.index("{"):])
    x = {e["alias"]: e for e in doc["eps"]}["X"]
    assert x["absence"] == "configuration" and "printed" in x["reason"]
    assert r.exit_code == 3 and "misconfigured" in doc["verdict"] or "X" in doc["verdict"]
    (f,) = [f for f in doc["findings"] if f["kind"] == "incomplete" and f["ep"] == "X"]
    assert "misconfigured" in f["message"]


# --- governance, selections, limits --------------------------------------------------------

@pytest.mark.parametrize("issue, governed", [
    (" ", False), ("TODO", False), ("see slack", False), ("https://", False),
    ("https://github.com/microsoft/onnxruntime/issues/29506", True), ("PROJ-12", False),
])
def test_an_issue_must_be_a_link(issue, governed):
    text = ('schema_version = 1\n' + CPU + '[features."gqa.prompt"]\n'
            f'CPU = {{ status = "unsupported", issue = "{issue}", until = 2099-01-01 }}\n')
    assert parse(text, "m.toml").declaration("gqa.prompt", "CPU").governed is governed


def test_a_tracker_pattern_governs_its_ids_and_the_finding_names_the_line(tmp_path):
    text = ('schema_version = 1\n[gate]\nissue_pattern = "^PROJ-[0-9]+$"\n' + CPU
            + '[features."gqa.prompt"]\nCPU = { status = "unsupported", issue = "PROJ-12", until = 2099-01-01 }\n'
            + '[features."gqa.decode"]\nCPU = { status = "unsupported", issue = "TODO", until = 2099-01-01 }\n')
    m = parse(text, "m.toml")
    assert m.declaration("gqa.prompt", "CPU").governed
    assert not m.declaration("gqa.decode", "CPU").governed
    r = _cli("check", "--matrix", _write(tmp_path, text), "--feature", "gqa.decode", "--format", "json")
    doc = json.loads(r.output[r.output.index("{"):])
    (f,) = [f for f in doc["findings"] if f["kind"] == "ungoverned"]
    assert f["line"] == 9 and "issue 'TODO' that is not a link" in f["message"] and f["failing"]
    with pytest.raises(MatrixError, match="matches the placeholder issue ''"):
        parse('schema_version = 1\n[gate]\nissue_pattern = ".*"\n', "m.toml")
    with pytest.raises(MatrixError, match="matches the placeholder issue 'todo'"):  # found by a fresh user
        parse("schema_version = 1\n[gate]\nissue_pattern = '^[a-z]+$'\n", "m.toml")


def test_every_feature_pattern_must_match():
    r = _cli("check", "--ep", "CPU", "--feature", "gqa.softcap", "--feature", "gqa.sofcap")
    assert r.exit_code == 2
    assert "--feature gqa.sofcap: matches no feature; did you mean 'gqa.softcap'?" in r.output


@pytest.mark.parametrize("value", ["1e300", "inf", "nan", "3601", "0"])
def test_time_limits_are_bounded(value):
    for option in ("--timeout", "--start-timeout"):
        r = _cli("check", "--ep", "CPU", option, value)
        assert r.exit_code == 2 and "from 0.1 to 3600" in r.output, r.output


def test_one_matrix_check_reads_what_bless_wrote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = _cli("bless", "--dry-run", "--ep", "CPU", "--feature", "gqa.prompt")
    assert r.exit_code == 2 and "bless rewrites a matrix file" in r.output
    (tmp_path / "capabilities.toml").write_text(
        'schema_version = 1\n' + CPU + '[features."gqa.prompt"]\n'
        'CPU = { status = "unsupported", issue = "https://example.org/i/1", until = 2099-01-01 }\n')
    r = _cli("check", "--feature", "gqa.prompt")
    assert "matrix ./capabilities.toml" in r.output
    assert r.exit_code == 1 and "stale" in r.output, "the local matrix is the one judged"
    r = _cli("bless", "--ep", "CPU", "--feature", "gqa.prompt")
    assert r.exit_code == 0, r.output
    r = _cli("check", "--feature", "gqa.prompt")
    assert r.exit_code == 0, r.output


# --- the fleet ------------------------------------------------------------------------------

def test_an_alias_with_at_is_refused():
    with pytest.raises(MatrixError, match=r"m.toml:2: providers.CUDA@t4: .*'@' is reserved"):
        parse('schema_version = 1\n[providers."CUDA@t4"]\nname = "CUDAExecutionProvider"\n', "m.toml")


def _saved(tmp_path, name: str, label: str, fault: str | None = None) -> str:
    text = 'schema_version = 1\n[providers.CPU]\nname = "CPUExecutionProvider"\n'
    if fault:
        text += f'inject_fault = "{fault}"\n'
    m = _write(tmp_path, text, f"{name}.toml")
    out = tmp_path / f"{name}.json"
    r = _cli("probe", "--ep", "CPU", "--matrix", m, "--feature", "gqa.prompt", "--label", label,
             "--json", str(out))
    assert r.exit_code == 0, r.output
    return str(out)


def test_require_names_a_fleet_column(tmp_path):
    a = _saved(tmp_path, "a", "t4")
    b = _saved(tmp_path, "b", "h100")
    m = _write(tmp_path, 'schema_version = 1\n[gate]\nreference = ["CPU"]\n' + CPU)
    r = _cli("check", "--matrix", m, "--results", a, "--results", b, "--require", "CPU@t4", "--feature", "gqa.prompt")
    assert r.exit_code == 0, r.output
    r = _cli("check", "--matrix", m, "--results", a, "--require", "CPU@a100", "--feature", "gqa.prompt")
    assert r.exit_code == 3 and "CPU@a100" in r.output
    r = _cli("check", "--matrix", m, "--results", a, "--require", "CPU@t4", "--feature", "gqa.prompt")
    assert r.exit_code == 0, "one machine's column is shown as CPU and still answers to CPU@t4"
    r = _cli("check", "--matrix", m, "--ep", "CPU", "--require", "CPU@t4")
    assert r.exit_code == 2 and "needs --results" in r.output


def test_two_inputs_on_one_column_name_both_files(tmp_path):
    a = _saved(tmp_path, "a", "t4")
    b = _saved(tmp_path, "b", "t4", fault="refuse")
    m = _write(tmp_path, 'schema_version = 1\n' + CPU)
    for order in ((a, b), (b, a)):
        r = _cli("check", "--matrix", m, "--results", order[0], "--results", order[1])
        assert r.exit_code == 2 and order[0] in r.output and order[1] in r.output, r.output


# --- the environment ------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_reports_degrade_on_narrow_encodings(encoding):
    env = dict(os.environ, PYTHONIOENCODING=encoding)
    for args in (["check", "--ep", "CPU", "--feature", "gqa.prompt"],
                 ["check", "--ep", "CPU", "--feature", "gqa.prompt", "--format", "markdown"],
                 ["oracle", "--feature", "attention.basic"], ["features"]):
        p = subprocess.run([sys.executable, "-m", "epaudit", *args], env=env, capture_output=True,
                           timeout=300)
        assert b"Traceback" not in p.stderr and b"UnicodeEncodeError" not in p.stderr, p.stderr[-400:]
        assert p.returncode == 0, (args, p.stderr[-400:])
        p.stdout.decode(encoding)  # what was written is in that encoding


def test_a_killed_parent_leaves_no_worker_and_no_directory(tmp_path):
    """SIGKILL the parent while its worker hangs in a probe: the worker notices it was
    orphaned, removes its temp directory and exits."""
    tag = uuid.uuid4().hex
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.HANG]
        name = "CPUExecutionProvider"
        inject_fault = "hang"
        env = {{ EPAUDIT_TEST_TAG = "{tag}" }}
        ''')
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", "check", "--matrix", m, "--feature",
                             "gqa.prompt", "--timeout", "600"], env=dict(os.environ, TMPDIR=str(tmp)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        workers: dict = {}
        while time.monotonic() < deadline:
            workers = tagged(tag)
            log = [p for p in tmp.glob("epaudit-worker-*/stderr.log")]
            if workers and any(b"after session creation" in p.read_bytes() for p in log):
                break
            time.sleep(0.2)
        assert workers, "the worker started and hangs"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (any(alive(p) for p in workers) or list(tmp.iterdir())):
            time.sleep(0.2)
        assert not any(alive(p) for p in workers), "the worker died with its parent"
        assert list(tmp.iterdir()) == [], "and removed its temp directory"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in tagged(tag):
            os.kill(p, signal.SIGKILL)


# --- found by a fresh user after the first round ---------------------------------------

def test_a_saved_column_that_ran_another_provider_is_refused(tmp_path):
    """A runner whose matrix said CUDA = CPUExecutionProvider probed the CPU EP: its PASS
    says nothing about the gate matrix's CUDA."""
    fake = _write(tmp_path, 'schema_version = 1\n[providers.CUDA]\nname = "CPUExecutionProvider"\n', "fake.toml")
    out = tmp_path / "fake-cuda.json"
    assert _cli("probe", "--matrix", fake, "--ep", "CUDA", "--feature", "gqa.prompt", "--label", "t4",
                "--json", str(out)).exit_code == 0
    gate = _write(tmp_path, 'schema_version = 1\n[gate]\ngated = ["CUDA"]\n' + CPU
                  + '[providers.CUDA]\nname = "CUDAExecutionProvider"\n', "gate.toml")
    r = _cli("check", "--matrix", gate, "--results", str(out), "--require", "CUDA")
    assert r.exit_code == 2
    assert f"{out}: its CUDA ran CPUExecutionProvider, but {gate} declares CUDA as CUDAExecutionProvider" in r.output


def test_an_interrupted_saved_run_makes_the_merge_incomplete(tmp_path):
    a = _saved(tmp_path, "a", "m1")
    doc = json.loads(open(a).read())
    doc["incomplete"] = True
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    m = _write(tmp_path, 'schema_version = 1\n' + CPU)
    r = _cli("check", "--matrix", m, "--results", str(b), "--feature", "gqa.prompt")
    assert r.exit_code == 3 and f"saved run {b} was interrupted" in r.output


def test_cells_a_gated_column_never_probed_are_not_a_pass(tmp_path):
    cpu = _saved(tmp_path, "cpu", "m1")
    doc = json.loads(open(cpu).read())
    gated = _write(tmp_path, 'schema_version = 1\n[gate]\nreference = ["CPU"]\ngated = ["G"]\n' + CPU
                   + '[providers.G]\nname = "CPUExecutionProvider"\n', "g.toml")
    out = tmp_path / "g.json"
    assert _cli("probe", "--matrix", gated, "--ep", "G", "--feature", "gqa.decode", "--label", "m2",
                "--json", str(out)).exit_code == 0
    # CPU has gqa.prompt, G only gqa.decode: G's gqa.prompt cell was never probed.
    r = _cli("check", "--matrix", gated, "--results", cpu, "--results", str(out), "--feature", "gqa.prompt",
             "--feature", "gqa.decode")
    assert r.exit_code == 3 and "G: 1 feature(s) of this merge were never probed on it (first: gqa.prompt)" in r.output
    # A selected feature no file has is missing evidence (incomplete), not "nothing to gate" (issue 24).
    r = _cli("check", "--matrix", gated, "--results", cpu, "--feature", "gqa.softcap")
    assert r.exit_code == 3 and "1 selected feature(s) are in no results file (first: gqa.softcap)" in r.output
    assert doc["incomplete"] is False


def _add_model(tmp_path):
    """A one-node Add model (opset 21) saved as ``m.onnx``: what scan reads."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    node = helper.make_node("Add", ["a", "b"], ["c"], name="add")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, T.FLOAT, [2]) for n in "ab"],
                          [helper.make_tensor_value_info("c", T.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
    return path


def test_conformance_with_no_live_ep_is_incomplete(tmp_path):
    m = _write(tmp_path, '''\
        schema_version = 1
        [providers.W]
        name = "WebGpuExecutionProvider"
        python = "$EPAUDIT_TEST_UNSET_PYTHON"
        if_unset = "unavailable"
        ''')
    r = _cli("conformance", "--matrix", m, "--case", "test_attention_3d")
    assert r.exit_code == 3 and "no EP was live: nothing was probed" in r.output


def test_scan_over_no_live_ep_or_missing_results_is_incomplete(tmp_path):
    gqa = _add_model(tmp_path)
    m = _write(tmp_path, '''\
        schema_version = 1
        [providers.W]
        name = "WebGpuExecutionProvider"
        python = "$EPAUDIT_TEST_UNSET_PYTHON"
        if_unset = "unavailable"
        ''')
    r = _cli("scan", str(gqa), "--matrix", m)
    assert r.exit_code == 3 and "every model runs as expected" not in r.output


@pytest.mark.parametrize("provider, says", [
    # The matrix names this interpreter as the WebGPU environment, and its onnxruntime has
    # no WebGPU EP: a setup mistake, not a machine without a GPU.
    (f'name = "WebGpuExecutionProvider"\npython = "{sys.executable}"', "WebGpuExecutionProvider"),
    # A plugin library whose module:function cannot be resolved.
    ('name = "MyVendorEP"\nlibrary = "json:no_such_function"', "no_such_function"),
])
def test_a_wrong_environment_or_library_is_misconfigured_not_absent(tmp_path, provider, says):
    m = _write(tmp_path, 'schema_version = 1\n[gate]\nreference = ["CPU"]\n' + CPU
               + f'[providers.X]\n{provider}\n')
    r = _cli("check", "--matrix", m, "--feature", "gqa.prompt", "--format", "json")
    doc = json.loads(r.output[r.output.index("{"):])
    x = {e["alias"]: e for e in doc["eps"]}["X"]
    assert x["absence"] == "configuration" and says in x["reason"] and r.exit_code == 3
    assert "misconfigured" in doc["verdict"] or any("misconfigured" in f["message"] for f in doc["findings"])


def test_a_killed_parent_of_a_wrapper_that_never_starts_is_swept_by_the_next_run(tmp_path):
    """Found by a fresh user: an interpreter that is a wrapper script hanging before the
    worker runs cannot watch its parent; after a SIGKILL of epaudit it and its temp
    directory stayed. The next run kills its process group and removes the directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tag = uuid.uuid4().hex
    sleeper = tmp_path / "sleeper"
    sleeper.write_text(f"#!/bin/sh\nexport EPAUDIT_TEST_TAG={tag}\nexec sleep 1000\n")
    sleeper.chmod(0o755)
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.G]
        name = "CPUExecutionProvider"
        python = "{sleeper}"
        start_timeout = 300
        ''')
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", "check", "--matrix", m, "--feature", "gqa.prompt"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not tagged(tag):
            time.sleep(0.2)
        (wrapper,) = tagged(tag)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(1.0)
        assert alive(wrapper) and list(tmp.glob("epaudit-worker-*")), "left behind, as the finding said"
        r = subprocess.run([sys.executable, "-m", "epaudit", "check", "--ep", "CPU", "--feature", "gqa.prompt"],
                           env=env, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr[-300:]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(wrapper):
            time.sleep(0.1)
        assert not alive(wrapper), "the next run killed the orphan"
        assert list(tmp.iterdir()) == [], "and removed its directory (and its own)"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in tagged(tag):
            os.kill(p, signal.SIGKILL)


def test_a_report_follows_a_link_and_never_replaces_it(tmp_path, monkeypatch):
    """Found by a fresh user: --output through a symbolic link (as /dev/stdout is) replaced
    the link with a regular file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "target.txt").write_text("old")
    os.symlink("target.txt", tmp_path / "lnk.txt")
    r = _cli("check", "--ep", "CPU", "--feature", "gqa.prompt", "--output", "lnk.txt")
    assert r.exit_code == 0, r.output
    assert os.path.islink(tmp_path / "lnk.txt") and "verdict: PASS" in (tmp_path / "target.txt").read_text()


def test_a_report_over_the_matrix_it_reads_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "capabilities.toml").write_text('schema_version = 1\n' + CPU)
    for args in (["check", "--output", "capabilities.toml"], ["check", "--report", "json:./capabilities.toml"],
                 ["probe", "--ep", "CPU", "--json", "capabilities.toml"]):
        r = _cli(*args, "--feature", "gqa.prompt")
        assert r.exit_code == 2 and "which this run reads" in r.output, (args, r.output)
    assert (tmp_path / "capabilities.toml").read_text().startswith("schema_version = 1")


def test_a_dangling_local_matrix_link_is_an_error_not_the_packaged_matrix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("/nonexistent/cap.toml", tmp_path / "capabilities.toml")
    r = _cli("check", "--ep", "CPU", "--feature", "gqa.prompt")
    assert r.exit_code == 2 and "capabilities.toml" in r.output and "embedded" not in r.output


def test_scan_with_a_misconfigured_ep_is_incomplete(tmp_path):
    model = _add_model(tmp_path)
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.G]
        name = "CPUExecutionProvider"
        python = "/bin/true"
        start_timeout = 5
        ''')
    r = _cli("scan", str(model), "--matrix", m)
    assert r.exit_code == 3, r.output


def test_a_cell_the_runner_skipped_is_not_a_pass_under_a_gate_that_does_not_skip_it(tmp_path):
    runner = _write(tmp_path, 'schema_version = 1\n[providers.G]\nname = "CPUExecutionProvider"\n'
                    '[features."gqa.prompt"]\nG = { status = "skip", issue = "https://example.org/1", '
                    'until = 2099-01-01 }\n', "runner.toml")
    out = tmp_path / "g.json"
    assert _cli("probe", "--matrix", runner, "--ep", "G", "--feature", "gqa.prompt", "--feature", "gqa.decode",
                "--label", "m", "--json", str(out)).exit_code == 0
    gate = _write(tmp_path, 'schema_version = 1\n[gate]\ngated = ["G"]\n[providers.G]\n'
                  'name = "CPUExecutionProvider"\n', "gate.toml")
    r = _cli("check", "--matrix", gate, "--results", str(out), "--feature", "gqa.prompt", "--feature", "gqa.decode")
    assert r.exit_code == 3 and "G: 1 feature(s) of this merge were never probed on it (first: gqa.prompt)" in r.output


def test_junit_names_the_gated_ep_it_did_not_audit(tmp_path):
    import xml.etree.ElementTree as ET

    m = _write(tmp_path, GATED_ABSENT.format(extra=""))
    out = tmp_path / "r.xml"
    r = _cli("check", "--matrix", m, "--ep", "CPU", "--feature", "gqa.prompt", "--report", f"junit:{out}")
    assert r.exit_code == 0, r.output
    (case,) = [c for c in ET.parse(out).iter("testcase") if c.get("name") == "GPU is live"]
    assert case.find("skipped").get("type") == "epaudit.not_audited"
    xsd = os.path.join(os.path.dirname(__file__), "junit.xsd")
    import xmlschema

    xmlschema.XMLSchema(xsd).validate(str(out))


def test_conformance_stops_on_sigterm_while_a_case_hangs(tmp_path):
    """Found by a fresh user: conformance waited for every hanging case's timeout on
    SIGTERM, then printed 'interrupted before the run started' and no report."""
    tag = uuid.uuid4().hex
    m = _write(tmp_path, f'''\
        schema_version = 1
        [providers.HANG]
        name = "CPUExecutionProvider"
        inject_fault = "hang"
        env = {{ EPAUDIT_TEST_TAG = "{tag}" }}
        ''')
    out = tmp_path / "c.json"
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", "conformance", "--matrix", m, "--case",
                             "test_attention_3d", "--timeout", "600", "--format", "json", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not tagged(tag):
            time.sleep(0.2)
        assert tagged(tag), "the worker started"
        time.sleep(2.0)  # into the hanging case
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - t0 < 30
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    doc = json.loads(out.read_text())
    assert doc["incomplete"] is True and doc["exit_code"] == 3 and "run interrupted" in doc["verdict"]
    assert not tagged(tag)


def test_a_run_whose_every_selected_cell_is_declared_skip_is_incomplete(tmp_path):
    """A selection that probes nothing (every cell declared skip) read PASS; one probed
    cell beside the skipped ones makes it a real verdict again."""
    m = _write(tmp_path, '''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        [features."gqa.softcap"]
        CPU = { status = "skip", issue = "https://github.com/microsoft/onnxruntime/issues/1", until = 2099-01-01 }
        [features."gqa.prompt"]
        CPU = "supported"
        ''')
    r = _cli("check", "--matrix", m, "--feature", "gqa.softcap")
    assert r.exit_code == 3, r.output
    assert "verdict: INCOMPLETE: nothing was probed: all 1 selected feature(s) are declared skip on CPU" in r.output
    r = _cli("check", "--matrix", m, "--feature", "gqa.softcap", "--feature", "gqa.prompt")
    assert r.exit_code == 0, r.output
    assert "verdict: PASS" in r.output
