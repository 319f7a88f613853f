"""Derive subject/control probes from one ONNX backend node test case (runs in a child).

The unit of work is one corpus case (:class:`epaudit.catalog.corpus.cases.BackendCase`,
single node, not ``_expanded``) and a plan: which optional inputs and attributes to
ablate (the case is the subject, a control without it) and which attribute values to try
(a subject with another value, the unmodified case the control) and which required
inputs to bake in as a constant for the operator itself (:mod:`.itself`: the case is the
subject). For each opset stamp
(:func:`stamps`) the unmodified case must first be accepted by ``onnx.checker`` (full
check, strict shape inference) and reproduced by ``onnx.reference.ReferenceEvaluator``
within the case's own tolerance; only then is the evaluator trusted for the derived
model's reference. Every probe that is not made carries a reason from :data:`REASONS`.

Every evaluator call runs under ``signal.setitimer`` (:data:`EVAL_SECONDS` of CPU time,
``ITIMER_PROF``: a loaded machine drops the same probes as an idle one, so the catalog's
ids, which matrices name, do not depend on the load of the machine that built it): a corpus
case that makes the evaluator loop for minutes (``test_loop11``, a 3-D ``LpPool``) is
cut and counted as ``evaluator timeout``. This module runs in worker processes of
:mod:`epaudit.catalog.corpus.build`, never in a ``check`` run.
"""

from __future__ import annotations

import signal
from typing import Any

import numpy as np

from ...cache.probecache import encode_probe
from ...contract.probes import EXACT, MIN_SEPARATION, TOLERANCES, Case, Probe, Tolerance
from .ids import probe_id, record, value_text  # noqa: F401 - re-exported: derive's names
from .itself import CONSTANTS, SHAPE_CONSTANTS, with_constant
from .types import INTEGER_TOLERANCE, EvalTimeout, first_input_type, variants  # noqa: F401 - INTEGER_TOLERANCE: derive's name

#: Why a derived probe was not made (the keys of every drop count).
REASONS = {
    "not buildable": "the installed onnx cannot prepare the case (cases.py error, "
                     "non-tensor value, bfloat16 casts, not one ai.onnx node)",
    "reference has NaN": "a stored or derived reference holds NaN (never compares equal), or a derived "
                         "one is infinite where the case's outputs are finite",
    "too large": "inputs and references over MAX_BYTES",
    "stamp refused": "an earlier opset's schema refuses the same node (checker/inference)",
    "stamp semantics unverified": "an earlier opset's schema is not the same node (history.same_node: "
                                  "its signature differs, or its text differs by a documented behaviour "
                                  "change or a transition not reviewed) and ReferenceEvaluator has one "
                                  "implementation for both (same_semantics)",
    "random output": "the operator draws random numbers (ORT's generator is not numpy's)",
    "known reference problem": "listed in known.py with the clause that decides",
    "outside the spec": "a variation value the schema text excludes (a string another operator "
                        "uses that this attribute's text does not name, an axis outside its "
                        "documented range, an ai.onnx.ml list of another length: build._other_length) "
                        "although onnx.checker and onnx.reference accept it",
    "evaluator mismatch": "ReferenceEvaluator does not reproduce the case's stored outputs",
    "evaluator raised": "ReferenceEvaluator raised on the case or the derived model",
    "evaluator timeout": "ReferenceEvaluator ran past EVAL_SECONDS",
    "onnx rejects derived model": "onnx.checker (full check) refuses the derived model",
    "not decisive": "subject and control references differ by < MIN_SEPARATION bounds",
    "type not buildable": "a type variant in a type numpy has no dtype for and no Cast makes (float8, 4-bit): types.py",
    "out of range for the type": "a type variant whose values or reference leave the type's range (an integer "
                                 "overflow the spec leaves undefined, a float16 infinity, an integer zero divisor)",
    "type refused by the schema": "onnx.checker refuses the node in the variant's type, or the node's attributes "
                                  "are typed like its input (Imputer: types.TYPED_ATTRIBUTES)",
    "removed by the optimizer": "a bfloat16 variant of an operator ORT's optimizer removes between the "
                                "variant's Casts (Identity): no kernel would run it (types.ELIMINATED)",
}
#: Per evaluator call, CPU seconds of the deriving process (the one case that reaches it,
#: test_loop11 with M ablated, loops forever).
EVAL_SECONDS = 8.0
#: Largest feeds + references + model of one probe, bytes.
MAX_BYTES = 256 * 1024
#: ORT's oldest supported ai.onnx opset: no stamp below it.
MIN_OPSET = 7


