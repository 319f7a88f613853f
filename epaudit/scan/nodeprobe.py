"""Probes of a model node's *own* configuration, for every operator the model uses.

The catalog probes each feature at fixed shapes (a backend test case's, or N = 4, Nkv = 2,
H = 16 for attention). A model's node has its own shapes, channels, kernel, heads, dtype,
attribute values and optional inputs; the kernel an EP picks depends on them (WebGPU
miscomputes a 1-D ``Conv`` of kernel 3 at 129 input channels and not at 1 or 3). Every
distinct configuration gets probes built from the node itself: the generic builder
(:mod:`.nodeconfig`, :mod:`.nodegeneric`) for any operator with a reference, and the
attention builders below for ``GroupQueryAttention`` and ONNX ``Attention`` (whose
controls need the operator's semantics). Layers that share a configuration are probed
once; each :class:`NodeProbes` names every node it stands for.

For the attention operators this module builds:

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
        key: the configuration in words (``GQA float16 N=8 Nkv=2 H=64 softcap=50 ...``,
            ``Conv-11 float32 X[1,129,4] W[128,129,3] B[128] kernel_shape=[3] pads=[1, 1]``).
        nodes: names of the nodes that have it.
        features: the probes as features (ids ``node.<hash>.<part>``), ready for the runner.
        parts: feature id -> what it checks (``config``, ``attention_bias``, ``input:B``,
            ``attr:pads``, ...).
        skipped: what could not be exercised, one phrase each (for a configuration that is
            not probed at all, the one reason).
        operator: ``domain.op_type`` of its nodes.
    """

    key: str
    nodes: tuple[str, ...]
    features: tuple[Feature, ...] = ()
    parts: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    operator: str = ""

    @property
    def probed(self) -> bool:
        """The node is probed in its own configuration (its ``config`` probe was built)."""
        return any(p == "config" for p in self.parts.values())


# --------------------------------------------------------------------------- entry point


def _probe(fid: str, subject: Case, control: Case, dtype: str, h: int) -> Probe:
    return Probe(feature_id=fid, subject=subject, control=control, tolerance=tolerance_for(dtype, h), dtype=dtype)


#: Largest attention configuration built (heads x head size), checked before allocating:
#: a node declaring 2**20 heads is refused, not built.
MAX_ATTENTION = 1 << 16


def _attention_too_large(cfg: dict) -> bool:
    n, nkv, h = cfg.get("N", 0), cfg.get("Nkv", 0), cfg.get("H", 0)
    return not (0 < n <= MAX_ATTENTION and 0 <= nkv <= MAX_ATTENTION and 0 < h <= MAX_ATTENTION
                and (n + 2 * nkv) * h <= MAX_ATTENTION)


def plan(nodes: list[Node], dims: Mapping[str, int] | None = None, opsets: Mapping[str, int] | None = None,
         generic: bool = True, progress: Callable[[int, int], None] | None = None) -> list[NodeProbes]:
    """Node-config probes for every node, one set per distinct configuration (layers that
    share one are probed once): the attention builders for GroupQueryAttention and ONNX
    Attention, the generic one (:mod:`.nodegeneric`) for every other operator when
    ``generic``.

    Probes are built here (seconds at most per configuration), so a knock-out that cannot
    separate is known before the run and reported in ``skipped``, never run blind; a
    configuration that cannot be probed at all is returned with no features and its reason.
    ``progress(done, total)`` is called after each distinct configuration.
    """
    from . import nodeconfig

    groups: dict[str, tuple[str, object, list[str], str]] = {}
    unreadable: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        if node.op_type == "GroupQueryAttention" and node.domain == "com.microsoft":
            cfg, kind = gqa.config(node), "gqa"
        elif node.op_type == "Attention" and node.domain == "":
            cfg, kind = attention.config(node), "attention"
        elif generic:
            try:
                cfg, kind = nodeconfig.configure(node, dims or {}, opsets or {}), "generic"
            except nodeconfig.Unprobed as exc:
                unreadable.setdefault((node.operator, str(exc)), []).append(node.name)
                continue
        else:
            continue
        if cfg is None:
            unreadable.setdefault((node.operator, "heads, head size or dtype not readable from the model"),
                                  []).append(node.name)
            continue
        if kind != "generic" and _attention_too_large(cfg):
            unreadable.setdefault((node.operator, f"too large to probe ({cfg.get('N')} heads of size "
                                   f"{cfg.get('H')})"), []).append(node.name)
            continue
        words = gqa.words(cfg) if kind == "gqa" else attention.words(cfg) if kind == "attention" else cfg.words()
        groups.setdefault(words, (kind, cfg, [], node.operator))[2].append(node.name)
    out = []
    total = len(groups)
    for i, (words, (kind, cfg, names, operator)) in enumerate(groups.items()):
        if kind == "generic":
            out.append(_generic(cfg, words, names, operator))
        else:
            out.append(_attention(kind, cfg, words, names, operator))
        if progress is not None:
            progress(i + 1, total)
    return out + [NodeProbes(f"{op} not probed in its own configuration", tuple(names), skipped=(why,), operator=op)
                  for (op, why), names in unreadable.items()]


def _generic(cfg, words: str, names: list[str], operator: str) -> NodeProbes:
    from .nodeconfig import Unprobed
    from .nodegeneric import probes

    key = cfg.key
    seed = int(key[:8], 16)
    try:
        built, skipped = probes(cfg, f"node.{key}", seed)
    except Unprobed as exc:
        return NodeProbes(words, tuple(names), skipped=(str(exc),), operator=operator)
    except Exception as exc:  # noqa: BLE001 - a hostile or unusual node: not probed, never a traceback
        return NodeProbes(words, tuple(names), skipped=(f"probe could not be built ({type(exc).__name__}: "
                                                        f"{' '.join(str(exc).split())[:160]})",), operator=operator)
    features, parts = [], {}
    for part, probe in built:
        fid = probe.feature_id
        features.append(Feature(fid, cfg.op_type, cfg.domain, cfg.opset, cfg.dtype,
                                f"{words}: {part} on vs off", "epaudit scan node-config probe", _frozen(probe)))
        parts[fid] = part
    return NodeProbes(words, tuple(names), tuple(features), parts, tuple(skipped), operator)


def _attention(kind: str, cfg: dict, words: str, names: list[str], operator: str) -> NodeProbes:
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
    return NodeProbes(words, tuple(names), tuple(features), parts, tuple(skipped), operator)


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
