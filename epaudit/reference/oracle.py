"""Oracle cross-check: epaudit's float64 reference against ``onnx.reference.ReferenceEvaluator``.

Every ONNX ``Attention`` probe (subject and control) is run through onnx's own Python
reference implementation and compared, output by output, with the reference epaudit
gates on, under the probe's tolerance. A disagreement is reported, never resolved
silently: each one the project knows of is listed in :data:`KNOWN` with the spec clause
each side follows and a check that the disagreement is exactly that one; anything else
(a new disagreement, or a known one that went away) fails the cross-check. The gate
always uses epaudit's reference (:data:`epaudit.reference.SEMANTICS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Sequence

import numpy as np

from ..contract.probes import Case, Feature, Probe


class Verdict(str, Enum):
    """How epaudit's reference and ReferenceEvaluator compare on one case."""

    AGREE = "agree"
    """Every output within the probe's tolerance."""
    KNOWN = "known disagreement"
    """A listed disagreement, and exactly that one."""
    NEW = "new disagreement"
    """Outputs differ and the difference is not listed (or not the listed one)."""
    RESOLVED = "listed but agrees"
    """A listed disagreement that is gone: update :data:`KNOWN`."""
    ERROR = "evaluator failed"
    """ReferenceEvaluator raised on the model."""


@dataclass(frozen=True)
class Disagreement:
    """One known disagreement between the two references.

    Attributes:
        output: the output that differs (all others must agree).
        ours: the clause epaudit's reference follows.
        theirs: what ReferenceEvaluator does, and where.
        matches: ``(case, evaluator_output) -> bool``: the evaluator's value is exactly the
            other semantics (so a different bug is not taken for this one).
    """

    output: str
    """Output that differs."""
    ours: str
    """Clause epaudit follows."""
    theirs: str
    """What the evaluator does."""
    matches: Callable[[Case, np.ndarray], bool]
    """The evaluator output is exactly the described semantics."""


@dataclass(frozen=True)
class OracleRow:
    """The cross-check of one case.

    Attributes:
        feature_id: catalog id.
        role: ``subject`` or ``control``.
        verdict: the :class:`Verdict`.
        detail: the differing outputs and worst ratio, the listed clauses, or the error.
    """

    feature_id: str
    """Catalog id."""
    role: str
    """subject / control."""
    verdict: Verdict
    """Outcome of the comparison."""
    detail: str = ""
    """Why."""


def _softcapped_scores(case: Case, cap: float = 2.0) -> np.ndarray:
    """``cap * tanh(scale * Q @ K^T / cap)`` of a 4-D case, default scale ``1/sqrt(H)``."""
    q, k = (np.asarray(case.feeds[n], np.float64) for n in ("Q", "K"))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    return cap * np.tanh(scores / cap)


_MODE0_SOFTCAP = Disagreement(
    output="qk_matmul_output",
    ours="ONNX Attention-23 attribute qk_matmul_output_mode: 'If set to 0, qk_matmul_output is the "
         "output of qk matmul'; the function body emits qk_matmul_output = Identity(QKAttnWeight) "
         "before SoftcapDiv (ORT CPU agrees)",
    theirs="onnx.reference ops/op_attention.py _compute_attention overwrites qk_matmul_output with "
           "_softcap(qk_matmul_output, softcap) whenever softcap is set: its mode-0 output is the "
           "softcapped score (the mode-1 value)",
    matches=lambda case, got: bool(np.allclose(got, _softcapped_scores(case), rtol=1e-3, atol=1e-4)),
)

#: (feature id, role) -> the known disagreement. Every case is mode 0 with softcap = 2
#: (the mode-0 subject, and the controls of modes 1-3, which reset the mode to 0).
KNOWN: dict[tuple[str, str], Disagreement] = {
    ("attention.qk_matmul_output_mode.0", "subject"): _MODE0_SOFTCAP,
    ("attention.qk_matmul_output_mode.1", "control"): _MODE0_SOFTCAP,
    ("attention.qk_matmul_output_mode.2", "control"): _MODE0_SOFTCAP,
    ("attention.qk_matmul_output_mode.3", "control"): _MODE0_SOFTCAP,
}


