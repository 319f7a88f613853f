"""Node-config probes of ``com.microsoft.GroupQueryAttention`` (see :mod:`.nodeprobe`).

A configuration is read from the node (heads, head size, dtype, attributes, optional
inputs, the rotary cache's width) and rebuilt at small sizes with the catalog's helpers
(:mod:`epaudit.catalog.gqa`) and reference (:func:`epaudit.reference.gqa.gqa_reference`);
the GQA input and attribute rules are ORT ``docs/ContribOperators.md``
(``com.microsoft.GroupQueryAttention``) as the catalog cites them.
"""

from __future__ import annotations

import math

import numpy as np

from ..catalog.gqa_graph import _INPUT_ORDER as _GQA_INPUTS
from ..catalog.gqa_graph import _INT_INPUTS as _GQA_INT
from ..catalog.gqa_graph import _rope_cache, _rounded
from ..catalog.models import NUMPY_TYPES, one_node_model, with_constants
from ..contract.probes import Case
from ..reference.gqa import gqa_reference
from .match import facts, head_size
from .model import Node

#: Float dtypes a probe can be built in.
DTYPES = ("float16", "float32", "bfloat16", "float64")
#: Longest KV cache a node-config probe builds (a window must fit inside it).
MAX_PAST = 256


def num(x: object) -> str:
    """A number as the configuration's words write it (``50``, ``0.3``)."""
    return f"{x:g}" if isinstance(x, float) else str(x)


def config(node: Node) -> dict | None:
    f = facts(node)
    n, nkv, h = f.get("num_heads"), f.get("kv_num_heads"), head_size(node)
    if not (n and nkv and h) or node.dtype not in DTYPES:
        return None
    a = node.attributes
    cfg = {"N": n, "Nkv": nkv, "H": h, "dtype": node.dtype,
           "packed": "key" not in node.inputs, "past": "past_key" in node.inputs,
           "bias": None, "sink": "head_sink" in node.inputs, "position_ids": "position_ids" in node.inputs,
           "rotary": int(a.get("do_rotary", 0)) == 1, "interleaved": int(a.get("rotary_interleaved", 0)),
           "softcap": float(a.get("softcap", 0.0)), "window": int(a.get("local_window_size", -1)),
           "smooth": int(a.get("smooth_softmax", -1)), "scale": float(a.get("scale", 0.0))}
    if "attention_bias" in node.inputs:
        shape = node.shapes.get("attention_bias") or (None, None)
        cfg["bias"] = (1 if shape[0] == 1 else 0, 1 if len(shape) > 1 and shape[1] == 1 else 0)
    if cfg["rotary"]:
        cos = node.shapes.get("cos_cache")
        cfg["rotary_dim"] = 2 * cos[1] if cos and isinstance(cos[1], int) and cos[1] > 0 else h
    return cfg


def words(cfg: dict) -> str:
    parts = [f"GroupQueryAttention {cfg['dtype']} N={cfg['N']} Nkv={cfg['Nkv']} H={cfg['H']}"]
    for k in ("packed", "past", "sink", "position_ids"):
        if cfg[k]:
            parts.append(k)
    if cfg["bias"] is not None:
        parts.append("attention_bias" + ("(1,..)" if cfg["bias"][0] else "") + ("(.,1,..)" if cfg["bias"][1] else ""))
    if cfg["rotary"]:
        parts.append(f"rotary(dim {cfg['rotary_dim']}{', interleaved' if cfg['interleaved'] else ''})")
    for k, off in (("softcap", 0.0), ("window", -1), ("smooth", -1), ("scale", 0.0)):
        if cfg[k] != off and not (k == "smooth" and cfg[k] == 0):
            parts.append(f"{k}={num(cfg[k])}")
    return " ".join(parts)


