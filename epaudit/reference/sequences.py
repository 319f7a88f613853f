"""References for the ONNX sequence and optional operators: ``SequenceConstruct``,
``SequenceAt``, ``SequenceLength``, ``SequenceInsert``, ``SequenceErase``, ``SequenceEmpty``,
``SplitToSequence``, ``ConcatFromSequence`` (all version 11), ``Optional`` (15),
``OptionalHasElement`` and ``OptionalGetElement`` (18).

Written from the operator spec text of the installed onnx (``onnx.defs.get_schema(op, 21).doc``,
onnx 1.23.2); each function quotes the sentences it follows. A tensor is a numpy array kept
in its own dtype (every output of these operators is a copy, compared exactly); a sequence is
a :class:`TensorSequence` (its element type and its tensors); an optional is an
:class:`OptionalValue` (``element`` ``None`` when empty). :func:`evaluate` runs a probe graph's
node list (helper nodes included, and ``Where``, the reader of a bool) with these functions,
so a probe's reference is computed here end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["TensorSequence", "OptionalValue", "sequence_construct", "sequence_at", "sequence_length",
           "sequence_insert", "sequence_erase", "sequence_empty", "split_to_sequence",
           "concat_from_sequence", "optional", "optional_has_element", "optional_get_element", "evaluate"]

#: ``TensorProto.DataType`` -> numpy dtype, for ``SequenceEmpty``'s ``dtype`` (onnx.proto:
#: FLOAT 1, INT32 6, INT64 7, FLOAT16 10, DOUBLE 11).
ELEM_DTYPES: Mapping[int, np.dtype] = {1: np.dtype(np.float32), 6: np.dtype(np.int32), 7: np.dtype(np.int64),
                                       10: np.dtype(np.float16), 11: np.dtype(np.float64)}


@dataclass(frozen=True)
class TensorSequence:
    """A tensor sequence: the element type every tensor has, and the tensors in order."""

    dtype: np.dtype
    tensors: tuple[np.ndarray, ...] = ()

    def __len__(self) -> int:
        return len(self.tensors)


@dataclass(frozen=True)
class OptionalValue:
    """An optional-type value: ``element`` (a tensor or a sequence), ``None`` when empty."""

    element: Any = None


def _same_type(seq: TensorSequence, tensor: np.ndarray, op: str) -> None:
    if np.asarray(tensor).dtype != seq.dtype:
        raise ValueError(f"{op}: tensor of {np.asarray(tensor).dtype} into a sequence of {seq.dtype}")


def _position(position, n: int, upper: int, op: str) -> int:
    """``position`` (a scalar tensor) checked against ``[-n, upper]`` and made non-negative:
    "Negative value means counting positions from the back."

    Raises:
        ValueError: not a scalar, or out of the accepted range.
    """
    p = np.asarray(position)
    if p.ndim != 0 or p.dtype.kind != "i":
        raise ValueError(f"{op}: position must be an integer scalar, got {p.dtype} of shape {p.shape}")
    k = int(p)
    if not -n <= k <= upper:
        raise ValueError(f"{op}: position {k} outside [{-n}, {upper}] for {n} tensor(s)")
    return k + n if k < 0 else k


def sequence_construct(*inputs: np.ndarray) -> TensorSequence:
    """SequenceConstruct-11: "Construct a tensor sequence containing 'inputs' tensors. All
    tensors in 'inputs' must have the same data type." (1 or more inputs; copies.)

    Raises:
        ValueError: no input, or inputs of different data types.
    """
    if not inputs:
        raise ValueError("SequenceConstruct: at least one input")
    arrays = tuple(np.array(t, copy=True) for t in inputs)
    if len({a.dtype for a in arrays}) != 1:
        raise ValueError(f"SequenceConstruct: inputs of types {sorted({str(a.dtype) for a in arrays})}")
    return TensorSequence(arrays[0].dtype, arrays)


def sequence_at(seq: TensorSequence, position) -> np.ndarray:
    """SequenceAt-11: "Outputs a tensor copy from the tensor at 'position' in
    'input_sequence'. Accepted range for 'position' is in `[-n, n - 1]`" (int32 or int64
    scalar; negative counts from the back)."""
    return np.array(seq.tensors[_position(position, len(seq), len(seq) - 1, "SequenceAt")], copy=True)


def sequence_length(seq: TensorSequence) -> np.ndarray:
    """SequenceLength-11: "Produces a scalar(tensor of empty shape) containing the number of
    tensors in 'input_sequence'." (int64, shape ())."""
    return np.array(len(seq), dtype=np.int64)