#: Operators whose outputs are random draws (Dropout only in training mode, which its
#: cases feed): no stored reference can hold for ORT's generator.
RANDOM_OPS = frozenset({"Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike",
                        "RandomUniform", "RandomUniformLike"})
#: Operators whose outputs are long sums with cancellation (a transform bin near zero
#: next to bins of magnitude M): a float32 FFT's error grows like eps * log(n) * M, not with
#: each bin's own value, so the absolute bound is this fraction of the largest |output|
#: (measured: ORT CPU DFT off by 3.4e-4 on near-zero bins of a transform peaking at ~25).
MAGNITUDE_ATOL = {"DFT": 1e-4, "STFT": 1e-4}
#: Operators ORT's graph optimizer folds into a constant when the input shape is static
#: (constant folding of Shape/Size: the node never reaches a kernel, placement is empty):
#: their probes get symbolic input dimensions.
SYMBOLIC_INPUT_OPS = frozenset({"Shape", "Size"})


def _domain(domain: str) -> str:
    """A node's or opset import's domain as the schemas name it (``ai.onnx`` is ``""``)."""
    return "" if domain in ("", "ai.onnx") else domain


def random_output(op: str, node) -> bool:
    """Whether ``node`` (of ``op``) draws random numbers: a :data:`RANDOM_OPS` operator, except
    a Dropout whose ``training_mode`` input is not fed (ONNX Dropout-12 and later: "to convert
    the trained model into inference mode, the user can simply not pass `training_mode`
    input or set it to false": the output is the input; Dropout-7 and -10 have no training
    mode and are the identity in inference)."""
    if op not in RANDOM_OPS:
        return False
    return not (op == "Dropout" and (len(node.input) < 3 or not node.input[2]))


def _symbolic_inputs(model) -> None:
    for vi in model.graph.input:
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            d.dim_param = f"{vi.name}_d{i}"


def known_problem(fid: str) -> str:
    """The clause that decides against our reference for probe ``fid``, or ``""``."""
    import fnmatch

    from .known import KNOWN

    for pattern, why in KNOWN:
        if fnmatch.fnmatchcase(fid, pattern):
            return why
    return ""


_Timeout = EvalTimeout  # the evaluator's CPU-time cut (types.py catches it too)


def _alarm(signum, frame):  # pragma: no cover - fires inside the evaluator
    raise _Timeout()


def _float(dtype: np.dtype) -> bool:
    return dtype.kind == "f"


def tolerance(dtypes: list[np.dtype], atol: float, rtol: float) -> Tolerance:
    """The probe tolerance: :data:`epaudit.contract.probes.TOLERANCES` of the widest-bound float
    output dtype, widened to the case's own ``atol``/``rtol`` (onnx's runner bounds, which
    ORT's backend test series uses); :data:`INTEGER_TOLERANCE` when no output is float."""
    floats = [TOLERANCES[d.name] for d in dtypes if _float(d) and d.name in TOLERANCES]
    if not floats:
        return INTEGER_TOLERANCE
    return Tolerance(atol=max([atol] + [t.atol for t in floats]), rtol=max([rtol] + [t.rtol for t in floats]))


