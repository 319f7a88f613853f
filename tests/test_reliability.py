"""A gate that survives crashes, hangs and interruption (issue 7), with real processes.

* Workers are killed at random points (a seeded loop: which probe, how long after the one
  before it finished, which signal). Every other probe keeps its result; the one hit
  reads ``CRASH`` (SIGKILL, SIGSEGV, SIGABRT) or ``TIMEOUT`` (SIGSTOP: a real hang).
* A real SIGINT / SIGTERM to a real ``epaudit check`` mid-probe: the workers are stopped,
  none is left running, no temp directory is left, and the report is written, marked
  ``incomplete``, exit 3 (1 when a failing finding is already known).
* EPs are probed concurrently, bounded by ``--jobs``.
* The interpreter named in the matrix is executed as given, never through a shell.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TODAY, make_matrix
from procs import alive, cpu_ticks, tagged

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.cli import main, write_atomic
from epaudit.contract.outcomes import Outcome
from epaudit.run.runner import PIPELINE

# Small, quick probes of both operators.
KILL_FEATURES = [BY_ID[f] for f in (
    "gqa.prompt", "gqa.softcap", "gqa.local_window", "gqa.smooth_softmax",
    "attention.basic", "attention.scale", "attention.softcap", "attention.mask.bool")]


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """TMPDIR of this test (parent and, through the runner, workers): must end up empty."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    yield d
    monkeypatch.setattr(tempfile, "tempdir", None)


def _two_eps(tag: str) -> str:
    return (f'[providers.CPU.env]\nEPAUDIT_TEST_TAG = "{tag}-CPU"\n'
            f'[providers.VICTIM]\nname = "CPUExecutionProvider"\nenv = {{ EPAUDIT_TEST_TAG = "{tag}-VICTIM" }}\n')


# (signal, the outcome the probe it hits must read)
KILLS = [(signal.SIGKILL, Outcome.CRASH), (signal.SIGSEGV, Outcome.CRASH),
         (signal.SIGABRT, Outcome.CRASH), (signal.SIGSTOP, Outcome.TIMEOUT)]


