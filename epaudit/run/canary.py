"""Is an EP live? The canary request, its verdict and the reason an EP is not there.

The canary is one float32 ``Add`` (:data:`CANARY_MODEL`); the EP is live when the node is
placed on it and the output is right (docs/outcomes-and-gates.md ``UNAVAILABLE``).
"""

from __future__ import annotations

import sys

import numpy as np

from ..catalog.models import one_node_model
from ..classify.messages import ort_message
from ..contract.results import ProviderStatus
from ..matrix.model import Provider
from ..worker import protocol as _worker
from .collect import _ep_fields, _ort_log_lines, _replace
from .workers import CANARY_TIMEOUT, Worker, WorkerDied, WorkerFailed, WorkerTimeout

#: The canary model, serialized (:data:`epaudit.worker.serve.CANARY_MODEL`); the tests check it
#: equals :func:`canary_model`, what :func:`epaudit.catalog.models.one_node_model` builds today.
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
    return one_node_model("Add", "", 13, [("a", "float32", [2, 3]), ("b", "float32", [2, 3])],
                          [("c", "float32")], node_name="canary")


def canary_request(provider: Provider) -> dict:
    """The canary: one float32 ``Add`` named ``canary``; every EP worth auditing has it."""
    model = CANARY_MODEL
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    return {"op": "canary", **_ep_fields(provider), "model": model, "feeds": {"a": a, "b": b},
            "expected": {"c": a + b}}


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
