"""Starting worker processes, with ``os.posix_spawn`` and almost nothing imported.

Kept free of numpy, onnx, rich and even :mod:`subprocess` and :mod:`tempfile` so that
``epaudit check`` can start its first worker before it imports anything heavy
(:func:`prestart`, called by ``epaudit/launch.py``): the worker's import of onnxruntime
(~0.3 s) then overlaps the parent's own imports instead of following them, and starts
~35 ms sooner than ``subprocess.Popen`` would let it (importing subprocess and tempfile
costs that on a 2-core machine; measured with ``python -c``). A worker is generic until
its first request names an EP, so a prestarted one serves whichever provider runs under
the same interpreter with no extra environment (:func:`take`); one nobody takes is killed
at exit.

The worker is started as ``<python> -c BOOTSTRAP worker/__init__.py <temp dir>``: the
bootstrap drops the ``-c`` entry ``''`` (the current directory) from ``sys.path``, changes
into the worker's temp directory (``posix_spawn`` has no ``cwd``), loads the ``worker``
folder through the import system as the package ``epaudit_worker`` (so the bytecode ``pip
install`` compiled for it is used instead of compiling it on every start, and nothing else of
epaudit is imported) and runs ``epaudit_worker.serve.main``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Mapping

#: The standalone worker script.
WORKER_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "worker", "__init__.py")

#: What the interpreter runs: ``argv[1]`` is :data:`WORKER_PATH`, ``argv[2]`` the temp
#: directory, ``argv[3]`` the file descriptor replies go to (see :func:`spawn`).
BOOTSTRAP = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "import os\n"
    "os.chdir(sys.argv[2])\n"
    "import importlib, importlib.util as u\n"
    "s = u.spec_from_file_location('epaudit_worker', sys.argv[1],\n"
    "                              submodule_search_locations=[os.path.dirname(sys.argv[1])])\n"
    "m = u.module_from_spec(s)\n"
    "sys.modules['epaudit_worker'] = m\n"
    "s.loader.exec_module(m)\n"
    "sys.exit(importlib.import_module('epaudit_worker.serve').main(int(sys.argv[3])))\n"
)


class Process:
    """A started worker process: the part of :class:`subprocess.Popen` the runner uses.

    Attributes:
        pid: process id (also its process group and session id).
        stdin: buffered binary writer to the worker's stdin.
        stdout: buffered binary reader of the worker's stdout.
        returncode: ``None`` while running; the exit status, or ``-signal`` when a signal
            ended it (as ``Popen.returncode``).
    """

    def __init__(self, pid: int, stdin, stdout):
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _reap(self, flags: int) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere: the status is lost
                self.returncode = 0
                return 0
            if pid == 0:
                return None
            self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def poll(self) -> int | None:
        """The exit status if the process has ended (reaping it), else ``None``."""
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end; returns its status.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                import subprocess

                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def kill(self) -> None:
        """SIGKILL the process (not its group); nothing if it has ended."""
        if self.poll() is None:
            try:
                os.kill(self.pid, 9)  # SIGKILL; the signal module (and enum) is not imported here
            except ProcessLookupError:
                pass


class Spawned:
    """A started worker process and the temporary directory it owns.

    Attributes:
        proc: the :class:`Process`, stdin/stdout pipes open.
        tmp: its working directory, also its ``TMPDIR``; removed by :func:`close`.
        err: the open file its stderr goes to (``err_path`` inside ``tmp``).
        err_path: path of that file.
        python: the interpreter it runs under (absolute when given as a path).
        env: the extra environment it was started with.
    """

    def __init__(self, proc: Process, tmp: str, err, err_path: str, python: str,
                 env: Mapping[str, str] | None = None):
        self.proc, self.tmp, self.err, self.err_path = proc, tmp, err, err_path
        self.python, self.env = python, dict(env or {})


def resolve(python: str) -> str:
    """The interpreter as executed: a path (it contains a separator) is made absolute,
    since the worker runs in its own directory; a bare name is looked up on ``PATH``."""
    return os.path.abspath(python) if os.sep in python else python


def _executable(python: str, env: Mapping[str, str]) -> str:
    """The file to execute: ``python`` itself when it is a path, else the first
    executable ``python`` on the child's ``PATH`` (as ``subprocess`` looks it up).

    Raises:
        FileNotFoundError: a bare name found nowhere on ``PATH``.
    """
    if os.sep in python:
        return python
    for folder in os.get_exec_path(env):
        candidate = os.path.join(folder, python)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", python)


def _temp_root() -> str:
    """Where worker temp directories go: :func:`tempfile.gettempdir` when the parent has
    imported tempfile already, else its first rules (``TMPDIR``, ``TEMP``, ``TMP``, /tmp)."""
    tf = sys.modules.get("tempfile")
    if tf is not None:
        return tf.gettempdir()
    for var in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(var)
        if value and os.path.isdir(value):
            return os.path.abspath(value)
    return "/tmp"


#: Worker temp directories are ``epaudit-worker-<parent pid>-<random>``: the parent's pid
#: lets a later run recognise what an earlier, killed one left (:func:`sweep_orphans`).
_DIR_PREFIX = "epaudit-worker-"
_swept = False


def sweep_orphans(root: str | None = None) -> list[str]:
    """Remove what a SIGKILLed epaudit left behind: each ``epaudit-worker-<pid>-*``
    directory whose parent ``pid`` is gone, after killing the process group of every
    process still running in it (found by the directory in its command line or its
    ``TMPDIR``, which every worker starts with).

    A Python worker cleans up after itself when its parent dies (``epaudit/worker/serve.py``,
    ``_watch_parent``); an interpreter that is not Python, or a wrapper script that
    never reaches the worker (``python = "conda-run-wrapper"`` that hangs), cannot, so the
    next run does it. Linux (``/proc``) only; elsewhere only the directories go.

    Returns:
        The directories removed.
    """
    root = root or _temp_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    stale = []
    for name in names:
        if not name.startswith(_DIR_PREFIX):
            continue
        pid = name[len(_DIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        stale.append(os.path.join(root, name))
    if not stale:
        return []
    for proc in _procs_in(stale):
        try:
            os.killpg(proc, 9)
        except OSError:
            try:
                os.kill(proc, 9)
            except OSError:
                pass
    for path in stale:
        _rmtree(path)
    return stale


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _procs_in(dirs: list[str]) -> list[int]:
    """Pids whose command line or environment names one of ``dirs`` (from ``/proc``; ``[]``
    without it): every worker starts with its directory in both (argument, ``TMPDIR``),
    and the environment survives a wrapper's ``exec``."""
    wanted = [d.encode() for d in dirs]
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        seen = b""
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{part}", "rb") as fh:
                    seen += fh.read() + b"\0"
            except OSError:
                continue
        if any(w in seen for w in wanted):
            out.append(int(entry))
    return out


