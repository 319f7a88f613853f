"""Release to release: `env create ort` (its pieces; a real old release under the
integration marker) and `diff` pairing columns by --map or by provider, refusing to call
a run "not worse" when nothing was comparable. Runs are real CPU-EP runs; the "new
release" that got worse is the CPU EP with a fault injected (epaudit/run/faults.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from epaudit.cli import main
from epaudit.providers.envs import EnvError
from epaudit.providers.releases import alias_for, matrix_lines, numpy_requirement, parse_package
from epaudit.saved.diff import ColumnPair, pair_columns, parse_map
from epaudit.saved.read import load as load_saved

MATRIX = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = []
    gated = []
    [providers.OLD]
    name = "CPUExecutionProvider"
    [providers.NEW]
    name = "CPUExecutionProvider"
    inject_fault = "nan"
    [providers.GONE]
    name = "WebGpuExecutionProvider"
    python = "$EPAUDIT_TEST_NEVER_SET"
    if_unset = "unavailable"
    ''')


def invoke(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Saved reports of three real runs: OLD (CPU), NEW (CPU made to return NaN), GONE."""
    d = tmp_path_factory.mktemp("release")
    caps = d / "caps.toml"
    caps.write_text(MATRIX)
    out = {}
    for alias in ("OLD", "NEW", "GONE"):
        out[alias] = d / f"{alias.lower()}.json"
        r = invoke("probe", "--matrix", str(caps), "--ep", alias, "--feature", "gqa.softcap",
                   "--feature", "attention.basic", "--json", str(out[alias]))
        assert r.exit_code == 0, r.output
    return out


def test_release_package_parsing_alias_and_numpy():
    assert parse_package("onnxruntime==1.27.0") == ("onnxruntime", "1.27.0", (1, 27, 0))
    assert parse_package("onnxruntime-gpu == 1.31.1")[:2] == ("onnxruntime-gpu", "1.31.1")
    assert alias_for((1, 27, 0)) == "ORT127" and alias_for((1, 25, 1)) == "ORT1251"
    # docs/ort-facts.md: 1.18-1.20 import only under numpy 1.x; 1.21 on take numpy 2.
    assert numpy_requirement((1, 18, 1)) == "numpy<2" and numpy_requirement((1, 20, 1)) == "numpy<2"
    assert numpy_requirement((1, 21, 0)) == "numpy"
    for bad, why in [(None, "--package is required"), ("onnxruntime", "pinned to one release"),
                     ("numpy==2.0.0", "onnxruntime distribution"), ("onnxruntime==1.15.1", "1.16 and later"),
                     ("onnxruntime>=1.20", "pinned to one release")]:
        with pytest.raises(EnvError, match=why):
            parse_package(bad)


def test_env_create_ort_refuses_bad_package_in_one_line(tmp_path):
    r = invoke("env", "create", "ort", "--dir", str(tmp_path), "--package", "onnxruntime==1.15.1")
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        "epaudit: error: env create ort: --package onnxruntime==1.15.1: epaudit's worker runs under "
        "onnxruntime 1.16 and later, not 1.15.1"]
    assert not any(tmp_path.iterdir())  # nothing half-made


def test_map_parsing():
    assert parse_map(("ORT127=ORT128", "A=B, C=D")) == {"ORT127": "ORT128", "A": "B", "C": "D"}
    for bad in ("ORT127", "=X", "A=B,A=C", "A=B,C=B"):
        with pytest.raises(ValueError):
            parse_map((bad,))


def test_columns_pair_by_provider_when_names_differ(runs):
    old, new = load_saved(str(runs["OLD"])), load_saved(str(runs["NEW"]))
    assert pair_columns(old, new) == [ColumnPair("OLD", "NEW", "provider")]
    gone = load_saved(str(runs["GONE"]))
    assert pair_columns(old, gone) == []  # another provider: no guess
    assert pair_columns(old, gone, {"OLD": "GONE"}) == [ColumnPair("OLD", "GONE", "map")]
    with pytest.raises(ValueError, match="NEW has no column 'X'"):
        pair_columns(old, new, {"OLD": "X"})


