"""Graph builders for contrib operators whose tensors are not all float: the quantized
(``QLinear*``, ``QGemm``, ``MatMulInteger16``, ...) and mixed-type (``QAttention``,
``EmbedLayerNormalization``, ``MoE``, ...) catalogs of ``catalog/qlinear_attention_moe.py``.

:mod:`epaudit.catalog._contrib` types every input by the graph's float dtype; here each
array carries its own type: a fed input or constant is declared with its numpy dtype
(uint8, int8, int16, uint16, int32, int64, bool, float16, float32), a 4-bit constant is a
:class:`~epaudit.catalog.quantmodels.SubByte`, and each output names its type. Everything
else follows ``_contrib``: one node named ``probe``; a control's feeds are a subset of its
subject's with the same arrays (so running the control graph on the subject's feeds is the
"input ignored" fault); outputs are listed in :attr:`QGraph.outputs` order, an optional
output first where a feature is about it (the ``unwritten`` fault leaves the first graph
output unwritten).

A control must keep at least one fed input of the probed node: ORT constant-folds a node
whose inputs are all initializers at session creation, and the node under test would be
gone. Scales and zero points are constants (initializers), as quantized models store them.

Integer outputs are judged with :data:`STEP`: one quantization step (``atol = 1``). Outputs a
feature lists in ``exact`` are compared exactly instead; either way the separation self-check
(:func:`epaudit.classify.separation`, ``MIN_SEPARATION`` = 10 bounds) then asks the subject and
control references to differ by at least 10 steps somewhere, never by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import BASE_HEAD_SIZE, PROBE_NODE_NAME, TOLERANCES, Case, Probe, Tolerance, tolerance_for
from ._contrib import TARGET_DTYPE, _reorder_outputs
from .models import set_lowest_ir_version
from .quantmodels import SUB_BYTE_TYPES, SubByte

#: One quantization step: the bound of every integer output of a quantized probe.
STEP = Tolerance(atol=1.0, rtol=0.0)

#: The range int8 *weights* are drawn in where they meet uint8 activations (U8S8: QLinearConv,
#: QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul, QAttention, DynamicQuantizeLSTM): 7
#: bits. ORT's x86 kernels multiply u8 by s8 with VPMADDUBSW, whose int16 sum of two products
#: saturates (255 * 128 * 2 > 32767) on AVX2 and AVX-512 machines without VNNI, and ORT
#: documents 7-bit weights (``reduce_range``) as the contract there (onnxruntime
#: docs/performance/model-optimizations/quantization.md, "When to use reduce-range").
#: Full-range weights made the same probe PASS on a VNNI host and MISMATCH on an AVX2 one
#: (measured: 12 cells on an AMD EPYC with AVX2 only), a verdict that followed the machine,
#: not the build. 255 * 64 * 2 = 32640 fits.
U8S8_WEIGHTS = (-64, 63)


def u8s8_weights(rng: np.random.Generator, shape) -> np.ndarray:
    """int8 weights of ``shape`` drawn uniformly in :data:`U8S8_WEIGHTS`."""
    lo, hi = U8S8_WEIGHTS
    return rng.integers(lo, hi + 1, size=shape).astype(np.int8)

#: dtype name -> ONNX element type (onnx.proto TensorProto.DataType).
ELEM: Mapping[str, int] = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
                           "int64": 7, "bool": 9, "float16": 10, "float64": 11, "uint32": 12,
                           **SUB_BYTE_TYPES}

#: Reference: (every input value by name, node attributes) -> output name -> array.
Reference = Callable[[Mapping[str, np.ndarray], Mapping[str, object]], Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class QOp:
    """The operator a quantized catalog probes.

    Attributes:
        op_type, domain, opset: the node's operator.
        inputs: input names in schema order (a variadic list spelled out for the probe).
        outputs: output names in schema order.
        reference: computes every output (float64 or integer arrays) from the input values
            (4-bit constants as their logical int64 values) and the attributes.
        float_t: the inputs and outputs bound to the node's float type parameter (``T``, or
            ``T1`` where the schema names it so) that a float16 type variant retypes
            (:func:`retyped`); empty: the operator has no float16 variant. Inputs and outputs
            of another type parameter (a ``float``-only scale, ``int32`` masks, a state ``S``)
            are never named here.
    """

    op_type: str
    domain: str
    opset: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    reference: Reference
    float_t: frozenset[str] = frozenset()


@dataclass(frozen=True)
class QGraph:
    """One probe graph of a single node.

    Attributes:
        attrs: node attributes (only those set).
        feeds: graph inputs, name -> array in the type the graph declares.
        outputs: output name -> its ONNX dtype name, in graph order.
        constants: name -> initializer (array, or :class:`SubByte` for int4/uint4).
        cast_out: output name -> the dtype a ``Cast`` after the node turns it into (the
            graph output is the cast; int4/uint4 outputs have no numpy type to read back).
        spell_out: write every schema input, absent ones as ``""``, instead of stopping at
            the last present one (an omitted trailing optional input and an explicit empty
            name are both valid ONNX; some kernels read the input list past its end).
        out_slots: the node has at least this many output slots, unrequested ones ``""``
            (ORT's EmbedLayerNormalization type inference needs slot 1 to exist).
    """

    attrs: Mapping[str, object]
    feeds: Mapping[str, np.ndarray]
    outputs: Mapping[str, str]
    constants: Mapping[str, object] = field(default_factory=dict)
    cast_out: Mapping[str, str] = field(default_factory=dict)
    spell_out: bool = False
    out_slots: int = 0

    @property
    def values(self) -> dict[str, np.ndarray]:
        """Every input's value, fed or constant (4-bit constants as int64 values)."""
        consts = {k: (np.asarray(v.values, dtype=np.int64) if isinstance(v, SubByte) else v)
                  for k, v in self.constants.items()}
        return {**self.feeds, **consts}

    def without(self, *inputs: str, attrs: tuple[str, ...] = ()) -> "QGraph":
        """The same graph with ``inputs`` dropped and ``attrs`` reset to their defaults."""
        return replace(self, feeds={k: v for k, v in self.feeds.items() if k not in inputs},
                       constants={k: v for k, v in self.constants.items() if k not in inputs},
                       attrs={k: v for k, v in self.attrs.items() if k not in attrs})

    def baked(self, **values: object) -> "QGraph":
        """The same graph with inputs replaced by constants holding ``values``."""
        feeds = {k: v for k, v in self.feeds.items() if k not in values}
        return replace(self, feeds=feeds, constants={**self.constants, **values})

    def with_attrs(self, **attrs: object) -> "QGraph":
        """The same graph with ``attrs`` set on top of its own."""
        return replace(self, attrs={**self.attrs, **attrs})

    def with_outputs(self, **outputs: str) -> "QGraph":
        """The same graph asking for ``outputs`` (name -> dtype) in that order."""
        return replace(self, outputs=dict(outputs))


def _dtype_name(value: object) -> str:
    if isinstance(value, SubByte):
        return value.kind
    return np.asarray(value).dtype.name


def _initializer(name: str, value: object):
    from onnx import helper, numpy_helper

    if isinstance(value, SubByte):
        vals = np.asarray(value.values, dtype=np.int64)
        return helper.make_tensor(name, SUB_BYTE_TYPES[value.kind], list(vals.shape), vals.reshape(-1).tolist())
    # np.asarray, not ascontiguousarray: that makes a 0-d scale 1-d, and QLinearAdd/Mul type
    # inference requires scalar scales and zero points.
    return numpy_helper.from_array(np.asarray(value), name)


def build_model(op: QOp, g: QGraph) -> bytes:
    """Serialize the one-node model of ``g`` (ai.onnx 21 beside ``op``'s domain).

    Raises:
        KeyError: an input or output dtype without an ONNX element type.
    """
    from onnx import helper

    values = {**g.feeds, **g.constants}
    last = len(op.inputs) - 1 if g.spell_out else max(op.inputs.index(n) for n in values)
    node_in = [n if n in values else "" for n in op.inputs[:last + 1]]
    graph_inputs = [helper.make_tensor_value_info(n, ELEM[_dtype_name(g.feeds[n])], list(np.shape(g.feeds[n])))
                    for n in op.inputs if n in g.feeds]
    node_out, tail, graph_out = [], [], []
    for name in op.outputs:
        if name not in g.outputs:
            node_out.append("")
            continue
        if name in g.cast_out:
            inner = f"{name}.raw"
            node_out.append(inner)
            tail.append(helper.make_node("Cast", [inner], [name], to=ELEM[g.cast_out[name]], name=f"cast_out.{name}"))
        else:
            node_out.append(name)
    while len(node_out) > max(g.out_slots, 1) and node_out[-1] == "":
        node_out.pop()
    for name, dtype in g.outputs.items():
        graph_out.append(helper.make_tensor_value_info(name, ELEM[g.cast_out.get(name, dtype)], None))
    node = helper.make_node(op.op_type, node_in, node_out, name=PROBE_NODE_NAME, domain=op.domain, **dict(g.attrs))
    graph = helper.make_graph([node, *tail], f"epaudit.{op.op_type}", graph_inputs, graph_out,
                              initializer=[_initializer(n, v) for n, v in g.constants.items()])
    opsets = [helper.make_opsetid("", 21)]
    if op.domain:
        opsets.append(helper.make_opsetid(op.domain, op.opset))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="epaudit")
    set_lowest_ir_version(model)  # the lowest IR its opsets and types need (issue 26)
    return _reorder_outputs(model.SerializeToString(), tuple(g.outputs))


