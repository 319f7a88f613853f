"""Type variants of a generated probe: the same subject and control in another tensor type.

A generated probe is made in the type of its corpus case (almost always float32). Models
ship in float16 and bfloat16 (GPU and NPU deployments), int8/uint8 (quantized models),
int64 (shape arithmetic) and bool, and an EP registers a kernel per type: a kernel
registered for float but not for float16 moves a float16 model's node elsewhere, or is
wrong only in float16. A *type variant* retypes every tensor of the probed node bound to
its **first input's type parameter** (the type the surface counts,
:mod:`epaudit.surface.coverage`; ``T`` of Add, not ``Tind`` of Gather), in the subject and
the control alike, and keeps everything else.

* Values: the variant's inputs are the base probe's, rounded to the type (float16,
  double) or, for an integer type from float values, ``rint(4 x)`` clipped to the type's
  range (``|.|`` first for an unsigned type; ``x > 0`` for bool). The reference is
  computed from those very values: for a float type in float64 by ReferenceEvaluator on
  the model retyped to double (float where the schema has no double), so the EP's own
  rounding of the output is what the tolerance allows for; for an integer type at the
  type itself, and again at int64/uint64 where the schema allows it: a difference is an
  overflow (``out of range for the type``; the spec leaves integer overflow undefined) and
  the variant is not made. A float16 value or reference beyond float16's range is out of
  range too.
* Tolerance: :data:`epaudit.contract.probes.TOLERANCES` of the type, widened by
  ``sqrt(L / 16)`` for an accumulation of length ``L`` (as
  :func:`epaudit.contract.probes.tolerance_for` does for attention's head size; ``L`` is
  the largest input over the output, in elements) and never tighter than the case's own
  bounds for float16 and float32; exact for integer and bool outputs.
* A variant whose subject and control references do not separate by
  :data:`~epaudit.contract.probes.MIN_SEPARATION` bounds at its type is not made
  (``not decisive``).
* Which types: the schema's allowed types for that parameter at the stamp, among
  :data:`CANDIDATES`, that an EP registers: the installed onnxruntime's CPU EP (its
  registry, read once per build in a child) or, for float16, the GPU EPs whose float16 is
  their main type (WebGPU, CUDA: registries not readable on a CPU machine, so every
  float operator gets a float16 variant). bfloat16, which numpy lacks, is fed and read as
  float32 through a ``Cast`` on each side of the node (its values rounded to bfloat16
  first, so the casts are exact; the node computes in bfloat16). The 8-bit float and
  4-bit types are not made (``type not buildable``, counted).

Ids: the base probe's id plus ``.<type>`` (``onnx.Add.input:A=zeros.add.opset14.float16``);
``onnx.*.float16`` selects every float16 variant. Docs: ``docs/generated-catalog.md``
"Type variants".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...contract.probes import TOLERANCES, Case, Probe, Tolerance

#: Types a variant is made in (numpy names, as ids and ``Feature.dtype`` write them).
CANDIDATES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
              "uint32", "int64", "uint64", "bool")
#: Types the schema allows that are not made, and why (counted as ``type not buildable``).
UNBUILDABLE = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
               "float8e8m0", "int4", "uint4", "int2", "uint2", "float4e2m1")
#: Types made for every float operator whatever the CPU EP registers: the GPU EPs' main type.
GPU_TYPES = frozenset({"float16"})
#: onnx type strings -> numpy names.
_ONNX_NAME = {"tensor(float16)": "float16", "tensor(float)": "float32", "tensor(double)": "float64",
              "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(int16)": "int16",
              "tensor(uint16)": "uint16", "tensor(int32)": "int32", "tensor(uint32)": "uint32",
              "tensor(int64)": "int64", "tensor(uint64)": "uint64", "tensor(bool)": "bool",
              "tensor(bfloat16)": "bfloat16"}
#: Scale from float case values to integers: randn values of about +-3 become about +-12.
INT_SCALE = 4.0
#: The bound of a float64 variant: float32's rounding floor (2^-23 relative, times a few),
#: not float64's. The spec computes some steps in float32 whatever the input type
#: (LayerNormalization's ``stash_type`` default 1) and measured float64 runs of ORT CPU
#: against the evaluator differ by up to 5e-8 relative (AffineGrid, DFT, LayerNormalization
#: ``InvStdDev``): a kernel that is right to float32 precision is not a finding; one that
#: ignores an input or computes another function still is (separation at this bound).
DOUBLE_TOLERANCE = Tolerance(atol=1e-7, rtol=1e-6)
#: Largest integer a float64 reference holds exactly: an integer variant whose reference is
#: beyond it (BitwiseNot of small uint64 values is near 2**64) could not tell an answer off
#: by one from the right one (found by the self-test's ``perturb`` fault), so it is not made.
EXACT_LIMIT = 2.0 ** 53
#: Operators ORT's graph optimizer removes when their output is not a graph output
#: (``IdentityElimination``, onnxruntime/core/optimizer/identity_elimination.cc): between
#: the Casts of a bfloat16 variant no kernel would run them (measured: Identity's eight
#: bfloat16 variants read ``placement unknown`` on the CPU EP), so none is made.
ELIMINATED = frozenset({"Identity"})
#: Operators whose attributes are typed like their input (Imputer: ``imputed_value_floats``
#: for float X, ``imputed_value_int64s`` for int64 X): an integer variant of a float node is
#: another node (ORT CPU: "Empty value of imputed values"), so none is made.
TYPED_ATTRIBUTES = frozenset({"Imputer"})
#: Operators whose second input is a divisor: an integer zero there is a division by zero
#: (undefined for integers; ORT's CPU kernel traps).
_DIVISORS = frozenset({"Div", "Mod"})


def onnx_name(type_str: str) -> str:
    """``tensor(float)`` -> ``float32``; other strings unchanged after ``tensor(...)``."""
    return _ONNX_NAME.get(type_str, type_str[7:-1] if type_str.startswith("tensor(") else type_str)


def typed_input(schema) -> int:
    """Index of the input whose type names a node of ``schema``: the first input whose type
    parameter allows more than one type, else the first input (``-1``: no input). Where's
    ``condition`` is always bool: its type is its ``X``'s ``T``; Add's is ``A``'s. The surface
    applies the same rule to ORT's schemas (``epaudit/surface/registry.py``)."""
    if not schema.inputs:
        return -1
    allowed = {c.type_param_str: len(c.allowed_type_strs) for c in schema.type_constraints}
    for i, formal in enumerate(schema.inputs):
        if allowed.get(formal.type_str, 0) > 1:
            return i
    return 0