@pytest.mark.parametrize("seed", range(6))
def test_a_worker_killed_at_a_random_point_costs_only_that_probe(seed, private_tmp):
    rng = random.Random(seed)
    sig, expected = KILLS[seed % len(KILLS)]
    n = len(KILL_FEATURES)
    after = rng.randint(1, n - 4)          # kill once this many probes have finished ...
    delay = rng.uniform(0.0, 0.004)        # ... this long afterwards (mid-probe or between)
    tag = uuid.uuid4().hex
    m = make_matrix(_two_eps(tag), gate='reference = ["CPU"]\ngated = ["VICTIM"]')
    done = {"VICTIM": 0}
    shot: dict = {}

    def kill() -> None:
        pids = list(tagged(f"{tag}-VICTIM", parent=os.getpid()))
        shot["finished"] = done["VICTIM"]
        shot["pids"] = pids
        for pid in pids:
            os.kill(pid, sig)

    def progress(alias: str, fid: str) -> None:
        if alias == "VICTIM":
            done["VICTIM"] += 1
            if done["VICTIM"] == after:
                # On the victim's own thread: while it sleeps, the worker can only finish
                # what is already queued, so it is still there when the signal is sent (a
                # timer thread on a loaded machine could fire after the EP's last probe).
                time.sleep(delay)
                kill()

    result = run(m, features=KILL_FEATURES, timeout=2.0, today=TODAY, progress=progress)
    assert shot["pids"], "the victim's worker was running when the signal was sent"
    assert not result.incomplete
    assert all(result.results[(f.id, "CPU")].outcome is Outcome.PASS for f in KILL_FEATURES)
    victim = [result.results[(f.id, "VICTIM")] for f in KILL_FEATURES]
    hit = [i for i, c in enumerate(victim) if c.outcome is not Outcome.PASS]
    if shot["finished"] <= n - 2:  # the signal landed before the last probe was sent
        assert len(hit) == 1, [(c.feature_id, c.outcome, c.summary) for c in victim]
        # One the worker had when the signal came: the runner keeps PIPELINE requests
        # queued and sends the next before it records (classifies) the answer it got, so
        # the worker can be up to PIPELINE probes past the count of recorded ones.
        assert shot["finished"] <= hit[0] <= shot["finished"] + PIPELINE
    assert len(hit) <= 1
    for i in hit:
        assert victim[i].outcome is expected, victim[i].summary
        if expected is Outcome.CRASH:
            assert f"worker killed by {sig.name}" in victim[i].summary
    assert not tagged(tag), "no worker left running"
    assert list(private_tmp.iterdir()) == [], "every worker temp directory removed"


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("sig, failing, exit_code", [
    (signal.SIGINT, False, 3),   # Ctrl-C, nothing failing yet: incomplete
    (signal.SIGTERM, True, 1),   # a failing finding already known wins
])
def test_signal_stops_workers_and_writes_an_incomplete_report(tmp_path, sig, failing, exit_code):
    tag = uuid.uuid4().hex
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    ign = (f'[providers.IGN]\nname = "CPUExecutionProvider"\ninject_fault = "ignore"\n'
           f'env = {{ EPAUDIT_TEST_TAG = "{tag}-IGN" }}\n') if failing else ""
    matrix = tmp_path / "m.toml"
    matrix.write_text(textwrap.dedent(f'''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        gated = ["HANG"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        env = {{ EPAUDIT_TEST_TAG = "{tag}-CPU" }}
        [providers.HANG]
        name = "CPUExecutionProvider"
        inject_fault = "hang"
        env = {{ EPAUDIT_TEST_TAG = "{tag}-HANG" }}
        ''') + ign)
    report = tmp_path / "report.json"
    features = ["gqa.softcap", "attention.basic"]
    cmd = [sys.executable, "-m", "epaudit", "check", "--matrix", str(matrix), "--format", "json",
           "--output", str(report), "--timeout", "300", "--jobs", "3"]
    for f in features:
        cmd += ["--feature", f]
    proc = subprocess.Popen(cmd, env=dict(os.environ, TMPDIR=str(tmp)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen: dict[int, str] = {}
    healthy = {f"{tag}-CPU"} | ({f"{tag}-IGN"} if failing else set())
    try:
        def hanging():
            """The healthy EPs have come and gone; the HANG worker sits in its first probe."""
            now = tagged(tag, parent=proc.pid)
            seen.update(now)
            if set(now.values()) != {f"{tag}-HANG"} or not healthy <= set(seen.values()):
                return None
            (pid,) = now
            before = cpu_ticks(pid)
            time.sleep(0.5)
            return pid if cpu_ticks(pid) == before else None

        hang_pid = _wait_for(hanging, 120, "the HANG worker to hang")
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exit_code, err
    assert "Traceback" not in err
    assert f"interrupted by {sig.name}" in err
    assert not alive(hang_pid) and not tagged(tag), "every worker stopped"
    assert not any(alive(pid) for pid in seen)
    assert list(tmp.iterdir()) == [], "temp directories removed"
    data = json.loads(report.read_text())
    assert data["incomplete"] is True and data["exit_code"] == exit_code
    cells = {(r["feature"], r["ep"]): r["outcome"] for r in data["results"]}
    assert {k: v for k, v in cells.items() if k[1] == "CPU"} == {(f, "CPU"): "PASS" for f in features}
    assert not [k for k in cells if k[1] == "HANG"], "the hanging probe did not finish"
    if failing:
        assert {k: v for k, v in cells.items() if k[1] == "IGN"} == {(f, "IGN"): "IGNORED" for f in features}
        assert data["verdict"].startswith("FAIL") and "run interrupted: 2 probe(s)" in data["verdict"]
    else:
        assert data["verdict"] == "INCOMPLETE: run interrupted: 2 probe(s) did not finish"
    assert not list(tmp_path.glob(".epaudit-*")), "the report was written atomically"


@pytest.mark.parametrize("jobs, concurrent", [(2, True), (1, False)])
def test_eps_are_probed_concurrently_up_to_jobs(jobs, concurrent):
    """Two EPs whose probe hangs for the whole timeout: with ``jobs=2`` the two hangs
    overlap in time, with ``jobs=1`` they follow each other."""
    m = make_matrix('[providers.A]\nname = "CPUExecutionProvider"\ninject_fault = "hang"\n'
                    '[providers.B]\nname = "CPUExecutionProvider"\ninject_fault = "hang"\n',
                    gate='reference = ["CPU"]')
    ended: dict[str, float] = {}
    result = run(m, providers=[m.providers["A"], m.providers["B"]], features=[BY_ID["gqa.softcap"]],
                 timeout=1.0, jobs=jobs, today=TODAY,
                 progress=lambda alias, fid: ended.setdefault(alias, time.monotonic()))
    spans = {}
    for alias in ("A", "B"):
        c = result.results[("gqa.softcap", alias)]
        assert c.outcome is Outcome.TIMEOUT
        spans[alias] = (ended[alias] - c.seconds, ended[alias])
    (a0, a1), (b0, b1) = spans["A"], spans["B"]
    assert (a0 < b1 and b0 < a1) is concurrent, spans


def test_interpreter_is_executed_as_given_never_through_a_shell(tmp_path):
    """A path full of shell syntax runs as that file; a command line is not split."""
    import onnxruntime

    marker = tmp_path / "pwned"
    weird = tmp_path / "dir with spaces; $(touch pwned)"
    weird.mkdir()
    python = weird / "py`touch pwned`;touch pwned #"
    python.symlink_to(os.path.realpath(sys.executable))
    site = str(Path(onnxruntime.__file__).resolve().parent.parent)
    as_command = f"{sys.executable} -c 'import pathlib; pathlib.Path(\"{marker}\").touch()'"
    m = make_matrix(
        f'[providers.WEIRD]\nname = "CPUExecutionProvider"\npython = {json.dumps(str(python))}\n'
        f'env = {{ PYTHONPATH = {json.dumps(site)} }}\n'
        f'[providers.CMD]\nname = "CPUExecutionProvider"\npython = {json.dumps(as_command)}\n',
        gate='reference = ["CPU"]')
    cwd = os.getcwd()
    os.chdir(weird.parent)  # where `touch pwned` would land
    try:
        result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    finally:
        os.chdir(cwd)
    assert result.eps["WEIRD"].live and result.eps["WEIRD"].python == str(python)
    assert result.results[("gqa.softcap", "WEIRD")].outcome is Outcome.PASS
    assert not result.eps["CMD"].live and "cannot start worker interpreter" in result.eps["CMD"].reason
    assert not marker.exists() and not (tmp_path / "pwned").exists()


def test_unwritable_output_fails_before_any_worker_starts(tmp_path):
    """The interpreter is a script that leaves a mark: with a bad ``--output`` it never runs."""
    mark = tmp_path / "worker-started"
    python = tmp_path / "python-that-marks"
    python.write_text(f'#!/bin/sh\ntouch "{mark}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    m = tmp_path / "m.toml"
    m.write_text(f'schema_version = 1\n[providers.CPU]\nname = "CPUExecutionProvider"\npython = "{python}"\n')
    base = ["check", "--matrix", str(m), "--feature", "gqa.softcap"]
    r = CliRunner().invoke(main, base + ["--output", str(tmp_path / "no" / "such" / "dir" / "r.json")])
    assert r.exit_code == 2 and "cannot write there" in r.output and "Traceback" not in r.output
    assert not mark.exists()
    r = CliRunner().invoke(main, base + ["--output", str(tmp_path / "r.json")])
    assert r.exit_code == 0 and mark.exists()  # the same command with a good path does run it


def test_a_failed_report_write_leaves_the_old_report_whole(tmp_path):
    target = tmp_path / "report.json"
    target.write_text('{"old": true}\n')
    with pytest.raises(UnicodeEncodeError):
        write_atomic(str(target), '{"new": "' + "x" * 100_000 + '\ud800"}')  # fails mid-write
    assert target.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    write_atomic(str(target), '{"new": true}\n')
    assert target.read_text() == '{"new": true}\n'


def test_a_bare_interpreter_name_is_found_on_the_workers_path(tmp_path):
    """``python = "epaudit-test-python"`` is looked up on the PATH the worker gets (its
    provider ``env`` included), as ``subprocess`` would; a name found nowhere is
    UNAVAILABLE with the reason, never a traceback."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "epaudit-test-python").symlink_to(os.path.realpath(sys.executable))
    import onnxruntime

    site = str(Path(onnxruntime.__file__).resolve().parent.parent)
    m = make_matrix(
        f'[providers.NAMED]\nname = "CPUExecutionProvider"\npython = "epaudit-test-python"\n'
        f'env = {{ PATH = {json.dumps(str(bindir) + os.pathsep + os.environ.get("PATH", ""))}, '
        f'PYTHONPATH = {json.dumps(site)} }}\n'
        f'[providers.NOWHERE]\nname = "CPUExecutionProvider"\npython = "epaudit-no-such-python"\n',
        gate='reference = ["CPU"]')
    result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert result.eps["NAMED"].live, result.eps["NAMED"].reason
    assert result.results[("gqa.softcap", "NAMED")].outcome is Outcome.PASS
    assert not result.eps["NOWHERE"].live
    assert "cannot start worker interpreter 'epaudit-no-such-python'" in result.eps["NOWHERE"].reason


def test_the_callers_directory_never_shadows_the_workers_imports(tmp_path, monkeypatch):
    """The worker starts from ``python -c``, whose sys.path begins with the current
    directory: a ``numpy.py`` where epaudit runs must not be what the worker imports."""
    (tmp_path / "numpy.py").write_text("raise ImportError('the caller directory was imported from')\n")
    (tmp_path / "onnxruntime.py").write_text("raise ImportError('the caller directory was imported from')\n")
    monkeypatch.chdir(tmp_path)
    from epaudit.run.workers import Worker

    w = Worker(sys.executable)
    try:
        facts = w.hello(60)
        assert facts["ort_version"]
    finally:
        w.close()


def test_without_posix_spawn_workers_start_through_popen(monkeypatch, private_tmp):
    """Where os.posix_spawn lacks setsid (not Linux), subprocess.Popen starts the worker:
    same probe outcome, same cleanup."""
    from epaudit.run import spawn

    monkeypatch.setattr(spawn, "_POSIX_SPAWN_SETSID", False)
    m = make_matrix("", gate='reference = ["CPU"]')
    result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert result.results[("gqa.softcap", "CPU")].outcome is Outcome.PASS
    assert list(private_tmp.iterdir()) == []


def test_what_a_worker_prints_at_start_up_never_breaks_its_replies(tmp_path):
    """Found by a fresh user: a sitecustomize that prints (before onnxruntime is even
    imported) corrupted the reply stream: the EP read UNAVAILABLE, 'killed by SIGKILL'."""
    noisy = tmp_path / "noisy"
    noisy.mkdir()
    (noisy / "sitecustomize.py").write_text("print('hello from sitecustomize'); print('[', flush=True)\n")
    import onnxruntime

    site = str(Path(onnxruntime.__file__).resolve().parent.parent)
    m = make_matrix(f'[providers.NOISY]\nname = "CPUExecutionProvider"\n'
                    f'env = {{ PYTHONPATH = {json.dumps(str(noisy) + os.pathsep + site)} }}\n',
                    gate='reference = ["CPU"]')
    result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert result.eps["NOISY"].live, result.eps["NOISY"].reason
    assert result.results[("gqa.softcap", "NOISY")].outcome is Outcome.PASS


def test_a_replacement_worker_that_cannot_start_ends_the_eps_run_quickly(tmp_path):
    """After a crash the runner starts a fresh worker; one that dies at start-up is not
    retried for every remaining probe (each try could wait 120 s): the rest read CRASH
    with the replacement's own failure as the reason."""
    hook = tmp_path / "hook"
    hook.mkdir()
    marker = tmp_path / "started-once"
    (hook / "sitecustomize.py").write_text(
        "import os, sys\n"
        f"m = {str(marker)!r}\n"
        "if os.path.exists(m):\n"
        "    sys.stderr.write('replacement refused by the test hook\\n'); sys.stderr.flush(); os._exit(7)\n"
        "open(m, 'w').close()\n")
    import onnxruntime

    site = str(Path(onnxruntime.__file__).resolve().parent.parent)
    m = make_matrix(f'[providers.DOOMED]\nname = "CPUExecutionProvider"\ninject_fault = "kill"\n'
                    f'env = {{ PYTHONPATH = {json.dumps(str(hook) + os.pathsep + site)} }}\n',
                    gate='reference = ["CPU"]')
    t0 = time.monotonic()
    result = run(m, features=KILL_FEATURES[:4], today=TODAY)
    assert time.monotonic() - t0 < 60
    doomed = [result.results[(f.id, "DOOMED")] for f in KILL_FEATURES[:4]]
    assert doomed[0].outcome is Outcome.CRASH and "SIGKILL" in doomed[0].summary
    for c in doomed[1:]:
        assert c.outcome is Outcome.CRASH
        assert "the replacement worker did not start: worker exited with status 7" in c.evidence["detail"]
        assert "refused by the test hook" in c.evidence["detail"]


def test_sigterm_while_starting_stops_the_prestarted_workers(tmp_path):
    """Found by a fresh user: SIGTERM before the run began killed epaudit by default
    action, leaving the prestarted worker's temp directory; it now acts as Ctrl-C."""
    private = tmp_path / "tmp"
    private.mkdir()
    env = dict(os.environ, TMPDIR=str(private))
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", "check", "--ep", "CPU"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)  # prestarted, importing the CLI
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (proc.returncode, err)
    assert "Traceback" not in err and err.startswith("epaudit: interrupted")
    assert list(private.iterdir()) == []