def sequence_insert(seq: TensorSequence, tensor: np.ndarray, position=None) -> TensorSequence:
    """SequenceInsert-11: "inserts 'tensor' into 'input_sequence' at 'position'. 'tensor' must
    have the same data type as 'input_sequence'. Accepted range for 'position' is in `[-n, n]`
    ... 'position' is optional, by default it inserts 'tensor' to the back"."""
    _same_type(seq, tensor, "SequenceInsert")
    n = len(seq)
    at = n if position is None else _position(position, n, n, "SequenceInsert")
    tensors = list(seq.tensors)
    tensors.insert(at, np.array(tensor, copy=True))
    return TensorSequence(seq.dtype, tuple(tensors))


def sequence_erase(seq: TensorSequence, position=None) -> TensorSequence:
    """SequenceErase-11: "removes the tensor at 'position' from 'input_sequence'. Accepted
    range for 'position' is in `[-n, n - 1]` ... 'position' is optional, by default it erases
    the last tensor"."""
    n = len(seq)
    if n == 0:
        raise ValueError("SequenceErase: the sequence is empty")
    at = n - 1 if position is None else _position(position, n, n - 1, "SequenceErase")
    return TensorSequence(seq.dtype, seq.tensors[:at] + seq.tensors[at + 1:])


def sequence_empty(dtype: int = 1) -> TensorSequence:
    """SequenceEmpty-11: "Construct an empty tensor sequence, with given data type." (``dtype``
    "The default type is 'float'")."""
    return TensorSequence(ELEM_DTYPES[int(dtype)])


def split_to_sequence(x: np.ndarray, split=None, axis: int = 0, keepdims: int = 1) -> TensorSequence:
    """SplitToSequence-11: "Split a tensor into a sequence of tensors, along the specified
    'axis'." Without 'split', "a default scalar value of 1 is used"; a scalar 'split' gives
    chunks "all of size 'split' if possible. The last chunk alone may be smaller"; a 1-D
    'split' gives "'size(split)' chunks, with lengths of the parts on 'axis' specified in
    'split'", whose sum "must be equal to the dimension size". ``keepdims``: "Keep the split
    dimension or not. Default 1 ... If input 'split' is specified, this attribute is ignored."
    ``axis`` in ``[-rank, rank-1]``.

    Raises:
        ValueError: an axis out of range, a non-positive split, or a 1-D split that does not sum
            to the axis length.
    """
    x = np.asarray(x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"SplitToSequence: axis {axis} outside [{-x.ndim}, {x.ndim - 1}]")
    axis %= x.ndim
    dim = x.shape[axis]
    if split is None:
        sizes, squeeze = [1] * dim, not keepdims
    else:
        s = np.asarray(split)
        if s.ndim == 0:
            step = int(s)
            if step <= 0:
                raise ValueError("SplitToSequence: 'split' must contain only positive numbers")
            sizes = [min(step, dim - i) for i in range(0, dim, step)]
        else:
            sizes = [int(v) for v in s.reshape(-1)]
            if any(v <= 0 for v in sizes) or sum(sizes) != dim:
                raise ValueError(f"SplitToSequence: split {sizes} for an axis of {dim}")
        squeeze = False
    parts, start = [], 0
    for size in sizes:
        part = np.take(x, np.arange(start, start + size), axis=axis)
        parts.append(np.squeeze(part, axis=axis) if squeeze else part)
        start += size
    return TensorSequence(x.dtype, tuple(np.array(p, copy=True) for p in parts))


