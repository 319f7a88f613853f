"""The command line: thin commands, one module per concern (``check``, ``results``,
``conformance``, ``proofs``, ``info``, ``surface``, ``scan``); each parses options, builds
the objects, calls one function and maps the result to an exit code. What they share
(matrix, EP and feature selection, options, atomic report writing) is :mod:`.common`; the
group itself (one-line usage errors) is :mod:`.app`.

Exit codes (docs/outcomes-and-gates.md): 0 gate passed, 1 failing findings, 2 usage or
matrix error (one line naming file, key and line; no traceback), 3 incomplete (a required
or gated EP not live, a misconfigured EP, or the run interrupted).
"""

from __future__ import annotations

from .app import main
from .options import MAX_SECONDS, Seconds
from .common import matrix_path
from .output import write_atomic
# Importing a command module registers its commands on ``main``.
from . import check, conformance, info, proofs, results, scan, surface  # noqa: F401,E402

__all__ = ["main", "write_atomic", "matrix_path", "Seconds", "MAX_SECONDS"]

if __name__ == "__main__":  # pragma: no cover
    main()
