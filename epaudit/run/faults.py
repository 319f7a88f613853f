"""Deliberately broken EPs: the faults a worker can be told to commit.

A provider in the matrix may carry ``inject_fault = "<fault>"`` (a test hook, also what
the tests use) so that a working EP, usually CPU, behaves the way broken EPs do, through
real ORT sessions rather than mocks of ORT. The expected outcome of each fault is what
the tests assert.

Parent-side faults change what is sent to the worker:

* ``ignore`` — the subject's feature input is dropped from the graph (or its attribute
  reset): the worker runs the control graph where it was asked for the subject.
  Expected ``IGNORED``.
* ``refuse`` — the probed node's float tensors are retyped to bfloat16, a type the CPU
  kernels do not register, so ORT itself refuses with ``NOT_IMPLEMENTED``. Expected
  ``REJECTED``.

* ``decompose`` — the node under test is wrapped in a model-local function, which ORT
  inlines before partitioning (its nodes come back named ``_inlfunc_<function>_<node>``):
  the node is gone and its body ran, exactly what ORT does with a function operator that
  has no kernel. Expected ``DECOMPOSED``.

Worker-side faults (see ``epaudit/worker/faults.py``): ``fallback`` (the fallback guard is skipped and the
session asks for CUDA, which ORT silently replaces by CPU on a machine without it:
expected ``FALLBACK``), ``nan`` (``NAN``), ``perturb`` (element 0 of the first output moved by
10x its tolerance bound: ``MISMATCH``), ``unwritten`` (the first output read back from a
poisoned buffer the kernel never wrote: ``UNWRITTEN``), ``kill`` (``CRASH``), ``hang``
(``TIMEOUT``).

Two faults combine a placement gap with a wrong answer, the most dangerous case (the node
ran somewhere the gate does not look, and computed wrongly): ``fallback_wrong``
(``fallback`` and ``perturb``) and ``decompose_wrong`` (``decompose`` and ``perturb``). Both
must read ``MISMATCH`` — a wrong answer first — with the placement (``fallback``,
``decomposed``) kept in the evidence (:data:`PLACEMENT`).
"""

from __future__ import annotations

import numpy as np

from ..catalog.models import ONNX_TYPES
from ..contract.outcomes import Outcome
from ..contract.probes import Case, Probe

#: Fault -> the outcome a correct classifier must give it.
EXPECTED: dict[str, Outcome] = {
    "ignore": Outcome.IGNORED,
    "refuse": Outcome.REJECTED,
    "fallback": Outcome.FALLBACK,
    "nan": Outcome.NAN,
    "perturb": Outcome.MISMATCH,
    "unwritten": Outcome.UNWRITTEN,
    "kill": Outcome.CRASH,
    "hang": Outcome.TIMEOUT,
    "decompose": Outcome.DECOMPOSED,
    "fallback_wrong": Outcome.MISMATCH,
    "decompose_wrong": Outcome.MISMATCH,
}

#: Fault -> the placement verdict its cell's evidence must hold as well (epaudit/classify/placement.py).
PLACEMENT: dict[str, str] = {"fallback": "fallback", "decompose": "decomposed",
                             "fallback_wrong": "fallback", "decompose_wrong": "decomposed"}

#: Faults applied inside the worker process.
WORKER_FAULTS = frozenset({"fallback", "nan", "perturb", "unwritten", "kill", "hang",
                           "fallback_wrong", "decompose_wrong"})
#: Faults that move one output element (``perturb`` and the two combined faults).
PERTURBING = frozenset({"perturb", "fallback_wrong", "decompose_wrong"})
#: Domain of the model-local function ``decompose`` wraps the node in.
FAULT_DOMAIN = "epaudit.fault"

#: How far ``perturb`` moves one element, in tolerance bounds: far outside, yet finite.
PERTURB_BOUNDS = 10.0

_FLOATS = {ONNX_TYPES["float32"], ONNX_TYPES["float16"], ONNX_TYPES["float64"]}
_BFLOAT16 = ONNX_TYPES["bfloat16"]


def retype_to_bfloat16(model_bytes: bytes) -> bytes:
    """The same model with every float graph input/output (and cast target) as bfloat16.

    The node keeps its op and attributes; only its type binding changes, so the kernel
    lookup fails in ORT (CPU registers no bfloat16 GroupQueryAttention, and inlined
    bfloat16 Attention hits ``Expand(13)``), a real ``NOT_IMPLEMENTED``.
    """
    import onnx

    model = onnx.load_from_string(model_bytes)
    io = list(model.graph.input) + list(model.graph.output)
    # A graph of integers only (a generated probe of BitShift, an int8 Clip) has no float
    # to retype: its integer inputs and outputs become bfloat16, which no integer kernel takes.
    floats_only = any(vi.type.tensor_type.elem_type in _FLOATS for vi in io)
    for vi in io:
        if vi.type.tensor_type.elem_type in _FLOATS or not floats_only:
            vi.type.tensor_type.elem_type = _BFLOAT16
    # bfloat16 probe graphs already cast around the node: make the casts a no-op pair.
    for node in model.graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to":
                attr.i = _BFLOAT16
    return model.SerializeToString()