def case(op: QOp, g: QGraph, exact: frozenset[str] = frozenset()) -> Case:
    """The model, the feeds and the float64 reference of ``g``.

    Raises:
        ValueError: the reference rejects the inputs (a probe bug).
    """
    # float16 values reach the reference as float64 (exact): it computes in float64.
    values = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == np.float16 else v)
              for k, v in g.values.items()}
    ref = op.reference(values, g.attrs)
    outputs = tuple(g.outputs)
    return Case(model=build_model(op, g), feeds=dict(g.feeds), outputs=outputs,
                reference={o: np.asarray(ref[o], dtype=np.float64) for o in outputs},
                exact=frozenset(exact) & set(outputs))


def retyped(op: QOp, g: QGraph, dtype: str) -> QGraph:
    """``g`` with the float32 arrays and outputs named in ``op.float_t`` in float ``dtype``.

    Every float32 feed and constant bound to the node's float type parameter becomes an
    array of ``dtype`` (``"float16"``): the base's values rounded to it, the values the EP
    receives; :func:`case` hands them to the reference as float64. Every other input (integer
    ids and masks, uint8 weights, inputs of another type parameter) and every output not in
    ``op.float_t`` keeps its dtype; a float32 output in it is declared ``dtype``.
    """
    target = np.dtype(dtype)

    def cast(values: Mapping[str, object]) -> dict[str, object]:
        return {k: (v.astype(target) if k in op.float_t and isinstance(v, np.ndarray) and v.dtype == np.float32
                    else v) for k, v in values.items()}

    outputs = {k: (dtype if k in op.float_t and t == "float32" else t) for k, t in g.outputs.items()}
    return replace(g, feeds=cast(g.feeds), constants=cast(g.constants), outputs=outputs)


