"""Shared builders of the contrib-operator catalogs (``mha.py``, ``rotary.py``, ``norms.py``).

A :class:`Graph` is one node: its attributes, the inputs fed at run time, the inputs a
control bakes in as constants (a neutral value: a zero skip, an identity rotation), and the
outputs asked for. :func:`case` turns it into a :class:`~epaudit.contract.probes.Case` with the
float64 reference a catalog module computes from the same values, so a control's feeds
are always a subset of its subject's, with the same arrays: running the control graph on
the subject's feeds is exactly the "input ignored" fault.

Outputs are listed in the graph in the order :attr:`Graph.outputs` gives, which need not
be the node's: an optional-output feature lists its optional output first, so the
``unwritten`` fault (which leaves the first graph output unwritten) proves on that output
that a kernel which never writes it is caught as ``UNWRITTEN``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Callable, Container, Mapping, Sequence

import numpy as np

from ..contract.probes import Case, Feature, Probe, Use, tolerance_for
from .models import NUMPY_TYPES, one_node_model, with_constants

#: Reference: (every input value by name, the node attributes) -> output name -> float64 array.
Reference = Callable[[Mapping[str, np.ndarray], Mapping[str, object]], Mapping[str, np.ndarray]]


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` (float16/float32) precision, as float64."""
    return np.asarray(x).astype(NUMPY_TYPES[dtype]).astype(np.float64)


#: The float dtype a hand-written float32 probe is built in instead (``"float16"``), or
#: ``None``: as written. Set only around a base feature's ``build`` by a type variant
#: (:mod:`epaudit.catalog.variants`); :func:`probe` here and in :mod:`._xcase` retype both
#: graphs with :func:`retyped` before building their cases.
TARGET_DTYPE: ContextVar[str | None] = ContextVar("epaudit_target_dtype", default=None)


def retyped(g: "Graph", fixed: Container[str], dtype: str | None = None) -> "Graph":
    """``g`` in the float dtype ``dtype`` (default: :data:`TARGET_DTYPE`; ``g`` itself when
    neither names one, or ``g`` is not float32).

    Every fed and baked-in value except the inputs named in ``fixed`` (integer inputs,
    inputs of a fixed dtype) is rounded to ``dtype`` and kept as float64 (:func:`rounded`),
    so the float64 reference a probe computes from :attr:`Graph.values` is the reference
    of the values the EP really receives; the node's float type parameter becomes ``dtype``.
    """
    dtype = dtype or TARGET_DTYPE.get()
    if dtype is None or g.dtype == dtype or g.dtype != "float32":
        return g

    def cast(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: (v if k in fixed else rounded(v, dtype)) for k, v in values.items()}

    return replace(g, dtype=dtype, feeds=cast(g.feeds), constants=cast(g.constants))


@dataclass(frozen=True)
class Graph:
    """One probe graph of a single contrib node.

    Attributes:
        dtype: the node's float dtype (``float32`` or ``float16``).
        attrs: node attributes (only those set).
        feeds: input name -> value fed at run time (floats already rounded to ``dtype``,
            as float64; integer inputs keep their integer dtype).
        outputs: output names in graph order (a subset of the node's outputs).
        constants: input name -> neutral value baked into the graph as an initializer.
    """

    dtype: str
    attrs: Mapping[str, object]
    feeds: Mapping[str, np.ndarray]
    outputs: tuple[str, ...]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, np.ndarray]:
        """Every input's value, fed or baked in."""
        return {**self.feeds, **self.constants}

    def without(self, *inputs: str, attrs: tuple[str, ...] = ()) -> "Graph":
        """The same graph with ``inputs`` dropped and ``attrs`` reset to their defaults."""
        return replace(self, feeds={k: v for k, v in self.feeds.items() if k not in inputs},
                       constants={k: v for k, v in self.constants.items() if k not in inputs},
                       attrs={k: v for k, v in self.attrs.items() if k not in attrs})

    def baked(self, **neutral: np.ndarray) -> "Graph":
        """The same graph with inputs turned into constants holding ``neutral`` values."""
        feeds = {k: v for k, v in self.feeds.items() if k not in neutral}
        return replace(self, feeds=feeds, constants={**self.constants, **neutral})

    def with_attrs(self, **attrs: object) -> "Graph":
        """The same graph with ``attrs`` set on top of its own."""
        return replace(self, attrs={**self.attrs, **attrs})