def _mkdtemp() -> str:
    global _swept
    root = _temp_root()
    if not _swept:  # once per process: what an earlier, killed run left
        _swept = True
        sweep_orphans(root)
    for _ in range(100):
        path = os.path.join(root, f"{_DIR_PREFIX}{os.getpid()}-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(17, "no unused temporary directory name", root)  # pragma: no cover


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


#: ``os.posix_spawn`` with ``setsid`` (glibc 2.26+); elsewhere workers start through
#: :class:`subprocess.Popen`, which offers the same interface as :class:`Process`.
_POSIX_SPAWN_SETSID = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2") \
    and sys.platform.startswith("linux")


def _popen(python: str, env: Mapping[str, str], err, tmp: str):
    """Start the worker with :class:`subprocess.Popen`; replies on a pipe of their own."""
    import subprocess

    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen([python, "-c", BOOTSTRAP, WORKER_PATH, tmp, str(out_w)],
                                stdin=subprocess.PIPE, stdout=err, stderr=err, env=env,
                                pass_fds=(out_w,), start_new_session=True, shell=False)
    except BaseException:
        os.close(out_r)
        raise
    finally:
        os.close(out_w)
    proc.stdout = os.fdopen(out_r, "rb")
    return proc


def spawn(python: str, env: Mapping[str, str] | None = None) -> Spawned:
    """Start a worker under ``python`` in a new process session and a new temp directory.

    The interpreter is executed as given (a path, or a name looked up on ``PATH``), never
    through a shell. A provider ``env`` that sets ``TMPDIR``/``TMP``/``TEMP`` itself wins.

    Raises:
        OSError: the interpreter cannot be started (its temp directory is removed).
    """
    env = dict(env or {})
    tmp = _mkdtemp()
    err_path = os.path.join(tmp, "stderr.log")
    fds: list[int] = []
    err = None
    try:
        err = open(err_path, "wb")
        full_env = dict(os.environ)
        full_env.update({"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp})
        full_env.update(env)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        full_env["EPAUDIT_PARENT_PID"] = str(os.getpid())  # the worker dies with this process
        python = resolve(python)
        if not _POSIX_SPAWN_SETSID:
            return Spawned(_popen(python, full_env, err, tmp), tmp, err, err_path, python, env)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        fds = [in_r, in_w, out_r, out_w]
        # Replies go to their own descriptor, numbered above every one the parent hands
        # over, and stdout joins stderr in the log: whatever the interpreter prints at
        # start-up (a sitecustomize, a library) can never corrupt the reply stream.
        proto = max(fds + [err.fileno(), 2]) + 1
        # The pipe ends are close-on-exec (PEP 446): the child keeps only 0, 1, 2, proto.
        pid = os.posix_spawn(
            _executable(python, full_env), [python, "-c", BOOTSTRAP, WORKER_PATH, tmp, str(proto)],
            full_env,
            file_actions=[(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, proto),
                          (os.POSIX_SPAWN_DUP2, err.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)],
            setsid=True)
    except BaseException:
        for fd in fds:
            os.close(fd)
        if err is not None:
            err.close()
        _rmtree(tmp)
        raise
    os.close(in_r)
    os.close(out_w)
    proc = Process(pid, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"))
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
        os.killpg(s.proc.pid, 9)  # SIGKILL
    except (ProcessLookupError, PermissionError):
        pass
    try:
        s.proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - unkillable (TimeoutExpired): nothing more to do
        pass
    for stream in (s.proc.stdin, s.proc.stdout, s.err):
        try:
            stream.close()
        except Exception:  # noqa: BLE001
            pass
    _rmtree(s.tmp)


@atexit.register
def discard() -> None:
    """Kill and clean up every prestarted worker nobody took."""
    while True:
        with _lock:
            if not _ready:
                return
            s = _ready.pop()
        close(s)