def evaluate(model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of ``model`` (ModelProto) under ReferenceEvaluator, by graph output name.

    Raises:
        _Timeout: past :data:`EVAL_SECONDS`. Anything the evaluator raises.
    """
    from onnx.reference import ReferenceEvaluator

    from .extra_ops import NEW_OPS

    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, EVAL_SECONDS)
    try:
        sess = ReferenceEvaluator(model, new_ops=list(NEW_OPS))
        got = sess.run(None, dict(feeds))
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    return {vi.name: np.asarray(v) for vi, v in zip(model.graph.output, got)}


def reproduces(got: dict[str, np.ndarray], ref: dict[str, np.ndarray], exact: set[str], atol: float,
               rtol: float) -> bool:
    """Whether evaluator outputs ``got`` equal the stored ``ref`` (float64): same shapes,
    integer outputs exactly, floats within ``atol + rtol*|ref|`` (the case's bounds)."""
    tol = Tolerance(atol, rtol)
    for name, r in ref.items():
        g = got.get(name)
        if g is None or g.shape != r.shape:
            return False
        t = EXACT if name in exact else tol
        if g.dtype == object or not bool(np.all(t.close(g.astype(np.float64), r))):
            return False
    return True


def stamps(op: str, opset: int, domain: str = "") -> list[int]:
    """Opsets to stamp a case of ``op`` imported at ``opset`` at: where the schema in force
    begins (``since_version``), then where each earlier version begins, newest first,
    down to :data:`MIN_OPSET` (a version that begins below it is stamped at it; ``ai.onnx.ml``
    from its version 1). Each is tried; a stamp whose schema refuses the node is
    dropped with ``stamp refused``."""
    import onnx.defs

    out = []
    version = opset
    floor = MIN_OPSET if domain == "" else 1
    if opset < floor:
        # A case imported below ORT's oldest opset (test_not_* at opset 1): stamped at
        # MIN_OPSET only where the schema in force there is the one the case was made for.
        try:
            if onnx.defs.get_schema(op, floor, domain).since_version <= opset:
                return [floor]
        except Exception:  # noqa: BLE001 - no schema: no stamp
            pass
        return []
    while version >= floor:
        try:
            since = onnx.defs.get_schema(op, version, domain).since_version
        except Exception:  # noqa: BLE001 - no schema at or below: done
            break
        # A version that begins below MIN_OPSET (LeakyRelu-6) is reached at MIN_OPSET.
        out.append(max(since, floor))
        version = since - 1
    return out


def same_semantics(op: str, newest: int, older: int, attributes: dict | None = None, domain: str = "") -> bool:
    """Whether the evaluator's reference at ``older`` can be trusted for a node of ``op``
    (with ``attributes``) as at ``newest``: ReferenceEvaluator has an implementation of its
    own for the older version (its reference follows that version's text: ``ArgMax_1`` vs
    ``ArgMax_12``), or the schema history says the node is the same at both
    (:func:`epaudit.catalog.corpus.history.same_node`: equal signatures, and every text
    difference in between a reviewed ``same`` transition).

    Otherwise the evaluator would run the newest semantics under the older stamp:
    Softmax-11 flattens to 2-D from ``axis`` where Softmax-13 works along ``axis`` alone
    (the default of ``axis`` differs: a signature difference), and onnx.reference has one
    ``Softmax`` for both (measured: ORT's Softmax-11 kernel, right by the opset-11 text,
    read as MISMATCH against it).
    """
    from onnx.reference.ops import load_op

    from .history import same_node

    try:
        if load_op(domain, op, newest) is not load_op(domain, op, older):
            return True
    except Exception:  # noqa: BLE001 - no implementation: the history alone decides
        pass
    try:
        return same_node(op, newest, older, attributes, domain)[0]
    except Exception:  # noqa: BLE001 - no schema at one of them: not trusted
        return False


def _restamp(model, opset: int, domain: str = ""):
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if (o.domain or "") == domain or (domain == "" and o.domain == "ai.onnx"):
            o.version = opset
    # The IR version the stamp's opset needs, not the corpus' own (onnx 1.23 writes IR 14
    # into some cases, which onnxruntime 1.31 refuses whatever the opset: "max supported
    # IR version: 13"); the checker then says whether the node's types need more.
    m.ir_version = min(m.ir_version, max(onnx.helper.find_min_ir_version_for(list(m.opset_import)), 3))
    return m


def _check(model, full: bool = True) -> None:
    import onnx

    onnx.checker.check_model(model, full_check=full)


def _without_input(model, index: int):
    """The model with node input ``index`` left out (``""``, or dropped when trailing)
    and its graph input removed; output shapes cleared (the control may change them)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    name = node.input[index]
    node.input[index] = ""
    while node.input and node.input[-1] == "":
        del node.input[-1]
    keep = [vi for vi in m.graph.input if vi.name != name]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    _clear_output_shapes(m)
    return m, name


def _with_attribute(model, attr: str, value: Any):
    """The model with attribute ``attr`` set to ``value`` (``None``: removed, back to the
    schema default); output shapes cleared."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    keep = [a for a in node.attribute if a.name != attr]
    del node.attribute[:]
    node.attribute.extend(keep)
    if value is not None:
        node.attribute.append(onnx.helper.make_attribute(attr, value))
    _clear_output_shapes(m)
    return m


def _clear_output_shapes(m) -> None:
    for vi in m.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")


def _set_output_shapes(m, outs: dict[str, np.ndarray]) -> None:
    """Give the graph outputs the shapes the evaluator produced (the checker wants a
    shape, and a control may change it: an ablated ``axes`` input, another ``axis``)."""
    import onnx

    for vi in m.graph.output:
        if vi.name in outs and vi.type.HasField("tensor_type"):
            # and the type: a variation of a data-type attribute (MelWeightMatrix
            # output_datatype) changes it
            vi.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(outs[vi.name]).dtype)
            shape = vi.type.tensor_type.shape
            shape.ClearField("dim")
            for d in np.shape(outs[vi.name]):
                shape.dim.add().dim_value = int(d)


def _f64(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v).astype(np.float64) for k, v in outs.items()}