def concat_from_sequence(seq: TensorSequence, axis: int, new_axis: int = 0) -> np.ndarray:
    """ConcatFromSequence-11: "All input tensors must have the same shape, except for the
    dimension size of the axis to concatenate on. By default 'new_axis' is 0, the behavior is
    similar to numpy.concatenate. When 'new_axis' is 1, the behavior is similar to
    numpy.stack." ``axis``: "Accepted range in `[-r, r - 1]` ... When `new_axis` is 1, accepted
    range is `[-r - 1, r]`."

    Raises:
        ValueError: an empty sequence or an axis out of range; numpy's error for shapes that
            differ off the axis.
    """
    if not len(seq):
        raise ValueError("ConcatFromSequence: the sequence is empty")
    r = seq.tensors[0].ndim
    lo, hi = (-r - 1, r) if new_axis else (-r, r - 1)
    if not lo <= axis <= hi:
        raise ValueError(f"ConcatFromSequence: axis {axis} outside [{lo}, {hi}] (new_axis {new_axis})")
    join = np.stack if new_axis else np.concatenate
    return join(seq.tensors, axis=axis)


def optional(element=None) -> OptionalValue:
    """Optional-15: "Constructs an optional-type value containing either an empty optional of
    a certain type specified by the attribute, or a non-empty value containing the input
    element." (input left out: empty; the ``type`` attribute only types it.)"""
    if isinstance(element, TensorSequence):
        return OptionalValue(element)
    return OptionalValue(None if element is None else np.array(element, copy=True))


def optional_has_element(value=None) -> np.ndarray:
    """OptionalHasElement-18: "Returns true if (1) the input is an optional-type and contains an
    element, or, (2) the input is a tensor or sequence type. If the input is not provided or is
    an empty optional-type, this op returns false." (bool, shape ())."""
    if isinstance(value, OptionalValue):
        return np.array(value.element is not None)
    return np.array(value is not None)


def optional_get_element(value):
    """OptionalGetElement-18: "If the input is a tensor or sequence type, it returns the input.
    If the input is an optional type, it outputs the element in the input. It is an error if
    the input is an empty optional-type".

    Raises:
        ValueError: an empty optional.
    """
    if isinstance(value, OptionalValue):
        if value.element is None:
            raise ValueError("OptionalGetElement: the optional is empty")
        value = value.element
    return value if isinstance(value, TensorSequence) else np.array(value, copy=True)


def _node(op: str, args: list, attrs: Mapping[str, Any]):
    if op == "SequenceConstruct":
        return sequence_construct(*args)
    if op == "SequenceAt":
        return sequence_at(*args)
    if op == "SequenceLength":
        return sequence_length(*args)
    if op == "SequenceInsert":
        return sequence_insert(*args)
    if op == "SequenceErase":
        return sequence_erase(*args)
    if op == "SequenceEmpty":
        return sequence_empty(attrs.get("dtype", 1))
    if op == "SplitToSequence":
        return split_to_sequence(*args, axis=int(attrs.get("axis", 0)), keepdims=int(attrs.get("keepdims", 1)))
    if op == "ConcatFromSequence":
        return concat_from_sequence(args[0], int(attrs["axis"]), int(attrs.get("new_axis", 0)))
    if op == "Optional":
        return optional(*args)
    if op == "OptionalHasElement":
        return optional_has_element(*args)
    if op == "OptionalGetElement":
        return optional_get_element(*args)
    if op == "Where":  # a probe graph's reader of a bool: "behaves like numpy.where" (Where-16)
        return np.where(args[0], args[1], args[2])
    raise ValueError(f"no reference for {op}")


def evaluate(nodes: Sequence[tuple[str, Sequence[str], str, Mapping[str, Any]]],
             values: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Run ``nodes`` (``(op_type, inputs, output, attributes)`` in graph order, ``""`` for an
    optional input left out; one output each) on the graph's input ``values``; every value by
    name (tensors, :class:`TensorSequence`, :class:`OptionalValue`).

    A trailing ``""`` input is dropped; an inner one is passed as ``None`` (the function's
    default for that optional input).

    Raises:
        ValueError: an operator without a reference, or one that rejects its inputs.
        KeyError: an input no earlier node or graph input defines.
    """
    env: dict[str, Any] = dict(values)
    for op, inputs, output, attrs in nodes:
        names = list(inputs)
        while names and names[-1] == "":
            names.pop()
        env[output] = _node(op, [env[n] if n else None for n in names], attrs)
    return env
