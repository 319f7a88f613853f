"""The probe builder of the activation, fused, math and miscellaneous contrib catalogs
(``activations.py``, ``fused.py``, ``tensor_math.py``, ``sampling.py``, ``tokens.py``,
``llm_blocks.py``).

It takes the :class:`~epaudit.catalog._contrib.Graph` of the other contrib catalogs (one
node; feeds, neutral constants, outputs in graph order) and adds what these operators need
beyond float graphs:

* **any tensor dtype per input and output** (uint8/int8 pools, uint32 hashes, int32 ids):
  each input's dtype comes from :attr:`XOp.input_dtypes` (else the graph's float dtype), each
  output's from :attr:`XOp.output_dtypes`; integer outputs are compared exactly
  (:attr:`XOp.exact`), so a perturbed id or hash is never "close";
* **controls whose every input is baked in** (a single-input activation's control: its
  input replaced by a constant): the constants then stay declared as graph inputs, an
  overridable default that is never fed, so ORT's constant folding, which folds only
  initializers that are not graph inputs (``graph_utils::IsConstantInitializer``,
  onnxruntime/core/optimizer/constant_folding.cc), leaves the node to its kernel. The
  generated catalog does the same (``epaudit/catalog/generated/itself.py``).

Integer-only probes (every output an integer) are judged by :data:`INTEGER_TOLERANCE`
(a difference of 1 is twenty bounds, so the separation check reads them) and every output
is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from ..contract.probes import Case, Feature, Probe, Tolerance, Use, tolerance_for
from ._contrib import Graph, Reference, retyped, rounded
from .models import set_lowest_ir_version

__all__ = ["XOp", "Graph", "case", "probe", "feature", "rounded", "INTEGER_TOLERANCE", "IR_VERSION"]

#: IR version of these probe models (ORT 1.20+ loads IR 10; >= 4 keeps declared initializers overridable).
#: Kept for importers; probe models carry the lowest IR version they need (models.set_lowest_ir_version).
IR_VERSION = 10
#: Tolerance of a probe whose outputs are all integers (the generated catalog's
#: ``INTEGER_TOLERANCE``, ``epaudit/catalog/generated/derive.py``).
INTEGER_TOLERANCE = Tolerance(atol=0.05, rtol=0.0)
_FLOAT_KINDS = "f"


@dataclass(frozen=True)
class XOp:
    """An operator as these catalogs build it.

    Attributes:
        op_type, domain, opset: the node's operator.
        inputs, outputs: the node's input / output names in schema order.
        reference: every output (float64, or the integer values) from the input values
            (by name) and the node attributes.
        input_dtypes: input name -> dtype name (``int64``, ``uint8`` …) for inputs that do
            not take the graph's float dtype.
        output_dtypes: output name -> dtype name for outputs that do not take it.
        exact: outputs compared with tolerance 0 (ids, hashes, indices, copies).
    """

    op_type: str
    domain: str
    opset: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    reference: Reference
    input_dtypes: Mapping[str, str] = field(default_factory=dict)
    output_dtypes: Mapping[str, str] = field(default_factory=dict)
    exact: frozenset[str] = frozenset()

    def in_dtype(self, name: str, graph_dtype: str) -> str:
        """The dtype name of input ``name`` in a graph of float dtype ``graph_dtype``."""
        return self.input_dtypes.get(name, graph_dtype)

    def out_dtype(self, name: str, graph_dtype: str) -> str:
        """The dtype name of output ``name`` in a graph of float dtype ``graph_dtype``."""
        return self.output_dtypes.get(name, graph_dtype)


def _elem(dtype: str) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _model(op: XOp, g: Graph) -> bytes:
    """Serialized one-node model of ``g`` (node named ``probe``), outputs in ``g.outputs`` order."""
    from onnx import helper, numpy_helper

    values = g.values
    last = max(op.inputs.index(n) for n in values)
    node_in, graph_in, inits = [], [], []
    for name in op.inputs[:last + 1]:
        if name not in values:
            node_in.append("")
            continue
        node_in.append(name)
        dtype = op.in_dtype(name, g.dtype)
        arr = np.asarray(values[name]).astype(np.dtype(dtype))
        if name in g.constants:
            inits.append(numpy_helper.from_array(arr, name))
        if name in g.feeds or not g.feeds:
            # With nothing fed, the constants stay declared graph inputs (module docstring).
            graph_in.append(helper.make_tensor_value_info(name, _elem(dtype), list(arr.shape)))
    node_out = [n if n in g.outputs else "" for n in op.outputs]
    while node_out and node_out[-1] == "":
        node_out.pop()
    unknown = [o for o in g.outputs if o not in op.outputs]
    if unknown:
        raise ValueError(f"{op.op_type} has no output(s) {unknown}")
    graph_out = [helper.make_tensor_value_info(n, _elem(op.out_dtype(n, g.dtype)), None) for n in g.outputs]
    node = helper.make_node(op.op_type, node_in, node_out, name="probe", domain=op.domain, **dict(g.attrs))
    graph = helper.make_graph([node], f"epaudit.{op.op_type}", graph_in, graph_out, initializer=inits)
    opsets = [helper.make_opsetid("", 21)]
    if op.domain:
        opsets.append(helper.make_opsetid(op.domain, op.opset))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="epaudit")
    set_lowest_ir_version(model)  # the lowest IR its opsets and types need (issue 26)
    return model.SerializeToString()


def case(op: XOp, g: Graph) -> Case:
    """The model, runtime feeds (in each input's dtype) and reference of one graph.

    Raises:
        ValueError: the reference rejects the inputs, or an output the operator lacks (a probe bug).
    """
    model = _model(op, g)
    feeds = {n: np.asarray(a).astype(np.dtype(op.in_dtype(n, g.dtype))) for n, a in g.feeds.items()}
    ref = op.reference(g.values, g.attrs)
    reference = {o: np.asarray(ref[o], dtype=np.float64) for o in g.outputs}
    return Case(model=model, feeds=feeds, outputs=g.outputs, reference=reference,
                exact=frozenset(op.exact) & set(g.outputs))


def _integer_only(op: XOp, g: Graph) -> bool:
    return all(np.dtype(op.out_dtype(o, g.dtype)).kind not in _FLOAT_KINDS for o in g.outputs)


def probe(op: XOp, feature_id: str, subject: Graph, control: Graph, *, length: int = 16,
          control_op: XOp | None = None) -> Probe:
    """A probe of ``subject`` against ``control`` (built with ``control_op`` when given: an
    attribute that changes an output's dtype, MurmurHash3's ``positive``).

    ``length`` is the longest accumulation behind one output element (a dot product's K, a
    conv's C·kH·kW): :func:`~epaudit.probes.tolerance_for` widens the dtype's bound by
    ``sqrt(length / 16)`` above 16. An integer-only probe takes :data:`INTEGER_TOLERANCE`
    and its ``dtype`` is its first output's integer dtype.

    Under a :data:`~epaudit.catalog._contrib.TARGET_DTYPE` both graphs are
    :func:`~epaudit.catalog._contrib.retyped` first (inputs of a fixed dtype kept).
    """
    subject = retyped(subject, op.input_dtypes)
    control = retyped(control, (control_op or op).input_dtypes)
    if _integer_only(op, subject):
        tol, dtype = INTEGER_TOLERANCE, op.out_dtype(subject.outputs[0], subject.dtype)
    else:
        tol, dtype = tolerance_for(subject.dtype, length), subject.dtype
    return Probe(feature_id=feature_id, subject=case(op, subject), control=case(control_op or op, control),
                 tolerance=tol, dtype=dtype)


def feature(op: XOp, fid: str, dtype: str, changes: str, source: str, build: Callable[[], Probe],
            uses: Use | None = None) -> Feature:
    """A :class:`~epaudit.probes.Feature` of ``op``."""
    return Feature(id=fid, op_type=op.op_type, domain=op.domain, opset=op.opset, dtype=dtype,
                   changes=changes, source=source, build=build, uses=uses or Use())


def normal(rng: np.random.Generator, shape: Sequence[int], dtype: str = "float32", scale: float = 1.0,
           loc: float = 0.0) -> np.ndarray:
    """``loc + scale · N(0, 1)`` of ``shape`` rounded to ``dtype``, as float64."""
    return rounded(loc + scale * rng.standard_normal(tuple(shape)), dtype)
