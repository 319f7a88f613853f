"""A worker's replies as observations: one :class:`~epaudit.contract.results.Observation`
per (feature, EP), with the stderr ORT wrote for it and the EP's facts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..contract.probes import PROBE_NODE_NAME, Probe
from ..contract.results import CaseRun, EPInfo, Observation
from ..matrix.model import Provider
from . import faults as _faults

#: ``EPInfo.reason`` of an EP whose start-up was cut short by an interruption.
INTERRUPTED = "interrupted before the EP was probed"


def _case_message(role: str, case, node: str | None = PROBE_NODE_NAME) -> dict:
    # The reference shapes let the worker pre-bind poisoned outputs of any shape, even
    # those ORT cannot infer before the run; the node name tells it when the assignment
    # info does not show the node under test (a rewrite), so the runs are profiled.
    return {"role": role, "model": case.model, "feeds": dict(case.feeds),
            "outputs": list(case.outputs), "node": node,
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
        assigned=tuple(raw["assigned"]) if raw.get("assigned") is not None else None,
        guard_refused=bool(raw.get("guard_refused")), fallback_error=raw.get("fallback_error"),
    )


@dataclass
class EPRun:
    """Everything probed on one EP: its info and one observation per feature."""

    info: EPInfo
    observations: dict[str, Observation]


def _probe_message(provider: Provider, probe: Probe, fault: str | None) -> dict:
    """The worker's ``probe`` request for ``probe`` on ``provider`` (faults applied)."""
    subject = _faults.subject_for(fault, probe.subject, probe.control, probe.node_name)
    return {
        "op": "probe", **_ep_fields(provider),
        "cases": [_case_message("subject", subject, probe.node_name)]
        + ([_case_message("control", probe.control, probe.node_name)] if probe.control is not None else []),
        "profile": bool(provider.profile),
        "fault": fault if fault in _faults.WORKER_FAULTS else None,
        "fault_args": _faults.worker_args(fault, probe),
    }


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


def _ep_fields(provider: Provider) -> dict:
    """How the worker selects the EP: its name and options, plus a plugin library and filters.

    A library given as a relative path is made absolute here, from where epaudit runs (as
    the matrix check read it, :mod:`epaudit.matrix.preflight`): the worker runs in its own temp
    directory, where the relative path would name nothing."""
    library = provider.library
    if library and (os.sep in library or library.endswith((".so", ".dll", ".dylib"))):
        library = os.path.abspath(library)
    return {"provider": provider.name, "options": dict(provider.options),
            "library": library, "device": dict(provider.device)}