def first_param(schema) -> tuple[str, list[str]]:
    """The type parameter of the :func:`typed_input` of ``schema`` (``"T"``) and the numpy
    names of the types it allows; ``("", [])`` when that input has a fixed type or there is
    no input."""
    i = typed_input(schema)
    if i < 0:
        return "", []
    param = schema.inputs[i].type_str
    for c in schema.type_constraints:
        if c.type_param_str == param:
            return param, [onnx_name(t) for t in c.allowed_type_strs]
    return "", []


def _bound(schema, node, params: set[str]) -> tuple[dict[int, str], dict[int, str]]:
    """Node input and output index -> type parameter, for those whose formal parameter is
    one of ``params`` (a variadic last parameter covers the rest)."""
    def idx(formals, n):
        out = {}
        for i in range(n):
            f = formals[min(i, len(formals) - 1)] if formals else None
            if f is not None and (i < len(formals) or f.option.name == "Variadic") and f.type_str in params:
                out[i] = f.type_str
        return out
    return idx(schema.inputs, len(node.input)), idx(schema.outputs, len(node.output))


def _params(schema, target: str) -> set[str]:
    """The first input's type parameter, and every other parameter that allows ``target``
    (Attention's ``T2`` beside ``T1``: a float16 model has float16 V as well as Q and K;
    ORT's Attention function body refuses the node otherwise, measured)."""
    first, _ = first_param(schema)
    out = {first}
    for c in schema.type_constraints:
        if any(onnx_name(t) == target for t in c.allowed_type_strs):
            out.add(c.type_param_str)
    return out


def _elem(m, name: str) -> int | None:
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.name == name and vi.type.HasField("tensor_type"):
            return vi.type.tensor_type.elem_type
    for init in m.graph.initializer:
        if init.name == name:
            return init.data_type
    return None


def kind(target: str) -> str:
    """numpy's kind letter of a candidate type (``"f"`` for bfloat16, which numpy lacks)."""
    return "f" if target == "bfloat16" else np.dtype(target).kind


