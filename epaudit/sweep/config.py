"""One sweep configuration: a one-node model's operator, opset, inputs, attributes and values.

A :class:`Config` is plain, hashable data: everything that decides the model and its feeds
(input values are drawn from ``values`` and ``seed``, so two equal configurations are the
same probe, byte for byte). Its :attr:`Config.key` is canonical JSON, and
:func:`finding_id` its stable id (``sweep.<Op>.<10 hex digits>``: the same configuration
gets the same id on every machine and release, which a saved finding and the matrix cell
declaring it rely on).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

#: Value kinds, simplest first: the shrinker moves a failing configuration's values
#: toward the front (:mod:`.values` draws them).
VALUE_KINDS = ("zeros", "ones", "ints", "ties", "normal", "large", "tiny", "extremes", "special")

#: How an omitted optional input that is not the last one is written, and how trailing
#: ones are: ``cut`` drops trailing omitted inputs from the node's input list, ``empty``
#: keeps them as ``""`` (both are valid ONNX; kernels read them differently: an ORT
#: LayerNormalization with bias ``""`` segfaults at session creation, docs/sweep.md).
OMIT_STYLES = ("cut", "empty")

#: No configuration holds an input or output larger than this many elements.
MAX_ELEMENTS = 1 << 16
#: Channel counts: 1, and the neighbours of 8, 16 and 32 (AVX2's 8-float vector and
#: MLAS's NCHWc block, 8 on AVX2 and 16 on AVX-512), and of 64 and 128 (GPU tiles).
CHANNELS = (1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)


@dataclass(frozen=True)
class Input:
    """One node input.

    Attributes:
        name: the graph input's name (the seed probe's).
        dtype: numpy dtype name (``float32``, ``float16``, ``int64``, ``bool``, ...).
        shape: dimensions (``()`` for a scalar).
        role: ``data`` (values drawn from the configuration's value kind) or ``param``
            (fixed values: pads, axes, sizes, scales, indices, quantization scales).
        value: a ``param``'s values, flat, in C order (``None`` for ``data``).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str = "data"
    value: tuple | None = None

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class Config:
    """A one-node configuration.

    Attributes:
        op: op type (``Conv``).
        domain: ``""`` for ai.onnx, else the operator's domain.
        opset: the domain's opset version.
        inputs: node inputs in order; ``None`` where an optional input is omitted.
        outputs: node output names (``""`` where an optional output is not requested).
        attributes: ``(name, value)`` sorted by name; values are ints, floats, strings or
            tuples of them. An attribute not listed is at its schema default.
        values: the value kind of every ``data`` input (:data:`VALUE_KINDS`).
        seed: the values' seed.
        omit: :data:`OMIT_STYLES`.
        opsets: the model's opset imports, ``(domain, version)`` (the seed probe's).
        symbolic: inputs get symbolic dimensions (Shape, Size: ORT folds them otherwise).
        declared: output name -> dtype as the seed declares them (operators onnx does not
            know: their outputs' types cannot be inferred).
        origin: the catalog feature the configuration was drawn around (not part of the key).
    """

    op: str
    domain: str
    opset: int
    inputs: tuple[Input | None, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, Any], ...] = ()
    values: str = "normal"
    seed: int = 0
    omit: str = "cut"
    opsets: tuple[tuple[str, int], ...] = ()
    symbolic: bool = False
    declared: tuple[tuple[str, str], ...] = ()
    origin: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """Canonical JSON of everything that decides the probe (not ``origin``)."""
        doc = {"op": self.op, "domain": self.domain, "opset": self.opset, "opsets": [list(o) for o in self.opsets],
               "inputs": [None if i is None else [i.name, i.dtype, list(i.shape), i.role,
                                                   None if i.value is None else list(i.value)]
                          for i in self.inputs],
               "outputs": list(self.outputs), "attributes": [[k, _plain(v)] for k, v in self.attributes],
               "values": self.values, "seed": self.seed, "omit": self.omit, "symbolic": self.symbolic,
               "declared": [list(d) for d in self.declared]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=True)

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes as a dict."""
        return dict(self.attributes)

    @property
    def dtype(self) -> str:
        """The dtype of the first ``data`` input (the node's "type"), else of the first input."""
        present = [i for i in self.inputs if i is not None]
        data = [i for i in present if i.role == "data"]
        return (data or present)[0].dtype if present else ""

    @property
    def elements(self) -> int:
        """Total elements of the inputs (the shrinker's measure of size)."""
        return sum(i.size for i in self.inputs if i is not None)

    def with_attr(self, name: str, value: Any | None) -> Config:
        """A copy with attribute ``name`` set (``None``: removed, back to its default)."""
        attrs = {k: v for k, v in self.attributes if k != name}
        if value is not None:
            attrs[name] = value
        return replace(self, attributes=tuple(sorted(attrs.items())))

    def with_input(self, index: int, new: Input | None) -> Config:
        """A copy with node input ``index`` replaced (``None``: omitted)."""
        ins = list(self.inputs)
        ins[index] = new
        return replace(self, inputs=tuple(ins))

    def describe(self) -> str:
        """The configuration in words: ``Conv-22 float32 X[1,9,5,5] W[1,9,3,3] pads=(0,0,1,1)
        values=normal seed=3``."""
        parts = [f"{self.op}-{self.opset}"]
        for i, inp in enumerate(self.inputs):
            if inp is None:
                parts.append(f"input{i}=omitted" + ('("")' if self.omit == "empty" else ""))
                continue
            shape = ",".join(map(str, inp.shape))
            text = f"{inp.name}:{inp.dtype}[{shape}]"
            if inp.value is not None and len(inp.value) <= 8:
                text += "=" + ",".join(_fmt(v) for v in inp.value)
            parts.append(text)
        parts += [f"{k}={_fmt(v)}" for k, v in self.attributes]
        parts.append(f"values={self.values}")
        return " ".join(parts)


def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return repr(v)
    return v


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt(x) for x in v) + ")"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def finding_id(config: Config) -> str:
    """The stable id of ``config`` as a finding: ``sweep.<Op>.<sha1 of its key, 10 hex>``
    (``sweep.<domain>.<Op>.…`` outside ai.onnx)."""
    digest = hashlib.sha1(config.key.encode("utf-8")).hexdigest()[:10]
    where = f"{config.domain}." if config.domain else ""
    return f"sweep.{where}{config.op}.{digest}"


