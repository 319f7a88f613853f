"""The probe catalog: every feature epaudit can probe, in a stable order.

A feature is declared once, next to its subject/control builders and the reference it
needs (``catalog/gqa.py``, ``catalog/attention.py``); adding one touches that module,
the shipped ``capabilities.toml`` and a test, nothing else. A *source* is a module that
hands over a tuple of :class:`~epaudit.contract.probes.Feature`: the hand-written modules
and the generated catalog (``catalog/corpus``, derived from the ONNX backend node test
corpus) are concatenated here, and the runner, classifier, gate and selftest see one catalog.
One-node models are built by :mod:`.models` (``*_graph.py`` hold a hand-written source's
probe graph apart from its features). Saved findings of ``epaudit sweep`` (:mod:`.found`)
join the catalog when a matrix names their file (:func:`register`).

May import: contract, reference, classify (the separation self-check), cache (the corpus store).
Imported by: matrix, run, surface, audit, saved, report, conformance, scan, cli.
"""

from __future__ import annotations

import fnmatch

from ..contract.probes import Feature, is_glob
from .activations_math import FEATURES as _ACTIVATIONS_MATH
from .attention import FEATURES as _ATTENTION
from .corpus import features as _generated
from .experimental import FEATURES as _EXPERIMENTAL
from .gatherblockquantized import FEATURES as _GBQ
from .gqa import FEATURES as _GQA
from .matmulnbits import FEATURES as _MATMULNBITS
from .mha import FEATURES as _MHA
from .norms import FEATURES as _NORMS
from .qlinear_attention_moe import FEATURES as _QAM
from .rotary import FEATURES as _ROTARY
from .sequences import FEATURES as _SEQUENCES
from .variants import FEATURES as _VARIANTS

#: Version of the catalog's probes (ids, subjects, controls, inputs). Bump it when a
#: probe changes what it computes: saved results from another catalog version are not
#: comparable and are refused when merged.
CATALOG_VERSION = 3

#: The hand-written features, in catalog order (GQA first).
HAND_WRITTEN: tuple[Feature, ...] = (tuple(_GQA) + tuple(_ATTENTION) + tuple(_MATMULNBITS) + tuple(_GBQ)
                                     + tuple(_MHA) + tuple(_ROTARY) + tuple(_NORMS) + tuple(_QAM)
                                     + tuple(_ACTIVATIONS_MATH) + tuple(_SEQUENCES) + tuple(_EXPERIMENTAL))
#: float16 type variants of hand-written float32 features (:mod:`.variants`, ids ``<base>.float16``),
#: in the catalog right after the hand-written features.
VARIANTS: tuple[Feature, ...] = tuple(_VARIANTS)
_LAZY = ("FEATURES", "BY_ID", "_SHIPPED")


def __getattr__(name: str):
    """``FEATURES`` (every feature, in catalog order: the hand-written ones, their float16
    variants (:mod:`.variants`), then the generated ones, ids ``onnx.*``, :mod:`epaudit.catalog.corpus`: read from its store,
    built there on a first run), ``BY_ID`` (feature id -> feature) and ``_SHIPPED`` are
    made on first use, so a command that probes nothing (``epaudit --version``,
    ``--help``, ``env``) never builds the generated catalog (PEP 562 module attribute).

    Raises:
        AttributeError: any other name.
        RuntimeError: two features share an id (a catalog bug, caught by the tests).
    """
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    g = globals()
    if "FEATURES" not in g:
        features = HAND_WRITTEN + VARIANTS + _generated()
        by_id = {f.id: f for f in features}
        if len(by_id) != len(features):  # pragma: no cover - a catalog bug, caught by the tests
            raise RuntimeError("duplicate feature ids in the catalog")
        g.update(FEATURES=features, BY_ID=by_id)
    if "BY_ID" not in g:
        g["BY_ID"] = {f.id: f for f in g["FEATURES"]}
    if "_SHIPPED" not in g:
        #: ``id()`` of every feature object defined here: :func:`shipped` asks by identity,
        #: so a variant with the same feature id (a test's broken build) is never taken for it.
        g["_SHIPPED"] = frozenset(id(f) for f in g["FEATURES"])
    return g[name]


def _get(name: str):
    return globals()[name] if name in globals() else __getattr__(name)


def shipped(feature: Feature) -> bool:
    """Whether ``feature`` is one of this catalog's own objects (not a copy or variant
    under the same id); only those are served from the probe cache (:mod:`epaudit.cache`)."""
    return id(feature) in _get("_SHIPPED") and _get("BY_ID").get(feature.id) is feature


def select(patterns: list[str] | tuple[str, ...] | None) -> tuple[Feature, ...]:
    """Features whose id matches any shell-style pattern (``gqa.*``); all when none given.

    A pattern without wildcards is an exact id: ``gqa.softcap`` does not select
    ``gqa.softcap.with_bias`` (write ``gqa.softcap*`` for both), so adding a feature never
    widens an existing selection.
    """
    if not patterns:
        return _get("FEATURES")
    exact = {p for p in patterns if not is_glob(p)}
    globs = [p for p in patterns if p not in exact]
    out = []
    for f in _get("FEATURES"):
        if f.id in exact or any(fnmatch.fnmatchcase(f.id, p) for p in globs):
            out.append(f)
    return tuple(out)


#: id -> (source file, subject model bytes) of every feature :func:`register` added.
_REGISTERED: dict[str, tuple[str, bytes]] = {}


def register(features, source: str) -> tuple[str, ...]:
    """Add saved findings (:mod:`.found`) from the file ``source`` to the catalog, after
    every built-in feature; returns the ids added. Registering the same finding again
    (the same id and subject model, a matrix loaded twice) adds nothing. They are never
    :func:`shipped` (their probes come from their file, not from the probe cache).

    Raises:
        ValueError: an id the catalog has (a built-in feature, or another finding).
    """
    g = globals()
    _get("_SHIPPED")  # made before any finding joins: findings are never shipped
    added = []
    for f in features:
        model = f.build().subject.model
        known = _REGISTERED.get(f.id)
        if known is not None and known[1] == model:
            continue
        if f.id in g["BY_ID"]:
            where = f"saved in {known[0]}" if known is not None else "a built-in feature"
            raise ValueError(f"{f.id}: already in the catalog ({where})")
        g["FEATURES"] = g["FEATURES"] + (f,)
        g["BY_ID"][f.id] = f
        _REGISTERED[f.id] = (source, model)
        added.append(f.id)
    return tuple(added)


def forget(ids) -> None:
    """Take features :func:`register` added out of the catalog again (tests)."""
    g = globals()
    ids = set(ids) & set(_REGISTERED)
    if not ids or "FEATURES" not in g:
        return
    g["FEATURES"] = tuple(f for f in g["FEATURES"] if f.id not in ids)
    for fid in ids:
        g["BY_ID"].pop(fid, None)
        _REGISTERED.pop(fid, None)


def operator(feature_id: str) -> str:
    """The operator a feature probes (``Feature.operator``, ``ai.onnx.Resize``).

    For an id the catalog does not know (saved results from another catalog): a
    generated id ``onnx.<OpType>.…`` gives ``ai.onnx.<OpType>``, as its feature would;
    any other id its first dot-separated part."""
    f = _get("BY_ID").get(feature_id)
    if f is not None:
        return f.operator
    parts = feature_id.split(".")
    return f"ai.onnx.{parts[1]}" if parts[0] == "onnx" and len(parts) > 2 else parts[0]
