"""Process inspection for the reliability tests, from /proc (Linux), no psutil."""

from __future__ import annotations

import os


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return [text[: text.index(" ")]] + ["comm"] + text[text.rindex(")") + 2:].split()


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[2] != "Z"


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of ``pid`` in clock ticks, or ``None`` when it is gone."""
    st = _stat(pid)
    return None if st is None else int(st[13]) + int(st[14])


def environ_tag(pid: int, name: str = "EPAUDIT_TEST_TAG") -> str | None:
    """Value of environment variable ``name`` in ``pid``'s initial environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    for item in data.split(b"\0"):
        if item.startswith(name.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def tagged(tag_prefix: str, parent: int | None = None) -> dict[int, str]:
    """Live processes whose ``EPAUDIT_TEST_TAG`` starts with ``tag_prefix`` -> their tag,
    optionally only the children of ``parent``."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = _stat(pid)
        if st is None or st[2] == "Z" or (parent is not None and int(st[3]) != parent):
            continue
        tag = environ_tag(pid)
        if tag is not None and tag.startswith(tag_prefix):
            out[pid] = tag
    return out