def convert(x: np.ndarray, target: str) -> np.ndarray | None:
    """``x`` as the variant's input of type ``target`` (see the module doc); ``None`` when a
    float16 value would be infinite where ``x`` is finite. bfloat16: float32 values rounded
    to the nearest bfloat16 (the graph's input Cast is then exact)."""
    x = np.asarray(x)
    if target == "bfloat16":
        from ..models import round_to_bfloat16

        f = x.astype(np.float32)
        finite = np.isfinite(f)
        if np.isnan(f).any() or not np.isfinite(x.astype(np.float64)[finite]).all():
            return None
        out = f.copy()  # infinities are bfloat16 values too (Cast's cases feed them)
        out[finite] = round_to_bfloat16(f[finite])
        return out
    t = np.dtype(target)
    if t.kind == "f":
        with np.errstate(over="ignore"):
            y = x.astype(t)
        if np.issubdtype(x.dtype, np.floating) and bool((np.isinf(y) & np.isfinite(x)).any()):
            return None
        return np.asarray(y)
    if t.kind == "b":
        return np.asarray(x > 0) if x.dtype.kind != "b" else x.copy()
    v = x.astype(np.float64)
    if x.dtype.kind == "f":
        v = np.rint(v * INT_SCALE)
    if t.kind == "u":
        v = np.abs(v)
    info = np.iinfo(t)
    return np.asarray(np.clip(np.nan_to_num(v), info.min, info.max)).astype(t)


