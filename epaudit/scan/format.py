"""``scan`` reports: terminal text, JSON and Markdown from one :class:`ScanResult`.

Pure functions, data in and text out (writing is the CLI's ``write_atomic``). Every
report summarises before it lists: the verdict per model and EP first, then each used
feature that does not pass (outcome, nodes, declaration, issue), then the node
configurations probed and what no probe exercises.
"""

from __future__ import annotations

import json
from typing import Callable

from .join import SHOWN, ModelReport, ScanResult, Verdict

_EXIT_WORDS = {0: "every model runs as expected on every EP checked",
               1: "a model uses a feature that is silently wrong, crashes or hangs, or is refused / falls "
                  "back on a required EP",
               3: "incomplete: a required EP is not live, no EP was live, or used features have no "
                  "outcome (not probed, not in the results given)"}


def _trim(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (ORT's load errors run to a paragraph)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _nodes(names, count: int) -> str:
    shown = ", ".join(names)
    return f"{count} node{'s' if count != 1 else ''}: {shown}" + (f", … (+{count - len(names)})" if count > len(names) else "")


def _part(m: ModelReport, fid: str) -> str:
    """A node-config feature id in words (``node config softcap``)."""
    for words, (_, fids, _) in m.node_configs.items():
        if fid in fids:
            return f"node config {fid.rsplit('.', 1)[1]} [{words}]"
    return fid


def _header(m: ModelReport) -> str:
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(m.opsets.items()))
    ext = f"; external data {', '.join(m.external)} (not read)" if m.external else ""
    catalog = sum(1 for f in m.used if not f.startswith("node."))
    return (f"{m.path}: {m.nodes} nodes, opsets {opsets}{ext}\n"
            f"  uses {catalog} catalog feature(s) and {len(m.used) - catalog} node-config probe(s) "
            f"over {len(m.node_configs)} attention configuration(s)")


def table(result: ScanResult, **_) -> str:
    """Plain terminal text."""
    eps = ", ".join(f"{a}{'' if i.live else ' (not live)'}" for a, i in result.eps.items()) or "none"
    lines = [f"epaudit scan: {len(result.models)} model(s); EPs {eps}; outcomes {result.source}"]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"{a}: not live: {_trim(i.reason)}" for a, i in result.eps.items() if not i.live]
    for m in result.models:
        lines += ["", _header(m)]
        width = max((len(v.ep) for v in m.eps), default=0)
        for v in m.eps:
            total = v.passed + len(v.gaps)
            counts = ("not live" if not v.live else f"{v.passed} of {total} used features pass"
                      if total else "the model uses no probed feature")
            lines.append(f"  {v.ep:<{width}}  {v.verdict.value} ({counts})")
            for g in v.gaps:
                decl = g.declared + (f" ({g.issue})" if g.issue and g.issue not in g.declared else "")
                lines.append(f"    {(g.outcome.value if g.outcome else 'NO RESULT'):<11} {_part(m, g.feature)}")
                lines.append(f"                {_nodes(g.nodes, g.count)}; declared {decl}")
                if g.summary:
                    lines.append(f"                {g.summary}")
        if m.node_configs:
            lines.append("  node configurations probed:")
            for words, (nodes, fids, skipped) in m.node_configs.items():
                lines.append(f"    {words} — {_nodes(nodes[:SHOWN], len(nodes))}")
                if fids:
                    lines.append(f"      probes: {', '.join(f.rsplit('.', 1)[1] for f in fids)}")
                for s in skipped:
                    lines.append(f"      not exercised: {s}")
        if m.uncovered:
            lines.append("  uncovered (no probe exercises it):")
            for u in m.uncovered:
                lines.append(f"    {u.operator}: {u.item} — {_nodes(u.nodes, u.count)}")
    lines += ["", f"exit {result.exit_code}: {_EXIT_WORDS.get(result.exit_code, '')}"]
    return "\n".join(lines) + "\n"


def to_dict(result: ScanResult) -> dict:
    """The JSON document (``schema`` ``epaudit-scan/1``)."""
    return {
        "schema": "epaudit-scan/1",
        "source": result.source,
        "require": list(result.require),
        "exit_code": result.exit_code,
        "notes": list(result.notes),
        "eps": {a: {"name": i.name, "live": i.live, "reason": i.reason, "distribution": i.distribution,
                    "fault": i.fault} for a, i in result.eps.items()},
        "models": [{
            "path": m.path, "nodes": m.nodes, "opsets": dict(m.opsets), "external_data": list(m.external),
            "used": {f: list(n) for f, n in m.used.items()},
            "node_configs": [{"config": w, "nodes": list(n), "probes": list(f), "not_exercised": list(s)}
                             for w, (n, f, s) in m.node_configs.items()],
            "uncovered": [{"operator": u.operator, "item": u.item, "nodes": list(u.nodes), "count": u.count}
                          for u in m.uncovered],
            "eps": [{"ep": v.ep, "live": v.live, "verdict": v.verdict.value, "passed": v.passed,
                     "gaps": [{"feature": g.feature, "outcome": g.outcome.value if g.outcome else None,
                               "verdict": g.verdict.value, "summary": g.summary, "nodes": list(g.nodes),
                               "count": g.count, "declared": g.declared, "issue": g.issue} for g in v.gaps]}
                    for v in m.eps],
        } for m in result.models],
    }


def as_json(result: ScanResult, **_) -> str:
    """JSON text."""
    return json.dumps(to_dict(result), indent=2) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(result: ScanResult, **_) -> str:
    """GitHub-flavoured Markdown."""
    out = [f"## epaudit scan — exit {result.exit_code}", "", f"Outcomes {result.source}.", ""]
    out += [f"> {_md(n)}" for n in result.notes]
    out += [f"> {a}: not live ({_md(_trim(i.reason))}): nothing checked there"
            for a, i in result.eps.items() if not i.live]
    eps = list(result.eps)
    out += ["| model | " + " | ".join(eps) + " |", "|---|" + "---|" * len(eps)]
    for m in result.models:
        cells = [("✅ " if v.verdict is Verdict.EXPECTED else "❌ " if v.verdict in (Verdict.SILENT, Verdict.CRASH)
                  else "⚠️ ") + v.verdict.value for v in m.eps]
        out.append(f"| `{_md(m.path)}` | " + " | ".join(cells) + " |")
    for m in result.models:
        gaps = [(v.ep, g) for v in m.eps for g in v.gaps]
        out += ["", f"### `{_md(m.path)}`", "", _md(_header(m).replace("\n  ", " — ")), ""]
        if gaps:
            out += ["| EP | outcome | feature | nodes | declared | issue |", "|---|---|---|---|---|---|"]
            for ep, g in gaps:
                out.append(f"| {ep} | {g.outcome.value if g.outcome else 'no result'} | {_md(_part(m, g.feature))} | "
                           f"{_md(_nodes(g.nodes, g.count))} | {_md(g.declared)} | {_md(g.issue)} |")
        if m.uncovered:
            out += ["", "<details><summary>uncovered configurations</summary>", "",
                    "| operator | not exercised | nodes |", "|---|---|---|"]
            out += [f"| {u.operator} | {_md(u.item)} | {_md(_nodes(u.nodes, u.count))} |" for u in m.uncovered]
            out += ["", "</details>"]
    return "\n".join(out) + "\n"


#: Format name -> formatter.
FORMATS: dict[str, Callable[..., str]] = {"table": table, "json": as_json, "markdown": markdown}
