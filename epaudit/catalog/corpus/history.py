"""Is an older opset stamp the same node? The operator's schema history, compared.

A probe derived at the newest opset of its operator may be stamped at an older one only
when the node means the same there (:func:`same_node`). Between two versions of an
operator, what is compared, for every version in between (``onnx.defs.get_schema`` of each
``since_version``, the history ``onnx/docs/Changelog.md`` of the installed onnx prints as
``<Op>-<version>``):

* the **signature**: inputs and outputs (name, optional/variadic; not the type variable,
  which a version adding types renames), and
  attributes (name, type, default value, required): any difference is not the same node
  (Reduce*-18 moved ``axes`` to an input, AveragePool-19 added ``dilations``);
* the **text**: the operator's doc, and every attribute's, input's and output's
  description. Equal text with an equal signature is the same node (the version only
  added types; the checker then says whether the older type constraints take the probe's
  types: ``stamp refused`` otherwise). Text that differs must be a reviewed transition in
  :data:`TRANSITIONS`: ``same`` (wording, formatting, types, a clarification onnx applies to
  every version) or ``changed`` (a documented behaviour change: negative axes accepted,
  broadcasting added, a mode added), optionally only when the node sets an attribute to
  one of some values (:data:`CONDITIONAL`: Pad-19's ``wrap``). A transition of the
  installed onnx that is not reviewed is not trusted (``stamp semantics unverified``).

The table was reviewed against onnx 1.23.2's schemas (word diffs of every transition whose
signature is equal and text is not: ``python -m epaudit.catalog.corpus.history`` prints
them, and the ones not reviewed).
"""

from __future__ import annotations

from typing import Mapping

#: A :data:`CONDITIONAL` value: the transition is a change for a node whose attribute is a
#: negative integer or holds one (the version accepted negative axes).
NEGATIVE = "negative"

