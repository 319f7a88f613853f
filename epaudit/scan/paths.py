"""Which files a ``scan`` reads: model files, directories of them, GenAI output folders.

* A file is scanned as it is named.
* A directory contributes every ``*.onnx`` file under it (sorted, symbolic links to
  directories not followed, so a link loop cannot make the walk endless).
* A folder holding ``genai_config.json`` (what ONNX Runtime GenAI's model builder writes)
  contributes the model files its ``model`` section names (``decoder``, ``embedding``,
  ``vision``, ``speech`` ... ``filename``), or every ``*.onnx`` when the config names none
  it can read.
* The same file named twice (or reached through a directory and by name, or through a
  link) is scanned once, under the name it was first given.

A path that does not exist is a problem line, not the end of the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator


def _genai(folder: Path) -> list[Path]:
    try:
        doc = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    out = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "filename" and isinstance(v, str) and v.endswith(".onnx"):
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc.get("model", {}) if isinstance(doc, dict) else {})
    files = []
    for name in out:
        p = folder / name
        if "/" not in name.replace("\\", "/") and p.is_file():
            files.append(p)
    return files


def _onnx_under(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        here = Path(root)
        if (here / "genai_config.json").is_file():
            named = _genai(here)
            if named:
                yield from named
                dirs[:] = []
                continue
        for f in sorted(files):
            if f.endswith(".onnx"):
                yield here / f


def expand(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(files to scan, problem lines)`` for the command-line ``paths`` (module doc)."""
    files: list[str] = []
    problems: list[str] = []
    seen: set[str] = set()

    def add(p: Path, name: str) -> None:
        try:
            real = os.path.realpath(p)
        except (OSError, ValueError):
            real = str(p)
        if real in seen:
            return
        seen.add(real)
        files.append(name)

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = list(_onnx_under(p))
            if not found:
                problems.append(f"{raw}: no .onnx file under this directory")
            for f in found:
                add(f, str(f))
        elif p.exists() or p.is_symlink():
            add(p, raw)
        else:
            problems.append(f"{raw}: no such file")
    return files, problems
