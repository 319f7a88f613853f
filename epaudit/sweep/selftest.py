"""The sweep's own proof: every deliberately broken EP is found and shrunk.

For each fault of ``epaudit selftest`` (:data:`epaudit.run.faults.EXPECTED`: ignore, refuse,
fallback, nan, perturb, unwritten, kill, hang, decompose, fallback_wrong, decompose_wrong),
:func:`run` sweeps an operator on the CPU EP with that fault injected (the same test hook
``selftest`` uses: real ORT sessions, the fault applied where a broken EP would misbehave),
with the fault's outcome counted as a failure, and checks that

* the sweep finds it: at least one failure whose outcome is the fault's;
* the shrinker shrinks it: the minimal configuration is no larger than the first one found
  (elements), and running the minimal configuration again under the fault shows the same
  outcome (so the repro it writes still shows it);

and that the clean CPU EP shows no failure on the same configurations (a sweep that
flags everything would find every fault too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..contract.outcomes import Outcome
from ..contract.probes import Feature
from ..run.faults import EXPECTED
from ..run.selftest import HANG_TIMEOUT, fault_provider
from .engine import FAILING, Sessions, judge, sweep


@dataclass(frozen=True)
class FaultRow:
    """One fault of the sweep's self-test.

    Attributes:
        fault: the fault's name; ``expected`` its outcome.
        found: failures of that outcome the sweep reported.
        first / minimal: the first failing configuration and the minimal one, in words.
        shrunk: the minimal one is no larger than the first.
        again: the minimal configuration, run again under the fault, shows the outcome.
        steps: shrink steps taken; ``tried`` configurations the shrinker ran.
        detail: why the row fails, or ``""``.
    """

    fault: str
    expected: Outcome
    found: int
    first: str = ""
    minimal: str = ""
    shrunk: bool = False
    again: bool = False
    steps: int = 0
    tried: int = 0
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Found, shrunk and shown again."""
        return self.found > 0 and self.shrunk and self.again


def run(groups: dict[str, Sequence[Feature]], *, budget: int = 12, seed: int = 0, faults: Sequence[str] = tuple(EXPECTED),
        timeout: float = 20.0, python: str | None = None) -> tuple[list[FaultRow], int]:
    """``(rows, clean failures)``: one :class:`FaultRow` per fault, and the failures the clean
    CPU EP showed on the same sweep (must be 0)."""
    clean = sweep(groups, [fault_provider(None, python)], budget=budget, seed=seed, timeout=timeout, shrink=False)
    rows = []
    for fault in faults:
        expected = EXPECTED[fault]
        provider = fault_provider(fault, python)
        limit = HANG_TIMEOUT if fault == "hang" else timeout
        result = sweep(groups, [provider], budget=budget, seed=seed, timeout=limit,
                       failing=frozenset({expected}) | (FAILING if expected in FAILING else frozenset()))
        mine = [f for f in result.failures if f.outcome is expected]
        if not mine:
            rows.append(FaultRow(fault, expected, 0, detail=f"no {expected.value} among "
                                 + ", ".join(f"{k} {n}" for o in result.operators for a in o.outcomes.values()
                                             for k, n in a.items())))
            continue
        f = min(mine, key=lambda f: f.config.elements)
        shrunk = f.config.elements <= f.original.elements
        sessions = Sessions([provider])
        try:
            got = sessions.run([f.built], [provider.alias], limit)
        finally:
            sessions.close()
        c, _ = got.get((f.built.probe.feature_id, provider.alias), (None, None))
        again = c is not None and judge(f.built, c, provider.name, frozenset({expected}))[1] is expected
        rows.append(FaultRow(fault, expected, len(mine), f.original.describe(), f.config.describe(), shrunk, again,
                             f.shrink.get("steps", 0), f.shrink.get("tried", 0),
                             "" if (shrunk and again) else "the minimal configuration does not show it again"))
    return rows, len(clean.failures)


def format_rows(rows: Sequence[FaultRow], clean: int) -> str:
    """The self-test table."""
    lines = [f"{'fault':<16} {'outcome':<11} {'found':>5}  {'shrunk':<6}  {'again':<5}  minimal configuration"]
    for r in rows:
        lines.append(f"{r.fault:<16} {r.expected.value:<11} {r.found:>5}  {'yes' if r.shrunk else 'no':<6}  "
                     f"{'yes' if r.again else 'no':<5}  {r.minimal or r.detail}")
    ok = all(r.ok for r in rows) and clean == 0
    lines.append(f"clean CPU EP: {clean} failure(s) on the same configurations")
    lines.append(f"verdict: {'PASS' if ok else 'FAIL'}: {sum(r.ok for r in rows)} of {len(rows)} fault(s) found, "
                 "shrunk and shown again")
    return "\n".join(lines) + "\n"