#: (operator, since_version of the newer schema) -> (verdict, why). The text of the
#: newer version differs from the one before it, the signature does not.
TRANSITIONS: Mapping[tuple[str, int], tuple[str, str]] = {
    ("Abs", 13): ("same", "wording; bfloat16 added"),
    ("Add", 14): ("same", "types: uint8, int8, uint16, int16 added ('Opset 14 change')"),
    ("Sub", 14): ("same", "types: uint8, int8, uint16, int16 added ('Opset 14 change')"),
    ("Mul", 14): ("same", "types: uint8, int8, uint16, int16 added ('Opset 14 change')"),
    ("Div", 14): ("same", "types: uint8, int8, uint16, int16 added ('Opset 14 change')"),
    ("ArgMax", 11): ("same", "negative axis accepted ([-r, r-1]: CONDITIONAL); an empty input refused (a precondition)"),
    ("ArgMin", 11): ("same", "negative axis accepted ([-r, r-1]: CONDITIONAL); an empty input refused (a precondition)"),
    ("ArgMax", 13): ("same", "wording ('equal' -> 'equals')"),
    ("ArgMin", 13): ("same", "wording ('equal' -> 'equals')"),
    ("AveragePool", 11): ("changed", "output-shape formulas rewritten (dilations, ceil_mode off)"),
    ("AveragePool", 22): ("same", "'Sliding windows that would start in the right padded region are ignored': "
                                  "the rule onnx PR #6650 ('Fix pooling pads issues', reference implementation) "
                                  "applies to every version in the reference (onnxruntime does from 1.21); onnx's "
                                  "shape inference for AveragePool-19 still keeps such a window, so the checker "
                                  "refuses a stamp whose case hits it (stamp refused); bfloat16 added"),
    ("MaxPool", 11): ("same", "default strides and dilations spelled out ('If not present, ... 1')"),
    ("MaxPool", 12): ("same", "explicit-padding output-shape formula restated (the same formula); "
                              "storage_order clarified; int8/uint8 added"),
    ("MaxPool", 22): ("same", "'Sliding windows that would start in the right padded region are ignored': "
                              "onnx PR #5741 ('Fix corner case where output size need to reduce by one in "
                              "MaxPool') and #6650 apply it to every version in the reference (onnxruntime "
                              "does from 1.21); onnx's shape inference below 22 still keeps such a window, "
                              "so the checker refuses a stamp whose case hits it (stamp refused); bfloat16 added"),
    ("BitShift", 28): ("changed", "signed types and shifts >= the bit width specified"),
    ("Cast", 9): ("changed", "string conversions added"),
    ("Cast", 13): ("changed", "conversion rules (out of range, bool) specified"),
    ("Ceil", 13): ("same", "'If x is integral, +0, -0, NaN, or infinite, x itself is returned' (IEEE ceil)"),
    ("Floor", 13): ("same", "'If x is integral, +0, -0, NaN, or infinite, x itself is returned' (IEEE floor)"),
    ("Clip", 13): ("changed", "min > max specified (all values become max)"),
    ("Compress", 11): ("same", "negative axis accepted (CONDITIONAL)"),
    ("Concat", 11): ("same", "negative axis accepted (CONDITIONAL)"),
    ("Conv", 11): ("same", "default strides/dilations and W's group constraint spelled out; auto_pad's split "
                           "stated as a formula (a node with SAME_* auto_pad: CONDITIONAL)"),
    ("LpPool", 11): ("same", "default strides spelled out; auto_pad as for Conv-11 (CONDITIONAL)"),
    ("ConvTranspose", 11): ("changed", "output_padding semantics and the output_shape condition rewritten"),
    ("DepthToSpace", 13): ("same", "formatting"),
    ("Dropout", 22): ("same", "ratio description"),
    ("Dropout", 10): ("same", "wording ('Tensor<float>' -> 'floating tensor')"),
    ("BatchNormalization", 15): ("same", "formatting; training_mode's outputs restated (1 and 2); types split"),
    ("DequantizeLinear", 19): ("changed", "a rank-1 input is dequantized per tensor; float8 zero points"),
    ("EyeLike", 22): ("same", "wording"),
    ("Flatten", 11): ("same", "negative axis accepted (CONDITIONAL)"),
    ("Gather", 11): ("changed", "negative indices accepted"),
    ("Gather", 13): ("same", "doc rewritten as a table of shapes and equations; bfloat16 added"),
    ("GatherElements", 13): ("same", "formatting"),
    ("GatherND", 13): ("same", "formatting"),
    ("Gemm", 13): ("same", "formatting"),
    ("Hardmax", 11): ("same", "negative axis accepted (CONDITIONAL); the 2-D coercion restated"),
    ("LogSoftmax", 11): ("same", "negative axis accepted (CONDITIONAL); the 2-D coercion restated"),
    ("Softmax", 11): ("same", "negative axis accepted (CONDITIONAL); the 2-D coercion restated"),
    ("If", 11): ("changed", "branches may produce different shapes"),
    ("LRN", 13): ("same", "formatting"),
    ("LSTM", 22): ("same", "typo ('hidde_size')"),
    ("Loop", 11): ("changed", "loop-carried semantics rewritten"),
    ("Loop", 13): ("changed", "subgraph outputs matched by order; scan outputs must be tensors"),
    ("Loop", 16): ("same", "formatting"),
    ("Max", 8): ("changed", "multidirectional broadcasting added"),
    ("Min", 8): ("changed", "multidirectional broadcasting added"),
    ("Mean", 8): ("changed", "multidirectional broadcasting added"),
    ("Sum", 8): ("changed", "multidirectional broadcasting added"),
    ("MaxUnpool", 11): ("same", "default strides spelled out"),
    ("MeanVarianceNormalization", 13): ("same", "formatting"),
    ("Mod", 13): ("same", "fmod semantics restated (divisor's sign for fmod=0, C fmod for fmod=1); bfloat16"),
    ("Mod", 28): ("changed", "fmod=0 is floor division for floats too; special cases for floats"),
    ("NegativeLogLikelihoodLoss", 13): ("same", "formatting"),
    ("NonMaxSuppression", 11): ("same", "'Boxes with IoU strictly greater than this threshold are suppressed'"),
    ("OneHot", 11): ("changed", "negative indices and axis accepted"),
    ("OptionalGetElement", 18): ("same", "tensor and sequence inputs accepted (types)"),
    ("PRelu", 16): ("same", "whitespace; bfloat16 added"),
    ("Pad", 13): ("same", "string and bool constant values (types)"),
    ("Pad", 19): ("same", "mode 'wrap' added (a node with mode 'wrap': CONDITIONAL)"),
    ("Pow", 13): ("same", "punctuation; bfloat16 added"),
    ("QuantizeLinear", 24): ("same", "spacing"),
    ("QuantizeLinear", 25): ("same", "int2/uint2 ranges (types)"),
    ("QuantizeLinear", 28): ("same", "saturate has no effect for float4/float6 (types)"),
    ("Resize", 19): ("same", "formatting; coordinate_transformation_mode 'half_pixel_symmetric' added "
                             "(a node with it: CONDITIONAL)"),
    ("Scan", 11): ("same", "negative scan_input_axes / scan_output_axes accepted ([-r, r-1]: CONDITIONAL)"),
    ("Scatter", 11): ("changed", "negative indices accepted; deprecated"),
    ("ScatterElements", 18): ("same", "reduction 'max' and 'min' added (a node with them: CONDITIONAL)"),
    ("ScatterND", 18): ("same", "reduction 'max' and 'min' added (a node with them: CONDITIONAL)"),
    ("Slice", 11): ("changed", "negative axes and steps accepted"),
    ("Slice", 13): ("same", "clamping of starts/ends spelled out (numpy slicing, which Slice-11 cites); "
                            "a repeated axis undefined; bfloat16 added"),
    ("SoftmaxCrossEntropyLoss", 13): ("same", "formatting"),
    ("Split", 11): ("same", "negative axis accepted (CONDITIONAL); split values >= 0 (a precondition)"),
    ("Squeeze", 11): ("same", "negative axes accepted (CONDITIONAL)"),
    ("Unsqueeze", 11): ("same", "negative axes accepted (CONDITIONAL)"),
    ("Squeeze", 23): ("same", "'List' -> '1D tensor'"),
    ("Unsqueeze", 23): ("same", "'List' -> '1D tensor'"),
    ("Transpose", 21): ("same", "perm's length must equal the rank (a clarification)"),
    ("Transpose", 25): ("same", "perm's values in [0, rank-1] (a clarification)"),
}
#: (operator, newer since_version) -> (attribute, values): a ``same`` transition is a
#: behaviour change for a node that sets ``attribute`` to one of ``values`` (the mode the
#: newer version added, an auto_pad whose split the newer text first states).
CONDITIONAL: Mapping[tuple[str, int], tuple] = {  # (attribute name or names, values)
    ("Pad", 19): ("mode", ("wrap",)),
    ("Resize", 19): ("coordinate_transformation_mode", ("half_pixel_symmetric",)),
    ("ScatterElements", 18): ("reduction", ("max", "min")),
    ("ScatterND", 18): ("reduction", ("max", "min")),
    ("Conv", 11): ("auto_pad", ("SAME_UPPER", "SAME_LOWER")),
    ("LpPool", 11): ("auto_pad", ("SAME_UPPER", "SAME_LOWER")),
    ("ArgMax", 11): ("axis", NEGATIVE), ("ArgMin", 11): ("axis", NEGATIVE), ("Compress", 11): ("axis", NEGATIVE),
    ("Concat", 11): ("axis", NEGATIVE), ("Flatten", 11): ("axis", NEGATIVE), ("Hardmax", 11): ("axis", NEGATIVE),
    ("LogSoftmax", 11): ("axis", NEGATIVE), ("Softmax", 11): ("axis", NEGATIVE), ("Split", 11): ("axis", NEGATIVE),
    ("Squeeze", 11): ("axes", NEGATIVE), ("Unsqueeze", 11): ("axes", NEGATIVE),
    ("Scan", 11): (("scan_input_axes", "scan_output_axes"), NEGATIVE),
}

