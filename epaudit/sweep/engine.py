"""The sweep: draw configurations, build them, run them on each EP, shrink what fails.

:func:`sweep` per operator: ``budget`` configurations drawn around its seeds with a
generator seeded by ``(seed, operator)`` (:class:`~.space.Space`; the same seed, budget,
catalog and onnx give the same configurations), each built into a probe (:mod:`.build`;
skipped ones are counted by reason), all run through the runner every ``check`` uses
(:func:`epaudit.run.runner.run_plan`: one pipelined worker per EP, a crash or hang costs
one probe) and classified by the same classifier (:func:`epaudit.classify.outcome.classify`:
placement, poisoned outputs, NaN, the reference, the control). Then:

* a refusal (``REJECTED``, ``FALLBACK``, ``DECOMPOSED``) is loud, counted, never a failure;
  one that says the release cannot load the model at all (its IR version or opset) is
  counted apart (``cannot load``);
* ``MISMATCH`` or ``NAN`` where the EP agrees with the evaluator's answer in the node's own
  dtype (:attr:`.build.Built.alt`) is the reference's precision, counted, not a failure;
* every other silent outcome, ``CRASH`` and ``TIMEOUT`` is a failure. Failures are grouped
  (EP, outcome, opset, dtype, string attributes, omitted inputs, values with NaN or not),
  the smallest of each group is shrunk (:mod:`.shrink`: all groups' candidates of a round
  in one batch per EP) and written as a standalone repro (:func:`epaudit.repro.write`).

Interrupted (``stop``), the sweep keeps what finished and is ``incomplete``.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from ..classify.outcome import classify
from ..contract.outcomes import Outcome
from ..contract.probes import Feature
from ..contract.results import Classified, EPInfo, Observation
from ..matrix.model import Provider
from ..run.runner import DEFAULT_TIMEOUT, probe_more, start_ep
from .build import Built, Skip, build, with_reference
from .config import Config, finding_id
from .shrink import MAX_ROUNDS, candidates, optional_inputs
from .space import Space

#: The default configurations per operator.
DEFAULT_BUDGET = 100
#: Outcomes that are failures.
FAILING = frozenset({Outcome.IGNORED, Outcome.UNWRITTEN, Outcome.NAN, Outcome.MISMATCH, Outcome.CRASH,
                     Outcome.TIMEOUT})
#: Outcomes that are loud refusals.
REFUSED = frozenset({Outcome.REJECTED, Outcome.FALLBACK, Outcome.DECOMPOSED})
#: ORT's words when a release cannot load a model at all (not a refusal of the node).
CANNOT_LOAD = re.compile(r"Unsupported model IR version|max supported IR version|is under development|"
                         r"opset \d+ is not supported|Unsupported opset|onnx opset version", re.I)

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class _Id:
    """What the runner needs of a feature: its id."""

    id: str


@dataclass
class Failure:
    """One minimal failing configuration on one EP.

    Attributes:
        ep: the EP's alias.
        outcome: how it fails (the same before and after shrinking).
        config: the minimal configuration; ``original`` the first one found.
        built: its probe; ``result`` the classification of its run.
        count: failing configurations of its group.
        shrink: ``{"rounds", "tried", "seconds"}`` of its shrink.
        repro: the repro directory written, or ``""``.
    """

    ep: str
    outcome: Outcome
    config: Config
    original: Config
    built: Built
    result: Classified
    count: int = 1
    shrink: dict = field(default_factory=dict)
    repro: str = ""

    @property
    def id(self) -> str:
        """The minimal configuration's stable id (:func:`~.config.finding_id`)."""
        return finding_id(self.config)


@dataclass
class OperatorSweep:
    """What one operator's sweep did: seeds, configurations, skips, outcomes per EP."""

    operator: str
    seeds: int = 0
    tried: int = 0
    built: int = 0
    skipped: Counter = field(default_factory=Counter)
    outcomes: dict = field(default_factory=dict)
    notes: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)


@dataclass
class SweepResult:
    """A whole sweep (what every report is made from)."""

    seed: int
    budget: int
    operators: list[OperatorSweep]
    eps: dict[str, EPInfo]
    failures: list[Failure]
    seconds: dict
    shrink: dict
    incomplete: bool = False
    errors: list = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """3 interrupted or an EP not live or an error; else 1 with a failure, 0 without."""
        if self.incomplete:
            return 3
        if self.failures:
            return 1
        if self.errors or not any(i.live for i in self.eps.values()):
            return 3
        return 0


