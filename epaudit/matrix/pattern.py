"""Regular expressions that come from files, run in linear time (RE2).

``[gate] issue_pattern`` is a regular expression the matrix author writes, matched against
every ``issue`` of the matrix; an ORT-style skip-list (:mod:`epaudit.conformance.filters`) is a
file of them. With Python's backtracking ``re``, ``^(a+)+$`` against a long issue that does
not match took longer than any CI job (issue 24: ``check`` killed at 185 s, deaf to
SIGTERM while the match ran in C). These patterns are compiled with RE2 instead
(``google-re2``, the binding Google publishes with RE2 itself): an automaton without
backtracking, whose match time is linear in the text for every pattern it accepts, so no
pattern can hang the gate and none needs a time limit. A timeout (the ``regex`` package's)
would bound the hang too, but would make a verdict depend on the machine's load: a busy
runner could time a legitimate ``PROJ-123`` out and read the gap as ungoverned.

RE2 refuses what needs backtracking (backreferences ``\\1``, lookaround ``(?=…)``, atomic
groups, possessive ``++``): such a pattern is a matrix error naming the key and line, never
a silent fall back to ``re``. Everything a tracker id needs (classes, repetition, groups,
alternation, anchors, ``(?i)``) is there.
"""

from __future__ import annotations

from functools import lru_cache

#: Longest pattern accepted, characters (RE2 also bounds the compiled program's memory).
MAX_PATTERN = 1000
#: Largest RE2 program, bytes: a pattern compiling to more is refused, not truncated.
MAX_MEMORY = 8 << 20


class PatternError(ValueError):
    """A pattern RE2 cannot run; ``str()`` is why, in one line."""


@lru_cache(maxsize=256)
def compile_pattern(pattern: str):
    """``pattern`` compiled by RE2 (an object with ``fullmatch``, ``match``, ``search``).

    Raises:
        PatternError: longer than :data:`MAX_PATTERN`, not valid RE2 syntax (the
            backtracking constructs above included), or over :data:`MAX_MEMORY`.
    """
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"{len(pattern)} characters; a pattern may have at most {MAX_PATTERN}")
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own line to stderr besides ours
    options.max_mem = MAX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise PatternError(f"{why} (RE2 syntax: no backreferences, lookaround, atomic groups or "
                           "possessive repetition; epaudit matches without backtracking)") from None
    except (TypeError, ValueError) as exc:  # a NUL byte, an encoding problem
        raise PatternError(str(exc)) from None


def fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches all of ``text`` (in time linear in ``len(text)``).

    Raises:
        PatternError: see :func:`compile_pattern` (a validated matrix never raises here).
    """
    return compile_pattern(pattern).fullmatch(text) is not None