for _op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
            "ReduceProd", "ReduceSum", "ReduceSumSquare"):
    TRANSITIONS[(_op, 11)] = ("same", "negative axes accepted ([-r, r-1]: CONDITIONAL)")  # type: ignore[index]
    CONDITIONAL[(_op, 11)] = ("axes", NEGATIVE)  # type: ignore[index]
    TRANSITIONS[(_op, 13)] = ("same", "formatting; the empty-set sentence moved back; bfloat16")  # type: ignore[index]
TRANSITIONS[("ReduceMax", 12)] = ("same", "the empty-set sentence moved; int8/uint8")  # type: ignore[index]
TRANSITIONS[("ReduceMin", 12)] = ("same", "the empty-set sentence moved; int8/uint8")  # type: ignore[index]
TRANSITIONS[("ReduceMax", 20)] = ("same", "bool: False < True (types)")  # type: ignore[index]
TRANSITIONS[("ReduceMin", 20)] = ("same", "bool: False < True (types)")  # type: ignore[index]



def _matches(value, values) -> bool:
    if values == NEGATIVE:
        items = value if isinstance(value, (list, tuple)) else [value]
        return any(isinstance(v, int) and v < 0 for v in items)
    return value in values


def signature(schema) -> tuple:
    """Inputs and outputs (name, optional/variadic) and attributes (name, type, serialized
    default, required) of an ``onnx.defs.OpSchema``. Type variables are not compared: a
    version that adds types renames them (Identity-14's ``V`` for Identity-13's ``T``,
    Pow-12's ``T1`` for the exponent); whether the older constraints take the node's types
    is the checker's to say (``stamp refused``)."""
    ins = tuple((i.name, int(i.option)) for i in schema.inputs)
    outs = tuple((o.name, int(o.option)) for o in schema.outputs)
    attrs = tuple(sorted((a.name, int(a.type), a.default_value.SerializeToString(), bool(a.required))
                         for a in schema.attributes.values()))
    return ins, outs, attrs


