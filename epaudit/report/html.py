"""The HTML report (``--format html``, ``--report html:FILE``): one self-contained page.

For a run or a fleet merge (``check --results``): the verdict; a heat map of operators
(rows, expandable to their features) by EP columns, coloured by outcome, with a thick
border on a cell with a failing finding and stripes on a declared, governed gap; filters
(EP, outcome, operator, finding kind, feature text); for each cell its evidence (ORT's
message, placement, worst error and where, the matrix declaration with its issue link,
the findings, the raw evidence); the EPs and machines; a coverage section when the
result carries one.

Self-contained: the stylesheet and script are inline (``html_assets.py``), the data is
one JSON block read by the script; nothing is fetched at view time. Every text from the
result is escaped: the server-side parts with :func:`html.escape`, the data block with
``<``, ``>`` and ``&`` as JSON ``\\u`` escapes (so no ``</script>`` can end it), and the
script sets text with ``textContent`` only.

Size: evidence is reduced to the fields a reader needs plus, for cells that did not pass,
the raw evidence as compact JSON cut at :data:`EVIDENCE_CHARS`; declarations are stored
once each. The benchmark
``benchmarks/html_report.py`` measures size and load time at 2,000 features x 8 EPs.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..contract.outcomes import FindingKind, Outcome
from ..contract.results import RunResult
from .cells import Verdict, cells, ep_findings
from .html_assets import CSS, JS

#: Raw evidence kept per cell (compact JSON), characters; the JSON report keeps all of it.
EVIDENCE_CHARS = 3_000
#: Items of one list shown in the coverage section before "… N more".
COVERAGE_ITEMS = 200

_OUTCOMES = list(Outcome)
_KINDS = list(FindingKind)
_VERDICTS = list(Verdict)
_VERDICT_CLASS = {0: "v0", 1: "v1", 3: "v3"}


def _e(text: Any) -> str:
    """Text from anywhere as HTML text; ``##[`` as ``#&#35;[`` (the same to a browser, never a
    GitHub Actions command when the page goes to a CI log)."""
    return html.escape(str(text), quote=True).replace("##[", "#&#35;[")


def _short_json(value: Any, limit: int = EVIDENCE_CHARS) -> str:
    from .json import _clean

    text = json.dumps(_clean(value), separators=(",", ":"), allow_nan=False, sort_keys=False)
    return text if len(text) <= limit else text[:limit] + " … (cut; the JSON report has all of it)"


def _evidence(ev: Mapping[str, Any], raw: bool = True) -> dict[str, str]:
    """What a reader looks for first: ORT's status, where the node ran, the worst error;
    with ``raw``, also the whole evidence as compact JSON (cut at :data:`EVIDENCE_CHARS`)."""
    out: dict[str, str] = {}
    err = ev.get("error")
    if isinstance(err, Mapping):
        head = " ".join(str(err[k]) for k in ("stage", "status") if err.get(k))
        out["error"] = f"{head}: {err.get('message', '')}".strip(": ")
    placement = ev.get("placement")
    if isinstance(placement, list):
        out["placement"] = ("; ".join(f"{p.get('name') or p.get('op_type')} ({p.get('op_type')}) on {p.get('ep')}"
                                      for p in placement[:12] if isinstance(p, Mapping))
                            + (f"; … {len(placement) - 12} more" if len(placement) > 12 else "")
                            + (f" [seen via {ev['placement_source']}]" if ev.get("placement_source") else ""))
        if not placement:
            out["placement"] = "no node placement reported"
    comparison = ev.get("comparison")
    if isinstance(comparison, Mapping) and comparison:
        rows = [c for c in comparison.values() if isinstance(c, Mapping)]
        if rows:
            c = max(rows, key=lambda c: _num(c.get("max_ratio")))
            if "shape" in c:
                out["worst"] = f"{c.get('output')}: shape {c['shape']} != reference {c.get('ref_shape')}"
            else:
                out["worst"] = (f"{c.get('output')}: max abs {_fmt(c.get('max_abs'))}, max rel "
                                f"{_fmt(c.get('max_rel'))}, {_fmt(c.get('max_ratio'))} tolerance bound(s), "
                                f"at {c.get('worst_index')}"
                                + (f" (EP gave {_fmt(c['actual_at_worst'])}, reference {_fmt(c['ref_at_worst'])})"
                                   if "ref_at_worst" in c and "actual_at_worst" in c else "")
                                + f"; {c.get('bad', 0)} of {c.get('size', '?')} out")
                if c.get("nonfinite"):
                    out["worst"] += f"; {c['nonfinite']} non-finite, first at {c.get('first_nonfinite')}"
    if ev and raw:
        out["raw"] = _short_json(dict(ev))
    return out


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("inf") if str(x) in ("inf", "nan") else 0.0


def _fmt(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)


def data(result: RunResult) -> dict[str, Any]:
    """The page's data block: compact arrays the script renders.

    Keys: ``features`` (ids), ``ops`` (``[operator, [feature index…]]``), ``featOp``
    (feature index -> op index), ``eps`` (``{alias, name, live, reason, dist, machine}``),
    ``outcomes``, ``kinds``, ``verdicts`` (the enums' values, indexed by the cells),
    ``decl`` (distinct declarations), ``cellDecl`` (``"fi,j"`` -> declaration of a cell
    with no result), ``cells[fi][j]`` = ``None`` or ``[outcome, verdict, summary,
    decl index, [[kind, failing, message]…], evidence]``.
    """
    meta, rows, tables = _data_parts(result)
    grid = list(rows)
    return {**meta, "decl": list(tables["decl"]), "cellDecl": tables["cellDecl"], "cells": grid,
            "expandOnFilter": True}


def _data_parts(result: RunResult):
    """``(meta, rows, tables)``: the data block's keys known before the cells, a generator of
    the grid's rows (one feature each, its cells' evidence read as the row is made), and
    ``decl``/``cellDecl``, filled as the rows are made (complete once they all are)."""
    all_cells = cells(result)
    features = list(result.features)
    fidx = {f: i for i, f in enumerate(features)}
    eps = list(result.eps)
    ops: dict[str, list[int]] = {}
    tables: dict[str, Any] = {"decl": {}, "cellDecl": {}}
    conf_ops = result.conformance.ops if result.conformance else ()

    def op_of(fid: str, op: str) -> str:
        # Conformance "features" are backend test case names (test_attention_…): group
        # them under the operator whose cases they are.
        if not conf_ops:
            return op
        return next((o for o in conf_ops if f"_{o.lower()}" in fid.lower()), conf_ops[0])

    for c in all_cells:
        if c.ep == eps[0]:
            ops.setdefault(op_of(c.feature_id, c.operator), []).append(fidx[c.feature_id])
    if not eps:  # no column: every feature still gets its operator row
        from ..catalog import operator

        for f in features:
            ops.setdefault(op_of(f, operator(f)), []).append(fidx[f])
    op_list = sorted(ops.items(), key=lambda kv: kv[0].lower())
    feat_op = [0] * len(features)
    for oi, (_, members) in enumerate(op_list):
        for i in members:
            feat_op[i] = oi

    def rows():
        decl, cell_decl = tables["decl"], tables["cellDecl"]
        width = len(eps)
        for i in range(len(features)):
            row: list[Any] = [None] * width
            for j, c in enumerate(all_cells[i * width:(i + 1) * width]):
                if c.result is None:
                    if c.declared != "undeclared":
                        cell_decl[f"{i},{j}"] = c.declared
                    continue
                d = decl.setdefault(c.declared, len(decl))
                row[j] = [_OUTCOMES.index(c.result.outcome), _VERDICTS.index(c.verdict), c.result.summary, d,
                          [[_KINDS.index(f.kind), f.failing, f.message] for f in c.findings],
                          # A pass's raw evidence repeats its placement and worst error: left
                          # out, it halves the page of a mostly passing run (the JSON has it).
                          _evidence(c.result.evidence, raw=c.result.outcome is not Outcome.PASS)]
            yield row

    meta = {
        "features": features, "ops": [[name, members] for name, members in op_list], "featOp": feat_op,
        "eps": [{"alias": a, "name": info.name, "live": info.live, "reason": info.reason,
                 "dist": info.distribution, "machine": info.machine} for a, info in result.eps.items()],
        "outcomes": [o.value for o in _OUTCOMES], "kinds": [k.value for k in _KINDS],
        "verdicts": [v.value for v in _VERDICTS],
    }
    return meta, rows(), tables


def _write_data(result: RunResult, fh) -> None:
    """The data block (:func:`data`) written row by row (its keys in another order)."""
    meta, rows, tables = _data_parts(result)
    fh.write(_script_json(meta)[:-1] + ',"cells":[')
    for i, row in enumerate(rows):
        fh.write(("," if i else "") + _script_json(row))
    fh.write('],"decl":' + _script_json(list(tables["decl"])) + ',"cellDecl":'
             + _script_json(tables["cellDecl"]) + ',"expandOnFilter":true}')


def _script_json(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` left."""
    from .json import _clean

    text = json.dumps(_clean(value), separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("##[", "#\\u0023["))


