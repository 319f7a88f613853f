"""Comparing outputs with a reference, and how far a probe's subject and control references lie apart.

Closeness is :class:`epaudit.contract.probes.Tolerance` (``|a - e| <= atol + rtol * |e|``),
elementwise; a failing comparison reports the output, the max abs and rel error, where, and
how many elements are out of tolerance (docs/outcomes-and-gates.md "Tolerances").
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..contract.probes import EXACT, Probe, Tolerance


def _rel_text(c: Mapping[str, Any]) -> str:
    """The relative error in words: none exists where the reference is 0 (dividing by a
    floor made it ``rel 1.25e+30``)."""
    if c.get("ref_at_worst") == 0.0:
        return "reference 0 there, so no relative error" + (
            f"; max rel {c['max_rel']:.3g} over nonzero references" if c.get("max_rel") else "")
    return f"rel {c['max_rel']:.3g}"


def compare(actual: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
            tol: Tolerance, exact: frozenset[str] | set[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Compare every reference output with the EP's output of the same name.

    Outputs named in ``exact`` are held to :data:`epaudit.contract.probes.EXACT` (equal or not)
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
        with np.errstate(invalid="ignore"):  # a signaling NaN casts with a warning
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
        bound = out_tol.bound(ref)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            diff = np.abs(a - ref)
            # Tolerance.close, from the distance and bound computed once (this runs for
            # every output of every run, twice: against the subject and the control).
            close = fin_ref & (diff <= bound)
            if not fin_ref.all():
                # Tolerance.close: equal infinities, and NaN for NaN (a propagated NaN:
                # Max(NaN, 1) is NaN by the spec; an EP answering 1 is wrong, one answering
                # NaN is right).
                close |= (np.isinf(ref) & (a == ref)) | (np.isnan(ref) & np.isnan(a))
            if nonfinite or not fin_ref.all() or not fin_a.all():
                # Where either side is not finite there is no distance: 0 when close
                # (equal infinities), else infinitely far.
                diff = np.where(fin_ref & fin_a, diff, np.where(close, 0.0, np.inf))
            # Relative error only where the reference is not 0: there it has none.
            nonzero = (ref != 0) & fin_ref  # a non-finite reference has no relative error either
            rel = np.where(nonzero, diff / np.where(nonzero, np.abs(ref), 1.0), 0.0)
            # A non-finite reference has no bound: there the distance (0 or inf) is the ratio.
            ratio = diff / np.where(fin_ref, np.maximum(bound, 1e-300), 1.0)
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
    infinitely separated. A probe is blind below :data:`epaudit.contract.probes.MIN_SEPARATION`.
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