def judge(built: Built, c: Classified, name: str, failing: frozenset = FAILING) -> tuple[str, Outcome]:
    """``(kind, outcome)``: kind ``failure``, ``refused``, ``cannot load``, ``pass``,
    ``error`` or ``not run`` (see the module docstring); ``failing`` are the outcomes that
    are failures (the sweep's self-test makes a fault's own outcome one). A MISMATCH or NAN
    failure may still turn out to be ``precision`` (:func:`_recheck`, with the run's outputs)."""
    o = c.outcome
    if o is Outcome.PASS:
        return "pass", o
    if o in (Outcome.UNAVAILABLE, Outcome.SKIPPED):
        return "not run", o
    err = (c.evidence or {}).get("error") or {}
    if o is Outcome.REJECTED and CANNOT_LOAD.search(f"{c.summary} {err.get('message', '')}"):
        return "cannot load", o
    if o in failing:
        return "failure", o
    if o in REFUSED:
        return "refused", o
    return "error", o


def _recheck(built: Built, obs, name: str) -> bool:
    """Whether a MISMATCH/NAN run passes against the evaluator's own-dtype answer."""
    if built.alt is None or obs is None:
        return False
    again = classify(obs, with_reference(built.probe, built.alt), name)
    return again.outcome is Outcome.PASS


class Sessions:
    """One worker per EP, started once (:func:`epaudit.run.runner.start_ep`: the canary) and
    kept across the sweep's batches (:func:`epaudit.run.runner.probe_more`: a crash costs the
    probe, a fresh worker takes over), so a shrink round costs its probes, not a start-up."""

    def __init__(self, providers: Sequence[Provider], stop=None):
        self.providers = {p.alias: p for p in providers}
        self.stop = stop
        self.workers: dict = {}
        self.infos: dict[str, EPInfo] = {}
        self.down: dict[str, str] = {}

    def _ensure(self, alias: str) -> None:
        if alias in self.infos:
            return
        from dataclasses import replace as _replace

        started = start_ep(self.providers[alias], self.stop)
        self.infos[alias] = _replace(started.info, absence=started.absence) if started.unavailable else started.info
        self.workers[alias] = started.worker
        if started.unavailable is not None:
            self.down[alias] = started.unavailable

    def run(self, builts: Sequence[Built], aliases: Sequence[str], timeout: float, progress=None) -> dict:
        """``{(feature id, alias): (Classified, Observation)}`` of ``builts`` on ``aliases``."""
        if not builts:
            return {}
        probes = {b.probe.feature_id: b.probe for b in builts}
        feats = [_Id(fid) for fid in probes]
        out: dict = {}
        done = [0]
        lock = threading.Lock()

        def one(alias: str) -> None:
            self._ensure(alias)
            provider = self.providers[alias]
            if alias in self.down:
                for f in feats:
                    obs = Observation(f.id, alias, "unavailable", detail=self.down[alias])
                    out[(f.id, alias)] = (classify(obs, probes[f.id], provider.name), obs)
                return
            if self.workers.get(alias) is None and self.infos[alias].reason and not self.infos[alias].live:
                return  # interrupted at start-up

            def record(obs: Observation) -> None:
                out[(obs.feature_id, alias)] = (classify(obs, probes[obs.feature_id], provider.name), obs)
                with lock:
                    done[0] += 1
                    if progress:
                        progress("run", done[0], len(feats) * len(aliases))

            self.workers[alias] = probe_more(self.workers.get(alias), provider, feats, probes, timeout=timeout,
                                             stop=self.stop, record=record)

        if len(aliases) == 1:
            one(aliases[0])
        else:
            threads = [threading.Thread(target=one, args=(a,), daemon=True) for a in aliases]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return out

    def close(self) -> None:
        """Close every worker."""
        for w in self.workers.values():
            if w is not None:
                w.close()
        self.workers.clear()


def _group(f: Failure) -> tuple:
    """Failures likely of one cause: the same EP, outcome, operator, dtype, omitted inputs
    and NaN or not; silent ones also the same opset and string attributes (a mode), where
    kernels part (a crash is most often the dtype's or the omitted input's)."""
    c = f.config
    omitted = tuple(i for i, x in enumerate(c.inputs) if x is None)
    base = (f.ep, f.outcome.value, c.op, c.domain, c.dtype, omitted, c.omit if omitted else "",
            c.values == "special")
    if f.outcome in (Outcome.CRASH, Outcome.TIMEOUT):
        return base
    return base + (c.opset, tuple(sorted((k, v) for k, v in c.attributes if isinstance(v, str))))


