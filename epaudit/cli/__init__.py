"""The command line: thin commands, one module per concern (``check``, ``results``,
``conformance``, ``proofs``, ``info``, ``surface``, ``scan``, ``sweep``); each parses options, builds
the objects, calls one function and maps the result to an exit code. What they share
(matrix, EP and feature selection, options, atomic report writing) is :mod:`.common`; the
group itself (one-line usage errors) is :mod:`.app`.

Exit codes (docs/outcomes-and-gates.md): 0 gate passed, 1 failing findings, 2 usage or
matrix error (one line naming file, key and line; no traceback), 3 incomplete (a required
or gated EP not live, a misconfigured EP, or the run interrupted).

May import: every stage; the top-level helpers terminal and textenc.
Imported by: launch (the console script), ``python -m epaudit``.
"""

from __future__ import annotations

# Importing a command module registers its commands on ``main``.
from . import check, conformance, info, proofs, results, scan, surface, sweep  # noqa: F401,E402
from .app import main
from .common import matrix_path
from .options import MAX_SECONDS, Seconds
from .output import write_atomic

__all__ = ["main", "write_atomic", "matrix_path", "Seconds", "MAX_SECONDS"]

if __name__ == "__main__":  # pragma: no cover
    main()