def _worst(got: np.ndarray, ref: np.ndarray, probe: Probe) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(np.asarray(got, np.float64) - ref) / probe.tolerance.bound(ref)
    r = np.where(np.isnan(r) & (np.asarray(got, np.float64) == ref), 0.0, r)
    return float(np.nanmax(np.where(np.isnan(r), np.inf, r))) if r.size else 0.0


def _difference(got: np.ndarray, ref: np.ndarray, probe: Probe) -> str:
    """How two outputs differ in words: NaN where the reference is finite reads as NaN
    (its distance is no number of tolerance bounds), else the worst ratio."""
    nan = np.isnan(got) & np.isfinite(ref)
    if nan.any():
        first = [int(i) for i in np.unravel_index(int(np.argmax(nan)), got.shape)]
        return f"NaN in {int(nan.sum())} of {got.size} element(s) where the reference is finite, first at {first}"
    return f"worst {_worst(got, ref, probe):.3g} tolerance bounds"


def check_case(feature_id: str, role: str, probe: Probe) -> OracleRow:
    """Run one case of ``probe`` through ReferenceEvaluator and judge it against :data:`KNOWN`."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    case: Case = getattr(probe, role)
    try:
        got = ReferenceEvaluator(onnx.load_from_string(case.model)).run(list(case.outputs), dict(case.feeds))
    except Exception as exc:  # noqa: BLE001 - the evaluator's failure is the finding
        return OracleRow(feature_id, role, Verdict.ERROR, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    outs = dict(zip(case.outputs, got))
    bad = {}
    for name in case.outputs:
        a, ref = outs[name], case.reference[name]
        if np.shape(a) != np.shape(ref):
            bad[name] = f"shape {list(np.shape(a))} != {list(np.shape(ref))}"
        elif not probe.tolerance.close(a, ref).all():
            bad[name] = _difference(np.asarray(a, np.float64), np.asarray(ref, np.float64), probe)
    known = KNOWN.get((feature_id, role))
    if known is None:
        if not bad:
            return OracleRow(feature_id, role, Verdict.AGREE, "all outputs within tolerance")
        return OracleRow(feature_id, role, Verdict.NEW, "; ".join(f"{n}: {d}" for n, d in bad.items()))
    if not bad:
        import onnx

        return OracleRow(feature_id, role, Verdict.RESOLVED,
                         f"the listed disagreement on {known.output} no longer occurs with onnx {onnx.__version__}: "
                         "every output agrees; remove its entry from KNOWN in epaudit/reference/oracle.py")
    if set(bad) != {known.output} or not known.matches(case, outs[known.output]):
        return OracleRow(feature_id, role, Verdict.NEW,
                         "not the listed disagreement: " + "; ".join(f"{n}: {d}" for n, d in bad.items()))
    return OracleRow(feature_id, role, Verdict.KNOWN,
                     f"{known.output}: epaudit follows {known.ours}; ReferenceEvaluator: {known.theirs}")


def cross_check(features: Sequence[Feature]) -> tuple[OracleRow, ...]:
    """Cross-check the subject and control of every ONNX ``Attention`` feature given.

    Features of other operators are left out (onnx has no reference for contrib ops).
    """
    rows = []
    for f in features:
        if (f.op_type, f.domain) != ("Attention", ""):
            continue
        probe = f.build()
        rows.extend(check_case(f.id, role, probe) for role in ("subject", "control"))
    return tuple(rows)


def exit_code(rows: Sequence[OracleRow]) -> int:
    """0 when every row agrees or is a listed disagreement, else 1."""
    return 0 if all(r.verdict in (Verdict.AGREE, Verdict.KNOWN) for r in rows) else 1
