"""Running probes: one worker process per EP, crashes and hangs contained.

Each EP gets a worker (``worker.py``) started with that EP's interpreter and
environment. Before any feature, a canary decides whether the EP is live; a probe that
kills or hangs its worker is recorded as ``crash`` / ``timeout`` and a fresh worker takes
over for the rest. EPs run concurrently, one thread each (bounded by ``jobs``); probes
are built once and shared by every EP.
"""

from __future__ import annotations

import collections
import os
import queue
from collections import abc
import signal
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..classify.messages import ort_message
from . import faults as _faults
from . import spawn as _spawn
from ..worker import protocol as _worker
from ..matrix.model import Provider
from ..catalog.models import one_node_model
from ..contract.probes import MIN_SEPARATION, Feature, Probe
from ..contract.results import CaseRun, EPInfo, Observation, ProviderStatus

WORKER_PATH = _spawn.WORKER_PATH
#: Default per-probe limit, seconds: a few seconds beyond the slowest first-run shader
#: compile measured (WebGPU on lavapipe, about 11 s; docs/ort-facts.md "Timings").
DEFAULT_TIMEOUT = 20.0
#: The canary loads the EP's libraries (CUDA: cuDNN, cuBLAS) and may compile: allow more.
CANARY_TIMEOUT = 120.0
#: ``EPInfo.reason`` of an EP whose start-up was cut short by an interruption.
INTERRUPTED = "interrupted before the EP was probed"
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
        python: interpreter to run ``worker.py`` with: passed to ``execve`` as the
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
        """The facts the worker announced when it started (``worker.hello``).

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
        self._outbox.put(_worker.encode({**message, "seq": self._seq}))

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


#: The canary model, serialized (:data:`epaudit.worker.CANARY_MODEL`); the tests check it
#: equals :func:`canary_model`, what :func:`epaudit.models.one_node_model` builds today.
CANARY_MODEL = _worker.CANARY_MODEL


def absence_of(provider: Provider, verdict: dict) -> str:
    """Why a canary that did not run live is not live, in kind (``EPInfo.absence``):
    ``"configuration"`` for a setup mistake: a provider name this onnxruntime does not know,
    a plugin library that cannot be resolved or registered, or an interpreter the matrix
    names for this EP whose onnxruntime does not have it (the matrix said "this is the
    EP's environment"); ``"environment"`` for what the machine lacks (a device, a driver,
    CUDA libraries; the default interpreter's onnxruntime without that EP)."""
    if verdict.get("not_a_provider") or verdict.get("misconfigured"):
        return "configuration"
    if verdict.get("not_available") and provider.python is not None:
        return "configuration"
    return "environment"


def start_timeout(provider: Provider) -> float:
    """Seconds a worker of ``provider`` may take to start and answer the canary: its
    ``start_timeout`` (matrix key, or ``--start-timeout``), else :data:`CANARY_TIMEOUT`."""
    return provider.start_timeout if provider.start_timeout is not None else CANARY_TIMEOUT


def canary_model() -> bytes:
    """Build the canary model (what :data:`CANARY_MODEL` holds) with onnx."""
    return one_node_model("Add", "", 21, [("a", "float32", [2, 3]), ("b", "float32", [2, 3])],
                          [("c", "float32")], node_name="canary")


def canary_request(provider: Provider) -> dict:
    """The canary: one float32 ``Add`` named ``canary``; every EP worth auditing has it."""
    model = CANARY_MODEL
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    return {"op": "canary", **_ep_fields(provider), "model": model, "feeds": {"a": a, "b": b},
            "expected": {"c": a + b}}


def _ep_fields(provider: Provider) -> dict:
    """How the worker selects the EP: its name and options, plus a plugin library and filters.

    A library given as a relative path is made absolute here, from where epaudit runs (as
    the matrix check read it, :mod:`epaudit.preflight`): the worker runs in its own temp
    directory, where the relative path would name nothing."""
    library = provider.library
    if library and (os.sep in library or library.endswith((".so", ".dll", ".dylib"))):
        library = os.path.abspath(library)
    return {"provider": provider.name, "options": dict(provider.options),
            "library": library, "device": dict(provider.device)}


def inspect_provider(provider: Provider) -> ProviderStatus:
    """Where ``provider`` lives, what ORT says about it, and whether the canary runs on it.

    Starts one worker (hello + canary, no probe). Never raises for EP trouble: a worker
    that cannot start or dies is a not-live status with the reason.
    """
    base = ProviderStatus(provider.alias, provider.name, provider.python or "")
    if provider.unavailable:
        return _replace(base, reason=provider.unavailable)
    python = provider.python or sys.executable
    try:
        worker = Worker(python, provider.env)
    except OSError as exc:
        return _replace(base, python=python,
                        reason=f"cannot start worker interpreter {python!r}: {exc.strerror or exc}")
    try:
        worker.send(canary_request(provider))
        facts = worker.hello(start_timeout(provider))
        verdict, printed = worker.receive(start_timeout(provider))
        reason = ort_message(verdict["reason"])  # the sentence, not the C++ signature
        if not verdict["live"]:
            reason += "".join(f" | {ort_message(e)}" for e in _ort_log_lines(printed))
    except (WorkerDied, WorkerTimeout, WorkerFailed) as exc:
        tail = " | ".join(worker.stderr_since(0).strip().splitlines()[-3:])
        return _replace(base, python=python, reason=f"worker failed under {python}: {exc}"
                        + (f" | {tail}" if tail else ""))
    finally:
        worker.close()
    listed = ("plugin" if provider.library else
              "built in" if provider.name in facts["providers"] else "not listed")
    # This EP's devices only: the plugin's selected ones, else what get_ep_devices lists for it.
    devices = tuple(verdict.get("selected") or
                    (f"{d['ep']}:{d.get('type')}" for d in facts["devices"] if d.get("ep") == provider.name))
    return _replace(base, python=facts["python"], distribution=facts["distribution"], listed=listed,
                    library=verdict.get("library_path", ""), live=bool(verdict["live"]),
                    reason=reason, devices=devices)


def _case_message(role: str, case) -> dict:
    # The reference shapes let the worker pre-bind poisoned outputs of any shape, even
    # those ORT cannot infer before the run.
    return {"role": role, "model": case.model, "feeds": dict(case.feeds),
            "outputs": list(case.outputs),
            "output_shapes": {n: list(np.shape(case.reference[n])) for n in case.outputs}}


def _case_run(raw: dict) -> CaseRun:
    placement = raw.get("placement")
    return CaseRun(
        role=raw["role"], ok=bool(raw["ok"]), stage=raw["stage"], error=raw.get("error"),
        placement=tuple(placement) if placement is not None else None,
        placement_source=raw.get("placement_source"), asked=raw.get("asked", ""),
        outputs=raw.get("outputs") or {}, create_ms=raw.get("create_ms"), run_ms=raw.get("run_ms"),
        binding=raw.get("binding") or "",
        poisoned=tuple({str(k): int(v) for k, v in run.items()} for run in raw.get("poisoned") or ()),
    )


@dataclass
class EPRun:
    """Everything probed on one EP: its info and one observation per feature."""

    info: EPInfo
    observations: dict[str, Observation]


ProgressFn = Callable[[str, str], None]


#: Probe requests queued to a worker ahead of the one it runs, so that it never waits for
#: the parent between probes. Two suffice: the parent's turnaround (~1 ms) is shorter
#: than any probe. A request that was queued but not started when its worker died is
#: sent again to the fresh worker; the worker runs requests strictly in order, so only
#: the one at the head can have crashed it.
PIPELINE = 2

ObserveFn = Callable[[str, Observation], None]


def probe_ep(provider: Provider, features: Sequence[Feature], probes: Mapping[str, Probe | str],
             *, timeout: float = DEFAULT_TIMEOUT, skip: Iterable[str] = (),
             progress: ProgressFn | None = None, stop: threading.Event | None = None,
             observe: ObserveFn | None = None) -> EPRun:
    """Probe every feature on one EP.

    Args:
        provider: the EP (its ``inject_fault`` test hook is honoured).
        features: features to probe, in order; only their ``id`` is used, so anything
            with an ``id`` keyed in ``probes`` runs too (conformance cases).
        probes: feature id -> built :class:`Probe`, or a traceback string when building
            it failed (recorded as ``error``).
        timeout: per-probe limit, seconds, counted from when the worker can start the
            probe (the answer to the one before it, or the request, whichever is later).
        skip: feature ids declared ``skip`` for this EP (not probed).
        progress: called with (alias, feature id) after each probe.
        stop: interruption: when it is set, the probe in flight is abandoned (its worker
            killed at once) and no further probe starts; features without an
            observation are the ones that did not finish.
        observe: called with (alias, observation) as each observation is made, on this
            EP's thread (the audit classifies there, while the worker runs the next probe).

    Returns:
        An :class:`EPRun`; never raises for EP trouble (it is all in the observations).
    """
    python = provider.python or sys.executable
    skip = set(skip)
    fault = provider.inject_fault
    alias = provider.alias
    obs: dict[str, Observation] = {}

    def record(o: Observation) -> None:
        obs[o.feature_id] = o
        if observe:
            observe(alias, o)
        if progress:
            progress(alias, o.feature_id)

    def unavailable(reason: str, info: EPInfo, absence: str = "environment") -> EPRun:
        info = _replace(info, absence=absence)
        for f in features:
            record(Observation(f.id, alias, "skip" if f.id in skip else "unavailable", detail=reason))
        return EPRun(info, obs)

    base = EPInfo(alias, provider.name, False, python=python,
                  options=dict(provider.options), fault=fault)
    if provider.unavailable:
        return unavailable(provider.unavailable, _replace(base, reason=provider.unavailable))
    if stop is not None and stop.is_set():
        return EPRun(_replace(base, reason=INTERRUPTED), obs)
    try:
        worker = Worker(python, provider.env)
    except OSError as exc:
        reason = f"cannot start worker interpreter {python!r}: {exc.strerror or exc}"
        return unavailable(reason, _replace(base, reason=reason), "configuration")
    try:
        try:
            worker.send(canary_request(provider))
            facts = worker.hello(start_timeout(provider), stop)
            verdict, printed = worker.receive(start_timeout(provider), stop)
        except WorkerInterrupted:
            return EPRun(_replace(base, reason=INTERRUPTED), obs)
        except (WorkerDied, WorkerTimeout, WorkerFailed) as exc:
            reason = (f"worker failed at start-up under {python} (is it a Python with onnxruntime and "
                      f"numpy?): {exc}")
            tail = worker.stderr_since(0).strip().splitlines()[-3:]
            reason += " | printed: " + " | ".join(tail) if tail else " | printed nothing"
            return unavailable(reason, _replace(base, reason=reason), "configuration")
        info = _replace(base, live=bool(verdict["live"]), python=facts["python"],
                        distribution=facts["distribution"], ort_version=facts["ort_version"],
                        devices=tuple(facts["devices"]), build=dict(facts.get("build") or {}),
                        library=verdict.get("library_path", ""))
        if not verdict["live"]:
            reason = ort_message(verdict["reason"])  # the sentence, not the C++ signature
            evidence = [ort_message(e) for e in _ort_log_lines(printed)]
            if evidence:
                reason += " | " + " | ".join(evidence)
            absence = absence_of(provider, verdict)
            return unavailable(reason, _replace(info, reason=reason), absence)
        worker = _probe_all(worker, provider, features, probes, skip, timeout, stop, record)
        return EPRun(info, obs)
    finally:
        if worker is not None:
            worker.close()


def _probe_all(worker: Worker | None, provider: Provider, features: Sequence[Feature],
               probes: Mapping[str, Probe | str], skip: set, timeout: float,
               stop: threading.Event | None, record: Callable[[Observation], None]) -> Worker | None:
    """Run every feature's probe on ``worker``, up to :data:`PIPELINE` requests queued;
    a crash or hang costs the probe at the head only. Returns the worker still alive
    (``None`` when the last one died), for the caller to close."""
    fault = provider.inject_fault
    alias = provider.alias
    todo = collections.deque(features)
    inflight: collections.deque = collections.deque()  # (feature, probe, time it could start)

    def requeue() -> None:
        # Queued behind the probe that took the worker down: never started, run them again.
        while inflight:
            todo.appendleft(inflight.pop()[0])

    no_restart = ""  # why a replacement worker could not start: no further attempt

    def fill() -> None:
        nonlocal worker, no_restart
        while todo and len(inflight) < PIPELINE:
            if stop is not None and stop.is_set():
                return
            f = todo[0]
            if f.id in skip:
                todo.popleft()
                record(Observation(f.id, alias, "skip", detail="declared skip"))
                continue
            built = probes[f.id]
            if isinstance(built, str):
                todo.popleft()
                record(Observation(f.id, alias, "error", detail=built))
                continue
            if worker is None and not no_restart:  # the last one died: a fresh one, when needed
                try:
                    worker = _fresh_worker(provider.python or sys.executable, provider.env, stop,
                                           start_timeout(provider))
                except WorkerInterrupted:
                    return
                except (OSError, WorkerStartFailed) as exc:
                    no_restart = str(exc)
            if worker is None:
                # Never run: recorded as a crash of the EP's process, with the reason.
                todo.popleft()
                record(Observation(f.id, alias, "crash", detail=f"cannot restart the worker: {no_restart}"))
                continue
            todo.popleft()
            worker.send(_probe_message(provider, built, fault))
            inflight.append((f, built, time.perf_counter()))

    def answered() -> None:
        # The head answered: the next queued probe can start only now (its clock starts),
        # and the pipeline is topped up before the answer is looked at, so the worker
        # always has its next request while the parent classifies.
        inflight.popleft()
        if inflight:
            head = inflight[0]
            inflight[0] = (head[0], head[1], max(head[2], time.perf_counter()))
        fill()

    while todo or inflight:
        if stop is not None and stop.is_set():
            break
        fill()
        if not inflight:
            continue
        _, probe, since = inflight[0]
        fid = probe.feature_id
        left = timeout - (time.perf_counter() - since)
        try:
            reply, printed = worker.receive(max(left, 0.001), stop)
        except WorkerInterrupted:
            break
        except (WorkerTimeout, WorkerDied) as exc:
            inflight.popleft()
            timed_out = isinstance(exc, WorkerTimeout)
            # The wait was what was left of the probe's limit: say the limit itself.
            record(Observation(fid, alias, "timeout" if timed_out else "crash",
                               detail=f"no answer within {timeout:g} s; worker killed" if timed_out
                               else exc.detail,
                               stderr=worker.stderr_pending(), seconds=time.perf_counter() - since))
            worker.close()
            worker = None
            requeue()
            continue
        except WorkerFailed as exc:
            took = time.perf_counter() - since
            answered()
            record(Observation(fid, alias, "error", detail=str(exc), seconds=took))
        else:
            took = time.perf_counter() - since
            answered()
            cases = {raw["role"]: _case_run(raw) for raw in reply["cases"]}
            record(Observation(fid, alias, "ran", cases, stderr=printed, seconds=took))
    return worker


def _probe_message(provider: Provider, probe: Probe, fault: str | None) -> dict:
    """The worker's ``probe`` request for ``probe`` on ``provider`` (faults applied)."""
    subject = _faults.subject_for(fault, probe.subject, probe.control)
    return {
        "op": "probe", **_ep_fields(provider),
        "cases": [_case_message("subject", subject)]
        + ([_case_message("control", probe.control)] if probe.control is not None else []),
        "fault": fault if fault in _faults.WORKER_FAULTS else None,
        "fault_args": _faults.worker_args(fault, probe),
    }


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


def _ort_log_lines(text: str) -> list[str]:
    """ORT's own error/warning lines, and Python's ``EP Error`` lines, from worker stderr."""
    out = []
    for line in text.splitlines():
        clean = line.replace("\x1b[1;31m", "").replace("\x1b[0;93m", "").replace("\x1b[m", "").strip()
        if "[E:onnxruntime" in clean or "[W:onnxruntime" in clean:
            out.append(clean.split("] ", 1)[-1][:500])
        elif clean.startswith("EP Error "):
            # onnxruntime's Python retry prints the EP's own failure here, then raises a
            # different error for the retry (e.g. Dawn's "Failed to get a WebGPU adapter").
            out.append(clean if len(clean) <= 500 else "…" + clean[-400:])
    return out[-3:]


def _replace(info: EPInfo, **changes) -> EPInfo:
    from dataclasses import replace

    return replace(info, **changes)


class ProbeSet(abc.Mapping):
    """Every probe built once, in order, on a background thread, shared by every EP.

    A mapping feature id -> :class:`Probe` (or the traceback string of a build that
    raised, recorded as ``ERROR``; so is a *blind* probe, whose subject and control
    references are closer than :data:`epaudit.probes.MIN_SEPARATION` tolerance bounds: an
    EP ignoring the feature could pass it, so it is never run). Building starts at
    construction, so the parent builds models and references while the workers start; a
    lookup waits only for its own probe, so the first probes run while later ones are
    still being built.

    Args:
        features: the features, in run order.
        cache: where shipped features' probes are read from and :meth:`save` writes them
            (:class:`epaudit.cache.ProbeCache`); ``None``: build everything. Cached probes
            pass the same blind-probe check as built ones.
    """

    def __init__(self, features: Sequence[Feature], cache=None):
        self._features = list(features)
        self._cache = cache
        self._cached: dict[str, Probe] = {}
        self._built: dict[str, Probe | str] = {}
        self._fresh: set[str] = set()
        self._ready = {f.id: threading.Event() for f in self._features}
        self._done = threading.Event()
        threading.Thread(target=self._build, name="epaudit-build-probes", daemon=True).start()

    def _build(self) -> None:
        try:
            from ..catalog import shipped

            self._cached = self._cache.load() if self._cache is not None else {}
            for f in self._features:
                hit = self._cached.get(f.id) if shipped(f) else None
                if hit is not None and hit.feature_id == f.id:
                    self._built[f.id] = _checked(f, hit)
                else:
                    self._built[f.id] = _build_one(f)
                    if shipped(f) and not isinstance(self._built[f.id], str):
                        self._fresh.add(f.id)
                self._ready[f.id].set()
        finally:
            for f in self._features:  # never leave a lookup waiting on a dead thread
                if not self._ready[f.id].is_set():
                    self._built.setdefault(f.id, "the probe-building thread stopped before this probe")
                    self._ready[f.id].set()
            self._done.set()

    def __getitem__(self, fid: str) -> Probe | str:
        self._ready[fid].wait()
        return self._built[fid]

    def __iter__(self):
        return iter(self._ready)

    def __len__(self) -> int:
        return len(self._ready)

    def save(self) -> bool:
        """Write the cache when this run built a shipped probe it lacked (after every
        probe is built). Returns whether a file was written; never raises for OS trouble."""
        if self._cache is None:
            return False
        self._done.wait()
        if not self._fresh:
            return False
        keep = dict(self._cached)
        keep.update({fid: self._built[fid] for fid in self._fresh})
        return self._cache.store(keep)


def _build_one(f: Feature) -> Probe | str:
    """The probe, or why it must not run: a build traceback, or a blind probe."""
    try:
        probe = f.build()
    except Exception:  # noqa: BLE001 - reported as ERROR, never as a pass
        return traceback.format_exc()
    return _checked(f, probe)


def _checked(f: Feature, probe: Probe) -> Probe | str:
    """``probe``, or why it must not run: it is blind (see :class:`ProbeSet`)."""
    from ..classify.outcome import separation

    apart = separation(probe)
    if apart < MIN_SEPARATION:
        return (f"blind probe: subject and control references of {f.id} differ by only "
                f"{apart:.3g} tolerance bounds (< {MIN_SEPARATION:g}); an EP that ignores the "
                "feature would pass")
    return probe


def run_plan(providers: Sequence[Provider], features: Sequence[Feature], *,
             timeout: float = DEFAULT_TIMEOUT, skips: Mapping[str, Iterable[str]] | None = None,
             jobs: int | None = None, progress: ProgressFn | None = None,
             stop: threading.Event | None = None,
             probes: Mapping[str, Probe | str] | None = None,
             observe: ObserveFn | None = None) -> dict[str, EPRun]:
    """Probe ``features`` on every provider, EPs in parallel (at most ``jobs`` at once).

    ``progress``, ``stop`` and ``observe`` are passed to every :func:`probe_ep`.

    Returns:
        alias -> :class:`EPRun`, in the order of ``providers``.
    """
    probes = ProbeSet(features) if probes is None else probes
    skips = skips or {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(jobs, max(1, len(providers)))) as pool:
        futures = {p.alias: pool.submit(probe_ep, p, features, probes, timeout=timeout,
                                        skip=skips.get(p.alias, ()), progress=progress, stop=stop,
                                        observe=observe)
                   for p in providers}
        return {alias: fut.result() for alias, fut in futures.items()}
