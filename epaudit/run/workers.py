"""One worker process as the parent sees it: start, pipelined requests, replies, death.

Requests and replies move on the thread that uses the worker, with ``poll(2)``: a request
is written without blocking (what the pipe cannot take yet waits in a buffer and is written
while the thread waits for a reply), so a large one never blocks the thread that must notice
a hang; replies are read with the worker's stderr span (docs/internals.md "Pipelined
workers"). No reader or writer thread: on two cores each handoff between threads cost the
parent a wake-up per probe. A worker killed by a signal raises :class:`WorkerDied`, one that
stops answering :class:`WorkerTimeout`.
"""

from __future__ import annotations

import collections
import fcntl
import math
import os
import secrets
import select
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
    already waiting in its pipe. A request is written without blocking; what the pipe
    cannot take yet is written by :meth:`receive` while it waits, so a queued request
    larger than the pipe never blocks the caller, who must stay free to notice a hang.
    One thread uses a worker (its EP's); :meth:`kill` may come from any.

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
        self._in_fd = self.proc.stdout.fileno()
        self._out_fd = self.proc.stdin.fileno()
        os.set_blocking(self._out_fd, False)
        for fd in (self._in_fd, self._out_fd):
            _grow_pipe(fd)
        self._inbuf = bytearray()  # reply bytes read and not yet a whole frame
        self._need = 0  # length of the frame at the head of _inbuf, once its header is in
        self._outbuf = bytearray()  # request bytes the pipe has not taken yet
        self._frames: collections.deque = collections.deque()  # whole replies not yet received
        self._gone = False  # end of the reply stream (or a torn frame): the worker is gone
        self._poll = select.poll()
        self._poll.register(self._in_fd, select.POLLIN)
        self._writing = False
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

    # ------------------------------------------------------------------ the pipes
    def _flush(self) -> None:
        """Write what the request pipe takes now, without blocking."""
        while self._outbuf:
            try:
                n = os.write(self._out_fd, self._outbuf)
            except BlockingIOError:
                break
            except OSError:  # the worker is gone: the reply stream says how
                self._outbuf.clear()
                break
            del self._outbuf[:n]
        want = bool(self._outbuf)
        if want != self._writing:
            if want:
                self._poll.register(self._out_fd, select.POLLOUT)
            else:
                self._poll.unregister(self._out_fd)
            self._writing = want

    def _take_frames(self) -> None:
        """Move every whole frame at the head of the reply bytes to ``_frames``."""
        buf = self._inbuf
        while True:
            if not self._need:
                self._need = _worker.frame_length(buf) or 0
                if not self._need:
                    return
            if len(buf) < self._need:
                return
            data = bytes(buf[:self._need])
            del buf[:self._need]
            self._need = 0
            self._frames.append(_worker.decode(data, copy=False))

    def _pump(self, wait: float) -> None:
        """Wait up to ``wait`` seconds for the pipes; read what came, write what fits."""
        try:
            ready = self._poll.poll(max(0, math.ceil(wait * 1000)))
        except InterruptedError:  # pragma: no cover - PEP 475 retries; a signal handler raised
            return
        for fd, ev in ready:
            if fd == self._out_fd:
                if ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    self._outbuf.clear()
                self._flush()
                continue
            try:
                # What the frame still lacks, in reads of at most READ_BYTES: a frame header
                # claiming exabytes waits for its timeout, never allocates them.
                chunk = os.read(self._in_fd, min(READ_BYTES, max(1 << 16, self._need - len(self._inbuf))))
            except OSError:
                chunk = b""
            if not chunk:
                self._gone = True
                self._poll.unregister(self._in_fd)
                continue
            self._inbuf += chunk
            try:
                self._take_frames()
            except Exception:  # noqa: BLE001 - a torn frame: the worker is gone
                self._gone = True
                self._poll.unregister(self._in_fd)

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
        self._outbuf += _worker.encode({**message, "seq": self._seq, "case_token": self.case_token})
        self._flush()

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
        while not self._frames and not self._gone:
            if stop is not None and stop.is_set():
                self.kill()
                raise WorkerInterrupted("interrupted; worker killed")
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"no answer within {timeout:g} s; worker killed")
            # Short slices only when there is a stop event to watch.
            self._pump(min(left, _STOP_POLL) if stop is not None else left)
        if not self._frames:  # every later receive sees the death too
            raise WorkerDied(self._death())
        reply = self._frames.popleft()
        awaited = self._awaited.popleft() if self._awaited else "no request"
        if reply.get("seq") != awaited:
            self.kill()
            self._frames.clear()
            self._gone = True
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
        _spawn.close(self._started)


#: Bytes a pipe to or from a worker is asked to hold (``F_SETPIPE_SZ``; Linux's default is
#: 64 KiB, an unprivileged process may ask up to ``/proc/sys/fs/pipe-max-size``, 1 MiB by
#: default): most requests and replies then fit whole, and a request is in the worker's pipe
#: before the parent turns to classifying the reply before it.
PIPE_BYTES = 1 << 20
#: Largest single read of a reply, bytes.
READ_BYTES = 16 << 20


def _grow_pipe(fd: int) -> None:
    """Ask for :data:`PIPE_BYTES` of pipe buffer on ``fd``; where that cannot be had (not
    Linux, a lower limit) the pipe stays as it is."""
    setsz = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsz is None:
        return
    try:
        fcntl.fcntl(fd, setsz, PIPE_BYTES)
    except OSError:
        pass


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