def test_diff_across_aliases_finds_what_got_worse(runs):
    r = invoke("diff", str(runs["OLD"]), str(runs["NEW"]))
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[2] == "columns: OLD -> NEW (by provider); 2 cell(s) compared"
    assert any(line.startswith("WORSE           gqa.softcap on OLD->NEW: PASS -> NAN") for line in lines)
    assert lines[-1] == "2 worse, 0 better, 0 other change(s)"
    r = invoke("diff", str(runs["OLD"]), str(runs["NEW"]), "--map", "OLD=NEW")
    assert r.exit_code == 1 and "OLD -> NEW (by map)" in r.output


def test_diff_with_nothing_comparable_is_refused_not_passed(runs):
    # No column pairs (another provider): no "0 worse" with exit 0.
    r = invoke("diff", str(runs["OLD"]), str(runs["GONE"]))
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1].startswith(
        f"epaudit: error: diff {runs['OLD']} {runs['GONE']}: nothing comparable: no column of OLD (OLD) pairs "
        "with one of NEW (GONE)")
    # Paired by hand, but GONE judged nothing: still nothing comparable.
    r = invoke("diff", str(runs["OLD"]), str(runs["GONE"]), "--map", "OLD=GONE")
    assert r.exit_code == 2
    assert "NOT COMPARABLE  gqa.softcap on OLD->GONE: PASS -> UNAVAILABLE" in r.output
    assert "no feature was judged on both sides" in r.output
    r = invoke("diff", str(runs["OLD"]), str(runs["NEW"]), "--map", "OLD")
    assert r.exit_code == 2 and "expected OLD=NEW" in r.output


def test_matrix_lines_of_a_release_parse_as_a_matrix(tmp_path):
    from epaudit.matrix.load import parse
    from epaudit.providers.envs import EnvResult

    res = EnvResult("ort", "/x/python", "EPAUDIT_ORT127_PYTHON", "/x/export.sh")
    text = 'schema_version = 1\n[gate]\nreference = []\ngated = []\n' + "\n".join(matrix_lines(res)) + "\n"
    m = parse(text, "m.toml", environ={"EPAUDIT_ORT127_PYTHON": sys.executable})
    assert m.providers["ORT127"].python == sys.executable


ENVS = Path(os.environ.get("EPAUDIT_RELEASE_ENVS", Path(__file__).resolve().parent.parent / ".epaudit" / "envs"))


@pytest.mark.integration
@pytest.mark.parametrize("version", ["1.18.1", "1.16.3"])
def test_env_create_ort_for_an_old_release(version):
    """A real old CPU wheel (downloaded once, then reused): 1.18.1 and 1.16.3 need numpy<2 and
    run the canary, which is written at the lowest IR version its opset needs (Add-13 at IR 7;
    1.16 reads IR <= 9, issue 26).
    Downloads only in the integration tier (``EPAUDIT_INTEGRATION`` set, as ``.ci/run`` does)."""
    if not os.environ.get("EPAUDIT_INTEGRATION") and not (ENVS / f"ort-{version}" / "venv").is_dir():
        pytest.skip(f"onnxruntime {version} not built under {ENVS}: the integration tier "
                    "(EPAUDIT_INTEGRATION=required) downloads it")
    proc = subprocess.run([sys.executable, "-m", "epaudit", "env", "create", "ort", "--dir", str(ENVS),
                           "--package", f"onnxruntime=={version}"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert f"# ort: onnxruntime {version}; canary live" in proc.stdout
    py = ENVS / f"ort-{version}" / "venv" / "bin" / "python"
    numpy = subprocess.run([str(py), "-c", "import numpy; print(numpy.__version__)"], capture_output=True,
                           text=True).stdout
    assert numpy.startswith("1.")
