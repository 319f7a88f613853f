"""A configuration made into a probe: the one-node model, its feeds and a float64 reference.

:func:`build` returns a :class:`~epaudit.contract.probes.Probe` (the same contract as the
catalog's, so the runner, the classifier and the repro writer take it as they are) or a
:class:`Skip` with its reason, never raises for a configuration's trouble:

1. the model: one node named ``probe``, every present input a graph input, the outputs'
   types and shapes from onnx's strict shape inference (a configuration it refuses is
   skipped: ``onnx rejects``); the IR version its opsets and types need
   (:func:`epaudit.catalog.models.set_lowest_ir_version`); then the full checker;
2. the reference: ``onnx.reference.ReferenceEvaluator`` on the same node with every float
   input and output widened to float64 (the exact answer the node's dtype then rounds:
   the result is cast to the output's dtype), falling back to the node's own dtype where the
   evaluator has no float64 path; contrib operators take epaudit's references
   (:mod:`.contrib`). The evaluator runs under a CPU-time limit
   (:data:`epaudit.catalog.corpus.derive.EVAL_SECONDS`). The evaluator's answer in the
   node's own dtype is kept as ``alt`` where it differs: a MISMATCH the EP shares with it
   is a question of the reference's precision, not a finding (:mod:`.engine`);
3. a NaN in a reference whose inputs hold none (ReduceMean of an empty set: the spec says
   "undefined") is skipped; so is a configuration whose opset is older than the operator's
   newest and whose node the schema history does not call the same there
   (:func:`epaudit.catalog.corpus.derive.same_semantics`);
4. the tolerance: :func:`epaudit.catalog.corpus.derive.tolerance` of the output dtypes,
   its absolute bound widened to a few hundred units in the last place of the largest
   ``|term|`` (the reference of the same node on ``|inputs|``): a float32 sum of 1e4-sized
   terms carries that rounding error however right the kernel is;
5. the rules of the spec onnx's checker does not see (:mod:`.rules`): class indices in
   ``[0, C)``, a loss' weight of size C (else ``outside the spec``), DynamicQuantizeLinear of a
   zero range (``undefined result``), a stage one ``stash_type`` makes float32 (its bound);
6. the control: the first data input baked in as zeros (else ones), as the catalog's
   operator-itself probes do (:func:`epaudit.catalog.corpus.itself.with_constant`), kept when
   its reference is at least ``MIN_SEPARATION`` bounds from the subject's, so an EP that
   ignores the input reads ``IGNORED``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, Case, Probe, Tolerance
from . import rules
from .config import MAX_ELEMENTS, Config, finding_id
from .values import draw

#: The absolute bound's floor per float dtype, in units of the largest |term| (see step 4).
MAGNITUDE_ATOL = {"float16": 4e-3, "float32": 2e-5, "float64": 1e-12}


@dataclass(frozen=True)
class Built:
    """A configuration made into a probe.

    Attributes:
        config: the configuration.
        probe: its probe (feature id :func:`~.config.finding_id`).
        alt: the evaluator's answer in the node's own dtype, by output, where it differs
            from the float64 reference (``None`` where it does not).
    """

    config: Config
    probe: Probe
    alt: dict | None = None


@dataclass(frozen=True)
class Skip:
    """A configuration not made into a probe.

    Attributes:
        reason: one of :data:`REASONS`' keys.
        detail: what onnx or the reference said (one line, shortened).
    """

    reason: str
    detail: str = ""


#: Why a configuration was skipped (every sweep counts them).
REASONS = {
    "onnx rejects": "onnx's strict shape inference or full checker refuses the model",
    "reference raised": "the reference cannot compute the configuration",
    "reference timeout": "the reference ran past its CPU-time limit",
    "too large": "an input or output over MAX_ELEMENTS elements",
    "undefined result": "a NaN in the reference of inputs without NaN (the spec leaves it undefined)",
    "stamp semantics unverified": "the schema history does not call the node the same at this opset",
    "no reference": "a contrib operator epaudit has no reference for",
    "outside the spec": "a rule of the spec onnx does not check is broken (a loss' weight not of size C: sweep/rules.py)",
    "duplicate": "the same configuration was drawn before",
    "known reference problem": "the reference is known to be wrong there (sweep/known.py, with the clause)",
    "no control": "no decisive control, and the EP runs the control (the self-test's ignore fault)",
}


def feeds_of(config: Config) -> dict[str, np.ndarray]:
    """The feeds: ``data`` inputs drawn from the value kind and seed, ``param`` inputs as given."""
    out = {}
    for i, x in enumerate(config.inputs):
        if x is None or x.name in out:
            continue
        if x.role == "param":
            out[x.name] = np.asarray(x.value, dtype=x.dtype).reshape(x.shape)
        else:
            rng = np.random.default_rng([config.seed, i])
            ruled = rules.feed(config, i, rng)
            out[x.name] = draw(config.values, x.dtype, x.shape, rng) if ruled is None else ruled
    return out


def model_of(config: Config, output_types=None):
    """The ``ModelProto`` of ``config`` (outputs untyped unless ``output_types`` gives
    ``name -> (elem_type, shape)``)."""
    from onnx import helper

    from ..catalog.models import set_lowest_ir_version

    node_in = ["" if x is None else x.name for x in config.inputs]
    if config.omit == "cut":
        while node_in and node_in[-1] == "":
            node_in.pop()
    graph_inputs, seen = [], set()
    for x in config.inputs:
        if x is None or x.name in seen:
            continue
        seen.add(x.name)
        dims = [f"{x.name}_d{i}" for i in range(len(x.shape))] if config.symbolic else list(x.shape)
        graph_inputs.append(helper.make_tensor_value_info(x.name, helper.np_dtype_to_tensor_dtype(np.dtype(x.dtype)),
                                                          dims))
    outs = []
    for name in config.outputs:
        if not name:
            continue
        if output_types and name in output_types:
            elem, shape = output_types[name]
            outs.append(helper.make_tensor_value_info(name, elem, shape))
        else:
            vi = helper.ValueInfoProto()
            vi.name = name
            outs.append(vi)
    node = helper.make_node(config.op, node_in, list(config.outputs), name=PROBE_NODE_NAME, domain=config.domain,
                            **{k: list(v) if isinstance(v, tuple) else v for k, v in config.attributes})
    graph = helper.make_graph([node], f"epaudit.sweep.{config.op}", graph_inputs, outs)
    opsets = [helper.make_opsetid(d, v) for d, v in config.opsets] or [helper.make_opsetid(config.domain, config.opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="epaudit-sweep")
    set_lowest_ir_version(model)
    return model


def _widened(model, feeds):
    """The same model with float inputs and outputs as float64, and its float64 feeds."""
    import onnx
    from onnx import TensorProto

    m = onnx.ModelProto()
    m.CopyFrom(model)
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    for vi in m.graph.input:
        if vi.type.tensor_type.elem_type in floats:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for vi in m.graph.output:
        vi.type.tensor_type.ClearField("elem_type")
        vi.type.tensor_type.ClearField("shape")
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}
    return m, wide


def _known(config: Config) -> bool:
    """Whether onnx has the operator's schema (else :mod:`.contrib` computes its reference)."""
    from .config import schema_of

    return not config.domain and schema_of(config.op, config.domain, config.opset) is not None


