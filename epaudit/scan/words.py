"""The phrases every ``scan`` report shares (terminal, Markdown, HTML): a verdict with what
was checked, a gap's feature in words, the whole-model result and the closing line.

Every string a model supplies goes through :mod:`.safe` here.
"""

from __future__ import annotations

from collections import Counter

from .join import ORDER, EPVerdict, ModelReport, ScanResult, Verdict
from .safe import esc


def _trim(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (ORT's load errors run to a paragraph)."""
    line = " ".join(esc(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _nodes(names, count: int) -> str:
    shown = ", ".join(esc(n) for n in names)
    return f"{count} node{'s' if count != 1 else ''}: {shown}" + (f", … (+{count - len(names)})" if count > len(names) else "")


def _part(m: ModelReport, fid: str) -> str:
    """A node-config feature id in words (``node config softcap [GQA ...]``)."""
    for c in m.configs:
        if fid in c.parts:
            return f"node config {esc(c.parts[fid])} [{esc(c.words)}]"
    return esc(fid)


def _header(m: ModelReport) -> str:
    opsets = ", ".join(f"{esc(d) or 'ai.onnx'} {v}" for d, v in sorted(m.opsets.items()))
    ext = f"; external data {', '.join(esc(e) for e in m.external)}" if m.external else ""
    doms = ", ".join(f"{esc(d)} {n} node(s), {p} of {c} compute probed" for d, (n, c, p) in m.domains.items())
    catalog = sum(1 for f in m.used if not f.startswith("node."))
    probed = sum(1 for c in m.configs if c.probed)
    return (f"{esc(m.path)}: {m.nodes} nodes, {m.compute} compute, {m.probed} probed in their own configuration; "
            f"opsets {opsets}{ext}\n"
            f"  domains: {doms}\n"
            f"  uses {catalog} catalog feature(s); {len(m.configs)} distinct node configuration(s), {probed} probed "
            f"({len(m.used) - catalog} node-config probe(s))")


def _counts(v: EPVerdict) -> str:
    if not v.live:
        return "not live"
    total = v.passed + len(v.gaps)
    parts = [f"{v.passed} of {total} used features pass" if total else "no probed feature used"]
    if v.compute:
        parts.append(f"{v.probed} of {v.compute} compute nodes probed")
    if v.whole is not None:
        parts.append(f"whole model: {v.whole.status}")
    if v.declared:
        parts.append(f"{len(v.declared)} declared gap(s)")
    return "; ".join(parts)


def verdict_text(v: EPVerdict) -> str:
    """The verdict in words, with the coverage for ``partly checked``."""
    if v.verdict is Verdict.PARTLY:
        return f"partly checked ({v.probed} of {v.compute} compute nodes probed)"
    return v.verdict.value


def _whole_lines(w, indent: str = "    ") -> list[str]:
    out = [f"{indent}whole model vs {esc(w.reference) or 'reference'}: {w.status}: {_trim(w.detail, 240)}"]
    if w.first:
        f = w.first
        where = f" (inside {esc(f['inside'])})" if f.get("inside") else ""
        probe = f.get("probe")
        probe_text = (f"; its node probe: {probe[0]} ({esc(probe[1])})" if probe
                      else "; no node probe of its own")
        out.append(f"{indent}  first wrong node: {esc(f['node'])} ({esc(f['op'])}){where}, output "
                   f"{esc(f.get('output', ''))}: max abs {f.get('max_abs', 0):.3g}, {f.get('bad')} of {f.get('size')} "
                   f"element(s) off; ran on {esc(f.get('ran_on') or '?')}; found with {f.get('method')}{probe_text}")
        if f.get("config"):
            out.append(f"{indent}  its configuration: {esc(f['config'])}")
    if w.repro:
        out.append(f"{indent}  reproduction: {esc(w.repro)}")
    out += [f"{indent}  note: {_trim(n, 300)}" for n in w.notes]
    return out


def closing(result: ScanResult) -> str:
    """The last line: the exit code and the verdicts it stands on, counted."""
    counts = Counter(v.verdict for m in result.models for v in m.eps)
    pairs = sum(counts.values())
    said = ", ".join(f"{counts[v]} {v.value}" for v in ORDER if counts.get(v))
    head = {0: "no model is silently wrong, crashes or hangs on an EP checked",
            1: "a model is silently wrong, crashes or hangs, or is refused / falls back on a required EP",
            2: "a file could not be read or a model cannot be loaded (the others are reported)",
            3: "incomplete: a required EP is not live, no EP was live, or used features have no outcome"}
    return f"exit {result.exit_code}: {head.get(result.exit_code, '')} ({pairs} model x EP pair(s): {said or 'none'})"