def draw_configs(space: Space, budget: int, seed: int, operator: str) -> list[Config]:
    """The ``budget`` configurations of ``operator`` for ``seed`` (duplicates included: the
    caller counts them)."""
    rng = np.random.default_rng([seed, zlib.crc32(operator.encode("utf-8"))])
    return [space.draw(rng, i) for i in range(budget)]


def sweep(groups: Mapping[str, Sequence[Feature]], providers: Sequence[Provider], *, budget: int = DEFAULT_BUDGET,
          seed: int = 0, timeout: float = DEFAULT_TIMEOUT, stop=None, progress: ProgressFn | None = None,
          shrink: bool = True, control: bool = True, failing: frozenset = FAILING,
          shrink_limit: int = 400) -> SweepResult:
    """Sweep every operator of ``groups`` (operator -> its seed features) on ``providers``;
    ``failing``: the outcomes that are failures (default :data:`FAILING`); ``shrink_limit``:
    the most configurations the shrinker runs per failure (a slow EP: fewer)."""
    t0 = time.perf_counter()
    sessions = Sessions(providers, stop)
    try:
        return _sweep(groups, providers, sessions, budget=budget, seed=seed, timeout=timeout, stop=stop,
                      progress=progress, shrink=shrink, control=control, t0=t0, failing=failing,
                      shrink_limit=shrink_limit)
    finally:
        sessions.close()


def _sweep(groups, providers, sessions: Sessions, *, budget, seed, timeout, stop, progress, shrink, control,
           t0, failing, shrink_limit) -> SweepResult:
    seconds = Counter()
    per_op, failures, eps, errors = [], [], {}, []
    names = {p.alias: p.name for p in providers}
    interrupted = False
    for operator in sorted(groups):
        if stop is not None and stop.is_set():
            interrupted = True
            break
        rep = OperatorSweep(operator)
        per_op.append(rep)
        t = time.perf_counter()
        space = Space.of(groups[operator])
        rep.seeds = len(space.seeds)
        if not space.seeds:
            rep.skipped.update({"no seed": 1})
            continue
        builts, seen = [], set()
        for i, cfg in enumerate(draw_configs(space, budget, seed, operator)):
            rep.tried += 1
            if cfg.key in seen:
                rep.skipped["duplicate"] += 1
                continue
            seen.add(cfg.key)
            with np.errstate(all="ignore"):
                made = build(cfg, control=control)
            if isinstance(made, Skip):
                rep.skipped[made.reason] += 1
            elif made.probe.control is None and any(p.inject_fault == "ignore" for p in providers):
                rep.skipped["no control"] += 1  # the ignore fault runs the control instead
            else:
                builts.append(made)
            if progress:
                progress(f"build {operator}", i + 1, budget)
        rep.built = len(builts)
        seconds["build"] += time.perf_counter() - t
        t = time.perf_counter()
        results = sessions.run(builts, list(names), timeout, progress)
        infos = sessions.infos
        eps.update(infos)
        seconds["run"] += time.perf_counter() - t
        found = []
        for b in builts:
            for alias in names:
                got = results.get((b.probe.feature_id, alias))
                if got is None:
                    if infos.get(alias) is not None and infos[alias].live:
                        interrupted = True
                    continue
                c, obs = got
                kind, o = judge(b, c, names[alias], failing)
                if kind == "failure" and o in (Outcome.MISMATCH, Outcome.NAN) and _recheck(b, obs, names[alias]):
                    kind = "precision"
                rep.outcomes.setdefault(alias, Counter())[o.value] += 1
                if kind in ("refused", "cannot load", "precision"):
                    rep.notes[kind] += 1
                    if kind == "refused":
                        rep.refusals[(alias, c.summary[:160])] += 1
                elif kind == "error":
                    errors.append((alias, b.probe.feature_id, c.summary))
                elif kind == "failure":
                    found.append(Failure(alias, o, b.config, b.config, b, c))
        grouped: dict[tuple, list[Failure]] = {}
        for f in found:
            grouped.setdefault(_group(f), []).append(f)
        reps = []
        for members in grouped.values():
            best = min(members, key=lambda f: (f.config.elements, f.config.key))
            best.count = len(members)
            reps.append(best)
        if shrink and reps and not (stop is not None and stop.is_set()):
            t = time.perf_counter()
            _shrink(reps, sessions, names, timeout, stop, progress, control, failing, shrink_limit)
            seconds["shrink"] += time.perf_counter() - t
        failures += _dedupe(reps)
    seconds["total"] = time.perf_counter() - t0
    shrink_cost = {"rounds": sum(f.shrink.get("rounds", 0) for f in failures),
                   "tried": sum(f.shrink.get("tried", 0) for f in failures),
                   "seconds": round(seconds.get("shrink", 0.0), 3)}
    return SweepResult(seed, budget, per_op, eps, failures, {k: round(v, 3) for k, v in seconds.items()},
                       shrink_cost, incomplete=interrupted or bool(stop is not None and stop.is_set()),
                       errors=errors)


