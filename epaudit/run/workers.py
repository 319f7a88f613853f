"""One worker process as the parent sees it: start, pipelined requests, replies, death.

Requests are written by a writer thread so a large one never blocks the thread that must
notice a hang; replies are read with the worker's stderr span (docs/internals.md "Pipelined
workers"). A worker killed by a signal raises :class:`WorkerDied`, one that stops answering
:class:`WorkerTimeout`.
"""

from __future__ import annotations

import collections
import os
import queue
import secrets
import signal
import subprocess
import threading
import time
from typing import Mapping

from ..worker import protocol as _worker
from . import spawn as _spawn

WORKER_PATH = _spawn.WORKER_PATH

#: The canary loads the EP's libraries (CUDA: cuDNN, cuBLAS) and may compile: allow more.
CANARY_TIMEOUT = 120.0
_STDERR_KEEP = 4000


class WorkerDied(Exception):
    """The worker exited mid-request; ``detail`` says how (exit status or signal)."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class WorkerTimeout(Exception):
    """The worker did not answer within the limit; it has been killed."""


class WorkerFailed(Exception):
    """The worker answered with its own traceback (an epaudit bug)."""


class WorkerStartFailed(Exception):
    """A replacement worker did not start (its exit or silence, and its stderr tail)."""


class WorkerInterrupted(Exception):
    """The run was interrupted (``stop`` set) while waiting; the worker has been killed."""


#: How often a wait for a worker's reply looks at the ``stop`` event, seconds.
_STOP_POLL = 0.05


class Worker:
    """A live worker process for one EP.

    The worker runs in its own process session (so a terminal's Ctrl-C reaches only the
    parent, which stops it), with its own temporary directory as working directory and
    as ``TMPDIR``/``TMP``/``TEMP``, so whatever it or ORT writes (stderr log, profiles) lies
    in one directory that :meth:`close` removes, whether the worker exited, crashed or
    hung. A provider ``env`` that sets those variables itself wins.

    Requests may be queued ahead (:meth:`send` several, then :meth:`receive` each reply
    in order): the worker answers them one at a time, so while it runs one the next is
    already waiting in its pipe. A writer thread does the writing, so a queued request
    larger than the pipe never blocks the caller, who must stay free to notice a hang.

    Args:
        python: interpreter to run the worker (``epaudit/worker/``) with: passed to ``execve`` as the
            program, as given (a path or a name looked up on ``PATH``), never through a
            shell, so spaces or shell syntax in it are part of the file name.
        env: extra environment variables for this worker only.

    Raises:
        OSError: the interpreter cannot be started (its temp directory is removed).
    """

    def __init__(self, python: str, env: Mapping[str, str] | None = None):
        started = _spawn.take(python, env) or _spawn.spawn(python, env)
        self._started = started
        self.proc = started.proc
        self._tmp, self._err, self._err_path = started.tmp, started.err, started.err_path
        self._replies: queue.Queue = queue.Queue()
        self._outbox: queue.Queue = queue.Queue()
        self._facts: dict | None = None
        #: ``seq`` of each request sent and not yet answered, oldest first; ``None`` for
        #: the hello the worker announces unasked. A reply must echo the oldest.
        self._awaited: collections.deque = collections.deque([None])
        self._seq = 0
        #: stderr bytes accounted to replies so far: what follows belongs to the request
        #: in progress (the evidence of a crash or hang).
        self._stderr_done = 0
        #: Sent with every request and written in each case marker the worker prints
        #: (:data:`epaudit.worker.protocol.CASE_MARKER`): text a model gets ORT to print
        #: (a node name in an error) cannot pass for a marker without it.
        self.case_token = secrets.token_hex(8)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._writer = threading.Thread(target=self._write, daemon=True)
        self._writer.start()

    def _read(self) -> None:
        try:
            while True:
                self._replies.put(_worker.read_message(self.proc.stdout, copy=False))
        except Exception:  # noqa: BLE001 - EOF or a torn frame: the worker is gone
            self._replies.put(None)

    def _write(self) -> None:
        while True:
            data = self._outbox.get()
            if data is None:
                return
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except Exception:  # noqa: BLE001 - the worker is gone: its reader says how
                return

    def stderr_between(self, start: int, end: int | None = None) -> str:
        """Worker stderr from byte ``start`` to ``end`` (default: what is there now),
        trimmed to the last few KB."""
        try:
            with open(self._err_path, "rb") as fh:
                fh.seek(start)
                data = fh.read() if end is None else fh.read(max(0, end - start))
        except OSError:
            return ""
        return data[-_STDERR_KEEP:].decode("utf-8", "replace")

    def stderr_since(self, offset: int) -> str:
        """Worker stderr written after byte ``offset`` (trimmed to the last few KB)."""
        return self.stderr_between(offset)

    def stderr_pending(self) -> str:
        """What the worker printed after its last reply: the request in progress."""
        return self.stderr_between(self._stderr_done)

    def stderr_offset(self) -> int:
        """Current size of the worker's stderr log, bytes."""
        try:
            return os.path.getsize(self._err_path)
        except OSError:
            return 0

    def hello(self, timeout: float, stop: threading.Event | None = None) -> dict:
        """The facts the worker announced when it started (``epaudit/worker/ortinfo.py`` ``hello``).

        Raises: as :meth:`receive`.
        """
        if self._facts is None:
            self._facts = self.receive(timeout, stop)[0]
        return self._facts

    def send(self, message: dict) -> None:
        """Queue one request; its reply comes from a later :meth:`receive`, in order.

        The request gets the next ``seq``, which the worker echoes: a reply is only ever
        judged against the request it answers."""
        self._seq += 1
        self._awaited.append(self._seq)
        self._outbox.put(_worker.encode({**message, "seq": self._seq, "case_token": self.case_token}))

    def receive(self, timeout: float, stop: threading.Event | None = None) -> tuple[dict, str]:
        """Wait for the next reply; returns ``(result, stderr the request printed)``.

        Args:
            timeout: seconds to wait for the reply.
            stop: when it is set during the wait, the worker is killed at once.

        Raises:
            WorkerDied: the process exited (its exit status or signal in ``detail``), or
                answered another request than the oldest one awaited (it is killed).
            WorkerTimeout: no reply within ``timeout`` seconds; the worker is killed.
            WorkerInterrupted: ``stop`` was set; the worker is killed.
            WorkerFailed: the worker raised; the traceback is the message.
        """
        deadline = time.monotonic() + timeout
        while True:
            if stop is not None and stop.is_set():
                self.kill()
                raise WorkerInterrupted("interrupted; worker killed")
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"no answer within {timeout:g} s; worker killed")
            try:
                # Short slices only when there is a stop event to watch.
                reply = self._replies.get(timeout=min(left, _STOP_POLL) if stop is not None else left)
                break
            except queue.Empty:
                continue
        if reply is None:
            self._replies.put(None)  # every later receive sees the death too
            raise WorkerDied(self._death())
        awaited = self._awaited.popleft() if self._awaited else "no request"
        if reply.get("seq") != awaited:
            self.kill()
            self._replies.put(None)
            raise WorkerDied(f"the worker answered request {reply.get('seq')!r} where {awaited!r} was "
                             "awaited; worker killed")
        start, end = (reply.get("stderr") or [None, None])[:2]
        if start is None or end is None:  # fd 2 not a file: what was new since the last reply
            start, end = self._stderr_done, self.stderr_offset()
        self._stderr_done = max(self._stderr_done, end)
        stderr = self.stderr_between(start, end) if end > start else ""
        if not reply.get("ok"):
            raise WorkerFailed(reply.get("error", "worker error"))
        return reply["result"], stderr

    def request(self, message: dict, timeout: float, stop: threading.Event | None = None) -> dict:
        """Send one request and wait for its reply (:meth:`send` then :meth:`receive`).

        Raises: as :meth:`receive`.
        """
        self.send(message)
        return self.receive(timeout, stop)[0]

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"worker killed by {name}"
        return f"worker exited with status {code}"

    def kill(self) -> None:
        """Kill the worker and its process group; idempotent."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable
            pass

    def close(self) -> None:
        """Stop the worker and remove its temp directory.

        The worker is killed (SIGKILL to its process group), not asked to exit: every
        answer has been read by then and it holds nothing worth saving, while a graceful
        interpreter exit runs ORT's teardown, about 0.2 s per worker on a 2-core machine
        (``benchmarks/floor_vs_check.py``) against a few milliseconds for the kill.
        """
        self._outbox.put(None)
        _spawn.close(self._started)


def _fresh_worker(python: str, env: Mapping[str, str] | None,
                  stop: threading.Event | None = None, limit: float = CANARY_TIMEOUT) -> Worker:
    """A replacement worker that has finished starting (imported onnxruntime).

    Waiting for its ``hello`` here keeps the interpreter's start-up out of the next
    probe's time limit, which would otherwise be spent partly on imports after a crash.

    Raises:
        OSError: the interpreter cannot be started.
        WorkerStartFailed: it started but died or said nothing within
            ``limit`` seconds (it is killed); the probes it was for never run.
        WorkerInterrupted: ``stop`` was set meanwhile (it is killed).
    """
    worker = Worker(python, env)
    try:
        worker.hello(limit, stop)
    except WorkerInterrupted:
        worker.close()
        raise
    except (WorkerDied, WorkerTimeout, WorkerFailed) as exc:
        tail = " | ".join(worker.stderr_since(0).strip().splitlines()[-3:])
        worker.close()
        raise WorkerStartFailed(f"the replacement worker did not start: {exc}" + (f" | {tail}" if tail else "")) from None
    return worker
