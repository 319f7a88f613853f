"""The worker protocol and the runner's pipeline: what travels is what was meant, and
every observation carries its own evidence even with the next probe already queued."""

from __future__ import annotations

import io
import os
import select
import json
import subprocess
import sys

import numpy as np
import pytest

from epaudit.catalog import BY_ID, FEATURES
from epaudit.classify.outcome import classify, classify_runs
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.model import Provider
from epaudit.run.canary import CANARY_MODEL, canary_model
from epaudit.run.probeset import ProbeSet
from epaudit.run.runner import PIPELINE, probe_ep, run_plan
from epaudit.run.workers import Worker
from epaudit.worker import faults as WF
from epaudit.worker import ortinfo as WI
from epaudit.worker import protocol as W

CPU = Provider("CPU", "CPUExecutionProvider")


@pytest.mark.parametrize("array", [
    np.array(7, dtype=np.int32),                       # a scalar input stays a scalar
    np.arange(6, dtype=np.float16).reshape(2, 3).T,    # not C-contiguous
    np.zeros((0, 3), dtype=np.float32),                # empty
    np.array([[True, False]]),
    np.array(-0.0, dtype=np.float64),
])
def test_arrays_cross_the_pipe_with_their_shape_dtype_and_bits(array):
    back = W.read_message(io.BytesIO(W.encode({"x": [array], "b": b"\x00\x01"})))
    got = back["x"][0]
    assert got.shape == array.shape and got.dtype == array.dtype
    assert got.tobytes() == np.ascontiguousarray(array).tobytes()
    assert back["b"] == b"\x00\x01"


def test_the_worker_announces_hello_unasked_and_reports_stderr_spans():
    w = Worker(sys.executable)
    try:
        facts = w.hello(60)
        assert facts["ort_version"] and "CPUExecutionProvider" in facts["providers"]
        w.send({"op": "nope"})
        with pytest.raises(Exception) as err:
            w.receive(60)
        assert "unknown request op 'nope'" in str(err.value)
        assert w.request({"op": "hello"}, 60)["python"] == facts["python"]  # still serving
    finally:
        w.close()


def test_the_shipped_canary_bytes_are_what_onnx_builds():
    assert CANARY_MODEL == canary_model()


def test_distribution_read_beside_the_package_matches_importlib_metadata(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(WI, "ort", onnxruntime)
    fast = WI._dist_info_near()
    assert fast is not None and fast.startswith("onnxruntime")
    monkeypatch.setattr(WI, "_dist_info_near", lambda: None)
    assert WI._distribution() == fast  # the slow scan names the same distribution


def test_each_probe_keeps_its_own_stderr_with_the_next_one_queued():
    """ORT logs the run failure of the short opset-24 mask: that line belongs to that probe
    only, not to the probes queued before or after it."""
    ids = ["attention.mask.bool", "attention.opset24.mask_shorter", "attention.basic"]
    features = [BY_ID[i] for i in ids]
    assert PIPELINE >= 2
    run = probe_ep(CPU, features, ProbeSet(features))
    logged = {fid: "Non-zero status code" in run.observations[fid].stderr for fid in ids}
    assert logged == {ids[0]: False, ids[1]: True, ids[2]: False}


def test_a_crash_at_the_head_reruns_the_queued_probe_on_a_fresh_worker():
    """Every probe of an EP whose worker SIGKILLs itself crashes on its own: the queued
    one was started again on a fresh worker, not reported as the first one's crash."""
    features = [BY_ID[i] for i in ("gqa.softcap", "attention.scale", "attention.basic")]
    broken = Provider("BROKEN", "CPUExecutionProvider", inject_fault="kill")
    run = probe_ep(broken, features, ProbeSet(features), timeout=30)
    for f in features:
        o = run.observations[f.id]
        assert o.status == "crash" and "SIGKILL" in o.detail
        assert o.stderr.count(WF.FAULT_MARKER) == 1, o.stderr  # its own marker, once


def test_classifying_during_the_run_equals_classifying_after_it():
    features = FEATURES[:6]
    probes = ProbeSet(features)
    broken = Provider("BROKEN", "CPUExecutionProvider", inject_fault="nan")
    names = {"CPU": CPU.name, "BROKEN": broken.name}
    early = {}

    def observe(alias, obs):
        early[(obs.feature_id, alias)] = classify(obs, probes[obs.feature_id], names[alias])

    runs = run_plan([CPU, broken], features, probes=probes, observe=observe, keep=True)
    later, _ = classify_runs(runs, [f.id for f in features], probes, names)
    assert early.keys() == later.keys() and len(early) == 12
    for k in later:
        assert (early[k].outcome, early[k].summary) == (later[k].outcome, later[k].summary)
    assert {later[(f.id, "BROKEN")].outcome for f in features} == {Outcome.NAN}


def test_a_report_on_stdout_is_whole_when_the_process_exits(tmp_path):
    """epaudit ends with os._exit after flushing: a piped JSON report is complete, and the
    exit status is the gate's."""
    r = subprocess.run([sys.executable, "-m", "epaudit", "check", "--ep", "CPU", "--feature", "gqa.*",
                        "--format", "json"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["features"]) == len([f for f in FEATURES if f.id.startswith("gqa.")])


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (3, 3), (256 + 2, 2), ("message", 1)])
def test_exit_status_mapping_is_the_interpreters(code, status, capsys):
    from epaudit.launch import _exit_status

    assert _exit_status(code) == status
    if isinstance(code, str):
        assert capsys.readouterr().err == "message\n"


