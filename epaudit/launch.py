"""The ``epaudit`` entry point: start a worker first, then import the CLI.

``check`` and ``probe`` need a worker under this interpreter for the CPU EP (and any EP of
this environment); starting it before the CLI's imports lets it import onnxruntime while
the parent imports numpy, onnx and rich (see :mod:`epaudit.spawn`).
"""

from __future__ import annotations

import sys

from . import spawn


def main() -> None:
    """Console-script entry: prestart a worker for ``check``/``probe``, then run the CLI."""
    try:
        if len(sys.argv) > 1 and sys.argv[1] in ("check", "probe") and "--results" not in sys.argv:
            spawn.prestart()
        from .cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while importing: nothing ran, nothing to report
        sys.stderr.write("epaudit: interrupted before the run started\n")
        sys.exit(3)
    cli_main()