def variant_tolerance(tolerance: Tolerance, dtype: str, base: str = "float32") -> Tolerance:
    """The tolerance of a ``dtype`` variant of a probe judged by ``tolerance`` in ``base``:
    ``tolerance_for(dtype, L)`` at the accumulation length ``L`` behind the base's
    ``tolerance_for(base, L)`` (both bounds widened by ``sqrt(L / 16)`` above 16, so
    ``L = 16 · (atol / TOLERANCES[base].atol)²``).

    Raises:
        ValueError: ``tolerance`` is not of that form (``STEP``, a hand-set bound): its
            variant's tolerance cannot be derived.
    """
    length = round(BASE_HEAD_SIZE * max(1.0, tolerance.atol / TOLERANCES[base].atol) ** 2)
    derived = tolerance_for(base, length)
    if not (np.isclose(derived.atol, tolerance.atol, rtol=1e-9, atol=0)
            and np.isclose(derived.rtol, tolerance.rtol, rtol=1e-9, atol=0)):
        raise ValueError(f"{tolerance} is not tolerance_for({base!r}, L) for any length L")
    return tolerance_for(dtype, length)


def probe(op: QOp, feature_id: str, subject: QGraph, control: QGraph, tolerance: Tolerance, dtype: str,
          exact: frozenset[str] = frozenset()) -> Probe:
    """A probe of ``subject`` against ``control``, judged by ``tolerance``; ``dtype`` is the
    feature's type name (the node's quantized or float type).

    Under a :data:`~epaudit.catalog._contrib.TARGET_DTYPE` (a float16 type variant,
    :mod:`epaudit.catalog.variants`), a float32 probe of an operator with ``op.float_t`` is
    built with both graphs :func:`retyped` and :func:`variant_tolerance` at the base's
    accumulation length; any other probe is built as written (the variant then refuses it).
    """
    target = TARGET_DTYPE.get()
    if target is not None and dtype == "float32" and op.float_t:
        subject, control = retyped(op, subject, target), retyped(op, control, target)
        tolerance, dtype = variant_tolerance(tolerance, target), target
    return Probe(feature_id=feature_id, subject=case(op, subject, exact), control=case(op, control, exact),
                 tolerance=tolerance, dtype=dtype)


def const(value: float | int | np.ndarray, dtype: str) -> np.ndarray:
    """``value`` as an array of ``dtype`` (a scale ``const(0.05, "float32")``, a zero point)."""
    return np.asarray(value, dtype=np.dtype(dtype))