def accumulation(feeds: dict[str, np.ndarray], refs: dict[str, np.ndarray]) -> int:
    """``L``: the largest input's elements over the smallest non-empty output's (>= 1)."""
    ins = [a.size for a in feeds.values()] or [1]
    outs = [a.size for a in refs.values() if a.size] or [1]
    return max(1, int(max(ins) // max(1, min(outs))))


def tolerance(target: str, base: Tolerance, length: int, exact_only: bool) -> Tolerance:
    """The variant's bound (see the module doc); ``base`` is the base probe's."""
    if exact_only:
        return INTEGER_TOLERANCE
    if target not in TOLERANCES:  # the float outputs are of another parameter (EyeLike's T2)
        return base
    t = TOLERANCES[target]
    f = max(1.0, math.sqrt(length / 16))
    if target in ("float16", "float32"):  # never tighter than the case's own bounds
        return Tolerance(atol=max(t.atol * f, base.atol), rtol=max(t.rtol * f, base.rtol))
    if target == "float64":
        t = DOUBLE_TOLERANCE
    return Tolerance(atol=t.atol * f, rtol=t.rtol * f)


#: Tolerance of probes whose outputs are all integer or bool (compared exactly): a bound
#: of 0.05 makes a difference of 1 twenty bounds, so the blind-probe check reads them.
INTEGER_TOLERANCE = Tolerance(atol=0.05, rtol=0.0)


class EvalTimeout(Exception):
    """An evaluator call ran past its CPU time (raised by ``derive.evaluate``)."""


class Skip(Exception):
    """The variant is not made; ``args[0]`` is the reason (a key of ``derive.REASONS``)."""


def _retype(model, schema, param: str, target: str, feeds: dict[str, np.ndarray]):
    """The model with the node's ``param``-bound tensors in ``target`` and its feeds and
    initializers converted; ``(model, feeds)``.

    Raises:
        Skip: a value out of the type's range.
    """
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    ins, outs = _bound(schema, node, _params(schema, target))
    # The first input's parameter always; another only where its tensor has the type the
    # first input has (Attention's float attn_mask moves with Q; a bool mask stays bool).
    at = typed_input(schema)
    first = _elem(m, node.input[at]) if 0 <= at < len(node.input) and node.input[at] else None
    names = {node.input[i] for i, p in ins.items() if node.input[i] and (p == param or _elem(m, node.input[i]) == first)}
    names |= {node.output[j] for j, p in outs.items() if p == param or _elem(m, node.output[j]) in (first, None)}
    elem = onnx.TensorProto.BFLOAT16 if target == "bfloat16" else onnx.helper.np_dtype_to_tensor_dtype(np.dtype(target))
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.name in names and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.elem_type = elem
    if first is not None:
        _retype_bodies(node, first, elem)
    new_feeds = {}
    for k, v in feeds.items():
        if k in names:
            c = convert(v, target)
            if c is None:
                raise Skip("out of range for the type")
            new_feeds[k] = c
        else:
            new_feeds[k] = v
    for init in m.graph.initializer:
        if init.name in names:
            c = convert(np.asarray(numpy_helper.to_array(init)).astype(np.float64)
                        if init.data_type == onnx.TensorProto.BFLOAT16 else numpy_helper.to_array(init), target)
            if c is None:
                raise Skip("out of range for the type")
            if target == "bfloat16":
                init.CopyFrom(onnx.helper.make_tensor(init.name, elem, c.shape, c.ravel().tolist()))
            else:
                init.CopyFrom(numpy_helper.from_array(c, init.name))
    if kind(target) in "iub" and node.op_type in _DIVISORS and len(node.input) > 1:
        d = node.input[1]
        v = new_feeds.get(d)
        if v is None:
            v = next((numpy_helper.to_array(i) for i in m.graph.initializer if i.name == d), None)
        if v is not None and bool((np.asarray(v) == 0).any()):
            raise Skip("out of range for the type")
    return m, new_feeds


def _retype_bodies(node, old: int, new: int) -> None:
    """A control-flow node's body graphs (Loop's ``body``, Scan's, If's branches): every
    input, output and value info of the element type ``old`` becomes ``new``; the loop's
    iteration number (int64) and condition (bool) keep theirs when ``old`` is float. Right
    for bodies that pass the carried values through (``synthetic_control``); a body that
    computes in ``old`` with an operator the new type lacks is refused by the checker
    (``type refused by the schema``)."""
    for a in node.attribute:
        graphs = [a.g] if a.HasField("g") else list(a.graphs)
        for g in graphs:
            for vi in list(g.input) + list(g.output) + list(g.value_info):
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == old:
                    vi.type.tensor_type.elem_type = new
            for inner in g.node:
                _retype_bodies(inner, old, new)


def variant_case(case: Case, schema, param: str, target: str, allowed: list[str], evaluate) -> Case:
    """``case`` in ``target``, with the float64 reference of its own (rounded) values.

    Raises:
        Skip: out of range, evaluator trouble (the reason names it).
    """
    import onnx

    model = onnx.load_from_string(case.model)
    vm, vfeeds = _retype(model, schema, param, target, dict(case.feeds))
    k = kind(target)
    if k == "f":
        like = "float64" if "float64" in allowed else "float32"
        em, efeeds = _retype(vm, schema, param, like, vfeeds)
        ref = _evaluate(evaluate, em, efeeds)
    else:
        ref = _evaluate(evaluate, vm, vfeeds)
        floats = {vi.name for vi in vm.graph.output
                  if vi.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)}
        if any(n in floats and v.dtype.kind in "iub" for n, v in ref.items()):
            # A float output computed in the input's integer type: onnx.reference's ML operators
            # do so (SVMClassifier's Z, Scaler's Y truncated; ORT computes them in float, as the
            # declared output type says), so the reference is the same values in float64.
            if "float64" not in allowed:
                raise Skip("evaluator raised")
            dm, dfeeds = _retype(vm, schema, param, "float64", vfeeds)
            ref = {n: (_evaluate(evaluate, dm, dfeeds)[n] if n in floats else v) for n, v in ref.items()}
        if k in "iu" and "float64" in allowed:  # beyond the type's range, int64's too (Pow 12^24)
            fm, ffeeds = _retype(vm, schema, param, "float64", vfeeds)
            info = np.iinfo(np.dtype(target))
            for k, v in _evaluate(evaluate, fm, ffeeds).items():
                if v.dtype.kind == "f" and bool(((v > info.max) | (v < info.min)).any()):
                    raise Skip("out of range for the type")
        wide = "int64" if k == "i" else "uint64" if k == "u" else ""
        if wide and wide != target and wide in allowed:
            wm, wfeeds = _retype(vm, schema, param, wide, vfeeds)
            wref = _evaluate(evaluate, wm, wfeeds)
            for k, v in ref.items():
                w = wref.get(k)
                if w is None or w.shape != v.shape or not np.array_equal(v.astype(np.float64), w.astype(np.float64)):
                    raise Skip("out of range for the type")
    if any(v.dtype == object for v in ref.values()):
        raise Skip("evaluator raised")
    if k in "iu" and any(v.dtype.kind in "iu" and v.size and bool((np.abs(v.astype(np.float64)) > EXACT_LIMIT).any())
                            for v in ref.values()):
        raise Skip("out of range for the type")  # float64 references hold integers exactly up to 2**53 only
    for vi in vm.graph.output:
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16 and vi.name in ref:
            r = ref[vi.name]
            if bool((np.abs(r[np.isfinite(r)]) > 65504).any()):
                raise Skip("out of range for the type")
    vm_ref = {k: np.asarray(v) for k, v in ref.items()}
    _set_output_shapes_keep_types(vm, vm_ref)
    try:
        onnx.checker.check_model(vm, full_check=True)
    except Exception as exc:  # noqa: BLE001
        raise Skip("type refused by the schema") from exc
    if target == "bfloat16":
        # float32 graph inputs and outputs around the node, each through a Cast (ORT's
        # Python API has no bfloat16 array): the node under test computes in bfloat16.
        widen_bfloat16(vm)
        # An initializer that is also a graph input (an overridable default: the operator
        # itself's constant, itself.py) is now read through the input Cast: float32 too.
        declared = {vi.name for vi in vm.graph.input}
        for init in vm.graph.initializer:
            if init.name in declared and init.data_type == onnx.TensorProto.BFLOAT16:
                from onnx import numpy_helper

                vals = np.asarray(numpy_helper.to_array(init)).astype(np.float32)
                init.CopyFrom(numpy_helper.from_array(vals, init.name))
    f64 = {n: np.asarray(v).astype(np.float64) for n, v in vm_ref.items()}
    exact = frozenset(vi.name for vi in vm.graph.output
                      if np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).kind != "f")
    return Case(vm.SerializeToString(), vfeeds, case.outputs, f64, exact)


