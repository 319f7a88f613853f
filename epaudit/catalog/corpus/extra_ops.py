"""Operators ``onnx.reference`` has no implementation for, or one that departs from the spec,
in our own numpy, handed to ReferenceEvaluator as ``new_ops`` by
:func:`epaudit.catalog.corpus.derive.evaluate`.

Without ``Scatter`` every corpus case of it is dropped as ``evaluator raised`` ("No
registered implementation for operator 'Scatter'"), and the operator reads as not probed on
the surface although ORT's CPU EP registers a kernel for it (``Scatter`` 9-10). onnx 1.23's
``Loop`` joins the scan outputs with ``np.vstack`` (``(M * d0, ...)``) where the spec stacks
them along a new first axis (``(M, d0, ...)``; ORT CPU does, measured on
``synthetic_control``'s case): ours stacks.
Each implementation follows the operator's ONNX spec text, cited in its docstring; the
derivation still checks it against the case's stored outputs first (``evaluator
mismatch`` otherwise), so an implementation that disagrees with the corpus makes no probe.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


class Scatter(OpRun):
    """ONNX ``Scatter``-9 (deprecated at 11 in favour of ``ScatterElements``): "write the
    values provided by ``updates`` into the first input, ``data``, along ``axis`` ... the
    target index in ``data`` is specified by corresponding entry in ``indices`` for
    dimension = axis, and index in source for dimension != axis" (``data[indices[i][j]][j] =
    updates[i][j]`` for axis 0). ``data``: any type, rank r >= 1; ``indices``: int32/int64 of
    ``updates``' shape; a negative index counts from the end of the axis (the ``-s``..``s-1``
    range ScatterElements-11 gives). Returns ``(output,)``, ``data``'s shape and type."""

    op_domain = ""

    def _run(self, data, indices, updates, axis=None):  # noqa: D401 - OpRun's signature
        axis = 0 if axis is None else int(axis)
        out = np.array(data, copy=True)
        ax = axis % out.ndim
        idx = np.asarray(indices).astype(np.int64)
        idx = np.where(idx < 0, idx + out.shape[ax], idx)
        # Each entry of updates (i, j, ...) goes to the same position with the axis
        # coordinate taken from indices; positions of data that no entry names keep their
        # value (np.put_along_axis would broadcast a smaller indices over them).
        where = list(np.indices(idx.shape))
        where[ax] = idx
        out[tuple(where)] = np.asarray(updates, dtype=out.dtype)
        return (out,)


from onnx.reference.ops.op_loop import Loop as _EvaluatorLoop  # noqa: E402 - after the docstring's case


class Loop(_EvaluatorLoop):
    """ONNX ``Loop``: "the loop runs while (trip_count > iteration) && cond", the body's
    outputs after its condition are the new loop-carried values, then one scan output per
    iteration; "scan_outputs ... are concatenated" along a new first axis, so each is
    ``(iterations, *per_iteration_shape)``. The body runs through onnx.reference's own
    subgraph machinery (``_run_body``); zero iterations raise (the shape of an empty scan
    output is not known here)."""

    def _run(self, M, cond, *args, context=None, body=None, attributes=None, bindings=None):
        names = self.body.input_names
        inputs = dict.fromkeys(names)
        for name, value in zip(names[2:], args):
            inputs[name] = value
        for k, v in (context or {}).items():
            inputs[k] = v
        cond = True if cond is None else bool(np.asarray(cond))
        scans: list[list[np.ndarray]] = [[] for _ in range(self.K)]
        it, carried = 0, list(args[:self.N])
        while cond and (M is None or it < int(np.asarray(M))):
            if names and names[0]:
                inputs[names[0]] = np.array(it, dtype=np.int64)
            if len(names) > 1 and names[1]:
                inputs[names[1]] = np.array(cond)
            outs = self._run_body(inputs, attributes=attributes, bindings=bindings)
            cond = bool(np.asarray(outs[0]))
            carried = list(outs[1:1 + self.N])
            for k in range(self.K):
                scans[k].append(np.asarray(outs[1 + self.N + k]))
            for name, value in zip(names[2:], carried):
                inputs[name] = value
            it += 1
        if it == 0 and self.K:
            raise RuntimeError("Loop ran no iteration: the shape of an empty scan output is not known")
        return tuple(carried) + tuple(np.stack(s) for s in scans)


#: The implementations ReferenceEvaluator is given (``new_ops``).
NEW_OPS = (Scatter, Loop)
