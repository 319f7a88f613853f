"""Probes for the ONNX sequence and optional operators: ``SequenceConstruct``, ``SequenceAt``,
``SequenceLength``, ``SequenceInsert``, ``SequenceErase``, ``SequenceEmpty``,
``SplitToSequence``, ``ConcatFromSequence``, ``Optional`` and ``OptionalHasElement``
(``OptionalGetElement`` is probed by the generated catalog).

A sequence or an optional cannot be a graph input or output here (probes feed and compare
tensors), so each probe model is a small graph: helper nodes build the sequence
(``SequenceConstruct`` of fed tensors, ``build`` below) or the optional (``wrap``), the node
under test is the one named ``probe``, and helper nodes read the result back into tensors
(``read``: ``ConcatFromSequence`` with ``new_axis`` 1, or ``SequenceAt``, ``SequenceLength``,
``OptionalGetElement``, ``OptionalHasElement``; a bool through ``Where(h, a, b)``, so a
flipped answer moves a tensor and reads MISMATCH, not the control's value). ORT's constant
folding takes none of these nodes (measured on 1.31.1: it folds only nodes whose inputs are
constant tensors and whose outputs are tensors). Every output is a copy, a count or a bool:
all are compared exactly. The reference of the whole graph, helpers included, is
:func:`epaudit.reference.sequences.evaluate`.

Helper nodes are written unnamed (their names here only address them): the placement rules
(``epaudit/classify/placement.py``) know the probe node by name and the ``cast_`` helpers,
and read any other named node beside an inlined probe as a replacement they cannot name
(``unknown``), so the self-test's ``decompose`` fault could never read ``DECOMPOSED``.

Controls: a fed input baked in as another constant (the second tensor of a sequence, an
``Optional``'s input), a ``position``/``split`` input left out (the default: the back, the last
tensor, chunks of 1), an attribute back to its default (``keepdims``, ``new_axis``,
``SplitToSequence`` ``axis``), or (``ConcatFromSequence``'s required ``axis``) another value.
A control with nothing fed keeps its constants declared as graph inputs (never fed), as
:mod:`._xcase` does. Models import ai.onnx 21 (SequenceX-11, SplitToSequence-11, Optional-15,
OptionalHasElement-18 in effect there).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, PROBE_NODE_NAME, TOLERANCES, Case, Feature, Probe, Tolerance, Use
from ..reference import sequences as ref
from .models import set_lowest_ir_version

OPSET = 21
#: A builder's product: the probe of the feature id it is given (:func:`_f` binds the id).
_Make = Callable[[str], Probe]
#: Tolerance of a probe whose outputs are all integers or bools (:mod:`._xcase`'s).
INTEGER_TOLERANCE = Tolerance(atol=0.05, rtol=0.0)
_SCHEMA = {"SequenceConstruct": 11, "SequenceAt": 11, "SequenceLength": 11, "SequenceInsert": 11,
           "SequenceErase": 11, "SequenceEmpty": 11, "SplitToSequence": 11, "ConcatFromSequence": 11,
           "Optional": 15, "OptionalHasElement": 18}
_ELEM = {"float32": 1, "int32": 6, "int64": 7, "float16": 10, "bool": 9, "float64": 11}
_STACK = {"axis": 0, "new_axis": 1}


@dataclass(frozen=True)
class _G:
    """One probe graph: nodes ``(name, op_type, inputs, output, attributes)`` in order, the
    tensors fed, the tensors baked in as initializers, the graph outputs in order."""

    nodes: tuple
    feeds: Mapping[str, np.ndarray]
    outputs: tuple[str, ...]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)

    def baked(self, **values: np.ndarray) -> "_G":
        """The same graph with fed inputs turned into constants holding ``values``."""
        return replace(self, feeds={k: v for k, v in self.feeds.items() if k not in values},
                       constants={**self.constants, **values})

    def node(self, name: str, inputs=None, **attrs) -> "_G":
        """The same graph with node ``name``'s inputs (``None``: kept) and attributes (an
        attribute set to ``None`` is dropped: back to its default) changed."""
        out = []
        for n, op, ins, o, a in self.nodes:
            if n == name:
                a = {k: v for k, v in {**a, **attrs}.items() if v is not None}
                ins = tuple(inputs) if inputs is not None else ins
            out.append((n, op, ins, o, a))
        used = {i for _, _, ins, _, _ in out for i in ins}
        return replace(self, nodes=tuple(out), feeds={k: v for k, v in self.feeds.items() if k in used},
                       constants={k: v for k, v in self.constants.items() if k in used})


def _value_info(name: str, arr: np.ndarray):
    from onnx import helper

    return helper.make_tensor_value_info(name, _ELEM[str(arr.dtype)], list(arr.shape))


def _case(g: _G) -> Case:
    """The model, feeds and float64 reference of one graph (every output exact)."""
    from onnx import helper, numpy_helper

    env = ref.evaluate([(op, ins, out, attrs) for _, op, ins, out, attrs in g.nodes], {**g.feeds, **g.constants})
    outs = {o: np.asarray(env[o]) for o in g.outputs}
    nodes = [helper.make_node(op, list(ins), [out], name=name if name == PROBE_NODE_NAME else "", **attrs)
             for name, op, ins, out, attrs in g.nodes]
    inputs = [_value_info(n, a) for n, a in g.feeds.items()]
    if not g.feeds:  # nothing fed: constants stay declared graph inputs (module docstring)
        inputs = [_value_info(n, a) for n, a in g.constants.items()]
    graph = helper.make_graph(nodes, "epaudit.sequences", inputs, [_value_info(o, a) for o, a in outs.items()],
                              initializer=[numpy_helper.from_array(a, n) for n, a in g.constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="epaudit")
    set_lowest_ir_version(model)
    return Case(model=model.SerializeToString(), feeds=dict(g.feeds), outputs=g.outputs,
                reference={o: a.astype(np.float64) for o, a in outs.items()}, exact=frozenset(g.outputs))


def _probe(fid: str, dtype: str, subject: _G, control: _G) -> Probe:
    """Subject against control; :data:`INTEGER_TOLERANCE` when no output is a float (counts, bools)."""
    import onnx

    s = _case(subject)
    kinds = {vi.type.tensor_type.elem_type for vi in onnx.load_from_string(s.model).graph.output}
    tol = TOLERANCES[dtype] if kinds & {_ELEM["float16"], _ELEM["float32"], _ELEM["float64"]} else INTEGER_TOLERANCE
    return Probe(feature_id=fid, subject=s, control=_case(control), tolerance=tol, dtype=dtype)


def _tensors(seed: int, dtype: str, shapes) -> dict[str, np.ndarray]:
    """Tensors ``a``, ``b``, ``c``, … of ``shapes``: N(0, 1) rounded to a float ``dtype``, or
    integers in [-50, 50)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in zip("abcdefgh", shapes):
        if dtype.startswith("float"):
            out[name] = rng.standard_normal(shape).astype(dtype)
        else:
            out[name] = rng.integers(-50, 50, shape).astype(dtype)
    return out


