"""``scan --format html``: one self-contained page in the check report's look.

The stylesheet is the check report's (:data:`epaudit.report.html_assets.CSS`: the verdict
boxes, the outcome colours ``o-<OUTCOME>``, the key/value tables), reused, not copied. The
page is static (no script, no network: the same Content-Security-Policy as the check
report): a models x EPs table coloured by verdict, then per model its nodes and coverage,
every used feature that does not pass with its outcome colour, the whole-model result and
its first wrong node, and (folded) the configurations no probe exercises. Every string
from a model goes through :func:`epaudit.scan.safe.html`.
"""

from __future__ import annotations

from ..report.html_assets import CSS
from .words import _counts, _part, _whole_lines, closing, verdict_text
from .join import ScanResult, Verdict
from .safe import html as h

_CLASS = {Verdict.EXPECTED: "o-PASS", Verdict.PARTLY: "o-UNAVAILABLE", Verdict.UNCHECKED: "o-SKIPPED",
          Verdict.FALLBACK: "o-FALLBACK", Verdict.DECOMPOSED: "o-DECOMPOSED", Verdict.REFUSED: "o-REJECTED",
          Verdict.CRASH: "o-CRASH",
          Verdict.SILENT: "o-MISMATCH", Verdict.LOAD: "o-ERROR"}
#: Node configurations listed per model, and node names per configuration.
CONFIGS_SHOWN = 300
CONFIG_NODES = 8
_EXTRA = "td.v{padding:3px 8px;color:#fff;font-weight:600}table.heat td.v{white-space:normal}"


def page(result: ScanResult) -> str:
    """The whole page."""
    box = "v0" if result.exit_code == 0 else "v3" if result.exit_code in (2, 3) else "v1"
    eps = list(result.eps)
    head = "".join(f"<th>{h(e)}</th>" for e in eps)
    rows = []
    for i, m in enumerate(result.models):
        cells = "".join(f'<td class="v {_CLASS[v.verdict]}" title="{h(_counts(v))}">{h(verdict_text(v))}'
                        + (f"<br><small>whole: {h(v.whole.status)}</small>" if v.whole else "") + "</td>"
                        for v in m.eps)
        rows.append(f'<tr><th class="rowh"><a href="#m{i}">{h(m.path)}</a></th><td>{m.probed} of {m.compute}</td>'
                    f"{cells}</tr>")
    body = [f"<h1>epaudit scan</h1><div class=\"verdict {box}\">{h(closing(result))}</div>",
            f'<p class="meta">{len(result.models)} model(s); outcomes {h(result.source)}</p>']
    body += [f'<p class="meta">{h(n)}</p>' for n in result.notes]
    body += [f'<p class="finding-fail">unreadable: {h(u)}</p>' for u in result.unreadable]
    body.append(f'<table class="heat"><thead><tr><th class="rowh">model</th><th>compute nodes probed</th>{head}'
                f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    for i, m in enumerate(result.models):
        body.append(f'<h2 id="m{i}">{h(m.path)}</h2>')
        facts = {"nodes": m.nodes, "compute nodes": m.compute, "probed in their own configuration": m.probed,
                 "distinct configurations": len(m.configs),
                 "opsets": ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(m.opsets.items())),
                 "domains": "; ".join(f"{d}: {n} node(s), {p} of {c} compute probed"
                                      for d, (n, c, p) in m.domains.items())}
        if m.external:
            facts["external data"] = ", ".join(m.external)
        if m.problems:
            facts["cannot be loaded"] = "; ".join(m.problems)
        body.append('<table class="kv">' + "".join(f"<tr><th>{h(k)}</th><td>{h(v)}</td></tr>"
                                                   for k, v in facts.items()) + "</table>")
        for v in m.eps:
            body.append(f'<h3>{h(v.ep)}: <span class="{_CLASS[v.verdict]}" style="color:#fff;padding:0 .4em">'
                        f"{h(verdict_text(v))}</span> <small class=\"meta\">{h(_counts(v))}</small></h3>")
            if v.gaps:
                trs = "".join(f'<tr><td class="c o-{g.outcome.value if g.outcome else "NONE"}">'
                              f"{h(g.outcome.value if g.outcome else 'no result')}</td><td>{h(_part(m, g.feature))}</td>"
                              f"<td>{h(', '.join(g.nodes))}{' …' if g.count > len(g.nodes) else ''} ({g.count})</td>"
                              f"<td>{h(g.declared)}</td><td>{h(g.summary)}</td></tr>" for g in v.gaps)
                body.append('<table class="kv"><tr><th>outcome</th><th>feature</th><th>nodes</th><th>declared</th>'
                            f"<th>evidence</th></tr>{trs}</table>")
            if v.whole is not None:
                body.append("<pre>" + "\n".join(h(x.strip()) for x in _whole_lines(v.whole, "")) + "</pre>")
            body += [f'<p class="finding-warn">{h(n)}</p>' for n in v.notes]
        if m.configs:
            trs = "".join(f"<tr><td>{h(c.words)}</td><td>{'probed' if c.probed else 'not probed'}</td>"
                          f"<td>{h(', '.join(sorted(set(c.parts.values()))))}</td>"
                          f"<td>{h(', '.join(c.nodes[:CONFIG_NODES]))}{' …' if len(c.nodes) > CONFIG_NODES else ''}"
                          f" ({len(c.nodes)})</td><td>{h('; '.join(c.skipped))}</td></tr>"
                          for c in m.configs[:CONFIGS_SHOWN])
            more = (f"<p class=\"meta\">… {len(m.configs) - CONFIGS_SHOWN} more (the JSON report lists every one)</p>"
                    if len(m.configs) > CONFIGS_SHOWN else "")
            body.append(f"<details><summary>{len(m.configs)} node configuration(s)</summary><table class=\"kv\"><tr>"
                        "<th>configuration</th><th></th><th>probes</th><th>nodes</th><th>not exercised</th></tr>"
                        f"{trs}</table>{more}</details>")
        if m.uncovered:
            trs = "".join(f"<tr><td>{h(u.operator)}</td><td>{h(u.item)}</td><td>{h(', '.join(u.nodes))}"
                          f" ({u.count})</td></tr>" for u in m.uncovered)
            body.append("<details><summary>uncovered configurations</summary><table class=\"kv\"><tr>"
                        f"<th>operator</th><th>not exercised</th><th>nodes</th></tr>{trs}</table></details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>epaudit scan: exit {result.exit_code}</title><style>{CSS}{_EXTRA}</style></head><body>"
            + "".join(body) + "</body></html>\n")
