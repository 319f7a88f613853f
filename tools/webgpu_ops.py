"""The operators the matrix declares ``supported`` on WebGPU, as ``--op`` arguments for ``epaudit sweep``.

An operator is listed when at least one of its features has ``WebGPU = "supported"`` in the
matrix (default: the packaged one), so the sweep of "every operator the real WebGPU EP runs"
(docs/sweep.md) is reproducible::

    epaudit sweep $(python tools/webgpu_ops.py) --ep WebGPU --budget 50 --seed 7 --shrink-limit 100

The count of such features per operator goes to stderr.
"""

from __future__ import annotations

import sys
from collections import Counter

from epaudit import catalog
from epaudit.matrix.load import load


def main(argv: list[str]) -> int:
    from epaudit.matrix.model import MatrixError

    try:
        matrix = load(argv[0] if argv else None)
    except MatrixError as exc:  # one line naming the file, key and line, as the CLI prints it
        print(f"webgpu_ops: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"webgpu_ops: error: {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 2
    ops: Counter = Counter()
    for f in catalog.select(None):
        d = matrix.declaration(f.id, "WebGPU")
        if d is not None and d.status == "supported":
            ops[f"{f.domain or 'ai.onnx'}.{f.op_type}"] += 1
    for k, n in sorted(ops.items()):
        print(k, n, file=sys.stderr)
    print(" ".join(f"--op {k}" for k in sorted(ops)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
