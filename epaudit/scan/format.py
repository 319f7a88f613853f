"""``scan`` reports: terminal text, JSON and Markdown from one :class:`ScanResult` (HTML:
:mod:`.html`).

Pure functions, data in and text out (writing is the CLI's ``write_atomic``). Every
report summarises before it lists: the verdict per model and EP first (with what was
checked: features passed, compute nodes probed, the whole model), then each used feature
that does not pass (outcome, nodes, declaration, issue), the whole-model result and its
first wrong node, the configurations no probe exercises, and a closing line that counts
the verdicts it printed. Every string a model supplies goes through :mod:`.safe`.
"""

from __future__ import annotations

import json
from typing import Callable

from .join import ScanResult, Verdict
from .safe import esc, lines, md
from .words import _counts, _header, _nodes, _part, _trim, _whole_lines, closing, verdict_text

#: Gaps listed per model and EP in the terminal and Markdown reports (JSON has all).
GAPS_SHOWN = 12


def table(result: ScanResult, **_) -> str:
    """Plain terminal text."""
    eps = ", ".join(f"{esc(a)}{'' if i.live else ' (not live)'}" for a, i in result.eps.items()) or "none"
    out = [f"epaudit scan: {len(result.models)} model(s); EPs {eps}; outcomes {result.source}"]
    out += [f"note: {esc(n)}" for n in result.notes]
    out += [f"unreadable: {_trim(u, 300)}" for u in result.unreadable]
    out += [f"{esc(a)}: not live: {_trim(i.reason)}" for a, i in result.eps.items() if not i.live]
    for m in result.models:
        out += ["", _header(m)]
        out += [f"  cannot be loaded: {esc(p)}" for p in m.problems]
        width = max((len(esc(v.ep)) for v in m.eps), default=0)
        for v in m.eps:
            out.append(f"  {esc(v.ep):<{width}}  {verdict_text(v)} ({_counts(v)})")
            for g in v.gaps[:GAPS_SHOWN]:
                decl = esc(g.declared) + (f" ({esc(g.issue)})" if g.issue and g.issue not in g.declared else "")
                out.append(f"    {(g.outcome.value if g.outcome else 'NO RESULT'):<11} {_part(m, g.feature)}")
                out.append(f"                {_nodes(g.nodes, g.count)}; declared {decl}")
                if g.summary:
                    out.append(f"                {_trim(g.summary, 240)}")
            if len(v.gaps) > GAPS_SHOWN:
                out.append(f"    … {len(v.gaps) - GAPS_SHOWN} more (--format json lists every one)")
            for g in v.declared:
                out.append(f"    declared gap: {esc(g.feature)} ({esc(g.declared)}"
                           + (f", {esc(g.issue)}" if g.issue else "") + f"); {_nodes(g.nodes, g.count)}")
            if v.whole is not None:
                out += _whole_lines(v.whole)
            out += [f"    note: {esc(n)}" for n in v.notes]
        if m.uncovered:
            out.append("  uncovered (no probe exercises it):")
            for u in m.uncovered:
                out.append(f"    {esc(u.operator)}: {esc(u.item)} — {_nodes(u.nodes, u.count)}")
    out += ["", closing(result)]
    return lines("\n".join(out) + "\n")


def _whole_dict(w) -> dict | None:
    if w is None:
        return None
    return {"status": w.status, "detail": w.detail, "reference": w.reference, "outputs": list(w.outputs),
            "first_wrong_node": dict(w.first) if w.first else None, "repro": w.repro, "notes": list(w.notes)}


def to_dict(result: ScanResult) -> dict:
    """The JSON document (``schema`` ``epaudit-scan/2``)."""
    return {
        "schema": "epaudit-scan/2",
        "source": result.source,
        "require": list(result.require),
        "exit_code": result.exit_code,
        "closing": closing(result),
        "notes": list(result.notes),
        "unreadable": list(result.unreadable),
        "eps": {a: {"name": i.name, "live": i.live, "reason": i.reason, "distribution": i.distribution,
                    "fault": i.fault} for a, i in result.eps.items()},
        "models": [{
            "path": m.path, "nodes": m.nodes, "compute_nodes": m.compute, "probed_nodes": m.probed,
            "opsets": dict(m.opsets), "external_data": list(m.external), "cannot_be_loaded": list(m.problems),
            "domains": {d: {"nodes": n, "compute": c, "probed": p} for d, (n, c, p) in m.domains.items()},
            "used": {f: list(n) for f, n in m.used.items()},
            "node_configs": [{"config": c.words, "operator": c.operator, "nodes": list(c.nodes),
                              "probes": {f: c.parts.get(f, "") for f in c.probes}, "probed": c.probed,
                              "compute_nodes": c.compute, "not_exercised": list(c.skipped)} for c in m.configs],
            "uncovered": [{"operator": u.operator, "item": u.item, "nodes": list(u.nodes), "count": u.count}
                          for u in m.uncovered],
            "eps": [{"ep": v.ep, "live": v.live, "verdict": v.verdict.value, "verdict_text": verdict_text(v),
                     "passed": v.passed, "compute_nodes": v.compute, "probed_nodes": v.probed,
                     "gaps": [_gap(g) for g in v.gaps], "declared_gaps": [_gap(g) for g in v.declared],
                     "whole": _whole_dict(v.whole), "notes": list(v.notes), "reason": v.reason}
                    for v in m.eps],
        } for m in result.models],
    }


