"""``scan --whole``: the whole model on each EP against its reference, the first wrong node,
its reproduction, and the model files that cannot be loaded (``epaudit/scan/whole.py``,
``locate.py``, ``external.py``). Real ORT sessions in child processes; the wrong EP is a
real session on a deliberately wrong model (``Target.fault``), never a mock."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import scan_models as sm
from click.testing import CliRunner

from conftest import CPU_ONLY
from epaudit.cli import main
from epaudit.scan.model import read
from epaudit.scan.whole import Target, run

MATRIX = CPU_ONLY
CPU = Target("CPU", "CPUExecutionProvider", sys.executable)


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def cnn(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(sm.tiny_cnn(), path)
    return path


def _feeds(seed=0):
    return {"image": np.random.default_rng(seed).random((1, 9, 6, 6)).astype(np.float32)}


def test_whole_model_matches_on_cpu_and_against_onnx_reference(cnn):
    (w,) = run(read(cnn), [CPU], CPU, _feeds())
    assert w.status == "match" and w.reference.startswith("onnx.reference"), (w.status, w.detail)
    assert w.outputs[0]["name"] == "probs" and w.outputs[0]["match"]


def test_a_wrong_ep_is_found_at_its_first_wrong_node_and_reproduced(cnn, tmp_path):
    """An EP whose second Conv is wrong: the outputs differ, the search names that node
    (not the Relu before it, nor the pool after it), with its configuration, and the
    one-node reproduction fails on that EP with the script's exit code 1."""
    broken = Target("BROKEN", "CPUExecutionProvider", sys.executable, fault="/features/conv2/Conv")
    repro = tmp_path / "repro"
    (w,) = run(read(cnn), [broken], CPU, _feeds(), repro=str(repro))
    assert w.status == "mismatch", (w.status, w.detail)
    assert w.first["node"] == "/features/conv2/Conv" and w.first["op"] == "ai.onnx.Conv"
    assert w.first["method"] == "every tensor exposed" and w.first["output"] == "c2"
    assert w.first["config"].startswith("Conv-11 float32 X[1,8,6,6] W[4,8,1,1]")
    assert w.repro == str(repro / "BROKEN")
    finding = json.loads((repro / "BROKEN" / "finding.json").read_text())
    assert finding["provider"] == "CPUExecutionProvider" and set(finding["inputs"]) == {"r1"}
    # The reproduction holds the model's real weights and the real input of the node: run
    # on the healthy CPU EP it passes (exit 0); the fault lives in the whole-model target.
    done = subprocess.run([sys.executable, str(repro / "BROKEN" / "repro.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert any("does not reproduce alone" in n or "reproduces alone" in n for n in w.notes)


def test_cutting_the_graph_finds_what_exposing_every_tensor_would_hide(cnn, tmp_path):
    """The bisection (one tensor cut at a time, fusions kept) lands on the same node."""
    import onnx as _onnx

    from epaudit.scan.locate import _bisect
    from epaudit.scan.whole import write_feeds

    broken = Target("BROKEN", "CPUExecutionProvider", sys.executable, fault="/features/conv2/Conv")
    notes: list[str] = []
    got = _bisect(_onnx.load(cnn), broken, CPU, write_feeds(_feeds(), str(tmp_path)), str(tmp_path), "fp32", 60.0,
                  notes)
    index, name, comparison, _ = got
    assert name == "c2" and not comparison["match"] and "cutting the graph" in notes[0]


def test_the_cli_runs_the_whole_model_and_joins_its_verdict(cnn, tmp_path):
    m = tmp_path / "m.toml"
    m.write_text(MATRIX)
    np.savez(tmp_path / "in.npz", **_feeds())
    out = tmp_path / "r.json"
    r = invoke("scan", str(cnn), "--matrix", str(m), "--whole", "--inputs", str(tmp_path / "in.npz"), "--format", "json",
               "--output", str(out))
    assert r.exit_code == 0, r.output
    (e,) = json.loads(out.read_text())["models"][0]["eps"]
    assert e["whole"]["status"] == "match" and e["verdict"] in ("would run as expected", "partly checked")


@pytest.mark.parametrize("content, words", [
    ({"image": np.zeros((1, 9, 6, 6), np.float64)}, "is float64, the model takes float32"),
    ({"pixels": np.zeros((1, 9, 6, 6), np.float32)}, "no array for input 'image'"),
])
def test_inputs_that_do_not_fit_are_one_line_exit_2(cnn, tmp_path, content, words):
    m = tmp_path / "m.toml"
    m.write_text(MATRIX)
    np.savez(tmp_path / "in.npz", **content)
    r = invoke("scan", str(cnn), "--matrix", str(m), "--whole", "--inputs", str(tmp_path / "in.npz"))
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and words in r.output and "Traceback" not in r.output


def _external(tmp_path, location: str):
    """The CNN with its first weight in an external file at ``location``."""
    model = sm.tiny_cnn()
    init = model.graph.initializer[0]
    data = onnx.numpy_helper.to_array(init).tobytes()
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(len(data)))):
        init.external_data.add(key=k, value=v)
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    onnx.save(model, folder / "m.onnx")
    return folder / "m.onnx", data


def test_a_missing_or_short_external_data_file_cannot_be_loaded(tmp_path):
    path, data = _external(tmp_path, "weights.bin")
    m = tmp_path / "m.toml"
    m.write_text(MATRIX)
    assert read(path).problems == ("external data file 'weights.bin' is missing",)
    r = invoke("scan", str(path), "--matrix", str(m), "--no-node-probes")
    assert r.exit_code == 2 and "CPU  cannot be loaded" in r.output, r.output
    (path.parent / "weights.bin").write_bytes(data[:10])
    assert read(path).problems[0].startswith("external data file 'weights.bin' is short: 10 bytes")
    (w,) = run(read(path), [CPU], CPU, _feeds())
    assert w.status == "not run" and "cannot be loaded" in w.detail
    (path.parent / "weights.bin").write_bytes(data)
    assert read(path).problems == ()


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/hostname", "sub/../../secret.bin", "link.bin"])
def test_external_data_outside_the_model_folder_is_never_followed(tmp_path, location):
    """A location that climbs out, is absolute, or is a link pointing out is refused before
    onnxruntime is handed the model: the whole model is not run, nothing is read."""
    path, data = _external(tmp_path, location)
    (tmp_path / "secret.bin").write_bytes(data)
    if location == "link.bin":
        (path.parent / "link.bin").symlink_to(tmp_path / "secret.bin")
    model = read(path)
    assert model.problems == (f"external data {location!r} is outside the model's folder: not followed",)
    (w,) = run(model, [CPU], CPU, _feeds())
    assert w.status == "not run"
