"""The catalog as data (``epaudit features --format json``): one object per feature.

Keys: ``id``, ``operator`` (``domain.op_type``), ``op_type``, ``domain`` (``""`` for
ai.onnx), ``opset``, ``dtype``, ``changes`` (what the subject changes against the
control), ``source`` (the spec or kernel the probe follows), ``uses`` (when a model node
uses the feature: optional ``inputs`` fed, ``absent`` inputs, ``attributes`` set,
``facts``; ``epaudit/contract/probes.py`` ``Use``). Pure: features in, text out.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..contract.probes import Feature


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)  # a sentinel such as NON_DEFAULT, by its name


def to_list(features: Sequence[Feature]) -> list[dict[str, Any]]:
    """The features as JSON-ready objects, in catalog order."""
    out = []
    for f in features:
        use = getattr(f, "uses", None)
        out.append({"id": f.id, "operator": f.operator, "op_type": f.op_type, "domain": f.domain,
                    "opset": f.opset, "dtype": f.dtype, "changes": f.changes, "source": f.source,
                    "uses": None if use is None else _plain({"inputs": getattr(use, "inputs", ()),
                                                             "absent": getattr(use, "absent", ()),
                                                             "attributes": dict(getattr(use, "attributes", {})),
                                                             "facts": dict(getattr(use, "facts", {}))})})
    return out


def format(features: Sequence[Feature], **_: Any) -> str:  # noqa: A001
    """``{"count": N, "features": [...]}`` as indented JSON, ending with a newline."""
    return json.dumps({"count": len(features), "features": to_list(features)}, indent=2) + "\n"