def _other(arr: np.ndarray) -> np.ndarray:
    """A different constant of ``arr``'s shape and dtype (every element 77)."""
    return np.full_like(arr, 77)


def _scalar(value: int, dtype: str = "int64") -> np.ndarray:
    return np.array(value, dtype=dtype)


def _read(src: str, out: str = "y") -> tuple:
    return ("read", "ConcatFromSequence", (src,), out, dict(_STACK))


def _built(names) -> tuple:
    return ("build", "SequenceConstruct", tuple(names), "s", {})


def _parts(src: str) -> tuple:
    """Helpers reading a sequence back as its length ``n``, first ``first`` and last ``last`` tensor."""
    return (("len", "SequenceLength", (src,), "n", {}), ("at0", "SequenceAt", (src, "p0"), "first", {}),
            ("at_last", "SequenceAt", (src, "p_last"), "last", {}))


_PARTS_CONST = {"p0": _scalar(0), "p_last": _scalar(-1)}


# --------------------------------------------------------------------------- builders
def _construct(seed: int, dtype: str) -> _Make:
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 3)
        g = _G((("probe", "SequenceConstruct", ("a", "b", "c"), "s", {}), _read("s")), t, ("y",))
        return _probe(fid, dtype, g, g.baked(b=_other(t["b"])))
    return build


def _at(seed: int, dtype: str, position: int, pos_dtype: str = "int64") -> _Make:
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 3)
        g = _G((_built("abc"), ("probe", "SequenceAt", ("s", "position"), "y", {})),
               {**t, "position": _scalar(position, pos_dtype)}, ("y",))
        return _probe(fid, dtype, g, g.baked(position=_scalar(0, pos_dtype)))
    return build