def widen_bfloat16(model) -> bool:
    """Give bfloat16 graph inputs/outputs float32 types with ``Cast`` nodes inside the graph.

    Returns whether anything changed. The node under test keeps its bfloat16 types.
    """
    from onnx import TensorProto, helper

    changed = False
    head, tail = [], []
    for vi in model.graph.input:
        if vi.type.tensor_type.elem_type != TensorProto.BFLOAT16:
            continue
        inner = f"{vi.name}.bf16"
        for node in model.graph.node:
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
        head.append(helper.make_node("Cast", [vi.name], [inner], to=TensorProto.BFLOAT16, name=f"cast_in.{vi.name}"))
        changed = True
    for vi in model.graph.output:
        if vi.type.tensor_type.elem_type != TensorProto.BFLOAT16:
            continue
        inner = f"{vi.name}.bf16"
        for node in model.graph.node:
            node.output[:] = [inner if x == vi.name else x for x in node.output]
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
        tail.append(helper.make_node("Cast", [inner], [vi.name], to=TensorProto.FLOAT, name=f"cast_out.{vi.name}"))
        changed = True
    if changed:
        nodes = head + list(model.graph.node) + tail
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return changed


def _set_output_shapes_keep_types(m, outs: dict[str, np.ndarray]) -> None:
    for vi in m.graph.output:
        if vi.name in outs and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            shape.ClearField("dim")
            for d in np.shape(outs[vi.name]):
                shape.dim.add().dim_value = int(d)


def _evaluate(evaluate, model, feeds) -> dict[str, np.ndarray]:
    try:
        with np.errstate(all="ignore"):
            got = evaluate(model, feeds)
    except EvalTimeout as exc:
        raise Skip("evaluator timeout") from exc
    except Exception as exc:  # noqa: BLE001
        raise Skip("evaluator raised") from exc
    if any(v.dtype.kind in "fc" and bool(np.isnan(v).any()) for v in got.values()):
        raise Skip("reference has NaN")
    return got


def first_input_type(model, op: str | None = None) -> str:
    """The numpy name of the element type of the probed node's :func:`typed_input`, the type
    the surface counts and type variants retype (``float32`` for Greater, whose output is
    bool; ``int8`` for DequantizeLinear; ``X``'s for Where); ``""`` when it is not a typed
    graph input or initializer."""
    import onnx.defs
    from onnx import helper

    node = next((n for n in model.graph.node if op is None or n.op_type == op), None)
    if node is None:
        return ""
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    opset = next((o.version for o in model.opset_import if (o.domain or "") in ((domain,) if domain else ("", "ai.onnx"))), 0)
    try:
        at = max(typed_input(onnx.defs.get_schema(node.op_type, opset, domain)), 0)
    except Exception:  # noqa: BLE001 - no schema: the first input
        at = 0
    first = node.input[at] if at < len(node.input) and node.input[at] else next((x for x in node.input if x), None)
    if first is None:
        return ""
    for vi in model.graph.input:
        if vi.name == first and vi.type.HasField("tensor_type"):
            try:
                return np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).name
            except Exception:  # noqa: BLE001 - a type numpy has no dtype for
                return ""
    for init in model.graph.initializer:
        if init.name == first:
            try:
                return np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type)).name
            except Exception:  # noqa: BLE001
                return ""
    return ""


