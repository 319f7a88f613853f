"""Loading the declared capability matrix (``capabilities.toml``): file, TOML, validation.

The format is docs/matrix.md. Every problem is a :class:`~epaudit.matrix.model.MatrixError`
that names the file, the key path and the line, so the CLI can print one line and exit 2.
Feature keys may be globs (``[features."onnx.Resize.*"]``); how a cell is resolved between an
exact key and globs is :mod:`epaudit.matrix.globs` (``docs/matrix-globs-and-large-reports.md``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Iterable, Mapping

from . import doccache
from .lines import _Lines
from .model import Matrix, MatrixError
from .validate import Validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib


#: Larger matrix files are refused before reading (the shipped one is ~60 KiB).
MAX_BYTES = 8 * 1024 * 1024


# --------------------------------------------------------------------------- loading
def default_text() -> str:
    """The embedded default ``capabilities.toml`` (the repository's root copy, packaged)."""
    packaged = Path(__file__).resolve().parent.parent / "capabilities.toml"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Running from a source checkout: the wheel build copies the root file into the package.
    return (Path(__file__).resolve().parents[2] / "capabilities.toml").read_text(encoding="utf-8")


def load(path: str | os.PathLike | None = None, *, feature_ids: Iterable[str] | None = None,
         environ: Mapping[str, str] | None = None) -> Matrix:
    """Read and validate a matrix.

    Args:
        path: the TOML file; ``None`` loads the embedded default.
        feature_ids: the catalog's ids (unknown feature keys are errors); defaults to
            the whole catalog.
        environ: where ``$VAR`` in ``python`` is resolved (default ``os.environ``).

    Raises:
        MatrixError: unreadable file, TOML syntax, unknown keys, feature ids or EP
            aliases, wrong types, bad dates.
    """
    if path is None:
        name, text = "<embedded capabilities.toml>", default_text()
    else:
        name = str(path)
        try:
            p = Path(path)
            if not p.is_file():
                raise MatrixError(name, "", None, "not a regular file" if p.exists() else "cannot read: No such file or directory")
            if p.stat().st_size > MAX_BYTES:
                raise MatrixError(name, "", None, f"{p.stat().st_size} bytes: over the {MAX_BYTES // (1024 * 1024)} MiB "
                                                  "a matrix may be")
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise MatrixError(name, "", None, f"cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise MatrixError(name, "", None, f"not UTF-8 text ({exc.reason})") from None
    return parse(text, name, feature_ids=feature_ids, environ=environ)


def parse(text: str, name: str = "<matrix>", *, feature_ids: Iterable[str] | None = None,
          environ: Mapping[str, str] | None = None) -> Matrix:
    """Validate matrix text; see :func:`load`."""
    if feature_ids is None:
        from ..catalog import BY_ID

        feature_ids = BY_ID.keys()
    known_features = list(feature_ids)
    environ = os.environ if environ is None else environ
    try:
        data = doccache.loads(text, tomllib.loads)  # a large matrix's document, cached by its text
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        raise MatrixError(name, "", line, f"TOML syntax: {re.sub(r' [(]at line.*', '', msg)}") from None
    except RecursionError:  # tomllib recurses per nesting level: [[[[…]]]] exhausts the stack
        raise MatrixError(name, "", None, "TOML syntax: arrays or tables nested too deeply") from None
    v = Validator(name, _Lines(text))
    return v.matrix(data, known_features, environ)