def _length(seed: int, dtype: str) -> _Make:
    def build(fid: str) -> Probe:
        g = _G((_built("abc"), ("probe", "SequenceLength", ("s",), "n", {})), _tensors(seed, dtype, [(2, 3)] * 3),
               ("n",))
        return _probe(fid, dtype, g, g.node("build", inputs=("a", "b")))
    return build


def _insert(seed: int, dtype: str, position: int | None, pos_dtype: str = "int64") -> _Make:
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 3)
        feeds = {"a": t["a"], "b": t["b"], "t": t["c"]}
        ins = ("s", "t", "position") if position is not None else ("s", "t")
        if position is not None:
            feeds["position"] = _scalar(position, pos_dtype)
        g = _G((_built("ab"), ("probe", "SequenceInsert", ins, "s2", {}), _read("s2")), feeds, ("y",))
        control = g.node("probe", inputs=("s", "t")) if position is not None else g.baked(t=_other(t["c"]))
        return _probe(fid, dtype, g, control)
    return build


def _erase(seed: int, dtype: str, position: int, pos_dtype: str = "int64") -> _Make:
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 3)
        g = _G((_built("abc"), ("probe", "SequenceErase", ("s", "position"), "s2", {}), _read("s2")),
               {**t, "position": _scalar(position, pos_dtype)}, ("y",))
        return _probe(fid, dtype, g, g.node("probe", inputs=("s",)))
    return build


def _empty(seed: int, dtype: str) -> _Make:
    """SequenceEmpty, then two SequenceInserts and a stack (``y``) and the empty sequence's
    length (``n``, 0). The node has no input: the control bakes in the second inserted tensor,
    so an EP that never runs the chain reads IGNORED; ``n`` is what the node itself decides."""
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 2)
        attrs = {} if dtype == "float32" else {"dtype": _ELEM[dtype]}
        g = _G((("probe", "SequenceEmpty", (), "e", attrs), ("len", "SequenceLength", ("e",), "n", {}),
                ("insert0", "SequenceInsert", ("e", "a"), "s1", {}),
                ("insert1", "SequenceInsert", ("s1", "b"), "s2", {}),
                _read("s2")), t, ("y", "n"))
        return _probe(fid, dtype, g, g.baked(b=_other(t["b"])))
    return build


def _split(seed: int, dtype: str, shape, attrs: Mapping[str, int], *, split=None,
           split_dtype: str = "int64", drop: str | None = None, stack: bool = False) -> _Make:
    """SplitToSequence of ``x``, read back by a stack (``y``: parts of one shape) or as length,
    first and last part; the control drops ``split`` (``drop="split"``) or resets attribute ``drop``."""
    def build(fid: str) -> Probe:
        x = _tensors(seed, dtype, [shape])["a"]
        feeds = {"x": x} if split is None else {"x": x, "split": np.array(split, dtype=split_dtype)}
        probe = ("probe", "SplitToSequence", tuple(feeds), "s", dict(attrs))
        readers = (_read("s"),) if stack else _parts("s")
        g = _G((probe,) + readers, feeds, ("y",) if stack else ("first", "last", "n"),
               {} if stack else dict(_PARTS_CONST))
        control = g.node("probe", inputs=("x",)) if drop == "split" else g.node("probe", **{drop: None})
        return _probe(fid, dtype, g, control)
    return build


def _concat(seed: int, dtype: str, attrs: Mapping[str, int], control: Mapping[str, int] | None,
            shapes=((2, 3),) * 3) -> _Make:
    """ConcatFromSequence of a, b, c; the control sets ``control``'s attributes (``None``
    values: back to the default), or (``control`` None) bakes in b."""
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, shapes)
        g = _G((_built("abc"), ("probe", "ConcatFromSequence", ("s",), "y", dict(attrs))), t, ("y",))
        return _probe(fid, dtype, g, g.node("probe", **control) if control else g.baked(b=_other(t["b"])))
    return build


def _type(dtype: str, seq: bool = False):
    from onnx import helper

    tensor = helper.make_tensor_type_proto(_ELEM[dtype], [2, 3])
    return helper.make_sequence_type_proto(tensor) if seq else tensor