def graph(cfg: dict, rng: np.random.Generator, q_std: float, drop: str | None,
               part: str = "") -> tuple[dict, dict, dict]:
    """(attributes, feeds, constants) of the subject (``drop=None``) or of a control, for
    the probe of ``part``."""
    dtype, n, nkv, h = cfg["dtype"], cfg["N"], cfg["Nkv"], cfg["H"]
    b = 2
    past = min(MAX_PAST, max(7, cfg["window"] + 3)) if cfg["past"] else 0
    s = 1 if past else 6
    total = past + s
    # Scores Q·Kᵀ·scale have std q_std·scale·√H with N(0, 1) keys: size Q for the wanted std.
    unit = (cfg["scale"] or 1.0 / math.sqrt(h)) * math.sqrt(h)
    q = _rounded((q_std / unit) * rng.standard_normal((b, s, n * h)), dtype)
    k = _rounded(rng.standard_normal((b, s, nkv * h)), dtype)
    v = _rounded(rng.standard_normal((b, s, nkv * h)), dtype)
    if part == "smooth":
        # smooth_softmax adds exp(0) to the denominator: visible when every score is well
        # below 0. Keys share a +1 offset and the query points the other way, so scores
        # sit near -sqrt(H)/2 (rotary, if on, turns them and may hide it: then not built).
        q = _rounded(q - 0.5, dtype)
        k = _rounded(k + 1.0, dtype)
    feeds: dict[str, np.ndarray] = {}
    if cfg["packed"]:
        feeds["query"] = np.concatenate([q, k, v], axis=-1)
    else:
        feeds.update(query=q, key=k, value=v)
    if past:
        feeds["past_key"] = _rounded(rng.standard_normal((b, nkv, past, h)) + (1.0 if part == "smooth" else 0.0),
                                     dtype)
        feeds["past_value"] = _rounded(rng.standard_normal((b, nkv, past, h)), dtype)
    feeds["seqlens_k"] = np.full(b, total - 1, dtype=np.int32)
    feeds["total_sequence_length"] = np.array(total, dtype=np.int32)
    attrs: dict[str, object] = {}
    if cfg["rotary"]:
        cos, sin = _rope_cache(total + 8, cfg["rotary_dim"])
        feeds.update(cos_cache=_rounded(cos, dtype), sin_cache=_rounded(sin, dtype))
        attrs["do_rotary"] = 1
        if cfg["interleaved"]:
            attrs["rotary_interleaved"] = 1
        if cfg["position_ids"]:
            # Positions other than the ones derived from seqlens_k (total - 1 in decode).
            start = np.array([[2], [5]]) if s == 1 else np.array([[3], [3]])
            feeds["position_ids"] = (start + np.arange(s)[None, :]).astype(np.int64)
    if cfg["bias"] is not None:
        shape = (1 if cfg["bias"][0] else b, 1 if cfg["bias"][1] else n, s, total)
        feeds["attention_bias"] = _rounded(2.0 * rng.standard_normal(shape), dtype)
    if cfg["sink"]:
        feeds["head_sink"] = _rounded(np.resize([2.0, -2.0], n), dtype)
    for name, off in (("softcap", 0.0), ("scale", 0.0)):
        if cfg[name] != off:
            attrs[name] = cfg[name]
    if cfg["window"] != -1:
        attrs["local_window_size"] = cfg["window"]
    if cfg["smooth"] in (0, 1):
        attrs["smooth_softmax"] = cfg["smooth"]
    constants: dict[str, np.ndarray] = {}
    if drop == "config":
        zero = np.zeros_like(feeds["query"])
        if cfg["packed"]:
            zero[..., n * h:] = feeds["query"][..., n * h:]
        constants["query"] = zero
        del feeds["query"]
    elif drop == "past":
        constants = {"past_key": np.zeros_like(feeds.pop("past_key")),
                     "past_value": np.zeros_like(feeds.pop("past_value"))}
    elif drop == "rotary":
        for name in ("cos_cache", "sin_cache", "position_ids"):
            feeds.pop(name, None)
        attrs.pop("do_rotary", None)
        attrs.pop("rotary_interleaved", None)
    elif drop in ("attention_bias", "head_sink", "position_ids"):
        del feeds[drop]
    elif drop is not None:
        attrs.pop({"window": "local_window_size", "smooth": "smooth_softmax"}.get(drop, drop), None)
    return attrs, feeds, constants


def case(cfg: dict, attrs: dict, feeds: dict, constants: dict) -> Case:
    dtype, n, nkv = cfg["dtype"], cfg["N"], cfg["Nkv"]
    values = {**feeds, **constants}
    last = max(_GQA_INPUTS.index(k) for k in values)
    inputs, node_inputs = [], []
    for name in _GQA_INPUTS[:last + 1]:
        if name not in values:
            node_inputs.append("")
            continue
        arr = values[name]
        inputs.append((name, _GQA_INT.get(name, dtype), None if arr.ndim == 0 else arr.shape))
        node_inputs.append(name)
    outputs = ("output", "present_key", "present_value")
    model = one_node_model("GroupQueryAttention", "com.microsoft", 1, inputs, [(o, dtype) for o in outputs],
                           {"num_heads": n, "kv_num_heads": nkv, **attrs}, node_inputs)
    model = with_constants(model, constants)
    graph_type = NUMPY_TYPES[dtype]
    run_feeds = {k: (v if k in _GQA_INT else v.astype(graph_type)) for k, v in feeds.items()}
    kwargs = {k: v for k, v in values.items() if k not in ("query", "key", "value")}
    kwargs["total_sequence_length"] = int(kwargs["total_sequence_length"])
    ref = gqa_reference(values["query"], values.get("key"), values.get("value"), num_heads=n,
                        kv_num_heads=nkv, **kwargs, **attrs)
    exact = frozenset({"present_value"} | (set() if attrs.get("do_rotary") else {"present_key"}))
    return Case(model=model, feeds=run_feeds, outputs=outputs, reference={o: ref[o] for o in outputs}, exact=exact)


def parts(cfg: dict) -> list[tuple[str, float]]:
    """(part, score std) of every probe of a configuration; the std makes each decisive."""
    parts = [("config", 1.0)]
    if cfg["past"]:
        parts.append(("past", 1.0))
    if cfg["bias"] is not None:
        parts.append(("attention_bias", 1.0))
    if cfg["softcap"] > 0:
        parts.append(("softcap", cfg["softcap"]))
    if cfg["window"] > 0:
        parts.append(("window", 1.0))
    if cfg["smooth"] == 1:
        parts.append(("smooth", 0.5))
    if cfg["sink"]:
        parts.append(("head_sink", 1.0))
    if cfg["rotary"]:
        parts.append(("rotary", 1.0))
        if cfg["position_ids"]:
            parts.append(("position_ids", 1.0))
    if cfg["scale"] > 0:
        parts.append(("scale", 1.0))
    return parts
