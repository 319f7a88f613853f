"""The worker's one intra-op thread pool (``epaudit/worker/ortinfo.py``): as large as the
pool a user's session gets, shared by every session instead of made per session, its
threads at idle priority, and never claimed where ORT did not really make it.

Each case runs in a fresh interpreter: ORT's environment, and so its global pool, is made
once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="threads are counted in /proc/self/task (Linux)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_COMMON = """
import json, os, sys
import numpy as np
def threads():
    return {int(t) for t in os.listdir("/proc/self/task")}
from epaudit.worker.protocol import CANARY_MODEL
feeds = {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.float32)}
"""


def _run(body: str) -> dict:
    code = _COMMON + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_users_default_session_and_the_workers_pool_have_the_same_threads():
    # What a user's session with ORT's defaults starts (its own intra-op pool), counted
    # while it lives, in a process of its own.
    users = _run("""
        import onnxruntime as ort
        before = threads()
        sess = ort.InferenceSession(CANARY_MODEL, providers=["CPUExecutionProvider"])
        sess.run(None, feeds)
        print(json.dumps({"threads": len(threads() - before)}))
    """)
    # The worker's: its pool, and what its sessions add (nothing, when the pool is shared).
    worker = _run("""
        from epaudit.worker import ortinfo, sessions
        ortinfo.share_thread_pool()
        before = threads()
        kept = []
        for _ in range(5):
            kept.append(sessions._make_session(CANARY_MODEL, sessions.CPU, {}, False, None))
            kept[-1].run(None, feeds)
        print(json.dumps({"shared": ortinfo.SHARED_POOL, "pool": len(ortinfo.POOL_THREADS),
                          "added_by_sessions": len(threads() - before)}))
    """)
    assert worker["pool"] == users["threads"]
    assert worker["shared"] == (users["threads"] > 0)
    # Per-session pools would have added a pool's threads for each of the five sessions.
    assert worker["added_by_sessions"] == (0 if worker["shared"] else 5 * users["threads"])


def test_the_pools_threads_run_at_idle_priority():
    got = _run("""
        from epaudit.worker import ortinfo
        ortinfo.share_thread_pool()
        print(json.dumps({"policies": [os.sched_getscheduler(t) for t in ortinfo.POOL_THREADS],
                          "main": os.sched_getscheduler(0)}))
    """)
    if not got["policies"]:
        pytest.skip("ORT's default pool has no thread of its own on this machine (one core)")
    assert set(got["policies"]) == {os.SCHED_IDLE}
    assert got["main"] == os.SCHED_OTHER  # the thread that runs the probes keeps its priority


def test_a_pool_the_worker_did_not_see_made_is_not_claimed():
    # Where the pool sizes were set before (here by hand; an environment made by another
    # library), ORT's second call makes no thread and may say nothing. A session told not
    # to make its own pool where the environment has none would run with none, so the
    # worker claims a pool only when it saw the pool's threads appear.
    got = _run("""
        from onnxruntime.capi import _pybind_state
        _pybind_state.set_global_thread_pool_sizes(0, 1)
        from epaudit.worker import ortinfo, sessions
        ortinfo.share_thread_pool()
        so = sessions._session_options(False, None)
        print(json.dumps({"shared": ortinfo.SHARED_POOL, "pool": len(ortinfo.POOL_THREADS),
                          "per_session": so.use_per_session_threads,
                          "spinning": so.get_session_config_entry("session.intra_op.allow_spinning")}))
    """)
    assert got == {"shared": False, "pool": 0, "per_session": True, "spinning": "0"}


def test_importing_the_worker_in_another_process_leaves_its_sessions_alone():
    # A process that loads the worker's modules for their helpers (the test suite does)
    # must still make sessions with ORT's defaults: once global pools exist, ORT refuses
    # every session that asks for its own ("use_per_session_threads must be false").
    got = _run("""
        from epaudit.worker import ortinfo, sessions
        ortinfo.load()
        import onnxruntime as ort
        sess = ort.InferenceSession(CANARY_MODEL, providers=["CPUExecutionProvider"])
        out = sess.run(None, feeds)[0]
        print(json.dumps({"shared": ortinfo.SHARED_POOL, "sum": float(out.sum())}))
    """)
    assert got == {"shared": False, "sum": 12.0}
