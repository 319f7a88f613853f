"""Classification: an observation plus its probe's references -> one outcome.

Two steps, kept apart so that a saved cell's outcome can be recomputed from its evidence
alone (``epaudit check --results``): :func:`measure_case` turns a case run and its references
into JSON-ready evidence (placement verdict, ORT's error, poisoned counts, comparisons with
the subject and the control references and their bounds), and :func:`decide` turns evidence
into an outcome. The order of :func:`decide` is the contract (docs/outcomes-and-gates.md
"Outcomes"); the first that applies wins:

1. the probe never ran: ``UNAVAILABLE``, ``CRASH``, ``TIMEOUT``, ``ERROR``, ``SKIPPED``;
2. the session never ran (ORT raised at session creation or run, and no run with CPU
   fallback allowed could be made) -> ``REJECTED``;
3. numbers, whatever the placement: an output missing, or still holding the poison its
   pre-bound buffer was filled with in any run (``epaudit/worker/sessions.py`` "Unwritten
   outputs") -> ``UNWRITTEN``; non-finite where the reference is finite -> ``NAN``; every
   output close to the *control* reference but not the subject's -> ``IGNORED``; any other
   output out of tolerance -> ``MISMATCH``. A wrong answer is the cell's outcome first; the
   placement stays in the evidence and the summary;
4. placement of a run whose numbers are right (:mod:`.placement`): on the EP as itself or
   rewritten by it (layout transformation, compiled partition, its own graph optimizations)
   -> ``PASS``; function body inlined -> ``DECOMPOSED``; the node or a part that does
   arithmetic on another EP (also when ORT refused because the fallback guard found nodes on
   CPU, and the run with fallback allowed computed right) -> ``FALLBACK``; placement unknown
   -> ``ERROR`` (a pass is never earned without it).

Closeness is :class:`epaudit.contract.probes.Tolerance` (``|a - e| <= atol + rtol * |e|``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..contract.outcomes import Outcome
from ..contract.probes import PROBE_NODE_NAME, Case, Probe, Tolerance
from ..contract.results import CaseRun, Classified, Observation
from .compare import _rel_text, compare
from .placement import DECOMPOSED, FALLBACK, ON_EP, REWRITTEN, UNKNOWN, judge
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
        evidence = {"status": obs.status, "detail": obs.detail}
        if obs.stderr.strip():
            evidence["stderr"] = obs.stderr.strip()[-2000:]
        outcome, summary = decide(evidence)
        return Classified(outcome=outcome, summary=summary, evidence=evidence, **base)
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


def measure_case(run: CaseRun, expected: Case, control: Case | None, tol: Tolerance,
                 provider_name: str, *, node_name: str | None = PROBE_NODE_NAME) -> dict[str, Any]:
    """The evidence of one model run: everything :func:`decide` needs, JSON-ready.

    ``node_name`` is the node under test (see :attr:`epaudit.contract.probes.Probe.node_name`);
    ``None`` checks that every node ran on the asked EP.

    Returns:
        ``{asked, ran, placement, placement_source, assigned, placement_verdict, error,
        guard_refused, fallback_error, binding, missing_outputs, unwritten, comparison,
        control_comparison, tolerance}`` (keys without a value left out). ``comparison`` and
        ``control_comparison`` are :func:`epaudit.classify.compare.compare`'s, against the
        subject and control references; every run that returned outputs has ``comparison``,
        and ``control_comparison`` where the probe has a control and some output is out of
        tolerance (where :func:`decide` asks whether the answer is the control's).
    """
    asked = run.asked or provider_name
    ev: dict[str, Any] = {"asked": asked, "ran": bool(run.ok and run.stage == "done"),
                          "tolerance": {"atol": tol.atol, "rtol": tol.rtol}}
    if run.placement is not None:
        ev["placement"] = [dict(p) for p in run.placement]
        ev["placement_source"] = run.placement_source
    if run.assigned is not None and run.placement_source != "assignment_info":
        ev["assigned"] = [dict(p) for p in run.assigned]
    if run.placement is not None or run.assigned is not None:
        executed = run.placement if run.placement_source == "profiling" else None
        assigned = run.assigned if run.assigned is not None else (
            run.placement if run.placement_source != "profiling" else None)
        ev["placement_verdict"] = judge(assigned, executed, asked, node_name)
    if run.error:
        ev["error"] = dict(run.error)
    if run.guard_refused:
        ev["guard_refused"] = True
    if run.fallback_error:
        ev["fallback_error"] = dict(run.fallback_error)
    if not ev["ran"]:
        return ev
    if run.binding:
        ev["binding"] = run.binding
    missing = [n for n in expected.outputs if n not in run.outputs]
    if missing:
        ev["missing_outputs"] = missing
    unwritten = [{"run": i + 1, "output": name, "elements": count,
                  "size": int(np.size(expected.reference[name])) if name in expected.reference else count}
                 for i, per_run in enumerate(run.poisoned) for name, count in per_run.items() if count]
    if unwritten:
        ev["unwritten"] = unwritten
    ev["comparison"] = compare(run.outputs, expected.reference, tol, exact=expected.exact)
    if control is not None and not all(c["match"] for c in ev["comparison"].values()):
        # Only a wrong answer asks whether it is the control's (IGNORED): :func:`decide`
        # reads this comparison nowhere else, so a right one is not compared twice.
        ev["control_comparison"] = compare(run.outputs, control.reference, tol, exact=control.exact)
    return ev


def _placed(ev: Mapping[str, Any]) -> str:
    pv = ev.get("placement_verdict")
    if not pv or pv.get("kind") in (ON_EP, REWRITTEN):
        return ""
    return f" [placement: {pv['kind']}: {pv['detail']}]"


def decide(ev: Mapping[str, Any]) -> tuple[Outcome, str]:
    """The outcome evidence earns, and one line saying why (the module docstring's order).

    Reads only ``ev`` (:func:`measure_case`'s evidence, or a never-ran cell's ``{status,
    detail}``), so a saved cell can be recomputed from what its report holds.

    Raises:
        KeyError, TypeError: ``ev`` is not evidence of this form (a malformed saved cell).
    """
    status = ev.get("status")
    if status in _NEVER_RAN:
        detail = str(ev.get("detail") or "").strip()
        return _NEVER_RAN[status], detail.splitlines()[-1] if detail else status
    if not ev["ran"]:
        err = ev.get("fallback_error") or ev.get("error")
        if err:
            status = err.get("status") or err.get("type")
            why = f"{err['stage']}: {status}: {shorten(ort_message(err['message']))}"
            if ev.get("fallback_error"):
                why = f"the EP did not take every node, and with CPU fallback allowed {why}"
            return Outcome.REJECTED, why
        return Outcome.ERROR, "the session neither ran nor reported an error"
    if ev.get("missing_outputs"):
        return Outcome.UNWRITTEN, f"output(s) not returned: {', '.join(ev['missing_outputs'])}" + _placed(ev)
    if ev.get("unwritten"):
        u = ev["unwritten"][0]
        return (Outcome.UNWRITTEN, f"{u['output']}: {u['elements']} of {u['size']} element(s) still hold the "
                f"poison run {u['run']} bound them with: the kernel never wrote them" + _placed(ev))
    cmp = ev["comparison"]
    nan_out = [c for c in cmp.values() if c.get("nonfinite")]
    if nan_out:
        c = nan_out[0]
        return (Outcome.NAN, f"{c['output']}: {c['nonfinite']} non-finite value(s) where the reference is "
                f"finite, first at {c['first_nonfinite']}" + _placed(ev))
    if not all(c["match"] for c in cmp.values()):
        ctrl = ev.get("control_comparison")
        if ctrl and all(c["match"] for c in ctrl.values()):
            return (Outcome.IGNORED, "outputs equal the control reference: the feature's input or attribute "
                    "was ignored" + _placed(ev))
        bad = [c for c in cmp.values() if not c["match"]]
        c = max(bad, key=lambda c: c.get("max_ratio", float("inf")))
        if c.get("missing"):
            return Outcome.UNWRITTEN, f"output(s) not returned: {c['output']}" + _placed(ev)
        if "shape" in c:
            return Outcome.MISMATCH, f"{c['output']}: shape {c['shape']} != reference {c['ref_shape']}" + _placed(ev)
        return (Outcome.MISMATCH, f"{c['output']}: max abs err {c['max_abs']:.3g} ({_rel_text(c)}) at "
                f"{c['worst_index']}, {c['bad']} of {c['size']} elements out of tolerance" + _placed(ev))
    worst = max(cmp.values(), key=lambda c: c.get("max_abs", 0.0)) if cmp else {}
    within = f"all {len(cmp)} output(s) within tolerance (max abs {worst.get('max_abs', 0):.3g})"
    pv = ev.get("placement_verdict")
    if pv is None or pv["kind"] == UNKNOWN:
        why = pv["detail"] if pv else "ORT reported no node placement"
        return (Outcome.ERROR, f"placement unknown: {why}; {within}, but a pass could not be earned "
                "without knowing the node ran on the EP")
    if pv["kind"] == FALLBACK:
        return Outcome.FALLBACK, f"{pv['detail']}; {within}"
    if pv["kind"] == DECOMPOSED:
        return Outcome.DECOMPOSED, f"{pv['detail']}; {within}"
    if pv["kind"] == REWRITTEN:
        return Outcome.PASS, f"{within}; {pv['detail']}"
    return Outcome.PASS, within


def classify_case(run: CaseRun, expected: Case, control: Case | None, tol: Tolerance,
                  provider_name: str, *, node_name: str | None = PROBE_NODE_NAME,
                  ) -> tuple[Outcome, str, dict[str, Any]]:
    """Classify one model run against its reference (and the control's, for IGNORED):
    :func:`decide` of :func:`measure_case`.

    Returns:
        ``(outcome, one-line summary, evidence)``.
    """
    ev = measure_case(run, expected, control, tol, provider_name, node_name=node_name)
    outcome, summary = decide(ev)
    return outcome, summary, ev


def _short(message: str, limit: int = 240) -> str:
    first = " ".join(message.split())
    return first if len(first) <= limit else first[: limit - 1] + "…"