def _select(h: str = "h") -> tuple:
    """``Where(h, a, b)``: the bool read back as a tensor, so that a flipped answer moves a
    float (or int) output and reads MISMATCH, not the control's value."""
    return ("select", "Where", (h, "a", "b"), "y", {})


def _optional(seed: int, dtype: str, kind: str) -> _Make:
    """Optional of a tensor (read back by OptionalGetElement ``y`` and OptionalHasElement
    ``h``; control: the tensor baked in), of a sequence (the same, stacked; control: b baked
    in), or empty (``kind="empty"``: ``h`` and ``y = Where(h, a, b)``; control: Optional of a
    constant)."""
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 2)
        has = ("has", "OptionalHasElement", ("o",), "h", {})
        if kind == "empty":
            g = _G((("probe", "Optional", (), "o", {"type": _type(dtype)}), has, _select()), t, ("y", "h"))
            return _probe(fid, dtype, g, replace(g, nodes=(("probe", "Optional", ("k",), "o", {}),) + g.nodes[1:],
                                                 constants={"k": _other(t["a"])}))
        get = ("get", "OptionalGetElement", ("o",), "v", {})
        if kind == "sequence":
            g = _G((_built("ab"), ("probe", "Optional", ("s",), "o", {}), get, _read("v"), has), t, ("y", "h"))
            return _probe(fid, dtype, g, g.baked(b=_other(t["b"])))
        g = _G((("probe", "Optional", ("a",), "o", {}), get[:3] + ("y", {}), has), {"a": t["a"]}, ("y", "h"))
        return _probe(fid, dtype, g, g.baked(a=_other(t["a"])))
    return build


def _has(seed: int, dtype: str, kind: str) -> _Make:
    """OptionalHasElement of a fed tensor ``a``, of an Optional of it (``wrap``) or of a sequence
    of it (``build``): true, so ``y = Where(h, a, b)`` is ``a``; the control's input is an empty
    Optional (``wrap`` with no input): false, ``y`` is ``b``."""
    def build(fid: str) -> Probe:
        t = _tensors(seed, dtype, [(2, 3)] * 2)
        probe = ("probe", "OptionalHasElement", ("o",), "h", {})
        helpers = {"tensor": (), "optional": (("wrap", "Optional", ("a",), "o", {}),),
                   "sequence": (("build", "SequenceConstruct", ("a",), "o", {}),)}[kind]
        first = helpers + (probe,) if helpers else (probe[:2] + (("a",),) + probe[3:],)
        g = _G(first + (_select(),), t, ("y", "h"))
        empty = ("wrap", "Optional", (), "o", {"type": _type(dtype, seq=kind == "sequence")})
        return _probe(fid, dtype, g, replace(g, nodes=(empty, probe, _select())))
    return build


# --------------------------------------------------------------------------- features
_SPEC = "ONNX {op}-{v} spec; reference epaudit/reference/sequences.py"


def _f(fid: str, op: str, dtype: str, changes: str, make: _Make, uses: Use | None = None, note: str = "") -> Feature:
    source = _SPEC.format(op=op, v=_SCHEMA[op]) + (f"; the spec: {note}" if note else "")
    return Feature(id=fid, op_type=op, domain="", opset=OPSET, dtype=dtype, changes=changes, source=source,
                   build=partial(make, fid), uses=uses or Use())


_POS, _SPLIT = Use(inputs=("position",)), Use(inputs=("split",))
_KEEP0, _AXIS = Use(attributes={"keepdims": 0}), Use(attributes={"axis": NON_DEFAULT})
_NEW_AXIS, _CAT_AXIS1, _INPUT = Use(attributes={"new_axis": 1}), Use(attributes={"axis": 1}), Use(inputs=("input",))
_SC, _SA, _SL, _SI, _SE = "SequenceConstruct", "SequenceAt", "SequenceLength", "SequenceInsert", "SequenceErase"
_EM, _SP, _CF, _OP, _OH = "SequenceEmpty", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement"

