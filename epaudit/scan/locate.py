"""The first node whose output diverges between an EP and its reference (``scan --whole``).

See :mod:`.whole` for the method: the reference's own optimised path checked first (the
CPU EP at ``ORT_DISABLE_ALL``), top-level ``If`` nodes inlined on the branch the reference
takes, every intermediate tensor exposed and compared in node order, and when exposing
hides the difference (a fusion the exposed outputs block), a bisection that cuts the
graph at one tensor at a time. The node found is described with its configuration, the
node-config probe's outcome there, and (``--repro DIR``) written as a one-node
reproduction with its real inputs (:func:`epaudit.repro.write`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .model import Model
from .wholerun import CLASSES, MAX_SEARCH_BYTES, compare, run_child, write_feeds

#: Inlining passes over nested If nodes.
MAX_INLINE_DEPTH = 3


def _save(proto, work: str, name: str) -> str:
    import onnx

    path = os.path.join(work, name)
    onnx.save(proto, path)
    return path


def _copy(proto):
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    return m


def _inline_ifs(proto, reference, feeds_path: str, work: str, timeout: float) -> tuple[object, list[str], dict]:
    """``(proto with top-level Ifs replaced by the branch the reference takes, notes,
    node name -> the If branch it came from)``."""
    from onnx import helper

    notes, origin = [], {}
    for depth in range(MAX_INLINE_DEPTH):
        ifs = [n for n in proto.graph.node if n.op_type == "If" and n.domain in ("", "ai.onnx")]
        if not ifs:
            break
        probe = _copy(proto)
        have = {o.name for o in probe.graph.output}
        for n in ifs:
            if n.input[0] not in have:
                probe.graph.output.add().name = n.input[0]
        result, got = run_child(reference, _save(probe, work, f"ifs{depth}.onnx"), feeds_path, work, timeout=timeout)
        if not result.get("ok"):
            notes.append(f"If branches not inlined: the reference cannot run the probe ({result.get('error', '')[:120]})")
            break
        taken = {n.input[0]: bool(np.asarray(got[n.input[0]]).reshape(-1)[0]) for n in ifs if n.input[0] in got}
        existing = ({i.name for i in proto.graph.initializer} | {o for n in proto.graph.node for o in n.output}
                    | {i.name for i in proto.graph.input})
        nodes = []
        for n in proto.graph.node:
            if n not in ifs or n.input[0] not in taken:
                nodes.append(n)
                continue
            branch_name = "then_branch" if taken[n.input[0]] else "else_branch"
            branch = next(a.g for a in n.attribute if a.name == branch_name)
            clash = ({o for b in branch.node for o in b.output} | {i.name for i in branch.initializer}) & existing
            if clash:
                notes.append(f"If {n.name!r} not inlined: names clash")
                nodes.append(n)
                continue
            proto.graph.initializer.extend(branch.initializer)
            for b in branch.node:
                if not b.name:
                    b.name = f"{n.name}/{branch_name}/{b.op_type}_{len(nodes)}"
                origin[b.name] = f"{n.name}.{branch_name}"
                nodes.append(b)
            for bo, io in zip(branch.output, n.output):
                nodes.append(helper.make_node("Identity", [bo.name], [io], name=f"{n.name}/{branch_name}/out:{io}"))
        del proto.graph.node[:]
        proto.graph.node.extend(nodes)
    return proto, notes, origin


def _compare_tensor(a, b, cls: str) -> dict:
    return compare(np.asarray(a), np.asarray(b), cls)


def _exposed(proto, target, reference, feeds_path, work, cls, timeout):
    """``(first (index, tensor, comparison) or None, final outputs differ in the exposed copy,
    EP arrays, reference arrays, EP placement, error)``."""
    m = _copy(proto)
    have = {o.name for o in m.graph.output}
    order = [(i, o) for i, n in enumerate(m.graph.node) for o in n.output if o]
    for _, o in order:
        if o not in have:
            m.graph.output.add().name = o
            have.add(o)
    path = _save(m, work, "exposed.onnx")
    er, ea = run_child(target, path, feeds_path, work, profile=True, timeout=timeout)
    rr, ra = run_child(reference, path, feeds_path, work, timeout=timeout)
    if not er.get("ok") or not rr.get("ok"):
        return None, False, {}, {}, {}, (er.get("error") or rr.get("error") or "")[:200]
    finals = [o.name for o in proto.graph.output]
    final_bad = any(not _compare_tensor(ea[n], ra[n], cls)["match"] for n in finals if n in ea and n in ra)
    for index, name in order:
        if name in ea and name in ra:
            c = _compare_tensor(ea[name], ra[name], cls)
            if not c["match"]:
                return (index, name, c), final_bad, ea, ra, er.get("placement", {}), ""
    return None, final_bad, ea, ra, er.get("placement", {}), ""


def _bisect(proto, target, reference, feeds_path, work, cls, timeout, notes):
    """Cut the graph at one tensor at a time (every fusion upstream of it kept)."""
    cache = {}

    def probe(name):
        if name not in cache:
            m = _copy(proto)
            del m.graph.output[:]
            m.graph.output.add().name = name
            path = _save(m, work, "cut.onnx")
            er, ea = run_child(target, path, feeds_path, work, profile=True, timeout=timeout)
            rr, ra = run_child(reference, path, feeds_path, work, timeout=timeout)
            if not er.get("ok") or not rr.get("ok"):
                cache[name] = (None, {})
            else:
                cache[name] = (_compare_tensor(ea[name], ra[name], cls), er.get("placement", {}))
        return cache[name]

    producers = {o: i for i, n in enumerate(proto.graph.node) for o in n.output if o}
    target_out = next((o.name for o in proto.graph.output if (c := probe(o.name)[0]) is not None and not c["match"]),
                      None)
    if target_out is None:
        notes.append("no output diverges when the graph is cut at it")
        return None
    ancestors, stack = set(), [target_out]
    while stack:
        t = stack.pop()
        if t in producers and producers[t] not in ancestors:
            ancestors.add(producers[t])
            stack.extend(i for i in proto.graph.node[producers[t]].input if i)
    chain = [(i, o) for i, n in enumerate(proto.graph.node) if i in ancestors and n.op_type != "Constant"
             for o in n.output[:1] if o]
    lo, hi = -1, len(chain) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c, _ = probe(chain[mid][1])
        if c is not None and c["match"]:
            lo = mid
        else:
            hi = mid
    index, name = chain[hi]
    c, placement = probe(name)
    notes.append(f"found by cutting the graph at one tensor at a time ({len(cache)} cuts): exposing every tensor "
                 "hid the difference (it blocks the fusions)")
    return index, name, c or {}, placement


def _describe(model: Model, node, origin: dict, placement: dict, ep: str, node_outcomes) -> dict:
    from . import nodeconfig
    from .safe import esc

    ran = placement.get(node.name) or next((v for k, v in placement.items() if node.name and node.name in k), "")
    if ran and node.name not in placement:
        ran += " (as a layout-transformed or renamed node)"
    info = {"node": node.name, "op": f"{node.domain or 'ai.onnx'}.{node.op_type}", "ran_on": ran,
            "inside": origin.get(node.name, "")}
    match = next((n for n in model.nodes if n.name == node.name), None)
    if match is not None:
        try:
            info["config"] = nodeconfig.configure(match, {}, model.opsets).words()
        except nodeconfig.Unprobed as exc:
            info["config"] = f"(not probed in its own configuration: {exc})"
        if node_outcomes is not None:
            got = node_outcomes(match.name, ep)
            if got is not None:
                info["probe"] = got
    info["node"] = esc(info["node"])
    return info


def _repro(proto, node, ea: dict, ra: dict, feeds: dict, target, cls: str, directory: str, info: dict,
           work: str, timeout: float) -> tuple[str, str]:
    """Write the first wrong node as a one-node reproduction; ``(directory, note)``."""
    import onnx
    from onnx import helper

    from .. import repro as repro_writer
    from . import noderef

    inits = {i.name: i for i in proto.graph.initializer}
    values, graph_inputs, initializers = {}, [], []
    for name in node.input:
        if not name:
            continue
        if name in inits:
            initializers.append(inits[name])
            continue
        v = ra.get(name, feeds.get(name))
        if v is None:
            return "", "no reproduction: an input of the node is not known from the reference run"
        values[name] = np.asarray(v)
        graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(values[name].dtype),
                                                          list(values[name].shape)))
    outs = [o for o in node.output if o]
    one = onnx.NodeProto()
    one.CopyFrom(node)
    graph = helper.make_graph([one], "epaudit.repro", graph_inputs, [helper.make_value_info(o, onnx.TypeProto())
                                                                      for o in outs], initializers)
    m = helper.make_model(graph, opset_imports=list(proto.opset_import), producer_name="epaudit-scan")
    m.ir_version = proto.ir_version
    reference = {}
    try:
        got, _ = noderef.evaluate(m, values)
        reference = {o: got[o] for o in outs if o in got}
    except noderef.NoReference:
        pass
    if not reference:
        reference = {o: np.asarray(ra[o], np.float64) if np.asarray(ra[o]).dtype.kind == "f" else ra[o]
                     for o in outs if o in ra}
    frac, floor, rtol = CLASSES[cls]
    scale = max((float(np.abs(np.asarray(r, np.float64)).max()) for r in reference.values() if np.size(r)), default=0.0)
    atol = max(frac * scale, floor)
    title = f"{info['op']} {node.name!r} on {target.name}: differs from the reference"
    path = repro_writer.write(repro_writer.Repro(model=m.SerializeToString(), feeds=values, reference=reference,
                                                 provider=target.name, options=dict(target.options), atol=atol,
                                                 rtol=rtol, title=title, details=dict(info)), directory)
    sub = os.path.join(work, "repro")
    os.makedirs(sub, exist_ok=True)
    fp = write_feeds(values, sub)
    r, got = run_child(target, str(Path(path) / "model.onnx"), fp, sub, timeout=timeout)
    if not r.get("ok"):
        return str(path), f"the one-node reproduction fails to run alone: {r.get('error', '')[:160]}"
    rows = [compare(got[o], reference[o], cls) for o in outs if o in got and o in reference]
    alone = "reproduces alone" if any(not c["match"] for c in rows) else \
        "does not reproduce alone (the difference needs the surrounding graph, a fusion or a layout rewrite)"
    return str(path), f"one-node reproduction {alone}"


def locate(model: Model, target, reference, feeds: dict, feeds_path: str, work: str, cls: str, timeout: float,
           rows: list[dict], repro: str | None, node_outcomes) -> dict:
    """Search the first diverging node (module doc); ``{status, first, notes, repro}``."""
    import onnx

    notes: list[str] = []
    out: dict = {"status": "mismatch", "notes": notes}
    ep_res, ep_out = run_child(target, model.path, feeds_path, work, timeout=timeout)
    noopt_res, noopt_out = run_child(reference, model.path, feeds_path, work, opt="disable", timeout=timeout)
    if ep_res.get("ok") and noopt_res.get("ok"):
        agree = all(compare(ep_out[n], noopt_out[n], cls)["match"] for n in noopt_out if n in ep_out)
        if agree:
            out["status"] = "reference differs"
            notes.append(f"{target.alias} agrees with the CPU EP at ORT_DISABLE_ALL: the difference is the CPU EP's "
                         "own optimised path (a fusion), not the EP")
    try:
        size = Path(model.path).stat().st_size + sum((Path(model.path).parent / e).stat().st_size
                                                      for e in model.external)
    except OSError:
        size = MAX_SEARCH_BYTES + 1
    if size > MAX_SEARCH_BYTES:
        notes.append(f"the model is {size / 2**20:.0f} MiB: too large to rewrite for the divergence search")
        return out
    proto = onnx.load(model.path)
    proto, inline_notes, origin = _inline_ifs(proto, reference, feeds_path, work, timeout)
    notes += inline_notes
    first, final_bad, ea, ra, placement, error = _exposed(proto, target, reference, feeds_path, work, cls, timeout)
    method = "every tensor exposed"
    if error:
        notes.append(f"the exposed copy does not run: {error}")
    if first is None and not final_bad:
        got = _bisect(proto, target, reference, feeds_path, work, cls, timeout, notes)
        if got is not None:
            index, name, c, placement = got
            first = (index, name, c)
            method = "graph cut at one tensor at a time"
    if first is None:
        return out
    index, tensor, c = first
    node = proto.graph.node[index]
    info = _describe(model, node, origin, placement, target.alias, node_outcomes)
    info.update(output=tensor, max_abs=c.get("max_abs"), bad=c.get("bad"), size=c.get("size"), method=method)
    if out["status"] == "reference differs":
        cpu_ops = set()
        try:
            r, _ = run_child(reference, model.path, feeds_path, work, profile=True, timeout=timeout)
            cpu_ops = set(r.get("placement", {}))
        except Exception:  # noqa: BLE001
            pass
        fused = sorted(n for n in cpu_ops if n not in {x.name for x in proto.graph.node})[:3]
        if fused:
            notes.append(f"the CPU EP's session runs nodes the model does not hold ({', '.join(fused)}): its fusions")
    out["first"] = info
    if repro and ra:
        path, note = _repro(proto, node, ea, ra, feeds, target, cls, repro, info, work, timeout)
        out["repro"] = path
        notes.append(note)
    return out
