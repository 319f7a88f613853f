"""The one repro writer (epaudit/repro.py): a standalone directory that fails when the EP is
wrong and passes when it is right, run with onnxruntime and numpy only."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from epaudit.catalog.models import one_node_model
from epaudit.repro import FILES, Repro, write


def _add_repro(reference_delta: float) -> Repro:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    ref = a.astype(np.float64) + b.astype(np.float64)
    ref[1, 2] += reference_delta
    model = one_node_model("Add", "", 17, [("a", "float32", [2, 3]), ("b", "float32", [2, 3])],
                           [("c", "float32")])
    return Repro(model, {"a": a, "b": b}, {"c": ref}, "CPUExecutionProvider", atol=1e-5, rtol=1e-4,
                 title="Add on CPU", details={"outcome": "MISMATCH", "config": {"shape": [2, 3]}},
                 control={"c": a.astype(np.float64)})


def _run(directory):
    # -I: isolated, so nothing of epaudit (or the current directory) is importable.
    return subprocess.run([sys.executable, "-I", str(directory / "repro.py")], capture_output=True,
                          text=True, timeout=120)


def test_a_right_ep_passes_and_a_wrong_reference_fails_with_the_difference(tmp_path):
    good = write(_add_repro(0.0), tmp_path / "good")
    r = _run(good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 of 6 element(s) out of tolerance" in r.stdout
    bad = write(_add_repro(0.5), tmp_path / "bad")
    r = _run(bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "max abs err 0.5" in r.stdout and "at (1, 2)" in r.stdout and "1 of 6 element(s)" in r.stdout


def test_the_directory_holds_every_file_and_what_epaudit_said(tmp_path):
    d = write(_add_repro(0.0), tmp_path / "r")
    assert all((d / f).is_file() for f in FILES) and (d / "control.npz").is_file()
    finding = json.loads((d / "finding.json").read_text())
    assert finding["details"] == {"outcome": "MISMATCH", "config": {"shape": [2, 3]}}
    assert finding["tolerance"] == {"atol": 1e-5, "rtol": 1e-4}
    assert finding["inputs"] == {"a": ["float32", [2, 3]], "b": ["float32", [2, 3]]}
    assert [p.name for p in tmp_path.iterdir()] == ["r"]  # no temp directory left behind


def test_a_refusing_ep_exits_2_with_orts_words(tmp_path):
    r = write(Repro(**{**_add_repro(0.0).__dict__, "provider": "NoSuchExecutionProvider"}), tmp_path / "x")
    out = _run(r)
    assert out.returncode == 2 and "session failed" in out.stdout


def test_an_existing_folder_that_is_not_a_repro_is_never_replaced(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        write(_add_repro(0.0), tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    d = write(_add_repro(0.0), tmp_path / "again")
    write(_add_repro(0.5), d)  # a repro directory is replaced whole
    assert _run(d).returncode == 1


def test_a_difference_of_inf_or_nan_is_written_as_strict_json(tmp_path):
    """A sweep failure whose difference is infinite (the EP gave a NaN where the reference is
    finite) wrote no repro at all: finding.json is strict JSON (``allow_nan=False``), so the
    non-finite numbers are written as strings and the directory is whole."""
    base = _add_repro(0.0)
    details = {"outcome": "NAN", "difference": {"max_abs": float("inf"), "max_rel": np.float64("nan"),
                                                "worst": np.array([1.0, -np.inf])}}
    d = write(Repro(**{**base.__dict__, "details": details}), tmp_path / "r")
    finding = json.loads((d / "finding.json").read_text())  # strict: no bare NaN/Infinity
    assert finding["details"]["difference"] == {"max_abs": "inf", "max_rel": "nan", "worst": [1.0, "-inf"]}
    assert "NaN" not in (d / "finding.json").read_text() and "Infinity" not in (d / "finding.json").read_text()