def schema_of(op: str, domain: str, opset: int):
    """The ``onnx.defs`` schema of ``op`` at ``opset``, or ``None`` (a contrib operator)."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op, opset, domain)
    except Exception:  # noqa: BLE001 - onnx does not know it
        return None


def input_param(schema, index: int):
    """The schema's formal input ``index`` names (the last one for a variadic tail), or ``None``."""
    if schema is None or not schema.inputs:
        return None
    return schema.inputs[min(index, len(schema.inputs) - 1)]


def from_key(key: str) -> Config:
    """The configuration whose :attr:`Config.key` is ``key`` (a saved report's ``config``).

    Raises:
        KeyError, TypeError, ValueError: ``key`` is not such a document.
    """
    d = json.loads(key) if isinstance(key, str) else key

    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    def num(v):
        if isinstance(v, str) and v in ("nan", "inf", "-inf"):
            return float(v)
        return v

    inputs = tuple(None if i is None else Input(i[0], i[1], tuple(i[2]), i[3],
                                                None if i[4] is None else tuple(num(x) for x in i[4]))
                   for i in d["inputs"])
    return Config(op=d["op"], domain=d["domain"], opset=int(d["opset"]), inputs=inputs, outputs=tuple(d["outputs"]),
                  attributes=tuple((k, tup(v)) for k, v in d["attributes"]), values=d["values"], seed=int(d["seed"]),
                  omit=d["omit"], opsets=tuple((o[0], int(o[1])) for o in d["opsets"]), symbolic=bool(d["symbolic"]),
                  declared=tuple((a, b) for a, b in d.get("declared", [])))