#: The sequence and optional operator features, in catalog order.
FEATURES: tuple[Feature, ...] = (
    _f("sequence.construct.three_tensors", _SC, "float32",
       "3 fed (2,3) tensors, stacked back (3,2,3); control bakes in b", _construct(9101, "float32")),
    _f("sequence.construct.three_tensors.int64", _SC, "int64", "the same with int64 tensors; control bakes in b",
       _construct(9102, "int64")),
    _f("sequence.construct.three_tensors.float16", _SC, "float16", "the same with float16 tensors; control bakes in b",
       _construct(9103, "float16")),
    _f("sequence.at.position", _SA, "float32", "position 1 (int64) of [a,b,c] is b; control bakes in position 0",
       _at(9201, "float32", 1)),
    _f("sequence.at.negative_position", _SA, "float32", "position -1 is the last tensor c; control position 0",
       _at(9202, "float32", -1), note="'Negative value means counting positions from the back'"),
    _f("sequence.at.negative_position.int64", _SA, "int64", "int64 tensors, position -2 is b; control position 0",
       _at(9203, "int64", -2)),
    _f("sequence.at.position_int32.float16", _SA, "float16", "float16 tensors, int32 position 2; control position 0",
       _at(9204, "float16", 2, "int32"), note="I includes tensor(int32)"),
    _f("sequence.length.three_tensors", _SL, "float32", "a sequence of 3 tensors has length 3; control of a, b: 2",
       _length(9301, "float32")),
    _f("sequence.length.three_tensors.int64", _SL, "int64", "the same of int64 tensors; control 2",
       _length(9302, "int64")),
    _f("sequence.insert.position", _SI, "float32",
       "position 0 inserts t at the front [t,a,b]; control leaves position out (back)",
       _insert(9401, "float32", 0), _POS),
    _f("sequence.insert.negative_position", _SI, "float32",
       "position -1 inserts before the last [a,t,b]; control leaves it out", _insert(9402, "float32", -1), _POS),
    _f("sequence.insert.position.int64", _SI, "int64", "int64 tensors, int32 position 1 [a,t,b]; control leaves it out",
       _insert(9403, "int64", 1, "int32"), _POS),
    _f("sequence.insert.back", _SI, "float32", "no position: t goes to the back [a,b,t]; control bakes in t",
       _insert(9404, "float32", None), Use(absent=("position",)), note="'by default it inserts 'tensor' to the back'"),
    _f("sequence.erase.position", _SE, "float32", "position 0 erases a: [b,c]; control leaves position out (erases c)",
       _erase(9501, "float32", 0), _POS),
    _f("sequence.erase.negative_position", _SE, "float32", "position -2 erases b: [a,c]; control leaves it out",
       _erase(9502, "float32", -2), _POS),
    _f("sequence.erase.position.int64", _SE, "int64", "int64 tensors, int32 position 1 erases b; control leaves it out",
       _erase(9503, "int64", 1, "int32"), _POS),
    _f("sequence.empty.default_dtype", _EM, "float32",
       "empty float sequence (length 0), 2 inserts stacked; control bakes in b", _empty(9601, "float32")),
    _f("sequence.empty.dtype.int64", _EM, "int64", "dtype=INT64 empty sequence, 2 int64 inserts; control bakes in b",
       _empty(9602, "int64"), Use(attributes={"dtype": NON_DEFAULT})),
    _f("sequence.split.keepdims0", _SP, "float32",
       "keepdims=0: (3,4) into 3 parts (4,), stacked (3,4); control keepdims 1 (3,1,4)",
       _split(9701, "float32", (3, 4), {"keepdims": 0}, drop="keepdims", stack=True), _KEEP0),
    _f("sequence.split.keepdims0.int64", _SP, "int64", "the same of an int64 tensor; control keepdims 1",
       _split(9702, "int64", (3, 4), {"keepdims": 0}, drop="keepdims", stack=True), _KEEP0),
    _f("sequence.split.axis", _SP, "float32", "axis=1: (3,4) into 4 parts (3,1), stacked (4,3,1); control axis 0",
       _split(9703, "float32", (3, 4), {"axis": 1}, drop="axis", stack=True), _AXIS),
    _f("sequence.split.axis.float16", _SP, "float16", "the same of a float16 tensor; control axis 0",
       _split(9704, "float16", (3, 4), {"axis": 1}, drop="axis", stack=True), _AXIS),
    _f("sequence.split.scalar_split", _SP, "float32",
       "scalar split 2 of 5 rows: parts 2,2,1 (length, first, last); control no split",
       _split(9705, "float32", (5, 3), {}, split=2, drop="split"), _SPLIT,
       note="'The last chunk alone may be smaller'"),
    _f("sequence.split.split_list", _SP, "float32", "split [1,3,2] on axis 1 of (2,6); control no split (6 parts of 1)",
       _split(9706, "float32", (2, 6), {"axis": 1}, split=[1, 3, 2], drop="split"), _SPLIT),
    _f("sequence.split.split_list.int32", _SP, "int32",
       "the same of an int32 tensor with an int32 split; control no split",
       _split(9707, "int32", (2, 6), {"axis": 1}, split=[1, 3, 2], split_dtype="int32", drop="split"), _SPLIT),
    _f("sequence.split.split_ignores_keepdims", _SP, "float32",
       "keepdims=0 with split [1,2]: parts keep the axis (1,4),(2,4); control no split: 3 parts (4,)",
       _split(9708, "float32", (3, 4), {"keepdims": 0}, split=[1, 2], drop="split"),
       Use(inputs=("split",), attributes={"keepdims": 0}),
       note="'If input 'split' is specified, this attribute is ignored'"),
    _f("sequence.concat.axis1", _CF, "float32", "axis=1 of 3 (2,3) tensors: (2,9); control axis 0 (6,3)",
       _concat(9801, "float32", {"axis": 1}, {"axis": 0}), _CAT_AXIS1),
    _f("sequence.concat.axis1.int64", _CF, "int64", "the same of int64 tensors; control axis 0",
       _concat(9802, "int64", {"axis": 1}, {"axis": 0}), _CAT_AXIS1),
    _f("sequence.concat.new_axis", _CF, "float32", "new_axis=1, axis 0 stacks (3,2,3); control new_axis 0 (6,3)",
       _concat(9803, "float32", {"axis": 0, "new_axis": 1}, {"new_axis": None}), _NEW_AXIS),
    _f("sequence.concat.new_axis.float16", _CF, "float16", "the same of float16 tensors; control new_axis 0",
       _concat(9804, "float16", {"axis": 0, "new_axis": 1}, {"new_axis": None}), _NEW_AXIS),
    _f("sequence.concat.new_axis.negative_axis", _CF, "float32",
       "new_axis=1, axis -1 stacks last (2,3,3); control new_axis 0 (2,9)",
       _concat(9805, "float32", {"axis": -1, "new_axis": 1}, {"new_axis": None}), _NEW_AXIS,
       note="'When `new_axis` is 1, accepted range is `[-r - 1, r]`'"),
    _f("sequence.concat.ragged", _CF, "float32", "axis=1 of (2,3),(2,1),(2,2): (2,6); control bakes in b",
       _concat(9806, "float32", {"axis": 1}, None, ((2, 3), (2, 1), (2, 2))), _CAT_AXIS1,
       note="'the same shape, except for the dimension size of the axis'"),
    _f("optional.construct.tensor", _OP, "float32",
       "Optional of a fed tensor: element and has-element read back; control bakes it in",
       _optional(9901, "float32", "tensor"), _INPUT),
    _f("optional.construct.tensor.int64", _OP, "int64", "the same of an int64 tensor; control bakes it in",
       _optional(9902, "int64", "tensor"), _INPUT),
    _f("optional.construct.sequence", _OP, "float32",
       "Optional of a sequence [a,b], element stacked back; control bakes in b", _optional(9903, "float32", "sequence"),
       _INPUT),
    _f("optional.construct.empty", _OP, "float32",
       "no input, type attribute: empty (has-element false, y = Where(h, a, b) is b); control Optional of a constant",
       _optional(9904, "float32", "empty"), Use(absent=("input",), attributes={"type": NON_DEFAULT})),
    _f("optional.has_element.tensor", _OH, "float32",
       "a plain tensor a has an element: y = Where(h, a, b) is a; control an empty Optional (b)",
       _has(9951, "float32", "tensor"), _INPUT, note="'(2) the input is a tensor or sequence type'"),
    _f("optional.has_element.tensor.int64", _OH, "int64", "the same of an int64 tensor; control an empty Optional",
       _has(9952, "int64", "tensor"), _INPUT),
    _f("optional.has_element.optional", _OH, "float32",
       "an Optional holding a tensor (true); control an empty Optional", _has(9953, "float32", "optional"), _INPUT),
    _f("optional.has_element.sequence", _OH, "float32",
       "a sequence input (true); control an empty optional sequence", _has(9954, "float32", "sequence"), _INPUT),
)
