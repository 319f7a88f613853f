"""Classification: an observation plus its probe's references -> one outcome.

The order of the checks is the contract (docs/outcomes-and-gates.md "Outcomes"); the first that applies
wins:

1. the probe never ran: ``UNAVAILABLE``, ``CRASH``, ``TIMEOUT``, ``ERROR``, ``SKIPPED``;
2. placement: the probed node is missing and primitives ran in its place ->
   ``DECOMPOSED``; the node is on another EP than the one asked for -> ``FALLBACK``
   (also when ORT refused because the fallback guard found nodes on CPU);
3. ORT raised at session creation or run -> ``REJECTED``;
4. outputs: an output missing, or still holding the poison its pre-bound buffer was
   filled with in any run (``epaudit/worker/sessions.py`` "Unwritten outputs") -> ``UNWRITTEN``; non-finite where the reference is finite
   -> ``NAN``; every output close to the subject reference -> ``PASS``; every output close
   to the *control* reference -> ``IGNORED``; otherwise ``MISMATCH``.

Closeness is :class:`epaudit.contract.probes.Tolerance` (``|a - e| <= atol + rtol * |e|``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..contract.outcomes import Outcome
from ..contract.probes import PROBE_NODE_NAME, Case, Probe, Tolerance
from ..contract.results import CaseRun, Classified, Observation
from .compare import _rel_text, compare
from .messages import kernel_paths, ort_message, shorten

_NEVER_RAN = {
    "unavailable": Outcome.UNAVAILABLE,
    "crash": Outcome.CRASH,
    "timeout": Outcome.TIMEOUT,
    "error": Outcome.ERROR,
    "skip": Outcome.SKIPPED,
}


def classify(obs: Observation, probe: Probe | None, provider_name: str) -> Classified:
    """Classify one observation.

    Args:
        obs: what the worker reported for (feature, EP).
        probe: the built probe (references, tolerance); ``None`` when building failed.
        provider_name: the ORT provider name the EP stands for (placement is judged
            against what the session asked for, which a fault may change).

    Returns:
        A :class:`Classified` whose ``evidence`` is JSON-ready.
    """
    base: dict[str, Any] = {"feature_id": obs.feature_id, "ep": obs.ep, "seconds": obs.seconds}
    if obs.status in _NEVER_RAN:
        evidence = {"detail": obs.detail}
        if obs.stderr.strip():
            evidence["stderr"] = obs.stderr.strip()[-2000:]
        summary = obs.detail.strip().splitlines()[-1] if obs.detail.strip() else obs.status
        return Classified(outcome=_NEVER_RAN[obs.status], summary=summary, evidence=evidence, **base)
    assert probe is not None, "a probe that ran has a built probe"
    subject = obs.cases["subject"]
    outcome, summary, evidence = classify_case(subject, probe.subject, probe.control,
                                               probe.tolerance, provider_name, node_name=probe.node_name)
    control = None
    if "control" in obs.cases and probe.control is not None:
        control, _, _ = classify_case(obs.cases["control"], probe.control, None, probe.tolerance,
                                      provider_name, node_name=probe.node_name)
    evidence["create_ms"] = subject.create_ms
    evidence["run_ms"] = subject.run_ms
    paths = kernel_paths(obs.stderr)
    if paths:
        evidence["kernel_path"] = paths
    return Classified(outcome=outcome, summary=summary, evidence=evidence, control=control, **base)


def classify_runs(runs: Mapping[str, Any], ids: Sequence[str], probes: Mapping[str, Probe | str | None],
                  provider_names: Mapping[str, str],
                  done: Mapping[tuple[str, str], Classified] | None = None,
                  ) -> tuple[dict[tuple[str, str], Classified], int]:
    """Classify every observation of a run (``runner.run_plan``'s alias -> EPRun).

    Args:
        runs: alias -> ``EPRun`` (its ``observations`` keyed by feature or case id).
        ids: the feature (or case) ids of the run, in order.
        probes: id -> built probe, or why it could not run (a string) / ``None``.
        provider_names: alias -> ORT provider name the EP stands for.
        done: (id, alias) -> what :func:`classify` already made of that very
            observation (during the run); the rest are classified here.

    Returns:
        ``(results, unfinished)``: (id, alias) -> :class:`Classified`, and how many
        probes have no observation because the run was interrupted before they finished.
    """
    results: dict[tuple[str, str], Classified] = {}
    unfinished = 0
    for alias, ep_run in runs.items():
        for fid in ids:
            obs = ep_run.observations.get(fid)
            if obs is None:  # interrupted before this probe finished
                unfinished += 1
                continue
            early = (done or {}).get((fid, alias))
            if early is not None:
                results[(fid, alias)] = early
                continue
            built = probes[fid]
            results[(fid, alias)] = classify(obs, built if not isinstance(built, str) else None,
                                             provider_names[alias])
    return results, unfinished


def classify_case(run: CaseRun, expected: Case, control: Case | None, tol: Tolerance,
                  provider_name: str, *, node_name: str | None = PROBE_NODE_NAME,
                  ) -> tuple[Outcome, str, dict[str, Any]]:
    """Classify one model run against its reference (and the control's, for IGNORED).

    ``node_name`` is the node under test (see :attr:`epaudit.contract.probes.Probe.node_name`);
    ``None`` checks only that every node ran on the asked EP.

    Returns:
        ``(outcome, one-line summary, evidence)``.
    """
    asked = run.asked or provider_name
    evidence: dict[str, Any] = {"asked": asked}
    if run.placement is not None:
        evidence["placement"] = [dict(p) for p in run.placement]
        evidence["placement_source"] = run.placement_source
        verdict = _placement(run.placement, asked, node_name)
        if verdict is not None:
            outcome, summary = verdict
            if run.error:
                evidence["error"] = dict(run.error)
            return outcome, summary, evidence
    if run.error:
        evidence["error"] = dict(run.error)
        status = run.error.get("status") or run.error.get("type")
        # ORT's sentence, not its C++ source location and signature (epaudit/classify/messages.py).
        return (Outcome.REJECTED, f"{run.error['stage']}: {status}: {shorten(ort_message(run.error['message']))}",
                evidence)
    if not run.placement:  # None, or a profile / assignment list with no node in it
        evidence["placement"] = None if run.placement is None else []
        return (Outcome.ERROR, "placement unknown: ORT reported no node placement (neither "
                "assignment info nor a profile listed the node), so a pass could not be earned",
                evidence)

    if run.binding:
        evidence["binding"] = run.binding
    missing = [n for n in expected.outputs if n not in run.outputs]
    if missing:
        evidence["missing_outputs"] = missing
        return Outcome.UNWRITTEN, f"output(s) not returned: {', '.join(missing)}", evidence
    unwritten = [(i + 1, name, count) for i, per_run in enumerate(run.poisoned)
                 for name, count in per_run.items() if count]
    if unwritten:
        evidence["unwritten"] = [{"run": i, "output": n, "elements": c} for i, n, c in unwritten]
        i, name, count = unwritten[0]
        size = int(np.size(expected.reference[name])) if name in expected.reference else count
        return (Outcome.UNWRITTEN, f"{name}: {count} of {size} element(s) still hold the poison "
                f"run {i} bound them with: the kernel never wrote them", evidence)

    subject_cmp = compare(run.outputs, expected.reference, tol, exact=expected.exact)
    evidence["comparison"] = subject_cmp
    nan_out = [c for c in subject_cmp.values() if c.get("nonfinite")]
    if nan_out:
        c = nan_out[0]
        return (Outcome.NAN, f"{c['output']}: {c['nonfinite']} non-finite value(s) where the "
                f"reference is finite, first at {c['first_nonfinite']}", evidence)
    if all(c["match"] for c in subject_cmp.values()):
        worst = max(subject_cmp.values(), key=lambda c: c.get("max_abs", 0.0))
        return Outcome.PASS, f"all {len(subject_cmp)} output(s) within tolerance (max abs {worst.get('max_abs', 0):.3g})", evidence
    if control is not None:
        control_cmp = compare(run.outputs, control.reference, tol, exact=control.exact)
        evidence["control_comparison"] = control_cmp
        if control_cmp and all(c["match"] for c in control_cmp.values()):
            return (Outcome.IGNORED, "outputs equal the control reference: the feature's input or "
                    "attribute was ignored", evidence)
    bad = [c for c in subject_cmp.values() if not c["match"]]
    c = max(bad, key=lambda c: c.get("max_ratio", float("inf")))
    if "shape" in c:
        return Outcome.MISMATCH, f"{c['output']}: shape {c['shape']} != reference {c['ref_shape']}", evidence
    return (Outcome.MISMATCH, f"{c['output']}: max abs err {c['max_abs']:.3g} ({_rel_text(c)}) "
            f"at {c['worst_index']}, {c['bad']} of {c['size']} elements out of tolerance", evidence)


def _placement(placement, asked: str, node_name: str | None = PROBE_NODE_NAME) -> tuple[Outcome, str] | None:
    if node_name is None:  # the whole graph is under test (a function body): all on the EP
        off = [p for p in placement if p["ep"] != asked]
        if off:
            names = ", ".join(f"{p['name'] or p['op_type']} on {p['ep']}" for p in off[:4])
            return Outcome.FALLBACK, f"{len(off)} of {len(placement)} node(s) placed off {asked}: {names}"
        return None
    nodes = [p for p in placement if p.get("name") == node_name]
    if not nodes:
        if not placement:
            return None
        ops = sorted({p["op_type"] for p in placement if not p.get("name", "").startswith("cast_")})
        eps = sorted({p["ep"] for p in placement})
        return (Outcome.DECOMPOSED, f"node '{PROBE_NODE_NAME}' was inlined into {len(placement)} "
                f"primitive node(s) ({', '.join(ops[:6])}{', …' if len(ops) > 6 else ''}) on {', '.join(eps)}")
    on = nodes[0]["ep"]
    if on != asked:
        return Outcome.FALLBACK, f"node '{PROBE_NODE_NAME}' placed on {on}, not on {asked}"
    helpers_elsewhere = [p for p in placement if p["ep"] != asked]
    if helpers_elsewhere:
        names = ", ".join(f"{p['name']} on {p['ep']}" for p in helpers_elsewhere[:4])
        return Outcome.FALLBACK, f"probe graph nodes placed off {asked}: {names}"
    return None


def _short(message: str, limit: int = 240) -> str:
    first = " ".join(message.split())
    return first if len(first) <= limit else first[: limit - 1] + "…"