def test_a_reply_is_only_ever_taken_for_the_request_it_answers():
    """Every request carries a seq the worker echoes; a reply to any other request than
    the oldest one awaited kills the worker (CRASH, never judged against the wrong probe)."""
    from epaudit.run.workers import WorkerDied

    w = Worker(sys.executable)
    try:
        assert w.hello(60)["ort_version"]
        w.send({"op": "hello"})
        w.send({"op": "hello"})
        w._awaited[0], w._awaited[1] = w._awaited[1], w._awaited[0]  # expect them swapped
        with pytest.raises(WorkerDied, match="answered request 1 where 2 was awaited"):
            w.receive(60)
        assert w.proc.poll() is not None  # killed
        with pytest.raises(WorkerDied):
            w.receive(60)                 # and stays dead for every later wait
    finally:
        w.close()


def test_requests_larger_than_the_pipe_queue_without_blocking_and_all_are_answered():
    """Requests are written without blocking (what the pipe cannot take waits and is written
    while the parent waits for a reply): three 5 MiB requests queue at once, in order."""
    w = Worker(sys.executable)
    try:
        python = w.hello(60)["python"]
        pad = b"\x07" * (5 << 20)
        for _ in range(3):
            w.send({"op": "hello", "pad": pad})
        assert len(w._outbuf) > 0  # more than the pipe takes: the rest waits, send returned
        assert [w.receive(60)[0]["python"] for _ in range(3)] == [python] * 3
        assert not w._outbuf
    finally:
        w.close()


def test_a_reply_header_claiming_exabytes_times_out_and_allocates_nothing():
    """Outside input: the reply stream is read as it comes; a frame whose header claims 2**62
    bytes of blobs is waited for until the probe's limit (TIMEOUT, the worker killed), never
    read in one allocation, and never taken as a reply."""
    import struct

    from epaudit.run.workers import WorkerTimeout

    w = Worker(sys.executable)
    r, wr = os.pipe()
    try:
        assert w.hello(60)["ort_version"]
        w._poll.unregister(w._in_fd)
        w._in_fd = r
        w._poll.register(r, select.POLLIN)
        header = b'{"body": {"ok": true, "result": {}, "seq": 1}, "blobs": [4611686018427387904]}'
        os.write(wr, struct.pack("<Q", len(header)) + header + b"\0" * 1000)
        w.send({"op": "hello"})
        w._pump(0.5)  # the header is in: the frame's claimed length is known
        os.write(wr, b"\0" * 1000)  # more of it arrives: read in bounded pieces
        with pytest.raises(WorkerTimeout):
            w.receive(1.0)
        assert w.proc.poll() is not None  # killed
    finally:
        w.close()
        os.close(r)
        os.close(wr)
