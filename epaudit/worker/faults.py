"""Deliberately broken EPs, inside the EP's process (the test hook ``selftest`` uses).

The faults the parent applies to the model it sends (``ignore``, ``refuse``) live in
``epaudit/run/faults.py``; these happen here, where a real EP would misbehave:
``fallback`` skips the CPU-fallback guard and asks for ``CUDAExecutionProvider`` (or the
target, when it is not CPU) so that ORT places the node wherever it will; ``nan`` writes NaN
into element 0 of the first float output; ``perturb`` adds ``fault_args['delta']`` to element
0 of output ``fault_args['output']``; ``unwritten`` reads the first output of the subject
back from a poisoned buffer that was never bound (plain runs: leaves it out), as an EP that
never writes it; ``kill`` sends SIGKILL to the worker after session creation; ``hang`` sleeps
forever after session creation; ``fallback_wrong`` and ``decompose_wrong`` perturb as
``perturb`` does, the first with ``fallback``'s session (the model the parent wraps in a
function for the second). ``kill`` and ``hang`` print :data:`FAULT_MARKER` first, so
``selftest`` knows the crash or timeout it sees is the fault, not a slow start-up.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from .protocol import CPU

#: The provider the ``fallback`` fault asks for when the target is CPU: on a machine
#: without its GPU libraries ORT silently hands back a CPU session, the real failure.
FALLBACK_FAULT_PROVIDER = "CUDAExecutionProvider"

#: Printed to stderr when the ``kill`` or ``hang`` fault fires (followed by the fault name).
FAULT_MARKER = "epaudit-fault: "


def asked_for(target: str, fault: str | None) -> tuple[str, bool]:
    """``(provider to ask for, fallback guard on)`` for a case on ``target``: the target with
    the guard (any EP but CPU), or, under ``fallback``, the guard off and
    :data:`FALLBACK_FAULT_PROVIDER` asked for in place of CPU."""
    if fault in ("fallback", "fallback_wrong"):
        return (target if target != CPU else FALLBACK_FAULT_PROVIDER), False
    return target, target != CPU


def after_session(fault: str | None) -> None:
    """``kill``: SIGKILL this process; ``hang``: sleep forever; both after printing
    :data:`FAULT_MARKER` to stderr. Called once the session exists."""
    if fault in ("kill", "hang"):
        # A marker on stderr: the self-test checks that the crash or timeout it sees is
        # this fault, reached after session creation, and not a slow start-up.
        sys.stderr.write(f"{FAULT_MARKER}{fault} after session creation\n")
        sys.stderr.flush()
    if fault == "kill":
        os.kill(os.getpid(), 9)
    if fault == "hang":
        while True:
            time.sleep(3600)


def unwritten_output(fault: str | None, role: str, names: list[str]) -> str | None:
    """The output the ``unwritten`` fault leaves unwritten: the subject's first, else none."""
    return names[0] if fault == "unwritten" and role == "subject" and names else None


def alter_outputs(fault: str | None, role: str, names: list[str], outputs: dict,
                  fault_args: dict | None) -> None:
    """``nan`` and ``perturb`` on the subject's outputs, in place (arrays are copied first)."""
    if fault == "nan" and role == "subject":
        for n in names:
            if n in outputs and outputs[n].dtype.kind == "f" and outputs[n].size:
                outputs[n] = outputs[n].copy()
                outputs[n].reshape(-1)[0] = np.nan
                break
    if fault in ("perturb", "fallback_wrong", "decompose_wrong") and role == "subject" and fault_args:
        name = fault_args["output"]
        outputs[name] = outputs[name].copy()
        flat = outputs[name].reshape(-1)
        if flat.dtype == np.bool_:
            flat[0] = not flat[0]  # a bool plus anything stays True: flip it
        else:
            flat[0] = flat[0] + np.asarray(fault_args["delta"], dtype=flat.dtype)
