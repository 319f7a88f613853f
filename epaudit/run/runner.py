"""Running probes: the schedule of one run, every EP at once, one worker each.

Each EP gets a worker (``epaudit/worker/``) started with that EP's interpreter and
environment (:mod:`.workers`). Before any feature, a canary decides whether the EP is live
(:mod:`.canary`); a probe that kills or hangs its worker is recorded as ``crash`` /
``timeout`` and a fresh worker takes over for the rest. EPs run concurrently, one thread
each (bounded by ``jobs``); probes are built once and shared by every EP (:mod:`.probeset`);
replies become observations in :mod:`.collect`.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from ..classify.messages import ort_message
from ..contract.probes import Feature, Probe
from ..contract.results import EPInfo, Observation
from ..matrix.model import Provider
from .canary import absence_of, canary_request, start_timeout
from .collect import INTERRUPTED, EPRun, _case_run, _ort_log_lines, _probe_message, _replace
from .probeset import ProbeSet
from .workers import (
    Worker,
    WorkerDied,
    WorkerFailed,
    WorkerInterrupted,
    WorkerStartFailed,
    WorkerTimeout,
    _fresh_worker,
)

#: Default per-probe limit, seconds: a few seconds beyond the slowest first-run shader
#: compile measured (WebGPU on lavapipe, about 11 s; docs/ort-facts.md "Timings").
DEFAULT_TIMEOUT = 20.0

ProgressFn = Callable[[str, str], None]

#: Probe requests queued to a worker ahead of the one it runs, so that it never waits for
#: the parent between probes. Two suffice: the parent's turnaround (~1 ms) is shorter
#: than any probe. A request that was queued but not started when its worker died is
#: sent again to the fresh worker; the worker runs requests strictly in order, so only
#: the one at the head can have crashed it.
PIPELINE = 2

#: The ``cases`` of every observation :func:`probe_ep` keeps reduced (shared, never changed).
_NO_CASES: Mapping = {}

ObserveFn = Callable[[str, Observation], None]


def probe_ep(provider: Provider, features: Sequence[Feature], probes: Mapping[str, Probe | str],
             *, timeout: float = DEFAULT_TIMEOUT, skip: Iterable[str] = (),
             progress: ProgressFn | None = None, stop: threading.Event | None = None,
             observe: ObserveFn | None = None, keep: bool = False) -> EPRun:
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
            EP's thread (the audit classifies there, while the worker runs the next probe);
            the observation the :class:`EPRun` keeps is then reduced to its status, detail
            (cut) and time: outputs and stderr are the observer's to keep.
        keep: keep whole observations even with ``observe`` (a test comparing the two).

    Returns:
        An :class:`EPRun`; never raises for EP trouble (it is all in the observations).
    """
    skip = set(skip)
    fault = provider.inject_fault
    alias = provider.alias
    obs: dict[str, Observation] = {}

    def record(o: Observation) -> None:
        if observe:
            observe(alias, o)
        if observe and not keep:
            # What the observer needed is kept by it: drop the outputs and stderr here, so the
            # run's memory does not grow with the catalog.
            o = Observation(o.feature_id, o.ep, o.status, _NO_CASES, detail=o.detail[:200], seconds=o.seconds)
        obs[o.feature_id] = o
        if progress:
            progress(alias, o.feature_id)

    def unavailable(reason: str, info: EPInfo, absence: str = "environment") -> EPRun:
        info = _replace(info, absence=absence)
        for f in features:
            record(Observation(f.id, alias, "skip" if f.id in skip else "unavailable", detail=reason))
        return EPRun(info, obs)

    started = start_ep(provider, stop)
    info, worker = started.info, started.worker
    if started.unavailable is not None:
        return unavailable(started.unavailable, info, started.absence)
    if worker is None:
        return EPRun(info, obs)
    try:
        worker = _probe_all(worker, provider, features, probes, skip, timeout, stop, record)
        return EPRun(info, obs)
    finally:
        if worker is not None:
            worker.close()


@dataclass
class Started:
    """An EP's worker after its canary (:func:`start_ep`).

    Attributes:
        info: what the worker and the canary said (``live``, versions, devices, reason).
        worker: the live worker, or ``None`` (not live, interrupted, or not started).
        unavailable: why the EP's features cannot run (``None`` when live or interrupted).
        absence: the kind of absence (``EPInfo.absence``) when ``unavailable``.
    """

    info: EPInfo
    worker: Worker | None = None
    unavailable: str | None = None
    absence: str = "environment"


