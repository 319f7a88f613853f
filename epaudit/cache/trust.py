"""Which cache files epaudit believes: the rule OpenSSH's ``StrictModes`` applies to ``~/.ssh``.

A cache file holds float64 references the classifier compares EP outputs with: whoever can
write it can make a real ``MISMATCH`` read ``PASS`` (issue 24: a probe cache owned by another
user, mode 666, its reference rewritten to what the EP really returns, turned exit 1 into
``verdict: PASS (exit 0)``; in CI, a restored cache another branch can write). A checksum
inside the file cannot help: whoever writes the file recomputes it. So, as ``sshd`` refuses an
``authorized_keys`` that someone else could have written, epaudit reads a cache directory
and a file in it only when

* it is owned by the user running epaudit (the effective uid), and
* it is not writable by its group or by others (no ``S_IWGRP``, no ``S_IWOTH``).

Anything else is ignored with one warning line on stderr (once per path and process): the
probe cache and the generated catalog are then built in memory and not stored, and the
conformance cases are generated into a private temporary directory for the run. Symbolic
links are judged by what they point to (ownership and mode of the target), checked on the
open file itself where a file is read, so a file swapped after the check is still judged.
Directories epaudit creates are made ``0700`` and its files ``0600`` whatever the umask, so
its own cache always passes.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_WARNED: set[str] = set()


def problem(st: os.stat_result, what: str = "") -> str:
    """Why a file or directory with status ``st`` is not trusted, in words; ``""`` when it is."""
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    if euid is not None and st.st_uid != euid:
        return f"{what or 'it'} is owned by uid {st.st_uid}, not by this user (uid {euid})"
    writable = [who for bit, who in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others")) if st.st_mode & bit]
    if writable:
        return f"{what or 'it'} is writable by {' and '.join(writable)} (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def path_problem(path: os.PathLike | str) -> str:
    """:func:`problem` of ``path`` (following links); ``""`` when it does not exist (nothing
    to distrust yet: it will be created private)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    return problem(st, "the directory" if stat.S_ISDIR(st.st_mode) else "the file")


def warn(path: os.PathLike | str, why: str, consequence: str) -> None:
    """One ``epaudit: warning:`` line for ``path``, the first time only (per process). Never raises."""
    key = f"{path}"
    if key in _WARNED:
        return
    _WARNED.add(key)
    from ..textenc import one_line

    try:
        sys.stderr.write(one_line(f"epaudit: warning: cache {path} is not trusted: {why}; {consequence} "
                                  "(docs/reliability.md \"Caches\")") + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # stderr closed: nowhere to say it
        pass


def trusted_dir(path: os.PathLike | str | None, consequence: str) -> bool:
    """Whether the cache directory ``path`` may be read and written (a missing one may: it
    is created private); warns once when it may not. ``None`` (no cache) is not trusted, silently."""
    if path is None:
        return False
    why = path_problem(path)
    if why:
        warn(path, why, consequence)
        return False
    return True


def makedirs_private(path: os.PathLike | str) -> None:
    """Create ``path`` and its missing parents with mode 0700 (whatever the umask).

    Raises:
        OSError: it cannot be created.
    """
    p = Path(path)
    missing = []
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)  # mkdir's mode is masked by the umask; 0700 is never widened by it, but be exact