def targets(schema, base_dtype: str, registered: set[str] | None) -> tuple[list[str], list[str]]:
    """``(types to make, types not buildable)`` for a probe of ``base_dtype`` (see the
    module doc); ``registered``: the CPU EP's types for the operator (``None``: unknown,
    every candidate)."""
    param, allowed = first_param(schema)
    if not param or base_dtype not in allowed:
        return [], []
    floats = any(kind(a) == "f" for a in allowed if a in CANDIDATES)
    make = [t for t in CANDIDATES if t in allowed and t != base_dtype
            and (registered is None or t in registered or (floats and t in GPU_TYPES))]
    skipped = [t for t in allowed if t in UNBUILDABLE and t != base_dtype
               and (registered is None or t in registered)]
    return make, skipped


def variants(probe: Probe, schema, registered: set[str] | None, evaluate, separation, min_sep: float
             ) -> tuple[list[tuple[str, Probe, float]], list[tuple[str, str]]]:
    """Type variants of ``probe`` (made in its case's type): ``([(type, probe, separation)],
    [(reason, type)])``; never raises for a variant's trouble."""
    param, allowed = first_param(schema)
    make, skipped = targets(schema, probe.dtype, registered)
    made, drops = [], [("type not buildable", t) for t in skipped]
    interpolates = bool(make) and _interpolates(probe)  # read once, not per type
    op = _op(probe) if make else ""
    for t in make:
        if kind(t) in "iub" and interpolates:
            drops.append(("known reference problem", t))
            continue
        if kind(t) in "iub" and op in TYPED_ATTRIBUTES:
            drops.append(("type refused by the schema", t))
            continue
        if t == "bfloat16" and op in ELIMINATED:
            drops.append(("removed by the optimizer", t))
            continue
        try:
            subject = variant_case(probe.subject, schema, param, t, allowed, evaluate)
            control = variant_case(probe.control, schema, param, t, allowed, evaluate)
        except Skip as s:
            drops.append((str(s.args[0]), t))
            continue
        exact_only = len(subject.exact) == len(subject.outputs)
        tol = tolerance(t, probe.tolerance, accumulation(dict(subject.feeds), dict(subject.reference)), exact_only)
        if probe.tolerance.atol > TOLERANCES["float32"].atol * 10 and not exact_only:
            # a magnitude bound (DFT): it scales with the transform, not the type
            tol = Tolerance(atol=max(tol.atol, probe.tolerance.atol), rtol=tol.rtol)
        v = Probe(probe.feature_id + "." + t, subject, control, tol, t, *_rest(probe))
        apart = separation(v)
        if apart < min_sep:
            drops.append(("not decisive", t))
            continue
        made.append((t, v, apart))
    return made, drops


def _op(probe: Probe) -> str:
    import onnx

    return onnx.load_from_string(probe.subject.model).graph.node[0].op_type


def _interpolates(probe: Probe) -> bool:
    """Whether an integer result of subject or control needs a rounding the spec does not
    define, so neither onnx.reference nor a kernel is a reference for an integer variant:
    a Resize in ``linear`` mode (an interpolated value; onnx.reference and ORT CPU differ by
    1 on some elements, measured on every linear int8/uint8/int32 variant; not found
    upstream), or a Shrink whose float ``bias`` is not a whole number (``x - bias`` for an
    integer ``x``: onnx.reference and ORT CPU truncate the float result, OpenVINO 1.24.1
    converts ``bias`` to the integer type first and reads ``bias = 0.25`` as 0, IGNORED; the
    Shrink section of the operator spec says neither; ``lambd`` is only compared with)."""
    import onnx

    for case in (probe.subject, probe.control):
        if case is None:
            continue
        node = onnx.load_from_string(case.model).graph.node[0]
        if node.op_type == "Resize" and any(a.name == "mode" and a.s == b"linear" for a in node.attribute):
            return True
        if node.op_type == "Shrink" and any(a.name == "bias" and a.type == onnx.AttributeProto.FLOAT
                                            and a.f != int(a.f) for a in node.attribute):
            return True
    return False


def _rest(probe: Probe) -> tuple[Any, ...]:
    """The Probe fields after ``dtype`` (node name and the rest), unchanged."""
    from dataclasses import fields

    names = [f.name for f in fields(Probe)]
    return tuple(getattr(probe, n) for n in names[names.index("dtype") + 1:])
