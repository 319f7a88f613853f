"""Starting worker processes; standard library only.

Kept free of numpy, onnx and rich so that ``epaudit check`` can start its first worker
before it imports anything heavy (:func:`prestart`, called by ``epaudit/launch.py``): the
worker's import of onnxruntime (~0.3 s) then overlaps the parent's own imports (~0.5 s)
instead of following them. A worker is generic until its first request names an EP, so a
prestarted one serves whichever provider runs under the same interpreter with no extra
environment (:func:`take`); one nobody takes is killed at exit.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

#: The standalone worker script (``python worker.py``).
WORKER_PATH = str(Path(__file__).with_name("worker.py").resolve())


@dataclass
class Spawned:
    """A started worker process and the temporary directory it owns.

    Attributes:
        proc: the process, stdin/stdout pipes open.
        tmp: its working directory, also its ``TMPDIR``; removed by whoever closes it.
        err: the open file its stderr goes to (``err_path`` inside ``tmp``).
        err_path: path of that file.
        python: the interpreter it runs under (absolute when given as a path).
        env: the extra environment it was started with.
    """

    proc: subprocess.Popen
    tmp: tempfile.TemporaryDirectory
    err: object
    err_path: str
    python: str
    env: Mapping[str, str] = field(default_factory=dict)


def resolve(python: str) -> str:
    """The interpreter as executed: a path (it contains a separator) is made absolute,
    since the worker runs in its own directory; a bare name is looked up on ``PATH``."""
    return os.path.abspath(python) if os.sep in python else python


def spawn(python: str, env: Mapping[str, str] | None = None) -> Spawned:
    """Start ``python worker.py`` in a new process session and a new temp directory.

    The interpreter is passed to ``execve`` as given (never through a shell). A provider
    ``env`` that sets ``TMPDIR``/``TMP``/``TEMP`` itself wins.

    Raises:
        OSError: the interpreter cannot be started (its temp directory is removed).
    """
    env = dict(env or {})
    tmp = tempfile.TemporaryDirectory(prefix="epaudit-worker-")
    err_path = os.path.join(tmp.name, "stderr.log")
    err = open(err_path, "wb")
    full_env = dict(os.environ)
    full_env.update({"TMPDIR": tmp.name, "TMP": tmp.name, "TEMP": tmp.name})
    full_env.update(env)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    python = resolve(python)
    try:
        proc = subprocess.Popen([python, WORKER_PATH], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env=full_env, cwd=tmp.name, start_new_session=True,
                                shell=False)
    except BaseException:
        err.close()
        tmp.cleanup()
        raise
    return Spawned(proc, tmp, err, err_path, python, env)


_ready: list[Spawned] = []
# EP threads start their workers concurrently: handing out a prestarted one must be atomic.
_lock = threading.Lock()


def prestart(python: str | None = None) -> None:
    """Start one worker for ``python`` (default: this interpreter) ahead of need."""
    try:
        started = spawn(python or sys.executable)
    except OSError:
        return  # the runner will start (and report) its own
    with _lock:
        _ready.append(started)


def take(python: str, env: Mapping[str, str] | None = None) -> Spawned | None:
    """A prestarted worker for exactly this interpreter and (empty) environment, or ``None``."""
    if env:
        return None
    python = resolve(python)
    with _lock:
        for i, s in enumerate(_ready):
            if s.python == python and s.proc.poll() is None:
                return _ready.pop(i)
    return None


def close(s: Spawned) -> None:
    """Kill a started worker's process group, close its pipes and remove its temp directory."""
    try:
        os.killpg(s.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        s.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable
        pass
    for stream in (s.proc.stdin, s.proc.stdout, s.err):
        try:
            stream.close()
        except Exception:  # noqa: BLE001
            pass
    s.tmp.cleanup()


@atexit.register
def discard() -> None:
    """Kill and clean up every prestarted worker nobody took."""
    while True:
        with _lock:
            if not _ready:
                return
            s = _ready.pop()
        close(s)
