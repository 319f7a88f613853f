"""Build the generated catalog from nothing: corpus, plan, derive in child processes, store.

Steps (progress on stderr): the corpus of single-node backend cases
(:func:`epaudit.catalog.corpus.cases.load_corpus`, one child, cached); a plan per case
(:func:`plan`: the optional inputs it feeds and attributes it sets, to ablate; the
attribute values to try); :func:`epaudit.catalog.corpus.derive.derive` per case in a
pool of child processes (one per core); the probes and the manifest written to the store
(:mod:`epaudit.catalog.corpus.store`). Cases are independent: a child that dies takes
only its case with it (counted as ``evaluator raised``).
"""

from __future__ import annotations

import collections
import re
import sys
import time
from typing import Any, Callable

import numpy as np

from .derive import MAX_BYTES, RANDOM_OPS, REASONS, random_output, value_text
from .itself import plan_inputs
from .switch import ENV

#: Cases per (operator, attribute, value) a variation is tried on: the first ones of the
#: operator whose own value differs. Bounds the build (every case x every value would be
#: ~13 000 evaluator runs) while every corpus value of every attribute gets its probe.
VARY_CASES = 2
#: Further cases a variation is tried on when none of the first ones made a probe of it.
RETRY_CASES = 3
#: Cases per operator the operator itself (:mod:`.itself`) is derived from: the first
#: ones in corpus order that can be tasks; one probe per case and opset stamp.
ITSELF_CASES = 1
#: Further cases it is tried on for an operator none of the first ones made a probe of.
ITSELF_RETRY = 2
#: INT attributes that name an output data type, and the TensorProto types tried for
#: them: FLOAT, FLOAT16, DOUBLE.
_DTYPE_ATTRIBUTES = frozenset({"dtype", "to", "output_datatype", "output_dtype"})
_DTYPES = (1, 10, 11)
#: Attribute types that are varied (graphs, tensors and sparse tensors are not).
_VARIED_TYPES = ("FLOAT", "INT", "STRING", "FLOATS", "INTS", "STRINGS")
#: Attributes that hold a tree ensemble's structure (ai.onnx.ml TreeEnsemble*): one of them
#: left out or set to another case's value is no model at all (the evaluator loops past its
#: time or raises), so they are neither ablated nor varied; the options beside them are.
_STRUCTURE = re.compile(r"^(nodes_|class_|target_|leaf_|tree_roots|membership_values)")
#: Optional attributes a node cannot lose: the classifiers' labels ("One and only one
#: 'classlabels' attribute must be defined", LinearClassifier, SVMClassifier) and the SVMs'
#: ``kernel_params``, optional in the spec, required by ORT's CPU EP ("No attribute with this
#: name is defined", tests/test_synthetic_ml.py): a control without them is refused, so the
#: ``ignore`` fault could never be shown (found by the whole-catalog self-test). Not ablated.
_NEEDED = re.compile(r"^(classlabels_|kernel_params$)")


def _attr_value(attr) -> Any:
    import onnx

    v = onnx.helper.get_attribute_value(attr)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return tuple(x.decode() if isinstance(x, bytes) else x for x in v)
    return v


def _numeric_second(kind: str, base: Any) -> list:
    """Second values for a numeric attribute (not from the corpus): ``1 - v`` for a 0/1
    flag, ``v + 1`` for another int, ``2v + 0.25`` for a float; for a list, the list
    without its first element (``axes`` [0, 2, 3] -> [2, 3]) and each element plus one
    (``strides`` [1, 1] -> [2, 2]). The evaluator and checker decide which are valid."""
    if kind == "INT":
        return [1 - base if base in (0, 1) else base + 1]
    if kind == "FLOAT":
        return [float(np.float32(base * 2 + 0.25))]
    if kind == "INTS" and base:
        return [tuple(base[1:])] * (len(base) > 1) + [tuple(int(v) + 1 for v in base)]
    return []


#: The documented range of an integer attribute (``axis``) in its schema text, and the
#: largest value it allows for an input of rank r: "[-r, r)" and "[-r, r-1]" give r - 1,
#: "[-r, r]" gives r (Flatten).
_RANGE = re.compile(r"\[-r,\s*r(-1\]|\)|\])")


