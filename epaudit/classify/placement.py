"""Where the node under test ran, and what the EP did to it: from what ORT reports.

The worker reports two lists of ``{ep, op_type, domain, name}``: ``assigned`` (the session's
``get_provider_graph_assignment_info()``, recorded when nodes are assigned to EPs) and, where
that list does not show the node, ``executed`` (the profiler's ``Node`` events of the runs:
what really ran). ORT rewrites graphs after and around assignment, so the node under test
may be absent from one or both. Every rule reads node names, op types, domains and EPs as ORT
reports them (never an op-type list per EP); docs/ort-facts.md "Graph rewrites EPs make"
records what each real EP showed:

* **on the EP as itself**: the node, by name, is on the asked EP.
* **rewritten by the EP** (the replacement ran on the EP; the numbers decide):
  - *layout transformation*: the node is gone and a node ORT generated from its name
    (``<name>_token_<n>``; ``<name>_<n>`` in older releases: ``Graph::GenerateNodeName`` in
    onnxruntime/core/graph/graph.cc) runs on the EP, in the EP's internal domain
    ``com.ms.internal.nhwc`` between inserted ``Transpose`` nodes
    (onnxruntime/core/optimizer/layout_transformation/layout_transformation.cc; measured:
    WebGPU 1.27 lists only the Transposes as assigned and its profile shows ``probe_token_1``;
    QNN 2.7 lists ``probe_token_1`` in ``com.ms.internal.nhwc`` as assigned);
  - *after assignment*: the node was assigned to the EP and the profile shows only nodes of
    that EP, none of them the node: the EP's own graph optimizations replaced it (the CPU
    EP's NCHWc transformer: ``ReorderInput``, ``Y_nchwc``, ``ReorderOutput``;
    onnxruntime/core/optimizer/nchwc_transformer.cc);
  - *a compiled partition*: a profiled node named ``<provider>_…``: ORT names the node of a
    partition an EP compiled after the EP (measured: QNN profiles
    ``QNNExecutionProvider_QNNExecutionProvider_<hash>_1_0``, OpenVINO
    ``OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0``).
* **decomposed** (ONNX function inlining: no kernel is registered for the node, ORT inlines
  its function body): the node is gone and every node in its place is unnamed (a schema
  function body; the profiler calls such a node ``<op_type>_<index>``) or named
  ``_inlfunc_<function>_<node>`` (a model-local function; both measured on onnxruntime-gpu
  1.31.1), all of them primitives.
* **fallback**: the node, or any node that does arithmetic (every op but ORT's own
  ``MemcpyToHost``/``MemcpyFromHost`` copies), ran on another EP.
* **unknown**: a list ORT left empty or partial, or replacements the rules above do not
  name: the evidence cannot tell rewritten from fallen back, the cell says so and never
  passes (docs/outcomes-and-gates.md).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

#: Verdict kinds, in :func:`judge`'s words.
ON_EP, REWRITTEN, DECOMPOSED, FALLBACK, UNKNOWN = "on_ep", "rewritten", "decomposed", "fallback", "unknown"
#: ORT's own copy nodes between EPs: no arithmetic.
_COPIES = frozenset({"MemcpyToHost", "MemcpyFromHost"})
#: Nodes epaudit's probe graphs add around the node under test (dtype casts), by name.
_HELPER = re.compile(r"^cast_")
_INLINED = "_inlfunc_"
#: The Casts ORT's InsertCastTransformer puts around a float16 node no kernel takes
#: (onnxruntime/core/optimizer/insert_cast_transformer.cc), by name prefix.
_CAST_INSERTED = "InsertedPrecisionFreeCast_"


def _derived(name: str, node: str) -> bool:
    """``name`` is one ORT generated from ``node``'s name (``<node>_token_<n>``, ``<node>_<n>``)."""
    return bool(re.fullmatch(re.escape(node) + r"_(token_)?\d+", name or ""))


def _unnamed(n: Mapping[str, Any]) -> bool:
    """A node without a name of its own: none, or the profiler's ``<op_type>_<index>`` (the
    first one ``<op_type>`` alone: WebGPU's float16 AffineGrid body has ``Transpose`` next to
    ``Transpose_31``, measured on onnxruntime-webgpu 1.27.0)."""
    name = n.get("name") or ""
    return not name or bool(re.fullmatch(re.escape(n.get("op_type", "")) + r"(_\d+)?", name))


def _off(nodes: Sequence[Mapping[str, Any]], asked: str) -> list[Mapping[str, Any]]:
    return [n for n in nodes if n.get("ep") != asked and n.get("op_type") not in _COPIES]


def _names(nodes: Sequence[Mapping[str, Any]], limit: int = 4) -> str:
    parts = [f"{n.get('name') or '(unnamed)'} ({n.get('op_type')}"
             + (f", {n['domain']}" if n.get("domain") else "") + f") on {n.get('ep')}" for n in nodes[:limit]]
    return ", ".join(parts) + (f", … {len(nodes) - limit} more" if len(nodes) > limit else "")


