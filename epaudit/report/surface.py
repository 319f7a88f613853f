"""Formats of ``epaudit surface``: the surface and its coverage per EP, and the observed
support page (``--observed``). Pure: data in (``coverage.survey`` / ``coverage.observed``),
string out.
"""

from __future__ import annotations

import json as _json
from typing import Any, Mapping

from ..surface.coverage import summary, type_picture
from .markdown import _code, _esc

#: Operators listed per EP in the table format.
TABLE_TOP = 10


def _pct(covered: int, items: int) -> str:
    return f"{100.0 * covered / items:.1f}%" if items else "—"


def surface_table(data: Mapping[str, Any], **_: Any) -> str:
    """Plain text: one summary line per EP, then its largest uncovered operators."""
    lines = [f"epaudit surface: {len(data['eps'])} EP(s), {data['features']} catalog feature(s), "
             f"{data['seconds']:.2f} s"]
    for alias, ep in data["eps"].items():
        how = "cached" if ep.get("cached") else f"{ep.get('seconds', 0):.2f} s"
        lines.append(f"{summary(alias, ep)} [registry: {ep.get('method') or '—'}, {how}]")
        if ep.get("unserved"):
            lines.append(f"    registry reads wider than ORT runs: {len(ep['unserved'])} operator(s) listed "
                         f"open-ended with a newer schema no kernel serves: {'; '.join(ep['unserved'][:6])}"
                         + ("; …" if len(ep["unserved"]) > 6 else ""))
        for r in [r for r in ep.get("by_operator", ()) if r["items"] > r["covered"]][:TABLE_TOP]:
            lines.append(f"    {r['operator']}: {r['covered']}/{r['items']} items covered, opsets "
                         f"{','.join(map(str, r['opsets']))}; {len(r['features'])} feature(s)")
    return "\n".join(lines) + "\n"


def surface_markdown(data: Mapping[str, Any], **_: Any) -> str:
    """Per EP: the summary, then every operator on the surface with its coverage."""
    out = [f"# Surface coverage ({data['features']} catalog features)", ""]
    for alias, ep in data["eps"].items():
        out += [f"## {_esc(alias)} ({_esc(ep.get('provider', ''))})", "", _esc(summary(alias, ep)), ""]
        if ep.get("unserved"):
            out += ["Listed open-ended (`N+`) with a newer schema no kernel serves (ORT runs the listed "
                    "version only): " + "; ".join(_esc(u) for u in ep["unserved"]), ""]
        rows = ep.get("by_operator")
        if not rows:
            continue
        out += ["| operator | opsets | types | items covered | features |", "|---|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: r["operator"]):
            types = ", ".join(t[len("tensor("):-1] for t in r["types"])
            out.append(f"| {_code(r['operator'])} | {', '.join(map(str, r['opsets']))} | {_esc(types)} | "
                       f"{r['covered']}/{r['items']} ({_pct(r['covered'], r['items'])}) | {len(r['features'])} |")
        out.append("")
    return "\n".join(out)


def observed_markdown(data: Mapping[str, Any], **_: Any) -> str:
    """The observed support page: per EP and operator, registered / probed / claimed / passed."""
    out = ["# Observed operator support", "",
           "Per execution provider and operator: what its kernel registry lists (**registered**: "
           "opsets and types), how many probes ran on it (**probed**), how many of those the EP took "
           "(**claimed**: the node placed on it) and how many **passed** (the node ran on the EP and "
           "matched the float64 reference). A registration is a claim; only *passed* is evidence.", "",
           "Sources: " + ", ".join(_code(s) for s in data["sources"]), ""]
    for alias, ep in data["eps"].items():
        state = "live" if ep["live"] else "not live"
        out += [f"## {_esc(alias)} ({_esc(ep['provider'])}; {_esc(ep['distribution'] or 'onnxruntime ?')}; {state})",
                "", _esc(ep["summary"]), ""]
        rows = ep["operators"]
        if not rows:
            out += ["Nothing probed or registered.", ""]
            continue
        out += ["| operator | registered | probed | claimed | passed | not passed | types working | registered, never passing | passing, not registered |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["registered"] is None:
                reg = "unknown"
            elif r["registered"]:
                reg = f"opsets {', '.join(map(str, r['opsets']))}; {', '.join(r['types'])}"
            else:
                reg = "no"
            bad = ", ".join(f"{o} {n}" for o, n in sorted(r["outcomes"].items()) if o != "PASS")
            pic = type_picture(r.get("by_type") or {})
            cols = " | ".join(_esc(", ".join(pic[k])) or "—" for k in
                              ("working", "registered_not_working", "working_not_registered"))
            out.append(f"| {_code(r['operator'])} | {_esc(reg)} | {r['probed']} | {r['claimed']} | "
                       f"{r['passed']} | {_esc(bad) or '—'} | {cols} |")
        out.append("")
    return "\n".join(out)


def observed_table(data: Mapping[str, Any], **_: Any) -> str:
    """Plain text of the observed page: probed operators per EP with their counts."""
    lines = []
    for alias, ep in data["eps"].items():
        lines.append(ep["summary"])
        for r in ep["operators"]:
            if r["probed"]:
                reg = {None: "registry unknown", True: "registered", False: "NOT registered"}[r["registered"]]
                pic = type_picture(r.get("by_type") or {})
                extra = "".join(f"; {label} {', '.join(pic[k])}" for k, label in (
                    ("registered_not_working", "registered, never passing:"),
                    ("working_not_registered", "passing, not registered:")) if pic[k])
                lines.append(f"    {r['operator']}: {r['passed']}/{r['probed']} passed, {r['claimed']} claimed; {reg}"
                             f"; types working: {', '.join(pic['working']) or 'none'}{extra}")
    return "\n".join(lines) + "\n"


def to_json(data: Mapping[str, Any], **_: Any) -> str:
    """The data as indented JSON."""
    return _json.dumps(data, indent=2) + "\n"


#: (observed?, format) -> formatter.
FORMATS = {(False, "table"): surface_table, (False, "markdown"): surface_markdown, (False, "json"): to_json,
           (True, "table"): observed_table, (True, "markdown"): observed_markdown, (True, "json"): to_json}