def outside_spec(spec, value: Any, rank: int | None, borrowed: bool) -> str:
    """Why a variation ``value`` of the attribute ``spec`` (an ``OpSchema.Attribute``) is
    outside the operator's spec although onnx.checker and onnx.reference accept it, or "".

    * A string value borrowed from another operator's attribute of the same name is kept
      only where this attribute's schema text names it as a word (Upsample ``mode``
      "linear" is; RoiAlign ``mode`` "constant" is not: "Two modes are supported: 'avg'
      and 'max'"; ORT CPU refuses such nodes, onnx.reference computes something).
    * An integer outside the range the schema text gives for an input of rank ``rank``
      (LayerNormalization ``axis``: "allowed range is [-r, r)"; ``axis = 4`` on rank 4).
    """
    desc = spec.description or ""
    if borrowed and isinstance(value, str) and not re.search(
            r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", desc):
        return f"{value!r} is not among the values the schema names"
    if isinstance(value, int) and rank is not None:
        m = _RANGE.search(desc)
        if m:
            top = rank if m.group(1) == "]" else rank - 1
            if not -rank <= value <= top:
                return f"{value} outside [-{rank}, {top}] for rank {rank}"
    return ""


def _other_length(node, current, value) -> bool:
    """An ai.onnx.ml list attribute set to a list of another length than the case's: the
    domain's lists are per feature, class or target (Scaler's ``scale`` "Must be same length
    as 'offset'"; FeatureVectorizer's ``inputdimensions``, one per input; LinearRegressor's
    ``intercepts``, one per target): another length is another model, or none (ORT CPU
    refuses it or reads it otherwise, measured), though onnx.reference accepts it."""
    return node.domain == "ai.onnx.ml" and isinstance(value, tuple) and isinstance(current, tuple) \
        and len(value) != len(current)


def _rank(m) -> int | None:
    """Rank of the node's first input, from the case model's graph input (None: unknown)."""
    node = m.graph.node[0]
    for vi in m.graph.input:
        if node.input and vi.name == node.input[0] and vi.type.tensor_type.HasField("shape"):
            return len(vi.type.tensor_type.shape.dim)
    return None


def plan(cases, tried: dict | None = None, want: set | None = None, per_key: int = VARY_CASES,
         ablation: bool = True, outside: set | None = None) -> dict[str, dict]:
    """Case name -> ``{"ablate": [...], "vary": [...]}`` for the single-node cases.

    The operator itself: the required inputs the case feeds (:func:`.itself.plan_inputs`),
    used by :func:`tasks` for :data:`ITSELF_CASES` cases per operator.

    Ablation: every optional (not variadic) input the case feeds, every optional attribute
    it sets. Variation: for every optional attribute of the operator's schema (of a
    varied type), every value the corpus sets it to for that operator plus one numeric
    second value (:func:`_numeric_second`; for a data-type attribute float, float16 and
    double; for a string attribute the values other operators' cases give an attribute
    of the same name), each on the first :data:`VARY_CASES` cases
    whose own value differs and is not the default.

    ``tried`` ((operator, attribute, value text) -> case ids given that variation) is
    filled in and skipped; ``want`` limits the variations to those keys; ``ablation``
    False plans variations only (the retry round of :func:`build`). A value
    :func:`outside_spec` refuses is not planned; ``(key, case id)`` goes into ``outside``
    (counted as ``outside the spec``).
    """
    import onnx
    import onnx.defs

    Opt = onnx.defs.OpSchema.FormalParameterOption
    parsed = {}
    for c in cases:
        if c.probe is None:
            continue
        m = onnx.load_from_string(c.probe.subject.model)
        if len(m.graph.node) != 1:
            continue
        parsed[c.id] = (c, m)
    corpus_values: dict[tuple[str, str], list] = collections.defaultdict(list)
    by_name: dict[str, list] = collections.defaultdict(list)  # string values, any operator
    for c, m in parsed.values():
        for a in m.graph.node[0].attribute:
            v = _attr_value(a)
            if v not in corpus_values[(c.op_type, a.name)]:
                corpus_values[(c.op_type, a.name)].append(v)
            if isinstance(v, str) and v not in by_name[a.name]:
                by_name[a.name].append(v)
    tried = {} if tried is None else tried
    given: dict[tuple, int] = collections.Counter()
    out = {}
    for c, m in parsed.values():
        node = m.graph.node[0]
        try:
            schema = onnx.defs.get_schema(node.op_type, c.opset, "" if node.domain in ("", "ai.onnx") else node.domain)
        except Exception:  # noqa: BLE001 - no schema: the derivation drops it
            out[c.id] = {"ablate": [], "vary": [], "itself": []}
            continue
        ablate = []
        for i, x in enumerate(node.input if ablation else ()):
            if x and i < len(schema.inputs) and schema.inputs[i].option == Opt.Optional:
                ablate.append(("input", i, schema.inputs[i].name))
        own = {a.name: _attr_value(a) for a in node.attribute}
        for a in node.attribute if ablation else ():
            spec = schema.attributes.get(a.name)
            if spec is not None and not spec.required and not _STRUCTURE.match(a.name) and not _NEEDED.match(a.name):
                ablate.append(("attribute", a.name))
        vary = []
        for name, spec in sorted(schema.attributes.items()):
            kind = spec.type.name
            if spec.required or kind not in _VARIED_TYPES or _STRUCTURE.match(name):
                continue
            default = _attr_value(spec.default_value) if spec.default_value.type else None
            current = own.get(name, default)
            values = list(corpus_values.get((node.op_type, name), []))
            base = current if current is not None else (values[0] if values else None)
            for second in _numeric_second(kind, base) if base is not None else ():
                if second not in values:
                    values.append(second)
            if kind == "INT" and name in _DTYPE_ATTRIBUTES:
                values += [t for t in _DTYPES if t not in values]
            own_values = set(values)
            if kind == "STRING":  # another operator's value of the same name (Upsample mode: linear)
                values += [v for v in by_name.get(name, ()) if v not in values]
            for v in values:
                if v == current or v == default:
                    continue
                key = (node.op_type, name, value_text(v))  # one value per id
                if (want is None or key in want) and given[key] < per_key and c.id not in tried.get(key, ()):
                    if outside_spec(spec, v, _rank(m), v not in own_values) or _other_length(node, current, v):
                        if outside is not None:
                            outside.add((key, c.id))
                        continue
                    given[key] += 1
                    tried.setdefault(key, set()).add(c.id)
                    vary.append((name, list(v) if isinstance(v, tuple) else v))
        itself = plan_inputs(node, schema, {vi.name for vi in m.graph.input}) if ablation else []
        out[c.id] = {"ablate": ablate, "vary": vary, "itself": itself}
    return out


def _random(case) -> bool:
    import onnx

    m = onnx.load_from_string(case.probe.subject.model)
    return random_output(case.op_type, next(n for n in m.graph.node if n.op_type == case.op_type))


def _size(probe) -> int:
    case = probe.subject
    return len(case.model) + sum(a.nbytes for a in case.feeds.values()) + sum(
        a.nbytes for a in case.reference.values())


def tasks(cases, plans: dict[str, dict], drops: collections.Counter, say, itself_given: dict | None = None,
          itself_ops: set | None = None, per_op: int = ITSELF_CASES) -> list[dict]:
    """The derivation tasks of ``cases``; the ones that cannot be tasks counted in ``drops``.

    A plan's ``itself`` inputs are kept for the first ``per_op`` cases of each operator
    (of ``itself_ops``; all when ``None``) that can be tasks and are not yet in
    ``itself_given`` (operator -> case ids given it, filled in)."""
    out = []
    itself_given = {} if itself_given is None else itself_given
    given_now: collections.Counter = collections.Counter()
    for c in cases:
        if c.probe is None or c.id not in plans:
            drops["not buildable"] += 1
            continue
        if c.op_type in RANDOM_OPS and _random(c):
            drops["random output"] += 1
            continue
        if "bfloat16" in c.probe.dtype:
            drops["not buildable"] += 1  # its node sits between Cast nodes: not one node
            continue
        ref = c.probe.subject.reference
        if any(np.isnan(v).any() for v in ref.values()):
            drops["reference has NaN"] += 1
            continue
        if _size(c.probe) > MAX_BYTES:
            drops["too large"] += 1
            continue
        p = plans[c.id]
        itself = list(p.get("itself", ()))
        done = itself_given.setdefault(c.op_type, [])
        if itself and (itself_ops is None or c.op_type in itself_ops) and given_now[c.op_type] < per_op \
                and c.id not in done:
            given_now[c.op_type] += 1
            done.append(c.id)
        else:
            itself = []
        if not p["ablate"] and not p["vary"] and not itself:
            continue
        out.append({"name": c.id, "op": c.op_type, "model": c.probe.subject.model,
                    "feeds": dict(c.probe.subject.feeds), "reference": dict(ref),
                    "atol": c.probe.tolerance.atol, "rtol": c.probe.tolerance.rtol,
                    "ablate": p["ablate"], "vary": p["vary"], "itself": itself})
    return out


def cpu_types() -> dict[str, list] | None:
    """ai.onnx and ai.onnx.ml operator -> ``[[first opset, last opset, {type parameter: types}], ...]``, one
    per kernel the installed onnxruntime's CPU EP registers for it (numpy names);
    ``None`` when onnxruntime or its
    ``get_registered_ep_kernel_defs`` is not there (then every candidate type is made).
    Runs in a child of the build's pool (the parent never imports onnxruntime)."""
    from .types import onnx_name

    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as C

        kernels = C.get_registered_ep_kernel_defs("CPUExecutionProvider")
    except Exception:  # noqa: BLE001 - no query: no filter
        return None
    out: dict[str, list] = collections.defaultdict(list)
    for k in kernels:
        if k.domain in ("", "ai.onnx", "ai.onnx.ml"):  # no operator name is in both
            lo, hi = k.version_range
            out[k.op_name].append([int(lo), int(hi), {str(p): sorted({onnx_name(str(t)) for t in ts})
                                                      for p, ts in dict(k.type_constraints).items()}])
    return dict(out)


def _run_one(task: dict) -> dict:
    import warnings

    from .derive import derive

    warnings.simplefilter("ignore")  # the evaluator's numpy warnings (log(0), ...) are not news
    try:
        with np.errstate(all="ignore"):
            return derive(task)
    except Exception as exc:  # noqa: BLE001 - one case's trouble, counted
        return {"probes": [], "drops": [("evaluator raised", task["name"], repr(exc)[:300])],
                "stamps_refused": 0}


def build(cache_dir=None, *, jobs: int | None = None, ops: set[str] | None = None,
          say: Callable[[str], None] | None = None) -> dict:
    """Derive every generated probe of the installed onnx.

    Args:
        cache_dir: the corpus cache (default :func:`epaudit.cache.probecache.default_cache_dir`).
        jobs: child processes (default: one per core).
        ops: only these operators (tests); ``None``: all.
        say: progress lines (default: stderr).

    Returns:
        ``{"probes": [record with "probe"], "drops": {reason: count}, "examples":
        {reason: [what]}, "cases": int, "seconds": float}``, records in id order.

    Raises:
        epaudit.catalog.corpus.cases.ConformanceError: the corpus cannot be generated.
    """
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from .cases import load_corpus

    say = say or (lambda line: print(f"epaudit: {line}", file=sys.stderr, flush=True))
    t0 = time.monotonic()
    say("generated catalog: generating the onnx backend node test corpus (one child, ~20 s)")
    from .synthetic import cases as synthetic_cases
    from .synthetic_control import cases as control_cases

    # The synthetic cases the corpus lacks (ai.onnx.ml; Loop and Scan with bodies every type
    # has: our references), first, so that each is its operator's operator-itself case
    # (ITSELF_CASES), then the corpus.
    cases = [c for c in synthetic_cases() + control_cases() + load_corpus(cache_dir)
             if ops is None or c.op_type in ops]
    drops: collections.Counter = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    tried: dict = {}
    outside: set = set()
    plans = plan(cases, tried, outside=outside)
    itself_given: dict = {}
    work = tasks(cases, plans, drops, say, itself_given)
    say(f"generated catalog: {len(cases)} cases, deriving {len(work)} "
        f"({sum(len(t['ablate']) + len(t['vary']) + len(t['itself']) for t in work)} variants before opset stamps)")
    records: list[dict] = []
    jobs = max(1, jobs or os.cpu_count() or 1)
    # Big cases first: the pool's tail is then short ones.
    work.sort(key=lambda t: -(len(t["ablate"]) + len(t["vary"])))
    # fork where there is one: a spawned child re-imports the parent's __main__, and a
    # script that reaches the catalog at its top level (no main guard) would run again in
    # every child. The build runs at catalog import, before any thread of epaudit's.
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    # The children import epaudit.catalog (this package's parent): with the generated
    # catalog left out there, a child never starts a build of its own.
    saved = os.environ.get(ENV)
    os.environ[ENV] = "0"  # read by each child at its start, which is at a submit
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            registered = pool.submit(cpu_types).result()
            for t in work:
                t["types"] = None if registered is None else registered.get(t["op"], [])
            _derive_all(pool, work, records, drops, by_op, examples, say, t0)
            # Retry round: a variation no case made a probe of is tried on the next cases.
            made = {(r["op_type"], r["vary"][0], r["vary"][1]) for r in records if r["kind"] == "vary"}
            retry = tasks(cases, plan(cases, tried, want=set(tried) - made, per_key=RETRY_CASES,
                                      ablation=False, outside=outside), collections.Counter(), say)
            # ... and the operator itself, for an operator none of its first cases made one of.
            missing = {op for op, given in itself_given.items() if given} - {
                r["op_type"] for r in records if r["kind"] == "itself"}
            only_itself = {cid: {"ablate": [], "vary": [], "itself": p["itself"]} for cid, p in plans.items()}
            retry += tasks(cases, only_itself, collections.Counter(), say, itself_given, missing, ITSELF_RETRY)
            for t in retry:
                t["types"] = None if registered is None else registered.get(t["op"], [])
            say(f"generated catalog: retrying {sum(len(t['vary']) for t in retry)} variations and the "
                f"operator itself of {len(missing)} operators on other cases")
            _derive_all(pool, retry, records, drops, by_op, examples, say, t0)
    finally:
        if saved is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = saved
    drops["stamp refused"] += drops.pop("stamps refused (internal)", 0)
    for (op, name, text), case in sorted(outside):
        drops["outside the spec"] += 1
        by_op[op]["outside the spec"] += 1
        if len(examples["outside the spec"]) < 5:
            examples["outside the spec"].append(f"{case}: {name}={text}")
    records.sort(key=lambda r: r["id"])
    seen, unique = set(), []
    for r in records:
        if r["id"] not in seen:  # two variations can land on one id (same value twice)
            seen.add(r["id"])
            unique.append(r)
    unknown = set(drops) - set(REASONS)
    if unknown:  # pragma: no cover - a derive bug; never a silent new reason
        raise RuntimeError(f"drop reasons not in REASONS: {sorted(unknown)}")
    return {"probes": unique, "drops": dict(drops), "examples": dict(examples), "cases": len(cases),
            "drops_by_op": {op: dict(c) for op, c in sorted(by_op.items())},
            "seconds": time.monotonic() - t0}


def _derive_all(pool, work, records, drops, by_op, examples, say, t0) -> None:
    """Run :func:`_run_one` over ``work`` in ``pool``; collect records and drop counts."""
    from concurrent.futures import as_completed

    futures = {pool.submit(_run_one, t): t["name"] for t in work}
    op_of = {t["name"]: t["op"] for t in work}
    for n, fut in enumerate(as_completed(futures), 1):
        try:
            got = fut.result()
        except Exception as exc:  # noqa: BLE001 - a child died (its case only)
            got = {"probes": [], "drops": [("evaluator raised", futures[fut], repr(exc))],
                   "stamps_refused": 0}
        records.extend(got["probes"])
        drops["stamps refused (internal)"] += got["stamps_refused"]
        for reason, what, detail in got["drops"]:
            drops[reason] += 1
            by_op[op_of[futures[fut]]][reason] += 1
            if len(examples[reason]) < 20:
                examples[reason].append(f"{what}: {detail}" if detail else what)
        if n % 100 == 0 or n == len(work):
            say(f"generated catalog: {n}/{len(work)} cases, {len(records)} probes, "
                f"{time.monotonic() - t0:.0f} s")