def _evaluate(config: Config, model, feeds) -> dict[str, np.ndarray]:
    import warnings

    # numpy's warnings from inside the evaluator ("Mean of empty slice", "Degrees of
    # freedom <= 0" of an empty BatchNormalization) are not news: the reference's values
    # (NaN where the spec gives NaN) are what is compared. They printed into the sweep's
    # terminal output, one per configuration.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _evaluate_quietly(config, model, feeds)


def _evaluate_quietly(config: Config, model, feeds) -> dict[str, np.ndarray]:
    from .contrib import ADAPTERS, UseEvaluator

    if not _known(config) or (config.domain, config.op) in ADAPTERS:
        from .contrib import reference

        try:
            return reference(config, feeds)
        except UseEvaluator:
            pass
    from ..catalog.corpus.derive import evaluate

    return evaluate(model, feeds)


def references(config: Config, model, feeds, out_dtypes) -> tuple[dict, dict | None]:
    """``(reference, alt)`` as float64 arrays by output name (see the module docstring).

    Raises:
        anything the reference raises (the caller skips the configuration).
    """
    native = None
    try:
        wide_model, wide_feeds = _widened(model, feeds)
        got = _evaluate(config, wide_model, wide_feeds)
        ref = {k: np.asarray(v).astype(out_dtypes[k]).astype(np.float64) for k, v in got.items() if k in out_dtypes}
    except Exception:  # noqa: BLE001 - no float64 path: the node's own dtype
        native = _evaluate(config, model, feeds)
        ref = {k: np.asarray(v).astype(np.float64) for k, v in native.items() if k in out_dtypes}
    if native is None and _known(config):
        try:
            native = _evaluate(config, model, feeds)
        except Exception:  # noqa: BLE001 - the widened answer stands alone
            native = None
    alt = None
    if native is not None:
        alt64 = {k: np.asarray(v).astype(np.float64) for k, v in native.items() if k in ref}
        if any(alt64[k].shape != ref[k].shape or not np.array_equal(alt64[k], ref[k], equal_nan=True) for k in alt64):
            alt = alt64
    return ref, alt


