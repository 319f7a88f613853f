"""Which catalog features a node uses, and what of its configuration no feature covers.

A node uses a feature when op type, domain and dtype are the feature's, the feature
probes the *operator version in force* at the node (``since_version`` of the definition
the node's opset resolves to, ``onnx.defs.get_schema(op, max_inclusive_version=opset,
domain)``, equals the one in force at the feature's own opset stamp: a ``Conv`` of an
opset-17 model is ``Conv-11`` and uses the stamps at opsets 11..21, never the
``opset22`` ones), and every condition of the feature's
:class:`~epaudit.contract.probes.Use` holds (inputs fed, inputs left out, attributes at a
value or not at their default, facts). An attribute the node does not set takes its
schema default; one without a default is *absent* and matches no value. Facts are read
from the node's input shapes and types; a fact the node does not have (an unknown shape),
or a fact name this module does not know, never matches.

A node's configuration is *uncovered* where no feature it uses exercises it: an
optional input it feeds, an attribute it sets to a non-default value, its dtype, its
operator version ("no probe at <op>-<version> (probes at ...)"), or its head size, that
no probe of the operator turns on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from ..contract.probes import BASE_HEAD_SIZE, NON_DEFAULT, Feature
from .model import Node
from .schemas import NO_DEFAULT, schema

#: Fact names this reader computes (see :func:`facts`).
KNOWN_FACTS = frozenset({"head_size", "q_rank", "grouped", "attn_mask_dtype", "attn_mask_rank", "qk_output",
                         "opset", "attention_bias_batch", "attention_bias_heads", "num_heads", "kv_num_heads",
                         "outputs"})


def _int(x) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else None


def _last(shape) -> int | None:
    return _int(shape[-1]) if shape else None


def _heads(node: Node) -> tuple[int | None, int | None]:
    """(query heads, key/value heads) of an attention node, where known."""
    a = node.attributes
    if node.op_type == "GroupQueryAttention":
        return _int(a.get("num_heads")), _int(a.get("kv_num_heads"))
    q, k = node.shapes.get("Q"), node.shapes.get("K")
    if q is not None and len(q) == 4:
        return _int(q[1]), (_int(k[1]) if k is not None and len(k) == 4 else None)
    return _int(a.get("q_num_heads")), _int(a.get("kv_num_heads"))


def head_size(node: Node) -> int | None:
    """H of a GroupQueryAttention or ONNX Attention node, from its input shapes.

    GQA: ``past_key`` (B, Nkv, P, H), else ``query`` (B, S, N·H) / N, or packed
    (B, S, (N + 2·Nkv)·H) / (N + 2·Nkv), else ``key`` / Nkv (ContribOperators.md).
    Attention: the last dim of 4-D ``Q``, else 3-D ``Q`` / ``q_num_heads``
    (onnx ``docs/Operators.md#Attention``). ``None`` where the shapes do not say.
    """
    n, nkv = _heads(node)
    s = node.shapes
    if node.op_type == "GroupQueryAttention":
        if (h := _last(s.get("past_key"))) is not None:
            return h
        q = _last(s.get("query"))
        if q is not None and n:
            packed = "key" not in node.inputs
            div = n + 2 * (nkv or 0) if packed else n
            return q // div if div and q % div == 0 else None
        k = _last(s.get("key"))
        return k // nkv if k is not None and nkv and k % nkv == 0 else None
    if node.op_type == "Attention" and node.domain == "":
        q = s.get("Q")
        if q is None:
            return _last(s.get("past_key"))
        if len(q) == 4:
            return _int(q[-1])
        return q[-1] // n if _int(q[-1]) and n and q[-1] % n == 0 else None
    return None


def facts(node: Node) -> dict[str, object]:
    """The facts of a node that :class:`~epaudit.contract.probes.Use.facts` can name; unknown ones
    are left out (and then never match)."""
    out: dict[str, object] = {}
    if node.opset is not None:
        out["opset"] = node.opset
    h = head_size(node)
    if h is not None:
        out["head_size"] = h
    n, nkv = _heads(node)
    if n is not None:
        out["num_heads"] = n
    if nkv is not None:
        out["kv_num_heads"] = nkv
    if n is not None and nkv is not None:
        out["grouped"] = n != nkv
    if "Q" in node.shapes:
        out["q_rank"] = len(node.shapes["Q"])
    if "attn_mask" in node.inputs:
        t = node.input_types.get("attn_mask")
        if t is not None:
            out["attn_mask_dtype"] = "bool" if t == "bool" else "float"
        if "attn_mask" in node.shapes:
            out["attn_mask_rank"] = len(node.shapes["attn_mask"])
    if node.op_type == "Attention" and node.domain == "":
        out["qk_output"] = len(node.outputs) > 3 and bool(node.outputs[3])
    if node.schema is not None and node.schema.outputs:
        # The outputs the node asks for, by formal name, in order ("" marks one left out).
        out["outputs"] = tuple(name for name, value in zip(node.schema.outputs, node.outputs) if value)
    bias = node.shapes.get("attention_bias")
    if bias is not None and len(bias) == 4:
        for key, dim in (("attention_bias_batch", bias[0]), ("attention_bias_heads", bias[1])):
            if dim is not None:
                out[key] = dim
    return out


#: :func:`attribute`'s value of an attribute the node does not set and whose schema gives
#: no default: it equals no value a feature names.
ABSENT = object()


def attribute(node: Node, name: str) -> object:
    """The node's value of attribute ``name``: as set, else the schema default, else
    :data:`ABSENT` (an optional attribute without a default is absent, not 0)."""
    if name in node.attributes:
        return node.attributes[name]
    if node.schema is not None:
        default = node.schema.defaults.get(name)
        if default is not None and default is not NO_DEFAULT:
            return default
    return ABSENT


@lru_cache(maxsize=None)
def since(op_type: str, domain: str, opset: int) -> int | None:
    """The operator version in force at ``opset`` (``since_version``), ``None`` when unknown."""
    s = schema(op_type, domain, opset)
    return s.since_version if s is not None else None


def _non_default(node: Node, name: str) -> bool:
    if name not in node.attributes:
        return False
    value = node.attributes[name]
    return not (node.schema.is_default(name, value) if node.schema is not None else value in (0, 0.0, ""))


def _equal(have: object, want: object) -> bool:
    if have is ABSENT:
        return False
    if isinstance(want, tuple) and isinstance(have, list):
        return tuple(have) == want
    return have == want


def _same_op(f: Feature, node: Node) -> bool:
    return f.op_type == node.op_type and (f.domain or "") in (node.domain, "ai.onnx" if not node.domain else node.domain)


def uses(f: Feature, node: Node, node_facts: Mapping[str, object] | None = None) -> bool:
    """Whether ``node`` uses feature ``f`` (module doc)."""
    if not _same_op(f, node) or f.dtype != node.dtype:
        return False
    if node.since is not None and since(f.op_type, f.domain, f.opset) not in (node.since, None):
        return False
    u = f.uses
    if any(i not in node.inputs for i in u.inputs) or any(i in node.inputs for i in u.absent):
        return False
    for name, want in u.attributes.items():
        if want == NON_DEFAULT:
            if not _non_default(node, name):
                return False
        elif not _equal(attribute(node, name), want):
            return False
    have = facts(node) if node_facts is None else node_facts
    return all(k in KNOWN_FACTS and k in have and have[k] == v for k, v in u.facts.items())


def _multi_row(f: Feature) -> bool:
    """A feature whose probe needs a batch of rows with different lengths (``ragged``)."""
    return any("ragged" in part for part in f.id.split("."))


def _batch(node: Node) -> int | None:
    """The node's batch size where its first input's shape fixes it (``--dim``, ``--inputs``)."""
    first = next(iter(node.shapes.values()), None)
    return first[0] if first and isinstance(first[0], int) and first[0] > 0 else None


@dataclass(frozen=True)
class NodeMatch:
    """One node's features and uncovered configuration.

    Attributes:
        node: the node.
        features: ids of the features it uses, catalog order.
        uncovered: what of its configuration no feature covers, one phrase each
            (``attribute softcap=50.0``, ``dtype bfloat16``, ``head_size 80``).
        probed: its operator has at least one feature in the catalog.
    """

    node: Node
    features: tuple[str, ...]
    uncovered: tuple[str, ...]
    probed: bool


def _uncovered(node: Node, used: Sequence[Feature], family: Sequence[Feature], node_facts) -> list[str]:
    out = []
    if family and node.dtype is not None and not any(f.dtype == node.dtype for f in family):
        out.append(f"dtype {node.dtype}")
    if node.schema is not None:
        versions = {v for f in family if f.dtype == node.dtype
                    and (v := since(f.op_type, f.domain, f.opset)) is not None}
        if versions and node.schema.since_version not in versions:
            out.append(f"no probe at {node.op_type}-{node.schema.since_version} (probes at "
                       f"{', '.join(f'{node.op_type}-{v}' for v in sorted(versions))})")
        # An input a feature of the operator leaves out (packed QKV: key, value absent) is
        # fed by every other probe of the operator: its presence is exercised.
        fed_by_all = {i for f in family for i in f.uses.absent}
        for name in node.inputs:
            if name in node.schema.optional and name not in fed_by_all \
                    and not any(name in f.uses.inputs for f in used):
                out.append(f"input {name}")
        for name, value in node.attributes.items():
            if name in node.schema.required or not _non_default(node, name):
                continue
            if not any(name in f.uses.attributes and f.uses.attributes[name] in (NON_DEFAULT, value)
                       for f in used):
                out.append(f"attribute {name}={short(value)}")
    sizes = {f.uses.facts["head_size"] for f in family if "head_size" in f.uses.facts}
    h = node_facts.get("head_size")
    # Features without a head_size fact probe the catalog's default H (BASE_HEAD_SIZE).
    if sizes and h is not None and h != BASE_HEAD_SIZE \
            and not any(f.uses.facts.get("head_size") == h for f in used):
        out.append(f"head_size {h}")
    elif sizes and h is None:
        out.append("head_size unknown (input shapes not in the model)")
    return out


def short(value: object) -> str:
    """A value in a few characters (attributes are float32: ``1e-06``, not
    ``9.999999974752427e-07``); lists of more than 8 items and texts over 40 are cut."""
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(short(v) for v in value[:8]) + f", … ({len(value)} values)]"
    if isinstance(value, float):
        text = f"{value:.7g}"  # attributes are float32: 1e-06, not 9.999999974752427e-07
    elif isinstance(value, list):
        text = "[" + ", ".join(f"{v:.7g}" if isinstance(v, float) else str(v) for v in value) + "]"
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def match(nodes: Iterable[Node], features: Sequence[Feature]) -> list[NodeMatch]:
    """Every node with the features it uses and its uncovered configuration."""
    by_op: dict[tuple[str, str], list[Feature]] = {}
    for f in features:
        by_op.setdefault((f.op_type, "" if f.domain == "ai.onnx" else f.domain), []).append(f)
    out = []
    # Layers repeat: nodes alike in everything matching reads share one answer.
    memo: dict[tuple, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for node in nodes:
        family = by_op.get((node.op_type, node.domain), [])
        key = (node.op_type, node.domain, node.opset, node.dtype, tuple(node.inputs), repr(node.attributes),
               repr(node.shapes), repr(node.input_types), tuple(bool(o) for o in node.outputs))
        hit = memo.get(key)
        if hit is None:
            nf = facts(node)
            used = [f for f in family if uses(f, node, nf)]
            single = [f for f in used if _multi_row(f) and _batch(node) == 1]
            used = [f for f in used if f not in single]
            items = _uncovered(node, used, family, nf) + [
                f"not used at batch 1: {f.id} (per-row lengths need 2 or more rows; --dim or --inputs bind the "
                "batch)" for f in single]
            hit = memo[key] = (tuple(f.id for f in used), tuple(items))
        out.append(NodeMatch(node, hit[0], hit[1], bool(family)))
    return out