def _dedupe(failures: list[Failure]) -> list[Failure]:
    out: dict[tuple, Failure] = {}
    for f in failures:
        key = (f.ep, f.config.key)
        if key in out:
            out[key].count += f.count
        else:
            out[key] = f
    return list(out.values())


#: Candidates of one failure tried per batch (first improvement: the batch's first
#: candidate that still fails is taken): 8 for a silent outcome, 2 for a crash (each one
#: that still crashes costs a fresh worker), 1 for a hang (each costs the probe timeout).
CHUNK = {Outcome.CRASH: 2, Outcome.TIMEOUT: 1}
CHUNK_DEFAULT = 8


def _shrink(reps: list[Failure], sessions: Sessions, names, timeout, stop, progress, control: bool,
            failing: frozenset = FAILING, limit: int = 400) -> None:
    """Shrink every failure in place (see :mod:`.shrink`). Each batch runs, for every
    failure still shrinking, the next :data:`CHUNK` of its current candidates, one batch per
    EP; the first candidate, in order, that still fails the same way becomes the current
    configuration (its candidates are made next), and a failure whose candidates are all
    tried is minimal."""
    t0 = {id(f): time.perf_counter() for f in reps}
    tried: dict[int, set] = {id(f): {f.config.key} for f in reps}
    queue: dict[int, list] = {}
    for f in reps:
        f.shrink = {"rounds": 0, "tried": 0, "seconds": 0.0, "steps": 0}
        queue[id(f)] = list(candidates(f.config, optional_inputs(f.config)))
    active = list(reps)
    memo: dict = {}  # configuration key -> its build: failures on several EPs share candidates

    def finish(f: Failure) -> None:
        active.remove(f)
        f.shrink["seconds"] = round(time.perf_counter() - t0[id(f)], 3)

    for _ in range(MAX_ROUNDS * 10):
        if not active or (stop is not None and stop.is_set()):
            break
        plans: dict[int, list[Built]] = {}
        for f in list(active):
            todo, size = [], CHUNK.get(f.outcome, CHUNK_DEFAULT)
            while queue[id(f)] and len(todo) < size:
                cand = queue[id(f)].pop(0)
                if cand.key in tried[id(f)]:
                    continue
                tried[id(f)].add(cand.key)
                made = memo.get(cand.key)
                if made is None:
                    with np.errstate(all="ignore"):
                        made = memo[cand.key] = build(cand, control=control)
                if isinstance(made, Built) and (made.probe.control is not None or sessions.providers[
                        f.ep].inject_fault != "ignore"):
                    todo.append(made)
            if not todo or f.shrink["tried"] >= limit:
                finish(f)
                continue
            plans[id(f)] = todo
            f.shrink["tried"] += len(todo)
        for alias in sorted({f.ep for f in active}):
            batch = {b.probe.feature_id: b for f in active if f.ep == alias for b in plans[id(f)]}
            results = sessions.run(list(batch.values()), [alias], timeout,
                                   (lambda phase, d, n: progress("shrink", d, n)) if progress else None)
            for f in [f for f in active if f.ep == alias]:
                f.shrink["rounds"] += 1
                for b in plans[id(f)]:
                    got = results.get((b.probe.feature_id, alias))
                    if got is None:
                        continue
                    c, obs = got
                    kind, o = judge(b, c, names[alias], failing)
                    if kind == "failure" and o is f.outcome and not (
                            o in (Outcome.MISMATCH, Outcome.NAN) and _recheck(b, obs, names[alias])):
                        f.built, f.result, f.config = b, c, b.config
                        f.shrink["steps"] += 1
                        queue[id(f)] = list(candidates(f.config, optional_inputs(f.config)))
                        break
                if f.shrink["steps"] >= MAX_ROUNDS:
                    finish(f)
    for f in list(active):
        finish(f)