def _new_inf(ref: dict[str, np.ndarray], stored: dict[str, np.ndarray]) -> bool:
    """Whether a derived reference is infinite where the case's own outputs are all finite:
    onnx.reference's LogSoftmax is ``log(softmax(x))``, -inf where the true value is finite."""
    return any(v.dtype.kind == "f" and bool(np.isinf(v).any()) and bool(np.isfinite(stored[k]).all())
               for k, v in ref.items() if k in stored)


def _has_nan(outs: dict[str, np.ndarray]) -> bool:
    return any(v.dtype.kind in "fc" and bool(np.isnan(v).any()) for v in outs.values())


def derive(task: dict) -> dict:
    """All probes of one case; ``{"probes": [record], "drops": [(reason, id-or-case, detail)],
    "stamps_refused": int}``. A record is the manifest entry plus ``"probe"`` (the
    :func:`epaudit.cache.probecache.encode_probe` dict). Never raises for a case's trouble.

    ``task``: ``name`` (case), ``op``, ``model`` (bytes, one node named ``probe``),
    ``feeds`` / ``reference`` (name -> array; float64 references), ``atol``, ``rtol``,
    ``ablate`` ([("input", index, schema name)] + [("attribute", name)]),
    ``vary`` ([(attribute, value)]), ``itself`` ([(node input index, required input label)]:
    the operator itself, :mod:`.itself`), ``make_id`` is not sent: ids come from :func:`probe_id`.
    """
    import onnx

    from ...classify.compare import separation

    out = {"probes": [], "drops": [], "stamps_refused": 0}
    name, op = task["name"], task["op"]
    base = onnx.load_from_string(task["model"])
    feeds, stored = task["feeds"], task["reference"]
    dtypes = {vi.name: np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
              for vi in base.graph.output}
    exact = frozenset(n for n, d in dtypes.items() if not _float(d))
    tol = tolerance(list(dtypes.values()), task["atol"], task["rtol"])
    if op in MAGNITUDE_ATOL:
        scale = max((float(np.abs(v).max()) for v in stored.values() if v.size), default=0.0)
        tol = Tolerance(atol=max(tol.atol, MAGNITUDE_ATOL[op] * scale), rtol=tol.rtol)
    # The feature's type is its first input's (the type the surface counts and variants retype),
    # not its output's: Greater's is float32, not bool.
    dtype = first_input_type(base) or next(iter(dtypes.values())).name
    domain = _domain(base.graph.node[0].domain)
    opset = next(o.version for o in base.opset_import if _domain(o.domain) == domain)
    plan = [("input", a[1], a[2]) for a in task["ablate"] if a[0] == "input"]
    plan += [("attribute", a[1], None) for a in task["ablate"] if a[0] == "attribute"]
    plan += [("vary", attr, value) for attr, value in task["vary"]]
    # The operator itself: each required input, each constant, until one is decisive.
    kinds = CONSTANTS + (SHAPE_CONSTANTS if op in SYMBOLIC_INPUT_OPS else ())
    plan += [("itself", (index, label), kind) for index, label in task.get("itself", ()) for kind in kinds]

    def drop(reason: str, what: str, detail: str = "") -> None:
        out["drops"].append((reason, what, detail[:300]))

    if random_output(op, base.graph.node[0]):
        drop("random output", name)
        return out
    all_stamps = stamps(op, opset, domain)
    from .history import node_attributes

    node_attrs = node_attributes(base.graph.node[0])
    for stamp in all_stamps:
        tag = f"{name}@{stamp}"
        older = stamp != all_stamps[0]
        if older and not same_semantics(op, all_stamps[0], stamp, node_attrs, domain):
            drop("stamp semantics unverified", tag)
            continue
        model = _restamp(base, stamp, domain)
        if op in SYMBOLIC_INPUT_OPS:
            _symbolic_inputs(model)
        full = True
        try:
            _check(model)
        except Exception as exc:  # noqa: BLE001
            if stamp != all_stamps[0]:
                out["stamps_refused"] += 1
                continue
            # The corpus' own model at its own opset: a refusal is the checker's (strict
            # inference of MeanVarianceNormalization's function body fails on its Constant),
            # so this case's models get the checker without strict inference.
            try:
                _check(model, full=False)
                full = False
            except Exception:  # noqa: BLE001
                drop("onnx rejects derived model", tag, str(exc))
                continue
        try:
            got = evaluate(model, feeds)
        except _Timeout:
            drop("evaluator timeout", tag)
            continue
        except Exception as exc:  # noqa: BLE001
            drop("evaluator raised", tag, f"{type(exc).__name__}: {exc}")
            continue
        if not reproduces(got, stored, set(exact), task["atol"], task["rtol"]):
            drop("evaluator mismatch", tag)
            continue
        case = Case(model.SerializeToString(), feeds, tuple(stored), stored, exact)
        itself_made = False
        for kind, key, extra in plan:
            try:
                if kind == "itself":
                    if itself_made:
                        continue  # one operator-itself probe per case and stamp
                    made = with_constant(model, feeds, key[0], extra)
                    if made is None:
                        continue  # the constant does not apply (reversed of a first dim of 1)
                    derived, dfeeds = made
                elif kind == "input":
                    derived, fed = _without_input(model, key)
                    dfeeds = {k: v for k, v in feeds.items() if k != fed}
                elif kind == "attribute":
                    derived, dfeeds = _with_attribute(model, key, None), feeds
                else:
                    derived, dfeeds = _with_attribute(model, key, extra), feeds
                derived.graph.node[0].name = "probe"
            except Exception as exc:  # noqa: BLE001
                drop("onnx rejects derived model", f"{tag} {kind} {key}", str(exc))
                continue
            what = f"{tag} {kind} {extra if kind == 'input' else key}" + (f"={extra}" if kind == "itself" else "")
            if kind == "vary" and older and not same_semantics(op, all_stamps[0], stamp,
                                                              {**node_attrs, key: extra.decode() if isinstance(extra, bytes) else extra},
                                                              domain):
                drop("stamp semantics unverified", what)  # a value the older version lacks (Pad-18 'wrap')
                continue
            try:
                ref = evaluate(derived, dfeeds)
                _set_output_shapes(derived, ref)
                _check(derived, full)
            except _Timeout:
                drop("evaluator timeout", what)
                continue
            except onnx.checker.ValidationError as exc:
                drop("onnx rejects derived model", what, str(exc))
                continue
            except Exception as exc:  # noqa: BLE001
                reason = "onnx rejects derived model" if "inference" in type(exc).__module__ + str(
                    type(exc)).lower() else "evaluator raised"
                drop(reason, what, f"{type(exc).__name__}: {exc}")
                continue
            if _has_nan(ref) or any(v.dtype == object for v in ref.values()) or _new_inf(ref, stored):
                drop("reference has NaN", what)
                continue
            dcase = Case(derived.SerializeToString(), dfeeds, tuple(stored), _f64(ref), exact)
            subject, control = (dcase, case) if kind == "vary" else (case, dcase)
            probe = Probe("", subject, control, tol, dtype)
            apart = separation(probe)
            if apart < MIN_SEPARATION:
                drop("not decisive", what, f"{apart:.3g} bounds")
                continue
            rec = record(name, op, stamp, kind, key[1] if kind == "itself" else key, extra, dtype, domain)
            why = known_problem(rec["id"])
            if why:
                drop("known reference problem", rec["id"], why)
                continue
            probe = Probe(rec["id"], subject, control, tol, dtype)
            rec["probe"] = encode_probe(probe)
            rec["separation"] = apart
            out["probes"].append(rec)
            try:
                _type_variants(rec, probe, op, stamp, task.get("types"), out, drop, domain)
            except Exception as exc:  # noqa: BLE001 - a variant's trouble never costs the case its probes
                drop("evaluator raised", f"{rec['id']} type variants", f"{type(exc).__name__}: {exc}")
            itself_made = itself_made or kind == "itself"
    return out


