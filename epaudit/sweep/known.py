"""Configurations whose reference is known to be wrong, skipped with the clause that decides.

Each entry is ``(predicate, why)``: a configuration the predicate holds for is skipped as
``known reference problem`` (counted, never run), as the generated catalog's ``known.py``
drops its probes. Every entry was measured (the numbers are in its text).
"""

from __future__ import annotations

from typing import Callable

from .config import Config


def _topk_unsorted(config: Config) -> bool:
    return not config.domain and config.op == "TopK" and config.attrs.get("sorted") == 0


#: (predicate, why). The references the sweep found wrong were replaced by epaudit's own
#: (onnx.reference's pooling, Resize, LpNormalization, LogSoftmax, LRN and the losses:
#: epaudit/reference/pool.py, resize.py, norms.py and onnx_fixes.py say what was measured);
#: an entry belongs here only when no reference can be had.
KNOWN: tuple[tuple[Callable[[Config], bool], str], ...] = (
    # A CPU sweep read TopK sorted=0 as MISMATCH: for x = [0, 0], K = 2, ORT 1.31.1 returns
    # indices [1, 0], the evaluator [0, 1]; with sorted=0 both are right.
    (_topk_unsorted, "TopK sorted=0: the spec leaves the order of the K values undefined, "
                     "and the classifier compares element by element"),
)


def known_problem(config: Config) -> str:
    """Why ``config``'s reference is known to be wrong, or ``""``."""
    for predicate, why in KNOWN:
        if predicate(config):
            return why
    return ""
