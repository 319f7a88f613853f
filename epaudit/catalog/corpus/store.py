"""Where the generated catalog lives on disk: a manifest (JSON) and its probes (probe cache file).

Both are keyed by :func:`key`: a SHA-256 of the onnx installation, numpy's version and
the source of every module the derivation is a function of (this package,
``contract/probes.py``, ``classify/``, ``cache/``). A warm run reads
only the manifest (ids, operators, opsets, what each subject changes: ~0.3 MB of JSON,
no onnx import); a probe's arrays are read when a run builds it (usually never: the
run's own probe cache holds it after the first run, :class:`epaudit.run.runner.ProbeSet`).

Files, in the cache directory (:func:`epaudit.cache.probecache.default_cache_dir`):
``generated/manifest-<key>.json`` (written last, so its presence means the probes file
is complete) and ``generated/probes-<key>.bin`` (:class:`epaudit.cache.probecache.ProbeCache`).
Both are read only from a directory, and as files, owned by this user and writable by no
one else (:mod:`epaudit.cache.trust`); otherwise one warning, and the catalog is built in
memory for the run and not stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from ...cache.probecache import FORMAT as _CACHE_FORMAT
from ...cache.probecache import ProbeCache, _onnx_install, _read_regular, default_cache_dir

#: Bump when the manifest's form changes.
MANIFEST_FORMAT = 2
#: Largest manifest read, bytes.
MAX_MANIFEST = 32 * 1024 * 1024
_MANIFEST_FILE = re.compile(r"manifest-[0-9a-f]{64}\.json")
#: What happens instead when the store is not trusted.
_UNTRUSTED = "the generated catalog is built now and not stored"
_SOURCES = ("catalog/corpus", "contract/probes.py", "classify", "cache")


def key() -> str:
    """The store's key, 64 hex digits (see the module docstring)."""
    h = hashlib.sha256()
    h.update(f"manifest {MANIFEST_FORMAT}\ncache {_CACHE_FORMAT}\nnumpy {np.__version__}\n"
             f"{_onnx_install()}\n{_ort_install()}\n".encode())
    root = Path(__file__).resolve().parents[2]
    for name in _SOURCES:
        path = root / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _ort_install() -> str:
    """The installed onnxruntime's native library (path, size, mtime), without importing it:
    the CPU EP's registry decides which type variants are made (:mod:`.types`)."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return "onnxruntime: none"
    capi = Path(list(spec.submodule_search_locations)[0]) / "capi"
    libs = sorted(capi.glob("onnxruntime_pybind11_state*")) if capi.is_dir() else []
    return "onnxruntime: " + ";".join(f"{p} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in libs)


def folder(cache_dir=None) -> Path | None:
    """``<cache>/generated``, or ``None`` without a cache directory."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return None if root is None else root / "generated"


def manifest_path(cache_dir=None, k: str | None = None) -> Path | None:
    """The manifest file of key ``k`` (default :func:`key`)."""
    d = folder(cache_dir)
    return None if d is None else d / f"manifest-{k or key()}.json"


def read_manifest(cache_dir=None, k: str | None = None) -> dict | None:
    """The manifest (``{"key", "onnx", "features": [entry], "drops", "examples", ...}``) or
    ``None`` when there is none of this key or it is unreadable. Never raises."""
    from ...cache.trust import trusted_dir

    path = manifest_path(cache_dir, k)
    if path is None or not trusted_dir(path.parent, _UNTRUSTED):
        return None
    data = _read_regular(path, MAX_MANIFEST, _UNTRUSTED)
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or doc.get("key") != (k or key()):
        return None
    try:  # both files in use: neither prune (this store's, the probe cache's) takes them
        os.utime(probes(cache_dir, k).path)
        os.utime(path)
    except OSError:  # the probe file is gone (pruned by another install): build again
        return None
    return doc


def probes(cache_dir=None, k: str | None = None) -> ProbeCache:
    """The probe file of key ``k`` (:class:`epaudit.cache.probecache.ProbeCache`)."""
    d = folder(cache_dir)
    return ProbeCache(d, k or key())


def write(built: dict, cache_dir=None, k: str | None = None) -> Path | None:
    """Store ``built`` (:func:`epaudit.catalog.corpus.build.build`'s result): the probes
    first, then the manifest. Returns the manifest path, or ``None`` when it could not be
    written (an OS error: the catalog is then rebuilt by the next run)."""
    from ...cache.probecache import decode_probe

    k = k or key()
    path = manifest_path(cache_dir, k)
    if path is None:
        return None
    if not probes(cache_dir, k).store({r["id"]: decode_probe(r["probe"]) for r in built["probes"]}):
        return None
    entries = [{f: r[f] for f in ("id", "op_type", "opset", "dtype", "changes", "case", "kind", "uses", "domain")
                if f in r} for r in built["probes"]]  # domain: ai.onnx.ml probes only
    doc = {"format": MANIFEST_FORMAT, "key": k, "features": entries, "drops": built["drops"],
           "examples": built["examples"], "cases": built["cases"], "seconds": built["seconds"],
           "drops_by_op": built.get("drops_by_op", {})}
    try:
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        return None
    prune(path.parent, path.name)
    return path


def prune(where: Path, current: str) -> list[str]:
    """Remove the stores of other keys than the manifest named ``current`` by the probe
    cache's rule (:func:`epaudit.cache.probecache.stale`: unused for a week, or beyond the
    ``KEEP_KEYS`` most recently used; a read marks a store used), each manifest with its
    probe file (the probe files alone follow the same rule when the probe cache writes
    one). Returns the keys removed; OS errors are ignored (another process may be pruning
    too)."""
    from ...cache.probecache import stale

    gone = []
    for path in stale(where, _MANIFEST_FILE, current):
        name = os.path.basename(path)
        if not name.startswith("manifest-"):
            continue
        k = name[len("manifest-"):-len(".json")]
        for f in (Path(path), where / f"probes-{k}.bin"):
            try:
                f.unlink()
            except OSError:
                pass
        gone.append(k)
    return gone
