"""Node-config probes of the ONNX ``Attention`` operator (see :mod:`.nodeprobe`).

The configuration (rank of Q, heads, head size, dtype, ``is_causal``, ``scale``,
``softcap``, mask dtype/rank/broadcast dims, past, ``nonpad_kv_seqlen``, requested
``qk_matmul_output``) is rebuilt at small sizes and judged by
:func:`epaudit.reference.attention.attention_reference` (ONNX Attention-23/24,
``docs/Operators.md#Attention``, as the catalog cites it).
"""

from __future__ import annotations

import math

import numpy as np

from ..catalog.gqa_graph import _rounded
from ..catalog.models import NUMPY_TYPES, one_node_model, with_constants
from ..contract.probes import Case
from ..reference.attention import attention_reference
from .match import facts, head_size
from .model import Node
from .nodeprobe_gqa import DTYPES, num


def config(node: Node) -> dict | None:
    f = facts(node)
    h = head_size(node)
    q = node.shapes.get("Q")
    n, nkv = f.get("num_heads"), f.get("kv_num_heads")
    if q is not None and len(q) == 3:
        n, nkv = node.attributes.get("q_num_heads"), node.attributes.get("kv_num_heads")
    if not (h and n) or node.dtype not in DTYPES or q is None:
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


def words(cfg: dict) -> str:
    parts = [f"Attention-{cfg['opset']} {cfg['dtype']} {cfg['rank']}-D N={cfg['N']} Nkv={cfg['Nkv']} H={cfg['H']}"]
    if cfg["causal"]:
        parts.append("is_causal")
    for k in ("past", "nonpad"):
        if cfg[k]:
            parts.append(k)
    if cfg["mask"] is not None:
        parts.append(f"{cfg['mask'][0]} mask (rank {cfg['mask'][1]})")
    if cfg["scale"] is not None:
        parts.append(f"scale={num(cfg['scale'])}")
    if cfg["softcap"]:
        parts.append(f"softcap={num(cfg['softcap'])}")
    if cfg["qk_mode"] is not None:
        parts.append(f"qk_matmul_output_mode={cfg['qk_mode']}")
    return " ".join(parts)


def _as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    return _rounded(x, dtype).astype(NUMPY_TYPES[dtype])


def case(cfg: dict, rng: np.random.Generator, q_std: float, drop: str | None) -> Case:
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


def parts(cfg: dict) -> list[tuple[str, float]]:
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