def _value_html(value: Any, depth: int = 0) -> str:
    """Any JSON-like value as escaped HTML: mappings as key/value tables, lists of mappings
    as tables, other lists comma-joined; capped at :data:`COVERAGE_ITEMS` items per list."""
    if isinstance(value, Mapping):
        if not value:
            return "<i>none</i>"
        if depth >= 4:
            return f"<code>{_e(_short_json(dict(value), 400))}</code>"
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_value_html(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = list(value)
        more = f" … {len(items) - COVERAGE_ITEMS} more" if len(items) > COVERAGE_ITEMS else ""
        items = items[:COVERAGE_ITEMS]
        if items and all(isinstance(x, Mapping) for x in items) and depth < 4:
            keys = list(dict.fromkeys(k for x in items for k in x))
            head = "".join(f"<th>{_e(k)}</th>" for k in keys)
            body = "".join("<tr>" + "".join(f"<td>{_value_html(x.get(k, ''), depth + 1)}</td>" for k in keys)
                           + "</tr>" for x in items)
            return f'<table class="kv"><tr>{head}</tr>{body}</table>{_e(more)}'
        return _e(", ".join(str(x) for x in items) + more) if items else "<i>none</i>"
    if isinstance(value, float):
        return _e(f"{value:.4g}")
    return _e(value)


def _coverage_html(coverage: Any) -> str:
    """The coverage section, whatever shape the result's coverage has (per EP when it is
    a mapping of EP -> facts)."""
    if not coverage:  # None, or a run that measured no surface (an empty mapping)
        return ""
    import dataclasses

    if dataclasses.is_dataclass(coverage) and not isinstance(coverage, type):
        coverage = dataclasses.asdict(coverage)
    parts = ['<section id="coverage"><h2>Coverage</h2>']
    if isinstance(coverage, Mapping):
        for key, value in coverage.items():
            parts.append(f'<h3 class="cov-ep">{_e(key)}</h3>{_value_html(value, 1)}')
    else:
        parts.append(_value_html(coverage))
    parts.append("</section>")
    return "".join(parts)


def _eps_html(result: RunResult) -> str:
    rows = []
    for alias, info in result.eps.items():
        state = "live" if info.live else f"not live: {info.reason[:400]}"
        rows.append(f"<tr><th>{_e(alias)}</th><td>{_e(info.name)}</td><td>{_e(info.distribution or '—')}</td>"
                    f"<td>{_e(info.machine or '')}</td><td>{_e(state)}</td></tr>")
    for label, facts in result.machines.items():
        gpus = ", ".join(str(g.get("name", "?")) for g in facts.get("gpus", [])) or "no NVIDIA GPU"
        rows.append(f"<tr><th>machine {_e(label)}</th><td colspan=4>{_e(facts.get('hostname', ''))}; {_e(gpus)}"
                    "</td></tr>")
    return ('<h2>Execution providers</h2><table class="kv"><tr><th>column</th><th>provider</th>'
            "<th>onnxruntime</th><th>machine</th><th>state</th></tr>" + "".join(rows) + "</table>")


def write(result: RunResult, fh, **_: Any) -> None:
    """Write the run (or fleet merge) as one self-contained HTML page to the text stream
    ``fh``, the data block one feature row at a time."""
    gate = result.gate
    if gate is not None:
        failing = sum(f.failing for f in gate.findings)
        verdict = (f'<div class="verdict {_VERDICT_CLASS.get(gate.exit_code, "v1")}" id="verdict">'
                   f"{_e(gate.verdict)} (exit {gate.exit_code}; {len(gate.findings) - failing} warning(s))</div>")
    else:
        verdict = '<div class="verdict vnone" id="verdict">probe results (no gate applied)</div>'
    env = result.environment
    when = ""
    if env.get("started"):
        when = f"; started {_e(env['started'])}"
        if env.get("duration_s") is not None:
            when += f", took {_e(_fmt(env['duration_s']))} s"
    merged = env.get("merged_from")
    meta = (f'<p class="meta">{len(result.features)} feature(s) x {len(result.eps)} EP column(s); matrix '
            f"<code>{_e(result.matrix_path)}</code>; catalog {result.catalog_version}; epaudit "
            f"{_e(env.get('epaudit', '?'))}{when}"
            + (f"; merged from {len(merged)} report(s): {_e(', '.join(map(str, merged)))}" if merged else "")
            + "</p>")
    if result.incomplete:
        meta += '<p class="verdict v3">Run interrupted: results are incomplete.</p>'
    ep_level = "".join(f'<li class="{"finding-fail" if f.failing else "finding-warn"}">{_e(f.kind.value)} '
                       f"{_e(f.ep)}: {_e(f.message)}</li>" for f in ep_findings(result))
    legend = "".join(f'<span><i class="sw o-{o.value}"></i>{o.value}</span>' for o in Outcome)
    filters = ('<div class="filters"><label>EP <select id="f-ep"><option value="">all</option></select></label>'
               '<label>outcome <select id="f-outcome"><option value="">any</option></select></label>'
               '<label>operator <select id="f-op"><option value="">any</option></select></label>'
               '<label>finding <select id="f-kind"><option value="">any</option></select></label>'
               '<label>feature <input id="f-q" type="search" placeholder="id contains…" size="18"></label>'
               '<button id="expand" type="button">expand / collapse all</button>'
               '<span id="shown" class="meta"></span></div>')
    body = (f"<h1>epaudit report</h1>{verdict}{meta}"
            + (f"<ul>{ep_level}</ul>" if ep_level else "")
            + f'<h2>Heat map</h2><p class="legend meta">{legend} <span>thick border: failing finding; '
              "stripes: declared gap that refused; operator rows: passed/probed, ✖ failing. "
              "Click a row to expand it, a cell for its evidence.</span></p>"
            + filters
            + '<table class="heat" id="heat"><thead><tr><th class="rowh">operator / feature</th></tr></thead>'
              "<tbody></tbody></table>"
            + _eps_html(result)
            + _coverage_html(getattr(result, "coverage", None))
            + '<aside id="detail" hidden></aside>')
    title = f"epaudit: {gate.verdict if gate else 'probe results'}"
    fh.write("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             '<meta name="viewport" content="width=device-width,initial-scale=1">'
             # No network at view time, whatever the data holds.
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{body}"
             '<script type="application/json" id="epaudit-data">')
    _write_data(result, fh)
    fh.write(f"</script><script>{JS}</script></body></html>\n")


def format(result: RunResult, **_: Any) -> str:  # noqa: A001
    """Render the run (or fleet merge) as one self-contained HTML page."""
    import io

    out = io.StringIO()
    write(result, out)
    return out.getvalue()