def subject_for(fault: str | None, subject: Case, control: Case | None, node: str | None = "probe") -> Case:
    """The case the worker is sent in place of ``subject`` under a parent-side fault.

    Raises:
        ValueError: ``ignore`` for a check without a control (nothing to run instead).
    """
    if fault == "ignore":
        if control is None:
            raise ValueError("fault 'ignore' needs a control model; this check has none")
        return control
    if fault == "refuse":
        return Case(retype_to_bfloat16(subject.model), subject.feeds, subject.outputs,
                    subject.reference)
    if fault in ("decompose", "decompose_wrong"):
        return Case(wrap_in_function(subject.model, node), subject.feeds, subject.outputs,
                    subject.reference, subject.exact)
    return subject


def wrap_in_function(model_bytes: bytes, node_name: str) -> bytes:
    """The same model with node ``node_name`` wrapped in a model-local function of one node.

    ONNX Runtime inlines model-local functions before it partitions the graph (the inlined
    node is named ``_inlfunc_<function>_<node>``), so the session runs the same kernel under
    another node: what a function operator without a kernel looks like (IR >= 8: functions).

    Raises:
        ValueError: no node of that name.
    """
    import onnx
    from onnx import helper

    model = onnx.load_from_string(model_bytes)
    nodes = list(model.graph.node)
    at = next((i for i, n in enumerate(nodes) if n.name == node_name), None)
    if at is None:
        raise ValueError(f"fault 'decompose': the model has no node named {node_name!r}")
    inner = onnx.NodeProto()
    inner.CopyFrom(nodes[at])
    inputs = [x for x in inner.input if x]
    outputs = [x for x in inner.output if x]
    fname = f"Decomposed{inner.op_type}"
    fn = helper.make_function(FAULT_DOMAIN, fname, inputs, outputs, [inner],
                              opset_imports=list(model.opset_import))
    outer = helper.make_node(fname, inputs, outputs, name=node_name, domain=FAULT_DOMAIN)
    del model.graph.node[:]
    model.graph.node.extend(nodes[:at] + [outer] + nodes[at + 1:])
    model.functions.append(fn)
    model.opset_import.append(helper.make_opsetid(FAULT_DOMAIN, 1))
    model.ir_version = max(model.ir_version, 8)
    return model.SerializeToString()


def worker_args(fault: str | None, probe: Probe) -> dict | None:
    """Arguments a worker-side fault needs from the probe (``perturb`` and the faults that
    combine it: output and delta)."""
    if fault not in PERTURBING:
        return None
    name = _perturbable(probe)
    if name is None:
        return None  # every output is empty: nothing to perturb (not_applicable says so)
    ref0 = float(np.asarray(probe.subject.reference[name]).reshape(-1)[0])
    delta = PERTURB_BOUNDS * float(probe.tolerance.bound(np.float64(ref0)))
    if name in probe.subject.exact:
        delta = max(delta, 1.0)  # an integer output: a fraction would truncate to no change
        ctrl = probe.control.reference.get(name) if probe.control is not None else None
        if ctrl is not None and np.size(ctrl) and float(np.asarray(ctrl).reshape(-1)[0]) == ref0 + delta:
            delta += 1.0  # the perturbed value must not land on the control's (read as IGNORED)
    return {"output": name, "delta": delta}


def _perturbable(probe: Probe) -> str | None:
    """The first output whose element 0 has a finite reference (a generated probe's first
    output can be empty: a zero-size slice, a Shape with start > end), or ``None``."""
    for name in probe.subject.outputs:
        ref = np.asarray(probe.subject.reference[name])
        # element 0 is the one the worker moves: against an infinite reference (ReduceMin
        # of an empty set) a finite step would leave it equal
        if ref.size and np.isfinite(ref.reshape(-1)[0]):
            return name
    return None


def not_applicable(fault: str, probe: Probe) -> str:
    """Why ``fault`` cannot be committed on ``probe`` (``""`` when it can): ``nan`` needs
    a floating-point graph output, and a graph of integer or bool outputs has none;
    ``perturb`` needs an output with an element."""
    ref = probe.subject.reference
    if fault in ("decompose", "decompose_wrong") and probe.node_name is None:
        return "not applicable: the whole graph is under test, so there is no one node to wrap in a function"
    if fault in PERTURBING and _perturbable(probe) is None:
        return "not applicable: no output with a finite element 0 (empty or infinite): nothing to perturb"
    if fault == "unwritten" and not np.size(ref[probe.subject.outputs[0]]):
        return "not applicable: the output the fault leaves unwritten is empty"
    if fault != "nan":
        return ""
    import onnx

    model = onnx.load_from_string(probe.subject.model)
    floats = [vi.name for vi in model.graph.output
              if vi.type.tensor_type.elem_type in _FLOATS | {_BFLOAT16} and np.size(ref[vi.name])]
    if not floats:
        return "not applicable: no non-empty floating-point output to hold a NaN (integer, bool or empty outputs)"
    if not np.isfinite(np.asarray(ref[floats[0]]).reshape(-1)[0]):
        return "not applicable: the element the fault writes NaN into has a non-finite reference"
    return ""