def _tolerance(config: Config, model, feeds, out_dtypes, ref) -> Tolerance:
    from ..catalog.corpus.derive import tolerance

    tol = tolerance([np.dtype(d) for d in out_dtypes.values()], 0.0, 0.0)
    floats = [d for d in out_dtypes.values() if np.dtype(d).kind == "f"]
    if not floats or config.values in ("zeros", "ones"):
        return tol
    data = {x.name for x in config.inputs if x is not None and x.role == "data"}
    absolute = {k: np.abs(v) if k in data and v.dtype.kind == "f" else v for k, v in feeds.items()}
    try:
        wide_model, wide_feeds = _widened(model, absolute)
        terms = _evaluate(config, wide_model, wide_feeds)
        scale = max((float(np.nanmax(np.abs(np.asarray(v, dtype=np.float64)))) for v in terms.values()
                     if np.size(v) and np.isfinite(np.asarray(v, dtype=np.float64)).any()), default=0.0)
    except Exception:  # noqa: BLE001 - no magnitude: the dtype's bound
        return tol
    worst = max(MAGNITUDE_ATOL.get(np.dtype(d).name, 0.0) for d in floats)
    return Tolerance(atol=max(tol.atol, worst * scale), rtol=tol.rtol)


def _stage_one(config: Config, out_dtypes, tol: Tolerance) -> Tolerance:
    """``tol`` no tighter than the bound of the stage-one dtype ``stash_type`` names
    (:func:`.rules.stage_one_dtype`): a float64 LayerNormalization with the default
    ``stash_type=1`` is as exact as float32."""
    stash = rules.stage_one_dtype(config)
    if stash is None:
        return tol
    from ..catalog.corpus.derive import tolerance

    coarse = tolerance([np.dtype(stash)], 0.0, 0.0)
    return Tolerance(atol=max(tol.atol, coarse.atol), rtol=max(tol.rtol, coarse.rtol))


def _control(config: Config, model, feeds, out_dtypes, subject: Case, tol: Tolerance) -> Case | None:
    from ..catalog.corpus.itself import with_constant
    from ..classify.compare import separation

    first = next((i for i, x in enumerate(config.inputs) if x is not None and x.role == "data"), None)
    if first is None:
        return None
    index = [n for n in model.graph.node[0].input].index(config.inputs[first].name)
    for kind in ("zeros", "ones"):
        made = with_constant(model, feeds, index, kind)
        if made is None:
            continue
        cmodel, cfeeds = made
        try:
            full = {**cfeeds, config.inputs[first].name: np.asarray(
                np.zeros_like(feeds[config.inputs[first].name]) if kind == "zeros"
                else np.ones_like(feeds[config.inputs[first].name]))}
            cref, _ = references(config, model, full, out_dtypes)
        except Exception:  # noqa: BLE001 - no control reference: no control
            continue
        if any(np.isnan(v).any() for v in cref.values()):
            continue
        for vi in cmodel.graph.output:
            src = next(o for o in model.graph.output if o.name == vi.name)
            vi.CopyFrom(src)
        control = Case(cmodel.SerializeToString(), cfeeds, subject.outputs, cref, subject.exact)
        probe = Probe("", subject, control, tol, config.dtype)
        if separation(probe) >= MIN_SEPARATION:
            return control
    return None


