"""Running probes: one worker process per EP, crashes and hangs contained.

Each EP gets a worker (``worker.py``) started with that EP's interpreter and
environment. Before any feature, a canary decides whether the EP is live; a probe that
kills or hangs its worker is recorded as ``crash`` / ``timeout`` and a fresh worker takes
over for the rest. EPs run concurrently, one thread each (bounded by ``jobs``); probes
are built once and shared by every EP.
"""

from __future__ import annotations

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

from . import faults as _faults
from . import spawn as _spawn
from . import worker as _worker
from .matrix import Provider
from .models import one_node_model
from .probes import MIN_SEPARATION, Feature, Probe
from .results import CaseRun, EPInfo, Observation, ProviderStatus

WORKER_PATH = _spawn.WORKER_PATH
#: Default per-probe limit, seconds: a few seconds beyond the slowest first-run shader
#: compile measured (WebGPU on lavapipe, about 11 s; FIELD-NOTES.md "Timings").
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
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                self._replies.put(_worker.read_message(self.proc.stdout))
        except Exception:  # noqa: BLE001 - EOF or a torn frame: the worker is gone
            self._replies.put(None)

    def stderr_since(self, offset: int) -> str:
        """Worker stderr written after byte ``offset`` (trimmed to the last few KB)."""
        self._err.flush()
        try:
            with open(self._err_path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return ""
        return data[-_STDERR_KEEP:].decode("utf-8", "replace")

    def stderr_offset(self) -> int:
        """Current size of the worker's stderr log, bytes."""
        try:
            return os.path.getsize(self._err_path)
        except OSError:
            return 0

    def request(self, message: dict, timeout: float, stop: threading.Event | None = None) -> dict:
        """Send one request and wait for its reply.

        Args:
            message: the request (``worker.py`` message format).
            timeout: seconds to wait for the reply.
            stop: when it is set during the wait, the worker is killed at once.

        Raises:
            WorkerDied: the process exited (its exit status or signal in ``detail``).
            WorkerTimeout: no reply within ``timeout`` seconds; the worker is killed.
            WorkerInterrupted: ``stop`` was set; the worker is killed.
            WorkerFailed: the worker raised; the traceback is the message.
        """
        try:
            self.proc.stdin.write(_worker.encode(message))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(self._death()) from None
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
            raise WorkerDied(self._death())
        if not reply.get("ok"):
            raise WorkerFailed(reply.get("error", "worker error"))
        return reply["result"]

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


def canary_request(provider: Provider) -> dict:
    """The canary: one float32 ``Add`` named ``canary``; every EP worth auditing has it."""
    model = one_node_model("Add", "", 21, [("a", "float32", [2, 3]), ("b", "float32", [2, 3])],
                           [("c", "float32")], node_name="canary")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    return {"op": "canary", **_ep_fields(provider), "model": model, "feeds": {"a": a, "b": b},
            "expected": {"c": a + b}}


def _ep_fields(provider: Provider) -> dict:
    """How the worker selects the EP: its name and options, plus a plugin library and filters."""
    return {"provider": provider.name, "options": dict(provider.options),
            "library": provider.library, "device": dict(provider.device)}


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
        facts = worker.request({"op": "hello"}, CANARY_TIMEOUT)
        offset = worker.stderr_offset()
        verdict = worker.request(canary_request(provider), CANARY_TIMEOUT)
        reason = verdict["reason"]
        if not verdict["live"]:
            reason += "".join(f" | {e}" for e in _ort_log_lines(worker.stderr_since(offset)))
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


def probe_ep(provider: Provider, features: Sequence[Feature], probes: Mapping[str, Probe | str],
             *, timeout: float = DEFAULT_TIMEOUT, skip: Iterable[str] = (),
             progress: ProgressFn | None = None, stop: threading.Event | None = None) -> EPRun:
    """Probe every feature on one EP.

    Args:
        provider: the EP (its ``inject_fault`` test hook is honoured).
        features: features to probe, in order; only their ``id`` is used, so anything
            with an ``id`` keyed in ``probes`` runs too (conformance cases).
        probes: feature id -> built :class:`Probe`, or a traceback string when building
            it failed (recorded as ``error``).
        timeout: per-probe limit, seconds.
        skip: feature ids declared ``skip`` for this EP (not probed).
        progress: called with (alias, feature id) after each probe.
        stop: interruption: when it is set, the probe in flight is abandoned (its worker
            killed at once) and no further probe starts; features without an
            observation are the ones that did not finish.

    Returns:
        An :class:`EPRun`; never raises for EP trouble (it is all in the observations).
    """
    python = provider.python or sys.executable
    skip = set(skip)
    fault = provider.inject_fault
    obs: dict[str, Observation] = {}

    def unavailable(reason: str, info: EPInfo) -> EPRun:
        for f in features:
            obs[f.id] = Observation(f.id, provider.alias, "skip" if f.id in skip else "unavailable",
                                    detail=reason)
            if progress:
                progress(provider.alias, f.id)
        return EPRun(info, obs)

    base = EPInfo(provider.alias, provider.name, False, python=python,
                  options=dict(provider.options), fault=fault)
    if provider.unavailable:
        return unavailable(provider.unavailable, _replace(base, reason=provider.unavailable))
    if stop is not None and stop.is_set():
        return EPRun(_replace(base, reason=INTERRUPTED), obs)
    try:
        worker = Worker(python, provider.env)
    except OSError as exc:
        reason = f"cannot start worker interpreter {python!r}: {exc.strerror or exc}"
        return unavailable(reason, _replace(base, reason=reason))
    try:
        try:
            facts = worker.request({"op": "hello"}, CANARY_TIMEOUT, stop)
            offset = worker.stderr_offset()
            verdict = worker.request(canary_request(provider), CANARY_TIMEOUT, stop)
        except WorkerInterrupted:
            return EPRun(_replace(base, reason=INTERRUPTED), obs)
        except (WorkerDied, WorkerTimeout, WorkerFailed) as exc:
            reason = f"worker failed at start-up under {python}: {exc}"
            tail = worker.stderr_since(0).strip().splitlines()[-3:]
            if tail:
                reason += " | " + " | ".join(tail)
            return unavailable(reason, _replace(base, reason=reason))
        info = _replace(base, live=bool(verdict["live"]), python=facts["python"],
                        distribution=facts["distribution"], ort_version=facts["ort_version"],
                        devices=tuple(facts["devices"]), build=dict(facts.get("build") or {}),
                        library=verdict.get("library_path", ""))
        if not verdict["live"]:
            reason = verdict["reason"]
            evidence = _ort_log_lines(worker.stderr_since(offset))
            if evidence:
                reason += " | " + " | ".join(evidence)
            return unavailable(reason, _replace(info, reason=reason))
        for f in features:
            if stop is not None and stop.is_set():
                break
            if f.id in skip:
                obs[f.id] = Observation(f.id, provider.alias, "skip", detail="declared skip")
            else:
                built = probes[f.id]
                if isinstance(built, str):
                    obs[f.id] = Observation(f.id, provider.alias, "error", detail=built)
                else:
                    if worker is None:  # the last one died: a fresh worker, only when needed
                        try:
                            worker = _fresh_worker(python, provider.env)
                        except OSError as exc:
                            obs[f.id] = Observation(f.id, provider.alias, "crash",
                                                    detail=f"cannot restart the worker: {exc}")
                            continue
                    o, worker = _probe_one(worker, provider, built, fault, timeout, stop)
                    if o is None:  # interrupted mid-probe: it did not finish
                        break
                    obs[f.id] = o
            if progress:
                progress(provider.alias, f.id)
        return EPRun(info, obs)
    finally:
        if worker is not None:
            worker.close()


def _probe_one(worker: Worker, provider: Provider, probe: Probe, fault: str | None,
               timeout: float, stop: threading.Event | None = None) -> tuple[Observation | None, Worker | None]:
    """One probe on ``worker``; a crash or hang costs this probe only.

    Returns the observation (``None`` when ``stop`` interrupted the probe) and the worker
    to go on with (``None`` when it died or was killed: the caller starts a fresh one
    when another probe needs it).
    """
    subject = _faults.subject_for(fault, probe.subject, probe.control)
    message = {
        "op": "probe", **_ep_fields(provider),
        "cases": [_case_message("subject", subject)]
        + ([_case_message("control", probe.control)] if probe.control is not None else []),
        "fault": fault if fault in _faults.WORKER_FAULTS else None,
        "fault_args": _faults.worker_args(fault, probe),
    }
    offset = worker.stderr_offset()
    t0 = time.perf_counter()
    fid, alias = probe.feature_id, provider.alias
    try:
        reply = worker.request(message, timeout, stop)
    except WorkerInterrupted:
        return None, worker
    except WorkerTimeout as exc:
        o = Observation(fid, alias, "timeout", detail=str(exc), stderr=worker.stderr_since(offset),
                        seconds=time.perf_counter() - t0)
        worker.close()
        return o, None
    except WorkerDied as exc:
        o = Observation(fid, alias, "crash", detail=exc.detail, stderr=worker.stderr_since(offset),
                        seconds=time.perf_counter() - t0)
        worker.close()
        return o, None
    except WorkerFailed as exc:
        return Observation(fid, alias, "error", detail=str(exc),
                           seconds=time.perf_counter() - t0), worker
    cases = {raw["role"]: _case_run(raw) for raw in reply["cases"]}
    return Observation(fid, alias, "ran", cases, stderr=worker.stderr_since(offset),
                       seconds=time.perf_counter() - t0), worker


def _fresh_worker(python: str, env: Mapping[str, str] | None) -> Worker:
    """A replacement worker that has finished starting (imported onnxruntime).

    Waiting for its ``hello`` here keeps the interpreter's start-up out of the next
    probe's time limit, which would otherwise be spent partly on imports after a crash. A
    replacement that cannot start is returned as is: its next request fails and is
    recorded as a crash of that probe.
    """
    worker = Worker(python, env)
    try:
        worker.request({"op": "hello"}, CANARY_TIMEOUT)
    except (WorkerDied, WorkerTimeout, WorkerFailed):
        pass
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
    EP ignoring the feature could pass it, so it is never run). Building starts at construction, so the parent builds
    models and references while the workers start (a worker's import of onnxruntime
    alone takes longer than building the whole default catalog); a lookup waits only
    for its own probe, so the first probes run while later ones are still being built.
    """

    def __init__(self, features: Sequence[Feature]):
        self._features = list(features)
        self._built: dict[str, Probe | str] = {}
        self._ready = {f.id: threading.Event() for f in self._features}
        threading.Thread(target=self._build, name="epaudit-build-probes", daemon=True).start()

    def _build(self) -> None:
        for f in self._features:
            self._built[f.id] = _build_one(f)
            self._ready[f.id].set()

    def __getitem__(self, fid: str) -> Probe | str:
        self._ready[fid].wait()
        return self._built[fid]

    def __iter__(self):
        return iter(self._ready)

    def __len__(self) -> int:
        return len(self._ready)


def _build_one(f: Feature) -> Probe | str:
    """The probe, or why it must not run: a build traceback, or a blind probe."""
    from .classify import separation

    try:
        probe = f.build()
    except Exception:  # noqa: BLE001 - reported as ERROR, never as a pass
        return traceback.format_exc()
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
             probes: Mapping[str, Probe | str] | None = None) -> dict[str, EPRun]:
    """Probe ``features`` on every provider, EPs in parallel (at most ``jobs`` at once).

    Returns:
        alias -> :class:`EPRun`, in the order of ``providers``.
    """
    probes = ProbeSet(features) if probes is None else probes
    skips = skips or {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(jobs, max(1, len(providers)))) as pool:
        futures = {p.alias: pool.submit(probe_ep, p, features, probes, timeout=timeout,
                                        skip=skips.get(p.alias, ()), progress=progress, stop=stop)
                   for p in providers}
        return {alias: fut.result() for alias, fut in futures.items()}
