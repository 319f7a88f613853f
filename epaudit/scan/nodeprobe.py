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

Models are one node named ``probe`` (:func:`epaudit.catalog.models.one_node_model`), inputs are
seeded and rounded to the dtype before the float64 reference
(:func:`epaudit.reference.gqa.gqa_reference`,
:func:`epaudit.reference.attention.attention_reference`) sees them, as in the catalog.
A knock-out whose subject and control are closer than ``MIN_SEPARATION`` tolerance bounds
at small sizes (a window wider than the probe's keys, a scale equal to the default) is
not built; the reason is kept and reported as not exercised.

The operator-specific parts (reading a configuration, building its graphs) live in
:mod:`.nodeprobe_gqa` and :mod:`.nodeprobe_attention`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..classify.compare import separation
from ..contract.probes import MIN_SEPARATION, Case, Feature, Probe, tolerance_for
from . import nodeprobe_attention as attention
from . import nodeprobe_gqa as gqa
from .model import Node


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
            cfg, kind = gqa.config(node), "gqa"
        elif node.op_type == "Attention" and node.domain == "":
            cfg, kind = attention.config(node), "attention"
        else:
            continue
        if cfg is None:
            unreadable.append(NodeProbes(f"{node.operator} {node.name}", (node.name,),
                                         skipped=("heads, head size or dtype not readable from the model",)))
            continue
        words = gqa.words(cfg) if kind == "gqa" else attention.words(cfg)
        groups.setdefault(words, (kind, cfg, []))[2].append(node.name)
    out = []
    for words, (kind, cfg, names) in groups.items():
        tag = hashlib.sha256(words.encode()).hexdigest()[:8]
        features, parts, skipped = [], {}, []
        for part, q_std in (gqa.parts(cfg) if kind == "gqa" else attention.parts(cfg)):
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
        subject = gqa.case(cfg, *gqa.graph(cfg, np.random.default_rng(seed), q_std, None, part))
        control = gqa.case(cfg, *gqa.graph(cfg, np.random.default_rng(seed), q_std, part, part))
    else:
        subject = attention.case(cfg, np.random.default_rng(seed), q_std, None)
        control = attention.case(cfg, np.random.default_rng(seed), q_std, part)
    return _probe(fid, subject, control, cfg["dtype"], cfg["H"])