def build(config: Config, *, control: bool = True) -> Built | Skip:
    """The probe of ``config``, or why it is skipped (see the module docstring)."""
    import onnx
    from onnx import helper, shape_inference

    if any(x is not None and x.size > MAX_ELEMENTS for x in config.inputs):
        return Skip("too large")
    from .known import known_problem

    why = known_problem(config)
    if why:
        return Skip("known reference problem", why)
    known = _known(config)
    if known:
        from ..catalog.corpus.derive import same_semantics

        try:
            newest = onnx.defs.get_schema(config.op, onnx.defs.onnx_opset_version(), "").since_version
        except Exception:  # noqa: BLE001 - onnx does not know it: the checker will say
            newest = config.opset
        if newest != onnx.defs.get_schema(config.op, config.opset, "").since_version and \
                not same_semantics(config.op, newest, config.opset, config.attrs):
            return Skip("stamp semantics unverified", f"{config.op}-{config.opset} vs {config.op}-{newest}")
    why = rules.outside(config)
    if why:
        return Skip("outside the spec", why)
    feeds = feeds_of(config)
    why = rules.undefined(config, feeds)
    if why:
        return Skip("undefined result", why)
    model = model_of(config)
    if known:
        try:
            inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        except Exception as exc:  # noqa: BLE001 - the schema refuses the configuration
            return Skip("onnx rejects", _line(exc))
        out_types = {vi.name: vi.type.tensor_type.elem_type for vi in inferred.graph.output}
    else:
        out_types = {n: helper.np_dtype_to_tensor_dtype(np.dtype(d)) for n, d in config.declared}
    try:
        if all(out_types.get(n) for n in config.outputs if n):
            out_dtypes = {n: np.dtype(helper.tensor_dtype_to_np_dtype(t)) for n, t in out_types.items()}
        else:
            native = _evaluate(config, model, feeds)
            out_dtypes = {k: np.asarray(v).dtype for k, v in native.items()}
        ref, alt = references(config, model, feeds, out_dtypes)
    except NotImplementedError as exc:
        return Skip("no reference", str(exc))
    except Exception as exc:  # noqa: BLE001 - the reference cannot compute it
        if type(exc).__name__ == "_Timeout":
            return Skip("reference timeout")
        return Skip("reference raised", f"{type(exc).__name__}: {_line(exc)}")
    if any(np.size(v) > MAX_ELEMENTS for v in ref.values()):
        return Skip("too large")
    inputs_nan = any(v.dtype.kind == "f" and np.isnan(v).any() for v in feeds.values())
    if not inputs_nan and any(np.isnan(v).any() for v in ref.values()):
        return Skip("undefined result")
    # Output dimensions symbolic: where onnx's shape inference and its reference disagree
    # (MaxPool-12's inference keeps a last window that starts in the end pad, the reference
    # and ORT >= 1.21 drop it: docs/sweep.md), a declared shape would make the checker
    # refuse the configuration the reference computes; the worker pre-binds outputs from
    # the reference's shapes, not from these.
    types = {n: (helper.np_dtype_to_tensor_dtype(out_dtypes[n]), [f"{n}_{i}" for i in range(ref[n].ndim)])
             for n in ref}
    model = model_of(config, types)
    if known:
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # noqa: BLE001
            return Skip("onnx rejects", _line(exc))
    outputs = tuple(n for n in config.outputs if n and n in ref)
    exact = frozenset(n for n in outputs if out_dtypes[n].kind != "f")
    subject = Case(model.SerializeToString(), feeds, outputs, {n: ref[n] for n in outputs}, exact)
    tol = _stage_one(config, out_dtypes, _tolerance(config, model, feeds, {n: out_dtypes[n] for n in outputs}, ref))
    ctrl = _control(config, model, feeds, {n: out_dtypes[n] for n in outputs}, subject, tol) if control else None
    probe = Probe(finding_id(config), subject, ctrl, tol, config.dtype)
    return Built(config, probe, None if alt is None else {n: alt[n] for n in outputs if n in alt})


def with_reference(probe: Probe, reference: dict) -> Probe:
    """``probe`` with its subject judged against ``reference`` instead."""
    return replace(probe, subject=replace(probe.subject, reference=reference))


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300]
