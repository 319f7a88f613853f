"""Probes of one node configuration of any operator (:class:`.nodeconfig.Config`).

* ``config`` — the node as the model has it, against the *operator itself* control of the
  generated catalog (:mod:`epaudit.catalog.corpus.itself`): the same node with one required
  fed input baked in as a constant (zeros, else ones, else the fed value reversed along
  axis 0), kept declared as a graph input when nothing else stays fed, so ORT cannot fold
  the node away. An EP that ignores that input, or computes something unrelated, cannot
  pass. Where no fed input separates (a product with a constant 0), the control sets one of
  the node's float constants to other values instead (:func:`_constant_varied`).
* one knock-out per optional input the node feeds (``input:<name>``: the control leaves
  it out) and per attribute it sets off its schema default (``attr:<name>``: the control
  leaves it unset), exactly as the GQA node probes do.

Inputs are seeded from the configuration's digest: floats N(0, 1) rounded to the input's
dtype (scales uniform in [0.02, 0.2], so a dequantized value stays moderate), integers
small (quantized 8-bit data over their full range, zero points near the middle), indices
within the axis they index. When the subject's float64 reference is not finite (a
``Log``, a ``Sqrt`` of a negative), the floats are drawn again from
:data:`RETRY_RANGES`, positive first. Every probe must pass the separation self-check
(:func:`epaudit.classify.compare.separation` >= ``MIN_SEPARATION``) before it runs; one
that cannot is kept as *not exercised* with its reason, never run blind. A knock-out whose
control computes exactly the subject (an attribute written at a value equal to what its
absence means) exercises nothing and is left out silently.

Tolerance: :func:`epaudit.contract.probes.tolerance_for` of the node's dtype at the
length of its longest sum (:func:`reduction`), widened by
:data:`.noderef.NATIVE_WIDENING` when the evaluator had to compute in the node's dtype;
integer outputs are exact except quantized ones (``QuantizeLinear`` and friends round a
float64 ratio: one step either way is the float32 kernel's rounding), held to
:data:`QUANT_TOLERANCE`.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..catalog.corpus.itself import CONSTANTS, with_constant
from ..classify.compare import separation
from ..contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, Case, Probe, Tolerance, tolerance_for
from . import noderef
from .nodeconfig import NUMPY, ONNX_TYPE, Config, Unprobed, is_float

#: Why a node whose inputs are all constants is not probed (and is no compute node).
CONSTANT_ONLY = "every input is a constant: ORT folds the node before an EP sees it"
#: Float ranges tried, in order, when the N(0, 1) subject's reference is not finite.
RETRY_RANGES = ((0.5, 2.0), (0.1, 0.9))
#: Float range of a second try when no control is decisive at N(0, 1) (outputs below the
#: dtype's absolute bound).
DECISIVE_RANGE = (10.0, 100.0)
#: Bound of quantized integer outputs: one quantization step.
QUANT_TOLERANCE = Tolerance(atol=1.01, rtol=0.0)
#: Operators whose integer outputs are quantized values.
QUANTIZERS = frozenset({"QuantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd",
                        "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool",
                        "QLinearGlobalAveragePool", "QLinearConcat", "QLinearSoftmax", "QGemm"})
#: The weight input of the operators with a long dot product (scaled by 1/sqrt(fan-in)).
WEIGHT_INPUT = {"Conv": ("W",), "ConvTranspose": ("W",), "MatMul": ("B",), "Gemm": ("B",), "FusedMatMul": ("B",),
                "FusedConv": ("W",), "LSTM": ("W", "R"), "GRU": ("W", "R"), "RNN": ("W", "R")}
#: Operators that may quantize an input to int8 on the way (a declared precision hint):
#: that input is drawn exact under the quantization (:func:`_exact_after_int8`).
INT8_EXACT = {"MatMulNBits": "A"}
#: Index inputs: (op, input) -> how to find the size of the axis they index.
INDEX = {("Gather", "indices"): ("data", "axis", 0), ("GatherElements", "indices"): ("data", "axis", 0),
         ("GatherND", "indices"): ("data", None, 0), ("ScatterElements", "indices"): ("data", "axis", 0),
         ("ScatterND", "indices"): ("data", None, 0), ("OneHot", "indices"): ("depth", None, 0),
         ("GatherBlockQuantized", "indices"): ("data", "gather_axis", 0),
         # com.microsoft.EmbedLayerNormalization looks its ids up in the rows of its tables
         # (ORT docs/ContribOperators.md): drawn from -4..4 they left the word embedding and
         # the node of every fused BERT went unprobed ("input_ids outside the word embedding").
         # No attribute names the axis: a name no node has, default 0, is the tables' rows.
         ("EmbedLayerNormalization", "input_ids"): ("word_embedding", "(rows)", 0),
         ("EmbedLayerNormalization", "segment_ids"): ("segment_embedding", "(rows)", 0),
         ("EmbedLayerNormalization", "position_ids"): ("position_embedding", "(rows)", 0)}


def reduction(cfg: Config) -> int:
    """The length of the node's longest sum (the dot product of a ``Conv`` or ``MatMul``,
    a recurrent step, a reduced axis), 16 when the operator has none."""
    s = {x.key: x.dims for x in cfg.slots if x is not None}
    op = cfg.op_type
    try:
        if op in ("Conv", "ConvInteger", "QLinearConv", "FusedConv") and "W" in s or "w" in s:
            w = s.get("W") or s.get("w")
            return int(w[1] * math.prod(w[2:]))
        if op == "ConvTranspose" and "W" in s:
            w = s["W"]
            return int(w[0] * math.prod(w[2:]))
        if op in ("MatMul", "MatMulInteger", "QLinearMatMul", "MatMulNBits", "Gemm", "FusedMatMul"):
            a = s.get("A") or s.get("a")
            return int(max(a[-2:]) if op == "Gemm" else a[-1])
        if op in ("LSTM", "GRU", "RNN"):
            x, r = s["X"], s["R"]
            return int((x[-1] + r[-1]) * x[0])
        if op.startswith("Reduce") or op in ("LayerNormalization", "Softmax", "LogSoftmax", "GlobalAveragePool",
                                             "SkipLayerNormalization", "SimplifiedLayerNormalization",
                                             "SkipSimplifiedLayerNormalization", "InstanceNormalization",
                                             "GroupNormalization", "LpNormalization", "MeanVarianceNormalization"):
            x = next(iter(s.values()))
            return int(math.prod(x[1:])) if len(x) > 1 else int(x[0]) if x else 16
    except (KeyError, IndexError, TypeError):
        return 16
    return 16


def _draw(slot, rng: np.random.Generator, cfg: Config, sizes: Mapping[str, tuple], floats: tuple | None):
    shape, dtype = slot.dims, slot.dtype
    np_t = NUMPY[dtype]
    key = slot.key.lower()
    index = INDEX.get((cfg.op_type, slot.key))
    if index is not None and dtype.startswith(("int", "uint")):
        of, attr, default = index
        size = None
        if of == "depth":
            depth = next((x for x in cfg.slots if x is not None and x.key == "depth" and x.role == "const"), None)
            size = int(np.asarray(depth.value).reshape(-1)[0]) if depth is not None else None
        elif of in sizes:
            data = sizes[of]
            if attr is None:  # GatherND/ScatterND: the last index dim indexes the leading dims
                size = min(data[: shape[-1]]) if shape and shape[-1] <= len(data) else None
            else:
                axis = int(cfg.attributes.get(attr, default) or 0)
                size = data[axis % len(data)] if data else None
        if not size:
            raise Unprobed(f"range of index input {slot.key} unknown")
        if cfg.op_type.startswith("Scatter"):
            if math.prod(shape) > size:
                raise Unprobed("scatter indices would repeat (undefined order): not probed")
            return rng.permutation(size)[: math.prod(shape)].reshape(shape).astype(np_t)
        return rng.integers(0, size, size=shape).astype(np_t)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        if "zero_point" in key:
            mid = 128 if dtype == "uint8" else 0
            return rng.integers(mid - 8, mid + 8, size=shape).astype(np_t)
        if dtype in ("uint8", "int8") and cfg.op_type not in ("Add", "Sub", "Mul"):
            info = np.iinfo(np_t)
            return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(np_t)
        lo = 0 if dtype.startswith("uint") else -4
        return rng.integers(lo, 5, size=shape).astype(np_t)
    if cfg.op_type == "MatMulNBits" and key == "scales":
        # W = (code - zero point) * scale with codes of std ~4.6 (4 bits): scales that give W a
        # std of 1/sqrt(K), as a trained weight has, keep every partial sum O(1).
        k = int(cfg.attributes.get("K", 64) or 64)
        bits = int(cfg.attributes.get("bits", 4) or 4)
        spread = math.sqrt(((1 << bits) ** 2 - 1) / 12.0)
        x = rng.uniform(0.5, 1.5, size=shape) / (spread * math.sqrt(k))
    elif "scale" in key and cfg.op_type not in ("Resize", "Upsample"):
        x = rng.uniform(0.02, 0.2, size=shape)
    elif floats is not None:
        x = rng.uniform(*floats, size=shape)
    elif key in ("var", "input_var") or "variance" in key:
        x = rng.uniform(0.5, 1.5, size=shape)
    else:
        x = rng.standard_normal(shape)
        if slot.key in WEIGHT_INPUT.get(cfg.op_type, ()):
            # A weight scaled as initialisers are (std 1/sqrt(fan-in)): outputs and every
            # partial sum stay O(1), so a kernel that accumulates in float16, a legitimate
            # choice, stays within the dtype's bound while a wrong kernel does not.
            fan = reduction(cfg)
            if cfg.op_type in ("LSTM", "GRU", "RNN"):
                fan = sum(sizes[k][-1] for k in ("X", "R") if k in sizes)
            x = x / math.sqrt(max(1, fan))
    return np.asarray(x).astype(np_t)


def _exact_after_int8(shape: tuple[int, ...], np_t) -> np.ndarray:
    """Activations a kernel may quantize to int8 per block without changing them
    (MatMulNBits ``accuracy_level`` 4, the catalog's data, ``epaudit/catalog/matmulnbits.py``):
    multiples of 1/32 in [-127/32, 127/32] with +-127/32 at every 16th element of the last
    axis, so every block of 16 or more has absmax 127/32 and scale 1/32 exactly."""
    rng = np.random.default_rng(math.prod(shape) or 1)
    codes = rng.integers(-127, 128, size=shape)
    codes[..., ::16] = np.where(rng.random(codes[..., ::16].shape) < 0.5, -127, 127)
    return (codes / 32.0).astype(np_t)


def _values(cfg: Config, seed: int, floats: tuple | None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = {s.key: s.dims for s in cfg.slots if s is not None}
    out = {}
    for s in cfg.slots:
        if s is None:
            continue
        if s.role in ("const", "fedvalue"):
            out[s.key] = np.asarray(s.value).astype(NUMPY[s.dtype])
        elif cfg.op_type in INT8_EXACT and s.key == INT8_EXACT[cfg.op_type] and floats is None:
            out[s.key] = _exact_after_int8(s.dims, NUMPY[s.dtype])
        else:
            out[s.key] = np.asarray(_draw(s, rng, cfg, sizes, floats))
    return out


def build_model(cfg: Config, values: Mapping[str, np.ndarray], *, drop_input: str | None = None,
                drop_attr: str | None = None):
    """The one-node ``ModelProto`` of ``cfg`` with ``values``; fed inputs are graph inputs,
    weights and constants initializers. ``drop_input`` leaves one input out (a knock-out),
    ``drop_attr`` one attribute."""
    import onnx
    from onnx import helper, numpy_helper

    inputs, inits, node_in = [], [], []
    for s in cfg.slots:
        if s is None or s.key == drop_input:
            node_in.append("")
            continue
        node_in.append(s.key)
        if s.role in ("fed", "fedvalue"):
            inputs.append(helper.make_tensor_value_info(s.key, ONNX_TYPE[s.dtype], list(s.dims)))
        else:
            inits.append(numpy_helper.from_array(np.asarray(values[s.key]), s.key))
    while node_in and node_in[-1] == "":
        node_in.pop()
    node_out = [o[0] if o is not None else "" for o in cfg.outputs]
    while node_out and node_out[-1] == "":
        node_out.pop()
    node = onnx.NodeProto()
    node.op_type, node.domain, node.name = cfg.op_type, cfg.domain, PROBE_NODE_NAME
    node.input.extend(node_in)
    node.output.extend(node_out)
    for raw in cfg.attrs:
        a = onnx.AttributeProto()
        a.ParseFromString(raw)
        if a.name != drop_attr:
            node.attribute.append(a)
    outs = []
    for o in cfg.outputs:
        if o is None:
            continue
        vi = onnx.ValueInfoProto()
        vi.name = o[0]
        outs.append(vi)
    graph = helper.make_graph([node], f"epaudit.node.{cfg.op_type}", inputs, outs, inits)
    opsets = dict(cfg.opsets)
    opsets.setdefault(cfg.domain, cfg.opset)
    if "" not in opsets:
        opsets[""] = 21
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                              producer_name="epaudit-scan")
    model.ir_version = 10 if max(v for d, v in opsets.items() if d == "") >= 21 else 8
    return model


def _reference_fn(cfg: Config):
    key = (cfg.domain, cfg.op_type)
    if key in noderef.KNOWN_WRONG:
        raise Unprobed(f"no trustworthy reference: {noderef.KNOWN_WRONG[key]}")
    inputs = tuple(s.key if s is not None else None for s in cfg.slots)
    outputs = tuple(o[0] if o is not None else None for o in cfg.outputs)
    override = noderef.OVERRIDES.get((cfg.domain, cfg.op_type, cfg.since or 0))
    if override is not None:
        return noderef.positional(override, inputs, outputs)
    if cfg.domain not in ("", "ai.onnx.ml") or (cfg.domain == "" and cfg.since is None):
        contrib = noderef.contrib_references().get(key)
        if contrib is None:
            raise Unprobed(f"no reference for {cfg.domain or 'ai.onnx'}.{cfg.op_type} "
                           "(onnx.reference has none; epaudit has none yet)")
        return noderef.positional(contrib, inputs, outputs)
    return None


def _attrs(model) -> dict[str, object]:
    """The probe node's attributes as python values (a knock-out's, without the dropped one)."""
    from onnx import helper

    out = {}
    for a in model.graph.node[-1].attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return out


def _case(cfg: Config, model, values, ref) -> tuple[Case, bool]:
    feeds = {vi.name: values[vi.name] for vi in model.graph.input}
    try:
        got, wide = noderef.evaluate(model, feeds, ref, _attrs(model), cfg.since)
    except noderef.NoReference as exc:
        if ref is not None and "NotImplementedError" in str(exc):  # a fast path that declines: the evaluator
            return _case(cfg, model, values, None)
        raise Unprobed(str(exc)) from None
    names = tuple(vi.name for vi in model.graph.output if vi.name in got)
    if ref is not None and cfg.domain == "" and cfg.since is not None and len(names) < len(model.graph.output):
        return _case(cfg, model, values, None)  # an own implementation lacks an output: the evaluator
    if not names:
        raise Unprobed("the reference gives none of the node's outputs")
    exact = frozenset(n for n in names if got[n].dtype.kind in "biu" and cfg.op_type not in QUANTIZERS)
    reference = {n: np.asarray(got[n], np.float64) for n in names}
    case = Case(model=model.SerializeToString(), feeds=feeds, outputs=names, reference=reference, exact=exact)
    return case, wide


def _finite(case: Case) -> bool:
    return all(np.isfinite(r).all() for r in case.reference.values())


def _tolerance(cfg: Config, subject: Case, native: bool) -> Tolerance:
    outputs_int = all(r.dtype.kind in "biu" or n in subject.exact for n, r in subject.reference.items())
    if cfg.op_type in QUANTIZERS:
        return QUANT_TOLERANCE
    if not is_float(cfg.dtype) or outputs_int:
        return Tolerance(atol=0.05, rtol=0.0)  # integer outputs: compared exactly (Case.exact)
    base = tolerance_for(cfg.dtype if cfg.dtype in ("float16", "float32", "float64") else "float32",
                         reduction(cfg))
    if native and cfg.dtype != "float64":
        return Tolerance(atol=base.atol * noderef.NATIVE_WIDENING, rtol=base.rtol * noderef.NATIVE_WIDENING)
    return base


def probes(cfg: Config, fid: str, seed: int) -> tuple[list[tuple[str, Probe]], list[str]]:
    """``([(part, probe)], [not exercised, one phrase each])`` of one configuration;
    ``fid`` prefixes every probe's feature id (``<fid>.<part>``).

    Raises:
        Unprobed: no reference, no finite reference, or no decisive ``config`` control
            (then the configuration is not probed at all).
    """
    ref = _reference_fn(cfg)
    subject, native, values = None, False, None
    for floats in (None,) + RETRY_RANGES:
        values = _values(cfg, seed, floats)
        model = build_model(cfg, values)
        subject, wide = _case(cfg, model, values, ref)
        native = not wide
        if _finite(subject):
            break
    else:
        raise Unprobed("reference not finite at any seeded input range")
    tol = _tolerance(cfg, subject, native)
    out: list[tuple[str, Probe]] = []
    skipped: list[str] = []
    if not any(s is not None and s.role in ("fed", "fedvalue") for s in cfg.slots):
        raise Unprobed(CONSTANT_ONLY)  # nodeconfig feeds a DequantizeLinear's x: never here for one ORT keeps
    config = _itself(cfg, subject, values, ref, tol, f"{fid}.config")
    if config is None and cfg.dtype in ("float32", "float16", "float64"):
        # Outputs too small for the dtype's absolute bound (a scale of 5e-4): larger inputs.
        big = _values(cfg, seed, DECISIVE_RANGE)
        bmodel = build_model(cfg, big)
        bsubject, bwide = _case(cfg, bmodel, big, ref)
        if _finite(bsubject):
            btol = _tolerance(cfg, bsubject, not bwide)
            config = _itself(cfg, bsubject, big, ref, btol, f"{fid}.config")
            if config is not None:
                subject, values, tol = bsubject, big, btol
    if config is None:
        raise Unprobed("no decisive control: the outputs do not depend on any fed input's values")
    out.append(("config", config))
    sch_defaults = {}
    from .schemas import schema

    sch = schema(cfg.op_type, cfg.domain, cfg.opset)
    if sch is not None:
        sch_defaults = sch.defaults
    for s in cfg.slots:
        if s is None or not s.optional:
            continue
        _knockout(cfg, subject, values, ref, tol, f"input:{s.key}", fid, out, skipped, drop_input=s.key)
    for name, value in cfg.attributes.items():
        if sch is not None and (name in sch.required or sch.is_default(name, value)):
            continue
        if sch is None and name not in sch_defaults and cfg.domain in ("", "ai.onnx.ml"):
            continue
        _knockout(cfg, subject, values, ref, tol, f"attr:{name}", fid, out, skipped, drop_attr=name)
    return out, skipped


def _itself(cfg: Config, subject: Case, values, ref, tol: Tolerance, fid: str) -> Probe | None:
    import onnx

    model = onnx.load_from_string(subject.model)
    node = model.graph.node[0]
    fed = {vi.name for vi in model.graph.input}
    for index, name in enumerate(node.input):
        slot = next((s for s in cfg.slots if s is not None and s.key == name), None)
        if not name or name not in fed or slot is None or slot.optional:
            continue
        for kind in CONSTANTS:
            made = with_constant(model, dict(subject.feeds), index, kind)
            if made is None:
                continue
            probe = _decisive(cfg, subject, *made, ref, tol, fid)
            if probe is not None:
                return probe
    return _constant_varied(cfg, subject, ref, tol, fid)


def _decisive(cfg: Config, subject: Case, cmodel, cfeeds, ref, tol: Tolerance, fid: str) -> Probe | None:
    """The probe of ``subject`` against the control ``cmodel`` fed ``cfeeds``, where the
    control has a finite reference for every subject output and is apart from the subject
    by the separation bound; else ``None``."""
    try:
        got, _ = noderef.evaluate(cmodel, cfeeds, ref, _attrs(cmodel), cfg.since)
    except noderef.NoReference:
        return None
    if not all(n in got for n in subject.outputs):
        return None
    control = Case(model=cmodel.SerializeToString(), feeds=cfeeds, outputs=subject.outputs,
                   reference={n: np.asarray(got[n], np.float64) for n in subject.outputs}, exact=subject.exact)
    if not _finite(control):
        return None
    probe = Probe(feature_id=fid, subject=subject, control=control, tolerance=tol, dtype=cfg.dtype)
    return probe if separation(probe) >= MIN_SEPARATION else None


def _constant_varied(cfg: Config, subject: Case, ref, tol: Tolerance, fid: str) -> Probe | None:
    """The ``config`` control of last resort: the node with one of its float constants (a
    ``const`` slot: a small initializer the model holds, kept at its value in the subject)
    set to other values, where no fed input separates. skl2onnx's KMeans multiplies the
    squared norms by a constant ``0`` (a zero tensor shaped like the batch): the product is
    0 whatever is fed, but an EP that ignores the constant, or reads another value for it,
    gives a different product, and this control shows it (seeded from the configuration's
    subject model's digest, N(0, 1) + 2). ``None`` when no float constant changes the outputs
    by the separation bound."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(subject.model)
    import hashlib

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(subject.model).digest()[:8], "little"))
    for slot in cfg.slots:
        if slot is None or slot.role != "const" or not is_float(slot.dtype):
            continue
        inits = [i for i in model.graph.initializer if i.name == slot.key]
        if len(inits) != 1:
            continue
        old = numpy_helper.to_array(inits[0])
        value = (rng.standard_normal(old.shape) + 2.0).astype(old.dtype)
        cmodel = onnx.ModelProto()
        cmodel.CopyFrom(model)
        for init in cmodel.graph.initializer:
            if init.name == slot.key:
                init.CopyFrom(numpy_helper.from_array(value, slot.key))
        probe = _decisive(cfg, subject, cmodel, dict(subject.feeds), ref, tol, fid)
        if probe is not None:
            return probe
    return None


def _knockout(cfg: Config, subject: Case, values, ref, tol: Tolerance, part: str, fid: str, out: list,
              skipped: list, *,
              drop_input: str | None = None, drop_attr: str | None = None) -> None:
    what = f"input {drop_input}" if drop_input else f"attribute {drop_attr}"
    model = build_model(cfg, values, drop_input=drop_input, drop_attr=drop_attr)
    try:
        control, _ = _case(cfg, model, values, ref)
    except Unprobed as exc:
        skipped.append(f"{what}: the control without it has no reference ({exc})")
        return
    if set(control.outputs) != set(subject.outputs) or not _finite(control):
        skipped.append(f"{what}: the control without it gives other or non-finite outputs")
        return
    probe = Probe(feature_id=f"{fid}.{part}", subject=subject, control=control, tolerance=tol, dtype=cfg.dtype)
    apart = separation(probe)
    if apart == 0.0:
        return  # written at the value its absence means: nothing to exercise
    if apart < MIN_SEPARATION:
        skipped.append(f"{what}: not separable at these inputs ({apart:.3g} tolerance bounds)")
        return
    out.append((part, probe))
