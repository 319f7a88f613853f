"""Operators ``onnx.reference`` has a schema but no implementation for, in our own numpy,
handed to ReferenceEvaluator as ``new_ops`` by :func:`epaudit.catalog.corpus.derive.evaluate`.

Without them every corpus case of the operator is dropped as ``evaluator raised``
("No registered implementation for operator 'Scatter'"), and the operator reads as not
probed on the surface although ORT's CPU EP registers a kernel for it (``Scatter`` 9-10).
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


#: The implementations ReferenceEvaluator is given (``new_ops``).
NEW_OPS = (Scatter,)
