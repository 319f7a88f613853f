"""The parsed TOML of a large matrix, kept by the digest of its text.

The shipped ``capabilities.toml`` declares every feature of the catalog (~740 KB for 3,162
features, and it grows with the catalog); ``tomllib`` takes ~0.5 s to parse it on a 2-core
machine, at the start of every ``check``, before any probe can run. The document it returns
is plain data (tables, arrays, strings, numbers, booleans, dates), so it is kept as JSON in
the cache directory (:func:`epaudit.cache.probecache.default_cache_dir`,
``matrix/toml-<sha256>.json``), keyed by a SHA-256 of :data:`FORMAT`, the Python version
(``tomllib`` is the standard library's) and the text itself: any change to the text is
another key, so a stale document is never read. Reading it back costs ~20 ms. Validation
(:mod:`.validate`) always runs on the document, cached or not.

Only texts of at least :data:`MIN_BYTES` are cached. A cache file that is missing, damaged
or unwritable only costs the parse; files of other keys beyond the :data:`KEEP` most
recently used are removed when one is written.

Trust: the document decides what the matrix declares, so it is read only from a directory
and as a file this user owns and no one else can write (:mod:`epaudit.cache.trust`, judged
on the open file); otherwise one warning, and the text is parsed now and not stored. The
directory is created ``0700`` and the file ``0600``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

#: Bump when the stored form changes.
FORMAT = 1
#: Texts shorter than this are parsed every time (a test's matrix, a small project's).
MIN_BYTES = 64 * 1024
#: Largest cached document read, bytes.
MAX_BYTES = 64 * 1024 * 1024
#: Cached documents kept (one per matrix text in use).
KEEP = 8
#: What happens instead when the cache directory or file is not trusted.
_UNTRUSTED = "the matrix is parsed now and not stored"
_TAGS = {"\0date": _dt.date.fromisoformat, "\0datetime": _dt.datetime.fromisoformat,
         "\0time": _dt.time.fromisoformat}


def _tag(x: Any) -> Any:
    if isinstance(x, _dt.datetime):
        return {"\0datetime": x.isoformat()}
    if isinstance(x, _dt.date):
        return {"\0date": x.isoformat()}
    if isinstance(x, _dt.time):
        return {"\0time": x.isoformat()}
    raise TypeError(f"{type(x).__name__} in a TOML document")


def _untag(d: dict) -> Any:
    if len(d) == 1:
        (k, v), = d.items()
        if k in _TAGS:
            return _TAGS[k](v)
    return d


def _folder() -> Path | None:
    from ..cache.probecache import default_cache_dir

    root = default_cache_dir()
    return None if root is None else root / "matrix"


def loads(text: str, parse: Callable[[str], dict]) -> dict:
    """``parse(text)`` (``tomllib.loads``), or the document a former parse of the same text
    left in the cache. Errors of ``parse`` propagate as they are."""
    if len(text) < MIN_BYTES:
        return parse(text)
    folder = _folder()
    if folder is None:
        return parse(text)
    from ..cache.trust import trusted_dir

    if not trusted_dir(folder, _UNTRUSTED):
        return parse(text)
    key = hashlib.sha256(f"epaudit toml {FORMAT}\n{sys.version}\n".encode() + text.encode("utf-8")).hexdigest()
    path = folder / f"toml-{key}.json"
    doc = _read(path)
    if doc is not None:
        return doc
    doc = parse(text)
    _write(path, doc)
    return doc


def _read(path: Path) -> dict | None:
    from ..cache.probecache import _read_regular

    data = _read_regular(path, MAX_BYTES, _UNTRUSTED)
    if data is None:
        return None
    try:
        doc = json.loads(data, object_hook=_untag)
    except (ValueError, TypeError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        os.utime(path)  # in use: the pruning of other writes leaves it alone
    except OSError:
        pass
    return doc


def _write(path: Path, doc: dict) -> None:
    tmp = None
    try:
        text = json.dumps(doc, default=_tag, separators=(",", ":"))
        from ..cache.trust import makedirs_private

        makedirs_private(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=".toml-", dir=path.parent)  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
        others = sorted((p for p in path.parent.glob("toml-*.json") if p != path),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[KEEP - 1:]:
            old.unlink()
    except (OSError, TypeError, ValueError):
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
