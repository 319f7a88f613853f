"""Configurations whose reference is known to be wrong, skipped with the clause that decides.

Each entry is ``(predicate, why)``: a configuration the predicate holds for is skipped as
``known reference problem`` (counted, never run), as the generated catalog's ``known.py``
drops its probes. Every entry was measured (the numbers are in its text).
"""

from __future__ import annotations

from typing import Callable

from .config import Config


#: (predicate, why). Empty: the references the sweep found wrong were replaced by epaudit's
#: own (onnx.reference's pooling and Resize: epaudit/reference/pool.py and resize.py say
#: what was measured); an entry belongs here only when no reference can be had.
KNOWN: tuple[tuple[Callable[[Config], bool], str], ...] = ()


def known_problem(config: Config) -> str:
    """Why ``config``'s reference is known to be wrong, or ``""``."""
    for predicate, why in KNOWN:
        if predicate(config):
            return why
    return ""
