"""Report formats: one module each, ``format(result) -> str``; writing files is the CLI's job.

The formats whose size grows with the run (``json``, ``junit``, ``markdown``, ``html``) also
have ``write(result, fh, **opts)``, which writes to a text stream as it goes, one cell at a
time, without holding the whole text (:data:`WRITERS`); ``format`` is the same text.

A format's module is imported the first time it is asked for: ``epaudit check`` writes
one or two formats, and importing all five (rich, ``xml.etree``) would delay the run.

May import: contract, reference, catalog, run (the selftest table), surface (coverage),
conformance (the skip-list audit), textenc (strings from outside made safe).
Imported by: cli.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from typing import Callable, Iterable, Iterator

from ..contract.results import RunResult

#: Format name -> module (in this package) whose ``format(result, **opts) -> str`` makes it.
MODULES: dict[str, str] = {
    "table": "table",
    "json": "json",
    "junit": "junit",
    "markdown": "markdown",
    "github": "github",
    "html": "html",
}


class _Formats(Mapping):
    """Format name -> pure formatter, each module imported on first use."""

    def __getitem__(self, name: str) -> Callable[..., str]:
        return importlib.import_module(f".{MODULES[name]}", __name__).format

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


#: Format name -> pure formatter (``FORMATS["junit"](result)``).
FORMATS: Mapping[str, Callable[..., str]] = _Formats()


class _Writers(Mapping):
    """Format name -> ``write(result, fh, **opts)``: the module's own streaming writer, or
    one that writes what its ``format`` returns."""

    def __getitem__(self, name: str) -> Callable[..., None]:
        module = importlib.import_module(f".{MODULES[name]}", __name__)
        write = getattr(module, "write", None)
        if write is not None:
            return write

        def whole(result, fh, **opts) -> None:
            fh.write(module.format(result, **opts))
        return whole

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


#: Format name -> streaming writer (``WRITERS["json"](result, fh)``).
WRITERS: Mapping[str, Callable[..., None]] = _Writers()


def preload(names: Iterable[str]) -> threading.Thread:
    """Import the modules of formats ``names`` on a daemon thread and return it.

    ``epaudit check`` calls it as the probes start: the parent mostly waits for workers
    then, and the table's rich import (~30 ms) is then done when the report is due. A
    format asked for before its import finished waits for it (Python's import lock).
    """
    mods = [MODULES[n] for n in dict.fromkeys(names) if n in MODULES]
    t = threading.Thread(target=lambda: [importlib.import_module(f".{m}", __name__) for m in mods],
                         name="epaudit-preload-reports", daemon=True)
    t.start()
    return t


__all__ = ["FORMATS", "MODULES", "WRITERS", "RunResult", "preload"]