def start_ep(provider: Provider, stop: threading.Event | None = None) -> Started:
    """Start a worker for ``provider`` and run its canary (what :func:`probe_ep` does before
    its first probe); the caller closes the worker. Never raises for EP trouble."""
    python = provider.python or sys.executable
    base = EPInfo(provider.alias, provider.name, False, python=python,
                  options=dict(provider.options), fault=provider.inject_fault)
    if provider.unavailable:
        return Started(_replace(base, reason=provider.unavailable), None, provider.unavailable)
    if stop is not None and stop.is_set():
        return Started(_replace(base, reason=INTERRUPTED))
    try:
        worker = Worker(python, provider.env)
    except OSError as exc:
        reason = f"cannot start worker interpreter {python!r}: {exc.strerror or exc}"
        return Started(_replace(base, reason=reason), None, reason, "configuration")
    try:
        worker.send(canary_request(provider))
        facts = worker.hello(start_timeout(provider), stop)
        verdict, printed = worker.receive(start_timeout(provider), stop)
    except WorkerInterrupted:
        worker.close()
        return Started(_replace(base, reason=INTERRUPTED))
    except (WorkerDied, WorkerTimeout, WorkerFailed) as exc:
        reason = (f"worker failed at start-up under {python} (is it a Python with onnxruntime and "
                  f"numpy?): {exc}")
        tail = worker.stderr_since(0).strip().splitlines()[-3:]
        reason += " | printed: " + " | ".join(tail) if tail else " | printed nothing"
        worker.close()
        return Started(_replace(base, reason=reason), None, reason, "configuration")
    info = _replace(base, live=bool(verdict["live"]), python=facts["python"],
                    distribution=facts["distribution"], ort_version=facts["ort_version"],
                    devices=tuple(facts["devices"]), build=dict(facts.get("build") or {}),
                    library=verdict.get("library_path", ""))
    if not verdict["live"]:
        reason = ort_message(verdict["reason"])  # the sentence, not the C++ signature
        evidence = [ort_message(e) for e in _ort_log_lines(printed)]
        if evidence:
            reason += " | " + " | ".join(evidence)
        worker.close()
        return Started(_replace(info, reason=reason), None, reason, absence_of(provider, verdict))
    return Started(info, worker)


def probe_more(worker: Worker | None, provider: Provider, features: Sequence[Feature],
               probes: Mapping[str, Probe | str], *, timeout: float = DEFAULT_TIMEOUT,
               stop: threading.Event | None = None,
               record: Callable[[Observation], None]) -> Worker | None:
    """Run ``features`` on a worker :func:`start_ep` started (or on fresh ones when it
    died): the schedule of :func:`probe_ep` (pipelined, a crash or hang costs the probe at
    the head, a fresh worker takes over), ``record`` called with each observation. Returns
    the worker still alive, for the next batch (``epaudit sweep`` runs many small batches on
    one worker) or for the caller to close."""
    return _probe_all(worker, provider, features, probes, set(), timeout, stop, record)


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
            pending = worker.stderr_pending()
            record(Observation(fid, alias, "timeout" if timed_out else "crash",
                               detail=(f"no answer within {timeout:g} s; worker killed" if timed_out
                                       else exc.detail) + _in_case(pending, worker.case_token),
                               stderr=pending, seconds=time.perf_counter() - since))
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


#: How a crash or hang names the case it happened in (``.format(role)``).
IN_CASE = " in the {} case"


def _in_case(stderr: str, token: str) -> str:
    """`` in the control case`` where the worker's last case marker with ``token`` (a line
    ``epaudit-case: <token> <role>``: :data:`epaudit.worker.protocol.CASE_MARKER`) names the
    case it died or hung in, else ``""``. A line without the worker's token is not a marker."""
    from ..worker.protocol import CASE_MARKER

    head = f"{CASE_MARKER}{token} "
    roles = [line[len(head):].strip() for line in stderr.splitlines() if token and line.startswith(head)]
    role = roles[-1] if roles else ""
    return IN_CASE.format(role) if role.replace("_", "").isalnum() else ""


def run_plan(providers: Sequence[Provider], features: Sequence[Feature], *,
             timeout: float = DEFAULT_TIMEOUT, skips: Mapping[str, Iterable[str]] | None = None,
             jobs: int | None = None, progress: ProgressFn | None = None,
             stop: threading.Event | None = None,
             probes: Mapping[str, Probe | str] | None = None,
             observe: ObserveFn | None = None, keep: bool = False) -> dict[str, EPRun]:
    """Probe ``features`` on every provider, EPs in parallel (at most ``jobs`` at once).

    ``progress``, ``stop``, ``observe`` and ``keep`` are passed to every :func:`probe_ep`.

    Returns:
        alias -> :class:`EPRun`, in the order of ``providers``.
    """
    probes = ProbeSet(features) if probes is None else probes
    skips = skips or {}
    jobs = max(1, jobs or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(jobs, max(1, len(providers)))) as pool:
        futures = {p.alias: pool.submit(probe_ep, p, features, probes, timeout=timeout,
                                        skip=skips.get(p.alias, ()), progress=progress, stop=stop,
                                        observe=observe, keep=keep)
                   for p in providers}
        return {alias: fut.result() for alias, fut in futures.items()}