def _gap(g) -> dict:
    return {"feature": g.feature, "outcome": g.outcome.value if g.outcome else None, "verdict": g.verdict.value,
            "summary": g.summary, "nodes": list(g.nodes), "count": g.count, "declared": g.declared, "issue": g.issue}


def as_json(result: ScanResult, **_) -> str:
    """JSON text (ASCII: every non-ASCII or control character a model supplies is a
    ``\\u`` escape)."""
    return json.dumps(_clean(to_dict(result)), indent=2, default=_json_default, allow_nan=False) + "\n"


def _clean(x):
    """Non-finite floats as strings (``"inf"``): JSON has no such numbers."""
    import math

    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _json_default(x):
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float):
        return str(x)
    return str(x)


def markdown(result: ScanResult, **_) -> str:
    """GitHub-flavoured Markdown."""
    out = [f"## epaudit scan — exit {result.exit_code}", "", f"Outcomes {md(result.source)}.", ""]
    out += [f"> {md(n)}" for n in result.notes]
    out += [f"> unreadable: {md(u)}" for u in result.unreadable]
    out += [f"> {md(a)}: not live ({md(_trim(i.reason))}): nothing checked there"
            for a, i in result.eps.items() if not i.live]
    eps = list(result.eps)
    out += ["", "| model | compute nodes probed | " + " | ".join(md(e) for e in eps) + " |",
            "|---|---|" + "---|" * len(eps)]
    for m in result.models:
        cells = [("✅ " if v.verdict is Verdict.EXPECTED else "❌ " if v.verdict in (Verdict.SILENT, Verdict.CRASH)
                  else "⚠️ ") + md(verdict_text(v)) + (f" (whole: {md(v.whole.status)})" if v.whole else "")
                 for v in m.eps]
        out.append(f"| {md(m.path)} | {m.probed} of {m.compute} | " + " | ".join(cells) + " |")
    for m in result.models:
        gaps = [(v.ep, g) for v in m.eps for g in v.gaps]
        out += ["", f"### {md(m.path)}", "", md(" — ".join(_header(m).split("\n  "))), ""]
        out += [f"* cannot be loaded: {md(p)}" for p in m.problems]
        if gaps:
            out += ["| EP | outcome | feature | nodes | declared | issue |", "|---|---|---|---|---|---|"]
            for ep, g in gaps[:GAPS_SHOWN * max(1, len(m.eps))]:
                out.append(f"| {md(ep)} | {g.outcome.value if g.outcome else 'no result'} | {md(_part(m, g.feature))} | "
                           f"{md(_nodes(g.nodes, g.count))} | {md(g.declared)} | {md(g.issue)} |")
        for v in m.eps:
            if v.whole is not None:
                out += [""] + [f"* {md(v.ep)}: " + md(x.strip()) for x in _whole_lines(v.whole, "")]
            out += [f"* {md(v.ep)}: {md(n)}" for n in v.notes]
        if m.uncovered:
            out += ["", "<details><summary>uncovered configurations</summary>", "",
                    "| operator | not exercised | nodes |", "|---|---|---|"]
            out += [f"| {md(u.operator)} | {md(u.item)} | {md(_nodes(u.nodes, u.count))} |" for u in m.uncovered]
            out += ["", "</details>"]
    out += ["", md(closing(result))]
    return lines("\n".join(out) + "\n")


def _html(result: ScanResult, **kw) -> str:
    from .html import page

    return page(result)


#: Format name -> formatter.
FORMATS: dict[str, Callable[..., str]] = {"table": table, "json": as_json, "markdown": markdown, "html": _html}