@dataclass(frozen=True)
class Op:
    """What a catalog module tells :func:`case` about its operator.

    Attributes:
        op_type, domain, opset: the node's operator.
        inputs: the node's input names in schema order.
        outputs: the node's output names in schema order.
        int_inputs: input name -> integer dtype name (``int32``/``int64``).
        output_dtypes: output name -> fixed dtype name (``float32`` for the ``U`` outputs);
            others take the graph's dtype.
        reference: computes every output from the input values and the attributes.
    """

    op_type: str
    domain: str
    opset: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    int_inputs: Mapping[str, str]
    output_dtypes: Mapping[str, str]
    reference: Reference


def _reorder_outputs(model: bytes, order: Sequence[str]) -> bytes:
    """The model with its graph outputs listed in ``order`` (the node keeps its own order)."""
    import onnx

    proto = onnx.load_from_string(model)
    by_name = {o.name: o for o in proto.graph.output}
    if list(by_name) == list(order):
        return model
    outs = [by_name[n] for n in order]
    copies = [onnx.ValueInfoProto() for _ in outs]
    for c, o in zip(copies, outs):
        c.CopyFrom(o)
    del proto.graph.output[:]
    proto.graph.output.extend(copies)
    return proto.SerializeToString()


def case(op: Op, g: Graph, exact: frozenset[str] = frozenset()) -> Case:
    """Build the model, the runtime feeds and the float64 reference of one graph.

    Raises:
        ValueError: the reference rejects the inputs (a probe bug).
    """
    values = g.values
    last = max(op.inputs.index(n) for n in values)
    inputs, node_inputs = [], []
    for name in op.inputs[:last + 1]:
        if name not in values:
            node_inputs.append("")
            continue
        arr = values[name]
        inputs.append((name, op.int_inputs.get(name, g.dtype), arr.shape))
        node_inputs.append(name)
    node_outputs = [(n, op.output_dtypes.get(n, g.dtype)) if n in g.outputs else ("", g.dtype)
                    for n in op.outputs]
    model = one_node_model(op.op_type, op.domain, op.opset, inputs, node_outputs, dict(g.attrs), node_inputs)
    model = _reorder_outputs(with_constants(model, g.constants), g.outputs)
    graph_type = NUMPY_TYPES[g.dtype]
    feeds = {n: (a if n in op.int_inputs else a.astype(graph_type)) for n, a in g.feeds.items()}
    ref = op.reference(values, g.attrs)
    return Case(model=model, feeds=feeds, outputs=g.outputs,
                reference={o: np.asarray(ref[o], dtype=np.float64) for o in g.outputs},
                exact=frozenset(exact) & set(g.outputs))


def probe(op: Op, feature_id: str, subject: Graph, control: Graph, *, head: int = 16,
          exact: frozenset[str] = frozenset()) -> Probe:
    """A probe of ``subject`` against ``control``; ``head`` scales the attention tolerance.

    Under a :data:`TARGET_DTYPE` both graphs are :func:`retyped` first (integer inputs kept).
    """
    subject, control = retyped(subject, op.int_inputs), retyped(control, op.int_inputs)
    return Probe(feature_id=feature_id, subject=case(op, subject, exact), control=case(op, control, exact),
                 tolerance=tolerance_for(subject.dtype, head), dtype=subject.dtype)


def feature(op: Op, fid: str, dtype: str, changes: str, source: str, build: Callable[[], Probe],
            uses: Use | None = None) -> Feature:
    """A :class:`Feature` of ``op``."""
    return Feature(id=fid, op_type=op.op_type, domain=op.domain, opset=op.opset, dtype=dtype,
                   changes=changes, source=source, build=build, uses=uses or Use())