def texts(schema) -> dict[str, str]:
    """The operator's doc and every attribute's, input's and output's description."""
    out = {"doc": schema.doc or ""}
    out.update({f"attribute {a.name}": a.description or "" for a in schema.attributes.values()})
    out.update({f"input {i.name}": i.description or "" for i in schema.inputs})
    out.update({f"output {o.name}": o.description or "" for o in schema.outputs})
    return out


def _versions(op: str, domain: str = "") -> list:
    import onnx.defs

    return sorted((s for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == domain),
                  key=lambda s: s.since_version)


def transition(op: str, version: int, attributes: Mapping[str, object] | None = None,
               domain: str = "") -> tuple[bool, str]:
    """Whether the schema of ``op`` beginning at ``version`` is the same node as the one
    before it, for a node with ``attributes`` (name -> value; strings as ``str``);
    ``(same, why)``.

    Raises:
        KeyError: no schema of ``op`` begins at ``version``, or none before it.
    """
    history = _versions(op, domain)
    at = {s.since_version: i for i, s in enumerate(history)}
    i = at[version]
    if i == 0:
        raise KeyError(f"{op}-{version} is the first version")
    old, new = history[i - 1], history[i]
    if signature(old) != signature(new):
        return False, f"{op}-{version}: signature differs from {op}-{old.since_version}"
    if texts(old) == texts(new):
        return True, f"{op}-{version}: types only"
    reviewed = TRANSITIONS.get((op, version))
    if reviewed is None:
        return False, f"{op}-{version}: text differs and the transition is not reviewed"
    verdict, why = reviewed
    cond = CONDITIONAL.get((op, version))
    if verdict == "same" and cond is not None:
        names, values = cond
        for name in (names,) if isinstance(names, str) else names:  # one attribute, or several
            value = (attributes or {}).get(name)
            if _matches(value, values):
                return False, f"{op}-{version}: {name}={value!r} is new there ({why})"
    return verdict == "same", f"{op}-{version}: {why}"


def same_node(op: str, newest: int, older: int, attributes: Mapping[str, object] | None = None,
              domain: str = "") -> tuple[bool, str]:
    """Whether a node of ``op`` (with ``attributes``) means at opset ``older`` what it means
    at ``newest``: every transition between the schemas in force at the two is the same
    node (:func:`transition`). ``(same, why)``: ``why`` names the first transition that is
    not, or the last reviewed one."""
    import onnx.defs

    lo = onnx.defs.get_schema(op, older, domain).since_version
    hi = onnx.defs.get_schema(op, newest, domain).since_version
    why = "same schema"
    for s in _versions(op, domain):
        if lo < s.since_version <= hi:
            ok, why = transition(op, s.since_version, attributes, domain)
            if not ok:
                return False, why
    return True, why


def node_attributes(node) -> dict[str, object]:
    """A ``NodeProto``'s attributes as name -> Python value (bytes decoded to ``str``)."""
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return out


def unreviewed() -> list[tuple[str, int]]:
    """Transitions of the installed onnx (ai.onnx, newer version >= 8) whose signature is
    equal and text differs, and that :data:`TRANSITIONS` does not review."""
    import onnx.defs

    ops = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""})
    out = []
    for op in ops:
        h = _versions(op)
        for old, new in zip(h, h[1:]):
            if new.since_version >= 8 and signature(old) == signature(new) and texts(old) != texts(new) \
                    and (op, new.since_version) not in TRANSITIONS:
                out.append((op, new.since_version))
    return out


if __name__ == "__main__":  # pragma: no cover - a reviewer's tool
    import difflib

    for op, v in unreviewed():
        h = {s.since_version: s for s in _versions(op)}
        new = h[v]
        old = max((s for s in h.values() if s.since_version < v), key=lambda s: s.since_version)
        print(f"=== {op}-{old.since_version} -> {op}-{v} (not reviewed)")
        a, b = texts(old), texts(new)
        for k in b:
            if a.get(k, "") != b[k]:
                for line in difflib.unified_diff(a.get(k, "").split(), b[k].split(), lineterm="", n=2):
                    print("  ", k, line)