def judge(assigned: Sequence[Mapping[str, Any]] | None, executed: Sequence[Mapping[str, Any]] | None,
          asked: str, node: str | None) -> dict[str, Any]:
    """The placement verdict of one session.

    Args:
        assigned: assignment info (``None`` when ORT recorded none).
        executed: the profiled nodes (``None`` when the session was not profiled).
        asked: the provider name the session asked for.
        node: the name of the node under test; ``None`` when the whole graph is (every node
            must then run on ``asked``).

    Returns:
        ``{kind, detail, nodes}``: ``kind`` one of :data:`ON_EP`, :data:`REWRITTEN`,
        :data:`DECOMPOSED`, :data:`FALLBACK`, :data:`UNKNOWN`; ``detail`` one line;
        ``nodes`` the nodes the verdict rests on (replacements, nodes off the EP), JSON-ready.
    """
    seen = list(executed) if executed else list(assigned or ())
    if not seen:
        return {"kind": UNKNOWN, "nodes": [],
                "detail": "ORT reported no node placement (neither assignment info nor a profile listed a node)"}
    off = _off(seen, asked)
    if node is None:
        if off:
            return {"kind": FALLBACK, "nodes": off,
                    "detail": f"{len(off)} of {len(seen)} node(s) placed off {asked}: {_names(off)}"}
        return {"kind": ON_EP, "nodes": [], "detail": f"every node of the graph ran on {asked}"}
    mine = [n for n in seen if n.get("name") == node]
    if mine:
        if mine[0].get("ep") != asked:
            return {"kind": FALLBACK, "nodes": mine,
                    "detail": f"node '{node}' placed on {mine[0].get('ep')}, not on {asked}"}
        if off:
            return {"kind": FALLBACK, "nodes": off, "detail": f"probe graph nodes placed off {asked}: {_names(off)}"}
        return {"kind": ON_EP, "nodes": [], "detail": f"node '{node}' ran on {asked}"}
    derived = [n for n in seen if _derived(n.get("name", ""), node)]
    if not derived and assigned:  # the assignment may know the replacement's domain
        derived = [n for n in assigned if _derived(n.get("name", ""), node)]
    if derived:
        where = derived[0].get("ep")
        if where != asked:
            return {"kind": FALLBACK, "nodes": derived,
                    "detail": f"node '{node}' was replaced by {_names(derived)}, off {asked}"}
        if off:
            return {"kind": FALLBACK, "nodes": off, "detail": f"probe graph nodes placed off {asked}: {_names(off)}"}
        others = [n for n in seen if n not in derived and not _HELPER.match(n.get("name", ""))]
        return {"kind": REWRITTEN, "nodes": derived + others,
                "detail": f"node '{node}' was rewritten by ORT for {asked} (layout transformation): ran as "
                          f"{_names(derived)}" + (f" with {_names(others)}" if others else "")}
    compiled = [n for n in seen if (n.get("name") or "").startswith(asked + "_")]
    if compiled and executed:
        if off:
            return {"kind": FALLBACK, "nodes": off, "detail": f"probe graph nodes placed off {asked}: {_names(off)}"}
        return {"kind": REWRITTEN, "nodes": compiled,
                "detail": f"node '{node}' ran inside a partition {asked} compiled: {_names(compiled)}"}
    assigned_here = [n for n in (assigned or ()) if n.get("name") == node and n.get("ep") == asked]
    if assigned_here and executed:
        if off:
            return {"kind": FALLBACK, "nodes": off, "detail": f"probe graph nodes placed off {asked}: {_names(off)}"}
        return {"kind": REWRITTEN, "nodes": list(executed),
                "detail": f"node '{node}' was assigned to {asked} and rewritten by its graph optimizations: "
                          f"ran as {_names(list(executed))}"}
    # What was assigned names the nodes as the graph has them (a function body's are unnamed);
    # the profiler names an unnamed node ``<op_type>_<index>``.
    # Copies between devices ORT inserts (``Memcpy``, ``Memcpy_token_<n>``) are no part of the body.
    body = [n for n in (assigned or seen) if not _HELPER.match(n.get("name", "")) and n.get("op_type") not in _COPIES]
    if body and all(_unnamed(n) or n["name"].startswith((_INLINED, _CAST_INSERTED)) for n in body):
        if off:
            return {"kind": FALLBACK, "nodes": off,
                    "detail": f"node '{node}' was inlined (its function body) and part of it ran off {asked}: "
                              f"{_names(off)}"}
        ops = sorted({n.get("op_type", "") for n in body})
        eps = sorted({n.get("ep", "") for n in body})
        return {"kind": DECOMPOSED, "nodes": body,
                "detail": f"node '{node}' was inlined into {len(body)} primitive node(s) "
                          f"({', '.join(ops[:6])}{', …' if len(ops) > 6 else ''}) on {', '.join(eps)}"}
    return {"kind": UNKNOWN, "nodes": seen,
            "detail": f"node '{node}' is not among the nodes ORT reported ({_names(seen)}), and no rule names "
                      "what replaced it: cannot tell a rewrite on the EP from a fallback"}
