"""The probe catalog: every feature epaudit can probe, in a stable order.

A feature is declared once, next to its subject/control builders and the reference it
needs (``catalog/gqa.py``, ``catalog/attention.py``); adding one touches that module,
the shipped ``capabilities.toml`` and a test, nothing else. A *source* is a module that
hands over a tuple of :class:`~epaudit.probes.Feature`: the hand-written modules and the
generated catalog (``catalog/generated``, derived from the ONNX backend node test corpus)
are concatenated here, and the runner, classifier, gate and selftest see one catalog.
"""

from __future__ import annotations

import fnmatch

from ..probes import Feature
from .attention import FEATURES as _ATTENTION
from .generated import features as _generated
from .gqa import FEATURES as _GQA
from .matmulnbits import FEATURES as _MATMULNBITS
from .gatherblockquantized import FEATURES as _GBQ
from .mha import FEATURES as _MHA
from .norms import FEATURES as _NORMS
from .rotary import FEATURES as _ROTARY

#: Version of the catalog's probes (ids, subjects, controls, inputs). Bump it when a
#: probe changes what it computes: saved results from another catalog version are not
#: comparable and are refused when merged.
CATALOG_VERSION = 3

#: Every feature, in catalog order: the hand-written catalogs (GQA first), then the
#: generated one (ids ``onnx.*``, :mod:`epaudit.catalog.generated`: read from its store,
#: built there on a first run).
FEATURES: tuple[Feature, ...] = (tuple(_GQA) + tuple(_ATTENTION) + tuple(_MATMULNBITS) + tuple(_GBQ)
                                 + tuple(_MHA) + tuple(_ROTARY) + tuple(_NORMS) + _generated())

#: Feature id -> feature.
BY_ID: dict[str, Feature] = {f.id: f for f in FEATURES}

#: ``id()`` of every feature object defined here: :func:`shipped` asks by identity, so a
#: variant with the same feature id (a test's broken build) is never taken for it.
_SHIPPED = frozenset(id(f) for f in FEATURES)

if len(BY_ID) != len(FEATURES):  # pragma: no cover - a catalog bug, caught by the tests
    raise RuntimeError("duplicate feature ids in the catalog")


def shipped(feature: Feature) -> bool:
    """Whether ``feature`` is one of this catalog's own objects (not a copy or variant
    under the same id); only those are served from the probe cache (:mod:`epaudit.cache`)."""
    return id(feature) in _SHIPPED and BY_ID.get(feature.id) is feature


def select(patterns: list[str] | tuple[str, ...] | None) -> tuple[Feature, ...]:
    """Features whose id matches any shell-style pattern (``gqa.*``); all when none given.

    A pattern without wildcards is an exact id: ``gqa.softcap`` does not select
    ``gqa.softcap.with_bias`` (write ``gqa.softcap*`` for both), so adding a feature never
    widens an existing selection.
    """
    if not patterns:
        return FEATURES
    out = []
    for f in FEATURES:
        for p in patterns:
            if fnmatch.fnmatchcase(f.id, p):
                out.append(f)
                break
    return tuple(out)
