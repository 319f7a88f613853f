"""External data a model references: checked, never read, never followed out of its folder.

A tensor stored outside the ``.onnx`` file names its file with the ``location`` key of
``external_data``, relative to the model's folder (onnx ``docs/ExternalData.md``), with
optional ``offset`` and ``length`` in bytes. A location that is absolute, climbs out with
``..``, or resolves (through a symbolic link) outside the folder is refused here, before
onnxruntime is handed the model: ``scan`` reads no byte of it and ``--whole`` does not run
the model (a hostile file must not make a scan read ``/etc/shadow`` or a device). A file
that is missing or shorter than ``offset + length`` is named too: such a model cannot be
loaded, and its verdict says so instead of "would run as expected".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator


def _initializers(proto) -> Iterator:
    yield from proto.graph.initializer

    def walk(graph):
        for n in graph.node:
            for a in n.attribute:
                for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                    yield from g.initializer
                    yield from walk(g)
    yield from walk(proto.graph)


def _text(value) -> str:
    return bytes(value).decode("utf-8", "backslashreplace") if isinstance(value, (bytes, bytearray)) else value


def resolve(location: str, folder: Path) -> Path | None:
    """The file ``location`` names inside ``folder``, or ``None`` when it is absolute,
    climbs out (``..``), holds a NUL, or resolves (symbolic links followed) outside."""
    if not location or "\x00" in location or os.path.isabs(location) or location.startswith(("\\", "/")):
        return None
    parts = Path(location.replace("\\", "/")).parts
    if any(p == ".." for p in parts) or (parts and ":" in parts[0]):
        return None
    try:
        base = folder.resolve()
        target = (base / location).resolve()
        target.relative_to(base)
    except (ValueError, OSError, RuntimeError):  # outside, or a symbolic-link loop
        return None
    return target


def problems(proto, path: Path) -> tuple[str, ...]:
    """One line per external-data problem of ``proto`` (read from ``path``): a location
    outside the model's folder, a missing or non-regular file, a file shorter than a
    tensor's ``offset + length``. Empty when every tensor's bytes are where it says."""
    folder = Path(path).parent
    out: list[str] = []
    sizes: dict[str, int | None] = {}
    for t in _initializers(proto):
        if t.data_location != 1 or not len(t.external_data):
            continue
        keys = {_text(e.key): _text(e.value) for e in t.external_data}
        location = keys.get("location", "")
        target = resolve(location, folder)
        if target is None:
            line = f"external data {location!r} is outside the model's folder: not followed"
            if line not in out:
                out.append(line)
            continue
        if location not in sizes:
            sizes[location] = target.stat().st_size if target.is_file() else None
            if sizes[location] is None:
                out.append(f"external data file {location!r} is missing" if not target.exists()
                           else f"external data {location!r} is not a regular file")
        size = sizes[location]
        if size is None:
            continue
        try:
            offset, length = int(keys.get("offset", 0) or 0), keys.get("length")
            need = offset + (int(length) if length not in (None, "") else 0)
        except ValueError:
            out.append(f"external data of {_text(t.name)!r}: offset/length are not integers")
            continue
        if need > size:
            line = f"external data file {location!r} is short: {size} bytes, a tensor needs {need}"
            if not any(x.startswith(f"external data file {location!r} is short") for x in out):
                out.append(line)
    return tuple(out)
