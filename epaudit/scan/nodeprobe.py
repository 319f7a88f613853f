"""Probes of a model node's *own* configuration: GroupQueryAttention and ONNX Attention.

The catalog probes each feature at fixed shapes (N = 4, Nkv = 2, H = 16). A model's node
has its own heads, head size, dtype, attribute values and optional inputs; the kernel an
EP picks depends on them. For each distinct configuration this module builds:

* ``config`` — the node as the model has it (every attribute and optional input), at
  small sequence lengths (a decode step after a short cache when the node has one, else
  a short causal prompt), against a control with the query baked in as zeros (uniform
  attention: an EP that ignores Q·Kᵀ lands on it);
* one probe per feature the node uses (``attention_bias``, ``softcap``, ``position_ids``,
  the cache, ...): the same subject against a control without that one feature (input
  dropped, attribute reset, cache zeroed), so an EP that drops it at *these* settings
  reads ``IGNORED``.

Models are one node named ``probe`` (:func:`epaudit.models.one_node_model`), inputs are
seeded and rounded to the dtype before the float64 reference
(:func:`epaudit.reference.gqa.gqa_reference`,
:func:`epaudit.reference.attention.attention_reference`) sees them, as in the catalog.
A knock-out whose subject and control are closer than ``MIN_SEPARATION`` tolerance bounds
at small sizes (a window wider than the probe's keys, a scale equal to the default) is
not built; the reason is kept and reported as not exercised.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..catalog.gqa import _INPUT_ORDER as _GQA_INPUTS
from ..catalog.gqa import _INT_INPUTS as _GQA_INT
from ..catalog.gqa import _rope_cache, _rounded
from ..classify import separation
from ..models import NUMPY_TYPES, one_node_model, with_constants
from ..probes import MIN_SEPARATION, Case, Feature, Probe, tolerance_for
from ..reference.attention import attention_reference
from ..reference.gqa import gqa_reference
from .match import facts, head_size
from .model import Node

#: Float dtypes a probe can be built in.
_DTYPES = ("float16", "float32", "bfloat16", "float64")
#: Longest KV cache a node-config probe builds (a window must fit inside it).
MAX_PAST = 256


@dataclass(frozen=True)
class NodeProbes:
    """The node-config probes of one distinct configuration.

    Attributes:
        key: the configuration in words (``GQA float16 N=8 Nkv=2 H=64 softcap=50 ...``).
        nodes: names of the nodes that have it.
        features: the probes as features (ids ``node.<hash>.<part>``), ready for the runner.
        parts: feature id -> what it checks (``config``, ``attention_bias``, ...).
        skipped: what could not be exercised, one phrase each.
    """

    key: str
    nodes: tuple[str, ...]
    features: tuple[Feature, ...] = ()
    parts: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()


def _num(x: object) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# --------------------------------------------------------------------------- GroupQueryAttention


def _gqa_config(node: Node) -> dict | None:
    f = facts(node)
    n, nkv, h = f.get("num_heads"), f.get("kv_num_heads"), head_size(node)
    if not (n and nkv and h) or node.dtype not in _DTYPES:
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


def _gqa_words(cfg: dict) -> str:
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
            parts.append(f"{k}={_num(cfg[k])}")
    return " ".join(parts)


def _gqa_graph(cfg: dict, rng: np.random.Generator, q_std: float, drop: str | None,
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


def _gqa_case(cfg: dict, attrs: dict, feeds: dict, constants: dict) -> Case:
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


def _gqa_parts(cfg: dict) -> list[tuple[str, float]]:
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


# --------------------------------------------------------------------------- ONNX Attention


def _attention_config(node: Node) -> dict | None:
    f = facts(node)
    h = head_size(node)
    q = node.shapes.get("Q")
    n, nkv = f.get("num_heads"), f.get("kv_num_heads")
    if q is not None and len(q) == 3:
        n, nkv = node.attributes.get("q_num_heads"), node.attributes.get("kv_num_heads")
    if not (h and n) or node.dtype not in _DTYPES or q is None:
        return None
    a = node.attributes
    cfg = {"rank": len(q), "N": n, "Nkv": nkv or n, "H": h, "dtype": node.dtype, "opset": node.opset or 23,
           "causal": int(a.get("is_causal", 0)), "scale": a.get("scale"), "softcap": float(a.get("softcap", 0.0)),
           "past": "past_key" in node.inputs, "nonpad": "nonpad_kv_seqlen" in node.inputs,
           "mask": None, "qk_mode": int(a.get("qk_matmul_output_mode", 0)) if f.get("qk_output") else None}
    if "attn_mask" in node.inputs:
        shape = node.shapes.get("attn_mask") or (None, None, None, None)
        ones = tuple(i for i, d in enumerate(shape[:-2]) if d == 1)
        cfg["mask"] = (f.get("attn_mask_dtype", "bool"), len(shape), ones)
    return cfg


def _attention_words(cfg: dict) -> str:
    parts = [f"Attention-{cfg['opset']} {cfg['dtype']} {cfg['rank']}-D N={cfg['N']} Nkv={cfg['Nkv']} H={cfg['H']}"]
    if cfg["causal"]:
        parts.append("is_causal")
    for k in ("past", "nonpad"):
        if cfg[k]:
            parts.append(k)
    if cfg["mask"] is not None:
        parts.append(f"{cfg['mask'][0]} mask (rank {cfg['mask'][1]})")
    if cfg["scale"] is not None:
        parts.append(f"scale={_num(cfg['scale'])}")
    if cfg["softcap"]:
        parts.append(f"softcap={_num(cfg['softcap'])}")
    if cfg["qk_mode"] is not None:
        parts.append(f"qk_matmul_output_mode={cfg['qk_mode']}")
    return " ".join(parts)


def _as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    return _rounded(x, dtype).astype(NUMPY_TYPES[dtype])


def _attention_case(cfg: dict, rng: np.random.Generator, q_std: float, drop: str | None) -> Case:
    dtype, n, nkv, h, b = cfg["dtype"], cfg["N"], cfg["Nkv"], cfg["H"], 2
    past = 4 if cfg["past"] else 0
    sq, skv = (2, 2) if past else (4, 6)
    if cfg["causal"] and not past:
        skv = sq
    total = past + skv
    unit = (cfg["scale"] or 1.0 / math.sqrt(h)) * math.sqrt(h)
    arrays = {"Q": _as_dtype((q_std / unit) * rng.standard_normal((b, n, sq, h)), dtype),
              "K": _as_dtype(rng.standard_normal((b, nkv, skv, h)), dtype),
              "V": _as_dtype(rng.standard_normal((b, nkv, skv, h)), dtype)}
    if past:
        arrays["past_key"] = _as_dtype(rng.standard_normal((b, nkv, past, h)), dtype)
        arrays["past_value"] = _as_dtype(rng.standard_normal((b, nkv, past, h)), dtype)
    if cfg["mask"] is not None:
        kind, rank, ones = cfg["mask"]
        full = (b, n, sq, total)[4 - rank:]
        shape = tuple(1 if i in ones else d for i, d in enumerate(full))
        if kind == "bool":
            mask = rng.random(shape) >= 0.4
            mask[..., -1] = True  # every row attends at least one key
        else:
            mask = (2.0 * rng.standard_normal(shape)).astype(NUMPY_TYPES[dtype] if dtype != "bfloat16" else np.float32)
        arrays["attn_mask"] = mask
    if cfg["nonpad"]:
        arrays["nonpad_kv_seqlen"] = np.array([max(1, total - 3), total], dtype=np.int64)
    attrs: dict[str, object] = {}
    if cfg["causal"]:
        attrs["is_causal"] = 1
    if cfg["scale"] is not None:
        attrs["scale"] = float(cfg["scale"])
    if cfg["softcap"]:
        attrs["softcap"] = cfg["softcap"]
    outputs = ["Y"] + (["present_key", "present_value"] if past else [])
    if cfg["qk_mode"] is not None:
        attrs["qk_matmul_output_mode"] = cfg["qk_mode"]
        outputs = ["Y", "present_key", "present_value", "qk_matmul_output"]
    constants: dict[str, np.ndarray] = {}
    if drop == "config":
        constants["Q"] = np.zeros_like(arrays["Q"])
    elif drop in ("attn_mask", "nonpad"):
        arrays.pop("nonpad_kv_seqlen" if drop == "nonpad" else drop)
    elif drop == "past":
        constants = {"past_key": np.zeros_like(arrays["past_key"]), "past_value": np.zeros_like(arrays["past_value"])}
    elif drop is not None:
        attrs.pop({"causal": "is_causal"}.get(drop, drop), None)
    if cfg["rank"] == 3:
        arrays = {k: (v.transpose(0, 2, 1, 3).reshape(b, v.shape[2], -1) if k in ("Q", "K", "V") else v)
                  for k, v in arrays.items()}
        constants = {k: (v.transpose(0, 2, 1, 3).reshape(b, v.shape[2], -1) if k == "Q" else v)
                     for k, v in constants.items()}
        attrs.update(q_num_heads=n, kv_num_heads=nkv)
    return _attention_build(cfg, arrays, attrs, outputs, constants)


_ATT_INPUTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")
_ATT_OUTPUTS = ("Y", "present_key", "present_value", "qk_matmul_output")


def _attention_build(cfg: dict, arrays: dict, attrs: dict, outputs: list, constants: dict) -> Case:
    dtype = cfg["dtype"]
    values = {**arrays, **constants}
    present = [k for k in _ATT_INPUTS if k in values]
    last = max(_ATT_INPUTS.index(k) for k in present)
    node_inputs = [k if k in values else "" for k in _ATT_INPUTS[:last + 1]]

    def in_type(name: str, arr: np.ndarray) -> str:
        return "int64" if name == "nonpad_kv_seqlen" else "bool" if arr.dtype == np.bool_ else dtype
    inputs = [(k, in_type(k, values[k]), values[k].shape) for k in present]
    outs = [(o, dtype) if o in outputs else ("", dtype) for o in _ATT_OUTPUTS]
    model = one_node_model("Attention", "", cfg["opset"], inputs, outs, attrs, node_inputs)
    model = with_constants(model, constants)
    ref_attrs = dict(attrs)
    ref = attention_reference(*(values.get(k) for k in _ATT_INPUTS),
                              is_causal=int(ref_attrs.pop("is_causal", 0)),
                              q_num_heads=ref_attrs.pop("q_num_heads", None),
                              kv_num_heads=ref_attrs.pop("kv_num_heads", None),
                              qk_matmul_output_mode=int(ref_attrs.pop("qk_matmul_output_mode", 0)),
                              scale=ref_attrs.pop("scale", None), softcap=float(ref_attrs.pop("softcap", 0.0)),
                              want_qk="qk_matmul_output" in outputs)
    names = tuple(o for o in _ATT_OUTPUTS if o in outputs)
    return Case(model=model, feeds={k: values[k] for k in present if k not in constants}, outputs=names,
                reference={o: ref[o] for o in names})


def _attention_parts(cfg: dict) -> list[tuple[str, float]]:
    parts = [("config", 2.0)]
    if cfg["causal"]:
        parts.append(("causal", 2.0))
    if cfg["past"]:
        parts.append(("past", 2.0))
    if cfg["mask"] is not None:
        parts.append(("attn_mask", 2.0))
    if cfg["nonpad"]:
        parts.append(("nonpad", 2.0))
    if cfg["scale"] is not None:
        parts.append(("scale", 1.0))
    if cfg["softcap"]:
        parts.append(("softcap", cfg["softcap"]))
    return parts


# --------------------------------------------------------------------------- entry point


def _probe(fid: str, subject: Case, control: Case, dtype: str, h: int) -> Probe:
    return Probe(feature_id=fid, subject=subject, control=control, tolerance=tolerance_for(dtype, h), dtype=dtype)


def plan(nodes: list[Node]) -> list[NodeProbes]:
    """Node-config probes for every GroupQueryAttention and ONNX Attention node, one set
    per distinct configuration (layers that share one are probed once).

    Probes are built here (small, seconds at most), so a knock-out that cannot separate at
    small sizes is known before the run and reported in ``skipped``, never run blind.
    """
    groups: dict[str, tuple[str, dict, list[str]]] = {}
    unreadable: list[NodeProbes] = []
    for node in nodes:
        if node.op_type == "GroupQueryAttention" and node.domain == "com.microsoft":
            cfg, kind = _gqa_config(node), "gqa"
        elif node.op_type == "Attention" and node.domain == "":
            cfg, kind = _attention_config(node), "attention"
        else:
            continue
        if cfg is None:
            unreadable.append(NodeProbes(f"{node.operator} {node.name}", (node.name,),
                                         skipped=("heads, head size or dtype not readable from the model",)))
            continue
        words = _gqa_words(cfg) if kind == "gqa" else _attention_words(cfg)
        groups.setdefault(words, (kind, cfg, []))[2].append(node.name)
    out = []
    for words, (kind, cfg, names) in groups.items():
        tag = hashlib.sha256(words.encode()).hexdigest()[:8]
        features, parts, skipped = [], {}, []
        for part, q_std in (_gqa_parts(cfg) if kind == "gqa" else _attention_parts(cfg)):
            fid = f"node.{tag}.{part}"
            try:
                probe, apart = _decisive(kind, cfg, fid, part, q_std)
            except ValueError as exc:  # the reference refuses the configuration
                skipped.append(f"{part}: {exc}")
                continue
            if apart < MIN_SEPARATION:
                skipped.append(f"{part}: not separable at small sizes ({apart:.3g} tolerance bounds)")
                continue
            op = ("GroupQueryAttention", "com.microsoft", 1) if kind == "gqa" else ("Attention", "", cfg["opset"])
            features.append(Feature(fid, op[0], op[1], op[2], cfg["dtype"],
                                    f"{words}: {part} on vs off", "epaudit scan node-config probe",
                                    _frozen(probe)))
            parts[fid] = part
        out.append(NodeProbes(words, tuple(names), tuple(features), parts, tuple(skipped)))
    return out + unreadable


def _frozen(probe: Probe) -> Callable[[], Probe]:
    return lambda: probe


#: Score std, in units of the cap, tried for a softcap knock-out, smallest first: the
#: uncapped control's softmax grows more sensitive to the kernel's rounding of the scores
#: (float16 keeps ~3 digits of a score of 50) as the scores grow, so the smallest std that
#: still separates capped from uncapped by a margin is the best-conditioned one.
_SOFTCAP_STDS = (0.5, 0.75, 1.0, 1.5)


def _decisive(kind: str, cfg: dict, fid: str, part: str, q_std: float) -> tuple[Probe, float]:
    """The probe of one part and its separation; softcap tries :data:`_SOFTCAP_STDS`."""
    if part != "softcap":
        probe = _build(kind, cfg, fid, part, q_std)
        return probe, separation(probe)
    best: tuple[Probe, float] | None = None
    for k in _SOFTCAP_STDS:
        probe = _build(kind, cfg, fid, part, k * q_std)
        apart = separation(probe)
        if apart >= 2 * MIN_SEPARATION:
            return probe, apart
        if best is None or apart > best[1]:
            best = (probe, apart)
    assert best is not None
    return best


def _build(kind: str, cfg: dict, fid: str, part: str, q_std: float) -> Probe:
    seed = int(hashlib.sha256(fid.encode()).hexdigest()[:8], 16)
    if kind == "gqa":
        subject = _gqa_case(cfg, *_gqa_graph(cfg, np.random.default_rng(seed), q_std, None, part))
        control = _gqa_case(cfg, *_gqa_graph(cfg, np.random.default_rng(seed), q_std, part, part))
    else:
        subject = _attention_case(cfg, np.random.default_rng(seed), q_std, None)
        control = _attention_case(cfg, np.random.default_rng(seed), q_std, part)
    return _probe(fid, subject, control, cfg["dtype"], cfg["H"])
