"""Classification: an observation plus its probe's references -> one outcome.

The order of the checks is the contract (docs/outcomes-and-gates.md "Outcomes"); the first that applies
wins:

1. the probe never ran: ``UNAVAILABLE``, ``CRASH``, ``TIMEOUT``, ``ERROR``, ``SKIPPED``;
2. placement: the probed node is missing and primitives ran in its place ->
   ``DECOMPOSED``; the node is on another EP than the one asked for -> ``FALLBACK``
   (also when ORT refused because the fallback guard found nodes on CPU);
3. ORT raised at session creation or run -> ``REJECTED``;
4. outputs: an output missing, or still holding the poison its pre-bound buffer was
   filled with in any run (``worker.py`` "Unwritten outputs") -> ``UNWRITTEN``; non-finite where the reference is finite
   -> ``NAN``; every output close to the subject reference -> ``PASS``; every output close
   to the *control* reference -> ``IGNORED``; otherwise ``MISMATCH``.

Closeness is :class:`epaudit.probes.Tolerance` (``|a - e| <= atol + rtol * |e|``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from .messages import ort_message, shorten
from ..contract.outcomes import Outcome
from ..contract.probes import EXACT, PROBE_NODE_NAME, Case, Probe, Tolerance
from ..contract.results import CaseRun, Classified, Observation

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

    ``node_name`` is the node under test (see :attr:`epaudit.probes.Probe.node_name`);
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
        # ORT's sentence, not its C++ source location and signature (epaudit/messages.py).
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


def _rel_text(c: Mapping[str, Any]) -> str:
    """The relative error in words: none exists where the reference is 0 (dividing by a
    floor made it ``rel 1.25e+30``)."""
    if c.get("ref_at_worst") == 0.0:
        return "reference 0 there, so no relative error" + (
            f"; max rel {c['max_rel']:.3g} over nonzero references" if c.get("max_rel") else "")
    return f"rel {c['max_rel']:.3g}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FLAG = re.compile(r"\b([A-Z][A-Z_]+)=1\b")


def kernel_paths(stderr: str) -> list[dict[str, str]]:
    """The attention kernel paths ORT reported for this probe, from worker stderr.

    With ``ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO=1`` in a CUDA worker's environment,
    ORT's ``AttentionKernelDebugInfo::Print`` (CUDA attention kernel options) writes one
    line per node run to stdout, which the worker sends to stderr, e.g.
    ``Operator=GroupQueryAttention Node=probe DataType=fp16 SdpaKernel=FLASH_ATTENTION``;
    older builds print the chosen kernels as ``FLASH_ATTENTION=1`` flags instead.

    Returns:
        ``[{operator, node, dtype, kernel}]`` in order, duplicates (subject and control,
        two bound runs) removed; ``[]`` when ORT printed none.
    """
    out: list[dict[str, str]] = []
    for raw in stderr.splitlines():
        line = _ANSI.sub("", raw).strip()
        if not line.startswith("Operator="):
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        kernel = fields.get("SdpaKernel") or "+".join(_FLAG.findall(line)) or "unknown"
        entry = {"operator": fields.get("Operator", ""), "node": fields.get("Node", ""),
                 "dtype": fields.get("DataType", ""), "kernel": kernel}
        if entry not in out:
            out.append(entry)
    return out


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


def compare(actual: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
            tol: Tolerance, exact: frozenset[str] | set[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Compare every reference output with the EP's output of the same name.

    Outputs named in ``exact`` are held to :data:`epaudit.probes.EXACT` (equal or not)
    instead of ``tol``; their entry says ``"exact": True``.

    Returns:
        output name -> ``{output, match, size, bad, max_abs, max_rel, max_ratio,
        worst_index, ref_at_worst, actual_at_worst, nonfinite, first_nonfinite}``
        (``max_rel`` over elements whose reference is not 0) (or ``shape``/``ref_shape`` when the
        shapes differ). ``max_ratio`` is the worst ``|a - e| / bound``: above 1 fails.
    """
    out = {}
    for name, ref in reference.items():
        ref = np.asarray(ref, dtype=np.float64)
        if name not in actual:
            out[name] = {"output": name, "match": False, "missing": True}
            continue
        a = np.asarray(actual[name])
        if a.shape != ref.shape:
            out[name] = {"output": name, "match": False, "shape": list(a.shape),
                         "ref_shape": list(ref.shape), "max_ratio": float("inf")}
            continue
        out_tol = EXACT if name in exact else tol
        a = a.astype(np.float64)
        entry: dict[str, Any] = {"output": name, "size": int(ref.size)}
        if name in exact:
            entry["exact"] = True
        fin_ref, fin_a = np.isfinite(ref), np.isfinite(a)
        bad_nonfinite = fin_ref & ~fin_a
        nonfinite = int(np.count_nonzero(bad_nonfinite))
        if nonfinite:
            entry["nonfinite"] = nonfinite
            entry["first_nonfinite"] = [int(i) for i in np.unravel_index(int(np.argmax(bad_nonfinite)), a.shape)]
        close = out_tol.close(a, ref)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            diff = np.abs(a - ref)
            if nonfinite or not fin_ref.all() or not fin_a.all():
                # Where either side is not finite there is no distance: 0 when close
                # (equal infinities), else infinitely far.
                diff = np.where(fin_ref & fin_a, diff, np.where(close, 0.0, np.inf))
            # Relative error only where the reference is not 0: there it has none.
            nonzero = ref != 0
            rel = np.where(nonzero, diff / np.where(nonzero, np.abs(ref), 1.0), 0.0)
            ratio = diff / np.maximum(out_tol.bound(ref), 1e-300)
        n_close = int(np.count_nonzero(close))
        entry["match"] = n_close == close.size
        entry["bad"] = close.size - n_close
        if diff.size:
            # diff is finite or +inf here (never NaN), so max is the worst element.
            entry["max_abs"] = float(diff.max())
            entry["max_rel"] = float(rel.max())
            worst = int(np.argmax(ratio))
            entry["max_ratio"] = float(ratio.flat[worst])
            entry["worst_index"] = [int(i) for i in np.unravel_index(worst, a.shape)]
            entry["ref_at_worst"] = float(ref.flat[worst])
            entry["actual_at_worst"] = float(a.flat[worst])
        else:
            entry["max_abs"] = entry["max_rel"] = entry["max_ratio"] = 0.0
        out[name] = entry
    return out


def separation(probe: Probe) -> float:
    """How far the subject and control references are apart, in tolerance bounds.

    The worst ``|subject - control| / bound(control)`` over outputs both have with the
    same shape; outputs the control lacks are left out, and a shape difference counts as
    infinitely separated. A probe is blind below :data:`epaudit.probes.MIN_SEPARATION`.
    """
    best = 0.0
    for name, s in probe.subject.reference.items():
        c = probe.control.reference.get(name)
        if c is None:
            continue
        if np.shape(c) != np.shape(s):
            return float("inf")
        s64, c64 = np.asarray(s, np.float64), np.asarray(c, np.float64)
        with np.errstate(invalid="ignore"):
            r = np.abs(s64 - c64) / probe.tolerance.bound(c64)
        r = r[np.isfinite(r)]
        if r.size:
            best = max(best, float(r.max()))
    return best


def _short(message: str, limit: int = 240) -> str:
    first = " ".join(message.split())
    return first if len(first) <= limit else first[: limit - 1] + "…"
