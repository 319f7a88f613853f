"""A sweep's report: JSON (every failure with its minimal configuration and repro) and a table.

The JSON document (``"format": "epaudit-sweep/1"``): ``seed``, ``budget``, ``eps`` (alias ->
provider, live, onnxruntime version, reason), ``operators`` (seeds, configurations tried
and built, skips by reason, outcomes per EP, refusals, ``cannot load``, ``precision``),
``failures`` (each ``id``, ``operator``, ``ep``, ``outcome``, ``config`` (the minimal
configuration as data), ``description`` (in words), ``summary``, ``difference`` (the worst
output's comparison), ``count`` (failing configurations of its group), ``original`` (the
first one found, in words), ``shrink`` (``rounds``, ``tried``, ``steps``, ``seconds``) and
``repro`` (its directory)), ``shrink`` (the shrinker's total cost), ``seconds``,
``incomplete``, ``errors``, ``exit_code`` and ``verdict``. Strings from models and files are
escaped in the table (control characters as ``\\x..``).
"""

from __future__ import annotations

import json

from .engine import SweepResult

FORMAT = "epaudit-sweep/1"


def _safe(text: str) -> str:
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
                   for ch in str(text))


def verdict(result: SweepResult) -> str:
    """The one-line verdict."""
    n = len(result.failures)
    if result.incomplete:
        return f"INCOMPLETE: interrupted; {n} failing configuration(s) found so far"
    if n:
        return f"FAIL: {n} failing configuration(s)"
    down = [a for a, i in result.eps.items() if not i.live]
    if down or not result.eps:
        return "INCOMPLETE: EP(s) not live: " + (", ".join(down) or "none ran")
    if result.errors:
        return f"INCOMPLETE: {len(result.errors)} configuration(s) could not be judged (ERROR)"
    return "PASS: no failing configuration"


def _difference(comparison: dict | None) -> dict:
    if not comparison:
        return {}
    bad = [c for c in comparison.values() if not c.get("match")] or list(comparison.values())
    worst = max(bad, key=lambda c: c.get("max_ratio", 0.0) if c.get("max_ratio") is not None else 0.0)
    keys = ("output", "shape", "ref_shape", "max_abs", "max_rel", "worst_index", "ref_at_worst", "actual_at_worst",
            "bad", "size", "nonfinite")
    return {k: worst[k] for k in keys if k in worst}


def to_dict(result: SweepResult) -> dict:
    """The JSON document (see the module docstring)."""
    eps = {a: {"provider": i.name, "live": i.live, "ort_version": i.ort_version, "python": i.python,
               "reason": i.reason} for a, i in result.eps.items()}
    ops = [{"operator": o.operator, "seeds": o.seeds, "tried": o.tried, "built": o.built,
            "skipped": dict(sorted(o.skipped.items())),
            "outcomes": {a: dict(sorted(c.items())) for a, c in o.outcomes.items()},
            "notes": dict(sorted(o.notes.items())),
            "refusals": [{"ep": a, "summary": s, "count": n} for (a, s), n in o.refusals.most_common(10)]}
           for o in result.operators]
    failures = []
    for f in result.failures:
        failures.append({"id": f.id, "operator": f"{f.config.domain or 'ai.onnx'}.{f.config.op}", "ep": f.ep,
                         "outcome": f.outcome.value, "config": json.loads(f.config.key),
                         "description": f.config.describe(), "summary": f.result.summary,
                         "difference": _difference((f.result.evidence or {}).get("comparison")),
                         "count": f.count, "original": f.original.describe(), "shrink": f.shrink,
                         "repro": f.repro})
    return {"format": FORMAT, "seed": result.seed, "budget": result.budget, "eps": eps, "operators": ops,
            "failures": failures, "shrink": result.shrink, "seconds": result.seconds,
            "incomplete": result.incomplete,
            "errors": [{"ep": a, "id": i, "summary": s} for a, i, s in result.errors[:50]],
            "exit_code": result.exit_code, "verdict": verdict(result)}


def to_json(result: SweepResult) -> str:
    """:func:`to_dict` as text (NaN and infinities as strings: strict JSON)."""
    def clean(x):
        if isinstance(x, float) and x != x:
            return "nan"
        if isinstance(x, float) and x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(to_dict(result)), indent=2, allow_nan=False) + "\n"


def to_table(result: SweepResult) -> str:
    """The terminal report."""
    live = ", ".join(f"{a} ({_safe(i.name)}, onnxruntime {_safe(i.ort_version or '?')})" if i.live
                     else f"{a} (not live: {_safe(i.reason)[:120]})" for a, i in result.eps.items())
    lines = [f"epaudit sweep: seed {result.seed}, budget {result.budget} per operator, "
             f"{len(result.operators)} operator(s); EPs: {live or 'none'}", ""]
    width = max([len(o.operator) for o in result.operators] + [8])
    for o in result.operators:
        outcomes = "; ".join(f"{a}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items()))
                             for a, c in o.outcomes.items())
        skipped = ", ".join(f"{k} {n}" for k, n in sorted(o.skipped.items()))
        notes = ", ".join(f"{k} {n}" for k, n in sorted(o.notes.items()))
        lines.append(f"{_safe(o.operator):<{width}}  {o.seeds:>4} seeds  {o.tried:>5} tried  {o.built:>5} built  "
                     f"{outcomes}" + (f"  [skipped: {skipped}]" if skipped else "") + (f"  [{notes}]" if notes else ""))
    lines.append("")
    if result.failures:
        lines.append(f"Failures ({len(result.failures)}), each shrunk to a minimal configuration:")
        for f in result.failures:
            s = f.shrink
            lines.append(f"  {f.id}  {f.ep}  {f.outcome.value}  {_safe(f.config.describe())}")
            lines.append(f"      {_safe(f.result.summary)[:240]}")
            lines.append(f"      {f.count} failing configuration(s) in its group; shrunk in {s.get('steps', 0)} "
                         f"step(s), {s.get('rounds', 0)} batch(es), {s.get('tried', 0)} configuration(s) tried, "
                         f"{s.get('seconds', 0)} s" + (f"; repro: {_safe(f.repro)}" if f.repro else ""))
        lines.append("")
    sh = result.shrink
    lines.append(f"shrinker: {len(result.failures)} failure(s), {sh.get('rounds', 0)} batch(es), "
                 f"{sh.get('tried', 0)} configuration(s) tried, {sh.get('seconds', 0)} s; "
                 f"sweep {result.seconds.get('total', 0)} s (build {result.seconds.get('build', 0)} s, "
                 f"run {result.seconds.get('run', 0)} s)")
    lines.append(f"verdict: {verdict(result)} (exit {result.exit_code})")
    return "\n".join(lines) + "\n"
