"""Operator schemas as ``scan`` needs them: input names in order, which are optional,
attribute defaults, and the opset version a node's operator definition dates from.

ai.onnx (and the other onnx domains) come from ``onnx.defs``; ``com.microsoft`` and other
ONNX Runtime contrib domains from ORT's own registry
(``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema``, the schemas
``docs/ContribOperators.md`` is generated from). An operator neither knows is *unknown*:
its inputs keep positional names (``input3``) and it matches only features without
input or attribute conditions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping

#: Attribute default for "the schema gives none": an absent optional attribute is off, and
#: ORT kernels read it with ``GetAttrOrDefault(name, 0)`` (``0``, ``0.0``, ``""``), so a set
#: zero is the default too (``contrib_ops/cpu/bert/group_query_attention.cc`` constructor).
NO_DEFAULT = object()


@dataclass(frozen=True)
class Schema:
    """What a node's operator declares, at the node's opset.

    Attributes:
        since_version: the opset version this definition dates from (``Attention`` at
            opset 24 imports -> 24; ``Conv`` at opset 21 -> 11).
        inputs: formal input names in order; the last may be variadic.
        optional: the names of optional inputs.
        variadic: the last input repeats.
        defaults: attribute name -> default value, or :data:`NO_DEFAULT` (optional without
            a schema default); required attributes are absent.
        required: required attribute names.
        outputs: formal output names in order (what the ``outputs`` fact names).
    """

    since_version: int
    """Opset version of this definition."""
    inputs: tuple[str, ...]
    """Formal input names."""
    optional: frozenset[str] = frozenset()
    """Optional input names."""
    variadic: bool = False
    """Last input is variadic."""
    defaults: Mapping[str, object] = field(default_factory=dict)
    """Optional attribute -> default (or NO_DEFAULT)."""
    required: frozenset[str] = frozenset()
    """Required attribute names."""
    outputs: tuple[str, ...] = ()
    """Formal output names."""

    def is_default(self, name: str, value: object) -> bool:
        """Whether attribute ``name`` set to ``value`` is its default (see :data:`NO_DEFAULT`)."""
        default = self.defaults.get(name, NO_DEFAULT)
        if default is NO_DEFAULT:
            return value in (0, 0.0, "", b"", [], ())
        if isinstance(default, float) or isinstance(value, float):
            try:
                return float(value) == float(default)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return False
        return value == default


def _attr_value(proto) -> object:
    from onnx import helper

    if not proto.name and not proto.type:
        return NO_DEFAULT
    value = helper.get_attribute_value(proto)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value


@lru_cache(maxsize=None)
def _onnx_schema(op_type: str, opset: int, domain: str) -> Schema | None:
    import onnx.defs

    try:
        s = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    option = onnx.defs.OpSchema.FormalParameterOption
    inputs = tuple(p.name for p in s.inputs)
    optional = frozenset(p.name for p in s.inputs if p.option == option.Optional)
    variadic = bool(s.inputs) and s.inputs[-1].option == option.Variadic
    defaults, required = {}, set()
    for name, a in s.attributes.items():
        if a.required:
            required.add(name)
        else:
            defaults[name] = _attr_value(a.default_value)
    return Schema(s.since_version, inputs, optional, variadic, defaults, frozenset(required),
                  tuple(p.name for p in s.outputs))


@lru_cache(maxsize=1)
def _ort_schemas() -> dict[tuple[str, str], list]:
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as C

        schemas = C.get_all_operator_schema()
    except Exception:  # noqa: BLE001 - no onnxruntime in this interpreter: contrib ops unknown
        return {}
    out: dict[tuple[str, str], list] = {}
    for s in schemas:
        out.setdefault((s.domain, s.name), []).append(s)
    return out


@lru_cache(maxsize=None)
def _ort_schema(op_type: str, opset: int, domain: str) -> Schema | None:
    from onnx import AttributeProto

    candidates = [s for s in _ort_schemas().get((domain, op_type), []) if s.since_version <= opset]
    if not candidates:
        return None
    s = max(candidates, key=lambda c: c.since_version)
    opt = type(s.inputs[0].option) if s.inputs else None
    inputs = tuple(p.name for p in s.inputs)
    optional = frozenset(p.name for p in s.inputs if opt is not None and p.option == opt.Optional)
    variadic = bool(s.inputs) and opt is not None and s.inputs[-1].option == opt.Variadic
    defaults, required = {}, set()
    for name, a in s.attributes.items():
        if a.required:
            required.add(name)
            continue
        raw = getattr(a, "_default_value", b"")
        if raw:
            proto = AttributeProto()
            proto.ParseFromString(raw)
            defaults[name] = _attr_value(proto)
        else:
            defaults[name] = NO_DEFAULT
    return Schema(s.since_version, inputs, optional, variadic, defaults, frozenset(required),
                  tuple(p.name for p in s.outputs))


def schema(op_type: str, domain: str, opset: int | None) -> Schema | None:
    """The schema of ``domain.op_type`` at ``opset``, or ``None`` when no registry knows it
    (or the model does not import the domain)."""
    if opset is None:
        return None
    domain = "" if domain == "ai.onnx" else domain
    if domain in ("", "ai.onnx.ml", "ai.onnx.preview.training"):
        return _onnx_schema(op_type, opset, domain)
    return _ort_schema(op_type, opset, domain) or _onnx_schema(op_type, opset, domain)
