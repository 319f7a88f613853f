"""The probe contract: what the catalog hands to the runner and the classifier.

A *probe* is the executable check for one feature: a subject model (the feature on,
at a decisive value) and a control model (the feature off or neutral), each with fixed
seeded inputs and float64 reference outputs. Everything here is plain data: models
travel to the worker as serialized ``ModelProto`` bytes, inputs as numpy arrays.

Tolerance semantics (written once, used everywhere, after Polygraphy's comparator):
an output element is *close* when ``|actual - expected| <= atol + rtol * |expected|``
(elementwise, the rule of ``numpy.isclose``), computed in float64 on the actual
values converted to float64. An output matches when its shape equals the reference
shape and every element is close. Non-finite references are compared exactly
(``-inf`` equals ``-inf``; a ``NaN`` reference is matched by a ``NaN`` only: where the
reference propagates a NaN input, as ``Max(NaN, 1)`` does, the EP must too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

#: Name of the one node a probe model exists to test. Placement checks look for it.
PROBE_NODE_NAME = "probe"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """Elementwise closeness bound for one output dtype.

    Attributes:
        atol: absolute bound, in the output's units.
        rtol: relative bound, a fraction of ``|expected|``.
    """

    atol: float
    """Absolute tolerance, in output units."""
    rtol: float
    """Relative tolerance, as a fraction of ``|expected|``."""

    def bound(self, expected: np.ndarray) -> np.ndarray:
        """Per-element allowed error ``atol + rtol * |expected|`` (float64, shape of ``expected``)."""
        return self.atol + self.rtol * np.abs(np.asarray(expected, dtype=np.float64))

    def close(self, actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """Boolean mask of close elements; ``actual`` and ``expected`` must share a shape."""
        a = np.asarray(actual, dtype=np.float64)
        e = np.asarray(expected, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            # Only a finite reference has a bound: against -inf the bound is inf too, and
            # a finite value (ORT's lowest float at a masked position) would pass.
            ok = np.isfinite(e) & (np.abs(a - e) <= self.bound(e))
        # Exact match for infinities of the same sign, and NaN for NaN (a propagated NaN).
        return ok | (np.isinf(e) & (a == e)) | (np.isnan(e) & np.isnan(a))


#: Tolerance per model dtype. float16 carries ~3 significant digits and bfloat16 ~2;
#: attention outputs are convex mixtures of V rows drawn from N(0, 1), so |y| <= ~3.
TOLERANCES: Mapping[str, Tolerance] = {
    "float64": Tolerance(atol=1e-9, rtol=1e-9),
    "float32": Tolerance(atol=1e-4, rtol=1e-3),
    "float16": Tolerance(atol=4e-3, rtol=4e-3),
    "bfloat16": Tolerance(atol=3e-2, rtol=3e-2),
}

#: The bound of outputs listed in :attr:`Case.exact`: equal or not.
EXACT = Tolerance(atol=0.0, rtol=0.0)

#: Head size the base tolerances are calibrated at (the catalog's default H).
BASE_HEAD_SIZE = 16


def tolerance_for(dtype: str, head_size: int = BASE_HEAD_SIZE) -> Tolerance:
    """The tolerance of a probe in ``dtype`` whose attention dot products have length ``head_size``.

    :data:`TOLERANCES` holds at ``H = 16``. A kernel may accumulate ``Q·Kᵀ`` and ``P·V``
    in the input precision (fp16 accumulation is a legitimate kernel choice, not a defect),
    and the rounding error of a length-``H`` sum grows like ``sqrt(H)`` (independent
    rounding errors, a random walk), so both bounds widen by ``sqrt(H / 16)`` above 16.
    At ``H = 512`` in float16 that is ``atol = rtol ≈ 2.3e-2``: an ignored input still
    moves outputs by O(1), far outside it (the separation self-check enforces this).

    Raises:
        KeyError: an unknown dtype name.
    """
    base = TOLERANCES[dtype]
    factor = max(1.0, (head_size / BASE_HEAD_SIZE) ** 0.5)
    return Tolerance(atol=base.atol * factor, rtol=base.rtol * factor)


#: A probe's subject and control references must differ somewhere by at least this many
#: times the tolerance bound, so that an EP that ignores the feature can never pass.
MIN_SEPARATION = 10.0


@dataclass(frozen=True, slots=True)
class Case:
    """One model, its inputs and its float64 reference outputs.

    Attributes:
        model: serialized ONNX ``ModelProto``; the node under test is named
            :data:`PROBE_NODE_NAME`.
        feeds: graph input name -> numpy array in the dtype the graph input declares
            (bfloat16 graphs take float32 inputs and cast inside the graph).
        outputs: graph output names, in graph order; every one is compared.
        reference: output name -> float64 expected values, same shape as the EP's output.
        exact: outputs that must equal the reference exactly (tolerance 0): copies, such
            as a KV cache carried into ``present_key``/``present_value``, where any
            difference at all means the kernel did not copy.
    """

    model: bytes
    """Serialized ONNX ModelProto (bytes)."""
    feeds: Mapping[str, np.ndarray]
    """Input name -> array, in the graph input's dtype."""
    outputs: tuple[str, ...]
    """Output names in graph order; all are compared."""
    reference: Mapping[str, np.ndarray]
    """Output name -> float64 reference values."""
    exact: frozenset[str] = frozenset()
    """Outputs compared with tolerance 0 (pure copies)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """A built probe: subject and control cases and the tolerance they are judged by.

    Attributes:
        feature_id: the catalog id, e.g. ``"gqa.attention_bias"``.
        subject: the feature switched on at a decisive value.
        control: the same graph with the feature's input dropped, its attribute reset
            to the default, or the input made neutral; the "ignored" fault runs this
            graph in place of the subject. ``None`` for a check without a control (an
            ONNX backend conformance case): it can never be classified ``IGNORED``.
        tolerance: the bound every output is judged by (from :data:`TOLERANCES`).
        dtype: the probed node's float dtype name (``"float16"``, ``"float32"``, ...).
        node_name: the node whose kernel is under test: the placement check wants it
            present (else ``DECOMPOSED``) and on the asked EP. ``None`` when the whole
            graph is under test (an ``_expanded`` backend case, a function body): then
            only "every node on the asked EP" is checked.
    """

    feature_id: str
    """Catalog id of the feature."""
    subject: Case
    """Feature on."""
    control: Case | None
    """Feature off or neutral; None when the check has no control."""
    tolerance: Tolerance
    """Closeness bound for every output."""
    dtype: str
    """Float dtype of the probed node."""
    node_name: str | None = PROBE_NODE_NAME
    """Node whose kernel is under test; None: every node of the graph."""


#: :attr:`Use.attributes` value meaning "set, to any value other than the schema default".
NON_DEFAULT = "<non-default>"


@dataclass(frozen=True, slots=True)
class Use:
    """When a model node uses a feature, and which parts of the operator's surface the
    feature's probe exercises (the input or attribute its subject turns on and its
    control leaves off).

    ``epaudit scan`` maps a model's nodes to features with it; ``epaudit surface`` counts
    a surface item (operator x opset x optional input / attribute / type) as covered by
    the features whose ``Use`` names it. A node uses a feature when its op type, domain
    and float dtype are the feature's and every condition below holds; an empty ``Use``
    is "the operator itself" (every such node uses it).

    Attributes:
        inputs: optional inputs, by schema name (``"attention_bias"``), that the node feeds
            (present and not ``""``).
        absent: optional inputs, by schema name, that the node leaves out (packed QKV:
            ``key`` and ``value`` absent).
        attributes: attribute name -> the value the node sets it to, or
            :data:`NON_DEFAULT` for "any value other than the schema default".
        facts: other node facts that must hold, by name, read from the node's input
            shapes: ``head_size`` (int, H of an attention node). Names a reader does not
            know never match (the node is then reported as not covered, never as covered).
    """

    inputs: tuple[str, ...] = ()
    """Optional inputs the node feeds."""
    absent: tuple[str, ...] = ()
    """Optional inputs the node leaves out."""
    attributes: Mapping[str, object] = field(default_factory=dict)
    """Attribute -> value (or NON_DEFAULT)."""
    facts: Mapping[str, object] = field(default_factory=dict)
    """Other node facts (``head_size``) that must hold."""

    @property
    def varied(self) -> tuple[str, ...]:
        """The schema names this feature exercises: its inputs, then its attributes."""
        return tuple(self.inputs) + tuple(self.attributes)


@dataclass(frozen=True, slots=True)
class Feature:
    """One catalog entry: a capability of one operator that can be probed on its own.

    Attributes:
        id: stable feature id, the matrix key (``"attention.qk_matmul_output_mode.3"``).
        op_type: ONNX op type of the probed node (``"GroupQueryAttention"``, ``"Attention"``).
        domain: operator domain (``"com.microsoft"`` or ``""`` for ai.onnx).
        opset: opset version of that domain in the probe model.
        dtype: float dtype of the probed node.
        changes: one line: what the subject turns on and what the control leaves off.
        source: where the semantics come from (spec section, ORT file, upstream issue).
        build: callable returning the :class:`Probe`; deterministic (fixed seeds).
        uses: when a model node uses this feature and what the probe exercises
            (:class:`Use`); the default is "the operator itself".
    """

    id: str
    """Stable feature id."""
    op_type: str
    """Probed op type."""
    domain: str
    """Op domain; "" for ai.onnx."""
    opset: int
    """Opset version of the domain."""
    dtype: str
    """Float dtype of the probed node."""
    changes: str
    """What the subject changes relative to the control."""
    source: str
    """Spec section / ORT file the semantics follow."""
    build: Callable[[], Probe] = field(repr=False, compare=False)
    """Builds the probe (deterministic)."""
    uses: Use = field(default_factory=lambda: Use(), compare=False)
    """When a node uses this feature; what the probe exercises."""

    @property
    def operator(self) -> str:
        """``domain.op_type`` with ``ai.onnx`` for the default domain."""
        return f"{self.domain or 'ai.onnx'}.{self.op_type}"


#: Characters that make a feature id pattern a glob (``fnmatch``'s ``*``, ``?`` and ``[``):
#: a pattern without one is an exact id, for ``--feature`` and matrix keys alike.
#: Type names a type variant's id ends with (``onnx.Add.input:A=zeros.add.opset14.float16``:
#: epaudit/catalog/corpus/types.py).
VARIANT_TYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "uint16",
                           "int32", "uint32", "int64", "uint64", "bool"})


def type_variant_of(feature_id: str) -> str | None:
    """The base id of a type variant's id (``….opset14.float16`` -> ``….opset14``), or
    ``None`` when ``feature_id`` does not end with ``.<type>`` after an ``.opset<N>``."""
    base, _, last = feature_id.rpartition(".")
    if last in VARIANT_TYPES and base.rpartition(".")[2].startswith("opset"):
        return base
    return None


WILDCARDS = "*?["


def is_glob(key: str) -> bool:
    """Does ``key`` hold a shell wildcard (``*``, ``?`` or ``[``)?"""
    return any(ch in key for ch in WILDCARDS)
