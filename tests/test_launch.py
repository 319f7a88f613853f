"""The entry point starts a worker before its own imports; nobody's worker outlives the run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from procs import tagged


def _epaudit(*args: str, tag: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, EPAUDIT_TEST_TAG=tag)
    return subprocess.run([sys.executable, "-m", "epaudit", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("args, code", [
    (("check", "--ep", "CPU", "--feature", "gqa.softcap"), 0),   # the prestarted worker runs CPU
    (("check", "--ep", "CUDA", "--feature", "gqa.softcap"), 3),  # same interpreter: CUDA's (not live here: nothing probed)
    (("check", "--ep", "NOPE"), 2),                              # usage error: never taken
])
def test_prestarted_worker_is_used_or_killed(args, code):
    tag = f"launch-{uuid.uuid4().hex}"
    r = _epaudit(*args, tag=tag)
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr
    assert tagged(tag) == {}, "a worker outlived its epaudit run"


def test_take_matches_interpreter_and_empty_environment_only():
    from epaudit.run import spawn

    spawn.prestart(sys.executable)
    try:
        assert spawn.take(sys.executable, {"X": "1"}) is None       # another environment
        assert spawn.take("/nonexistent/python") is None            # another interpreter
        s = spawn.take(sys.executable)
        assert s is not None and s.proc.poll() is None
        assert spawn.take(sys.executable) is None                   # handed out once
        spawn.close(s)
    finally:
        spawn.discard()


def test_take_is_atomic_across_ep_threads():
    """Found by the matrix fuzzer: two EP threads starting workers at once both popped the
    one prestarted worker (IndexError: pop from empty list)."""
    from concurrent.futures import ThreadPoolExecutor

    from epaudit.run import spawn

    spawn.prestart(sys.executable)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda _: spawn.take(sys.executable), range(64)))
        taken = [s for s in got if s is not None]
        assert len(taken) == 1
        spawn.close(taken[0])
    finally:
        spawn.discard()


@pytest.mark.parametrize("argv, n", [
    (["check"], 2),                                   # shipped matrix: CPU and CUDA here
    (["check", "--ep", "CPU"], 1),
    (["check", "--ep=CPU,CUDA"], 2),
    (["check", "--matrix", "m.toml", "--ep", "A,B,C,D,E,F,G,H,I"], "cores"),
    (["probe", "--ep", "CUDA"], 1),
    (["check", "--results", "saved/*.json"], 0),       # nothing to probe
    (["features"], 0),
    ([], 0),
])
def test_workers_prestarted_follow_the_command_line(argv, n):
    from epaudit.launch import workers_wanted

    want = min(9, os.cpu_count() or 1) if n == "cores" else min(n, os.cpu_count() or 1)
    assert workers_wanted(argv) == want


def test_two_eps_of_this_interpreter_each_take_a_prestarted_worker(monkeypatch):
    """Two EPs under this interpreter, two workers prestarted: each EP runs on one of them
    (none started late, none left over)."""
    from conftest import TODAY, make_matrix

    from epaudit.audit import run
    from epaudit.catalog import BY_ID
    from epaudit.run import spawn, workers

    spawn.prestart()
    spawn.prestart()
    prestarted = {s.proc.pid for s in spawn._ready}
    used = []
    init = workers.Worker.__init__

    def recording(self, *a, **k):
        init(self, *a, **k)
        used.append(self.proc.pid)

    monkeypatch.setattr(workers.Worker, "__init__", recording)
    try:
        m = make_matrix('[providers.CPU2]\nname = "CPUExecutionProvider"\n', gate='reference = ["CPU"]')
        result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    finally:
        spawn.discard()
    assert result.eps["CPU"].live and result.eps["CPU2"].live
    assert len(prestarted) == 2 and set(used) == prestarted