def _type_variants(rec: dict, probe: Probe, op: str, stamp: int, registered, out: dict, drop,
                   domain: str = "") -> None:
    """Append the type variants of ``probe`` (:mod:`.types`) to ``out["probes"]``; the ones
    not made to the drops, each under its own id."""
    import onnx.defs

    from ...classify.compare import separation
    from .types import variants

    try:
        schema = onnx.defs.get_schema(op, stamp, domain)
    except Exception:  # noqa: BLE001 - no schema: no variant
        return
    if registered is not None:  # the CPU kernels whose version range holds the stamp, first input's parameter
        from .types import first_param  # noqa: PLC0415

        param = first_param(schema)[0]
        registered = {t for lo, hi, types in registered if lo <= stamp <= hi for t in types.get(param, ())}
    made, drops = variants(probe, schema, registered, evaluate,
                           separation, MIN_SEPARATION)
    for reason, t in drops:
        drop(reason, f"{rec['id']}.{t}")
    for t, v, apart in made:
        why = known_problem(v.feature_id)
        if why:
            drop("known reference problem", v.feature_id, why)
            continue
        out["probes"].append(dict(rec, id=v.feature_id, dtype=t, base=rec["id"], probe=encode_probe(v),
                                  separation=apart, changes=f"{rec['changes']}; in {t} (type variant of {rec['id']})"))
